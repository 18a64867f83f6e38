"""Frame-deduplicated replay: the rows, ids and samples of a plain replay, each frame stored once."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rxrl.rl.config import ReplayConfig
from rxrl.rl.data.transitions import TRANSITION_COLUMNS, TransitionBatch
from rxrl.rl.replay import frames as frames_module
from rxrl.rl.replay.buffers import PrioritizedReplayBuffer, ReplayBuffer, make_replay_buffer
from rxrl.rl.replay.frames import FrameMode
from rxrl.rl.replay.nstep import NStepFolder, StepArrays
from rxrl.rl.replay.shard import ReplayShard
from rxrl.training.checkpoint import tensors_of

#: small frames: 6 bytes (padded to one 8-byte word), 15 (padded to two), 16 (two, no padding)
FRAMES = [(2, 3), (3, 5), (4, 4)]
PADDINGS = ("zeros", "reset", "noise")


def episode_stacks(
    rng: np.random.Generator, stack: int, length: int, palette: npt.NDArray[np.uint8]
) -> npt.NDArray[np.uint8]:
    """The observations `o_0 .. o_length` of one episode, stacks of `stack` frames oldest
    first; the first stack padded with zeros, the reset frame repeated, or noise (chosen at
    random), and frames drawn from a small palette shared by all envs or from 3^6 small
    random ones, so that equal frames recur within and across envs and episodes."""
    frame = palette.shape[1:]
    frames = rng.integers(0, 3, (length + 1, *frame), dtype=np.uint8)
    from_palette = rng.random(length + 1) < 0.3
    frames[from_palette] = palette[rng.integers(0, len(palette), int(from_palette.sum()))]
    padding = PADDINGS[rng.integers(0, 3)]
    if padding == "zeros":
        pad = np.zeros((stack - 1, *frame), np.uint8)
    elif padding == "reset":
        pad = np.repeat(frames[:1], stack - 1, axis=0)
    else:
        pad = rng.integers(0, 256, (stack - 1, *frame), dtype=np.uint8)
    timeline = np.concatenate([pad, frames])
    return np.stack([timeline[t : t + stack] for t in range(length + 1)])


def transition_stream(
    rng: np.random.Generator, envs: int, stack: int, n_step: int, total: int,
    frame: tuple[int, ...] = FRAMES[0],
) -> TransitionBatch:
    """At least `total` n-step transitions of `envs` envs with random episode ends: each env's
    in time order, interleaved in random runs, or (one time in four) shuffled outright.
    Transition k has reward k, so a row says which it is."""
    palette = rng.integers(0, 256, (4, *frame), dtype=np.uint8)
    palette[0] = 0
    per_env: list[list[tuple[Any, Any, int, bool, bool]]] = [[] for _ in range(envs)]
    count = 0
    while count < total:
        env = int(rng.integers(0, envs))
        length = int(rng.integers(1, 12))
        obs = episode_stacks(rng, stack, length, palette)
        terminated = bool(rng.random() < 0.5)
        for t in range(length):
            end = min(t + n_step, length)
            per_env[env].append((obs[t], obs[end], end - t, end == length and terminated,
                                 end == length and not terminated))
        count += length
    order: list[tuple[Any, Any, int, bool, bool]] = []
    queues = [list(q) for q in per_env]
    while any(queues):
        env = int(rng.choice([i for i, q in enumerate(queues) if q]))
        run = int(rng.integers(1, 5))
        order += queues[env][:run]
        del queues[env][:run]
    if rng.random() < 0.25:
        order = [order[i] for i in rng.permutation(len(order))]
    n = len(order)
    return TransitionBatch(
        obs=np.stack([o[0] for o in order]),
        actions=rng.integers(0, 4, n),
        rewards=np.arange(n, dtype=np.float32),
        next_obs=np.stack([o[1] for o in order]),
        terminateds=np.array([o[3] for o in order]),
        truncateds=np.array([o[4] for o in order]),
        n_steps=np.array([o[2] for o in order], dtype=np.int64),
    )


def buffer_of(
    prioritized: bool, capacity: int, seed: int, frames: FrameMode
) -> ReplayBuffer | PrioritizedReplayBuffer:
    """A uniform or prioritized buffer storing observations as `frames` says."""
    if prioritized:
        return PrioritizedReplayBuffer(capacity, alpha=0.7, beta=0.5, seed=seed, frames=frames)
    return ReplayBuffer(capacity, seed=seed, frames=frames)


def stored(buffer: ReplayBuffer) -> dict[str, npt.NDArray[Any]]:
    """Every stored transition oldest first, in every column (frames expanded), via the state."""
    state = buffer.state_dict()
    columns = dict(state["columns"])
    if "frames" in state:
        columns["obs"], columns["next_obs"] = frames_module.expand_frames(state["frames"], slice(None))
    return columns


def assert_same_batches(a: TransitionBatch, b: TransitionBatch) -> None:
    """Every column, `indices` and `weights` equal in dtype, shape and bytes."""
    for name in (*TRANSITION_COLUMNS, "indices", "weights"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == y.dtype and x.shape == y.shape, name
            np.testing.assert_array_equal(x, y, err_msg=name)


def assert_same_contents(plain: ReplayBuffer, dedup: ReplayBuffer) -> None:
    """Same count, ids and rows; and the pool holds exactly the distinct frames of the stored
    stacks, each once, referenced once per stack entry."""
    assert (len(dedup), dedup.num_added) == (len(plain), plain.num_added)
    expected, got = stored(plain), stored(dedup)
    assert expected.keys() == got.keys()
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    store = dedup.frame_store
    assert store is not None
    stacks = np.concatenate([expected["obs"], expected["next_obs"]], axis=1)
    distinct = np.unique(stacks.reshape(stacks.shape[0] * stacks.shape[1], -1), axis=0)
    assert store.pool.live == len(distinct)
    assert int(store.pool.refcount.sum()) == stacks.shape[0] * stacks.shape[1]


@given(
    seed=st.integers(0, 2**32 - 1),
    capacity=st.integers(1, 16),
    stack=st.integers(1, 4),
    n_step=st.integers(1, 3),
    envs=st.integers(1, 3),
    frame=st.sampled_from(FRAMES),
    prioritized=st.booleans(),
)
def test_dedup_replay_holds_and_samples_exactly_what_a_plain_replay_does(
    seed: int, capacity: int, stack: int, n_step: int, envs: int, frame: tuple[int, ...], prioritized: bool
) -> None:
    """Law: fed the same stream — several envs interleaved (or shuffled), random episode ends,
    reset stacks padded with zeros, the reset frame or noise, n-step `next_obs`, adds smaller
    and larger than the buffer so that it wraps around many times — and seeded alike, a
    frame-deduplicating buffer and a plain one hold the same transitions under the same ids
    after every add and draw the same samples (indices, weights, every column, byte for byte),
    through any mix of adds, samples and priority updates. And the dedup buffer holds each
    distinct frame of its stored stacks exactly once: a frame no stored transition refers to
    is freed, one still referred to is never overwritten."""
    rng = np.random.default_rng(seed)
    stream = transition_stream(rng, envs, stack, n_step, 4 * capacity + int(rng.integers(0, 40)), frame)
    plain = buffer_of(prioritized, capacity, seed, "plain")
    dedup = buffer_of(prioritized, capacity, seed, "dedup")
    start = 0
    while start < len(stream):
        batch = stream.take(slice(start, start + int(rng.integers(1, capacity + 6))))
        start += len(batch)
        plain.add(batch)
        dedup.add(batch)
        assert_same_contents(plain, dedup)
        if rng.random() < 0.6:
            size = int(rng.integers(1, capacity + 1))
            expected, got = plain.sample(size), dedup.sample(size)
            assert_same_batches(got, expected)
            if isinstance(plain, PrioritizedReplayBuffer) and isinstance(dedup, PrioritizedReplayBuffer):
                assert expected.indices is not None
                priorities = rng.random(size) * 3
                plain.update_priorities(expected.indices, priorities)
                dedup.update_priorities(expected.indices, priorities)


def test_frames_whose_hashes_all_collide_are_still_returned_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hash only finds candidates; equality decides. With every frame hashing to the same
    value, nothing wrong is shared: the rows are still exactly the plain buffer's."""
    monkeypatch.setattr(frames_module, "_hash", lambda words, coeffs: np.zeros(len(words), np.uint64))
    rng = np.random.default_rng(7)
    stream = transition_stream(rng, envs=2, stack=3, n_step=2, total=120, frame=FRAMES[1])
    plain, dedup = ReplayBuffer(9, seed=1, frames="plain"), ReplayBuffer(9, seed=1, frames="dedup")
    for start in range(0, len(stream), 7):
        batch = stream.take(slice(start, start + 7))
        plain.add(batch)
        dedup.add(batch)
        np.testing.assert_array_equal(stored(dedup)["obs"], stored(plain)["obs"])
        np.testing.assert_array_equal(stored(dedup)["next_obs"], stored(plain)["next_obs"])
        assert_same_batches(dedup.sample(9), plain.sample(9))


