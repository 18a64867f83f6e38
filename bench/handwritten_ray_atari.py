"""PPO and IMPALA on Atari written by hand on Ray: the baselines rxrl's plans must match there.

The loops are the CartPole ones, unchanged (`handwritten_ray_ppo._train`,
`handwritten_ray_impala._train`: ``ray.remote`` actors, ``ray.wait`` as the barrier or over
the sample requests, fragments passed to the learner as object refs); only the actors are
built from `atari_settings.MatchedAtari`: `rxrl.rl.RolloutWorker` on the preprocessed env
(uint8 frames) and `rxrl.rl.PPOLearner` / `rxrl.rl.IMPALALearner` with the Nature CNN
(``trunk="auto"``), as rxrl's plans build them.

Run alone: ``python bench/handwritten_ray_atari.py --budget-steps 20000 --seed 0 [--algo impala]``.
"""

from __future__ import annotations

import sys
from typing import Any

import atari_settings as a
import attrs
import handwritten_ray_impala as hi
import handwritten_ray_ppo as hp
import impala_settings as i
import ppo_settings as s
import ray

from rxrl.rl import IMPALAConfig, IMPALALearner, PPOConfig, PPOLearner, RolloutWorker


class PPOBatchLearner(hp.BatchLearner):
    """`handwritten_ray_ppo.BatchLearner` with the Atari PPO learner."""

    def __init__(self, m: a.MatchedAtari, seed: int) -> None:
        import torch

        torch.set_num_threads(m.learner_threads)
        config = PPOConfig(lr=m.lr, num_epochs=m.num_epochs, minibatch_size=m.minibatch_size,
                           clip_coef=m.clip_coef, clip_vloss=False, vf_coef=m.vf_coef, ent_coef=m.ent_coef,
                           max_grad_norm=m.max_grad_norm)
        self.learner = PPOLearner(m.env, config, seed=seed, env_kwargs=m.env_kwargs())


class VTraceLearner(hi.Learner):
    """`handwritten_ray_impala.Learner` with the Atari IMPALA learner."""

    def __init__(self, m: a.MatchedAtari, seed: int) -> None:
        import torch

        torch.set_num_threads(m.impala_learner_threads)
        config = IMPALAConfig(lr=m.impala_lr, num_epochs=m.impala_num_epochs,
                              minibatch_size=m.impala_minibatch_size, vf_coef=m.vf_coef,
                              ent_coef=m.ent_coef, max_grad_norm=m.max_grad_norm)
        self.m = schedule(m)
        self.learner = IMPALALearner(m.env, config, seed=seed, env_kwargs=m.env_kwargs(), gamma=m.gamma,
                                     lam=m.lam)


def schedule(m: a.MatchedAtari) -> i.MatchedIMPALA:
    """IMPALA's schedule settings (what `handwritten_ray_impala._train` reads) from ``m``."""
    return i.MatchedIMPALA(num_workers=m.num_workers, envs_per_worker=m.envs_per_worker,
                           fragment_length=m.impala_fragment_length, max_in_flight=1,
                           train_batch=m.impala_train_batch, env=m.env)


def run(m: a.MatchedAtari, seed: int, budget_steps: int, algo: str = "ppo") -> s.RunRecord:
    """Train until ``budget_steps`` env steps were sampled; return the record of the run."""
    if algo not in ("ppo", "impala"):
        raise SystemExit(f"handwritten_ray_atari.py: --algo ppo or impala, not {algo}")
    record = s.RunRecord(f"handwritten-{algo}", seed, budget_steps, attrs.asdict(m),
                         versions=s.versions(["ray", "torch", "gymnasium", "ale-py", "numpy"]))
    fragment = m.fragment_length if algo == "ppo" else m.impala_fragment_length
    hp.ray_init()
    try:
        worker_cls = ray.remote(RolloutWorker if algo == "ppo" else hi.Worker)
        workers: list[Any] = [
            worker_cls.remote(m.env, num_envs=m.envs_per_worker, fragment_length=fragment, seed=seed,
                              worker_index=w, gamma=m.gamma, lam=m.lam, env_kwargs=m.env_kwargs(),
                              torch_threads=1)
            for w in range(m.num_workers)]
        learner: Any = ray.remote(PPOBatchLearner if algo == "ppo" else VTraceLearner).remote(m, seed)
        ray.get([w.get_weights.remote() for w in workers] + [learner.__ray_ready__.remote()])
        record.setup_s = s.since_start()
        if algo == "ppo":
            hp._train(workers, learner, record)
        else:
            hi._train(schedule(m), workers, learner, record)
    finally:
        ray.shutdown()
    return record


def main(argv: list[str]) -> None:
    """Run once and print the summary line (and write JSON with ``--out``)."""
    a.runner_main(argv, __doc__ or "", lambda args, m: run(m, args.seed, args.budget_steps, args.algo))


if __name__ == "__main__":
    main(sys.argv[1:])
