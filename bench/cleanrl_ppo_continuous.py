"""Single-process continuous-control PPO in the style of CleanRL's ppo_continuous_action.py.

CleanRL's file for gymnasium 1.x, with its defaults (the settings rxrl's ``ppo.MUJOCO`` copies):
one env wrapped in ClipAction, NormalizeObservation, observation clip 10, NormalizeReward
(gamma 0.99), reward clip 10; 2048 steps per rollout, GAE(0.99, 0.95), 10 epochs of 32
minibatches (64 rows), lr 3e-4 annealed linearly to 0, clip 0.2 (values clipped too), no
entropy bonus, vf 0.5, gradient norm 0.5; separate 64x64 tanh actor and critic, orthogonal
init, a state-independent log-std. ``torch.set_num_threads(1)``, as every system here.

``run(env, seed, steps) -> dict`` returns the curve (env steps, mean return of the last 100
training episodes) and a deterministic evaluation of the final policy (the mean action, the
observation statistics frozen).
"""

from __future__ import annotations

import collections
import math
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions.normal import Normal


def layer_init(layer: nn.Linear, std: float = math.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    """CleanRL's orthogonal initialisation."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """CleanRL's continuous agent: 64x64 tanh critic and actor mean, a learned log-std."""

    def __init__(self, obs_dim: int, act_dim: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),
                                    layer_init(nn.Linear(64, 64)), nn.Tanh(),
                                    layer_init(nn.Linear(64, 1), std=1.0))
        self.actor_mean = nn.Sequential(layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),
                                        layer_init(nn.Linear(64, 64)), nn.Tanh(),
                                        layer_init(nn.Linear(64, act_dim), std=0.01))
        self.actor_logstd = nn.Parameter(torch.zeros(1, act_dim))

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        """V(x)."""
        out: torch.Tensor = self.critic(x)
        return out

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None
                             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """CleanRL's: a sample (or ``action``), its log-prob, the entropy, the value."""
        mean = self.actor_mean(x)
        std = torch.exp(self.actor_logstd.expand_as(mean))
        probs = Normal(mean, std)
        if action is None:
            action = probs.sample()  # type: ignore[no-untyped-call]
        logp = probs.log_prob(action).sum(1)  # type: ignore[no-untyped-call]
        entropy = probs.entropy().sum(1)  # type: ignore[no-untyped-call]
        return action, logp, entropy, self.critic(x)


def make_env(env_id: str, gamma: float) -> Any:
    """CleanRL's wrapper stack for one env."""

    def thunk() -> Any:
        env: Any = gym.make(env_id)
        env = gym.wrappers.FlattenObservation(env)
        env = gym.wrappers.RecordEpisodeStatistics(env)
        env = gym.wrappers.ClipAction(env)
        env = gym.wrappers.NormalizeObservation(env)
        env = gym.wrappers.TransformObservation(env, lambda obs: np.clip(obs, -10, 10), env.observation_space)
        env = gym.wrappers.NormalizeReward(env, gamma=gamma)
        env = gym.wrappers.TransformReward(env, lambda reward: float(np.clip(float(reward), -10, 10)))
        return env

    return thunk


