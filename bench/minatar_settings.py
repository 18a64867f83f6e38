"""The MinAtar Breakout settings of bench/minatar_breakout.py (issue 23), and its runners' command line.

Two frozen values, one per algorithm: `MatchedMinAtarPPO` and `MatchedMinAtarDQN`. rxrl's
runner (bench/rxrl_minatar.py) turns them into rxrl configs trained through `rxrl.train`; the
CleanRL-style peer (bench/cleanrl_minatar.py) reads them as its constants. Both write one
`ppo_settings.RunRecord` (JSON) per run; ``return_mean`` is the mean return of the last 100
episodes. The env is ``MinAtar/Breakout-v1`` as `rxrl.envs.minatar.make_minatar_env` makes it
for both: ``[4, 10, 10]`` uint8 of 0/1, MinAtar's sticky actions (0.1), the minimal action set
(3 actions), no time limit. The model is MinAtar's network, rxrl's ``minatar_cnn``
(`rxrl.rl.models.cnn.minatar_cnn`): conv 16 3×3 stride 1, ReLU, linear 128, ReLU, orthogonal
weights of gain sqrt 2 and zero biases, the 0/1 pixels not scaled.

One mismatch for PPO: rxrl's on-policy workers step gymnasium's NEXT_STEP autoreset, so the
step after an episode's end only resets that env, yields no transition and counts as an env
step sampled (2.4 % of PPO's steps in 6k-step smoke runs, fewer as episodes lengthen); the
peer's SAME_STEP envs waste none. At the same env steps rxrl has trained on that much less.
rxrl's DQN workers step SAME_STEP, as the peer's (since 2026-12-07:
`rxrl.envs.vector.same_step_unless_native`).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable

import attrs
import ppo_settings as s

#: the DQN runners add a curve point every this many env steps (and at the end)
RECORD_EVERY = 5_000


@attrs.frozen
class MatchedMinAtarPPO:
    """PPO on the ``minatar_cnn`` torso with a linear policy head (orthogonal, gain 0.01) and a
    linear value head (gain 1), both on the one torso (rxrl's CNN policies; CleanRL's
    ``ppo_atari`` Agent).

    CleanRL's PPO (``ppo.py`` / ``ppo_atari.py``): 4 epochs of minibatches of 256, gamma 0.99,
    GAE lambda 0.95, clip 0.2, value weight 0.5 (``vf_coef * 0.5 * E[(v - R)^2]``), entropy
    0.01, global gradient norm 0.5, Adam eps 1e-5, advantages standardized per minibatch. lr
    5e-4 is rxrl's tuned MinAtar step (`rxrl.algos.on_policy.ppo.MINATAR`; pgx's PureJaxRL-derived
    MinAtar PPO uses 3e-4 at 4,096 envs), held constant here (rxrl train decays it). No value
    clipping (bench/cleanrl_ppo.py's choice; CleanRL clips).
    A batch is ``num_workers × envs_per_worker × fragment_length`` = 2 × 8 × 128 = 2,048
    transitions; the peer steps all 16 envs in one process.
    """

    env: str = "MinAtar/Breakout-v1"
    num_workers: int = 2
    envs_per_worker: int = 8
    fragment_length: int = 128
    num_epochs: int = 4
    minibatch_size: int = 256
    lr: float = 5e-4
    gamma: float = 0.99
    lam: float = 0.95
    clip_coef: float = 0.2
    vf_coef: float = 0.5
    ent_coef: float = 0.01
    max_grad_norm: float = 0.5
    adam_eps: float = 1e-5
    trunk: str = "minatar_cnn"
    #: torch threads of rxrl's learner (on the driver) and of the peer's process. One: a
    #: minibatch step of this CNN took 16 ms on 1 thread and 250 ms on 2 on the shared 2-core
    #: machine at load 7 (torch's threads spin against the load); ``--set torch_threads=2``
    #: gives both systems a second core on a quiet machine
    torch_threads: int = 1

    @property
    def num_envs(self) -> int:
        """Envs in all (the peer steps them in one process)."""
        return self.num_workers * self.envs_per_worker

    @property
    def train_batch(self) -> int:
        """Transitions per iteration."""
        return self.num_envs * self.fragment_length


@attrs.frozen
class MatchedMinAtarDQN:
    """DQN on the ``minatar_cnn`` torso with a linear Q head (PyTorch's default init, as
    rxrl's Q-nets and CleanRL's have it), no dueling.

    CleanRL's ``dqn_atari.py``: Adam lr 1e-4 (eps 1e-8), batches of 32, one optimizer step
    every 4 env steps (rxrl: ``training_intensity`` 8 replayed transitions per env step
    sampled, 8 × 4 = 32), gamma 0.99, 1-step targets, no double Q, epsilon 1 → 0.01 over the
    first 10 % of the run, no gradient clipping (rxrl: ``max_grad_norm=None``). From the MinAtar
    baselines rather than Atari's: a buffer of 100,000 and learning from 5,000 transitions.

    Not matched exactly, the nearest taken:

    - the target net: CleanRL copies it every 1,000 *env* steps
      (``target_network_frequency``), rxrl every ``target_update_interval`` *optimizer* steps:
      250 (= 1,000 env steps at one step per 4).
    - the loss: CleanRL's ``dqn_atari`` takes the mean squared TD error; rxrl has only the
      Huber loss (``huber_delta`` > 0, finite), so both use Huber with delta 1 (the Nature
      DQN's, SB3's).
    - the sampling: rxrl's 2 workers × 1 env step 16 env steps per round with the weights of
      the round's start (the learner's call pipelined ``learner_queue`` = 2 deep: up to one
      call older); the peer steps the same 2 envs in one vector env and acts with the latest
      weights at every step (CleanRL: 1 env).
    - the schedule of steps: rxrl trains 8 optimizer steps per 32-step round, the peer one
      every 4 env steps (2 vector steps); both start once the replay holds 5,000 transitions.
    """

    env: str = "MinAtar/Breakout-v1"
    num_workers: int = 2
    envs_per_worker: int = 1
    fragment_length: int = 16
    lr: float = 1e-4
    #: rxrl's `DQN.lr_decay` (its default 2.0 halves the rate by the end of the run): None, a
    #: constant rate, as the peer's. Before 2026-12-07 (seventh session) the bench left rxrl's
    #: default on, so every MinAtar DQN figure before then trained rxrl at a rate falling to
    #: 5e-5 against the peer's 1e-4 (the check of the settings did not read the decay)
    lr_decay: float | None = None
    adam_eps: float = 1e-8
    gamma: float = 0.99
    n_step: int = 1
    double_q: bool = False
    huber_delta: float = 1.0
    max_grad_norm: float | None = None
    capacity: int = 100_000
    batch_size: int = 32
    learning_starts: int = 5_000
    training_intensity: float = 8.0
    target_update_interval: int = 250
    epsilon_start: float = 1.0
    epsilon_end: float = 0.01
    exploration_fraction: float = 0.1
    #: rxrl's learner calls: 8 optimizer steps each, 2 in flight (its defaults)
    updates_per_call: int = 8
    learner_queue: int = 2
    trunk: str = "minatar_cnn"
    #: torch threads of rxrl's learner (an actor, training beside the workers) and of the peer
    torch_threads: int = 1
    #: rxrl only: where its replay lives (`rxrl.algos.qlearning.QSettings.replay_placement`);
    #: the peer's is in its one process
    replay_placement: str = "auto"
    #: rxrl only: where its learner lives (`rxrl.algos.qlearning.dqn.DQN.learner_placement`:
    #: "auto", its default since 2026-12-07, follows the replay; "actor": a process)
    learner_placement: str = "auto"
    #: rxrl only: CPUs of the learner's own (`rxrl.algos.common.RolloutSettings.learner_cores`,
    #: opt-in, default 0): the learner's thread on the driver has one CPU of the two, the
    #: workers and the driver's routing the other (2026-12-07: 150k steps, 103.8 s of training
    #: against 114.7 s shared; docs/benchmarks.md, "A learner's own cores"). ``--set
    #: learner_cores=0`` measures rxrl's default
    learner_cores: int = 1
    #: rxrl: the replay holds the learner to the training intensity (`QSettings.exact_intensity`),
    #: counted from ``learning_starts``: the peer's optimizer steps (7.96M at 1M env steps)
    #: to within one call. Without it rxrl trained 8.08M (1.6 % more: the learner took a turn
    #: more whenever a round was still being sampled), on the critical path of its wall time
    exact_intensity: bool = False
    #: rxrl only: the backend it runs on ("ray", the default; "rx": one process, threads)
    backend: str = "ray"

    @property
    def num_envs(self) -> int:
        """Envs in all (the peer steps them in one process)."""
        return self.num_workers * self.envs_per_worker

    @property
    def env_steps_per_update(self) -> float:
        """Env steps sampled per optimizer step: ``batch_size / training_intensity`` (4)."""
        return self.batch_size / self.training_intensity

    @property
    def target_update_env_steps(self) -> float:
        """Env steps between target copies (1,000, CleanRL's ``target_network_frequency``)."""
        return self.target_update_interval * self.env_steps_per_update


Matched = MatchedMinAtarPPO | MatchedMinAtarDQN


def matched(algo: str) -> Matched:
    """The settings of ``algo`` ("ppo" or "dqn")."""
    if algo == "ppo":
        return MatchedMinAtarPPO()
    if algo == "dqn":
        return MatchedMinAtarDQN()
    raise SystemExit(f"--algo {algo!r}: choose ppo or dqn")


def override(m: Matched, assignments: list[str]) -> Matched:
    """``m`` with ``name=value`` assignments applied (`ppo_settings.override`)."""
    return s.override(m, assignments)


def final_return(record: s.RunRecord) -> float:
    """The mean return of the last 100 episodes at the run's end (NaN if none ended)."""
    return record.curve[-1].return_mean if record.curve else math.nan


def wall_s(record: s.RunRecord) -> float:
    """Set-up plus training: from the process's start to the last record."""
    return record.setup_s + record.train_s


def steady_rate(record: s.RunRecord) -> float:
    """Env steps sampled per second between the first and the last curve point (the first
    iteration's start-up left out, alike for both systems)."""
    if len(record.curve) < 2:
        return record.env_steps_sampled / record.train_s if record.train_s else math.nan
    first, last = record.curve[0], record.curve[-1]
    seconds = last.time_s - first.time_s
    return (last.env_steps_sampled - first.env_steps_sampled) / seconds if seconds > 0 else math.nan


def runner_main(argv: list[str], doc: str, run: Callable[[argparse.Namespace, Matched], s.RunRecord]) -> None:
    """One system's command line: run once, print a line, write the JSON record with ``--out``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--algo", default="ppo", choices=["ppo", "dqn"])
    parser.add_argument("--budget-steps", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--out", help="write the run's JSON record here")
    args = parser.parse_args(argv)
    record = run(args, override(matched(args.algo), args.set))
    print(f"{record.system}: {record.env_steps_sampled} steps in {record.train_s:.1f} s "
          f"({steady_rate(record):,.0f} steps/s sampled), trained {record.env_steps_trained}, "
          f"learner {record.learner_s:.1f} s, setup {record.setup_s:.1f} s, wall {wall_s(record):.1f} s, "
          f"final return {final_return(record):.2f}", flush=True)
    if args.out:
        from pathlib import Path

        record.write(Path(args.out))


__all__ = ["RECORD_EVERY", "Matched", "MatchedMinAtarDQN", "MatchedMinAtarPPO", "final_return", "matched",
           "override", "runner_main", "steady_rate", "wall_s"]

if __name__ == "__main__":
    sys.exit("run bench/minatar_breakout.py")
