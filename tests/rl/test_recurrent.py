"""Recurrent policies: the worker's state across fragments, the learner's replay of it, masks."""

from __future__ import annotations

from typing import Any

import attrs
import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode
from hypothesis import given, settings
from hypothesis import strategies as st

from rxrl.envs.vector import make_vector_env
from rxrl.rl.config import A2CConfig, PolicyConfig, PPOConfig
from rxrl.rl.data.sequences import SequenceBatch
from rxrl.rl.learners.actor_critic import A2CLearner, PPOLearner
from rxrl.rl.models.cells import Cell
from rxrl.rl.models.forward import NumpyActorCritic
from rxrl.rl.models.policy import make_policy
from rxrl.rl.models.recurrent import Segments, make_core, step
from rxrl.rl.objectives.losses import TensorBatch
from rxrl.rl.workers.rollout import RolloutWorker

SAME_STEP = {"autoreset_mode": AutoresetMode.SAME_STEP}
SMALL = {"hidden_sizes": (8,), "recurrent_size": 4}


def policy_config(kind: str, **kw: Any) -> PolicyConfig:
    return PolicyConfig(recurrent=kind, **{**SMALL, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_the_numpy_step_is_the_torch_core_step(kind: str) -> None:
    """The worker's numpy cell computes what torch's nn.LSTM / nn.GRU computes, to float
    tolerance, from any state."""
    policy = make_policy(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2), policy_config(kind), 0)
    assert policy.core is not None
    params = {k: t.detach().numpy() for k, t in policy.state_dict().items()}
    cell = Cell.of(params, kind)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 8)).astype(np.float32)
    state = rng.normal(size=(5, policy.config.core_state_size)).astype(np.float32)
    out, new = cell(x, state)
    with torch.no_grad():
        t_out, t_new = step(policy.core, torch.as_tensor(x), torch.as_tensor(state))
    np.testing.assert_allclose(out, t_out.numpy(), atol=1e-6)
    np.testing.assert_allclose(new, t_new.numpy(), atol=1e-6)


def reference_rollout(env: str, num_envs: int, config: PolicyConfig, steps: int,
                      vector_kwargs: dict[str, Any] | None) -> list[list[tuple[Any, Any, bool]]]:
    """One long rollout written out plainly, as a worker with ``worker_index=0`` and seed 0
    steps it: per env, its transitions' ``(obs, state acted in, starts an episode)``."""
    vec = make_vector_env(env, num_envs, "sync", vector_kwargs=vector_kwargs)
    policy = make_policy(vec.single_observation_space, vec.single_action_space, config, 0)
    env_seed, sampling_seed = np.random.SeedSequence([0, 0]).generate_state(2)
    policy.seed_sampling(int(sampling_seed))
    obs, _ = vec.reset(seed=int(env_seed))
    state = np.zeros((num_envs, config.state_size), np.float32)
    starts = np.ones(num_envs, bool)
    resetting = np.zeros(num_envs, bool)
    same_step = vector_kwargs == SAME_STEP
    per_env: list[list[tuple[Any, Any, bool]]] = [[] for _ in range(num_envs)]
    for _ in range(steps):
        state[starts] = 0.0
        valid = ~resetting
        for i in np.flatnonzero(valid):
            per_env[i].append((obs[i].copy(), state[i].copy(), bool(starts[i])))
        actions, _, _, state = policy.act_recurrent(obs, state)
        obs, _, terminated, truncated, _ = vec.step(actions)
        done = (terminated | truncated) & valid
        starts = done if same_step else ~valid
        resetting = np.zeros(num_envs, bool) if same_step else done
    vec.close()
    return per_env


@settings(max_examples=25, deadline=None)
@given(fragment_length=st.integers(1, 12), chunks=st.sampled_from([1, 2, 3]), num_envs=st.integers(1, 3),
       samples=st.integers(1, 4), kind=st.sampled_from(["lstm", "gru"]), same_step=st.booleans())
