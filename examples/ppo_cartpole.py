"""PPO on CartPole-v1: the algorithm's plan, run until the mean return reaches 475.

Run it: ``python examples/ppo_cartpole.py`` (add ``ray`` or ``rx`` to pick a backend).
"""

from __future__ import annotations

import sys

import rxrl
from rxrl.algos.on_policy.ppo import PPO, plan


def main(backend: str = "reference", steps: int = 100_000, target: float = 475.0) -> float:
    """Train until ``target`` or ``steps`` env steps; return the last mean episode return."""
    config = PPO(env="CartPole-v1", num_workers=2, seed=0)
    print(rxrl.show(plan(config)))
    with rxrl.run(plan(config), backend) as run:
        for m in run:
            print(f"{m.env_steps_sampled:>7,} env steps   return {m.episode_return_mean:6.1f}")
            if m.episode_return_mean >= target or m.env_steps_sampled >= steps:
                return m.episode_return_mean
    raise AssertionError("unreachable: a PPO plan never ends")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "reference")
