"""Stable-Baselines3's DQN with the matched settings.

SB3 steps all `num_workers * envs_per_worker` environments in its own process (`DummyVecEnv`).
How the settings map: `train_freq=2` vector steps of 2 envs with `gradient_steps=1` is one
optimizer step per 4 env steps (intensity 32 with batches of 128); SB3's
`target_update_interval` counts env steps, so it gets `4 * target_update_interval`; `n_steps`
is SB3's n-step return. SB3's DQN is not double DQN (its target is `max_a Q_target`), its
loss is smooth L1 (Huber, delta 1), its gradients are clipped at `max_grad_norm` (10) and
its epsilon decays over `exploration_fraction` of `total_timesteps` (the budget).

Run alone: ``python bench/peer_sb3_dqn.py --budget-steps 50000 --seed 0``.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import attrs
import dqn_settings as d
import numpy as np
import ppo_settings as s


def run(m: d.Matched, seed: int, budget_steps: int, stop_at_target: bool = False) -> s.RunRecord:
    """Train until `budget_steps` env steps were sampled; return the record of the run."""
    import torch

    sb3: Any = s.optional("stable_baselines3")
    env_util: Any = s.optional("stable_baselines3.common.env_util")
    callbacks: Any = s.optional("stable_baselines3.common.callbacks")
    record = s.RunRecord("sb3", seed, budget_steps, attrs.asdict(m),
                         versions=s.versions(["stable_baselines3", "torch", "gymnasium", "numpy"]))
    torch.set_num_threads(1)
    env = env_util.make_vec_env(m.env, n_envs=m.num_envs, seed=seed)
    steps_per_update = round(m.env_steps_per_update)  # 4 env steps
    model = sb3.DQN(
        "MlpPolicy", env, learning_rate=m.lr, buffer_size=m.capacity, learning_starts=m.learning_starts,
        batch_size=m.batch_size, gamma=m.gamma, train_freq=steps_per_update // m.num_envs, gradient_steps=1,
        n_steps=m.n_step, target_update_interval=m.target_update_interval * steps_per_update,
        exploration_fraction=m.exploration_fraction * m.exploration_steps / budget_steps,
        exploration_initial_eps=m.epsilon_start, exploration_final_eps=m.epsilon_end,
        max_grad_norm=m.max_grad_norm, policy_kwargs={"net_arch": list(m.hidden)}, seed=seed, device="cpu",
        verbose=0)
    train = model.train
    start = time.perf_counter()
    trained = [0]

    def timed_train(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return train(*args, **kwargs)
        finally:
            record.learner_s += time.perf_counter() - began
            trained[0] += m.batch_size

    model.train = timed_train
    record.setup_s = s.since_start()

    def on_step(_self: Any) -> bool:
        steps = model.num_timesteps
        if steps % 512 < m.num_envs:  # a curve point every 512 env steps
            returns = [float(e["r"]) for e in model.ep_info_buffer]
            mean = float(np.mean(returns)) if returns else math.nan
            record.add(time.perf_counter() - start, steps, trained[0], mean)
        return not d.done(record, stop_at_target)

    progress = type("Progress", (callbacks.BaseCallback,), {"_on_step": on_step})
    model.learn(total_timesteps=budget_steps, callback=progress())
    env.close()
    return record


def main(argv: list[str]) -> None:
    """Run once and print the summary line (and write JSON with ``--out``)."""
    d.runner_main(argv, __doc__ or "", lambda a, m: run(m, a.seed, a.budget_steps, a.stop_at_target))


if __name__ == "__main__":
    main(sys.argv[1:])
