"""rxrl's PPO (or IMPALA/APPO) plan on Atari with the matched settings, on the Ray backend.

The plans are exactly `rxrl.algos.on_policy.ppo.plan` and `rxrl.algos.vtrace.impala.plan`
(`appo.plan`); only their configs come from `atari_settings.MatchedAtari`. The policy's trunk
is ``"auto"``, which is the Nature CNN for 84×84 frames. The run is `rxrl_ppo.run_plan`'s: Ray
is started as ``rxrl train`` starts it; training time starts once `rxrl.run` returns.

Run alone: ``python bench/rxrl_atari.py --budget-steps 20000 --seed 0 [--algo impala]``.
"""

from __future__ import annotations

import sys

import atari_settings as a
import attrs
import ppo_settings as s
from rxrl_ppo import run_plan

import rxrl
from rxrl.algos.on_policy import ppo
from rxrl.algos.vtrace import appo, impala
from rxrl.rl import APPOConfig, IMPALAConfig, Metrics, PPOConfig


def ppo_config(m: a.MatchedAtari, seed: int) -> ppo.PPO:
    """The matched settings as rxrl's `PPO` config."""
    return ppo.PPO(env=m.env, env_kwargs=m.env_kwargs(), seed=seed, num_workers=m.num_workers,
                   num_envs_per_worker=m.envs_per_worker, fragment_length=m.fragment_length,
                   train_batch_size=m.train_batch, gamma=m.gamma, lam=m.lam,
                   learner_threads=m.learner_threads,
                   learner=PPOConfig(lr=m.lr, num_epochs=m.num_epochs, minibatch_size=m.minibatch_size,
                                     clip_coef=m.clip_coef, clip_vloss=False, vf_coef=m.vf_coef,
                                     ent_coef=m.ent_coef, max_grad_norm=m.max_grad_norm))


def vtrace_config(m: a.MatchedAtari, seed: int, algo: str) -> impala.IMPALA | appo.APPO:
    """The matched settings as rxrl's `IMPALA` (or `APPO`) config."""
    common = dict(lr=m.impala_lr, num_epochs=m.impala_num_epochs, minibatch_size=m.impala_minibatch_size,
                  vf_coef=m.vf_coef, ent_coef=m.ent_coef, max_grad_norm=m.max_grad_norm)
    settings = dict(env=m.env, env_kwargs=m.env_kwargs(), seed=seed, num_workers=m.num_workers,
                    num_envs_per_worker=m.envs_per_worker, fragment_length=m.impala_fragment_length,
                    max_in_flight=1, train_batch_size=m.impala_train_batch, gamma=m.gamma, lam=m.lam,
                    broadcast_interval=1, lr_decay_steps=None, learner_threads=m.impala_learner_threads)
    if algo == "appo":
        return appo.APPO(**settings, learner=APPOConfig(**common))  # type: ignore[arg-type]
    return impala.IMPALA(**settings, learner=IMPALAConfig(**common))  # type: ignore[arg-type]


def run(m: a.MatchedAtari, seed: int, budget_steps: int, algo: str = "ppo") -> s.RunRecord:
    """Train until ``budget_steps`` env steps were sampled; return the record of the run."""
    record = s.RunRecord(f"rxrl-{algo}", seed, budget_steps, attrs.asdict(m),
                         versions=s.versions(["rxrl", "ray", "torch", "gymnasium", "ale-py", "numpy"]))
    plan: rxrl.Plan[Metrics]
    if algo == "ppo":
        plan = ppo.plan(ppo_config(m, seed))
    else:
        config = vtrace_config(m, seed, algo)
        plan = appo.plan(config) if isinstance(config, appo.APPO) else impala.plan(config)
    return run_plan(record, plan, "ray", lambda r: not r.running())


def main(argv: list[str]) -> None:
    """Run once and print the summary line (and write JSON with ``--out``)."""
    a.runner_main(argv, __doc__ or "", lambda args, m: run(m, args.seed, args.budget_steps, args.algo))


if __name__ == "__main__":
    main(sys.argv[1:])
