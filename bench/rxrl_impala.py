"""rxrl's IMPALA (or APPO) plan with the matched settings, on the Ray backend.

The plan is exactly `rxrl.algos.vtrace.impala.plan` (`appo.plan` with ``--algo appo``); only its config
comes from `MatchedIMPALA`. The run is `rxrl_ppo.run_plan`'s: Ray is started as ``rxrl
train`` starts it, before `rxrl.run`; training time starts once `rxrl.run` returns (the
actors are constructed), so start-up, which differs from the hand-written loop's, is not in
the rates. Each record's staleness (min and max over the batch's fragments,
which with two fragments per batch are the two fragments' own) goes into the record's notes.

Run alone: ``python bench/rxrl_impala.py --budget-steps 50000 --seed 0``.
"""

from __future__ import annotations

import json
import sys

import attrs
import impala_settings as i
import ppo_settings as s
from rxrl_ppo import run_plan

from rxrl.algos.vtrace import appo, impala
from rxrl.rl import APPOConfig, IMPALAConfig, Metrics, PolicyConfig
from rxrl.rl.learners.vtrace import VTraceMetrics


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
    staleness: list[tuple[int, int, float]] = []

    def observe(metrics: Metrics) -> None:
        if isinstance(t := metrics.train, VTraceMetrics):
            staleness.append((t.staleness_min, t.staleness_max, t.staleness_mean))

    plan = impala.plan if algo == "impala" else appo.plan
    run_plan(record, plan(config(m, seed, algo)), "ray", lambda r: not r.running(), observe)  # type: ignore[arg-type]
    record.notes.append("staleness " + json.dumps(staleness))
    return record


def main(argv: list[str]) -> None:
    """Run once and print the summary line (and write JSON with ``--out``)."""
    i.runner_main(argv, __doc__ or "", lambda args, m: run(m, args.seed, args.budget_steps, args.algo))


if __name__ == "__main__":
    main(sys.argv[1:])
