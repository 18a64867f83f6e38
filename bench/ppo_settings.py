"""The PPO CartPole-v1 settings every benchmarked system is given, and the record each run writes.

One `Matched` value is translated into each system's own vocabulary (`rxrl.rl.PPOConfig`,
RLlib's `PPOConfig`, SB3's `PPO(...)` arguments, the CleanRL-style loop's constants) by the
runner of that system; where a system words a setting differently the runner says how it
maps. A run writes one `RunRecord` as JSON; `ppo_cartpole.py` reads them back.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import math
import os
import platform
import subprocess
import time
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import attrs

if TYPE_CHECKING:
    from attrs import AttrsInstance

#: a settings value (an attrs instance) of any benchmark
S = TypeVar("S", bound="AttrsInstance")

#: the return CartPole-v1 is "solved" at (mean of the last 100 episodes)
TARGET_RETURN = 475.0


@attrs.frozen
class Matched:
    """PPO hyper-parameters shared by every system: rxrl's PPO defaults (`rxrl.algos.on_policy.ppo`).

    That is CleanRL's PPO with lr 2e-3, 10 epochs and no entropy bonus; with lr 1e-3 and 4
    epochs no system reached 475 within 120k steps in trials here, with these ~60k.

    `vf_coef` is in rxrl/CleanRL form, `vf_coef * 0.5 * E[(v - R)^2]`: SB3 and RLlib weight
    the plain mean squared error, so they get `vf_coef / 2`. Value clipping is off
    everywhere (the four systems clip the value function in four different ways).
    One iteration samples `train_batch` = workers x envs x fragment transitions.
    """

    hidden: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    num_workers: int = 2
    envs_per_worker: int = 8
    fragment_length: int = 64
    num_epochs: int = 10
    minibatch_size: int = 256
    lr: float = 2e-3
    gamma: float = 0.99
    lam: float = 0.95
    clip_coef: float = 0.2
    vf_coef: float = 0.5
    ent_coef: float = 0.0
    max_grad_norm: float = 0.5
    env: str = "CartPole-v1"

    @property
    def train_batch(self) -> int:
        """Transitions per training iteration."""
        return self.num_workers * self.envs_per_worker * self.fragment_length

    @property
    def num_envs(self) -> int:
        """Environments in all, for the single-process systems."""
        return self.num_workers * self.envs_per_worker


@attrs.define
class Point:
    """One training iteration on the learning curve."""

    time_s: float  # since the first sample was requested
    env_steps_sampled: int
    env_steps_trained: int
    return_mean: float  # mean return of the last 100 finished episodes (NaN before the first)


#: the training wall-time budget of every run in this process (``--budget-s``; None: unlimited)
TIME_BUDGET_S: float | None = None


@attrs.define
class RunRecord:
    """What one run of one system reports (all times in seconds)."""

    system: str
    seed: int
    budget_steps: int
    settings: dict[str, Any]
    budget_s: float | None = attrs.Factory(lambda: TIME_BUDGET_S)
    setup_s: float = 0.0  # from process start (imports, Ray start, actors, env) to the first sample
    train_s: float = 0.0  # from the first sample request to the end of the last iteration
    learner_s: float = 0.0  # time spent in SGD (the learner's own timer)
    env_steps_sampled: int = 0
    env_steps_trained: int = 0
    curve: list[Point] = attrs.Factory(list)
    notes: list[str] = attrs.Factory(list)
    versions: dict[str, str] = attrs.Factory(dict)
    # filled in by ppo_cartpole.py, which watches the run's process tree
    peak_rss_mb: float = math.nan  # sum of RSS over the tree (counts shared pages repeatedly)
    peak_pss_mb: float = math.nan  # sum of PSS (shared pages split): the honest total
    processes: int = 0  # most processes in the tree at once

    def add(self, time_s: float, sampled: int, trained: int, return_mean: float) -> None:
        """Append an iteration and keep the totals up to date."""
        self.curve.append(Point(time_s, sampled, trained, return_mean))
        self.train_s, self.env_steps_sampled, self.env_steps_trained = time_s, sampled, trained

    def running(self) -> bool:
        """True while neither budget (env steps, training wall time) is spent."""
        if self.env_steps_sampled >= self.budget_steps:
            return False
        if self.budget_s is not None and self.train_s >= self.budget_s:
            if not any(n.startswith("stopped by the time budget") for n in self.notes):
                self.notes.append(f"stopped by the time budget ({self.budget_s:g} s)")
            return False
        return True

    def first_at(self, target: float = TARGET_RETURN) -> Point | None:
        """The first iteration whose mean return reached `target`, if any."""
        return next((p for p in self.curve if not math.isnan(p.return_mean) and p.return_mean >= target),
                    None)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (NaN returns become null)."""
        out = attrs.asdict(self)
        for key in ("peak_rss_mb", "peak_pss_mb"):
            if math.isnan(out[key]):
                out[key] = None
        for point in out["curve"]:
            if math.isnan(point["return_mean"]):
                point["return_mean"] = None
        return out

    @staticmethod
    def from_json(data: dict[str, Any]) -> RunRecord:
        """Inverse of `to_json`."""
        fields = dict(data)
        curve = [Point(p["time_s"], p["env_steps_sampled"], p["env_steps_trained"],
                       math.nan if p["return_mean"] is None else p["return_mean"]) for p in data["curve"]]
        fields["curve"] = curve
        for key in ("peak_rss_mb", "peak_pss_mb"):
            fields[key] = math.nan if fields.get(key) is None else fields[key]
        return RunRecord(**fields)

    def write(self, path: Path) -> None:
        """Write the record as JSON to `path`."""
        path.write_text(json.dumps(self.to_json(), indent=1))


