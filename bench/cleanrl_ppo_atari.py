"""Single-process PPO on Atari in the style of CleanRL's ppo_atari.py, with the matched settings.

One process, one gymnasium `SyncVectorEnv` of ``num_envs`` games, CleanRL's Nature-CNN `Agent`
and its update loop written out, with `atari_settings.MatchedAtari`'s values (lr 2.5e-4 without
annealing, 4 epochs of minibatches of 256, clip 0.1). torch keeps its default thread count
(both cores: learning and inference alternate, nothing else runs beside them).

Changes from CleanRL's file, each to match the other systems: the preprocessing is gymnasium's
`AtariPreprocessing` on a ``frameskip=1`` v5 env (sticky actions 0.25) instead of SB3's
wrappers on a v4 one; no `FireResetEnv`; a lost life continues the game from the observation it
ended with, without SB3's extra no-op step; frames are stacked with zeros before an episode's
first; no value clipping; SAME_STEP autoreset with the value of ``final_obs`` bootstrapped at
truncations (CleanRL bootstraps the next game's first observation); observations are stored as
uint8 (CleanRL stores float32).

Run alone: ``python bench/cleanrl_ppo_atari.py --budget-steps 20000 --seed 0``.
"""

from __future__ import annotations

import collections
import math
import sys
import time
from collections.abc import Callable
from typing import Any, SupportsFloat, TypeVar, cast

import atari_settings as a
import attrs
import gymnasium as gym
import numpy as np
import numpy.typing as npt
import ppo_settings as s
import torch
from torch import nn
from torch.distributions import Categorical

StepResult = tuple[npt.NDArray[np.uint8], npt.NDArray[np.float64], npt.NDArray[np.bool_],
                   npt.NDArray[np.bool_], dict[str, Any]]
Layer = TypeVar("Layer", nn.Conv2d, nn.Linear)


