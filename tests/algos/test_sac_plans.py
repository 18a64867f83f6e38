"""The SAC plan: its shape, every backend, reproducibility, the update-to-data ratio, a Ray run
replayed from its trace, and a learning smoke test on Pendulum."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pytest
import torch

import rxrl
from rxrl import ops
from rxrl.algos.qlearning import sac
from rxrl.cli.tools import episode_returns
from rxrl.rl import Metrics, ReplayConfig, SACConfig, Weights
from rxrl.rl.learners.sac import SACLearner
from rxrl.training.checkpoint import deterministic_fields
from tests.algos.records import identical, records

SAC_SHAPE = """\
concurrently(mode='round_robin', weights=[2.0, 1], emit=[0])
├─ from_actors(ReplayShard×1, sample_batches)  [×1 shards]
│  | gather(max_in_flight=1)
│  | call(SACLearner×1, train_on_batches, max_in_flight=2)
│  | broadcast(SACRolloutWorker×2, set_q_weights)
│  | map(QProgress.observe_trained)
└─ from_actors(SACRolloutWorker×2, SACRolloutWorker.sample)  [×2 shards]
   | barrier()
   | call(ReplayShard×1, store_round)
   | map(QProgress.observe_stored_round)"""


def small_sac(**kwargs: Any) -> sac.SAC:
    """2 workers of 8 steps a round, training from 32 transitions on, 4 steps of batches of 16
    per call, one update per env step: 4 calls per round."""
    learner = SACConfig(hidden_sizes=(16, 16), replay=ReplayConfig(capacity=2000, batch_size=16,
                                                                   learning_starts=32))
    return sac.SAC(**{"fragment_length": 8, "updates_per_call": 4, "learner": learner, **kwargs})


def test_sac_is_dqns_store_and_train_flows_with_sacs_actors() -> None:
    assert rxrl.show(sac.plan(sac.SAC())) == SAC_SHAPE
    assert sac.SAC().calls_per_round == 2.0  # 1 update per step x 64 steps / 32 per call
    assert small_sac().calls_per_round == 4.0


@pytest.mark.parametrize("backend", ["reference", "rx", "ray"])
@pytest.mark.timeout(180)
def test_sac_gives_the_same_records_on_every_backend(backend: str, request: pytest.FixtureRequest) -> None:
    """SAC has no choice point (one replay shard, round-robin weights): every backend runs the
    reference's run."""
    if backend == "ray":
        request.getfixturevalue("ray_session")
    expected, _ = records(sac.plan(small_sac()), 10)
    got, trace = records(sac.plan(small_sac()), 10, backend)
    assert identical(got, expected)
    assert got[-1]["train/num_updates"] == 4 and got[-1]["env_steps_trained"] == 10 * 4 * 16
    if backend == "ray":  # the trace of a Ray run replays on the reference backend
        replayed, _ = records(sac.plan(small_sac()), 10, "reference", schedule=trace)
        assert identical(replayed, got)


def test_the_update_to_data_ratio_holds_exactly() -> None:
    """After learning starts, each round of 16 env steps is followed by 4 calls of 4 updates:
    one update per env step sampled."""
    got, _ = records(sac.plan(small_sac()), 24)
    rounds = [r["env_steps_sampled"] for r in got]
    assert all(len(set(rounds[i:i + 4])) == 1 for i in range(0, 24, 4))  # four calls per round
    assert all(b - a == 16 for a, b in zip(rounds[::4], rounds[4::4], strict=False))
    updates = 4 * np.arange(1, 25)
    assert [r["env_steps_trained"] / 16 for r in got] == updates.tolist()


def actor_weights(learner: SACLearner, _: Metrics) -> Weights:
    """The learner's actor after the call a record reports."""
    return learner.get_weights()


def sac_run(seed: int) -> tuple[list[dict[str, float]], Weights]:
    """Eight records of a small SAC run and the learner's final actor."""
    config = small_sac(seed=seed)
    actors = sac.groups(config)
    seen: list[dict[str, float]] = []
    plan = (sac.plan(config, actors) | ops.tap(lambda m: seen.append(deterministic_fields(m)))
            | ops.call(actors.learner, actor_weights) | ops.take(8))
    return seen, list(rxrl.run(plan, "reference"))[-1]


def test_sac_is_reproducible_bit_for_bit_from_its_seed() -> None:
    first, weights = sac_run(seed=3)
    again, weights_again = sac_run(seed=3)
    assert identical(first, again)
    assert all(np.array_equal(weights[k], weights_again[k]) for k in weights)
    _, other_weights = sac_run(seed=4)
    assert not all(np.array_equal(weights[k], other_weights[k]) for k in weights)


def test_sac_settings_that_do_not_apply_name_the_ones_that_do() -> None:
    with pytest.raises(ValueError, match=r"SAC\.gamma does not apply to SAC: set learner\.gamma"):
        sac.SAC(gamma=0.9)
    with pytest.raises(ValueError, match="needs a bounded 1-D Box"):
        sac.groups(sac.SAC(env="CartPole-v1"))


@pytest.mark.timeout(300)
def test_sac_learns_pendulum_a_little_in_a_few_thousand_steps() -> None:
    """Smoke test: the initial actor's greedy Pendulum episodes return about -1200 or less;
    after 5k env steps of SAC (small nets, learning from 500 steps on) the greedy actor's
    three evaluation episodes average above -800."""
    learner = attrs.evolve(SACConfig(hidden_sizes=(64, 64)),
                           replay=ReplayConfig(capacity=10_000, batch_size=128, learning_starts=500))
    config = sac.SAC(learner=learner, fragment_length=50, updates_per_call=50)
    actors = sac.groups(config)
    plan = (sac.plan(config, actors) | ops.filter(lambda m: m.env_steps_sampled >= 5000)
            | ops.call(actors.learner, actor_weights) | ops.take(1))
    trained = next(iter(rxrl.run(plan)))
    greedy = [sac.greedy(config, {"policy": {k: torch.as_tensor(v) for k, v in weights.items()}})
              for weights in (SACLearner("Pendulum-v1", learner).get_weights(), trained)]
    before, after = (np.mean(episode_returns("Pendulum-v1", {}, act, 3, seed=0)) for act in greedy)
    assert before < -1000
    assert after > -800
