"""CPU time of every process of a command's run, Ray's included: where a run's cores go.

Runs the command, samples every 0.3 s the cumulative CPU time (user + system) of its process
tree and of every Ray process started after it (Ray's actors are children of the raylet, not
of the driver), and prints each process's last reading, largest first, with the run's wall
time. A process's CPU after its last sample is missed (at most 0.3 s of it).

    python bench/cpu_tree.py python bench/rxrl_dqn.py --budget-steps 40000 --seed 0
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from typing import Any

import ppo_settings as s


def main(argv: list[str]) -> None:
    """Run ``argv``, then print its processes' CPU seconds."""
    if not argv:
        raise SystemExit(__doc__)
    psutil: Any = s.optional("psutil")
    began = time.time()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    root = psutil.Process(child.pid)
    seen: dict[int, tuple[str, float]] = {}
    while child.poll() is None:
        procs = {root}
        with contextlib.suppress(psutil.Error):
            procs.update(root.children(recursive=True))
        for p in psutil.process_iter():
            try:
                if p.create_time() >= began - 1 and "ray" in " ".join(p.cmdline()):
                    procs.add(p)
            except psutil.Error:
                continue
        for p in procs:
            try:
                cpu = p.cpu_times()
                seen[p.pid] = (" ".join(p.cmdline())[:80] or p.name(), cpu.user + cpu.system)
            except psutil.Error:
                continue
        time.sleep(0.3)
    assert child.stdout is not None
    print(child.stdout.read()[-800:])
    for pid, (name, cpu) in sorted(seen.items(), key=lambda kv: -kv[1][1]):
        print(f"{cpu:7.1f} s  {pid:>7}  {name}")
    print(f"CPU {sum(c for _, c in seen.values()):.1f} s in {time.time() - began:.1f} s of wall time")


if __name__ == "__main__":
    main(sys.argv[1:])
