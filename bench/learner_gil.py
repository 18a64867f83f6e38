"""The DQN learner's step on a thread of its own CPU while another thread holds the GIL part of the time.

A learner on a thread of the driver (DQN's ``learner_placement="auto"`` on MinAtar) has a CPU of
its own (``learner_cores=1``) but shares the interpreter with the driver's routing. This times
`DQNLearner.train` (the matched MinAtar settings, as ``bench/dqn_step.py --net minatar``) on a
thread pinned to the last CPU while the main thread, on the first, runs Python for ``--chunk-ms``
then sleeps, busy ``--duty`` of the time. ``--load cpu`` instead runs a torch and numpy loop in
another process on the first CPU (no shared interpreter): what the other CPU's work costs the
learner's CPU by itself. Linux only (CPU affinity).

    python bench/learner_gil.py --duty 0 0.35 0.6 [--chunk-ms 0.3] [--switch-interval-s 5e-5]
    python bench/learner_gil.py --load cpu
    python bench/learner_gil.py --step scripted --duty 0 0.35

``--step eager scripted`` times `DQNLearner.train` with its step as ~50 torch ops
(``DQNLearner.scripted = False``) and as one TorchScript call (the default;
`rxrl.rl.learners.dqn_script`, the same bits), alternated at each duty: how much of the
step's time under a busy main thread is its returns into Python.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time

import dqn_step
import numpy as np
import torch

LOAD = """
import numpy as np, torch
torch.set_num_threads(1)
net = torch.nn.Sequential(torch.nn.Conv2d(4, 16, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                          torch.nn.Linear(1024, 128), torch.nn.ReLU(), torch.nn.Linear(128, 3))
x, buf, rng = torch.rand(1, 4, 10, 10), np.zeros((100000, 4, 10, 10), np.uint8), np.random.default_rng(0)
while True:
    with torch.no_grad():
        net(x)
    buf[rng.integers(0, 100000, 32)].sum()
"""


def time_steps(cpu: int, passes: int = 5, step: str = "eager") -> list[float]:
    """Milliseconds a step, per pass of 64 batches, on a thread pinned to ``cpu``."""
    os.sched_setaffinity(threading.get_native_id(), {cpu})
    learner, batches = dqn_step.learner_and_batches("minatar", np.random.default_rng(0))
    learner.scripted = step == "scripted"
    for b in batches[:20]:
        learner.train(b)
    out = []
    for _ in range(passes):
        began = time.perf_counter()
        for b in batches:
            learner.train(b)
        out.append((time.perf_counter() - began) / len(batches) * 1e3)
    return out


def with_busy_main_thread(duty: float, chunk_ms: float, cpus: tuple[int, int], step: str = "eager"
                          ) -> list[float]:
    """`time_steps` on a thread while this (main) thread runs Python ``duty`` of the time."""
    got: list[float] = []
    worker = threading.Thread(target=lambda: got.extend(time_steps(cpus[1], step=step)))
    os.sched_setaffinity(0, {cpus[0]})
    worker.start()
    x = 0
    while worker.is_alive():
        if duty <= 0:
            time.sleep(0.01)
            continue
        began = time.perf_counter()
        while time.perf_counter() - began < chunk_ms / 1e3:
            x += 1
        time.sleep(chunk_ms / 1e3 * (1 - duty) / duty)
    worker.join()
    return got


def with_cpu_load(cpus: tuple[int, int]) -> list[float]:
    """`time_steps` alone, then with a torch and numpy loop in another process on the other CPU."""
    load = subprocess.Popen(["taskset", "-c", str(cpus[0]), sys.executable, "-c", LOAD])
    try:
        time.sleep(2)
        return time_steps(cpus[1])
    finally:
        load.kill()
        load.wait()


def main(argv: list[str]) -> None:
    """Print the step's best and median milliseconds per setting."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--duty", type=float, nargs="*", default=[0.0, 0.35, 0.6])
    parser.add_argument("--chunk-ms", type=float, default=0.3)
    parser.add_argument("--switch-interval-s", type=float, default=None)
    parser.add_argument("--load", choices=["gil", "cpu"], default="gil")
    parser.add_argument("--step", choices=["eager", "scripted"], nargs="*", default=["eager"],
                        help="the learner's step as torch ops, or as one TorchScript call (the default)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.switch_interval_s is not None:
        sys.setswitchinterval(args.switch_interval_s)
    available = sorted(os.sched_getaffinity(0))
    if len(available) < 2:
        raise SystemExit("needs 2 CPUs")
    cpus = (available[0], available[-1])
    if args.load == "cpu":
        alone = time_steps(cpus[1])
        loaded = with_cpu_load(cpus)
        for name, ms in (("other CPU idle", alone), ("other CPU loaded (another process)", loaded)):
            print(f"{name}: best {min(ms):.3f} ms, median {sorted(ms)[len(ms) // 2]:.3f} ms a step")
        return
    for duty in args.duty:
        for step in args.step:  # alternated at each duty
            ms = with_busy_main_thread(duty, args.chunk_ms, cpus, step)
            print(f"{step} step, main thread busy {duty:.0%} in {args.chunk_ms} ms chunks: "
                  f"best {min(ms):.3f} ms, median {sorted(ms)[len(ms) // 2]:.3f} ms a step", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