@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
def test_state_dict_round_trip_across_storage_kinds(prioritized: bool) -> None:
    """Law: a state (through torch.save/load with weights_only=True) restores an identical
    buffer — same rows, ids and next samples — whether saved by a dedup or a plain buffer and
    loaded into either; a dedup state holds each live frame once, not the stacks."""
    stream = transition_stream(np.random.default_rng(3), envs=3, stack=4, n_step=3, total=90)
    original = buffer_of(prioritized, 32, 5, "dedup")
    plain = buffer_of(prioritized, 32, 5, "plain")
    for buffer in (original, plain):
        buffer.add(stream.take(slice(0, 70)))  # wrapped
        for _ in range(3):
            batch = buffer.sample(8)
            if isinstance(buffer, PrioritizedReplayBuffer):
                assert batch.indices is not None
                buffer.update_priorities(batch.indices, np.abs(np.sin(batch.indices)) * 3)
    state = original.state_dict()
    assert original.frame_store is not None
    assert state["frames"]["frames"].shape[0] == original.frame_store.pool.live
    assert "obs" not in state["columns"] and "next_obs" not in state["columns"]
    for source in (original, plain):
        blob = io.BytesIO()
        torch.save(tensors_of(source.state_dict()), blob)
        for frames in ("dedup", "plain"):
            blob.seek(0)
            restored = buffer_of(prioritized, 32, 99, frames)
            restored.load_state_dict(torch.load(blob, weights_only=True))
            assert (restored.frame_store is None) == (frames == "plain")
            twin = buffer_of(prioritized, 32, 0, "plain")
            twin.load_state_dict(source.state_dict())
            for _ in range(2):
                assert_same_batches(restored.sample(8), twin.sample(8))
            restored.add(stream.take(slice(70, 90)))
            twin.add(stream.take(slice(70, 90)))
            assert_same_batches(restored.sample(16), twin.sample(16))


