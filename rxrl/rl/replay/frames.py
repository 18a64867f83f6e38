"""Frame-deduplicated replay storage: stacked pixel observations with every distinct frame stored once.

(One concept in one module, ~470 lines: the pool, its hash index and the store of references
only make sense together, and only `ReplayBuffer` uses them.)

Why: a pixel observation is a stack of `C` frames, `[C, *frame]` oldest first (Atari:
`[4, 84, 84]` uint8). Consecutive observations of one env share `C - 1` frames, and a
transition's `next_obs` shares frames with its `obs` (n-step: the stack n steps on). Stored
whole, `obs` and `next_obs` cost `2 C` frames per transition — 56 GB for a 1M-transition
Atari replay; stored once, a little over one frame (about 7.3 GB).

How (`ReplayBuffer(..., frames="dedup")` keeps `obs` and `next_obs` here; every other column,
the ids, the sampling draws and FIFO eviction are the plain buffer's, so the same adds and
seed give the same samples, row for row, byte for byte):

- `FramePool` holds distinct frames, each with a reference count and a 64-bit content hash.
  `intern(frames)` gives each frame an id: one whose bytes equal a stored frame's (found by
  hash, then compared byte for byte) gets that frame's id, a new one a free slot. Nothing
  about envs, order, episode boundaries or how a reset stack is padded is assumed: two stack
  entries share storage iff their bytes are equal, so the stacks read back are exactly those
  added, and zero padding, repeated reset frames or equal frames of different envs are all
  stored once. A hash collision only costs memory: an unequal frame is stored apart.
- `FrameStore` keeps per transition slot the ids of its `2 C` frames (obs, then next_obs).
  Before hashing, `stack_roots` proves most entries of a batch equal to an earlier entry by
  comparing shifted views of the batch (the row before, one step back; the stack `n` steps
  on), so only about one frame per transition is hashed and looked up.
- Eviction: overwriting a slot (FIFO, wrap-around) releases its references; a frame whose
  count reaches zero is freed and its space reused. A frame still referenced is never
  overwritten: the incoming rows take their references before the rows they replace release
  theirs, and only frames at count zero are handed out again.
- The hash index is an open-addressing table in a numpy array (linear probing, a window of
  buckets per vectorized step; no Python loop per frame). Entries of freed frames are left
  in place, recognised as dead by their frame's count, and reused; the table is rebuilt from
  the live frames when half its buckets have been used.
- Frames live in blocks: the first holds `capacity` frames (the plain buffer allocates its
  columns in full at the first add, too); a stream needing more gets blocks of 1/64 of the
  pool (after eight of them, 1/4), so the space beyond what is used stays small. Reads take
  from the first block in one `take` and fix up the few ids beyond it block by block.

>>> import numpy as np
>>> frames = np.arange(5 * 2, dtype=np.uint8).reshape(5, 1, 2)     # 5 frames of 1x2 pixels
>>> obs = np.stack([frames[t : t + 2] for t in range(3)])           # stacks of 2, oldest first
>>> next_obs = np.stack([frames[t + 1 : t + 3] for t in range(3)])
>>> store = FrameStore(capacity=4, obs_shape=(2, 1, 2), dtype=np.dtype(np.uint8))
>>> store.write(0, obs, next_obs)
>>> store.pool.live                  # 3 transitions x 4 stack entries, 5 distinct frames
5
>>> o, n = store.read(np.array([2, 0]))
>>> bool((o == obs[[2, 0]]).all() and (n == next_obs[[2, 0]]).all())
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

#: `ReplayBuffer(frames=...)` / `ReplayConfig.frames`: "dedup" stores observation stacks as
#: frame references, "plain" whole, "auto" dedups uint8 observations of >= 3 dims.
FrameMode = Literal["auto", "dedup", "plain"]
FRAME_MODES: tuple[FrameMode, ...] = ("auto", "dedup", "plain")

Ids = npt.NDArray[np.int64]
_HASH_SEED = 0x5EED_F4A3E
_EMPTY = -1
#: Hash-table buckets examined per vectorized probe step.
_WINDOW = 8
#: Frames compared with the pool per step: the gathered frames stay in cache.
_COMPARE_CHUNK = 256


def wants_frames(mode: FrameMode, obs: npt.NDArray[Any], where: str) -> bool:
    """Whether a buffer in `mode` stores observations like `obs` (`[B, *obs_shape]`) as frames.

    "auto" is yes for uint8 observations of >= 3 dims (`[C, H, W]`); "dedup" needs >= 2
    (ValueError naming `where` otherwise: a vector observation has no frames).
    """
    if mode == "plain":
        return False
    if mode == "auto":
        return obs.dtype == np.uint8 and obs.ndim >= 4
    if obs.ndim < 3:
        raise ValueError(
            f"{where}: frames='dedup' needs observations stacked as [C, *frame] (>= 2 dims), "
            f"got {obs.dtype}{list(obs.shape[1:])}; use frames='plain' or 'auto'"
        )
    return True


class FramePool:
    """Distinct frames, each stored once, reference-counted; an id is stable while referenced.

    `intern(frames, counts, replacing)` returns an id per frame and takes `counts`
    references to it; `release(ids)` drops references (a frame at zero is freed); `read(ids)`
    copies frames out. `live` is the number of frames referenced, `size` the number
    allocated, `nbytes` the bytes of every array held, `num_words` the 8-byte words a frame
    is hashed and compared as. `id_dtype` (int32 unless the pool may exceed 2^31 frames) is
    that of the free list, the counts and the hash table.
    """

    def __init__(
        self, frame_shape: tuple[int, ...], dtype: np.dtype[Any], initial: int,
        id_dtype: type[np.signedinteger[Any]] = np.int32,
    ) -> None:
        self.frame_shape, self.dtype, self.id_dtype = frame_shape, np.dtype(dtype), id_dtype
        frame_bytes = int(np.prod(frame_shape, dtype=np.int64)) * self.dtype.itemsize
        self.num_words = max(1, -(-frame_bytes // 8))
        coeffs = np.random.default_rng(_HASH_SEED).integers(0, 2**63, self.num_words, dtype=np.uint64)
        self._coeffs = coeffs * np.uint64(2) + np.uint64(1)  # odd: a one-word frame hashes uniquely
        self._blocks: list[npt.NDArray[Any]] = []
        self._starts = np.zeros(0, np.int64)
        self.refcount = np.zeros(0, id_dtype)
        self.hashes = np.zeros(0, np.uint64)
        self._free = np.zeros(0, id_dtype)  # a stack: the first `_num_free` entries
        self._num_free = 0
        self.live = 0
        self._table = np.full(_table_size(initial), _EMPTY, id_dtype)
        self._used = 0  # buckets filled since the last rebuild
        self._grow(max(1, initial))

    @property
    def size(self) -> int:
        """Frames allocated (live and free)."""
        return len(self.refcount)

    @property
    def nbytes(self) -> int:
        """Bytes of every array the pool holds: frames, counts, hashes, free list, index."""
        arrays = [*self._blocks, self._starts, self.refcount, self.hashes, self._free, self._table]
        return sum(a.nbytes for a in arrays)

    def intern(
        self, frames: npt.NDArray[Any], counts: Ids | None = None, replacing: Ids | None = None
    ) -> Ids:
        """Ids of `frames` (`[m, *frame_shape]`), each with `counts` more references (default
        one); equal frames share one id.

        Frames are grouped by hash; each group's first is looked up in the pool, or placed as
        a new frame; then every frame is compared byte for byte with the pool frame it was
        given, and one that differs (a hash collision) gets a frame of its own. `replacing`
        (ids whose references the caller drops) is released after the new references are
        taken and before new frames are placed: a frame in both is kept, and freed space is
        reused at once.
        """
        frames = np.ascontiguousarray(frames)
        counts = np.ones(len(frames), np.int64) if counts is None else counts
        words = _words(frames, self.num_words)
        hashes = _hash(words, self._coeffs)
        _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
        group = inverse.reshape(-1)
        totals = np.bincount(group, weights=counts, minlength=len(first)).astype(np.int64)
        ids = self._lookup(hashes[first])
        hit = ids >= 0
        self.refcount[ids[hit]] += totals[hit]  # distinct frames: one hash each
        if replacing is not None and len(replacing):
            self.release(replacing)
        new = np.flatnonzero(~hit)
        if len(new):
            ids[new] = self._place(frames[first[new]], hashes[first[new]], totals[new])
        assigned: Ids = ids[group]
        unchecked = np.ones(len(frames), bool)
        unchecked[first[new]] = False  # placed from their own bytes
        wrong = self._mismatches(words, assigned, np.flatnonzero(unchecked))
        if len(wrong):
            self.release(assigned[wrong], counts[wrong])
            assigned[wrong] = self._place(frames[wrong], hashes[wrong], counts[wrong], index=False)
        return assigned

    def release(self, ids: npt.NDArray[np.integer[Any]], counts: Ids | None = None) -> None:
        """Drop `counts` references (default one) per entry of `ids`; a frame left with none is freed."""
        if counts is None:
            unique, totals = np.unique(ids, return_counts=True)
        else:
            unique, inverse = np.unique(ids, return_inverse=True)
            totals = np.bincount(inverse.reshape(-1), weights=counts).astype(np.int64)
        self.refcount[unique] -= totals
        freed = unique[self.refcount[unique] == 0]
        self._free[self._num_free : self._num_free + len(freed)] = freed
        self._num_free += len(freed)
        self.live -= len(freed)

    def read(self, ids: npt.NDArray[np.integer[Any]]) -> npt.NDArray[Any]:
        """A copy of the frames `ids`, `[len(ids), *frame_shape]`."""
        main = self._blocks[0]
        out: npt.NDArray[Any] = np.take(main, ids, axis=0, mode="clip")  # beyond: fixed below
        if len(self._blocks) > 1:
            beyond = np.flatnonzero(ids >= len(main))
            for b, at, offsets in self._by_block(ids, beyond):
                out[at] = self._blocks[b][offsets]
        return out

    # -- storage ---------------------------------------------------------------------------

    def _write(self, ids: Ids, frames: npt.NDArray[Any]) -> None:
        inside = ids < len(self._blocks[0])
        self._blocks[0][ids[inside]] = frames[inside]
        for b, at, offsets in self._by_block(ids, np.flatnonzero(~inside)):
            self._blocks[b][offsets] = frames[at]

    def _by_block(
        self, ids: npt.NDArray[np.integer[Any]], positions: npt.NDArray[np.intp]
    ) -> list[tuple[int, npt.NDArray[np.intp], npt.NDArray[np.int64]]]:
        """`(block, positions, offsets in the block)` for each block the `ids[positions]` are
        in: one step per block, never per frame."""
        block = np.searchsorted(self._starts, ids[positions], side="right") - 1
        parts = []
        for b in np.unique(block).tolist():
            at = positions[block == b]
            parts.append((b, at, ids[at] - self._starts[b]))
        return parts

    def _place(
        self, frames: npt.NDArray[Any], hashes: npt.NDArray[np.uint64], counts: Ids, index: bool = True
    ) -> Ids:
        """Store `frames` as new frames with these hashes and reference counts; their ids.
        Frames stored apart after a hash collision are not indexed (the hash is taken)."""
        fresh = self._take_free(len(frames))
        self._write(fresh, frames)
        self.hashes[fresh] = hashes
        self.refcount[fresh] = counts
        self.live += len(fresh)
        if index:
            self._index(fresh)
        return fresh

    def _mismatches(self, words: npt.NDArray[np.uint64], assigned: Ids, positions: Ids) -> Ids:
        """Those `positions` whose frame differs from the pool frame `assigned` to it."""
        wrong = [np.zeros(0, np.int64)]
        for lo in range(0, len(positions), _COMPARE_CHUNK):
            at = positions[lo : lo + _COMPARE_CHUNK]
            stored = _words(self.read(assigned[at]), self.num_words)
            wrong.append(at[(words[at] != stored).any(axis=1)])
        return np.concatenate(wrong)

    def _take_free(self, count: int) -> Ids:
        if self._num_free < count:
            small = len(self._blocks) <= 8  # the first extra blocks: 1/64 of the pool, then 1/4
            self._grow(max(count - self._num_free, 64, self.size // (64 if small else 4)))
        self._num_free -= count
        taken: Ids = self._free[self._num_free : self._num_free + count].astype(np.int64)
        return taken

    def _grow(self, count: int) -> None:
        start = self.size
        self._blocks.append(np.zeros((count, *self.frame_shape), self.dtype))
        self._starts = np.append(self._starts, start)
        self.refcount = np.concatenate([self.refcount, np.zeros(count, self.id_dtype)])
        self.hashes = np.concatenate([self.hashes, np.zeros(count, np.uint64)])
        free = np.zeros(start + count, self.id_dtype)
        free[: self._num_free] = self._free[: self._num_free]
        free[self._num_free : self._num_free + count] = np.arange(start + count - 1, start - 1, -1)
        self._free, self._num_free = free, self._num_free + count  # popped from the end: lowest first

    # -- hash index ------------------------------------------------------------------------

    def _lookup(self, hashes: npt.NDArray[np.uint64]) -> Ids:
        """For each hash, a live frame with that hash, or -1. Probes `_WINDOW` buckets per
        vectorized step, so nearly every query ends in the first."""
        found = np.full(len(hashes), -1, np.int64)
        pending, at = np.arange(len(hashes)), self._bucket(hashes)
        while len(pending):
            window = self._window(at)
            entry = self._table[window]
            frame = np.maximum(entry, 0)
            hit = (entry >= 0) & (self.refcount[frame] > 0) & (self.hashes[frame] == hashes[pending, None])
            stop = hit | (entry < 0)  # a match, or an empty bucket: no match further on
            first = stop.argmax(axis=1)
            rows = np.arange(len(pending))
            matched = np.flatnonzero(hit[rows, first])
            found[pending[matched]] = entry[matched, first[matched]]
            more = ~stop[rows, first]
            pending, at = pending[more], at[more] + _WINDOW
        return found

    def _index(self, ids: Ids) -> None:
        """Enter frames (already counted, so their buckets read as taken) into the table."""
        if 2 * (self._used + len(ids)) > len(self._table):
            live = np.flatnonzero(self.refcount > 0)
            self._table = np.full(_table_size(len(live)), _EMPTY, self.id_dtype)
            self._used = 0
            self._enter(live)
        else:
            self._enter(ids)

    def _enter(self, ids: npt.NDArray[np.integer[Any]]) -> None:
        """Put each frame in the first free bucket (empty, or a freed frame's) from its hash's;
        frames wanting the same bucket write it together, the last write wins, the rest retry."""
        pending, at = np.arange(len(ids)), self._bucket(self.hashes[ids])
        while len(pending):
            window = self._window(at)
            entry = self._table[window]
            free = (entry < 0) | (self.refcount[np.maximum(entry, 0)] == 0)
            first = free.argmax(axis=1)
            rows = np.flatnonzero(free[np.arange(len(pending)), first])
            buckets, wanted = window[rows, first[rows]], ids[pending[rows]]
            self._table[buckets] = wanted
            won = rows[self._table[buckets] == wanted]
            self._used += int((entry[won, first[won]] < 0).sum())
            at[~free.any(axis=1)] += _WINDOW  # a full window: look further on
            more = np.ones(len(pending), bool)
            more[won] = False
            pending, at = pending[more], at[more]

    def _bucket(self, hashes: npt.NDArray[np.uint64]) -> Ids:
        bits = len(self._table).bit_length() - 1
        return (hashes >> np.uint64(64 - bits)).astype(np.int64)  # the hash's top bits

    def _window(self, at: Ids) -> Ids:
        return (at[:, None] + np.arange(_WINDOW)) & (len(self._table) - 1)


class FrameStore:
    """The `obs` and `next_obs` of `capacity` transition slots, as references into a `FramePool`.

    `obs_shape` is `[C, *frame]`: `C` stacked frames. `write(start, obs, next_obs)` fills
    slots `start .. start + len(obs) - 1` (releasing what they held), `read(slots)` returns
    fresh `(obs, next_obs)` arrays, `state_dict(order)` the live frames and each slot's
    references in `order`.
    """

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
        self.capacity, self.obs_shape, self.dtype = capacity, obs_shape, np.dtype(dtype)
        self.stack = obs_shape[0]
        # ids beyond int32 only for pools that could pass 2^31 frames (2C per transition, slack)
        id_dtype = np.int64 if 4 * self.stack * capacity >= 2**31 else np.int32
        self.pool = FramePool(obs_shape[1:], self.dtype, capacity, id_dtype)
        self.refs = np.full((capacity, 2 * self.stack), -1, id_dtype)

    @property
    def nbytes(self) -> int:
        """Bytes of the references and of the pool's arrays."""
        return self.refs.nbytes + self.pool.nbytes

    def write(
        self, start: int, obs: npt.NDArray[Any], next_obs: npt.NDArray[Any], n_steps: Ids | None = None
    ) -> None:
        """Store rows of `obs` / `next_obs` (`[k, *obs_shape]`) in slots `start .. start + k - 1`.

        `n_steps` (the rows' step counts) only says how far on a row's `next_obs` is, for the
        links `stack_roots` tries; any value gives the same result."""
        k = len(obs)
        if k == 0:
            return
        c, frame_shape = self.stack, self.obs_shape[1:]
        obs = np.ascontiguousarray(obs).reshape(k * c, *frame_shape)
        next_obs = np.ascontiguousarray(next_obs).reshape(k * c, *frame_shape)
        words = [_words(x, self.pool.num_words).reshape(k, c, -1) for x in (obs, next_obs)]
        rep = stack_roots(words[0], words[1], _most_common(n_steps))
        roots = np.flatnonzero(rep == np.arange(len(rep)))
        in_obs = int(np.searchsorted(roots, k * c))
        frames = np.concatenate([obs[roots[:in_obs]], next_obs[roots[in_obs:] - k * c]])
        counts = np.bincount(rep, minlength=len(rep))[roots]
        old = self.refs[start : start + k].reshape(-1)
        root_ids = self.pool.intern(frames, counts, replacing=old[old >= 0].astype(np.int64))
        index = np.empty(len(rep), np.int64)
        index[roots] = np.arange(len(roots))
        ids = root_ids[index[rep]]
        self.refs[start : start + k, :c] = ids[: k * c].reshape(k, c)
        self.refs[start : start + k, c:] = ids[k * c :].reshape(k, c)

    def read(self, slots: npt.NDArray[np.integer[Any]]) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        """Fresh `(obs, next_obs)` of the transitions in `slots` (one gather; no aliasing)."""
        refs = self.refs[slots]
        c, b = self.stack, len(slots)
        frames = self.pool.read(np.concatenate([refs[:, :c].reshape(-1), refs[:, c:].reshape(-1)]))
        return frames[: b * c].reshape(b, *self.obs_shape), frames[b * c :].reshape(b, *self.obs_shape)

    def state_dict(self, order: npt.NDArray[np.intp]) -> dict[str, npt.NDArray[Any]]:
        """The frames the slots in `order` refer to, once each (`"frames"`), and per slot
        the positions of its obs and next_obs frames among them (`"obs"`, `"next_obs"`)."""
        refs = self.refs[order]
        live, inverse = np.unique(refs, return_inverse=True)
        positions = inverse.reshape(refs.shape).astype(np.int64)
        c = self.stack
        return {
            "frames": self.pool.read(live),
            "obs": np.ascontiguousarray(positions[:, :c]),
            "next_obs": np.ascontiguousarray(positions[:, c:]),
        }


def stack_roots(obs: npt.NDArray[np.uint64], next_obs: npt.NDArray[np.uint64], shift: int) -> Ids:
    """For each stack entry of `k` rows — `obs[i, j]` at position `i C + j`, then
    `next_obs[i, j]` at `k C + i C + j`, given as words `[k, C, W]` — the earliest entry
    proven byte for byte to hold the same frame along a stream's continuity; an entry that
    is its own is a root.

    The links tried: `obs[i, j] == obs[i - 1, j + 1]` (the row before, one step back),
    `next_obs[i, j] == obs[i, j + shift]` (frames still in the stack `shift` steps on) and,
    for the newest `shift` frames, `next_obs[i, j] == obs[i + shift, j]` (the row `shift` on).
    Each is one comparison of two shifted views — sequential reads, no hashing, no gather —
    and holds for the consecutive rows of one env (`NStepFolder`'s order); where it does not
    (another env, an episode start, any other order), the entry stays a root and is found by
    hash instead. Every link points to an earlier position, so the roots are reached by
    pointer jumping in a few vectorized steps.
    """
    k, c = obs.shape[:2]
    rep = np.arange(2 * k * c).reshape(2, k, c)
    base = rep[0].copy()
    n = max(1, shift)
    if k > 1 and c > 1:
        _link(rep[0, 1:, :-1], base[:-1, 1:], obs[1:, :-1], obs[:-1, 1:])
    if n < c:
        _link(rep[1, :, : c - n], base[:, n:], next_obs[:, : c - n], obs[:, n:])
    if k > n:
        lo = max(c - n, 0)
        _link(rep[1, : k - n, lo:], base[n:, lo:], next_obs[: k - n, lo:], obs[n:, lo:])
    flat = rep.reshape(-1)
    while True:
        up = flat[flat]
        if np.array_equal(up, flat):
            return flat
        flat = up


def expand_frames(
    state: Mapping[str, Any], rows: slice
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """Rows `rows` of the whole `(obs, next_obs)` stacks a `FrameStore.state_dict` encodes
    (its arrays, or the CPU tensors a checkpoint file holds them as)."""
    frames = np.asarray(state["frames"])
    return frames[np.asarray(state["obs"][rows])], frames[np.asarray(state["next_obs"][rows])]


def _link(
    rep: npt.NDArray[np.int64], earlier: npt.NDArray[np.int64],
    words: npt.NDArray[np.uint64], earlier_words: npt.NDArray[np.uint64],
) -> None:
    """Point the entries of `rep` (a view) whose words equal `earlier_words` at `earlier`."""
    equal = (words == earlier_words).all(axis=-1)
    rep[equal] = earlier[equal]


def _most_common(values: Ids | None) -> int:
    if values is None or len(values) == 0:
        return 1
    unique, counts = np.unique(values, return_counts=True)
    return int(unique[counts.argmax()])


def _table_size(frames: int) -> int:
    """Buckets for `frames` entries: a power of two >= 4x, so the table is under half full
    until about as many frames again have been indexed."""
    return max(16, 1 << (4 * max(frames, 1) - 1).bit_length())


def _hash(words: npt.NDArray[np.uint64], coeffs: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """A 64-bit hash per frame: the dot product of its words with random odd coefficients,
    mod 2^64 (one integer matmul, about as fast as copying the frames)."""
    hashes: npt.NDArray[np.uint64] = words @ coeffs
    return hashes


def _words(frames: npt.NDArray[Any], num_words: int) -> npt.NDArray[np.uint64]:
    """Each frame's bytes as `num_words` uint64 words, zero-padded to whole words (a view when
    the frames are contiguous whole words)."""
    m = len(frames)
    per_frame = int(np.prod(frames.shape[1:], dtype=np.int64))
    raw = np.ascontiguousarray(frames).reshape(m, per_frame).view(np.uint8)
    if raw.shape[1] != 8 * num_words:
        padded = np.zeros((m, 8 * num_words), np.uint8)
        padded[:, : raw.shape[1]] = raw
        raw = padded
    return raw.view(np.uint64)


__all__ = [
    "FRAME_MODES", "FrameMode", "FramePool", "FrameStore", "expand_frames", "stack_roots", "wants_frames"
]
