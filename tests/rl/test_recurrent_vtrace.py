"""Recurrent IMPALA and APPO: fragments carry the worker's states, the learner replays them (bootstrap
values one core step past their rows), the settings, and runs that replay exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from rxrl.algos.vtrace.appo import APPO
from rxrl.algos.vtrace.impala import IMPALA
from rxrl.cli import main
from rxrl.rl import (
    APPOConfig,
    APPOLearner,
    Fragment,
    IMPALAConfig,
    IMPALALearner,
    PolicyConfig,
    RolloutWorker,
)
from rxrl.rl.learners.vtrace import MinibatchInputs, VTraceLearner
from rxrl.rl.models.policy import ActorCritic, make_policy
from rxrl.rl.models.recurrent import Segments
from tests.rl.helpers import make_batch

SAME_STEP = {"autoreset_mode": AutoresetMode.SAME_STEP}
#: CartPole cut at 12 steps: truncated rows inside fragments, whose bootstrap values matter
SHORT = {"max_episode_steps": 12}


def recurrent_fragments(config: PolicyConfig, vector_kwargs: dict[str, Any] | None = None,
                        count: int = 3) -> Fragment:
    """``count`` fragments of one worker (its state crosses their boundaries), joined."""
    worker = RolloutWorker("CartPole-v1", num_envs=3, fragment_length=16, policy=config, env_kwargs=SHORT,
                           vectorization_mode="sync", vector_kwargs=vector_kwargs)
    return Fragment.concat([worker.sample_fragment() for _ in range(count)])


def forward(policy: ActorCritic, f: Fragment) -> tuple[Any, Any, Any]:
    """The learner's forward over ``f``: log-probs, values and bootstrap values, as numpy."""
    with torch.no_grad():
        inputs = MinibatchInputs.of(f, torch.device("cpu"), policy, "test")
        out, values, boot = inputs.heads(policy)
        logp = policy.log_prob_entropy(out, inputs.actions)[0]
    return logp.numpy(), values.numpy(), boot.numpy()


def stepped_bootstrap_values(policy: ActorCritic, f: Fragment) -> Any:
    """The bootstrap values computed plainly: the numpy policy stepped through every sequence
    from its initial state (zeroed at episode starts), each bootstrap observation valued in the
    state after its row."""
    assert f.starts is not None and f.initial_state is not None
    after = np.zeros((len(f), policy.config.state_size), np.float32)
    for s in range(f.num_sequences):
        state = f.initial_state[s][None].copy()
        for row in range(s * f.length, (s + 1) * f.length):
            if f.starts[row]:
                state[:] = 0.0
            state = policy.act_recurrent(f.batch.obs[row][None], state, deterministic=True)[3]
            after[row] = state[0]
    return np.concatenate([policy.value_recurrent(obs[None], after[row][None])
                           for row, obs in zip(f.bootstrap_rows, f.bootstrap_obs, strict=True)])


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("vector_kwargs", [None, SAME_STEP], ids=["next_step", "same_step"])
@pytest.mark.parametrize("shared", [False, True], ids=["two_cores", "shared_core"])
def test_the_learners_forward_over_a_fragment_reproduces_the_worker(
        kind: str, vector_kwargs: dict[str, Any] | None, shared: bool) -> None:
    """The learner's recurrent forward over fragments gives the worker's log-probabilities and
    values, and each bootstrap observation the value the worker's policy gives it in the state
    after its row (truncated rows inside sequences included), to float tolerance."""
    config = PolicyConfig(recurrent=kind, shared_trunk=shared)  # type: ignore[arg-type]
    f = recurrent_fragments(config, vector_kwargs)
    assert f.starts is not None and f.starts[1:].any()
    inner = f.bootstrap_rows[(f.bootstrap_rows + 1) % f.length != 0]
    assert len(inner) and f.batch.truncateds[inner].all()
    learner = IMPALALearner("CartPole-v1", IMPALAConfig(), config)
    logp, values, boot = forward(learner.policy, f)
    np.testing.assert_allclose(logp, f.batch.logp, atol=1e-5)
    np.testing.assert_allclose(values, f.batch.values, atol=1e-5)
    np.testing.assert_allclose(boot, stepped_bootstrap_values(learner.policy, f), atol=1e-5)
    np.testing.assert_allclose(learner.loss(f).values, f.batch.values, atol=1e-5)


