"""Replay buffers over transition columns: uniform, and proportional prioritized (sum tree).

Both keep the last `capacity` transitions added, in preallocated numpy columns written
with at most two slice copies per `add` (wrap-around), and sample with a seeded numpy
Generator. A sampled `TransitionBatch` carries `indices`: ids that count every transition
ever added (the slot is `id % capacity`). Because an id is never reused, a priority update
for a transition that has been overwritten since it was sampled — usual in Ape-X, where
workers keep adding while the learner trains — is recognised and dropped instead of
landing on the newer transition in that slot.

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

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from rxrl.rl.config import ReplayConfig
from rxrl.rl.data.transitions import TRANSITION_COLUMNS, IntArray, TransitionBatch
from rxrl.rl.replay.sumtree import SumTree
from rxrl.rl.schedules import LinearSchedule

Seed = int | Sequence[int]


class ReplayBuffer:
    """Uniform replay of the last `capacity` transitions; `sample` draws with replacement.

    Columns are allocated at the first `add` from that batch's per-row shapes and dtypes;
    later batches must match them (ValueError naming the column otherwise). An `add` of
    more rows than `capacity` keeps its last `capacity` rows.

    `state_dict()` saves the stored rows of every column (as CPU tensors, so that a
    `torch.load(..., weights_only=True)` checkpoint reads them), the count of transitions
    added and the sampling generator's state; `load_state_dict` restores an identical
    buffer: the same rows under the same ids and the same next samples.
    """

    def __init__(self, capacity: int, seed: Seed = 0) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"ReplayBuffer: capacity must be an integer >= 1, got {capacity!r}")
        self.capacity = capacity
        self.rng = np.random.default_rng(np.random.SeedSequence(seed))
        self.num_added = 0
        self._columns: dict[str, npt.NDArray[Any]] = {}

    def __len__(self) -> int:
        """The number of transitions held: `min(num_added, capacity)`."""
        return min(self.num_added, self.capacity)

    def add(self, batch: TransitionBatch) -> None:
        """Append the batch's transitions, overwriting the oldest once full."""
        n = len(batch)
        if n == 0:
            return
        if not self._columns:
            self._allocate(batch)
        keep = min(n, self.capacity)
        start = (self.num_added + n - keep) % self.capacity
        first = min(keep, self.capacity - start)
        for name, column in self._columns.items():
            values = getattr(batch, name)
            if values.shape[1:] != column.shape[1:] or values.dtype != column.dtype:
                raise ValueError(
                    f"{type(self).__name__}.add: column {name!r} is {values.dtype}{list(values.shape[1:])} "
                    f"per row, but the buffer holds {column.dtype}{list(column.shape[1:])}"
                )
            column[start : start + first] = values[n - keep : n - keep + first]
            column[: keep - first] = values[n - keep + first :]
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
        return {
            "capacity": self.capacity,
            "num_added": self.num_added,
            "columns": {n: _to_tensor(c[order]) for n, c in self._columns.items()},
            "rng": self.rng.bit_generator.state,
            "size": size,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a `state_dict()` of a buffer with the same capacity."""
        if int(state["capacity"]) != self.capacity:
            raise ValueError(
                f"{type(self).__name__}.load_state_dict: the state has capacity {state['capacity']}, "
                f"this buffer {self.capacity}"
            )
        self.num_added = int(state["num_added"])
        self.rng.bit_generator.state = state["rng"]
        self._columns = {}
        order = self._slots_oldest_first()
        for name, tensor in state["columns"].items():
            values = tensor.numpy()
            column = np.zeros((self.capacity, *values.shape[1:]), dtype=values.dtype)
            column[order] = values
            self._columns[name] = column

    # -- internals -------------------------------------------------------------------------

    def _allocate(self, batch: TransitionBatch) -> None:
        for name in TRANSITION_COLUMNS:
            values = getattr(batch, name)
            self._columns[name] = np.zeros((self.capacity, *values.shape[1:]), dtype=values.dtype)

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
    ) -> None:
        super().__init__(capacity, seed)
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
            priorities=torch.from_numpy(self.tree[order].copy()),
            max_priority=self.max_priority,
            num_sampled=self.num_sampled,
        )
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a `state_dict()` of a prioritized buffer with the same capacity."""
        super().load_state_dict(state)
        self.tree = SumTree(self.capacity)
        self.tree.update(self._slots_oldest_first(), state["priorities"].numpy())
        self.max_priority = float(state["max_priority"])
        self.num_sampled = int(state["num_sampled"])

    def _written(self, start: int, count: int) -> None:
        self.tree.set_range(start, np.full(count, self.max_priority**self.alpha))


def make_replay_buffer(config: ReplayConfig, seed: Seed = 0) -> ReplayBuffer | PrioritizedReplayBuffer:
    """The buffer `config` describes: prioritized or uniform, with its capacity and beta schedule."""
    if not config.prioritized:
        return ReplayBuffer(config.capacity, seed)
    beta: float | LinearSchedule = config.beta
    if config.beta_annealing_samples is not None:
        beta = LinearSchedule(config.beta, config.final_beta, config.beta_annealing_samples)
    return PrioritizedReplayBuffer(config.capacity, config.alpha, beta, config.priority_eps, seed)


def _to_tensor(values: npt.NDArray[Any]) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(values))


__all__ = ["PrioritizedReplayBuffer", "ReplayBuffer", "Seed", "make_replay_buffer"]
