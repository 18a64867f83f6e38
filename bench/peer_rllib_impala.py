"""RLlib 2.60's IMPALA or APPO (new API stack) with the matched settings of `MatchedIMPALA`.

2 env runners x 8 envs (gymnasium "sync" vectorization), rollout fragments of 32, train batches
of 512 per learner, 2 epochs of minibatches of 128, lr 1e-3, vf_loss_coeff 0.5 (RLlib's IMPALA
and APPO weight 0.5 * MSE as rxrl does), no entropy bonus, grad clip 0.5 by global norm,
broadcast interval 1, V-trace clips 1, 64x64 tanh with a separate value trunk, one local
learner; APPO: clip 0.4, target network every update, no KL loss, its circular buffer off
(each batch trained its 2 epochs once, as rxrl does). Not matched: RLlib's V-trace has no
lambda (rxrl uses 0.95), and one iteration is at least ``min_time_s_per_iteration`` = 1 s.

Run alone: ``python bench/peer_rllib_impala.py --budget-steps 50000 --seed 0 [--algo appo]``.
"""

from __future__ import annotations

import collections
import math
import sys
import time
from typing import Any

import attrs
import impala_settings as i
import ppo_settings as s
from peer_rllib import RETURNS_KEY, _get, log_episode_return, start_ray


def config(m: i.MatchedIMPALA, seed: int, algo: str) -> Any:
    """RLlib's `IMPALAConfig` / `APPOConfig` for the matched settings."""
    model: Any = s.optional("ray.rllib.core.rl_module.default_model_config")
    module: Any = s.optional(f"ray.rllib.algorithms.{algo}")
    cfg = (module.APPOConfig() if algo == "appo" else module.IMPALAConfig()).environment(m.env)
    cfg = cfg.framework("torch").debugging(seed=seed).reporting(
        metrics_num_episodes_for_smoothing=100, min_time_s_per_iteration=1)
    cfg = cfg.callbacks(on_episode_end=log_episode_return)
    cfg = cfg.env_runners(num_env_runners=m.num_workers, num_envs_per_env_runner=m.envs_per_worker,
                          rollout_fragment_length=m.fragment_length)
    training: dict[str, Any] = dict(
        lr=m.lr, gamma=m.gamma, vf_loss_coeff=m.vf_coef, entropy_coeff=m.ent_coef,
        grad_clip=m.max_grad_norm, grad_clip_by="global_norm", num_epochs=m.num_epochs,
        minibatch_size=m.minibatch_size, train_batch_size_per_learner=m.train_batch,
        broadcast_interval=m.broadcast_interval, vtrace_clip_rho_threshold=1.0,
        vtrace_clip_pg_rho_threshold=1.0)
    if algo == "appo":
        training.update(clip_param=0.4, use_kl_loss=False, target_network_update_freq=1,
                        use_circular_buffer=False)
    cfg = cfg.training(**training).learners(num_learners=0)  # a local learner: 2 cores hold no third actor
    return cfg.rl_module(model_config=model.DefaultModelConfig(
        fcnet_hiddens=list(m.hidden), fcnet_activation="tanh", vf_share_layers=False))


def run(m: i.MatchedIMPALA, seed: int, budget_steps: int, algo: str) -> s.RunRecord:
    """Train until ``budget_steps`` env steps were sampled; return the record of the run."""
    import ray

    record = s.RunRecord(f"rllib-{algo}", seed, budget_steps, attrs.asdict(m),
                         versions=s.versions(["ray", "torch", "gymnasium", "numpy"]))
    start_ray()
    try:
        trainer = config(m, seed, algo).build_algo()
        record.setup_s = s.since_start()
        start = time.perf_counter()
        returns: collections.deque[float] = collections.deque(maxlen=100)
        while record.running():
            result = trainer.train()
            sampled = int(_find(result, "num_env_steps_sampled_lifetime") or 0)
            finished = _get(result, "env_runners", RETURNS_KEY, default=[])
            returns.extend(float(r) for r in (finished if isinstance(finished, list) else [finished]))
            mean = sum(returns) / len(returns) if returns else math.nan
            record.add(time.perf_counter() - start, sampled, 0, mean)
        trainer.stop()
    finally:
        ray.shutdown()
    record.notes.append("trained steps not recorded: RLlib's num_env_steps_trained_lifetime counts "
                        "every minibatch pass of every epoch")
    return record


def _find(node: Any, key: str) -> Any:
    """The first value of ``key`` in a nested result dict (breadth first), or None."""
    level = [node]
    while level:
        for d in level:
            if isinstance(d, dict) and key in d:
                return d[key]
        level = [v for d in level if isinstance(d, dict) for v in d.values() if isinstance(v, dict)]
    return None


def main(argv: list[str]) -> None:
    """Run once and print the summary line (and write JSON with ``--out``)."""
    i.runner_main(argv, __doc__ or "", lambda args, m: run(m, args.seed, args.budget_steps, args.algo))


if __name__ == "__main__":
    main(sys.argv[1:])
