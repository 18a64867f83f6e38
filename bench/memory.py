"""Peak memory of a 2-worker CartPole run of rxrl against the single-process peers, per process.

Runs each system in a subprocess of its own, one after another, rotating the order from
repetition to repetition (A/B alternation), while a thread samples every process of the run's
process tree — the driver, Ray's GCS, raylet and agents, the worker processes — every
``--interval-s``. Two figures per run, each its peak over the run:

- **PSS**, summed over the tree (a shared page split between the processes that map it), the
  figure issue 23 sets its target on. A page the run shares with a process outside it is split
  with that process too, so a run's PSS falls while neighbours map the same libraries (another
  session's torch, another Ray's binaries): by up to ~70 MB for rxrl's PPO here. Compare
  systems measured in the same invocation.
- **resident, each page once**: the distinct physical pages that the tree maps (/proc/PID/pagemap;
  Linux, as root), whoever else maps them: what the run holds were it alone. Independent of
  the neighbours; for a one-process peer it is its RSS.

Reports, per system, the medians over repetitions, the ratios rxrl / peer, and the processes
at the PSS peak of the median run, each with PSS and USS (its private pages) and labelled by
role (driver; gcs_server, raylet, the dashboard and runtime-env agents; ``ray::Host`` for a
process that hosts a plan actor, with the methods it was seen running — rollout workers
``next``/``effect``, DQN's replay ``apply_both``+``next``, its learner ``apply_both``;
``ray::IDLE`` for one that hosts nothing; ``+torch`` once it maps libtorch). Writes
``bench/results/memory_<tag>.json`` (every run, every process at its peak and each process's
own peak).

    python bench/memory.py --reps 3 --tag after     # ~25 min on 2 cores: PPO and DQN, 100k steps

Run it with the interpreter of a venv made as a user makes one, not the bench's: every Ray
process imports ``requests``, which loads ``chardet`` where it is installed (~12 MB a process),
and only bench/requirements.txt's ``rl_zoo3`` installs it (docs/design-notes.md). So::

    python3 -m venv /tmp/memvenv && /tmp/memvenv/bin/pip install torch==2.13.0
    /tmp/memvenv/bin/pip install -e . stable-baselines3 psutil torch==2.13.0
    /tmp/memvenv/bin/python bench/memory.py --systems rxrl-dqn,cleanrl-dqn,sb3-dqn --reps 2

(``--baseline-python .venv/bin/python`` beside it measures the same rxrl in the bench's venv.)
    python bench/memory.py --reps 3 --baseline-python /tmp/base/bin/python --tag issue23
    python bench/memory.py --imports numpy,gymnasium,ray,torch   # what each import adds

Systems (``--systems``): ``rxrl-ppo`` and ``rxrl-dqn`` are ``rxrl train ppo|dqn --env
CartPole-v1 --steps N --seed S --out DIR`` as a user types it (default Ray backend, 2 rollout
workers, checkpoints and loggers as by default: DQN's replay, and so its learner, on the driver
since ``replay_placement`` and ``learner_placement`` are ``auto``); ``rxrl-dqn-actors`` the DQN
command with ``--set replay_placement=actor`` (learner and replay each in a process, DQN's
default before 2026-12-06);
``rxrl-dqn-driver`` with ``--set learner_placement=driver --set replay_placement=actor`` (the
learner in the driver's process), ``rxrl-dqn-lean`` with ``--set learner_placement=driver --set
replay_placement=driver`` (learner and replay in the driver's process: the driver and the two
workers), ``rxrl-dqn-rx`` the DQN command on the rx backend (one process, a thread per actor);
``cleanrl-ppo`` (bench/cleanrl_ppo.py), ``sb3-ppo`` (bench/peer_sb3.py), ``cleanrl-dqn``
(bench/peer_cleanrl_dqn.py: bench/cleanrl_dqn.py with the matched settings) and ``sb3-dqn``
(bench/peer_sb3_dqn.py) sample 2 x 8 (PPO) or 2 x 1 (DQN) envs in one process. Every system
trains the same env-step budget (``--budget-steps``; none stops at 475), so each holds what it
holds at the end of a full run (DQN's replay included).

``--baseline-python`` runs every rxrl system a second time, as ``<system>@baseline``, with
another interpreter and the rxrl that interpreter imports — e.g. a commit before a change:
``git archive <commit> rxrl | tar -x -C /tmp/base-src``, ``python -m venv --without-pip
/tmp/base``, and a ``.pth`` file in /tmp/base's site-packages naming /tmp/base-src and this
venv's site-packages (and a copy of this venv's ``bin/rxrl`` with /tmp/base/bin/python as its
interpreter) — so that before and after alternate under the same neighbours. Runs start in
a temporary directory, not the checkout: Ray puts a driver's working directory on its
workers' import path, which must find the interpreter's own rxrl.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import ppo_settings as s

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
MB = 2**20
PAGE = os.sysconf("SC_PAGE_SIZE")
#: a pagemap entry's frame number
FRAME = np.uint64((1 << 55) - 1)
#: mappings at least this large are counted by their file's allocated blocks (`resident_bytes`)
BIG = 2**30

#: the part of a command line that says which of Ray's processes it is (first match wins)
RAY_ROLES = (("gcs_server", "gcs_server"), ("/raylet", "raylet"),
             ("dashboard/agent.py", "dashboard agent"), ("runtime_env/agent/main.py", "runtime env agent"),
             ("log_monitor.py", "log monitor"), ("autoscaler/_private/monitor.py", "autoscaler monitor"),
             ("dashboard/dashboard.py", "dashboard (API server)"), ("default_worker.py", "ray::IDLE"))


def systems(budget_steps: int, seed: int, workdir: Path, workers: int = 2,
            python: str = sys.executable) -> dict[str, list[str]]:
    """system -> its command line (each trains ``budget_steps`` env steps of CartPole-v1; rxrl
    with ``workers`` rollout workers, the peers sample as many envs in their one process), run
    by the interpreter ``python`` (and its ``rxrl`` command)."""
    rxrl = str(Path(python).with_name("rxrl"))
    py, steps = python, ["--budget-steps", str(budget_steps), "--seed", str(seed)]

    def train(algo: str) -> list[str]:
        return [rxrl, "train", algo, "--env", "CartPole-v1", "--steps", str(budget_steps),
                "--seed", str(seed), "--out", str(workdir / f"{algo}-{time.monotonic_ns()}"),
                *([] if workers == 2 else ["--workers", str(workers)])]

    return {"rxrl-ppo": train("ppo"), "cleanrl-ppo": [py, str(BENCH / "cleanrl_ppo.py"), *steps],
            "sb3-ppo": [py, str(BENCH / "peer_sb3.py"), *steps],
            "rxrl-dqn": train("dqn"),
            "rxrl-dqn-driver": [*train("dqn"), "--set", "learner_placement=driver",
                                "--set", "replay_placement=actor"],
            "rxrl-dqn-actors": [*train("dqn"), "--set", "replay_placement=actor"],
            "rxrl-dqn-lean": [*train("dqn"), "--set", "learner_placement=driver",
                              "--set", "replay_placement=driver"],
            "rxrl-dqn-rx": [*train("dqn"), "--backend", "rx"],
            "cleanrl-dqn": [py, str(BENCH / "peer_cleanrl_dqn.py"), *steps],
            "sb3-dqn": [py, str(BENCH / "peer_sb3_dqn.py"), *steps]}


def resident_bytes(pids: list[int]) -> int:
    """The bytes of the distinct physical pages that processes ``pids`` map, each page once,
    however many of them map it and whatever other processes on the machine map it too: what
    the processes would hold were they alone (Linux as root: /proc/PID/pagemap's frames).

    PSS splits a page shared with a process outside the run, so a run's PSS falls while a
    neighbour maps the same libraries (another run's torch, another Ray's raylet binary): ~70 MB
    on rxrl's PPO here. This figure does not. A mapping larger than `BIG` (the object store's
    file, reserved address space) counts as the file's allocated blocks, once per file.
    """
    frames: list[npt.NDArray[np.uint64]] = []
    files: dict[tuple[int, int], int] = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/pagemap", "rb") as pagemap:
                for line in maps:
                    parts = line.split()
                    start, end = (int(x, 16) for x in parts[0].split("-"))
                    if parts[1].startswith("---"):  # no access: nothing resident
                        continue
                    if end - start > BIG and len(parts) > 5:
                        with contextlib.suppress(OSError):
                            blocks = os.stat(f"/proc/{pid}/map_files/{parts[0]}").st_blocks
                            files[(int(parts[3].split(":")[0], 16), int(parts[4]))] = blocks * 512
                        continue
                    pagemap.seek(start // PAGE * 8)
                    entries = np.frombuffer(pagemap.read((end - start) // PAGE * 8), dtype=np.uint64)
                    frames.append(entries[entries >> np.uint64(63) == 1] & FRAME)
        except OSError:  # ended meanwhile, or not Linux/root: counted as far as it could be read
            continue
    seen = np.concatenate(frames) if frames else np.zeros(0, np.uint64)
    if not len(seen):
        return sum(files.values())
    present = np.zeros(int(seen.max()) + 1, dtype=np.bool_)
    present[seen] = True
    return int(present.sum()) * PAGE + sum(files.values())


def rxrl_origin() -> str:
    """Where this interpreter (and so every run) imports rxrl from."""
    spec = importlib.util.find_spec("rxrl")
    return str(Path(spec.origin).parent) if spec is not None and spec.origin else "not installed"


def role(proc: Any, root_pid: int) -> str:
    """What ``proc`` is in the run: driver, one of Ray's processes, or a worker process."""
    if proc.pid == root_pid:
        return "driver"
    argv = proc.cmdline()
    cmdline = " ".join(argv)
    if cmdline.startswith("ray::"):  # a worker process that holds an actor: its title is the actor's
        return cmdline.split()[0]
    return next((name for key, name in RAY_ROLES if key in cmdline), Path(argv[0]).name if argv else "?")


