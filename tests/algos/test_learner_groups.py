"""A PPO plan with a learner group (``learner.num_learners``): the group, in the plan and on
every backend.

Laws: a run with n learners follows the run with one learner (same seed) to float tolerance —
the group computes the same steps (tests/rl/test_learner_group.py has the per-step law); and
a group's run is the same on every backend, bit for bit (its members meet in one gloo
allreduce whichever backend runs them).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rxrl
from rxrl import ops
from rxrl.algos import get
from rxrl.algos.configs import with_settings
from rxrl.rl import Learner, Metrics, Weights
from rxrl.training.checkpoint import deterministic_fields

SMALL = {"num_workers": 2, "num_envs_per_worker": 2, "fragment_length": 16, "train_batch_size": 96,
         "learner.minibatch_size": 32, "learner.num_epochs": 2, "seed": 5}


def learner_weights(learner: Learner, _: Metrics) -> Weights:
    """The learner's weights after the update a record reports."""
    return learner.get_weights()


def run(settings: dict[str, Any], backend: str = "reference",
        iterations: int = 3) -> tuple[list[dict[str, float]], Weights]:
    """``iterations`` records of a small PPO run (their exact fields) and the final weights."""
    algo = get("ppo")
    plan, actors = algo.build(with_settings(algo.config(), {**SMALL, **settings}))
    records: list[dict[str, float]] = []
    tapped = (plan | ops.tap(lambda m: records.append(deterministic_fields(m)))
              | ops.call(actors.learner, learner_weights) | ops.take(iterations))
    with rxrl.run(tapped, backend) as r:
        weights = list(r)[-1]
    return records, weights


def test_the_plan_shows_the_group_and_its_call() -> None:
    algo = get("ppo")
    plan, actors = algo.build(with_settings(algo.config(), {**SMALL, "learner.num_learners": 2}))
    shown = rxrl.show(plan)
    assert "call_all(PPOLearner-allreduce×2, train_on_fragments)" in shown
    assert actors.learner.size == 2


def test_two_learners_follow_one() -> None:
    one, w1 = run({})
    two, w2 = run({"learner.num_learners": 2})
    assert [r["env_steps_sampled"] for r in two] == [r["env_steps_sampled"] for r in one]
    for a, b in zip(one, two, strict=True):
        assert b["train/policy_loss"] == pytest.approx(a["train/policy_loss"], rel=1e-3, abs=1e-5)
    assert all(np.allclose(w1[k], w2[k], rtol=1e-4, atol=1e-5) for k in w1)


@pytest.mark.parametrize("backend", ["rx", "ray"])
def test_a_group_run_is_the_same_on_every_backend(backend: str, request: pytest.FixtureRequest) -> None:
    if backend == "ray":
        request.getfixturevalue("ray_session")
    expected, w = run({"learner.num_learners": 2})
    got, w_got = run({"learner.num_learners": 2}, backend)
    assert got == expected
    assert all(np.array_equal(w[k], w_got[k]) for k in w)


def test_a_recurrent_policy_is_refused_in_one_line() -> None:
    algo = get("ppo")
    config = with_settings(algo.config(), {**SMALL, "learner.num_learners": 2, "policy.recurrent": "lstm"})
    with pytest.raises(ValueError, match=r"recurrent policy .* trains with one learner"):
        algo.build(config)


VTRACE = {"num_workers": 2, "num_envs_per_worker": 2, "fragment_length": 16, "train_batch_size": 64,
          "learner.minibatch_size": 32, "max_in_flight": 2, "seed": 5}


def vtrace_records(name: str, settings: dict[str, Any], backend: str = "reference",
                   schedule: rxrl.Schedule | rxrl.Trace | None = None,
                   iterations: int = 4) -> tuple[list[dict[str, float]], rxrl.Trace]:
    """``iterations`` records of a small IMPALA/APPO run and its trace."""
    algo = get(name)
    plan = algo.plan(with_settings(algo.config(), {**VTRACE, **settings}), None)
    with rxrl.run(plan | ops.take(iterations), backend, schedule=schedule) as r:
        return [deterministic_fields(m) for m in r], r.trace


@pytest.mark.parametrize("name", ["impala", "appo"])
def test_a_vtrace_group_follows_one_learner(name: str) -> None:
    """Under one schedule, 2 learners give the records one learner gives (float tolerance)."""
    one, _ = vtrace_records(name, {})
    two, _ = vtrace_records(name, {"learner.num_learners": 2})
    assert [r["env_steps_sampled"] for r in two] == [r["env_steps_sampled"] for r in one]
    for a, b in zip(one, two, strict=True):
        assert b["train/value_loss"] == pytest.approx(a["train/value_loss"], rel=1e-3, abs=1e-5)
    algo = get(name)
    plan = algo.plan(with_settings(algo.config(), {**VTRACE, "learner.num_learners": 2}), None)
    assert "| call_all(" in rxrl.show(plan) and "| map(first_reply)" in rxrl.show(plan)


@pytest.mark.parametrize("name", ["impala", "appo"])
def test_a_ray_vtrace_group_run_replays_exactly(name: str, ray_session: None) -> None:
    """The replay law with a learner group: the Ray run's trace, replayed by the reference
    interpreter, gives the same records bit for bit."""
    got, trace = vtrace_records(name, {"learner.num_learners": 2}, "ray")
    replayed, _ = vtrace_records(name, {"learner.num_learners": 2}, schedule=trace)
    assert replayed == got


DQN_SMALL = {"num_workers": 2, "fragment_length": 8, "seed": 5, "learner.replay.batch_size": 16,
             "learner.replay.learning_starts": 64, "learner.training_intensity": 8.0}


def dqn_records(settings: dict[str, Any], backend: str = "reference",
                schedule: rxrl.Schedule | rxrl.Trace | None = None,
                iterations: int = 4) -> tuple[list[dict[str, float]], rxrl.Trace]:
    """``iterations`` records of a small DQN run and its trace."""
    algo = get("dqn")
    plan = algo.plan(with_settings(algo.config(), {**DQN_SMALL, **settings}), None)
    with rxrl.run(plan | ops.take(iterations), backend, schedule=schedule) as r:
        return [deterministic_fields(m) for m in r], r.trace


def test_a_dqn_group_follows_one_learner() -> None:
    one, _ = dqn_records({})
    two, _ = dqn_records({"learner.num_learners": 2})
    assert [r["env_steps_sampled"] for r in two] == [r["env_steps_sampled"] for r in one]
    for a, b in zip(one, two, strict=True):
        assert b["train/value_loss"] == pytest.approx(a["train/value_loss"], rel=1e-3, abs=1e-6)
    algo = get("dqn")
    shown = rxrl.show(algo.plan(with_settings(algo.config(), {**DQN_SMALL, "learner.num_learners": 2}), None))
    assert "call_all(DQNLearner-allreduce×2, train_on_batches" in shown


def test_a_ray_dqn_group_run_replays_exactly(ray_session: None) -> None:
    got, trace = dqn_records({"learner.num_learners": 2}, "ray")
    replayed, _ = dqn_records({"learner.num_learners": 2}, schedule=trace)
    assert replayed == got


def test_apex_refuses_a_learner_group_in_one_line() -> None:
    algo = get("apex")
    with pytest.raises(ValueError, match="Ape-X trains with one learner"):
        with_settings(algo.config(), {"learner.num_learners": 2})
