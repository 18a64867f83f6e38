"""RLlib 2.60's PPO or APPO (new API stack) on Atari with its own Atari wrappers and the matched settings.

Ray is started as `peer_rllib` starts it (`ppo_settings.RAY_INIT`); 2 env runners × 4 envs
(gymnasium "sync" vectorization) of a ``frameskip=1`` v5 env with sticky actions 0.25, wrapped
by RLlib's ``wrap_atari_for_new_api_stack`` (84×84 grayscale, frame skip 4 with the max of the
last two, up to 30 no-ops, one life per episode, a stack of 4) and RLlib's ``ClipRewardEnv``
(sign); returns are the games' raw scores, read below the wrappers (`GameScore`). The model is
RLlib's default CNN: the Nature CNN's convolutions ("valid" padding), shared by a policy and a
value head of 512 units each. One local learner, its torch threads as `MatchedAtari` says.
PPO: fragments of 128, batches of 1,024, 4 epochs of minibatches of 256, lr 2.5e-4, clip 0.1,
no KL loss, no value clipping, ``vf_loss_coeff = vf_coef / 2`` (RLlib weights the plain MSE).
APPO: fragments of 32, batches of 512, one epoch of one minibatch, lr 5e-4, ``vf_loss_coeff =
vf_coef`` (0.5 · MSE, as rxrl), clip 0.4, target network every update, no KL loss, no circular
buffer, V-trace clips 1 and no lambda, iterations of at least 1 s.

Not matched (RLlib's wrappers and model): `FireResetEnv` presses FIRE then action 2 at every
reset (game or life) and a lost life's reset steps one no-op, agent steps not counted; frames
are resized before they are max-pooled; episodes are cut at 108,000 frames; observations are
float32 in [-1, 1] (4× the bytes of uint8); the policy and the value function have a 512-unit
layer each where the Nature CNN shares one.

Run alone: ``python bench/peer_rllib_atari.py --budget-steps 20000 --seed 0 [--algo appo]``.
"""

from __future__ import annotations

import collections
import math
import sys
import time
from typing import Any, SupportsFloat

import atari_settings as a
import attrs
import gymnasium as gym
import ppo_settings as s
from peer_rllib import RETURNS_KEY, _get, _time_learner_updates, start_ray
from peer_rllib_impala import _find

#: the registered name of `make_env`, and the info key of a finished game's score
ENV_NAME, GAME_SCORE = "bench-atari", "bench_game_score"


