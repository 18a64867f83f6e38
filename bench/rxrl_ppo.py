"""rxrl's PPO plan (`rxrl.algos.on_policy.ppo`) with the matched settings, on the Ray backend (or another).

The plan is exactly `rxrl.algos.on_policy.ppo.plan`; only its config comes from `Matched`. Ray is
started here as ``rxrl train`` starts it (`rxrl.training.setup.ray_init_options`: a lean local
Ray with a preloaded worker per actor; issue 14, item 10), before `rxrl.run` (which then
reuses it), after importing what the console script imports; `rxrl.run` returns once the
plan's actors are constructed, which is where training time starts. ``setup_s`` counts from
the process's start, as every system's does.

Run alone: ``python bench/rxrl_ppo.py --budget-steps 50000 --seed 0 [--backend ray|rx|reference]
[--learner-placement driver|actor]`` (the learner on the driver, PPO's default, or in an actor
process of its own: `bench/ppo_cartpole.py`'s ``rxrl-actor``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import get_args

import attrs
import ppo_settings as s
import ray

import rxrl
import rxrl.cli  # what the console script imports: its start-up, counted
from rxrl.algos.common import LearnerPlacement
from rxrl.algos.on_policy import ppo
from rxrl.backends.ray.connect import connect
from rxrl.rl import Metrics, PolicyConfig, PPOConfig
from rxrl.training.setup import ray_init_options


def config(m: s.Matched, seed: int, placement: LearnerPlacement = "driver") -> ppo.PPO:
    """The matched settings as rxrl's `PPO` config (its learner on the driver, PPO's default,
    or with ``placement="actor"`` in a process of its own)."""
    return ppo.PPO(
        learner_placement=placement,
        env=m.env, seed=seed, num_workers=m.num_workers, num_envs_per_worker=m.envs_per_worker,
        fragment_length=m.fragment_length, train_batch_size=m.train_batch, gamma=m.gamma, lam=m.lam,
        policy=PolicyConfig(hidden_sizes=m.hidden, activation="tanh" if m.activation == "tanh" else "relu"),
        learner=PPOConfig(lr=m.lr, num_epochs=m.num_epochs, minibatch_size=m.minibatch_size,
                          clip_coef=m.clip_coef, clip_vloss=False, vf_coef=m.vf_coef, ent_coef=m.ent_coef,
                          max_grad_norm=m.max_grad_norm, normalize_advantages=True),
    )


def run(m: s.Matched, seed: int, budget_steps: int, backend: str = "ray",
        timeline: Path | None = None, placement: LearnerPlacement = "driver") -> s.RunRecord:
    """Train until `budget_steps` env steps were sampled; return the record of the run.

    With `timeline`, Ray's task timeline (Chrome trace JSON) is written there before Ray
    shuts down (bench/ray_breakdown.py reads it).
    """
    name = "rxrl" if backend == "ray" else f"rxrl-{backend}"
    name += "-actor" if placement == "actor" else ""
    record = s.RunRecord(name, seed, budget_steps, attrs.asdict(m),
                         versions=s.versions(["rxrl", "ray", "torch", "gymnasium", "numpy", "reactivex"]))
    return run_plan(record, ppo.plan(config(m, seed, placement)), backend, lambda r: not r.running(),
                    timeline=timeline)


def run_plan(record: s.RunRecord, plan: rxrl.Plan[Metrics], backend: str,
             stop: Callable[[s.RunRecord], bool], observe: Callable[[Metrics], object] | None = None,
             timeline: Path | None = None) -> s.RunRecord:
    """Run ``plan`` on ``backend`` into ``record`` (every rxrl runner's loop) until ``stop``.

    On Ray, Ray is started first as ``rxrl train`` starts it (the module docstring). Each
    record's learner time, env steps and mean return are added; ``observe`` sees every record.
    With ``timeline``, Ray's task timeline is written there before Ray shuts down.
    """
    if backend == "ray":
        s.clean_ray_env()
        options = ray_init_options(plan)
        if timeline is not None:  # the timeline is made of the task events rxrl's Ray goes without
            del options["_system_config"]["task_events_report_interval_ms"]
        connect("local", options)
    try:
        with rxrl.run(plan, backend=backend) as running:
            record.setup_s = s.since_start()
            start = time.perf_counter()
            for metrics in running:
                if observe is not None:
                    observe(metrics)
                if metrics.train is not None:
                    record.learner_s += metrics.train.learner_time_s
                record.add(time.perf_counter() - start, metrics.env_steps_sampled, metrics.env_steps_trained,
                           metrics.episode_return_mean)
                if stop(record):
                    break
    finally:
        if ray.is_initialized():
            if timeline is not None:
                ray.timeline(filename=str(timeline))
            ray.shutdown()
    return record


def main(argv: list[str]) -> None:
    """Run once and print the summary line (and write JSON with ``--out``)."""
    def arguments(p: argparse.ArgumentParser) -> None:
        p.add_argument("--backend", default="ray", choices=["ray", "rx", "reference"])
        p.add_argument("--learner-placement", default="driver", choices=list(get_args(LearnerPlacement)))

    s.runner_main(argv, __doc__ or "", lambda args, m: run(m, args.seed, args.budget_steps, args.backend,
                                                           placement=args.learner_placement), arguments)


if __name__ == "__main__":
    main(sys.argv[1:])
