"""Single-process PPO and DQN on MinAtar Breakout in the style of CleanRL: the loops a user writes by hand.

One process, one gymnasium `SyncVectorEnv` of `rxrl.envs.minatar.make_minatar_env` envs (the
only rxrl import: the same ``[4, 10, 10]`` uint8 observations), the MinAtar CNN written out in
torch, the settings of `minatar_settings`. ``--algo ppo`` is CleanRL's ``ppo_atari.py`` loop (an
Agent with one torso and two heads, GAE, minibatch epochs) with bench/cleanrl_ppo.py's choices;
``--algo dqn`` is CleanRL's ``dqn_atari.py`` with a numpy ring buffer instead of SB3's
``ReplayBuffer``. What differs from CleanRL's files, all to match rxrl: SAME_STEP autoreset
(the real final observation is stored; CleanRL's PPO would bootstrap a truncation from the
next episode's first observation: MinAtar never truncates), the CNN's orthogonal init in DQN
too (CleanRL's ``QNetwork`` keeps PyTorch's), a Huber TD loss (CleanRL: MSE), the target copied
every ``target_update_interval`` optimizer steps (= CleanRL's 1,000 env steps), the training
intensity held exactly as in bench/cleanrl_dqn.py, 2 envs for DQN (CleanRL: 1), no value
clipping in PPO, and ``torch.set_num_threads`` as the matched settings say.

Run alone: ``python bench/cleanrl_minatar.py --algo ppo --budget-steps 20000 --seed 0``.
"""

from __future__ import annotations

import collections
import math
import sys
import time
from collections.abc import Callable
from typing import Any, cast

import attrs
import gymnasium as gym
import minatar_settings as ms
import numpy as np
import numpy.typing as npt
import ppo_settings as s
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Categorical

from rxrl.envs.minatar import make_minatar_env

StepResult = tuple[npt.NDArray[np.uint8], npt.NDArray[np.float64], npt.NDArray[np.bool_],
                   npt.NDArray[np.bool_], dict[str, Any]]
VERSIONS = ["torch", "gymnasium", "numpy", "MinAtar"]


def layer_init(layer: nn.Conv2d | nn.Linear, std: float = math.sqrt(2),
               bias_const: float = 0.0) -> nn.Conv2d | nn.Linear:
    """CleanRL's orthogonal initialisation."""
    nn.init.orthogonal_(layer.weight, std)
    assert layer.bias is not None
    nn.init.constant_(layer.bias, bias_const)
    return layer


def minatar_cnn(channels: int) -> nn.Sequential:
    """MinAtar's network: conv 16 3x3/1, ReLU, linear 128, ReLU (10x10 images: 8x8 after the conv)."""
    return nn.Sequential(layer_init(nn.Conv2d(channels, 16, 3, 1)), nn.ReLU(), nn.Flatten(),
                         layer_init(nn.Linear(16 * 8 * 8, 128)), nn.ReLU())


