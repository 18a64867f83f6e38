"""RLlib 2.60's DQN (new API stack) with the matched settings.

How the settings map: 2 env runners x 1 env, fragments of 16; a uniform `EpisodeReplayBuffer`
of `capacity`; `train_batch_size_per_learner` 128; lr 1e-3, `adam_epsilon` 1e-8; 3-step, double
DQN, Huber (`td_error_loss_fn="huber"`), `grad_clip` 10 by global norm; epsilon 1 -> 0.05 over
`exploration_fraction * exploration_steps` env steps (RLlib's schedule is piecewise linear in
env steps). RLlib's `target_network_update_freq` counts env steps sampled: 4x the matched
optimizer steps. RLlib's `training_intensity` is divided by a "native ratio" of
`train_batch / (fragment * envs * (env_runners + 1))` and rounded to whole updates per
training step (a step samples one fragment per runner); it is set so that a training step of
32 env steps runs 8 updates of 128 (32 replayed per sampled). Q-network: 128x128 ReLU encoder,
a linear Q head (`head_fcnet_hiddens=[]`), no dueling. Returns: the mean of the last 100
episodes, computed on the driver from every finished episode (as bench/peer_rllib.py does).

Run alone (in a venv with RLlib's dependencies): ``python bench/peer_rllib_dqn.py --budget-steps 20000``.
"""

from __future__ import annotations

import collections
import math
import sys
import time
from typing import Any

import attrs
import dqn_settings as d
import peer_rllib
import ppo_settings as s


def config(m: d.Matched, seed: int) -> Any:
    """RLlib's `DQNConfig` for the matched settings."""
    dqn: Any = s.optional("ray.rllib.algorithms.dqn")
    model: Any = s.optional("ray.rllib.core.rl_module.default_model_config")
    updates = m.fragment_length * m.num_envs * m.training_intensity / m.batch_size  # per training step
    native = m.batch_size / (m.fragment_length * m.envs_per_worker * (m.num_workers + 1))
    decay = round(m.exploration_fraction * m.exploration_steps)
    cfg = dqn.DQNConfig().environment(m.env).framework("torch").debugging(seed=seed)
    cfg = cfg.reporting(metrics_num_episodes_for_smoothing=100).callbacks(
        on_episode_end=peer_rllib.log_episode_return)
    cfg = cfg.env_runners(num_env_runners=m.num_workers, num_envs_per_env_runner=m.envs_per_worker,
                          rollout_fragment_length=m.fragment_length)
    cfg = cfg.training(
        lr=m.lr, gamma=m.gamma, train_batch_size_per_learner=m.batch_size, n_step=m.n_step, double_q=True,
        dueling=False, td_error_loss_fn="huber", grad_clip=m.max_grad_norm, grad_clip_by="global_norm",
        adam_epsilon=1e-8,
        target_network_update_freq=round(m.target_update_interval * m.env_steps_per_update),
        num_steps_sampled_before_learning_starts=m.learning_starts, training_intensity=updates * native,
        epsilon=[[0, m.epsilon_start], [decay, m.epsilon_end]],
        replay_buffer_config={"type": "EpisodeReplayBuffer", "capacity": m.capacity})
    return cfg.rl_module(model_config=model.DefaultModelConfig(
        fcnet_hiddens=list(m.hidden), fcnet_activation="relu", head_fcnet_hiddens=[]))


def run(m: d.Matched, seed: int, budget_steps: int, stop_at_target: bool = False) -> s.RunRecord:
    """Train until `budget_steps` env steps were sampled; return the record of the run."""
    import ray

    record = s.RunRecord("rllib", seed, budget_steps, attrs.asdict(m),
                         versions=s.versions(["ray", "torch", "gymnasium", "numpy"]))
    peer_rllib.start_ray()
    try:
        algo = config(m, seed).build_algo()
        learner_time = peer_rllib._time_learner_updates(algo)
        record.setup_s = s.since_start()
        start = time.perf_counter()
        returns: collections.deque[float] = collections.deque(maxlen=100)
        while not d.done(record, stop_at_target):
            result = algo.train()
            sampled = int(peer_rllib._get(result, "env_runners", "num_env_steps_sampled_lifetime"))
            trained = int(peer_rllib._get(result, "learners", "__all_modules__",
                                          "num_env_steps_trained_lifetime", default=0))
            finished = peer_rllib._get(result, "env_runners", peer_rllib.RETURNS_KEY, default=[])
            returns.extend(float(r) for r in (finished if isinstance(finished, list) else [finished]))
            record.learner_s = learner_time[0]
            mean = sum(returns) / len(returns) if len(returns) else math.nan
            record.add(time.perf_counter() - start, sampled, trained, mean)
        algo.stop()
    finally:
        ray.shutdown()
    return record


def main(argv: list[str]) -> None:
    """Run once and print the summary line (and write JSON with ``--out``)."""
    d.runner_main(argv, __doc__ or "", lambda a, m: run(m, a.seed, a.budget_steps, a.stop_at_target))


if __name__ == "__main__":
    main(sys.argv[1:])
