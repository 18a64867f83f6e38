"""Fragments for off-policy learners: `RolloutWorker.sample_fragment` and the `Fragment` layout."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from rxrl.rl import Fragment, IMPALALearner, RolloutWorker
from tests.rl.helpers import make_batch
from tests.rl.toy_env import TOY_ID, TOY_TRUNCATED_ID

SAME_STEP = {"autoreset_mode": AutoresetMode.SAME_STEP}
MODES = [pytest.param(None, id="next_step"), pytest.param(SAME_STEP, id="same_step")]


def twins(env: str, vector_kwargs: dict[str, Any] | None = None,
          **kw: Any) -> tuple[RolloutWorker, RolloutWorker]:
    """Two workers with the same seed: they step the same trajectories."""
    def make() -> RolloutWorker:
        return RolloutWorker(env, num_envs=3, fragment_length=10, vector_kwargs=vector_kwargs, **kw)
    return make(), make()


@pytest.mark.parametrize("vector_kwargs", MODES)
def test_a_fragment_holds_the_transitions_sample_would_return(vector_kwargs: dict[str, Any] | None) -> None:
    a, b = twins(TOY_ID, vector_kwargs)
    for _ in range(2):
        batch, frag = a.sample(), b.sample_fragment()
        for column in ("obs", "actions", "rewards", "terminateds", "truncateds", "logp", "values"):
            np.testing.assert_array_equal(getattr(frag.batch, column), getattr(batch, column))
        np.testing.assert_array_equal(frag.batch.episode_returns, batch.episode_returns)
        assert frag.batch.env_steps == batch.env_steps
        assert not frag.batch.advantages.any() and not frag.batch.value_targets.any()
        assert frag.length == 10 and frag.num_sequences == 3


@pytest.mark.parametrize("vector_kwargs", MODES)
def test_bootstrap_rows_are_sequence_ends_and_truncations_with_the_following_observation(
        vector_kwargs: dict[str, Any] | None) -> None:
    worker = RolloutWorker(TOY_TRUNCATED_ID, num_envs=3, fragment_length=10, vector_kwargs=vector_kwargs)
    frag = worker.sample_fragment()
    b = frag.batch
    truncated = np.flatnonzero(b.truncateds)
    assert len(truncated) >= 3 and not b.terminateds.any()
    ends = np.arange(9, 30, 10)
    np.testing.assert_array_equal(frag.bootstrap_rows, np.union1d(truncated, ends))
    for j, row in enumerate(frag.bootstrap_rows):
        obs, following = b.obs[row], frag.bootstrap_obs[j]
        if b.truncateds[row]:  # the final observation: the step counter moved on, the action recorded
            assert following[0] == obs[0] + 1 and following[1] == obs[1] and following[2] == b.actions[row]
        else:  # the fragment's end: the observation the next fragment starts from
            assert following[0] == obs[0] + 1 or following[0] == 0


def test_the_fragment_is_stamped_with_the_weights_version() -> None:
    worker = RolloutWorker(TOY_ID, num_envs=2, fragment_length=4)
    assert worker.sample_fragment().version == 0
    worker.set_weights(worker.get_weights(), version=7)
    assert worker.sample_fragment().version == 7
    worker.set_weights(worker.get_weights())  # no version given: unchanged
    assert worker.weights_version == 7


@pytest.mark.parametrize(("env", "vector_kwargs"), [
    (TOY_ID, None), (TOY_TRUNCATED_ID, None), (TOY_TRUNCATED_ID, SAME_STEP), ("CartPole-v1", None)])
@pytest.mark.parametrize("lam", [1.0, 0.9])
def test_on_policy_the_learners_vtrace_targets_are_the_workers_gae_targets(
        env: str, vector_kwargs: dict[str, Any] | None, lam: float) -> None:
    """Law: with the weights that sampled it, V-trace over a fragment (bootstrap observations
    evaluated by the learner's critic) gives the GAE(lam) value targets the worker computes,
    and with lam = 1 its advantages too."""
    a, b = twins(env, vector_kwargs, gamma=0.9, lam=lam, seed=3)
    learner = IMPALALearner(env, seed=3, lam=lam, gamma=0.9)
    batch, frag = a.sample(), b.sample_fragment()
    loss = learner.loss(frag)
    np.testing.assert_allclose(loss.values, batch.values, atol=1e-5)
    np.testing.assert_allclose(loss.vs, batch.value_targets, rtol=1e-4, atol=1e-4)
    if lam == 1.0:  # V-trace's policy-gradient advantage bootstraps from vs: GAE(1)'s only
        np.testing.assert_allclose(loss.advantages, batch.advantages, rtol=1e-4, atol=1e-4)


def fragment(n_seq: int, length: int, start: int = 0, version: int = 0) -> Fragment:
    """Rows numbered from ``start``; each sequence's last row bootstraps from ``-row``."""
    batch = make_batch(n_seq * length, start=start, episodes=1)
    ends = np.arange(length - 1, n_seq * length, length)
    return Fragment(batch, length, ends, -batch.obs[ends], version)


def test_concat_renumbers_bootstrap_rows_and_keeps_the_oldest_version() -> None:
    joined = Fragment.concat([fragment(2, 3, version=4), fragment(1, 3, start=6, version=2)])
    assert len(joined) == 9 and joined.num_sequences == 3 and joined.version == 2
    np.testing.assert_array_equal(joined.bootstrap_rows, [2, 5, 8])
    np.testing.assert_array_equal(joined.bootstrap_obs[:, 0], [-2, -5, -8])
    assert len(joined.batch.episode_returns) == 2
    with pytest.raises(ValueError, match="sequence lengths differ"):
        Fragment.concat([fragment(1, 3), fragment(1, 2)])


def test_sequences_picks_whole_sequences_with_their_bootstrap_rows() -> None:
    frag = fragment(3, 2)
    picked = frag.sequences(np.array([2, 0]))
    np.testing.assert_array_equal(picked.batch.obs[:, 0], [4, 5, 0, 1])
    np.testing.assert_array_equal(picked.bootstrap_rows, [1, 3])
    np.testing.assert_array_equal(picked.bootstrap_obs[:, 0], [-5, -1])
    np.testing.assert_array_equal(frag.time_major(frag.batch.rewards), [[0, 2, 4], [1, 3, 5]])
    np.testing.assert_array_equal(frag.next_values(frag.batch.rewards, np.array([10, 30, 50], np.float32)),
                                  [1, 10, 3, 30, 5, 50])


def test_a_malformed_fragment_is_refused() -> None:
    batch = make_batch(6)
    with pytest.raises(ValueError, match="not whole sequences of length 4"):
        Fragment(batch, 4, [3], batch.obs[:1])
    with pytest.raises(ValueError, match="last row of every sequence must be a bootstrap row"):
        Fragment(batch, 3, [2], batch.obs[:1])
    with pytest.raises(ValueError, match="2 bootstrap rows but 1 bootstrap observations"):
        Fragment(batch, 3, [2, 5], batch.obs[:1])

