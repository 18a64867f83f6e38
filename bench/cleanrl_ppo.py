"""Single-process PPO in the style of CleanRL's ppo.py: the loop a user writes by hand.

One process, one gymnasium `SyncVectorEnv`, a torch actor-critic sampled with
`torch.distributions.Categorical`, GAE and minibatch epochs written out, as in CleanRL, with
the matched settings (lr 2e-3 without annealing, 10 epochs, no value clipping). Two changes
from CleanRL's file, both for correctness and speed on gymnasium 1.x: SAME_STEP autoreset with the value
of `final_obs` bootstrapped at truncations (CleanRL drops it), and `torch.set_num_threads(1)`
(as fast on these tiny MLPs and far steadier on a busy 2-core machine).

Run alone: ``python bench/cleanrl_ppo.py --budget-steps 50000 --seed 0``.
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
import numpy as np
import numpy.typing as npt
import ppo_settings as s
import torch
from torch import nn
from torch.distributions import Categorical

StepResult = tuple[npt.NDArray[np.float32], npt.NDArray[np.float64], npt.NDArray[np.bool_],
                   npt.NDArray[np.bool_], dict[str, Any]]


def layer_init(layer: nn.Linear, std: float = math.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    """CleanRL's orthogonal initialisation."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """CleanRL's separate actor and critic MLPs (64x64 tanh)."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: tuple[int, ...]) -> None:
        super().__init__()

        def mlp(out: int, gain: float) -> nn.Sequential:
            layers: list[nn.Module] = []
            width = obs_dim
            for h in hidden:
                layers += [layer_init(nn.Linear(width, h)), nn.Tanh()]
                width = h
            return nn.Sequential(*layers, layer_init(nn.Linear(width, out), std=gain))

        self.critic = mlp(1, 1.0)
        self.actor = mlp(n_actions, 0.01)

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        """State values `[B]`."""
        value: torch.Tensor = self.critic(x).squeeze(-1)
        return value

    def get_action_and_value(
        self, x: torch.Tensor, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(action, log-prob, entropy, value), sampling an action unless one is given."""
        probs = Categorical(logits=self.actor(x))
        # torch.distributions is untyped: name the three methods used
        sample = cast(Callable[[], torch.Tensor], probs.sample)
        log_prob = cast(Callable[[torch.Tensor], torch.Tensor], probs.log_prob)
        entropy = cast(Callable[[], torch.Tensor], probs.entropy)
        if action is None:
            action = sample()
        return action, log_prob(action), entropy(), self.get_value(x)


def run(m: s.Matched, seed: int, budget_steps: int) -> s.RunRecord:
    """Train until `budget_steps` env steps were sampled; return the record of the run."""
    record = s.RunRecord("cleanrl", seed, budget_steps, attrs.asdict(m),
                         versions=s.versions(["torch", "gymnasium", "numpy"]))
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(m.env) for _ in range(m.num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    obs_dim = int(np.prod(envs.single_observation_space.shape or (1,)))
    action_space = envs.single_action_space
    assert isinstance(action_space, gym.spaces.Discrete), "a categorical policy needs discrete actions"
    n_actions = int(action_space.n)
    agent = Agent(obs_dim, n_actions, m.hidden)
    optimizer = torch.optim.Adam(agent.parameters(), lr=m.lr, eps=1e-5)
    next_obs = torch.as_tensor(envs.reset(seed=seed)[0], dtype=torch.float32)
    record.setup_s = s.since_start()
    _train(m, envs, agent, optimizer, next_obs, record)
    envs.close()
    return record


def _train(m: s.Matched, envs: gym.vector.SyncVectorEnv, agent: Agent, optimizer: torch.optim.Optimizer,
           next_obs: torch.Tensor, record: s.RunRecord) -> None:
    n, t_len = m.num_envs, m.fragment_length
    obs = torch.zeros((t_len, n, *next_obs.shape[1:]))
    actions = torch.zeros((t_len, n), dtype=torch.long)
    logprobs, rewards, values = torch.zeros((t_len, n)), torch.zeros((t_len, n)), torch.zeros((t_len, n))
    terminated, ended = torch.zeros((t_len, n)), torch.zeros((t_len, n))
    next_values = torch.zeros((t_len, n))
    returns_window: collections.deque[float] = collections.deque(maxlen=100)
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
            next_obs = torch.as_tensor(o, dtype=torch.float32)
            with torch.no_grad():
                next_values[step] = agent.get_value(next_obs)
                if trunc.any():  # SAME_STEP: the truncated episode's last observation is in info
                    cut = np.flatnonzero(trunc)
                    final = np.stack([info["final_obs"][i] for i in cut]).astype(np.float32)
                    next_values[step, torch.as_tensor(cut)] = agent.get_value(torch.as_tensor(final))
            if done.any():
                returns_window.extend(ep_return[done].tolist())
                ep_return[done] = 0.0
        sampled += t_len * n
        learn_start = time.perf_counter()
        _update(m, agent, optimizer, obs, actions, logprobs, rewards, values, terminated, ended,
                next_values)
        record.learner_s += time.perf_counter() - learn_start
        mean = float(np.mean(returns_window)) if returns_window else math.nan
        record.add(time.perf_counter() - start, sampled, sampled, mean)


def _update(m: s.Matched, agent: Agent, optimizer: torch.optim.Optimizer, obs: torch.Tensor,
            actions: torch.Tensor, logprobs: torch.Tensor, rewards: torch.Tensor, values: torch.Tensor,
            terminated: torch.Tensor, ended: torch.Tensor, next_values: torch.Tensor) -> None:
    """GAE over the fragment, then `num_epochs` of shuffled minibatch PPO updates.

    `next_values[t]` is the value of the observation after step t (the final one when the
    episode ended there): bootstrapped unless terminated; the recursion stops at every end.
    """
    t_len = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    last_gae = torch.zeros(rewards.shape[1])
    for t in reversed(range(t_len)):
        not_term = 1.0 - terminated[t]
        delta = rewards[t] + m.gamma * next_values[t] * not_term - values[t]
        last_gae = delta + m.gamma * m.lam * (1.0 - ended[t]) * last_gae
        advantages[t] = last_gae
    returns = advantages + values
    b_obs, b_actions = obs.reshape(-1, obs.shape[-1]), actions.reshape(-1)
    b_logprobs, b_adv, b_returns = logprobs.reshape(-1), advantages.reshape(-1), returns.reshape(-1)
    batch = b_obs.shape[0]
    for _ in range(m.num_epochs):
        order = torch.randperm(batch)
        for lo in range(0, batch, m.minibatch_size):
            mb = order[lo:lo + m.minibatch_size]
            _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb], b_actions[mb])
            logratio = newlogprob - b_logprobs[mb]
            ratio = logratio.exp()
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
    s.runner_main(argv, __doc__ or "", lambda args, m: run(m, args.seed, args.budget_steps))


if __name__ == "__main__":
    main(sys.argv[1:])
