"""Stable-Baselines3's PPO on Atari with its own Atari wrappers and the matched settings.

All ``num_envs`` games are stepped in SB3's process (`DummyVecEnv`, as `peer_sb3` does), built
by ``make_atari_env`` on a ``frameskip=1`` v5 env with sticky actions 0.25; `AtariWrapper`
does the no-ops, frame skip with the max of the last two frames, one life per episode,
84×84 grayscale and reward clipping; `VecFrameStack` stacks 4 (zeros before an episode's first
frame). ``CnnPolicy`` is the Nature CNN with linear policy and value heads on one torso, lr
2.5e-4 constant, no value clipping; SB3's value loss is ``vf_coef * MSE``, so it gets
``vf_coef / 2``. torch keeps its default thread count, as in `cleanrl_ppo_atari`. Returns are
the games' raw scores (SB3's `Monitor` sits inside `AtariWrapper`).

Differences SB3 does not let us remove: `FireResetEnv` (always on where the game has FIRE, as
Pong has) presses FIRE then action 2 at every reset (game or life), two agent steps not
counted; a lost life's reset steps one no-op first, also not counted; frames are max-pooled in
RGB, then turned gray by OpenCV (the others pool the ALE's grayscale frames).

Run alone: ``python bench/peer_sb3_atari.py --budget-steps 20000 --seed 0``.
"""

from __future__ import annotations

import sys
from typing import Any

import atari_settings as a
import attrs
import ppo_settings as s
from peer_sb3 import _Clock


def make_env(m: a.MatchedAtari, seed: int) -> Any:
    """SB3's preprocessed Atari vector env with the matched settings, frames stacked."""
    import ale_py
    import gymnasium as gym

    env_util: Any = s.optional("stable_baselines3.common.env_util")
    vec_env: Any = s.optional("stable_baselines3.common.vec_env")
    gym.register_envs(ale_py)
    env = env_util.make_atari_env(
        m.env, n_envs=m.num_envs, seed=seed,
        env_kwargs={"frameskip": 1, "repeat_action_probability": m.repeat_action_probability},
        wrapper_kwargs={"noop_max": m.noop_max, "frame_skip": m.frame_skip, "screen_size": m.screen_size,
                        "terminal_on_life_loss": True, "clip_reward": True})
    return vec_env.VecFrameStack(env, n_stack=m.frame_stack)


def run(m: a.MatchedAtari, seed: int, budget_steps: int) -> s.RunRecord:
    """Train until `budget_steps` agent steps were sampled; return the record of the run."""
    sb3: Any = s.optional("stable_baselines3")
    callbacks: Any = s.optional("stable_baselines3.common.callbacks")
    record = s.RunRecord("sb3-ppo", seed, budget_steps, attrs.asdict(m),
                         versions=s.versions(["stable_baselines3", "torch", "gymnasium", "ale-py", "numpy"]))
    env = make_env(m, seed)
    model = sb3.PPO(
        "CnnPolicy", env, learning_rate=m.lr, n_steps=m.fragment_length, batch_size=m.minibatch_size,
        n_epochs=m.num_epochs, gamma=m.gamma, gae_lambda=m.lam, clip_range=m.clip_coef, clip_range_vf=None,
        normalize_advantage=True, ent_coef=m.ent_coef, vf_coef=m.vf_coef / 2, max_grad_norm=m.max_grad_norm,
        seed=seed, device="cpu", verbose=0,
    )
    record.setup_s = s.since_start()
    clock = _Clock(record, m.train_batch)
    # SB3's callback hooks; the class is built with type() since BaseCallback is untyped here
    progress = type("Progress", (callbacks.BaseCallback,), {
        "_on_rollout_start": lambda _self: clock.rollout_start(model.ep_info_buffer),
        "_on_rollout_end": lambda _self: clock.rollout_end(),
        "_on_step": lambda _self: True,
    })
    model.learn(total_timesteps=budget_steps, callback=progress())
    clock.rollout_start(model.ep_info_buffer)  # closes the last update
    env.close()
    return record


def main(argv: list[str]) -> None:
    """Run once and print the summary line (and write JSON with ``--out``)."""
    a.runner_main(argv, __doc__ or "", lambda args, m: run(m, args.seed, args.budget_steps))


if __name__ == "__main__":
    main(sys.argv[1:])
