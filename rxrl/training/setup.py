"""What a run starts from: the algorithm, its config (defaults < tuned for the env < options <
settings), the checkpoint it resumes, its budget; the run directory; the local Ray's options.

Every check here runs before anything is started or written: a run refused leaves the
machine and the file system as they were.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping
from datetime import datetime
from operator import attrgetter
from pathlib import Path
from typing import Any

import attrs

import rxrl
from rxrl.algos import MODULES, Algorithm, get
from rxrl.algos.common import RolloutSettings, env_spaces
from rxrl.algos.configs import paths, with_settings
from rxrl.compile import compile_plan
from rxrl.training.checkpoint import CHECKPOINT, Checkpoint, check_fits, load_checkpoint
from rxrl.training.spelling import given, option

#: the backends a run can use
BACKENDS = ("ray", "rx", "reference")
#: what a run directory holds; a directory with any of these is an existing run
RUN_FILES = ("config.json", "metrics.csv", CHECKPOINT, "summary.json", "tb")
#: restarts per rollout worker by default (a killed worker process comes back)
WORKER_RESTARTS = 3


@attrs.frozen(eq=False)
class Setup:
    """A run's algorithm, config, budget (env steps from the first run's start) and the
    checkpoint it resumes (None: a new run)."""

    algo: Algorithm
    config: RolloutSettings
    total: int
    resumed: Checkpoint | None = None


def algorithm_of(algo: str | Algorithm | RolloutSettings) -> Algorithm:
    """The registered algorithm named ``algo``, or whose config class ``algo`` is an instance of."""
    if isinstance(algo, Algorithm):
        return algo
    if isinstance(algo, str):
        return get(algo)
    for cls in type(algo).__mro__:
        for name, module in MODULES.items():
            if cls.__module__ == module and get(name).config is cls:
                return get(name)
    raise ValueError(f"{type(algo).__name__} is not the config of a registered algorithm "
                     f"({', '.join(MODULES)})")


def prepare(algo: str | Algorithm | RolloutSettings, *, env: str | None = None,
            settings: Mapping[str, Any] | None = None, steps: int | None = None,
            workers: int | None = None, seed: int | None = None,
            resume: str | Path | None = None) -> Setup:
    """The run's `Setup`; ValueError (one line) for anything that does not fit.

    ``algo`` is a name (its default config, then the tuned settings for ``env``), an
    `Algorithm`, or a config instance (used as it is). ``resume`` (a run directory or a
    checkpoint file) takes the checkpoint's config, and its budget unless ``steps`` is given;
    ``settings`` (``key=value`` paths, as ``rxrl train --set``), ``workers`` and ``seed``
    override either.
    """
    spec = algorithm_of(algo)
    if steps is not None and steps < 1:
        raise ValueError(f"{option('--steps', 'steps')} must be >= 1, got {steps}")
    resumed = load_checkpoint(resume) if resume is not None else None
    # a resume without a budget of its own goes on to the interrupted run's (checkpoints from
    # before it was kept: the algorithm's default)
    kept = resumed.budget if resumed is not None else None
    total = int(steps) if steps is not None else kept or spec.default_steps
    if resumed is not None:
        if resumed.algo.name != spec.name:
            raise ValueError(f"{_resume(resume)} is a {resumed.algo.name} run, not {spec.name}")
        if env and env != resumed.config.env:
            raise ValueError(f"{_resume(resume)} trained on {resumed.config.env}, not {env}")
        config = algo if isinstance(algo, RolloutSettings) else resumed.config
        decay = getattr(config, "lr_decay_steps", None)
        if steps is not None and decay is not None and decay != steps:
            # a learning-rate schedule spans the run's budget: a longer (or shorter) --steps
            # stretches it, else the lr would be 0 for the whole extension
            config = _settings(config, {"lr_decay_steps": steps}, option("--steps", "steps"))
    elif isinstance(algo, RolloutSettings):
        config = algo if env is None else _settings(algo, {"env": env}, "option")
    else:
        name = env or spec.config().env
        config = _settings(spec.config(), {"env": name, **spec.tuned_for(name)}, "tuned setting")
        # a schedule spans the run's budget (a None schedule, as PPO's default, stays off)
        for spans in ("lr_decay_steps", *spec.budget_settings):
            if spans in paths(spec.config) and getattr(config, spans) is not None:
                config = _settings(config, {spans: total}, option("--steps", "steps"))
    flags = {"num_workers": workers, "seed": seed}
    config = _settings(config, {k: v for k, v in flags.items() if v is not None}, "option")
    config = _settings(config, dict(settings or {}), option("--set", "settings"))
    if spec.check_env is not None:  # not a single-agent gymnasium env (multi-agent)
        try:
            spec.check_env(config, resumed.learner_state if resumed is not None else None)
        except ValueError as e:
            raise ValueError(f"{_resume(resume)}: {e}" if resumed is not None else str(e)) from None
    else:
        spaces = env_spaces(config, spec.name)
        if resumed is not None:
            try:
                check_fits(resumed, config, spaces)
            except ValueError as e:
                raise ValueError(f"{_resume(resume)}: {e}") from None
    if resumed is not None:
        check_state_settings(spec, resumed, config, resume)
    if resumed is not None and total <= resumed.counters.env_steps_sampled:
        done = resumed.counters.env_steps_sampled
        if steps is None:
            raise ValueError(f"{_resume(resume)} already trained {done} env steps, its budget of "
                             f"{total}; give {option('--steps', 'steps')} above {done} to go on")
        raise ValueError(f"{given('--steps', 'steps', total)} is not more than the {done} "
                         "env steps already trained")
    return Setup(spec, config, total, resumed)


def _resume(resume: str | Path | None) -> str:
    """The resumed run as its caller named it (``--resume PATH``, ``resume='PATH'``)."""
    return given("--resume", "resume", resume)


def _settings(config: RolloutSettings, settings: Mapping[str, Any], what: str) -> RolloutSettings:
    try:
        return with_settings(config, settings)
    except ValueError as e:
        raise ValueError(f"bad {what}: {e}") from None


# ---------------------------------------------------------------------------- run directory


def run_files(path: Path) -> list[str]:
    """The run files (`RUN_FILES`) that ``path`` already holds."""
    return [name for name in RUN_FILES if (path / name).exists()]


def check_state_settings(spec: Algorithm, resumed: Checkpoint, config: RolloutSettings,
                         resume: str | Path | None) -> None:
    """Refuse, in one line naming the setting, a resume whose config changes a setting the
    checkpoint's learner state depends on (`Algorithm.state_settings`: e.g. the policy's
    activation, which loads into tensors of the same shapes and silently breaks the policy)."""
    for path in paths(spec.config):
        if not spec.depends_on(path):
            continue
        before, after = attrgetter(path)(resumed.config), attrgetter(path)(config)
        if before != after:
            raise ValueError(
                f"{_resume(resume)}: {path} is {before!r} in the checkpoint, {after!r} here; the "
                "learner state was trained with it, so a resume cannot change it (drop that "
                "setting, or start a new run)")


def check_no_run(path: Path) -> None:
    """ValueError (one line) if ``path`` holds a run (`run_files`): a new run may not write
    there. A trainer checks when it is made, and again once it has claimed the directory."""
    existing = run_files(path) if path.is_dir() else []
    if existing:
        raise ValueError(f"{given('--out', 'run_dir', path)} already holds a run "
                         f"({', '.join(existing)}): continue it with {_resume(path)}, or "
                         f"choose a new {option('--out', 'run_dir')}")


def run_dir(out: str | Path | None, setup: Setup, resume: str | Path | None = None) -> Path:
    """The run directory, checked (ValueError otherwise) but not created: the run claims (and
    makes) it when it starts (`rxrl.training.lock`), and a run that never records anything
    removes what its claim made.

    ``out`` must not hold a run already, unless it is the directory being resumed; without
    ``out`` a resumed run continues in its own directory, a new one gets
    ``runs/ALGO-ENV-sSEED-TIME``.
    """
    resume_dir = None
    if resume is not None:
        resume_dir = Path(resume)
        resume_dir = resume_dir.parent if resume_dir.is_file() else resume_dir
    if out is not None:
        path = Path(out)
        if not (resume_dir is not None and same_dir(path, resume_dir)):
            check_no_run(path)
    elif resume_dir is not None:
        path = resume_dir
    else:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        env = setup.config.env.replace(":", "_").replace("/", "_")
        # made when the run starts, with a suffix if two runs start within the same second
        path = Path("runs") / f"{setup.algo.name}-{env}-s{setup.config.seed}-{stamp}"
    check_writable(path)
    return path


def check_target_return(value: object) -> float | None:
    """``--target-return`` checked: None, or a finite number (as a float); ValueError (one
    line) for anything else. `rxrl.Trainer` and `rxrl sweep` share it."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{option('--target-return', 'target_return')} must be a finite number, "
                         f"got {value!r}")
    return float(value)