class ProcessMemory(threading.Thread):
    """Samples the PSS of process ``pid`` and of each of its descendants until `stop()`: the
    peak of the sum, the processes at that peak, and each process's own peak; and, every
    ``resident_every`` samples, the tree's distinct resident pages (`resident_bytes`)."""

    def __init__(self, pid: int, interval_s: float, resident_every: int = 4) -> None:
        super().__init__(daemon=True)
        self.resident_every = resident_every
        self.peak_resident = 0
        self.psutil: Any = s.optional("psutil")
        self.root: Any = self.psutil.Process(pid)
        self.interval_s = interval_s
        self.peak_pss = 0
        self.at_peak: list[dict[str, Any]] = []
        self.own_peaks: dict[int, dict[str, Any]] = {}
        self.samples = 0
        self.failures: list[str] = []
        #: pid -> the methods its process was seen running (an actor's process title)
        self.calls: dict[int, set[str]] = {}
        self._torch: set[int] = set()
        self._stopped = threading.Event()

    def _maps_torch(self, pid: int) -> bool:
        """Whether process ``pid`` has imported torch (maps libtorch) by now."""
        if pid not in self._torch:
            try:
                with open(f"/proc/{pid}/maps") as maps:
                    if "libtorch_cpu" in maps.read():
                        self._torch.add(pid)
            except OSError:
                return False
        return pid in self._torch

    def run(self) -> None:
        while not self._stopped.is_set():
            try:
                self.sample()
            except Exception as e:  # a process caught half-way through its exit: count it, go on
                self.failures.append(f"{type(e).__name__}: {e}")
            self._stopped.wait(self.interval_s)

    def sample(self) -> None:
        """One sample of the tree (processes that vanish meanwhile are skipped)."""
        errors = (self.psutil.NoSuchProcess, self.psutil.AccessDenied, self.psutil.ZombieProcess)
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except errors:
            return
        rows = []
        for proc in procs:
            try:
                info = proc.memory_full_info()
                name = role(proc, self.root.pid)
                rows.append({"pid": proc.pid, "role": name.split(".")[0], "pss_mb": info.pss / MB,
                             "rss_mb": info.rss / MB, "uss_mb": info.uss / MB,
                             "torch": self._maps_torch(proc.pid)})
                if "." in name:  # a worker process's title names the method it runs
                    self.calls.setdefault(proc.pid, set()).add(name.split(".", 1)[1])
            except errors:
                continue
        if self.samples % self.resident_every == 0:  # ~0.1 s of CPU on a DQN run: less often
            self.peak_resident = max(self.peak_resident, resident_bytes([r["pid"] for r in rows]))
        self.samples += 1
        for row in rows:
            own = self.own_peaks.get(row["pid"])
            if own is None or row["pss_mb"] > own["pss_mb"]:
                self.own_peaks[row["pid"]] = row
        total = sum(row["pss_mb"] for row in rows)
        if total * MB > self.peak_pss:
            self.peak_pss, self.at_peak = int(total * MB), rows

    def stop(self) -> None:
        """Stop sampling and wait for the thread."""
        self._stopped.set()
        self.join()