class EpisodicLife(gym.Wrapper[Any, Any, Any, Any]):
    """CleanRL's ``EpisodicLifeEnv``: a lost life ends the training episode, not the game; the
    reset after it returns the observation that life ended with (SB3's steps a no-op first)."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.lives = 0
        self.goes_on: tuple[Any, dict[str, Any]] | None = None

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the game; ``terminated`` where a life is lost."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = self._lives()
        if not (terminated or truncated) and lives < self.lives:
            terminated, self.goes_on = True, (obs, info)
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Any, dict[str, Any]]:
        """Go on after a lost life; reset the game after it ended."""
        goes_on, self.goes_on = self.goes_on, None
        if goes_on is not None:
            return goes_on
        obs, info = self.env.reset(seed=seed, options=options)
        self.lives = self._lives()
        return obs, info

    def _lives(self) -> int:
        return int(self.env.unwrapped.ale.lives())  # type: ignore[attr-defined]


def make_env(m: a.MatchedAtari) -> gym.Env[Any, Any]:
    """One training game: ALE, preprocessing, raw-score statistics, one life per episode,
    clipped rewards, a stack of frames (CleanRL's order)."""
    import ale_py
    from gymnasium.wrappers import (
        AtariPreprocessing,
        ClipReward,
        FrameStackObservation,
        RecordEpisodeStatistics,
    )

    gym.register_envs(ale_py)
    env: gym.Env[Any, Any] = gym.make(m.env, frameskip=1,
                                      repeat_action_probability=m.repeat_action_probability)
    env = AtariPreprocessing(env, noop_max=m.noop_max, frame_skip=m.frame_skip, screen_size=m.screen_size,
                             terminal_on_life_loss=False, grayscale_obs=True, scale_obs=False)
    env = RecordEpisodeStatistics(env)  # before EpisodicLife: whole games, raw scores
    env = ClipReward(EpisodicLife(env), -1.0, 1.0)
    return FrameStackObservation(env, m.frame_stack, padding_type="zero")


def layer_init(layer: Layer, std: float = math.sqrt(2), bias_const: float = 0.0) -> Layer:
    """CleanRL's orthogonal initialisation."""
    nn.init.orthogonal_(layer.weight, std)
    assert layer.bias is not None
    nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """CleanRL's Nature CNN with a policy and a value head on one torso."""

    def __init__(self, channels: int, n_actions: int) -> None:
        super().__init__()
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(channels, 32, 8, stride=4)), nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)), nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)), nn.ReLU(),
            nn.Flatten(), layer_init(nn.Linear(64 * 7 * 7, 512)), nn.ReLU(),
        )
        self.actor = layer_init(nn.Linear(512, n_actions), std=0.01)
        self.critic = layer_init(nn.Linear(512, 1), std=1.0)

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        """State values `[B]` of uint8 frames `[B, C, H, W]`."""
        value: torch.Tensor = self.critic(self.network(x / 255.0)).squeeze(-1)
        return value

    def get_action_and_value(
        self, x: torch.Tensor, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(action, log-prob, entropy, value), sampling an action unless one is given."""
        hidden = self.network(x / 255.0)
        probs = Categorical(logits=self.actor(hidden))
        # torch.distributions is untyped: name the three methods used
        sample = cast(Callable[[], torch.Tensor], probs.sample)
        log_prob = cast(Callable[[torch.Tensor], torch.Tensor], probs.log_prob)
        entropy = cast(Callable[[], torch.Tensor], probs.entropy)
        if action is None:
            action = sample()
        return action, log_prob(action), entropy(), self.critic(hidden).squeeze(-1)


def run(m: a.MatchedAtari, seed: int, budget_steps: int) -> s.RunRecord:
    """Train until `budget_steps` agent steps were sampled; return the record of the run."""
    record = s.RunRecord("cleanrl-ppo", seed, budget_steps, attrs.asdict(m),
                         versions=s.versions(["torch", "gymnasium", "ale-py", "numpy"]))
    torch.manual_seed(seed)
    envs = gym.vector.SyncVectorEnv([lambda: make_env(m) for _ in range(m.num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    action_space = envs.single_action_space
    assert isinstance(action_space, gym.spaces.Discrete), "a categorical policy needs discrete actions"
    agent = Agent(m.frame_stack, int(action_space.n))
    optimizer = torch.optim.Adam(agent.parameters(), lr=m.lr, eps=1e-5)
    next_obs = torch.as_tensor(envs.reset(seed=seed)[0])
    record.setup_s = s.since_start()
    _train(m, envs, agent, optimizer, next_obs, record)
    envs.close()
    return record


def _train(m: a.MatchedAtari, envs: gym.vector.SyncVectorEnv, agent: Agent, optimizer: torch.optim.Optimizer,
           next_obs: torch.Tensor, record: s.RunRecord) -> None:
    n, t_len = m.num_envs, m.fragment_length
    obs = torch.zeros((t_len, n, *next_obs.shape[1:]), dtype=torch.uint8)
    actions = torch.zeros((t_len, n), dtype=torch.long)
    logprobs, rewards, values = torch.zeros((t_len, n)), torch.zeros((t_len, n)), torch.zeros((t_len, n))
    terminated, ended, truncated = torch.zeros((t_len, n)), torch.zeros((t_len, n)), torch.zeros((t_len, n))
    final_values = torch.zeros((t_len, n))  # values of the last observations of truncated episodes
    scores: collections.deque[float] = collections.deque(maxlen=100)
    sampled = 0
    start = time.perf_counter()
    while record.running():
        for step in range(t_len):
            obs[step] = next_obs
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
            actions[step], logprobs[step], values[step] = action, logprob, value
            o, r, term, trunc, info = cast(StepResult, envs.step(action.numpy()))
            rewards[step] = torch.as_tensor(r, dtype=torch.float32)
            terminated[step] = torch.as_tensor(term, dtype=torch.float32)
            truncated[step] = torch.as_tensor(trunc, dtype=torch.float32)
            ended[step] = torch.as_tensor(term | trunc, dtype=torch.float32)
            next_obs = torch.as_tensor(o)
            if trunc.any():  # SAME_STEP: the truncated episode's last observation is in info
                cut = np.flatnonzero(trunc)
                final = torch.as_tensor(np.stack([info["final_obs"][i] for i in cut]))
                with torch.no_grad():
                    final_values[step, torch.as_tensor(cut)] = agent.get_value(final)
            finals = info.get("final_info", {})
            if "episode" in finals:  # a game ended (RecordEpisodeStatistics, inside EpisodicLife)
                scores.extend(finals["episode"]["r"][finals["_episode"]].tolist())
        sampled += t_len * n
        learn_start = time.perf_counter()
        with torch.no_grad():
            next_values = torch.cat([values[1:], agent.get_value(next_obs)[None]])
        next_values = torch.where(truncated.bool(), final_values, next_values)
        _update(m, agent, optimizer, obs, actions, logprobs, rewards, values, terminated, ended, next_values)
        record.learner_s += time.perf_counter() - learn_start
        mean = float(np.mean(scores)) if scores else math.nan
        record.add(time.perf_counter() - start, sampled, sampled, mean)


def _update(m: a.MatchedAtari, agent: Agent, optimizer: torch.optim.Optimizer, obs: torch.Tensor,
            actions: torch.Tensor, logprobs: torch.Tensor, rewards: torch.Tensor, values: torch.Tensor,
            terminated: torch.Tensor, ended: torch.Tensor, next_values: torch.Tensor) -> None:
    """GAE over the fragment, then `num_epochs` of shuffled minibatch PPO updates.

    `next_values[t]` is the value of the observation after step t (the final one when the
    episode was truncated there): bootstrapped unless terminated; the recursion stops at every end.
    """
    advantages = torch.zeros_like(rewards)
    last_gae = torch.zeros(rewards.shape[1])
    for t in reversed(range(rewards.shape[0])):
        delta = rewards[t] + m.gamma * next_values[t] * (1.0 - terminated[t]) - values[t]
        last_gae = delta + m.gamma * m.lam * (1.0 - ended[t]) * last_gae
        advantages[t] = last_gae
    returns = advantages + values
    b_obs, b_actions = obs.reshape(-1, *obs.shape[2:]), actions.reshape(-1)
    b_logprobs, b_adv, b_returns = logprobs.reshape(-1), advantages.reshape(-1), returns.reshape(-1)
    batch = b_obs.shape[0]
    for _ in range(m.num_epochs):
        order = torch.randperm(batch)
        for lo in range(0, batch, m.minibatch_size):
            mb = order[lo:lo + m.minibatch_size]
            _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb], b_actions[mb])
            ratio = (newlogprob - b_logprobs[mb]).exp()
            adv = b_adv[mb]
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - m.clip_coef, 1 + m.clip_coef)).mean()
            v_loss = 0.5 * ((newvalue - b_returns[mb]) ** 2).mean()
            loss = pg_loss - m.ent_coef * entropy.mean() + v_loss * m.vf_coef
            optimizer.zero_grad()
            torch.autograd.backward(loss)
            nn.utils.clip_grad_norm_(agent.parameters(), m.max_grad_norm)
            optimizer.step()


def main(argv: list[str]) -> None:
    """Run once and print the summary line (and write JSON with ``--out``)."""
    a.runner_main(argv, __doc__ or "", lambda args, m: run(m, args.seed, args.budget_steps))


if __name__ == "__main__":
    main(sys.argv[1:])
