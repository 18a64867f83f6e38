"""Learning smoke tests: each algorithm, default settings, learns CartPole on a small budget.

The full targets (PPO >= 475 within 100k steps, ...) are measured by bench/learning.py; these
are the CI-sized versions, on the reference backend, where a run is a function of its seed.
"""

from __future__ import annotations

import pytest

import rxrl
from rxrl.algos import get

#: algorithm -> (env steps, mean return over the last 100 episodes that it must reach)
BUDGETS = {"ppo": (30_000, 150.0), "a2c": (40_000, 100.0), "a3c": (40_000, 100.0),
           "impala": (20_000, 100.0), "appo": (20_000, 100.0)}


@pytest.mark.parametrize("name", sorted(BUDGETS))
def test_learns_cartpole_on_a_small_budget(name: str) -> None:
    algo = get(name)
    steps, threshold = BUDGETS[name]
    best = 0.0
    with rxrl.run(algo.plan(algo.config(env="CartPole-v1", seed=0), None)) as run:
        for m in run:
            best = max(best, m.episode_return_mean)
            if best >= threshold or m.env_steps_sampled >= steps:
                break
    assert best >= threshold, f"{name}: mean return {best:.1f} after {m.env_steps_sampled} env steps"
