"""Replay micro-benchmark: us per `add` of 512 transitions and per `sample(256)` from 100k.

rxrl's `ReplayBuffer` and `PrioritizedReplayBuffer` beside Stable-Baselines3's
`ReplayBuffer` (SB3 has no prioritized buffer), on CartPole-shaped transitions (4 float32
obs, one discrete action). SB3 stores `[buffer_size, n_envs]` and adds one row per env per
call, so it is measured twice: `n_envs=512` (one call adds 512 rows; 195 x 512 = 99,840
slots) and `n_envs=1` (512 calls, as a one-env DQN adds them), with its defaults
(`handle_timeout_termination=True`, samples returned as torch tensors; rxrl returns numpy
arrays, which its learner wraps without a copy). The systems alternate within each round,
so load on a shared machine hits them alike; figures are medians over rounds.

Needs SB3 (benchmark-only: ``pip install stable-baselines3 torch==2.13.0``):
``python bench/replay_micro.py [--rounds 15]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
from ppo_settings import optional

from rxrl.rl import PrioritizedReplayBuffer, ReplayBuffer, TransitionBatch

CAPACITY, ADD_ROWS, SAMPLE_ROWS = 100_000, 512, 256
OBS = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
ACTIONS: gym.spaces.Discrete[np.int64] = gym.spaces.Discrete(2)
#: (add 512 transitions, sample 256) of one buffer
Case = tuple[Callable[[], object], Callable[[], object]]


def transitions(n: int, rng: np.random.Generator) -> TransitionBatch:
    """`n` random CartPole-shaped transitions."""
    obs = rng.normal(size=(n, 4)).astype(np.float32)
    return TransitionBatch(
        obs=obs,
        actions=rng.integers(0, 2, n),
        rewards=np.ones(n, np.float32),
        next_obs=obs + 0.01,
        terminateds=rng.random(n) < 0.02,
        truncateds=np.zeros(n, np.bool_),
    )


def rxrl_cases(rng: np.random.Generator) -> dict[str, Case]:
    """`{name: (add 512, sample 256)}` for rxrl's buffers, filled to capacity."""
    batch = transitions(ADD_ROWS, rng)
    cases: dict[str, Case] = {}
    for name, buffer in (
        ("rxrl ReplayBuffer", ReplayBuffer(CAPACITY, seed=0)),
        ("rxrl PrioritizedReplayBuffer", PrioritizedReplayBuffer(CAPACITY, seed=0)),
    ):
        for _ in range(CAPACITY // ADD_ROWS + 1):
            buffer.add(batch)
        if isinstance(buffer, PrioritizedReplayBuffer):  # realistic, uneven priorities
            ids = np.arange(buffer.num_added - CAPACITY, buffer.num_added)
            buffer.update_priorities(ids, rng.exponential(size=CAPACITY))
        cases[name] = (partial(buffer.add, batch), partial(buffer.sample, SAMPLE_ROWS))
    return cases


def sb3_cases(rng: np.random.Generator) -> dict[str, Case]:
    """The same for SB3's ReplayBuffer, with 512 envs (one call) and with 1 env (512 calls)."""
    buffers: Any = optional("stable_baselines3.common.buffers")  # benchmark-only, untyped
    SB3Buffer = buffers.ReplayBuffer

    cases: dict[str, Case] = {}
    for n_envs in (ADD_ROWS, 1):
        buffer = SB3Buffer(CAPACITY // n_envs, OBS, ACTIONS, device="cpu", n_envs=n_envs)
        obs = rng.normal(size=(n_envs, 4)).astype(np.float32)
        act, rew, done = (
            np.zeros((n_envs, 1), np.int64),
            np.ones(n_envs, np.float32),
            np.zeros(n_envs, np.float32),
        )
        infos: list[dict[str, object]] = [{} for _ in range(n_envs)]
        calls = ADD_ROWS // n_envs

        add = partial(_sb3_add, buffer, calls, (obs, act, rew, done, infos))
        for _ in range(CAPACITY // ADD_ROWS + 1):
            add()
        cases[f"SB3 ReplayBuffer n_envs={n_envs}"] = (add, partial(buffer.sample, SAMPLE_ROWS))
    return cases


def _sb3_add(buffer: Any, calls: int, row: tuple[Any, ...]) -> None:
    obs, act, rew, done, infos = row
    for _ in range(calls):
        buffer.add(obs, obs, act, rew, done, infos)


def per_call_us(fn: Callable[[], object], calls: int) -> float:
    """Mean us per call of `calls` back-to-back calls."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def main(argv: list[str]) -> None:
    """Alternate the systems for `--rounds` rounds; print the medians and ratios to rxrl's."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--calls", type=int, default=200, help="calls per measurement")
    a = p.parse_args(argv)
    rng = np.random.default_rng(0)
    cases = {**rxrl_cases(rng), **sb3_cases(rng)}
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(a.rounds):
        for name, (add, sample) in cases.items():
            add_calls = max(a.calls // 20, 5) if "n_envs=1" in name else a.calls  # 512 SB3 calls each
            times.setdefault((name, "add"), []).append(per_call_us(add, add_calls))
            times.setdefault((name, "sample"), []).append(per_call_us(sample, a.calls))
    med = {k: statistics.median(v) for k, v in times.items()}
    base = "rxrl ReplayBuffer"
    print(
        f"{'buffer (100k transitions, CartPole-shaped)':<36} {'add 512 (us)':>13} {'x rxrl':>7} "
        f"{'sample 256 (us)':>16} {'x rxrl':>7}"
    )
    for name in cases:
        add_us, sample_us = med[(name, "add")], med[(name, "sample")]
        print(
            f"{name:<36} {add_us:>13.1f} {add_us / med[(base, 'add')]:>7.2f} {sample_us:>16.1f} "
            f"{sample_us / med[(base, 'sample')]:>7.2f}"
        )
    print(f"medians of {a.rounds} alternating rounds; 'x rxrl' is relative to {base}")


if __name__ == "__main__":
    main(sys.argv[1:])