def test_a_policy_without_a_core_evaluates_rows_as_before_bit_for_bit() -> None:
    worker = RolloutWorker("CartPole-v1", num_envs=2, fragment_length=8)
    f = worker.sample_fragment()
    assert f.starts is None and f.initial_state is None
    policy = IMPALALearner("CartPole-v1").policy
    logp, values, boot = forward(policy, f)
    with torch.no_grad():
        out, v = policy.heads(policy.encode(torch.as_tensor(f.batch.obs)))
        b = policy.heads(policy.encode(torch.as_tensor(f.bootstrap_obs)))[1]
        lp = policy.log_prob_entropy(out, torch.as_tensor(f.batch.actions))[0]
    np.testing.assert_array_equal(logp, lp.numpy())
    np.testing.assert_array_equal(values, v.numpy())
    np.testing.assert_array_equal(boot, b.numpy())


def test_minibatches_of_joined_fragments_keep_their_states_aligned() -> None:
    """Law: picking sequences out of joined fragments keeps every row with its episode-start
    flag and every sequence with its state, so the learner still reproduces the worker."""
    config = PolicyConfig(recurrent="lstm", recurrent_size=16)
    f = recurrent_fragments(config, SAME_STEP, count=2)
    policy = make_policy(*_spaces(), config, 0)
    order = np.random.default_rng(0).permutation(f.num_sequences)[:4]
    picked = f.sequences(order)
    assert picked.starts is not None and picked.initial_state is not None and f.initial_state is not None
    np.testing.assert_array_equal(picked.initial_state, f.initial_state[order])
    logp, values, boot = forward(policy, picked)
    np.testing.assert_allclose(logp, picked.batch.logp, atol=1e-5)
    np.testing.assert_allclose(values, picked.batch.values, atol=1e-5)
    np.testing.assert_allclose(boot, stepped_bootstrap_values(policy, picked), atol=1e-5)


def _spaces() -> tuple[Any, Any]:
    worker = RolloutWorker("CartPole-v1", num_envs=1, fragment_length=1)
    return worker.spaces.observation, worker.spaces.action


def fragment(n_seq: int, length: int, start: int = 0, recurrent: bool = True) -> Fragment:
    """Rows numbered from ``start``; each sequence's state is its first row's number, and
    its first row starts an episode when that number is even."""
    batch = make_batch(n_seq * length, start=start)
    ends = np.arange(length - 1, n_seq * length, length)
    if not recurrent:
        return Fragment(batch, length, ends, -batch.obs[ends])
    firsts = np.arange(start, start + n_seq * length, length, dtype=np.float32)
    starts = np.zeros(n_seq * length, bool)
    starts[::length] = firsts % 2 == 0
    return Fragment(batch, length, ends, -batch.obs[ends], starts=starts,
                    initial_state=np.repeat(firsts[:, None], 2, axis=1))


def test_fragments_keep_their_recurrent_state_through_concat_and_sequences() -> None:
    joined = Fragment.concat([fragment(2, 3), fragment(2, 3, start=6)])
    assert joined.initial_state is not None and joined.starts is not None
    np.testing.assert_array_equal(joined.initial_state[:, 0], [0, 3, 6, 9])
    np.testing.assert_array_equal(np.flatnonzero(joined.starts), [0, 6])
    picked = joined.sequences(np.array([3, 0]))
    assert picked.initial_state is not None and picked.starts is not None
    np.testing.assert_array_equal(picked.initial_state[:, 0], [9, 0])
    np.testing.assert_array_equal(picked.batch.obs[::3, 0], picked.initial_state[:, 0])
    np.testing.assert_array_equal(picked.starts, [0, 0, 0, 1, 0, 0])
    plain = Fragment.concat([fragment(1, 3, recurrent=False), fragment(1, 3, recurrent=False)])
    assert plain.starts is None and plain.initial_state is None
    with pytest.raises(ValueError, match="1 of 2 fragments carry recurrent state"):
        Fragment.concat([fragment(1, 3), fragment(1, 3, recurrent=False)])


def test_a_fragment_with_malformed_recurrent_state_is_refused() -> None:
    f = fragment(2, 3)
    assert f.starts is not None and f.initial_state is not None
    rows, obs = f.bootstrap_rows, f.bootstrap_obs
    with pytest.raises(ValueError, match="initial_state is missing"):
        Fragment(f.batch, 3, rows, obs, starts=f.starts)
    with pytest.raises(ValueError, match="starts is missing"):
        Fragment(f.batch, 3, rows, obs, initial_state=f.initial_state)
    with pytest.raises(ValueError, match=r"starts must be \[6\]"):
        Fragment(f.batch, 3, rows, obs, starts=f.starts[:-1], initial_state=f.initial_state)
    with pytest.raises(ValueError, match=r"initial_state must be \[2, state_size\]"):
        Fragment(f.batch, 3, rows, obs, starts=f.starts, initial_state=f.initial_state[:1])
    # a bootstrap row inside a sequence (a truncation) is followed by an episode's first row
    Fragment(f.batch, 3, [0, 2, 5], np.concatenate([obs[:1], obs]), starts=[1, 1, 0, 0, 0, 0],
             initial_state=f.initial_state)
    with pytest.raises(ValueError, match="must be followed by a row that starts an episode"):
        Fragment(f.batch, 3, [0, 2, 5], np.concatenate([obs[:1], obs]), starts=f.starts,
                 initial_state=f.initial_state)


