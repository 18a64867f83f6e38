"""SequenceBatch: transitions as sequences in time, with episode starts and recurrent states.

A recurrent learner must see what the worker saw: steps in time order, where each episode
began, and the state each sequence started from. A `SampleBatch` has none of that (its rows
may be shuffled), so a sequence batch is a type of its own, not a flag on one: a plan that
sends flat batches to a learner that expects sequences (or the reverse) fails `mypy`
(`tests/typing/cases/`), instead of reshaping rows silently.

Rows are env-major sequences of `length` steps, as in `rxrl.rl.data.fragment.Fragment`:
rows ``s * length .. (s + 1) * length - 1`` are sequence ``s``, one environment's steps in
time order. ``starts[i]`` says row ``i`` is the first step of an episode (the state was zeroed
before it); ``initial_state[s]`` is the state sequence ``s`` starts from (zeros where its first
row starts an episode).

>>> import numpy as np
>>> from rxrl.rl.data.batch import SampleBatch
>>> f = np.zeros(6, np.float32)
>>> rows = SampleBatch(obs=np.arange(6.0)[:, None], actions=np.zeros(6, np.int64), rewards=f,
...                    terminateds=f > 0, truncateds=f > 0, logp=f, values=f, advantages=f,
...                    value_targets=f)
>>> seqs = SequenceBatch(rows, length=3, starts=np.array([1, 0, 0, 0, 1, 0], bool),
...                      initial_state=np.zeros((2, 4), np.float32))
>>> seqs.num_sequences, seqs.state_size, seqs.sequences(np.array([1])).batch.obs[:, 0].tolist()
(2, 4, [3.0, 4.0, 5.0])
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from rxrl.rl.data.batch import SampleBatch

BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float32]


def sequence_rows(indices: npt.NDArray[np.intp], length: int) -> npt.NDArray[np.int64]:
    """The rows of the env-major sequences of `length` steps at `indices`, in that order.

    >>> sequence_rows(np.array([2, 0]), 3).tolist()
    [6, 7, 8, 0, 1, 2]
    """
    order = np.asarray(indices, dtype=np.int64)
    rows: npt.NDArray[np.int64] = (order[:, None] * length + np.arange(length)).ravel()
    return rows


def _bools(value: Any) -> BoolArray:
    return np.asarray(value, dtype=np.bool_)


def _floats(value: Any) -> FloatArray:
    return np.asarray(value, dtype=np.float32)


@attrs.frozen(eq=False)
class SequenceBatch:
    """Env-major sequences of `length` transitions with their episode starts and the recurrent
    state at each sequence's start (the module docstring has the layout).

    `batch` holds the transitions, with GAE advantages when an on-policy worker made it;
    its batch-level extras (episode statistics, env steps, running statistics) are this
    batch's. `len()` counts transitions.
    """

    batch: SampleBatch
    length: int
    starts: BoolArray = attrs.field(converter=_bools)
    initial_state: FloatArray = attrs.field(converter=_floats)

    def __attrs_post_init__(self) -> None:
        n = len(self.batch)
        if self.length < 1 or n % self.length:
            raise ValueError(f"SequenceBatch: {n} rows are not whole sequences of length {self.length}")
        if self.starts.shape != (n,):
            raise ValueError(f"SequenceBatch: starts must be [{n}] (one flag per row), "
                             f"got {self.starts.shape}")
        if self.initial_state.ndim != 2 or len(self.initial_state) != n // self.length:
            raise ValueError(f"SequenceBatch: initial_state must be [{n // self.length}, state_size] "
                             f"(one state per sequence), got {self.initial_state.shape}")

    def __len__(self) -> int:
        """Transitions in the batch."""
        return len(self.batch)

    @property
    def num_sequences(self) -> int:
        """Sequences of `length` steps."""
        return len(self.batch) // self.length

    @property
    def state_size(self) -> int:
        """Floats of recurrent state per sequence."""
        return int(self.initial_state.shape[1])

    @property
    def env_steps(self) -> int:
        """Environment steps sampled to make the batch (`SampleBatch.env_steps`)."""
        return self.batch.env_steps

    @staticmethod
    def concat(batches: Sequence[SequenceBatch]) -> SequenceBatch:
        """Sequence batches of one length joined in order (their extras too, as
        `SampleBatch.concat` joins them)."""
        if not batches:
            raise ValueError("SequenceBatch.concat needs at least one batch, got none")
        if len(batches) == 1:
            return batches[0]
        lengths = {b.length for b in batches}
        sizes = {b.state_size for b in batches}
        if len(lengths) != 1 or len(sizes) != 1:
            raise ValueError(f"SequenceBatch.concat: sequence lengths {sorted(lengths)} and state "
                             f"sizes {sorted(sizes)} must each be one value")
        return SequenceBatch(SampleBatch.concat([b.batch for b in batches]), batches[0].length,
                             np.concatenate([b.starts for b in batches]),
                             np.concatenate([b.initial_state for b in batches]))

    def sequences(self, indices: npt.NDArray[np.intp]) -> SequenceBatch:
        """The sequences at `indices`, in that order (without the batch-level extras)."""
        rows = sequence_rows(indices, self.length)
        return SequenceBatch(self.batch.take(rows), self.length, self.starts[rows],
                             self.initial_state[np.asarray(indices, dtype=np.int64)])

    def minibatches(self, size: int, rng: np.random.Generator | None = None) -> Iterator[SequenceBatch]:
        """Minibatches of whole sequences, about `size` rows each (``size // length``
        sequences, at least one), in a random order of sequences if `rng` is given; every
        sequence lands in exactly one, the last may be smaller."""
        if size < 1:
            raise ValueError(f"SequenceBatch.minibatches: size must be >= 1, got {size}")
        per = max(1, size // self.length)
        order = rng.permutation(self.num_sequences) if rng is not None else np.arange(self.num_sequences)
        for start in range(0, self.num_sequences, per):
            yield self.sequences(order[start:start + per])

    def with_batch(self, batch: SampleBatch) -> SequenceBatch:
        """The same sequences over `batch` (its rows in this batch's order: new columns, as
        `rxrl.rl.data.batch.standardize` gives them)."""
        return attrs.evolve(self, batch=batch)


__all__ = ["SequenceBatch", "sequence_rows"]
