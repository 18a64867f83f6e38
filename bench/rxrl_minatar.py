"""rxrl's PPO and DQN on MinAtar Breakout with the matched settings, trained through `rxrl.train`.

The library's entry point as a user calls it (docs/library.md): a config built from
`minatar_settings` (checked against it field by field before the run, and checked unchanged
when the run starts), the default Ray backend (a local Ray of the run's own; DQN: ``--set
backend=rx`` for the rx backend), 2 rollout
workers, no loggers, a checkpoint only at the end (``rxrl.train`` always writes one; its cost is
in the wall time, and the record notes it). A callback turns the run's records into the
`ppo_settings.RunRecord`: ``setup_s`` is the time from the process's start to the first
record (for DQN that includes sampling the first ``learning_starts`` transitions: its first
record is its first learner call), a curve point's ``time_s`` counts from there.

Run alone: ``python bench/rxrl_minatar.py --algo ppo --budget-steps 20000 --seed 0``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any, get_args

import attrs
import minatar_settings as ms
import ppo_settings as s

import rxrl
from rxrl.algos.common import AutoLearnerPlacement, RolloutSettings
from rxrl.algos.on_policy import ppo
from rxrl.algos.qlearning import dqn
from rxrl.algos.qlearning.common import ReplayPlacement
from rxrl.rl import DQNConfig, Metrics, PolicyConfig, PPOConfig, QNetConfig, ReplayConfig

VERSIONS = ["rxrl", "ray", "torch", "gymnasium", "numpy", "MinAtar"]


def ppo_config(m: ms.MatchedMinAtarPPO, seed: int) -> ppo.PPO:
    """The matched settings as rxrl's `PPO` config."""
    return ppo.PPO(env=m.env, seed=seed, num_workers=m.num_workers, num_envs_per_worker=m.envs_per_worker,
                   fragment_length=m.fragment_length, train_batch_size=m.train_batch, gamma=m.gamma,
                   lam=m.lam, learner_threads=m.torch_threads, lr_decay_steps=None,
                   policy=PolicyConfig(trunk="minatar_cnn"),
                   learner=PPOConfig(lr=m.lr, num_epochs=m.num_epochs, minibatch_size=m.minibatch_size,
                                     clip_coef=m.clip_coef, clip_vloss=False, vf_coef=m.vf_coef,
                                     ent_coef=m.ent_coef, max_grad_norm=m.max_grad_norm,
                                     normalize_advantages=True, adam_eps=m.adam_eps))


def dqn_config(m: ms.MatchedMinAtarDQN, seed: int, budget_steps: int) -> dqn.DQN:
    """The matched settings as rxrl's `DQN` config (epsilon decays over ``budget_steps``: a
    config given to `rxrl.train` is used as it is, so ``exploration_steps`` is set here)."""
    learner = DQNConfig(lr=m.lr, adam_eps=m.adam_eps, gamma=m.gamma, n_step=m.n_step, double_q=m.double_q,
                        huber_delta=m.huber_delta, max_grad_norm=m.max_grad_norm,
                        target_update_interval=m.target_update_interval, tau=1.0,
                        training_intensity=m.training_intensity, epsilon_start=m.epsilon_start,
                        epsilon_end=m.epsilon_end, exploration_fraction=m.exploration_fraction,
                        replay=ReplayConfig(capacity=m.capacity, batch_size=m.batch_size,
                                            learning_starts=m.learning_starts),
                        q_net=QNetConfig(trunk="minatar_cnn", dueling=False))
    return dqn.DQN(env=m.env, seed=seed, num_workers=m.num_workers, num_envs_per_worker=m.envs_per_worker,
                   fragment_length=m.fragment_length, exploration_steps=budget_steps,
                   lr_decay=m.lr_decay, updates_per_call=m.updates_per_call, learner_queue=m.learner_queue,
                   learner_threads=m.torch_threads, learner=learner,
                   replay_placement=choice(m.replay_placement, ReplayPlacement, "replay_placement"),
                   learner_placement=choice(m.learner_placement, AutoLearnerPlacement, "learner_placement"),
                   learner_cores=m.learner_cores, exact_intensity=m.exact_intensity)


def choice(name: str, kind: Any, setting: str) -> Any:
    """``name`` as a value of the ``Literal`` type ``kind``, or exit naming the choices."""
    for value in get_args(kind):
        if name == value:
            return value
    raise SystemExit(f"{setting}={name!r}: choose one of {list(get_args(kind))}")