def run(env_id: str, seed: int, total_timesteps: int, eval_episodes: int = 10) -> dict[str, Any]:
    """Train for ``total_timesteps``; the curve, the wall time and the evaluation."""
    start = time.perf_counter()
    torch.set_num_threads(1)
    num_steps, gamma, lam, epochs, minibatches = 2048, 0.99, 0.95, 10, 32
    lr, clip, vf_coef, max_grad_norm = 3e-4, 0.2, 0.5, 0.5
    np.random.seed(seed)
    torch.manual_seed(seed)
    envs: Any = gym.vector.SyncVectorEnv([make_env(env_id, gamma)],
                                         autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP)
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    act_dim = int(np.prod(envs.single_action_space.shape))
    agent = Agent(obs_dim, act_dim)
    optimizer = torch.optim.Adam(agent.parameters(), lr=lr, eps=1e-5)
    batch_size = num_steps
    minibatch_size = batch_size // minibatches
    iterations = total_timesteps // batch_size
    obs = torch.zeros((num_steps, 1, obs_dim))
    actions = torch.zeros((num_steps, 1, act_dim))
    logprobs, rewards, dones, values = (torch.zeros((num_steps, 1)) for _ in range(4))
    next_obs_np, _ = envs.reset(seed=seed)
    next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32)
    next_done = torch.zeros(1)
    returns: collections.deque[float] = collections.deque(maxlen=100)
    curve: list[tuple[int, float, float]] = []
    global_step = 0
    for iteration in range(1, iterations + 1):
        optimizer.param_groups[0]["lr"] = (1.0 - (iteration - 1.0) / iterations) * lr
        for step in range(num_steps):
            global_step += 1
            obs[step], dones[step] = next_obs, next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step], logprobs[step] = action, logprob
            next_obs_np, reward, terminations, truncations, infos = envs.step(action.numpy())
            next_done = torch.as_tensor(np.logical_or(terminations, truncations), dtype=torch.float32)
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32).view(-1)
            next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32)
            if "episode" in infos and infos["_episode"].any():
                returns.extend(float(r) for r in infos["episode"]["r"][infos["_episode"]])
        with torch.no_grad():  # GAE, as CleanRL (it does not bootstrap truncations either)
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = torch.zeros(1)
            for t in reversed(range(num_steps)):
                nextnonterminal = 1.0 - (next_done if t == num_steps - 1 else dones[t + 1])
                nextvalues = next_value if t == num_steps - 1 else values[t + 1]
                delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
                lastgaelam = delta + gamma * lam * nextnonterminal * lastgaelam
                advantages[t] = lastgaelam
            returns_t = advantages + values
        b_obs, b_actions = obs.reshape(-1, obs_dim), actions.reshape(-1, act_dim)
        b_logprobs = logprobs.reshape(-1)
        b_advantages, b_returns, b_values = advantages.reshape(-1), returns_t.reshape(-1), values.reshape(-1)
        b_inds = np.arange(batch_size)
        for _epoch in range(epochs):
            np.random.shuffle(b_inds)
            for begin in range(0, batch_size, minibatch_size):
                mb = b_inds[begin:begin + minibatch_size]
                _, newlogprob, _entropy, newvalue = agent.get_action_and_value(b_obs[mb], b_actions[mb])
                ratio = (newlogprob - b_logprobs[mb]).exp()
                mb_adv = b_advantages[mb]
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(-mb_adv * ratio, -mb_adv * torch.clamp(ratio, 1 - clip, 1 + clip)).mean()
                newvalue = newvalue.view(-1)
                v_unclipped = (newvalue - b_returns[mb]) ** 2
                v_clipped = b_values[mb] + torch.clamp(newvalue - b_values[mb], -clip, clip)
                v_loss = 0.5 * torch.max(v_unclipped, (v_clipped - b_returns[mb]) ** 2).mean()
                loss = pg_loss + v_loss * vf_coef
                optimizer.zero_grad()
                torch.autograd.backward(loss)
                nn.utils.clip_grad_norm_(agent.parameters(), max_grad_norm)
                optimizer.step()
        curve.append((global_step, float(np.mean(returns)) if returns else math.nan,
                      time.perf_counter() - start))
    wall = time.perf_counter() - start
    return {"curve": curve, "wall_s": wall, "eval": evaluate(envs, agent, env_id, eval_episodes, seed)}


def evaluate(envs: Any, agent: Agent, env_id: str, episodes: int, seed: int) -> list[float]:
    """Returns of ``episodes`` episodes of the mean action, observations normalized with the
    training statistics (frozen)."""
    norm: Any = envs.envs[0]
    while not isinstance(norm, gym.wrappers.NormalizeObservation):
        norm = norm.env
    rms = norm.obs_rms
    env: Any = gym.make(env_id)
    out: list[float] = []
    obs, _ = env.reset(seed=seed + 1000)
    while len(out) < episodes:
        total, done = 0.0, False
        while not done:
            x = np.clip((obs - rms.mean) / np.sqrt(rms.var + 1e-8), -10, 10)
            with torch.no_grad():
                action = agent.actor_mean(torch.as_tensor(x[None], dtype=torch.float32))[0].numpy()
            obs, reward, terminated, truncated, _ = env.step(np.clip(action, env.action_space.low,
                                                                     env.action_space.high))
            total += float(reward)
            done = bool(terminated or truncated)
        out.append(total)
        obs, _ = env.reset()
    return out