def test_a_fragment_starts_in_the_state_a_single_long_rollout_has_there(
        fragment_length: int, chunks: int, num_envs: int, samples: int, kind: str, same_step: bool) -> None:
    """Law: cutting a rollout into fragments (and fragments into sequences) changes nothing: every
    transition a worker returns was acted in the state one uninterrupted rollout has at that step,
    the state recorded at each sequence's start is that state, and the episode-start flags are
    that rollout's (whatever the fragment length, the episode ends and the autoreset mode)."""
    length = fragment_length * chunks
    config = policy_config(kind, sequence_length=fragment_length)
    vector_kwargs = SAME_STEP if same_step else None
    worker = RolloutWorker("CartPole-v1", num_envs=num_envs, fragment_length=length, policy=config,
                           vectorization_mode="sync", vector_kwargs=vector_kwargs)
    stepped = 0
    env_step = worker.env.step

    def counting_step(actions: Any) -> Any:
        nonlocal stepped
        stepped += 1
        return env_step(actions)

    worker.env.step = counting_step  # type: ignore[method-assign]
    batches = [worker.sample_sequences() for _ in range(samples)]
    reference = reference_rollout("CartPole-v1", num_envs, config, stepped, vector_kwargs)
    position = [0] * num_envs  # where each env's kept rows are in the reference
    for batch in batches:
        assert batch.length == fragment_length and batch.num_sequences == num_envs * chunks
        for env in range(num_envs):
            rows = range(env * length, (env + 1) * length)
            ref = reference[env]
            first = batch.batch.obs[rows[0]]
            # the first kept row: at or after where the last fragment ended (its surplus dropped)
            found = next(k for k in range(position[env], len(ref)) if np.array_equal(ref[k][0], first))
            for offset, row in enumerate(rows):
                obs, state, start = ref[found + offset]
                np.testing.assert_array_equal(batch.batch.obs[row], obs)
                assert bool(batch.starts[row]) is start
                if offset % fragment_length == 0:
                    np.testing.assert_array_equal(batch.initial_state[row // fragment_length], state)
            position[env] = found + length


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("vector_kwargs", [None, SAME_STEP], ids=["next_step", "same_step"])
@pytest.mark.parametrize("shared", [False, True], ids=["two_cores", "shared_core"])
def test_the_learner_reproduces_the_workers_outputs_over_sequences(
        kind: str, vector_kwargs: dict[str, Any] | None, shared: bool) -> None:
    """The learner's forward over a sequence batch gives the log-probabilities and values the
    worker computed step by step, to float tolerance (several fragments: the state crossed
    their boundaries), with an actor's and a critic's core or one shared core."""
    config = PolicyConfig(recurrent=kind, sequence_length=16, shared_trunk=shared)  # type: ignore[arg-type]
    worker = RolloutWorker("CartPole-v1", num_envs=4, fragment_length=32, policy=config,
                           vectorization_mode="sync", vector_kwargs=vector_kwargs)
    learner = PPOLearner("CartPole-v1", PPOConfig(), config)
    batch = SequenceBatch.concat([worker.sample_sequences() for _ in range(3)])
    assert batch.starts.any() and not batch.starts.all()
    with torch.no_grad():
        logp, _, values = TensorBatch.from_batch(batch).evaluate(learner.policy)
    np.testing.assert_allclose(logp.numpy(), batch.batch.logp, atol=1e-5)
    np.testing.assert_allclose(values.numpy(), batch.batch.values, atol=1e-5)


def test_a_torch_free_worker_acts_as_the_torch_one() -> None:
    """A worker built from weights (no torch) returns the same sequences, bit for bit."""
    config = PolicyConfig(recurrent="lstm")
    torch_worker = RolloutWorker("CartPole-v1", num_envs=2, fragment_length=20, policy=config)
    weights = torch_worker.get_weights()
    free = RolloutWorker("CartPole-v1", num_envs=2, fragment_length=20, policy=config, weights=weights)
    assert isinstance(free.policy, NumpyActorCritic)
    for _ in range(2):
        a, b = torch_worker.sample_sequences(), free.sample_sequences()
        np.testing.assert_array_equal(a.batch.actions, b.batch.actions)
        np.testing.assert_array_equal(a.initial_state, b.initial_state)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_masks_reset_the_state_exactly_at_episode_starts(kind: str) -> None:
    """Flags sit exactly on the rows after an episode's end, the state there is zero, and what
    a sequence starts from reaches its rows up to its first episode start and no further."""
    config = policy_config(kind, sequence_length=10)
    worker = RolloutWorker("CartPole-v1", num_envs=3, fragment_length=30, policy=config)
    worker.sample_sequences()
    batch = worker.sample_sequences()
    ended = batch.batch.terminateds | batch.batch.truncateds
    for s in range(batch.num_sequences):
        rows = np.arange(s * 10, (s + 1) * 10)
        np.testing.assert_array_equal(batch.starts[rows[1:]], ended[rows[:-1]])
    learner = A2CLearner("CartPole-v1", A2CConfig(), config)
    t = TensorBatch.from_batch(batch)
    assert t.initial_state is not None and t.starts is not None
    noisy = attrs.evolve(t, initial_state=torch.randn_like(t.initial_state))
    with torch.no_grad():
        _, _, values = t.evaluate(learner.policy)
        _, _, moved = noisy.evaluate(learner.policy)
    for s in range(batch.num_sequences):
        rows = np.arange(s * 10, (s + 1) * 10)
        starts = np.flatnonzero(batch.starts[rows])
        reset = int(starts[0]) if len(starts) else 10
        np.testing.assert_array_equal(values[rows[reset:]].numpy(), moved[rows[reset:]].numpy())
        if reset > 0:
            assert not np.allclose(values[rows[:reset]].numpy(), moved[rows[:reset]].numpy())


def test_sequence_batches_keep_whole_sequences() -> None:
    """Minibatches hold whole sequences, each exactly once; concat joins in order; bad shapes
    are refused with the field named."""
    worker = RolloutWorker("CartPole-v1", num_envs=3, fragment_length=8,
                           policy=PolicyConfig(recurrent="gru", sequence_length=4))
    batch = SequenceBatch.concat([worker.sample_sequences(), worker.sample_sequences()])
    assert batch.num_sequences == 12 and len(batch) == 48
    seen = []
    for mb in batch.minibatches(9, np.random.default_rng(0)):
        assert len(mb) % 4 == 0 and mb.num_sequences == 2
        seen += [tuple(mb.batch.obs[i * 4].tolist()) for i in range(mb.num_sequences)]
    assert sorted(seen) == sorted(tuple(batch.batch.obs[i * 4].tolist()) for i in range(12))
    with pytest.raises(ValueError, match="starts must be"):
        SequenceBatch(batch.batch, 4, batch.starts[:-1], batch.initial_state)
    with pytest.raises(ValueError, match="initial_state must be"):
        SequenceBatch(batch.batch, 4, batch.starts, batch.initial_state[:-1])
    with pytest.raises(ValueError, match="not whole sequences"):
        SequenceBatch(batch.batch, 5, batch.starts, batch.initial_state)


def test_a_recurrent_policy_refuses_flat_training_with_what_to_do() -> None:
    config = PolicyConfig(recurrent="lstm")
    worker = RolloutWorker("CartPole-v1", num_envs=2, fragment_length=8, policy=config)
    for learner in (PPOLearner("CartPole-v1", PPOConfig(minibatch_size=8), config),
                    A2CLearner("CartPole-v1", A2CConfig(), config)):
        with pytest.raises(ValueError, match="train_sequences"):
            learner.train(worker.sample())
        learner.train_sequences(worker.sample_sequences())
    with pytest.raises(ValueError, match="act_recurrent"):
        worker.policy.act(np.zeros((1, 4), np.float32))
    with pytest.raises(ValueError, match="must divide fragment_length"):
        RolloutWorker("CartPole-v1", num_envs=1, fragment_length=10,
                      policy=PolicyConfig(recurrent="gru", sequence_length=4))


@settings(max_examples=30, deadline=None)
@given(kind=st.sampled_from(["lstm", "gru"]), num_seq=st.integers(1, 4), length=st.integers(1, 9),
       seed=st.integers(0, 2**16))
def test_segments_give_the_step_loops_outputs_and_gradients(kind: str, num_seq: int, length: int,
                                                            seed: int) -> None:
    """`Segments.run` / `run_past` (one padded core call) against the core stepped row by row,
    the state zeroed at every start: the same outputs, and the same gradients for the inputs
    and the core's weights."""
    gen = torch.Generator().manual_seed(seed)
    core = make_core(PolicyConfig(recurrent=kind, recurrent_size=3), 2, gen)  # type: ignore[arg-type]
    starts = torch.rand(num_seq, length, generator=gen) < 0.3
    size = 6 if kind == "lstm" else 3
    state0 = torch.randn(num_seq, size, generator=gen)
    x = torch.randn(num_seq * length, 2, generator=gen, requires_grad=True)
    segments = Segments(starts)
    ends = np.flatnonzero(segments.ends)
    rows = torch.as_tensor(ends[torch.randperm(len(ends), generator=gen)[:3].numpy()])
    x_past = torch.randn(len(rows), 2, generator=gen, requires_grad=True)
    out, past = segments.run_past(core, x, state0, rows, x_past)
    # to float tolerance, not bit for bit: a step past can make the padded call one step
    # longer, and the core's kernels may then round differently (seen: 3.7e-9 for a GRU)
    torch.testing.assert_close(out, segments.run(core, x, state0), rtol=1e-5, atol=1e-6)
    weights = list(core.parameters())
    got = torch.autograd.grad((out.square().sum() + past.sum()), [x, x_past, *weights])

    loop, after = [], {}
    for s in range(num_seq):
        state = state0[s:s + 1]
        for t in range(length):
            i = s * length + t
            if starts[s, t]:
                state = torch.zeros_like(state)
            h, state = step(core, x[i:i + 1], state)
            loop.append(h)
            after[i] = state
    want_out = torch.cat(loop)
    want_past = torch.cat([step(core, x_past[j:j + 1], after[int(r)])[0] for j, r in enumerate(rows)]
                          or [torch.zeros(0, 3)])
    torch.testing.assert_close(out, want_out, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(past, want_past, rtol=1e-5, atol=1e-6)
    want = torch.autograd.grad((want_out.square().sum() + want_past.sum()), [x, x_past, *weights],
                               allow_unused=True)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, torch.zeros_like(g) if w is None else w, rtol=1e-4, atol=1e-5)
