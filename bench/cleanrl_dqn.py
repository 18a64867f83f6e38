"""Single-process DQN in the style of CleanRL's dqn.py: the loop a user writes by hand.

One process, one gymnasium vector env of `num_envs` copies (the sampling of the rxrl
loop's 2 workers x 1 env), an MLP Q-network, a numpy ring buffer, and the settings of
`rxrl.rl.DQNConfig`'s defaults (the `Args` below; `main` checks they still match when rxrl
is importable). What differs from CleanRL's file, all to match rxrl's learner: Huber loss
(CleanRL: MSE), double DQN targets, global gradient clipping, a training intensity
(replayed per sampled transitions, held exactly as in bench/dqn_loop.py) instead of
`train_frequency`, the target copied every N optimizer steps (CleanRL: every N env
steps), SAME_STEP autoreset with the real final observation stored for truncated *and*
terminated steps, n-step returns (a window of the last n steps per env, flushed at
episode ends), and `torch.set_num_threads(1)`. No prioritized replay.

Run alone: ``nice -n 10 python bench/cleanrl_dqn.py --seed 0``; it prints one JSON record.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from gymnasium.vector import AutoresetMode
from torch import nn


@dataclasses.dataclass(frozen=True)
class Args:
    """Hyper-parameters: `rxrl.rl.DQNConfig()`'s defaults, in CleanRL's flat form."""

    env_id: str = "CartPole-v1"
    seed: int = 0
    total_timesteps: int = 100_000
    num_envs: int = 2
    learning_rate: float = 1e-3
    buffer_size: int = 100_000
    gamma: float = 0.99
    n_step: int = 3
    target_network_frequency: int = 100  # optimizer steps
    batch_size: int = 128
    start_e: float = 1.0
    end_e: float = 0.05
    exploration_fraction: float = 0.1
    learning_starts: int = 1_000
    training_intensity: float = 32.0
    max_grad_norm: float = 10.0
    hidden: tuple[int, ...] = (128, 128)


def matches_rxrl(args: Args) -> list[str]:
    """The settings that differ from `rxrl.rl.DQNConfig()` (empty if rxrl is not installed)."""
    try:
        from rxrl.rl import DQNConfig
    except ImportError:
        return []
    c = DQNConfig()
    pairs = {
        "learning_rate": c.lr,
        "n_step": c.n_step,
        "buffer_size": c.replay.capacity,
        "gamma": c.gamma,
        "target_network_frequency": c.target_update_interval,
        "batch_size": c.replay.batch_size,
        "start_e": c.epsilon_start,
        "end_e": c.epsilon_end,
        "exploration_fraction": c.exploration_fraction,
        "learning_starts": c.replay.learning_starts,
        "training_intensity": c.training_intensity,
        "max_grad_norm": c.max_grad_norm,
        "hidden": c.q_net.hidden_sizes,
    }
    return [
        f"{k}: {getattr(args, k)} here, {v} in DQNConfig" for k, v in pairs.items() if getattr(args, k) != v
    ]


class QNetwork(nn.Module):
    """An MLP from observations to one Q-value per action (ReLU, PyTorch's default init)."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = obs_dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        self.network = nn.Sequential(*layers, nn.Linear(width, n_actions))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Q-values `[B, n_actions]`."""
        q: torch.Tensor = self.network(x)
        return q


def linear_schedule(start_e: float, end_e: float, duration: int, t: int) -> float:
    """CleanRL's epsilon: linear from `start_e` to `end_e` over `duration` steps."""
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


class Replay:
    """A ring buffer of transitions in numpy arrays, sampled uniformly with replacement.

    `discounts` is the factor of the bootstrap: `gamma ** m` after an m-step return, 0 after
    a termination."""

    def __init__(self, size: int, obs_dim: int, rng: np.random.Generator) -> None:
        self.obs = np.zeros((size, obs_dim), np.float32)
        self.next_obs = np.zeros((size, obs_dim), np.float32)
        self.actions = np.zeros(size, np.int64)
        self.rewards = np.zeros(size, np.float32)
        self.discounts = np.zeros(size, np.float32)
        self.size, self.pos, self.full, self.rng = size, 0, False, rng

    def add(self, obs: np.ndarray, action: int, ret: float, next_obs: np.ndarray, discount: float) -> None:
        j = self.pos
        self.obs[j], self.actions[j], self.rewards[j] = obs, action, ret
        self.next_obs[j], self.discounts[j] = next_obs, discount
        self.pos = (self.pos + 1) % self.size
        self.full = self.full or self.pos == 0

    def sample(self, n: int) -> tuple[torch.Tensor, ...]:
        idx = self.rng.integers(0, self.size if self.full else self.pos, n)
        columns = (self.obs, self.actions, self.rewards, self.next_obs, self.discounts)
        return tuple(torch.as_tensor(a[idx]) for a in columns)


class NStep:
    """n-step returns per env: a window of the last n steps, emitted when full and flushed
    (shortened) when the episode ends."""

    def __init__(self, n: int, gamma: float, num_envs: int) -> None:
        self.n, self.gamma = n, gamma
        self.windows: list[collections.deque[tuple[np.ndarray, int, float]]] = [
            collections.deque() for _ in range(num_envs)
        ]

    def step(
        self,
        i: int,
        obs: np.ndarray,
        action: int,
        reward: float,
        next_obs: np.ndarray,
        terminated: bool,
        truncated: bool,
        rb: Replay,
    ) -> None:
        window = self.windows[i]
        window.append((obs, action, reward))
        if len(window) == self.n:
            self._emit(window, next_obs, terminated, rb)
        if terminated or truncated:
            while window:
                self._emit(window, next_obs, terminated, rb)

    def _emit(
        self,
        window: collections.deque[tuple[np.ndarray, int, float]],
        next_obs: np.ndarray,
        terminated: bool,
        rb: Replay,
    ) -> None:
        ret = sum(self.gamma**k * r for k, (_, _, r) in enumerate(window))
        obs, action, _ = window.popleft()
        rb.add(obs, action, ret, next_obs, 0.0 if terminated else self.gamma ** (len(window) + 1))


def run(args: Args, progress: Callable[[float, int, int, float], object] | None = None) -> dict[str, Any]:
    """Train for `total_timesteps` env steps or until the target; the record of the run.

    `progress(seconds, env_steps, transitions_trained, mean_return)` is called every 512 env
    steps (bench/dqn_cartpole.py draws the learning curve from it)."""
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    envs = gym.make_vec(
        args.env_id,
        args.num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )
    obs_dim = int(np.prod(envs.single_observation_space.shape or ()))
    n_actions = int(envs.single_action_space.n)  # type: ignore[attr-defined]
    q_network = QNetwork(obs_dim, n_actions, args.hidden)
    optimizer = torch.optim.Adam(q_network.parameters(), lr=args.learning_rate)
    target_network = QNetwork(obs_dim, n_actions, args.hidden)
    target_network.load_state_dict(q_network.state_dict())
    rb = Replay(args.buffer_size, obs_dim, rng)
    nstep = NStep(args.n_step, args.gamma, args.num_envs)
    start = time.perf_counter()
    returns: collections.deque[float] = collections.deque(maxlen=100)
    episode_return = np.zeros(args.num_envs)
    reached: dict[str, float] | None = None
    obs, _ = envs.reset(seed=args.seed)
    steps = sampled_ready = trained = 0
    while steps < args.total_timesteps and reached is None:
        epsilon = linear_schedule(
            args.start_e, args.end_e, int(args.exploration_fraction * args.total_timesteps), steps
        )
        with torch.inference_mode():
            greedy = q_network(torch.as_tensor(obs, dtype=torch.float32)).argmax(dim=1).numpy()
        explore = rng.random(args.num_envs) < epsilon
        actions = np.where(explore, rng.integers(0, n_actions, args.num_envs), greedy)
        next_obs, rewards, terminations, truncations, infos = envs.step(actions)
        real_next_obs = next_obs.copy()
        done = terminations | truncations
        for ended in np.flatnonzero(done):
            real_next_obs[ended] = infos["final_obs"][ended]
        for i in range(args.num_envs):
            nstep.step(
                i,
                obs[i],
                int(actions[i]),
                float(rewards[i]),
                real_next_obs[i],
                bool(terminations[i]),
                bool(truncations[i]),
                rb,
            )
        episode_return += rewards
        returns.extend(episode_return[done].tolist())
        episode_return[done] = 0.0
        obs = next_obs
        steps += args.num_envs
        if progress is not None and steps % 512 < args.num_envs:
            mean = float(np.mean(returns)) if returns else math.nan
            progress(time.perf_counter() - start, steps, trained * args.batch_size, mean)
        if len(returns) == 100 and np.mean(returns) >= 475.0:
            reached = {"env_steps": steps, "wall_s": time.perf_counter() - start,
                       "mean100": float(np.mean(returns))}
        if steps < args.learning_starts:
            continue
        sampled_ready += args.num_envs
        for _ in range(math.floor(args.training_intensity * sampled_ready / args.batch_size) - trained):
            train_step(args, rb, q_network, target_network, optimizer)
            trained += 1
            if trained % args.target_network_frequency == 0:
                target_network.load_state_dict(q_network.state_dict())
    envs.close()
    return {
        "system": "cleanrl-style",
        "args": dataclasses.asdict(args),
        "env_steps": steps,
        "trained_steps": trained,
        "reached": reached,
        "final_mean100": float(np.mean(returns)) if len(returns) == 100 else math.nan,
        "wall_s": time.perf_counter() - start,
    }


def train_step(
    args: Args, rb: Replay, q_network: QNetwork, target_network: QNetwork, optimizer: torch.optim.Optimizer
) -> None:
    """One double-DQN Huber step on a uniform sample."""
    b_obs, b_actions, b_rewards, b_next_obs, b_discounts = rb.sample(args.batch_size)
    with torch.no_grad():
        best = q_network(b_next_obs).argmax(dim=1, keepdim=True)
        target_q = target_network(b_next_obs).gather(1, best).squeeze(1)
        td_target = b_rewards + b_discounts * target_q
    old_val = q_network(b_obs).gather(1, b_actions.unsqueeze(1)).squeeze(1)
    loss = F.huber_loss(old_val, td_target)
    optimizer.zero_grad()
    torch.autograd.backward(loss)
    nn.utils.clip_grad_norm_(q_network.parameters(), args.max_grad_norm)
    optimizer.step()


def main(argv: list[str]) -> None:
    """`--seed S [--total-timesteps N]`; prints the run's record as one JSON line."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--total-timesteps", type=int, default=Args.total_timesteps)
    a = p.parse_args(argv)
    args = Args(seed=a.seed, total_timesteps=a.total_timesteps)
    for difference in matches_rxrl(args):
        print(f"warning: not matched with rxrl: {difference}", file=sys.stderr)
    print(json.dumps(run(args)))


if __name__ == "__main__":
    main(sys.argv[1:])
