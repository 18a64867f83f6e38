"""Replay buffers over transition columns: uniform, and proportional prioritized (sum tree).

Both keep the last `capacity` transitions added, in preallocated numpy columns written
with at most two slice copies per `add` (wrap-around), and sample with a seeded numpy
Generator. Stacked pixel observations (uint8 `[C, H, W]`) are stored as references into a
pool holding each distinct frame once (`rxrl.rl.replay.frames`, `frames="auto"`): a
little over one frame per transition instead of `2 C`, and the same rows returned.

A sampled `TransitionBatch` carries `indices`: ids that count every transition ever added
(the slot is `id % capacity`). Because an id is never reused, a priority update for a
transition that has been overwritten since it was sampled — usual in Ape-X, where workers
keep adding while the learner trains — is recognised and dropped instead of landing on the
newer transition in that slot.

>>> import numpy as np
>>> from rxrl.rl.data.transitions import TransitionBatch
>>> def rows(start, n):
...     x = np.arange(start, start + n, dtype=np.float32)
...     return TransitionBatch(obs=x[:, None], actions=np.zeros(n, np.int64), rewards=x,
...                            next_obs=x[:, None] + 1, terminateds=x < 0, truncateds=x < 0)
>>> buffer = PrioritizedReplayBuffer(capacity=4, alpha=1.0, beta=1.0, seed=0)
>>> buffer.add(rows(0, 6))          # keeps the last 4: rewards 2, 3, 4, 5
>>> len(buffer), buffer.num_added
(4, 6)
>>> buffer.update_priorities(np.array([2, 3, 4, 5]), np.array([0.0, 0.0, 0.0, 3.0]))
>>> batch = buffer.sample(4)
>>> batch.rewards.tolist(), batch.indices.tolist()
([5.0, 5.0, 5.0, 5.0], [5, 5, 5, 5])
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from rxrl.rl.config import ReplayConfig
from rxrl.rl.data.transitions import TRANSITION_COLUMNS, IntArray, TransitionBatch
from rxrl.rl.replay.frames import FRAME_MODES, FrameMode, FrameStore, expand_frames, wants_frames
from rxrl.rl.replay.sumtree import SumTree
from rxrl.rl.schedules import LinearSchedule

Seed = int | Sequence[int]
#: `load_state_dict` rebuilds a buffer through its write path in chunks of about this many bytes.
_LOAD_CHUNK_BYTES = 1 << 26


class ReplayBuffer:
    """Uniform replay of the last `capacity` transitions; `sample` draws with replacement.

    Columns are allocated at the first `add` from that batch's per-row shapes and dtypes;
    later batches must match them (ValueError naming the column otherwise). An `add` of
    more rows than `capacity` keeps its last `capacity` rows.

    `frames` says how `obs` and `next_obs` are kept: "plain" whole, "dedup" as stacks of
    references into a `FramePool` that stores each distinct frame once (`[C, *frame]`
    observations, `rxrl.rl.replay.frames`), "auto" (the default) dedups uint8 observations
    of >= 3 dims. Decided at the first `add` (`frame_store` is then the store, or None);
    the rows, ids, samples and `len` are the same either way, only the memory differs.

    `state_dict()` saves the stored rows of every column (numpy arrays: a replay shard's
    process has no torch; a checkpoint file stores them as CPU tensors,
    `rxrl.training.checkpoint.save_checkpoint`) — with frames, the live frames once each and
    every row's references (`"frames"`) instead of `obs` / `next_obs` — the count of
    transitions added and the sampling generator's state; `load_state_dict` restores an
    identical buffer: the same rows under the same ids and the same next samples, from a
    state of either kind, its arrays as arrays or as CPU tensors.
    """

    def __init__(self, capacity: int, seed: Seed = 0, frames: FrameMode = "auto") -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"ReplayBuffer: capacity must be an integer >= 1, got {capacity!r}")
        if frames not in FRAME_MODES:
            raise ValueError(f"ReplayBuffer: frames must be one of {list(FRAME_MODES)}, got {frames!r}")
        self.capacity = capacity
        self.frames: FrameMode = frames
        self.rng = np.random.default_rng(np.random.SeedSequence(seed))
        self.num_added = 0
        self._columns: dict[str, npt.NDArray[Any]] = {}
        self.frame_store: FrameStore | None = None

    def __len__(self) -> int:
        """The number of transitions held: `min(num_added, capacity)`."""
        return min(self.num_added, self.capacity)

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays holding the transitions (columns, and frames with their index)."""
        frames = 0 if self.frame_store is None else self.frame_store.nbytes
        return sum(c.nbytes for c in self._columns.values()) + frames

    def add(self, batch: TransitionBatch) -> None:
        """Append the batch's transitions, overwriting the oldest once full."""
        n = len(batch)
        if n == 0:
            return
        keep = min(n, self.capacity)
        start = (self.num_added + n - keep) % self.capacity
        first = self._store(batch, n - keep, start, keep)
        self.num_added += n
        self._written(start, first)
        if keep > first:
            self._written(0, keep - first)

    def sample(self, batch_size: int) -> TransitionBatch:
        """`batch_size` stored transitions drawn uniformly with replacement, with their `indices`."""
        self._check_sample(batch_size)
        size = len(self)
        ids = self.rng.integers(self.num_added - size, self.num_added, batch_size, dtype=np.int64)
        return self._gather(ids % self.capacity, ids, None)

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to restore this buffer (see the class docstring); a copy."""
        size = len(self)
        order = self._slots_oldest_first()
        state = {
            "capacity": self.capacity,
            "num_added": self.num_added,
            "columns": {n: c[order] for n, c in self._columns.items()},
            "rng": self.rng.bit_generator.state,
            "size": size,
        }
        if self.frame_store is not None:
            state["frames"] = self.frame_store.state_dict(order)
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a `state_dict()` of a buffer with the same capacity."""
        if int(state["capacity"]) != self.capacity:
            raise ValueError(
                f"{type(self).__name__}.load_state_dict: the state has capacity {state['capacity']}, "
                f"this buffer {self.capacity}"
            )
        self.num_added = int(state["num_added"])
        self.rng.bit_generator.state = state["rng"]
        self._columns, self.frame_store = {}, None
        start = int(self._slots_oldest_first()[0]) if len(self) else 0
        for batch in _stored_batches(state, len(self)):  # through the write path, oldest first
            self._store(batch, 0, start, len(batch))
            start = (start + len(batch)) % self.capacity

    # -- internals -------------------------------------------------------------------------

    def _allocate(self, batch: TransitionBatch) -> None:
        if wants_frames(self.frames, batch.obs, type(self).__name__):
            self.frame_store = FrameStore(self.capacity, batch.obs.shape[1:], batch.obs.dtype)
        for name in TRANSITION_COLUMNS:
            if self.frame_store is not None and name in ("obs", "next_obs"):
                continue
            values = getattr(batch, name)
            self._columns[name] = np.zeros((self.capacity, *values.shape[1:]), dtype=values.dtype)

    def _store(self, batch: TransitionBatch, row: int, start: int, count: int) -> int:
        """Write rows `row .. row + count - 1` to slots `start, ...` (wrapping past the end);
        returns how many went before the wrap."""
        if not self._columns:
            self._allocate(batch)
        self._check_rows(batch)
        first = min(count, self.capacity - start)
        for lo, slot, size in ((row, start, first), (row + first, 0, count - first)):
            for name, column in self._columns.items():
                column[slot : slot + size] = getattr(batch, name)[lo : lo + size]
            if self.frame_store is not None:
                rows = slice(lo, lo + size)
                self.frame_store.write(slot, batch.obs[rows], batch.next_obs[rows], batch.n_steps[rows])
        return first

    def _check_rows(self, batch: TransitionBatch) -> None:
        held = {n: (c.shape[1:], c.dtype) for n, c in self._columns.items()}
        if self.frame_store is not None:
            held["obs"] = held["next_obs"] = (self.frame_store.obs_shape, self.frame_store.dtype)
        for name, (shape, dtype) in held.items():
            values = getattr(batch, name)
            if values.shape[1:] != shape or values.dtype != dtype:
                raise ValueError(
                    f"{type(self).__name__}.add: column {name!r} is {values.dtype}{list(values.shape[1:])} "
                    f"per row, but the buffer holds {dtype}{list(shape)}"
                )

    def _written(self, start: int, count: int) -> None:
        """Slots `start .. start + count - 1` now hold new transitions (a hook)."""

    def _check_sample(self, batch_size: int) -> None:
        name = type(self).__name__
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"{name}.sample: batch_size must be an integer >= 1, got {batch_size!r}")
        if batch_size > self.capacity:
            raise ValueError(
                f"{name}.sample: batch_size {batch_size} is larger than the capacity {self.capacity}"
            )
        if self.num_added == 0:
            raise ValueError(f"{name}.sample: the buffer is empty; add transitions first")

    def _gather(
        self, slots: npt.NDArray[np.intp], ids: IntArray, weights: npt.NDArray[np.float32] | None
    ) -> TransitionBatch:
        columns: dict[str, Any] = {n: c[slots] for n, c in self._columns.items()}
        if self.frame_store is not None:
            columns["obs"], columns["next_obs"] = self.frame_store.read(slots)
        return TransitionBatch(**columns, weights=weights, indices=ids)

    def _slot_ids(self, slots: npt.NDArray[np.intp]) -> IntArray:
        """The id of the transition each stored slot holds (the newest that maps to it)."""
        last = self.num_added - 1
        ids: IntArray = last - (last - slots) % self.capacity
        return ids

    def _slots_oldest_first(self) -> npt.NDArray[np.intp]:
        return (np.arange(self.num_added - len(self), self.num_added) % self.capacity).astype(np.intp)


