"""rxrl's DQN plan (`rxrl.algos.qlearning.dqn`), or its Ape-X plan (``--apex``), with the matched settings.

The plan is exactly the algorithm's ``plan``; only its config comes from `Matched`. The run is
`rxrl_ppo.run_plan`'s: on Ray, Ray is started as ``rxrl train`` starts it, before `rxrl.run`
(which then reuses it); training time starts once the plan's actors are constructed.

Run alone: ``python bench/rxrl_dqn.py --budget-steps 50000 --seed 0 [--apex] [--lean | --replay-on-driver]
[--learner-process] [--backend ray|rx|reference]``. By default the config's placements are DQN's
(``auto``: on CartPole the learner and the replay on the driver, the learner on a thread of its
own); ``--learner-process`` puts the learner in a process (DQN's default before 2026-12-07).
"""

from __future__ import annotations

import argparse
import sys

import attrs
import dqn_settings as d
import ppo_settings as s
from rxrl_ppo import run_plan

from rxrl.algos.qlearning import apex, dqn
from rxrl.rl import DQNConfig, QNetConfig, ReplayConfig


def learner(m: d.Matched, prioritized: bool) -> DQNConfig:
    """The matched settings as rxrl's learner config (its replay prioritized for Ape-X)."""
    return DQNConfig(lr=m.lr, gamma=m.gamma, n_step=m.n_step, max_grad_norm=m.max_grad_norm,
                     target_update_interval=m.target_update_interval,
                     training_intensity=m.training_intensity, epsilon_start=m.epsilon_start,
                     epsilon_end=m.epsilon_end, exploration_fraction=m.exploration_fraction,
                     replay=ReplayConfig(capacity=m.capacity, batch_size=m.batch_size,
                                         learning_starts=m.learning_starts, prioritized=prioritized),
                     q_net=QNetConfig(hidden_sizes=m.hidden))


def dqn_config(m: d.Matched, seed: int) -> dqn.DQN:
    """The matched settings as rxrl's `DQN` config (a constant learning rate, as the peers')."""
    return dqn.DQN(env=m.env, seed=seed, num_workers=m.num_workers, num_envs_per_worker=m.envs_per_worker,
                   fragment_length=m.fragment_length, exploration_steps=m.exploration_steps,
                   learner=learner(m, prioritized=False), lr_decay=None)


def apex_config(m: d.Matched, seed: int) -> apex.ApeX:
    """The matched settings as rxrl's `ApeX` config (its other settings: `ApeX`'s defaults)."""
    return apex.ApeX(env=m.env, seed=seed, num_workers=m.num_workers, num_envs_per_worker=m.envs_per_worker,
                     fragment_length=m.fragment_length, learner=learner(m, prioritized=True))


def run(m: d.Matched, seed: int, budget_steps: int, backend: str = "ray", use_apex: bool = False,
        stop_at_target: bool = False, lean: bool = False, replay_on_driver: bool = False,
        learner_process: bool = False) -> s.RunRecord:
    """Train until `budget_steps` env steps were sampled; return the record of the run
    (``lean``: DQN's learner and replay in the driver's process; ``replay_on_driver``: the
    replay alone; ``learner_process``: the learner in a process of its own)."""
    name = (("rxrl-apex" if use_apex else "rxrl") + ("-lean" if lean else "")
            + ("-replay-driver" if replay_on_driver else "") + ("-learner-process" if learner_process else "")
            + ("" if backend == "ray" else f"-{backend}"))
    record = s.RunRecord(name, seed, budget_steps, attrs.asdict(m),
                         versions=s.versions(["rxrl", "ray", "torch", "gymnasium", "numpy", "reactivex"]))
    config = dqn_config(m, seed)
    if lean:
        config = attrs.evolve(config, learner_placement="driver", replay_placement="driver")
    elif replay_on_driver:
        config = attrs.evolve(config, replay_placement="driver", learner_placement="actor")
    if learner_process:
        config = attrs.evolve(config, learner_placement="actor")
    plan = apex.plan(apex_config(m, seed)) if use_apex else dqn.plan(config)
    return run_plan(record, plan, backend, lambda r: d.done(r, stop_at_target))


def main(argv: list[str]) -> None:
    """Run once and print the summary line (and write JSON with ``--out``)."""
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--backend", default="ray", choices=["ray", "rx", "reference"])
        parser.add_argument("--apex", action="store_true", help="the Ape-X plan")
        parser.add_argument("--lean", action="store_true",
                            help="DQN's learner and replay in the driver's process")
        parser.add_argument("--replay-on-driver", action="store_true",
                            help="DQN's replay in the driver's process (the learner in a process)")
        parser.add_argument("--learner-process", action="store_true",
                            help="DQN's learner in a process of its own")

    d.runner_main(argv, __doc__ or "", lambda a, m: run(m, a.seed, a.budget_steps, a.backend, a.apex,
                                                        a.stop_at_target, a.lean, a.replay_on_driver,
                                                        a.learner_process),
                    arguments)


if __name__ == "__main__":
    main(sys.argv[1:])
