"""DD-PPO: every worker a learner, gradients summed over the group before each step.

Laws: the members stay in lockstep — after every iteration all of them hold the same
parameters, bit for bit (they start from one seed and take the same summed steps); and a run
is the same on every backend (the reference runs the members on threads, Ray in processes;
they meet in the same gloo allreduce).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rxrl
from rxrl import ops
from rxrl.algos import get
from rxrl.algos.configs import with_settings
from rxrl.rl import Metrics, Weights
from rxrl.training.checkpoint import deterministic_fields

SMALL = {"num_workers": 3, "num_envs_per_worker": 2, "fragment_length": 16,
         "learner.minibatch_size": 8, "learner.num_epochs": 2, "seed": 2}


def weights(member: Any, _: Metrics) -> Weights:
    """A member's weights after the update a record reports."""
    w: Weights = member.get_weights()
    return w


def run(backend: str, iterations: int = 3) -> tuple[list[dict[str, float]], list[list[Weights]]]:
    """``iterations`` records of a small DD-PPO run and every member's weights after each."""
    algo = get("ddppo")
    plan, actors = algo.build(with_settings(algo.config(), SMALL))
    records: list[dict[str, float]] = []
    tapped = (plan | ops.tap(lambda m: records.append(deterministic_fields(m)))
              | ops.call_all(actors.learner, weights) | ops.take(iterations))
    with rxrl.run(tapped, backend) as r:
        return records, list(r)


def test_the_members_stay_in_lockstep() -> None:
    records, rounds = run("reference")
    assert len(rounds) == 3
    for members in rounds:
        first = members[0]
        for other in members[1:]:
            assert all(np.array_equal(first[k], other[k]) for k in first)
    assert not all(np.array_equal(rounds[0][0][k], rounds[-1][0][k]) for k in rounds[0][0])
    # each record counts every member's env steps: 3 members x 2 envs x 16 transitions (and
    # the autoreset steps between episodes)
    steps = [r["env_steps_sampled"] for r in records]
    assert all(96 * (i + 1) <= s < 96 * (i + 1) + 12 * (i + 1) for i, s in enumerate(steps))


@pytest.mark.parametrize("backend", ["rx", "ray"])
def test_a_ddppo_run_is_the_same_on_every_backend(backend: str, request: pytest.FixtureRequest) -> None:
    if backend == "ray":
        request.getfixturevalue("ray_session")
    expected, expected_weights = run("reference")
    got, got_weights = run(backend)
    assert got == expected
    for a, b in zip(expected_weights, got_weights, strict=True):
        assert all(np.array_equal(a[0][k], b[0][k]) for k in a[0])


@pytest.mark.parametrize(("settings", "message"), [
    ({"learner.num_learners": 2}, "num_learners does not apply"),
    ({"learner.minibatch_size": 64}, r"must not exceed a member's batch"),
    ({"learner_placement": "driver"}, "members are actors"),
])
def test_bad_settings_are_refused_in_one_line(settings: dict[str, Any], message: str) -> None:
    algo = get("ddppo")
    with pytest.raises(ValueError, match=message):
        with_settings(algo.config(), {**SMALL, **settings})