def run_one(system: str, argv: list[str], interval_s: float, timeout_s: float,
            workdir: Path, extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    """One run of ``system`` in a subprocess (with ``extra_env`` in its environment), its
    process tree sampled; its memory record."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | (extra_env or {})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BENCH), env.get("PYTHONPATH")) if p)
    log = workdir / f"{system}.log"
    start, load = time.monotonic(), os.getloadavg()[0]
    with log.open("w") as out:
        # not the checkout: Ray hands a driver's working directory to its workers' import path,
        # which must find the rxrl this interpreter imports (--help: measuring another rxrl)
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=workdir,
                                stdin=subprocess.DEVNULL)
        memory = ProcessMemory(proc.pid, interval_s)
        memory.start()
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        finally:
            memory.stop()
    at_peak = sorted(memory.at_peak, key=lambda r: -r["pss_mb"])
    record = {"system": system, "rc": rc, "wall_s": round(time.monotonic() - start, 1),
              "peak_pss_mb": round(memory.peak_pss / MB, 1), "processes": len(at_peak),
              "peak_resident_mb": round(memory.peak_resident / MB, 1),
              "samples": memory.samples, "failed_samples": memory.failures[:5], "load_before": round(load, 1),
              "at_peak": [{k: round(v, 1) if isinstance(v, float) else v for k, v in r.items()}
                          for r in at_peak],
              "calls": {str(pid): sorted(names) for pid, names in memory.calls.items()},
              "own_peaks": sorted(({k: round(v, 1) if isinstance(v, float) else v for k, v in r.items()}
                                   for r in memory.own_peaks.values()), key=lambda r: -r["pss_mb"])}
    if rc != 0:
        record["log_tail"] = log.read_text()[-2000:]
    return record


def label(row: dict[str, Any], calls: dict[str, list[str]]) -> str:
    """A process's role, with torch if it has imported torch, and the methods it ran."""
    names = calls.get(str(row["pid"]), [])
    return (str(row["role"]) + (" +torch" if row["torch"] else "")
            + (f" [{', '.join(names[:4])}{', ...' if len(names) > 4 else ''}]" if names else ""))


def medians(runs: list[dict[str, Any]], key: str) -> dict[str, float]:
    """system -> the median of ``key`` over its successful runs."""
    names = dict.fromkeys(r["system"] for r in runs if r["rc"] == 0)
    return {n: statistics.median(r[key] for r in runs if r["system"] == n and r["rc"] == 0) for n in names}


def report(runs: list[dict[str, Any]]) -> None:
    """Print the medians, the ratios to the peers and each system's processes at its peak."""
    pss, resident = medians(runs, "peak_pss_mb"), medians(runs, "peak_resident_mb")
    print("\nsystem | runs | peak PSS (MB), median | each run | peak resident, each page once (MB) "
          "| processes")
    for n in pss:
        mine = [r for r in runs if r["system"] == n]
        each = ", ".join(f"{r['peak_pss_mb']:,.0f}" for r in mine)
        print(f"{n} | {len(mine)} | {pss[n]:,.0f} | {each} | {resident[n]:,.0f} | "
              f"{max(r['processes'] for r in mine)}")
    for n in pss:
        if n.startswith("rxrl-"):
            algo = n.split("-")[1].split("@")[0]
            for peer in (f"cleanrl-{algo}", f"sb3-{algo}"):
                if peer in pss:
                    print(f"{n} / {peer}: PSS {pss[n] / pss[peer]:.2f}, resident "
                          f"{resident[n] / resident[peer]:.2f}")
    for n in pss:
        run = min((r for r in runs if r["system"] == n and r["rc"] == 0),
                  key=lambda r: abs(r["peak_pss_mb"] - pss[n]))
        print(f"\n{n}, the processes at the peak of its median run ({run['peak_pss_mb']:,.0f} MB): "
              "PSS, USS (MB)")
        for row in run["at_peak"]:
            print(f"  {label(row, run['calls']):<60} {row['pss_mb']:7.1f} {row['uss_mb']:7.1f}")


#: imports one module after another in a fresh process, printing its memory after each
IMPORTS = """
import importlib, json, sys, psutil
me = psutil.Process()
def mb():
    info = me.memory_full_info()
    return info.uss / 2**20, info.pss / 2**20
rows = [("(interpreter)", *mb(), len(sys.modules))]
for name in sys.argv[1:]:
    importlib.import_module(name)
    rows.append((name, *mb(), len(sys.modules)))
print(json.dumps(rows))
"""


def import_costs(modules: list[str]) -> None:
    """Print what importing each of ``modules`` (in turn, in one fresh process) adds to its USS
    and PSS: what a process pays for an import it may not need."""
    done = subprocess.run([sys.executable, "-c", IMPORTS, *modules], capture_output=True, text=True,
                          check=True, cwd=tempfile.gettempdir(), timeout=300)
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    print("import | USS after (MB) | + USS | PSS after (MB) | + PSS | modules")
    for before, (name, uss, pss, count) in zip([rows[0], *rows], rows, strict=False):
        print(f"{name} | {uss:.1f} | {uss - before[1]:+.1f} | {pss:.1f} | {pss - before[2]:+.1f} | {count}")


def main(argv: list[str]) -> None:
    """Parse the command line, run the systems alternately, report, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", default="rxrl-ppo,cleanrl-ppo,sb3-ppo,rxrl-dqn,cleanrl-dqn,sb3-dqn")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--budget-steps", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--interval-s", type=float, default=0.25, help="between samples of the tree")
    parser.add_argument("--timeout-s", type=float, default=600, help="per run")
    parser.add_argument("--tag", default="now", help="results go to bench/results/memory_<tag>.json")
    parser.add_argument("--workers", type=int, default=2, help="rxrl's rollout workers")
    parser.add_argument("--baseline-python", metavar="PYTHON",
                        help="also run each rxrl system with this interpreter (another rxrl: "
                             "system@baseline), alternating with the others (module docstring)")
    parser.add_argument("--imports", metavar="MODULE,...",
                        help="instead: what each import adds to a fresh process, in this order")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for rxrl's runs only (e.g. a Ray setting, "
                             "RAY_task_events_report_interval_ms=0), to measure what it would save")
    args = parser.parse_args(argv)
    if args.imports:
        import_costs(args.imports.split(","))
        return
    chosen = [n for n in args.systems.split(",") if n]
    if args.baseline_python:  # each rxrl system beside its baseline, then the peers
        chosen = [m for n in chosen for m in ([n, f"{n}@baseline"] if n.startswith("rxrl") else [n])]
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="rxrl-memory-") as tmp:
        commands = systems(args.budget_steps, args.seed, Path(tmp))
        unknown = sorted({n.removesuffix("@baseline") for n in chosen} - set(commands))
        if unknown:
            raise SystemExit(f"unknown system(s) {unknown}; choose from {sorted(commands)}")
        for rep in range(args.reps):
            order = chosen[rep % len(chosen):] + chosen[:rep % len(chosen)]  # rotate: A/B alternation
            for name in order:
                base, _, baseline = name.partition("@")
                python = args.baseline_python if baseline else sys.executable
                argv_ = systems(args.budget_steps, args.seed, Path(tmp), args.workers, python)[base]
                extra = dict(a.split("=", 1) for a in args.env) if name.startswith("rxrl") else {}
                record = run_one(name, argv_, args.interval_s, args.timeout_s, Path(tmp), extra)
                record["rep"] = rep
                runs.append(record)
                print(f"[{time.strftime('%H:%M:%S')}] {name} rep {rep}: peak PSS "
                      f"{record['peak_pss_mb']:,.0f} MB, resident {record['peak_resident_mb']:,.0f} MB, "
                      f"{record['processes']} processes, "
                      f"{record['wall_s']} s, rc {record['rc']}", flush=True)
    report(runs)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"memory_{args.tag}.json"
    path.write_text(json.dumps({"command": " ".join(["python", "bench/memory.py", *argv]),
                                "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
                                "commit": s.rxrl_revision(), "rxrl": rxrl_origin(),
                                "budget_steps": args.budget_steps, "runs": runs},
                               indent=1) + "\n")
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
