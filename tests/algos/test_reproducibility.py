"""On the reference backend an algorithm's run is a function of its seed, bit for bit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rxrl
from rxrl import ops
from rxrl.algos import get
from rxrl.algos.common import RolloutSettings
from rxrl.algos.configs import with_settings
from rxrl.rl import Learner, Metrics, Weights
from rxrl.training.checkpoint import deterministic_fields

SMALL = {"num_workers": 2, "num_envs_per_worker": 2, "fragment_length": 16}
CONFIGS: dict[str, dict[str, Any]] = {
    "ppo": {**SMALL, "train_batch_size": 96, "learner.minibatch_size": 32, "learner.num_epochs": 2},
    "a2c": {**SMALL, "train_batch_size": 64},
    "a3c": {**SMALL, "max_in_flight": 2},
    "impala": {**SMALL, "train_batch_size": 64, "learner.minibatch_size": 32, "max_in_flight": 2},
    "appo": {**SMALL, "train_batch_size": 64, "learner.minibatch_size": 32, "max_in_flight": 2},
}


def learner_weights(learner: Learner, _: Metrics) -> Weights:
    """The learner's weights after the update a record reports."""
    return learner.get_weights()


def run(name: str, seed: int, iterations: int = 4,
        schedule: rxrl.Schedule | None = None) -> tuple[list[dict[str, float]], Weights]:
    """``iterations`` records of a small run of ``name`` (their exact fields) and the final weights."""
    algo = get(name)
    config: RolloutSettings = with_settings(algo.config(), {**CONFIGS[name], "seed": seed})
    plan, actors = algo.build(config)
    records: list[dict[str, float]] = []
    tapped = (plan | ops.tap(lambda m: records.append(deterministic_fields(m)))
              | ops.call(actors.learner, learner_weights) | ops.take(iterations))
    weights = list(rxrl.run(tapped, "reference", schedule=schedule))[-1]
    return records, weights


@pytest.mark.parametrize("name", ["ppo", "a2c", "a3c", "impala", "appo"])
def test_a_run_is_reproducible_from_its_seed(name: str) -> None:
    records, weights = run(name, seed=3)
    again, weights_again = run(name, seed=3)
    assert records == again
    assert weights.keys() == weights_again.keys()
    assert all(np.array_equal(weights[k], weights_again[k]) for k in weights)
    assert records[-1]["train/num_updates"] >= 1 and records[-1]["env_steps_sampled"] > 0


@pytest.mark.parametrize("name", ["ppo", "a3c", "impala"])
def test_another_seed_gives_another_run(name: str) -> None:
    records, weights = run(name, seed=3)
    other, other_weights = run(name, seed=4)
    assert records != other
    assert not all(np.array_equal(weights[k], other_weights[k]) for k in weights)


@pytest.mark.parametrize("name", ["a3c", "impala", "appo"])
def test_an_asynchronous_run_under_a_random_schedule_is_reproduced_by_its_trace(name: str) -> None:
    algo = get(name)
    config = with_settings(algo.config(), CONFIGS[name])

    def records(schedule: rxrl.Schedule | rxrl.Trace) -> tuple[list[dict[str, float]], rxrl.Trace]:
        """Six records under ``schedule``, and the run's trace."""
        with rxrl.run(algo.plan(config, None) | ops.take(6), schedule=schedule) as r:
            out = [deterministic_fields(m) for m in r]
            return out, r.trace

    first, trace = records(rxrl.Schedule.random(11))
    assert len(trace) >= 6
    replayed, _ = records(trace)
    assert replayed == first
    round_robin, _ = records(rxrl.Schedule.round_robin())
    assert round_robin != first or next(iter(trace.choices.values()))[:6] == (0, 1, 0, 1, 0, 1)