def test_nothing_aliases_the_buffer() -> None:
    """Mutating an added batch, or the obs / next_obs of a sampled one, changes nothing stored
    (and obs and next_obs of one sample do not share frames)."""
    stream = transition_stream(np.random.default_rng(11), envs=2, stack=4, n_step=1, total=40)
    buffer = ReplayBuffer(16, seed=2, frames="dedup")
    batch = stream.take(slice(0, 30))
    buffer.add(batch)
    before = stored(buffer)
    batch.obs[...] += 1
    batch.next_obs[...] += 1
    sample = buffer.sample(16)
    next_obs = sample.next_obs.copy()
    sample.obs[...] += 1
    np.testing.assert_array_equal(sample.next_obs, next_obs)
    sample.next_obs[...] += 1
    for name, values in stored(buffer).items():
        np.testing.assert_array_equal(values, before[name], err_msg=name)


class AtariLikeEnvs:
    """`num_envs` envs stepping 84x84 noise frames (incompressible) stacked by 4, episodes of
    200-400 steps, reset stacks padded with the reset frame (gymnasium's FrameStackObservation
    default), fragments folded into 3-step transitions by `NStepFolder`."""

    def __init__(self, num_envs: int, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.stacks = [self._reset() for _ in range(num_envs)]
        self.left = self.rng.integers(200, 401, num_envs)
        self.folder = NStepFolder(3, 0.99)

    def _reset(self) -> npt.NDArray[np.uint8]:
        return np.repeat(self.rng.integers(0, 256, (1, 84, 84), dtype=np.uint8), 4, axis=0)

    def fragment(self, steps: int) -> TransitionBatch:
        """`steps` steps of every env, folded into the transitions whose windows closed."""
        n = len(self.stacks)
        obs = np.empty((steps, n, 4, 84, 84), np.uint8)
        next_obs = np.empty_like(obs)
        done = np.zeros((steps, n), bool)
        for s in range(steps):
            for e in range(n):
                obs[s, e] = self.stacks[e]
                frame = self.rng.integers(0, 256, (1, 84, 84), dtype=np.uint8)
                next_obs[s, e] = np.concatenate([self.stacks[e][1:], frame])
                self.left[e] -= 1
                done[s, e] = self.left[e] == 0
                if done[s, e]:
                    self.stacks[e], self.left[e] = self._reset(), self.rng.integers(200, 401)
                else:
                    self.stacks[e] = next_obs[s, e]
        return self.folder.fold(StepArrays(
            obs=obs, actions=np.zeros((steps, n), np.int64), rewards=np.ones((steps, n), np.float32),
            next_obs=next_obs, terminateds=done, truncateds=np.zeros_like(done),
            valid=np.ones_like(done),
        ))


@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
def test_atari_shaped_replay_takes_at_most_1_1_frames_per_transition(prioritized: bool) -> None:
    """On 4x84x84 uint8 stacks of 4 envs (3-step transitions, episodes of 200-400 steps, the
    buffer wrapped twice), every array the buffer holds — frame blocks with their slack,
    references, counts, hashes, free list, hash index, the other columns and, prioritized,
    the sum tree — comes to <= 1.1 x 84 x 84 bytes per transition (a plain buffer: 2 x 4 x
    84 x 84 + 22), so a 1M-transition Atari replay fits in 8 GB (1M x 1.1 x 7056 B = 7.8 GB)."""
    buffer = make_replay_buffer(
        ReplayConfig(capacity=2000, batch_size=32, learning_starts=32, prioritized=prioritized), seed=0
    )
    envs = AtariLikeEnvs(4, seed=0)
    while buffer.num_added < 5000:
        buffer.add(envs.fragment(32))
    assert buffer.frame_store is not None and len(buffer) == 2000
    per_transition = buffer.nbytes / len(buffer)
    assert per_transition <= 1.1 * 84 * 84, f"{per_transition:.0f} B per transition"
    assert buffer.sample(32).obs.dtype == np.uint8


def test_auto_dedups_uint8_stacks_only_and_the_config_and_shard_choose_it() -> None:
    """`frames="auto"` dedups uint8 observations of >= 3 dims only, "dedup" needs stacks;
    `ReplayConfig.frames` reaches `make_replay_buffer` and a `ReplayShard`."""

    def batch(obs: npt.NDArray[Any]) -> TransitionBatch:
        n = len(obs)
        return TransitionBatch(obs=obs, actions=np.zeros(n, np.int64), rewards=np.zeros(n, np.float32),
                               next_obs=obs, terminateds=np.zeros(n, bool), truncateds=np.zeros(n, bool))

    pixels = batch(np.zeros((2, 4, 8, 8), np.uint8))
    for obs, frames, dedup in [
        (pixels.obs, "auto", True),
        (np.zeros((2, 4, 8, 8), np.float32), "auto", False),
        (np.zeros((2, 4), np.uint8), "auto", False),
        (np.zeros((2, 4, 8), np.float32), "dedup", True),
        (pixels.obs, "plain", False),
    ]:
        buffer = ReplayBuffer(4, frames=frames)  # type: ignore[arg-type]
        buffer.add(batch(obs))
        assert (buffer.frame_store is not None) == dedup, (obs.shape, obs.dtype, frames)
    with pytest.raises(ValueError, match=r"frames='dedup' needs observations stacked as \[C, \*frame\]"):
        ReplayBuffer(4, frames="dedup").add(batch(np.zeros((2, 4), np.float32)))
    with pytest.raises(ValueError, match=r"frames must be one of \['auto', 'dedup', 'plain'\]"):
        ReplayBuffer(4, frames="yes")  # type: ignore[arg-type]
    buffer = ReplayBuffer(4)
    buffer.add(pixels)
    with pytest.raises(ValueError, match=r"column 'obs' is uint8\[4, 8, 9\] per row, but the buffer holds"):
        buffer.add(batch(np.zeros((2, 4, 8, 9), np.uint8)))
    config = ReplayConfig(capacity=8, batch_size=2, learning_starts=2, prioritized=True, frames="plain")
    assert make_replay_buffer(config).frames == "plain" and ReplayConfig().frames == "auto"
    shard = ReplayShard(ReplayConfig(capacity=8, batch_size=2, learning_starts=2))
    shard.add(pixels)
    assert shard.buffer.frame_store is not None
