"""rxrl's learners' Adam (`rxrl.rl.learners.adam.Adam`) against ``torch.optim.Adam``, side by side.

Times one optimizer step over PPO CartPole's default policy (two 64x64 tanh MLPs) with fixed
gradients, in rounds that alternate the two optimizers, and prints each one's median time per
step and the ratio (that their parameters agree bit for bit is a test: tests/rl/test_adam.py).
Also the CPU
seconds of a fresh process's first ``torch.optim.Adam`` construction and step (it imports
``torch._dynamo``) against `Adam`'s. Run: ``python bench/adam_step.py [--rounds 7] [--steps 1000]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import gymnasium as gym
import torch

from rxrl.rl.learners.adam import Adam
from rxrl.rl.models.policy import make_policy

FIRST_CALL = """
import time, torch
from rxrl.rl.learners.adam import Adam
from rxrl.rl.models.policy import make_policy
import gymnasium as gym
policy = make_policy(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), None, 0)
for p in policy.parameters():
    p.grad = torch.ones_like(p)
start = time.process_time()
optimizer = {kind}(policy.parameters(), lr=1e-3, eps=1e-5)
optimizer.step()
print(time.process_time() - start)
"""


def per_step(kind: str, steps: int) -> float:
    """Seconds per step of a fresh optimizer of ``kind`` (``rxrl`` or ``torch``)."""
    policy = make_policy(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), None, 0)
    for p in policy.parameters():
        p.grad = torch.full_like(p, 0.01)
    params = list(policy.parameters())
    optimizer = (Adam(params, lr=1e-3, eps=1e-5) if kind == "rxrl"
                 else torch.optim.Adam(params, lr=1e-3, eps=1e-5))
    optimizer.step()
    start = time.perf_counter()
    for _ in range(steps):
        optimizer.step()
    return (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    times: dict[str, list[float]] = {"rxrl": [], "torch": []}
    for r in range(args.rounds):
        for kind in ("rxrl", "torch") if r % 2 == 0 else ("torch", "rxrl"):
            times[kind].append(per_step(kind, args.steps))
    ours, theirs = statistics.median(times["rxrl"]), statistics.median(times["torch"])
    print(f"per step: rxrl Adam {ours * 1e6:.0f} us, torch.optim.Adam {theirs * 1e6:.0f} us "
          f"(rxrl / torch {ours / theirs:.2f}; medians of {args.rounds} rounds of {args.steps})")
    first = {}
    for kind, name in (("rxrl", "Adam"), ("torch", "torch.optim.Adam")):
        done = subprocess.run([sys.executable, "-c", FIRST_CALL.format(kind=name)],
                              capture_output=True, text=True, check=True, timeout=300)
        first[kind] = float(done.stdout.strip().splitlines()[-1])
    print(f"first construction and step, fresh process: rxrl Adam {first['rxrl']:.2f} s of CPU, "
          f"torch.optim.Adam {first['torch']:.2f} s")


if __name__ == "__main__":
    main()