def check_writable(path: Path, parameter: str = "run_dir") -> None:
    """ValueError unless ``path`` is a writable directory or can be made one (its nearest
    existing ancestor is a writable directory). ``parameter`` is the Python name of the
    ``--out`` it was given as."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise ValueError(f"cannot write to {given('--out', parameter, path)}: Not a directory "
                         f"({probe} is a file)")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write to {given('--out', parameter, path)}: Permission denied "
                         f"({probe})")


def same_dir(a: Path, b: Path) -> bool:
    """Whether two paths name the same directory."""
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def write_json(path: Path, doc: Any) -> None:
    """Write ``doc`` as JSON atomically (a reader sees the old file or the new one)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, path)


# ------------------------------------------------------------------------------- local Ray


#: ``ray.init`` options for the local Ray that a run starts: no dashboard, no log noise
#: (which also makes it a lean Ray: `rxrl.backends.ray.connect.is_lean`)
RAY_INIT = {"include_dashboard": False, "logging_level": logging.ERROR, "log_to_driver": False}
#: modules every worker process of that Ray imports as soon as it has started, before it is
#: given an actor: Ray starts (one per CPU) while ``ray.init`` is still running, so the
#: imports overlap with the rest of the start-up instead of following the actor's creation.
#: First `rxrl.backends.ray.preload`, whose import makes the process register Ray's serializer
#: add-ons only for the packages it has imported (else, at its first task, it imports pyarrow
#: and pydantic where installed: ~0.2 s and 15-30 MB in every process, for objects a run
#: never sends: `rxrl.backends.ray.addons`)
WORKER_PRELOAD = ("rxrl.backends.ray.preload", "torch", "gymnasium", "rxrl.backends.ray.host",
                  "rxrl.algos")