def mismatches(config: RolloutSettings, m: ms.Matched, budget_steps: int) -> list[str]:
    """Every setting of ``config`` that differs from ``m`` (empty: matched), derived ones too."""
    c: Any = config
    pairs: dict[str, tuple[object, object]] = {
        "env": (c.env, m.env), "num_workers": (c.num_workers, m.num_workers),
        "envs_per_worker": (c.num_envs_per_worker, m.envs_per_worker),
        "fragment_length": (c.fragment_length, m.fragment_length),
        "torch_threads": (c.learner_threads, m.torch_threads),
    }
    if isinstance(m, ms.MatchedMinAtarPPO):
        lc = c.learner
        pairs |= {"train_batch": (c.train_batch_size, m.train_batch), "gamma": (c.gamma, m.gamma),
                  "lam": (c.lam, m.lam), "trunk": (c.policy.trunk, m.trunk),
                  "lr_decay_steps": (c.lr_decay_steps, None), "clip_vloss": (lc.clip_vloss, False),
                  "target_kl": (lc.target_kl, None), "normalize_advantages": (lc.normalize_advantages, True)}
        pairs |= {k: (getattr(lc, k), getattr(m, k)) for k in (
            "lr", "num_epochs", "minibatch_size", "clip_coef", "vf_coef", "ent_coef", "max_grad_norm",
            "adam_eps")}
    else:
        lc, replay = c.learner, c.learner.replay
        pairs |= {k: (getattr(lc, k), getattr(m, k)) for k in (
            "lr", "adam_eps", "gamma", "n_step", "double_q", "huber_delta", "max_grad_norm",
            "target_update_interval", "training_intensity", "epsilon_start", "epsilon_end",
            "exploration_fraction")}
        pairs |= {"capacity": (replay.capacity, m.capacity), "batch_size": (replay.batch_size, m.batch_size),
                  "learning_starts": (replay.learning_starts, m.learning_starts),
                  "prioritized": (replay.prioritized, False), "tau": (lc.tau, 1.0),
                  "trunk": (lc.q_net.trunk, m.trunk), "dueling": (lc.q_net.dueling, False),
                  "exploration_steps": (c.exploration_steps, budget_steps),
                  "lr_decay_steps": (c.learner_settings().lr_decay_steps, None),
                  "updates_per_call": (c.updates_per_call, m.updates_per_call),
                  "learner_queue": (c.learner_queue, m.learner_queue)}
        # the schedule the plan runs: optimizer steps per env step, env steps per target copy
        per_round = c.calls_per_round * c.updates_per_call
        pairs["env_steps_per_update"] = (c.round_size / per_round, m.env_steps_per_update)
        pairs["target_update_env_steps"] = (lc.target_update_interval * c.round_size / per_round,
                                            m.target_update_env_steps)
    return [f"{name}: rxrl {ours!r}, matched {theirs!r}" for name, (ours, theirs) in pairs.items()
            if ours != theirs]


class Recorder(rxrl.Callback):
    """Fills a `RunRecord` from the run's records: a curve point every ``every`` env steps
    (every record with 1) and at the budget; checks the run's config is ``config``."""

    def __init__(self, record: s.RunRecord, config: RolloutSettings, every: int) -> None:
        self.record, self.config, self.every = record, config, every
        self.next_point = 0
        self.offset: float | None = None  # wall time minus the plan's clock, at the first record
        self.last: tuple[float, Metrics] | None = None

    def on_start(self, trainer: rxrl.Trainer) -> None:
        """Refuse a run whose config is not the one built, and print its model."""
        from rxrl.cli.tools import model_line

        if trainer.config != self.config:
            raise SystemExit(f"rxrl.train changed the config: {trainer.config!r}")
        print(f"rxrl: {trainer.algo.name} {trainer.config.env}; {model_line(trainer.algo, trainer.config)}",
              flush=True)

    def on_iteration(self, trainer: rxrl.Trainer, record: Metrics) -> None:
        """Add a curve point when due; the first record ends the set-up."""
        now, r = s.since_start(), self.record
        if self.offset is None:
            r.setup_s, self.offset = now, now - record.time_s
        if record.train is not None:
            r.learner_s += record.train.learner_time_s
        self.last = (now, record)
        if record.env_steps_sampled >= self.next_point or record.env_steps_sampled >= r.budget_steps:
            r.add(now - r.setup_s, record.env_steps_sampled, record.env_steps_trained,
                  record.episode_return_mean)
            self.next_point = record.env_steps_sampled + self.every

    def end_overhead_s(self) -> float:
        """Wall time of the last record not on the plan's clock: the final checkpoint, mostly."""
        if self.last is None or self.offset is None:
            return 0.0
        now, last = self.last
        return now - last.time_s - self.offset


def run(m: ms.Matched, seed: int, budget_steps: int) -> s.RunRecord:
    """Train through `rxrl.train` until ``budget_steps`` env steps; the record of the run."""
    config: RolloutSettings
    if isinstance(m, ms.MatchedMinAtarPPO):
        config, every, name = ppo_config(m, seed), 1, "rxrl-ppo"
    else:
        config, every, name = dqn_config(m, seed, budget_steps), ms.RECORD_EVERY, "rxrl-dqn"
    problems = mismatches(config, m, budget_steps)
    if problems:
        raise SystemExit("the rxrl config does not match: " + "; ".join(problems))
    record = s.RunRecord(name, seed, budget_steps, attrs.asdict(m), versions=s.versions(VERSIONS))
    recorder = Recorder(record, config, every)
    s.clean_ray_env()
    with tempfile.TemporaryDirectory(prefix="rxrl-minatar-") as tmp:
        backend = m.backend if isinstance(m, ms.MatchedMinAtarDQN) else "ray"
        result = rxrl.train(config, Path(tmp) / "run", steps=budget_steps, backend=backend, loggers=[],
                            checkpoint_every=budget_steps, callbacks=[recorder])
    if result.status != "completed":
        record.notes.append(f"rxrl.train ended {result.status}")
    record.notes.append(f"final checkpoint and driver overhead at the last record: "
                        f"{recorder.end_overhead_s():.2f} s (in train_s)")
    return record


def main(argv: list[str]) -> None:
    """Run once and print the summary line (and write JSON with ``--out``)."""
    def run_args(args: argparse.Namespace, m: ms.Matched) -> s.RunRecord:
        return run(m, args.seed, args.budget_steps)

    ms.runner_main(argv, __doc__ or "", run_args)


if __name__ == "__main__":
    main(sys.argv[1:])
