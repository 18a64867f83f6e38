"""rxrl's IMPALA (or APPO) plan with the matched settings, on the Ray backend.

The plan is exactly `rxrl.algos.impala.plan` (`appo.plan` with ``--algo appo``); only its config
comes from `MatchedIMPALA`. Ray is started here with the hand-written loop's arguments before
`rxrl.run`, so both pay the same start-up; training time starts once `rxrl.run` returns (the
actors are constructed). Each record's staleness (min and max over the batch's fragments,
which with two fragments per batch are the two fragments' own) goes into the record's notes.

Run alone: ``python bench/rxrl_impala.py --budget-steps 50000 --seed 0``.
"""

from __future__ import annotations

import json
import sys
import time

import attrs
import impala_settings as i
import ppo_settings as s
import ray

import rxrl
from rxrl.algos import appo, impala
from rxrl.rl import APPOConfig, IMPALAConfig, PolicyConfig
from rxrl.rl.impala import VTraceMetrics


def config(m: i.MatchedIMPALA, seed: int, algo: str) -> impala.IMPALA | appo.APPO:
    """The matched settings as rxrl's `IMPALA` (or `APPO`) config."""
    common = dict(lr=m.lr, num_epochs=m.num_epochs, minibatch_size=m.minibatch_size, vf_coef=m.vf_coef,
                  ent_coef=m.ent_coef, max_grad_norm=m.max_grad_norm)
    settings = dict(env=m.env, seed=seed, num_workers=m.num_workers, num_envs_per_worker=m.envs_per_worker,
                    fragment_length=m.fragment_length, max_in_flight=m.max_in_flight,
                    train_batch_size=m.train_batch, gamma=m.gamma, lam=m.lam,
                    broadcast_interval=m.broadcast_interval, lr_decay_steps=None,
                    policy=PolicyConfig(hidden_sizes=m.hidden))
    if algo == "appo":
        return appo.APPO(**settings, learner=APPOConfig(**common))  # type: ignore[arg-type]
    return impala.IMPALA(**settings, learner=IMPALAConfig(**common))  # type: ignore[arg-type]


def run(m: i.MatchedIMPALA, seed: int, budget_steps: int, algo: str = "impala") -> s.RunRecord:
    """Train until ``budget_steps`` env steps were sampled; return the record of the run."""
    record = s.RunRecord(f"rxrl-{algo}", seed, budget_steps, attrs.asdict(m),
                         versions=s.versions(["rxrl", "ray", "torch", "gymnasium", "numpy"]))
    s.clean_ray_env()
    ray.init(**s.RAY_INIT)
    staleness: list[tuple[int, int, float]] = []
    plan = impala.plan if algo == "impala" else appo.plan
    try:
        with rxrl.run(plan(config(m, seed, algo)), backend="ray") as running:  # type: ignore[arg-type]
            record.setup_s = s.since_start()
            start = time.perf_counter()
            for metrics in running:
                t = metrics.train
                if isinstance(t, VTraceMetrics):
                    record.learner_s += t.learner_time_s
                    staleness.append((t.staleness_min, t.staleness_max, t.staleness_mean))
                record.add(time.perf_counter() - start, metrics.env_steps_sampled, metrics.env_steps_trained,
                           metrics.episode_return_mean)
                if not record.running():
                    break
    finally:
        ray.shutdown()
    record.notes.append("staleness " + json.dumps(staleness))
    return record


def main(argv: list[str]) -> None:
    """Run once and print the summary line (and write JSON with ``--out``)."""
    i.runner_main(argv, __doc__ or "", lambda args, m: run(m, args.seed, args.budget_steps, args.algo))


if __name__ == "__main__":
    main(sys.argv[1:])