#: the same for a plan whose actors are mostly torch-free rollout workers (factories whose
#: ``torch_free`` is true: `rxrl.rl.workers.rollout.RolloutWorkerFactory`, PPO's and A2C's, and
#: `rxrl.algos.qlearning.common.QWorkerFactory`, DQN's and Ape-X's with an MLP): torch would cost
#: every worker process ~0.9 s of CPU and ~180 MB that only the learner's needs (it imports
#: torch itself; DQN's replay shards do without it)
TORCH_FREE_PRELOAD = ("rxrl.backends.ray.preload", "gymnasium", "rxrl.backends.ray.host",
                      "rxrl.rl.workers.rollout", "rxrl.rl.workers.reply")
#: The niceness of the local Ray's worker processes (Ray's default: 15). The actors are the
#: training job itself (learner and rollout workers), not background work: at nice 15 any other
#: busy process on the machine takes their CPU first, and a run of ``rxrl train`` went slower
#: than the same work in one process at nice 0 (docs/design-notes.md, "The local Ray").
WORKER_NICENESS = 0


def ray_init_options(plan: rxrl.Plan[Any]) -> dict[str, Any]:
    """``ray.init`` options for the local Ray that runs ``plan``: `RAY_INIT`, the
    `WORKER_PRELOAD` modules (`TORCH_FREE_PRELOAD` where most actors are torch-free rollout
    workers), a worker process started in advance for every actor and none besides, and no
    task events.

    Ray starts one worker process per CPU as soon as its raylet is up, at most one per core
    at a time; an actor beyond those waits for a worker started only when the run asks for
    it (PPO's 2 rollout workers and learner on 2 cores: the third actor's process started
    ~2 s after the others). So the local Ray gets as many CPUs as the plan has actors (or as
    its groups ask for, ``with_options(num_cpus=...)``, if more), and starts that many workers
    at once. Not one per core: Ray keeps a started worker process as long as there are no more
    of them than CPUs, and one that no actor takes holds its preloaded modules (60-200 MB) for
    the whole run. The CPUs count processes here, not the run's parallelism: an actor without
    options reserves no CPU once it is created.

    Task events (the state API's and ``ray.timeline``'s record of every task, kept by the GCS
    for the last 100,000 tasks, ~100 MB on a DQN run) are not recorded: nothing in a run reads
    them.

    The actors also run at the driver's priority (`WORKER_NICENESS`), not at Ray's default of
    nice 15.
    """
    groups = [g for g in compile_plan(plan.node).groups if not g.driver_hosted]
    actors = sum(group.size for group in groups)
    torch_free = sum(group.size for group in groups if getattr(group.make, "torch_free", False))
    asked = sum(group.size * float(group.options.get("num_cpus") or 0) for group in groups)
    cpus = max(actors, math.ceil(asked), 1)
    preload = TORCH_FREE_PRELOAD if torch_free > actors - torch_free else WORKER_PRELOAD
    return {**RAY_INIT, "num_cpus": cpus,
            "_system_config": {"preload_python_modules": list(preload),
                               "worker_maximum_startup_concurrency": cpus,
                               "worker_niceness": WORKER_NICENESS,
                               "task_events_report_interval_ms": 0}}


__all__ = ["BACKENDS", "RAY_INIT", "RUN_FILES", "TORCH_FREE_PRELOAD", "WORKER_NICENESS", "WORKER_PRELOAD",
           "WORKER_RESTARTS", "Setup", "algorithm_of", "check_state_settings", "check_target_return",
           "check_no_run", "check_writable", "prepare", "ray_init_options", "run_dir", "run_files",
           "same_dir", "write_json"]