class PrioritizedReplayBuffer(ReplayBuffer):
    """Proportional prioritized replay (Schaul et al. 2016) over a `SumTree`.

    A transition is drawn with probability `P(i) = p_i^alpha / sum_k p_k^alpha`, by
    stratified sampling (one draw in each of `batch_size` equal slices of the total), and
    comes with the importance weight `w_i = (N P(i))^-beta`, normalized by the largest
    weight in its batch, so weights lie in (0, 1]. (The paper normalizes by the largest
    weight over the whole buffer, which needs a second, min, tree updated on every write;
    the batch maximum, as Dopamine uses, keeps the update path half as long.)

    New transitions get the largest priority seen so far (1 at first), so each is replayed
    at least about once before its TD error is known. `update_priorities(ids, p)` stores
    `(p + eps)^alpha`. `beta` is a float or a `LinearSchedule` evaluated at the number of
    `sample` calls so far (anneal it toward 1 over the run); `sample(beta=...)` overrides.

    `state_dict()` adds to the uniform buffer's the stored priorities, the largest priority
    seen and the count of `sample` calls (the beta schedule's clock).
    """

    def __init__(
        self,
        capacity: int,
        alpha: float = 0.6,
        beta: float | LinearSchedule = 0.4,
        eps: float = 1e-6,
        seed: Seed = 0,
        frames: FrameMode = "auto",
    ) -> None:
        super().__init__(capacity, seed, frames)
        if not alpha >= 0.0:
            raise ValueError(f"PrioritizedReplayBuffer: alpha must be >= 0, got {alpha!r}")
        if not eps > 0.0:
            raise ValueError(f"PrioritizedReplayBuffer: eps must be > 0, got {eps!r}")
        betas = (beta.start, beta.end) if isinstance(beta, LinearSchedule) else (beta,)
        if not all(0.0 <= b <= 1.0 for b in betas):
            raise ValueError(f"PrioritizedReplayBuffer: beta must be in [0, 1], got {beta!r}")
        self.alpha, self.beta, self.eps = alpha, beta, eps
        self.tree = SumTree(capacity)
        self.max_priority = 1.0
        self.num_sampled = 0

    def current_beta(self) -> float:
        """The beta the next `sample()` will use."""
        return self.beta(self.num_sampled) if isinstance(self.beta, LinearSchedule) else float(self.beta)

    def sample(self, batch_size: int, beta: float | None = None) -> TransitionBatch:
        """`batch_size` transitions drawn by priority, with `weights` and `indices`."""
        self._check_sample(batch_size)
        b = self.current_beta() if beta is None else beta
        self.num_sampled += 1
        strata = (np.arange(batch_size) + self.rng.random(batch_size)) * (self.tree.total / batch_size)
        slots = self.tree.find(strata)
        priorities = self.tree[slots]
        # w_i / max_j w_j = (p_min / p_i)^beta: no overflow, exactly 1 for the batch's rarest
        weights = np.power(priorities.min() / priorities, b).astype(np.float32)
        return self._gather(slots, self._slot_ids(slots), weights)

    def update_priorities(self, indices: npt.ArrayLike, priorities: npt.ArrayLike) -> None:
        """Set the priorities (e.g. |TD errors|) of the transitions with these ids.

        Ids of transitions overwritten since they were sampled are ignored. Raises
        ValueError for mismatched shapes, ids never added, or priorities that are
        negative, NaN or infinite (one bad value would poison every later sample).
        """
        ids = np.asarray(indices, dtype=np.int64)
        p = np.asarray(priorities, dtype=np.float64)
        if ids.shape != p.shape or ids.ndim != 1:
            raise ValueError(
                f"update_priorities: indices {ids.shape} and priorities {p.shape} must be equal 1-D shapes"
            )
        if len(ids) == 0:
            return
        if ids.min() < 0 or ids.max() >= self.num_added:
            raise ValueError(
                f"update_priorities: ids must be in 0..{self.num_added - 1} (transitions added), "
                f"got {ids.min()}..{ids.max()}"
            )
        if not (np.isfinite(p).all() and p.min() >= 0.0):
            raise ValueError(
                "update_priorities: priorities must be finite and >= 0 (got NaN, inf or a negative)"
            )
        live = ids >= self.num_added - len(self)
        if not live.all():
            ids, p = ids[live], p[live]
        p = p + self.eps
        if len(p):
            self.tree.update(ids % self.capacity, np.power(p, self.alpha))
            self.max_priority = max(self.max_priority, float(p.max()))

    def state_dict(self) -> dict[str, Any]:
        """The uniform buffer's state plus priorities, max priority and sample count."""
        state = super().state_dict()
        order = self._slots_oldest_first()
        state.update(
            priorities=self.tree[order].copy(),
            max_priority=self.max_priority,
            num_sampled=self.num_sampled,
        )
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a `state_dict()` of a prioritized buffer with the same capacity."""
        super().load_state_dict(state)
        self.tree = SumTree(self.capacity)
        self.tree.update(self._slots_oldest_first(), np.asarray(state["priorities"]))
        self.max_priority = float(state["max_priority"])
        self.num_sampled = int(state["num_sampled"])

    @property
    def nbytes(self) -> int:
        """The uniform buffer's bytes plus the sum tree's."""
        return super().nbytes + self.tree.nodes.nbytes

    def _written(self, start: int, count: int) -> None:
        self.tree.set_range(start, np.full(count, self.max_priority**self.alpha))


def make_replay_buffer(config: ReplayConfig, seed: Seed = 0) -> ReplayBuffer | PrioritizedReplayBuffer:
    """The buffer `config` describes: prioritized or uniform, with its capacity, beta schedule
    and frame storage (`config.frames`)."""
    if not config.prioritized:
        return ReplayBuffer(config.capacity, seed, config.frames)
    beta: float | LinearSchedule = config.beta
    if config.beta_annealing_samples is not None:
        beta = LinearSchedule(config.beta, config.final_beta, config.beta_annealing_samples)
    return PrioritizedReplayBuffer(
        config.capacity, config.alpha, beta, config.priority_eps, seed, frames=config.frames
    )


def _stored_batches(state: Mapping[str, Any], size: int) -> Iterator[TransitionBatch]:
    """The `size` rows of a `state_dict()` (either kind), oldest first, in chunks of bounded bytes."""
    columns: dict[str, Any] = {n: np.asarray(t) for n, t in state["columns"].items()}  # arrays, or tensors
    frames = state.get("frames")
    if frames is not None:
        row_bytes = 2 * frames["obs"].shape[1] * np.asarray(frames["frames"][0]).nbytes
    else:
        row_bytes = sum(c[0].nbytes for c in columns.values()) if size else 1
    step = max(1, _LOAD_CHUNK_BYTES // max(row_bytes, 1))
    for lo in range(0, size, step):
        rows = slice(lo, min(lo + step, size))
        chunk = {n: c[rows] for n, c in columns.items()}
        if frames is not None:
            chunk["obs"], chunk["next_obs"] = expand_frames(frames, rows)
        yield TransitionBatch(**chunk)


__all__ = ["PrioritizedReplayBuffer", "ReplayBuffer", "Seed", "make_replay_buffer"]