def test_segments_run_past_only_the_last_row_of_a_segment() -> None:
    config = PolicyConfig(recurrent="gru", recurrent_size=4)
    core = make_policy(*_spaces(), config, 0).core
    assert core is not None
    segments = Segments(torch.tensor([[True, False, True, False]]))
    x, state = torch.zeros(4, 64), torch.zeros(1, 4)
    out, past = segments.run_past(core, x, state, torch.tensor([1, 3]), torch.ones(2, 64))
    assert out.shape == (4, 4) and past.shape == (2, 4)
    torch.testing.assert_close(out, segments.run(core, x, state))
    with pytest.raises(ValueError, match="last of its segment"):
        segments.run_past(core, x, state, torch.tensor([0]), torch.ones(1, 64))


@pytest.mark.parametrize("cls", [IMPALALearner, APPOLearner])
def test_the_learners_train_on_recurrent_fragments(cls: type[VTraceLearner]) -> None:
    config = PolicyConfig(recurrent="lstm", recurrent_size=16)
    worker = RolloutWorker("CartPole-v1", num_envs=4, fragment_length=16, policy=config)
    learner_config = (APPOConfig if cls is APPOLearner else IMPALAConfig)(minibatch_size=32, num_epochs=2)
    learner = cls("CartPole-v1", learner_config, config)
    before = learner.get_weights()["core.weight_hh_l0"].copy()
    for _ in range(3):
        metrics = learner.train([worker.sample_fragment(), worker.sample_fragment()])
        assert np.isfinite([metrics.policy_loss, metrics.value_loss, metrics.approx_kl]).all()
        worker.set_weights(learner.get_weights(), learner.version)
    assert learner.version == 3 and metrics.num_updates == 8
    assert not np.array_equal(before, learner.get_weights()["core.weight_hh_l0"])
    bare = worker.sample_fragment()
    with pytest.raises(ValueError, match=r"Learner\.loss: the policy is recurrent .* no starts and no init"):
        learner.loss(Fragment(bare.batch, bare.length, bare.bootstrap_rows, bare.bootstrap_obs))


def test_appos_target_network_replays_the_sequences_too() -> None:
    """With the target network equal to the policy (its start), the target's log-probs over the
    sequences are the policy's, so every importance ratio against the worker is 1."""
    config = PolicyConfig(recurrent="gru", recurrent_size=16)
    learner = APPOLearner("CartPole-v1", APPOConfig(), config)
    loss = learner.loss(recurrent_fragments(config))
    assert loss.rho_mean == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("cls", [IMPALA, APPO])
def test_the_settings_train_recurrent_policies_on_whole_fragments(cls: type[IMPALA] | type[APPO]) -> None:
    for length in (None, 16):
        cls(fragment_length=16, policy=PolicyConfig(recurrent="lstm", sequence_length=length),
            train_batch_size=128, learner=learner_settings(cls))
    with pytest.raises(ValueError, match=rf"^{cls.__name__}.policy.sequence_length \(8\) must be unset "
                                         r"or fragment_length \(16\)"):
        cls(fragment_length=16, policy=PolicyConfig(recurrent="gru", sequence_length=8),
            train_batch_size=128, learner=learner_settings(cls))


def learner_settings(cls: type[IMPALA] | type[APPO]) -> Any:
    """The algorithm's learner settings with minibatches of 64 (whole fragments of 16)."""
    return (APPOConfig if cls is APPO else IMPALAConfig)(minibatch_size=64)


@pytest.mark.parametrize("algo", ["impala", "appo"])
def test_a_recurrent_run_replays_exactly(algo: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / f"{algo}.trace.json"
    assert main(["train", algo, "--backend", "reference", "--steps", "1024", "--seed", "1",
                 "--out", str(tmp_path / algo), "--trace", str(trace),
                 "--set", "policy.recurrent=gru", "--set", "policy.recurrent_size=16",
                 "--set", "num_envs_per_worker=2", "--set", "train_batch_size=128",
                 "--set", "minibatch_size=64"]) == 0
    doc = json.loads(trace.read_text())
    assert len(doc["records"]) >= 4
    capsys.readouterr()
    assert main(["replay", str(trace)]) == 0
    assert f"identical: all {len(doc['records'])} recorded iterations" in capsys.readouterr().out
