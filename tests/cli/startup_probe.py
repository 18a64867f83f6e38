"""Run by tests/cli/test_startup.py in a fresh process: start the local Ray as ``rxrl train``
does, for a plan with one actor more than this machine has cores, and print what its actor
processes saw (JSON on the last line of stdout): whether each one's process was started before
the run asked for the actors (a pre-started worker) and whether torch was imported there
before the actor was constructed (this module never imports torch, so only the preload can
have imported it), and its niceness, and which of the packages Ray's serializer add-ons are
for (`ADDON_PACKAGES`) its process and the driver's had imported once they had serialized;
with ``--torch-free``, for actors whose factory is declared torch-free (whose processes must
not preload torch); with ``--actors N``, for N actors (default: one more than this machine
has cores). Linux only: processes are read from /proc.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import ray

import rxrl
from rxrl import ops
from rxrl.backends.ray.connect import connect

#: the packages that Ray's serializer add-ons import in every process unless rxrl's local Ray
#: keeps them to the processes that use them (`rxrl.backends.ray.addons`)
ADDON_PACKAGES = ("pyarrow", "pydantic")


def started(pid: int | str = "self") -> float:
    """When process ``pid`` started (seconds since the epoch, to a clock tick)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22, counted after the name
    boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                if line.startswith("btime"))
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def descendants(root: int) -> list[str]:
    """The command lines of every process below ``root``."""
    parent: dict[int, int] = {}
    commands: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            commands[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):  # ended meanwhile
            continue

    def below(pid: int) -> bool:
        seen = set()
        while pid in parent and pid not in seen:
            seen.add(pid)
            pid = parent[pid]
            if pid == root:
                return True
        return False

    return [command for pid, command in commands.items() if below(pid)]


class Probe:
    """An actor that notes what its process had done before it was constructed."""

    def __init__(self) -> None:
        self.seen = {"torch_imported": "torch" in sys.modules,
                     "process_started": started(), "niceness": os.nice(0)}

    def report(self) -> dict[str, float | bool | int | list[str]]:
        return {**self.seen, "addons": [m for m in ADDON_PACKAGES if m in sys.modules]}


class TorchFreeProbes:
    """``index -> Probe``, declared torch-free as `rxrl.rl.workers.rollout.RolloutWorkerFactory` is."""

    torch_free = True

    def __call__(self, index: int) -> Probe:
        return Probe()


def main() -> None:
    from rxrl.training.setup import ray_init_options  # imports torch: only here, in the driver

    n = int(sys.argv[sys.argv.index("--actors") + 1]) if "--actors" in sys.argv else (os.cpu_count() or 1) + 1
    group = rxrl.indexed_actors(TorchFreeProbes(), n) if "--torch-free" in sys.argv else rxrl.actors(Probe, n)
    plan = rxrl.from_actors(group, Probe.report) | ops.barrier() | ops.take(1)
    options = ray_init_options(plan)
    connect("local", options)
    time.sleep(0.1)  # a worker Ray starts now, on request, is started after `requested`
    requested = time.time()
    reports = next(iter(rxrl.run(plan, "ray", start_timeout_s=120)))
    commands = descendants(os.getpid())
    print(json.dumps({"actors": n, "num_cpus": options["num_cpus"], "requested": requested,
                      "driver_niceness": os.nice(0),
                      "driver_addons": [m for m in ADDON_PACKAGES if m in sys.modules],
                      "reports": reports, "commands": commands}))
    ray.shutdown()


if __name__ == "__main__":
    main()
