"""Multi-agent batches and rollouts: select/concat per policy, the mapping respected, agents that
join and leave bookkept as PettingZoo defines them, GAE per agent trajectory."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from rxrl.rl.data.batch import SampleBatch
from rxrl.rl.data.multiagent import MultiAgentBatch, policy_mapping_fn
from rxrl.rl.objectives.gae import compute_gae
from rxrl.rl.workers.multi_agent import MultiAgentRolloutWorker, QPolicySpec, policy_seed

RELAY = "tests.rl.ma_toy_env:make"


def _worker(fragment_length: int = 5, **kwargs: object) -> MultiAgentRolloutWorker:
    return MultiAgentRolloutWorker(RELAY, num_envs=1, fragment_length=fragment_length, torch_threads=None,
                                   **kwargs)  # type: ignore[arg-type]


def _rows(n: int, start: float = 0.0) -> SampleBatch:
    f = np.arange(start, start + n, dtype=np.float32)
    return SampleBatch(obs=f[:, None], actions=np.zeros(n, np.int64), rewards=f, terminateds=f < 0,
                       truncateds=f < 0, logp=f, values=f, advantages=f, value_targets=f)


def test_select_keeps_only_the_named_policies_and_every_statistic() -> None:
    batch = MultiAgentBatch({"a": _rows(3), "b": _rows(2)}, env_steps=7, agent_steps=5,
                            episode_returns=np.array([1.0], np.float32), episode_lengths=np.array([7]),
                            agent_returns={"a": np.array([1.0], np.float32)})
    chosen = batch.select(["b"])
    assert chosen.policies == ["b"] and len(chosen) == 2
    assert (chosen.env_steps, chosen.agent_steps, chosen.episode_returns.tolist()) == (7, 5, [1.0])
    assert batch.select([]).policies == [] and batch.episodes().policies == []


def test_concat_is_per_policy_concatenation() -> None:
    one = MultiAgentBatch({"a": _rows(3), "b": _rows(2)}, env_steps=3, agent_steps=5)
    two = MultiAgentBatch({"a": _rows(1, 10.0), "b": _rows(4, 20.0)}, env_steps=4, agent_steps=5,
                          agent_returns={"b": np.array([2.0], np.float32)})
    joined = MultiAgentBatch.concat([one, two])
    for pid in ("a", "b"):
        expected = SampleBatch.concat([one.policy_batches[pid], two.policy_batches[pid]])
        assert joined.policy_batches[pid].rewards.tolist() == expected.rewards.tolist()
    assert (joined.env_steps, joined.agent_steps) == (7, 10)
    assert {k: v.tolist() for k, v in joined.agent_returns.items()} == {"b": [2.0]}
    with pytest.raises(ValueError, match=r"batch 0 has policies \[.a., .b.\], batch 1 \[.a.\]"):
        MultiAgentBatch.concat([one, one.select(["a"])])


def test_agents_that_join_and_leave_are_counted_per_agent_and_in_total() -> None:
    batch = _worker().sample()
    a, b = batch.policy_batches["a"], batch.policy_batches["b"]
    assert (len(a), len(b)) == (3, 3)
    assert a.terminateds.tolist() == [False, False, True] and not a.truncateds.any()
    assert b.truncateds.tolist() == [False, False, True] and not b.terminateds.any()
    assert a.obs[:, 0].tolist() == [0, 1, 2] and b.obs[:, 0].tolist() == [2, 3, 4]  # b joined after step 1
    assert {k: v.tolist() for k, v in batch.agent_returns.items()} == {"a": [3.0], "b": [30.0]}
    assert (batch.episode_returns.tolist(), batch.episode_lengths.tolist()) == ([33.0], [5])
    assert (batch.env_steps, batch.agent_steps) == (5, 6)
    assert a.episode_returns.tolist() == [3.0] and b.episode_returns.tolist() == [30.0]


def _gae(worker: MultiAgentRolloutWorker, pid: str, rows: SampleBatch, bootstrap_obs: float | None
         ) -> npt.NDArray[np.float32]:
    """GAE of one trajectory, by hand: next values from the following rows, then the bootstrap."""
    policy = worker.policies[pid]
    nxt = np.append(rows.values[1:], 0.0 if bootstrap_obs is None else
                    policy.value(np.array([[bootstrap_obs]], np.float32))[0]).astype(np.float32)
    adv, _ = compute_gae(rows.rewards[:, None], rows.values[:, None], nxt[:, None], rows.terminateds[:, None],
                         rows.truncateds[:, None], worker.gamma, worker.lam)
    return adv[:, 0]


def test_gae_runs_per_agent_and_bootstraps_truncations_not_terminations() -> None:
    worker = _worker()
    batch = worker.sample()
    a, b = batch.policy_batches["a"], batch.policy_batches["b"]
    np.testing.assert_allclose(a.advantages, _gae(worker, "a", a, None), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b.advantages, _gae(worker, "b", b, 5.0), rtol=1e-5, atol=1e-5)


def test_a_shared_policy_holds_every_agent_s_rows_without_crossing_trajectories() -> None:
    worker = _worker(policy_mapping="shared")
    batch = worker.sample()
    assert batch.policies == ["shared"]
    rows = batch.policy_batches["shared"]
    assert len(rows) == 6 and sorted(rows.rewards.tolist()) == [1.0] * 3 + [10.0] * 3
    first, second = rows.slice(0, 3), rows.slice(3, 6)  # agent-major: a's rows, then b's
    np.testing.assert_allclose(first.advantages, _gae(worker, "shared", first, None), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(second.advantages, _gae(worker, "shared", second, 5.0), rtol=1e-5, atol=1e-5)


def test_a_fragment_cut_bootstraps_from_the_next_observation() -> None:
    worker = _worker(fragment_length=2)
    a = worker.sample().policy_batches["a"]  # a's steps 0 and 1 of 3
    assert len(a) == 2 and not (a.terminateds | a.truncateds).any()
    np.testing.assert_allclose(a.advantages, _gae(worker, "a", a, 2.0), rtol=1e-5, atol=1e-5)


def test_the_mapping_is_respected_and_unknown_policy_ids_refused() -> None:
    to_one = _worker(policy_mapping=policy_mapping_fn("tests.rl.test_multiagent:everyone_to_x"))
    assert to_one.policy_ids == ["x"] and to_one.sample().policies == ["x"]
    with pytest.raises(ValueError, match="maps agent 'a' to policy 'a', which is not one of the policies"):
        _worker(policies=("p", "q"))
    with pytest.raises(ValueError, match=r"no agent of the env maps to policy\(ies\) \['c'\]"):
        _worker(policies=("a", "b", "c"))


def everyone_to_x(agent: str) -> str:
    """A mapping for the test above (importable as module:function)."""
    return "x"


def test_an_agent_leaving_without_a_flag_is_an_error_naming_it() -> None:
    worker = _worker(env_kwargs={"leave_silently": True})
    with pytest.raises(ValueError, match=r"agent 'a' left env\.agents without being terminated or truncated"):
        worker.sample()


def test_q_policies_fold_n_step_transitions_per_agent_and_weights_are_per_policy() -> None:
    worker = _worker(fragment_length=5, q_policies={"b": QPolicySpec(n_step=2, gamma=0.5, epsilon=1.0)})
    batch = worker.sample()
    assert batch.policies == ["a", "b"] and list(batch.transitions) == ["b"]
    t = batch.transitions["b"]
    # b's steps 2, 3 fold with their successor; step 4 (truncated) stands alone
    assert t.rewards.tolist() == [15.0, 15.0, 10.0] and t.n_steps.tolist() == [2, 2, 1]
    assert t.truncateds.tolist() == [False, True, True]
    before = worker.get_weights()
    other = MultiAgentRolloutWorker(RELAY, num_envs=1, fragment_length=5, seed=1, torch_threads=None,
                                    q_policies={"b": QPolicySpec()})
    worker.set_weights({"a": other.get_weights(["a"])["a"]})
    after = worker.get_weights()
    assert all(np.array_equal(after["b"][k], before["b"][k]) for k in before["b"])
    assert not all(np.array_equal(after["a"][k], before["a"][k]) for k in before["a"])


def test_initial_weights_depend_on_the_seed_and_the_policy_id_only() -> None:
    assert policy_seed(0, "a") == policy_seed(0, "a") != policy_seed(0, "b") != policy_seed(1, "b")
    w0, w1 = _worker().get_weights(), MultiAgentRolloutWorker(
        RELAY, num_envs=2, fragment_length=3, worker_index=1, torch_threads=None).get_weights()
    assert all(np.array_equal(w0["a"][k], w1["a"][k]) for k in w0["a"])
    assert not np.array_equal(w0["a"]["pi_head.weight"], w0["b"]["pi_head.weight"])