class Agent(nn.Module):
    """CleanRL's ``ppo_atari`` Agent on the MinAtar CNN: one torso, a policy and a value head."""

    def __init__(self, channels: int, n_actions: int) -> None:
        super().__init__()
        self.network = minatar_cnn(channels)
        self.actor = layer_init(nn.Linear(128, n_actions), std=0.01)
        self.critic = layer_init(nn.Linear(128, 1), std=1.0)

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        """State values `[B]` of uint8 images (0/1: not scaled)."""
        value: torch.Tensor = self.critic(self.network(x.float())).squeeze(-1)
        return value

    def get_action_and_value(
        self, x: torch.Tensor, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(action, log-prob, entropy, value), sampling an action unless one is given."""
        hidden = self.network(x.float())
        probs = Categorical(logits=self.actor(hidden))
        # torch.distributions is untyped: name the three methods used
        sample = cast(Callable[[], torch.Tensor], probs.sample)
        log_prob = cast(Callable[[torch.Tensor], torch.Tensor], probs.log_prob)
        entropy = cast(Callable[[], torch.Tensor], probs.entropy)
        if action is None:
            action = sample()
        return action, log_prob(action), entropy(), self.critic(hidden).squeeze(-1)


class QNetwork(nn.Module):
    """CleanRL's ``dqn_atari`` QNetwork on the MinAtar CNN; the Q head keeps PyTorch's init."""

    def __init__(self, channels: int, n_actions: int) -> None:
        super().__init__()
        self.network = nn.Sequential(minatar_cnn(channels), nn.Linear(128, n_actions))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Q-values `[B, n_actions]` of uint8 images."""
        q: torch.Tensor = self.network(x.float())
        return q


def make_envs(env_id: str, n: int) -> gym.vector.SyncVectorEnv:
    """``n`` MinAtar envs in one `SyncVectorEnv`, SAME_STEP autoreset."""
    return gym.vector.SyncVectorEnv([lambda: make_minatar_env(env_id) for _ in range(n)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def mean_of(window: collections.deque[float]) -> float:
    """The mean of the returns window (NaN before the first episode)."""
    return float(np.mean(window)) if window else math.nan


# --------------------------------------------------------------------------------------- PPO


def run_ppo(m: ms.MatchedMinAtarPPO, seed: int, budget_steps: int) -> s.RunRecord:
    """Train PPO until ``budget_steps`` env steps were sampled; the record of the run."""
    record = s.RunRecord("cleanrl-ppo", seed, budget_steps, attrs.asdict(m), versions=s.versions(VERSIONS))
    torch.set_num_threads(m.torch_threads)
    torch.manual_seed(seed)
    envs = make_envs(m.env, m.num_envs)
    shape = envs.single_observation_space.shape or ()
    n_actions = int(cast("gym.spaces.Discrete[Any]", envs.single_action_space).n)
    agent = Agent(shape[0], n_actions)
    optimizer = torch.optim.Adam(agent.parameters(), lr=m.lr, eps=m.adam_eps)
    next_obs = torch.as_tensor(envs.reset(seed=seed)[0])
    record.setup_s = s.since_start()
    n, t_len = m.num_envs, m.fragment_length
    obs = torch.zeros((t_len, n, *shape), dtype=torch.uint8)
    actions = torch.zeros((t_len, n), dtype=torch.long)
    logprobs, rewards, values = torch.zeros((t_len, n)), torch.zeros((t_len, n)), torch.zeros((t_len, n))
    terminated, ended = torch.zeros((t_len, n)), torch.zeros((t_len, n))
    next_values = torch.zeros((t_len, n))
    returns: collections.deque[float] = collections.deque(maxlen=100)
    ep_return = np.zeros(n)
    sampled = 0
    start = time.perf_counter()
    while record.running():
        for step in range(t_len):
            obs[step] = next_obs
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
            actions[step], logprobs[step], values[step] = action, logprob, value
            o, r, term, trunc, info = cast(StepResult, envs.step(action.numpy()))
            ep_return += r
            done = term | trunc
            rewards[step] = torch.as_tensor(r, dtype=torch.float32)
            terminated[step] = torch.as_tensor(term, dtype=torch.float32)  # no bootstrap past these
            ended[step] = torch.as_tensor(done, dtype=torch.float32)  # GAE stops at both
            next_obs = torch.as_tensor(o)
            if trunc.any():  # the truncated episode's own last observation (never in MinAtar)
                cut = np.flatnonzero(trunc)
                with torch.no_grad():
                    final = torch.as_tensor(np.stack([info["final_obs"][i] for i in cut]))
                    next_values[step, torch.as_tensor(cut)] = agent.get_value(final)
            if done.any():
                returns.extend(ep_return[done].tolist())
                ep_return[done] = 0.0
        with torch.no_grad():  # CleanRL's bootstrap: the next step's value, the last from next_obs
            next_values[:-1] = torch.where(ended[:-1] * (1 - terminated[:-1]) > 0, next_values[:-1],
                                           values[1:])
            last = agent.get_value(next_obs)
            next_values[-1] = torch.where(ended[-1] * (1 - terminated[-1]) > 0, next_values[-1], last)
        sampled += t_len * n
        learn_start = time.perf_counter()
        ppo_update(m, agent, optimizer, obs, actions, logprobs, rewards, values, terminated, ended,
                   next_values)
        record.learner_s += time.perf_counter() - learn_start
        record.add(time.perf_counter() - start, sampled, sampled, mean_of(returns))
    envs.close()
    return record


def ppo_update(m: ms.MatchedMinAtarPPO, agent: Agent, optimizer: torch.optim.Optimizer, obs: torch.Tensor,
               actions: torch.Tensor, logprobs: torch.Tensor, rewards: torch.Tensor, values: torch.Tensor,
               terminated: torch.Tensor, ended: torch.Tensor, next_values: torch.Tensor) -> None:
    """GAE over the fragment, then ``num_epochs`` of shuffled minibatch PPO updates.

    ``next_values[t]`` is the value of the observation after step t: bootstrapped unless
    terminated; the recursion stops at every episode end."""
    t_len = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    last_gae = torch.zeros(rewards.shape[1])
    for t in reversed(range(t_len)):
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


# --------------------------------------------------------------------------------------- DQN


class Replay:
    """A ring buffer of transitions in numpy arrays (uint8 images), sampled uniformly with replacement."""

    def __init__(self, capacity: int, shape: tuple[int, ...], rng: np.random.Generator) -> None:
        self.obs = np.zeros((capacity, *shape), np.uint8)
        self.next_obs = np.zeros((capacity, *shape), np.uint8)
        self.actions = np.zeros(capacity, np.int64)
        self.rewards = np.zeros(capacity, np.float32)
        self.terminated = np.zeros(capacity, np.float32)
        self.capacity, self.pos, self.size, self.rng = capacity, 0, 0, rng

    def add(self, obs: npt.NDArray[np.uint8], action: int, reward: float, next_obs: npt.NDArray[np.uint8],
            terminated: bool) -> None:
        """Store one transition, overwriting the oldest once full."""
        j = self.pos
        self.obs[j], self.actions[j], self.rewards[j] = obs, action, reward
        self.next_obs[j], self.terminated[j] = next_obs, terminated
        self.pos = (j + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, n: int) -> tuple[torch.Tensor, ...]:
        """``n`` transitions: obs, actions, rewards, next_obs, terminated."""
        idx = self.rng.integers(0, self.size, n)
        columns = (self.obs, self.actions, self.rewards, self.next_obs, self.terminated)
        return tuple(torch.as_tensor(a[idx]) for a in columns)


def linear_schedule(start_e: float, end_e: float, duration: float, t: int) -> float:
    """CleanRL's epsilon: linear from ``start_e`` to ``end_e`` over ``duration`` steps."""
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


def run_dqn(m: ms.MatchedMinAtarDQN, seed: int, budget_steps: int) -> s.RunRecord:
    """Train DQN until ``budget_steps`` env steps were sampled; the record of the run."""
    record = s.RunRecord("cleanrl-dqn", seed, budget_steps, attrs.asdict(m), versions=s.versions(VERSIONS))
    torch.set_num_threads(m.torch_threads)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    n = m.num_envs
    envs = make_envs(m.env, n)
    shape = tuple(envs.single_observation_space.shape or ())
    n_actions = int(cast("gym.spaces.Discrete[Any]", envs.single_action_space).n)
    q_network = QNetwork(shape[0], n_actions)
    optimizer = torch.optim.Adam(q_network.parameters(), lr=m.lr, eps=m.adam_eps)
    target_network = QNetwork(shape[0], n_actions)
    target_network.load_state_dict(q_network.state_dict())
    rb = Replay(m.capacity, shape, rng)
    obs: npt.NDArray[np.uint8] = envs.reset(seed=seed)[0]
    record.setup_s = s.since_start()
    returns: collections.deque[float] = collections.deque(maxlen=100)
    ep_return = np.zeros(n)
    sampled = ready = updates = 0
    start = time.perf_counter()
    while record.running():
        epsilon = linear_schedule(m.epsilon_start, m.epsilon_end, m.exploration_fraction * budget_steps,
                                  sampled)
        with torch.no_grad():
            greedy = q_network(torch.as_tensor(obs)).argmax(dim=1).numpy()
        explore = rng.random(n) < epsilon
        actions = np.where(explore, rng.integers(0, n_actions, n), greedy)
        next_obs, rewards, terms, truncs, infos = cast(StepResult, envs.step(actions))
        done = terms | truncs
        for i in range(n):
            real_next = infos["final_obs"][i] if done[i] else next_obs[i]
            rb.add(obs[i], int(actions[i]), float(rewards[i]), real_next, bool(terms[i]))
        ep_return += rewards
        returns.extend(ep_return[done].tolist())
        ep_return[done] = 0.0
        obs = next_obs
        sampled += n
        if rb.size >= m.learning_starts:
            ready += n
            learn_start = time.perf_counter()
            for _ in range(math.floor(m.training_intensity * ready / m.batch_size) - updates):
                dqn_step(m, rb, q_network, target_network, optimizer)
                updates += 1
                if updates % m.target_update_interval == 0:
                    target_network.load_state_dict(q_network.state_dict())
            record.learner_s += time.perf_counter() - learn_start
        if sampled % ms.RECORD_EVERY < n or sampled >= budget_steps:
            record.add(time.perf_counter() - start, sampled, updates * m.batch_size, mean_of(returns))
    envs.close()
    return record


def dqn_step(m: ms.MatchedMinAtarDQN, rb: Replay, q_network: QNetwork, target_network: QNetwork,
             optimizer: torch.optim.Optimizer) -> None:
    """One DQN step (max of the target net, Huber loss) on a uniform sample."""
    b_obs, b_actions, b_rewards, b_next_obs, b_terminated = rb.sample(m.batch_size)
    with torch.no_grad():
        target_max = target_network(b_next_obs).max(dim=1).values
        td_target = b_rewards + m.gamma * target_max * (1.0 - b_terminated)
    old_val = q_network(b_obs).gather(1, b_actions.unsqueeze(1)).squeeze(1)
    loss = F.huber_loss(old_val, td_target, delta=m.huber_delta)
    optimizer.zero_grad()
    torch.autograd.backward(loss)
    if m.max_grad_norm is not None:
        nn.utils.clip_grad_norm_(q_network.parameters(), m.max_grad_norm)
    optimizer.step()


def run(m: ms.Matched, seed: int, budget_steps: int) -> s.RunRecord:
    """The run of the algorithm whose settings ``m`` are."""
    if isinstance(m, ms.MatchedMinAtarPPO):
        return run_ppo(m, seed, budget_steps)
    return run_dqn(m, seed, budget_steps)


def main(argv: list[str]) -> None:
    """Run once and print the summary line (and write JSON with ``--out``)."""
    ms.runner_main(argv, __doc__ or "", lambda args, m: run(m, args.seed, args.budget_steps))


if __name__ == "__main__":
    main(sys.argv[1:])
