"""Stable-Baselines3's PPO with the matched settings.

SB3 has no rollout workers: it steps all `num_workers * envs_per_worker` environments in
its own process (`DummyVecEnv`; `SubprocVecEnv` would start one process per environment,
16 on a 2-core machine). Its value loss is `vf_coef * MSE`, so it gets `vf_coef / 2`.
Sampling vs learning time comes from SB3's rollout callbacks.

Run alone: ``python bench/peer_sb3.py --budget-steps 50000 --seed 0``.
"""

from __future__ import annotations

import collections
import math
import sys
import time
from typing import Any

import attrs
import numpy as np
import ppo_settings as s


def run(m: s.Matched, seed: int, budget_steps: int) -> s.RunRecord:
    """Train until `budget_steps` env steps were sampled; return the record of the run."""
    import torch

    sb3: Any = s.optional("stable_baselines3")
    env_util: Any = s.optional("stable_baselines3.common.env_util")
    callbacks: Any = s.optional("stable_baselines3.common.callbacks")
    record = s.RunRecord("sb3", seed, budget_steps, attrs.asdict(m),
                         versions=s.versions(["stable_baselines3", "torch", "gymnasium", "numpy"]))
    torch.set_num_threads(1)
    env = env_util.make_vec_env(m.env, n_envs=m.num_envs, seed=seed)
    model = sb3.PPO(
        "MlpPolicy", env, learning_rate=m.lr, n_steps=m.fragment_length, batch_size=m.minibatch_size,
        n_epochs=m.num_epochs, gamma=m.gamma, gae_lambda=m.lam, clip_range=m.clip_coef, clip_range_vf=None,
        normalize_advantage=True, ent_coef=m.ent_coef, vf_coef=m.vf_coef / 2, max_grad_norm=m.max_grad_norm,
        policy_kwargs={"net_arch": {"pi": list(m.hidden), "vf": list(m.hidden)},
                       "activation_fn": torch.nn.Tanh if m.activation == "tanh" else torch.nn.ReLU},
        seed=seed, device="cpu", verbose=0,
    )
    record.setup_s = s.since_start()
    clock = _Clock(record, m.train_batch)

    def on_step(_self: Any) -> bool:
        return record.budget_s is None or time.perf_counter() - clock.start < record.budget_s

    # SB3's callback hooks; the class is built with type() since BaseCallback is untyped here
    progress = type("Progress", (callbacks.BaseCallback,), {
        "_on_rollout_start": lambda _self: clock.rollout_start(model.ep_info_buffer),
        "_on_rollout_end": lambda _self: clock.rollout_end(),
        "_on_step": on_step,
    })
    model.learn(total_timesteps=budget_steps, callback=progress())
    clock.rollout_start(model.ep_info_buffer)  # closes the last update
    record.running()  # notes a stop by the time budget
    env.close()
    return record


class _Clock:
    """Splits SB3's `learn` into rollout and update phases by the callback times."""

    def __init__(self, record: s.RunRecord, per_iteration: int) -> None:
        self.record, self.per_iteration = record, per_iteration
        self.start = time.perf_counter()
        self.updates = 0  # iterations whose update finished
        self.update_started: float | None = None

    def rollout_start(self, episodes: Any) -> None:
        now = time.perf_counter()
        if self.update_started is not None:  # the update of the previous rollout just ended
            self.record.learner_s += now - self.update_started
            self.updates += 1
            returns = collections.deque((float(e["r"]) for e in episodes), maxlen=100)
            mean = float(np.mean(returns)) if returns else math.nan
            steps = self.updates * self.per_iteration
            self.record.add(now - self.start, steps, steps, mean)
            self.update_started = None

    def rollout_end(self) -> None:
        self.update_started = time.perf_counter()


def main(argv: list[str]) -> None:
    """Run once and print the summary line (and write JSON with ``--out``)."""
    s.runner_main(argv, __doc__ or "", lambda args, m: run(m, args.seed, args.budget_steps))


if __name__ == "__main__":
    main(sys.argv[1:])