class GameScore(gym.Wrapper[Any, Any, Any, Any]):
    """Puts the game's raw score into the info of the step that ends it (under RLlib's wrappers,
    which end an episode at every lost life and clip rewards)."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.score = 0.0

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the game, adding up its score."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.score += float(reward)
        if terminated or truncated:
            info = {**info, GAME_SCORE: self.score}
        return obs, reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Any, dict[str, Any]]:
        """Reset the game and its score."""
        self.score = 0.0
        return self.env.reset(seed=seed, options=options)


def make_env(config: dict[str, Any]) -> gym.Env[Any, Any]:
    """One game wrapped as RLlib's Atari examples wrap it (`config`: `MatchedAtari`'s fields)."""
    import ale_py

    wrappers: Any = s.optional("ray.rllib.env.wrappers.atari_wrappers")
    gym.register_envs(ale_py)
    env = gym.make(config["env"], frameskip=1, repeat_action_probability=config["repeat_action_probability"])
    env = wrappers.wrap_atari_for_new_api_stack(
        GameScore(env), dim=config["screen_size"], frameskip=config["frame_skip"],
        framestack=config["frame_stack"])
    clipped: gym.Env[Any, Any] = wrappers.ClipRewardEnv(env)
    return clipped


def log_game_score(*, episode: Any, metrics_logger: Any, **_: Any) -> None:
    """RLlib callback (runs on the env runners): report the score of a game that ended with
    this episode (an episode that ended at a lost life reports none)."""
    score = episode.get_infos(-1).get(GAME_SCORE)
    if score is not None:
        metrics_logger.log_value(RETURNS_KEY, float(score), reduce="item_series")


def config(m: a.MatchedAtari, seed: int, algo: str) -> Any:
    """RLlib's `PPOConfig` / `APPOConfig` for the matched settings."""
    model: Any = s.optional("ray.rllib.core.rl_module.default_model_config")
    module: Any = s.optional(f"ray.rllib.algorithms.{algo}")
    cfg = (module.APPOConfig() if algo == "appo" else module.PPOConfig()).environment(
        ENV_NAME, env_config=attrs.asdict(m))
    cfg = cfg.framework("torch").debugging(seed=seed).callbacks(on_episode_end=log_game_score)
    common: dict[str, Any] = dict(gamma=m.gamma, entropy_coeff=m.ent_coef, grad_clip=m.max_grad_norm,
                                  grad_clip_by="global_norm", use_kl_loss=False)
    if algo == "appo":
        cfg = cfg.reporting(min_time_s_per_iteration=1).training(
            **common, lr=m.impala_lr, vf_loss_coeff=m.vf_coef, num_epochs=m.impala_num_epochs,
            minibatch_size=m.impala_minibatch_size, train_batch_size_per_learner=m.impala_train_batch,
            clip_param=0.4, target_network_update_freq=1, use_circular_buffer=False, broadcast_interval=1,
            vtrace_clip_rho_threshold=1.0, vtrace_clip_pg_rho_threshold=1.0)
    else:
        cfg = cfg.training(
            **common, lr=m.lr, lambda_=m.lam, clip_param=m.clip_coef, vf_clip_param=math.inf,
            vf_loss_coeff=m.vf_coef / 2, num_epochs=m.num_epochs, minibatch_size=m.minibatch_size,
            train_batch_size_per_learner=m.train_batch)
    fragment = m.impala_fragment_length if algo == "appo" else m.fragment_length
    cfg = cfg.env_runners(num_env_runners=m.num_workers, num_envs_per_env_runner=m.envs_per_worker,
                          rollout_fragment_length=fragment)
    nature = [[32, [8, 8], 4, "valid"], [64, [4, 4], 2, "valid"], [64, [3, 3], 1, "valid"]]
    return cfg.learners(num_learners=0).rl_module(model_config=model.DefaultModelConfig(
        conv_filters=nature, conv_activation="relu", head_fcnet_hiddens=[512], head_fcnet_activation="relu",
        vf_share_layers=True))


def run(m: a.MatchedAtari, seed: int, budget_steps: int, algo: str) -> s.RunRecord:
    """Train until ``budget_steps`` agent steps were sampled; return the record of the run."""
    import ray
    import torch

    if algo not in ("ppo", "appo"):
        raise SystemExit(f"peer_rllib_atari.py: --algo {algo} is not run here; use ppo or appo")
    record = s.RunRecord(f"rllib-{algo}", seed, budget_steps, attrs.asdict(m),
                         versions=s.versions(["ray", "torch", "gymnasium", "ale-py", "numpy"]))
    start_ray()
    torch.set_num_threads(m.impala_learner_threads if algo == "appo" else m.learner_threads)
    s.optional("ray.tune.registry").register_env(ENV_NAME, make_env)
    try:
        trainer = config(m, seed, algo).build_algo()
        learner_time = _time_learner_updates(trainer)
        record.setup_s = s.since_start()
        start = time.perf_counter()
        scores: collections.deque[float] = collections.deque(maxlen=100)
        while record.running():
            result = trainer.train()
            sampled = int(_find(result, "num_env_steps_sampled_lifetime") or 0)
            finished = _get(result, "env_runners", RETURNS_KEY, default=[])
            scores.extend(float(r) for r in (finished if isinstance(finished, list) else [finished]))
            trained = sampled if algo == "ppo" else 0  # PPO trains on all it samples
            record.learner_s = learner_time[0]
            record.add(time.perf_counter() - start, sampled, trained, sum(scores) / len(scores) if scores
                       else math.nan)
        trainer.stop()
    finally:
        ray.shutdown()
    if algo == "appo":
        record.notes.append("trained steps not recorded: RLlib's num_env_steps_trained_lifetime read "
                            "over twice the steps sampled here (1 epoch, 1 minibatch)")
    return record


def main(argv: list[str]) -> None:
    """Run once and print the summary line (and write JSON with ``--out``)."""
    a.runner_main(argv, __doc__ or "", lambda args, m: run(m, args.seed, args.budget_steps, args.algo))


if __name__ == "__main__":
    main(sys.argv[1:])