def optional(module: str) -> Any:
    """Import a benchmark-only dependency (see bench/requirements.txt), untyped on purpose.

    The peers and psutil/matplotlib are not rxrl dependencies: CI's mypy has no stubs for them,
    so the bench code reaches them through `Any`.
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise SystemExit(f"{module} is missing: pip install -r bench/requirements.txt torch==2.13.0") from e


def since_start() -> float:
    """Seconds since this process started (by the OS's clock, so imports count too)."""
    start: float = optional("psutil").Process().create_time()
    return time.time() - start


def rxrl_revision() -> str:
    """The commit of the rxrl checkout, with "+dirty" if rxrl/ has uncommitted changes (the
    tree is shared: what a run imported is what was on disk when it started)."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "rxrl"], capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def versions(packages: Iterable[str]) -> dict[str, str]:
    """Installed versions of `packages` (missing ones are left out), with Python's and rxrl's commit."""
    found = {"python": platform.python_version(), "rxrl_git": rxrl_revision()}
    for name in packages:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[name] = metadata.version(name)
    return found


def clean_ray_env() -> None:
    """Make sure `ray.init` starts a private local Ray instead of joining someone else's."""
    os.environ.pop("RAY_ADDRESS", None)


#: `ray.init` arguments of every Ray-based run: a private local instance with this
#: machine's CPUs, no dashboard, quiet logs, and its workers at the driver's priority (Ray's
#: default is nice 15: on a machine shared with other work that measures the priority, not
#: the system, against the one-process peers, which run at nice 0; `rxrl train` does the same)
RAY_INIT: dict[str, Any] = {
    "address": "local",
    "include_dashboard": False,
    "log_to_driver": False,
    "configure_logging": False,
    "_system_config": {"worker_niceness": 0},
}


def run_runner(argv: list[str], label: str, out: Path, timeout_s: float) -> RunRecord | None:
    """Run one system's runner (``argv``: interpreter, script and its arguments, which must
    make it write its record to ``out``) in a subprocess of its own, with bench/ on its import
    path and no ``RAY_ADDRESS``; print its summary line under ``label`` with the load before
    it; return its record, or None if it failed or timed out (every side-by-side driver's step)."""
    bench = Path(__file__).resolve().parent
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(bench), env.get("PYTHONPATH")) if p)
    load = os.getloadavg()[0]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env,
                              cwd=bench.parent, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        print(f"  {label}: timed out", flush=True)
        return None
    line = next((x for x in reversed(done.stdout.splitlines()) if " steps in " in x), "")
    print(f"  [{time.strftime('%H:%M:%S')}] {label}: {line or done.stderr[-800:]} (load {load:.1f})",
          flush=True)
    if done.returncode != 0 or not out.exists():
        return None
    record = RunRecord.from_json(json.loads(out.read_text()))
    record.notes.append(f"1-min load average {load:.1f} before")
    return record


def override(m: S, assignments: Iterable[str]) -> S:
    """``m`` (any system-neutral settings value: `Matched`, ``MatchedIMPALA``, ``MatchedAtari``...)
    with ``name=value`` assignments applied, each parsed as its field's type: comma-separated
    integers for a tuple, true/false for a flag, ``none`` for an optional field."""
    fields = [f.name for f in attrs.fields(type(m))]
    changes: dict[str, Any] = {}
    for assignment in assignments:
        name, sep, text = assignment.partition("=")
        if not sep or name not in fields:
            raise SystemExit(f"--set {assignment!r}: expected name=value with name one of {fields}")
        current = getattr(m, name)
        if text.lower() == "none":
            changes[name] = None
        elif isinstance(current, tuple):
            changes[name] = tuple(int(x) for x in text.split(","))
        elif isinstance(current, bool):
            changes[name] = text.lower() in ("1", "true", "yes")
        else:
            changes[name] = float(text) if current is None else type(current)(text)
    evolved: S = attrs.evolve(cast(Any, m), **changes)  # the plugin cannot type a TypeVar's evolve
    return evolved


def runner_main(argv: list[str], doc: str, run: Callable[[argparse.Namespace, Matched], RunRecord],
                add_arguments: Callable[[argparse.ArgumentParser], object] | None = None) -> None:
    """The command line of one system's runner: run once, print a line, write JSON with --out."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--budget-steps", type=int, default=100_000)
    parser.add_argument("--budget-s", type=float, help="also stop after this much training wall time")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="override a matched setting, e.g. --set lr=1e-3")
    parser.add_argument("--out", type=Path, help="write the run's JSON record here")
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)
    global TIME_BUDGET_S
    TIME_BUDGET_S = args.budget_s
    record = run(args, override(Matched(), args.set))
    hit = record.first_at()
    rate = record.env_steps_sampled / record.train_s if record.train_s else math.nan
    print(f"{record.system}: {record.env_steps_sampled} steps in {record.train_s:.1f} s ({rate:,.0f}/s), "
          f"learner {record.learner_s:.1f} s, setup {record.setup_s:.1f} s, 475 at "
          f"{'-' if hit is None else f'{hit.time_s:.1f} s / {hit.env_steps_sampled} steps'}", flush=True)
    if args.out:
        record.write(args.out)
