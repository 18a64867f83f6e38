"""Fragment: a worker's raw trajectories for off-policy learners (V-trace), without advantages.

An on-policy worker computes GAE before its fragment leaves (`RolloutWorker.sample`); an
off-policy learner must evaluate the trajectories with its *own* critic, later, so a
`Fragment` carries what that needs instead: the transitions (behaviour log-probabilities
included), the observations to bootstrap from, and the version of the weights that sampled
it. `RolloutWorker.sample_fragment` makes one.

Rows are env-major sequences of `length` steps: rows `s * length .. (s + 1) * length - 1`
are sequence `s` (one environment's transitions, in time order). `bootstrap_rows` lists,
sorted, every row whose successor observation is not the next row's: the last row of each
sequence and every truncated row; `bootstrap_obs[j]` is the observation that followed row
`bootstrap_rows[j]` (the final observation of a truncated episode). Every other row that did
not end its episode continues into the next row. Terminated rows are not bootstrapped.

>>> import numpy as np
>>> from rxrl.rl.data.batch import SampleBatch
>>> f = np.zeros(4, np.float32)
>>> rows = SampleBatch(obs=np.arange(4.0)[:, None], actions=np.zeros(4, np.int64), rewards=f,
...                    terminateds=f > 0, truncateds=f > 0, logp=f, values=f, advantages=f,
...                    value_targets=f)
>>> frag = Fragment(rows, length=2, bootstrap_rows=np.array([1, 3]),
...                 bootstrap_obs=np.array([[2.0], [9.0]]), version=3)
>>> frag.num_sequences, Fragment.concat([frag, frag]).bootstrap_rows.tolist()
(2, [1, 3, 5, 7])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from rxrl.rl.data.batch import SampleBatch

IntArray = npt.NDArray[np.int64]


def _int_rows(rows: Any) -> IntArray:
    """Row indices as an int64 array."""
    return np.asarray(rows, dtype=np.int64)


@attrs.frozen(eq=False)
class Fragment:
    """Env-major sequences of `length` transitions with their bootstrap observations.

    `batch` holds the transitions (`advantages` and `value_targets` are zeros: a learner
    fills them in); `version` is the number of learner updates behind the weights that
    sampled it (`RolloutWorker.weights_version`). See the module docstring for the layout.
    """

    batch: SampleBatch
    length: int
    bootstrap_rows: IntArray = attrs.field(converter=_int_rows)
    bootstrap_obs: npt.NDArray[Any]
    version: int = 0

    def __attrs_post_init__(self) -> None:
        n = len(self.batch)
        if self.length < 1 or n % self.length:
            raise ValueError(f"Fragment: {n} rows are not whole sequences of length {self.length}")
        if len(self.bootstrap_rows) != len(self.bootstrap_obs):
            raise ValueError(f"Fragment: {len(self.bootstrap_rows)} bootstrap rows but "
                             f"{len(self.bootstrap_obs)} bootstrap observations")
        if np.shape(self.bootstrap_obs)[1:] != np.shape(self.batch.obs)[1:]:
            raise ValueError(f"Fragment: bootstrap observations of shape "
                             f"{np.shape(self.bootstrap_obs)[1:]}, rows of {np.shape(self.batch.obs)[1:]}")
        ends = np.arange(self.length - 1, n, self.length)
        if not np.isin(ends, self.bootstrap_rows).all():
            raise ValueError("Fragment: the last row of every sequence must be a bootstrap row")

    def __len__(self) -> int:
        """Transitions in the fragment."""
        return len(self.batch)

    @property
    def num_sequences(self) -> int:
        """Sequences (environments' stretches) of `length` steps."""
        return len(self.batch) // self.length

    @staticmethod
    def concat(fragments: Sequence[Fragment]) -> Fragment:
        """Fragments of one sequence length joined in order; `version` is the oldest one's."""
        if not fragments:
            raise ValueError("Fragment.concat needs at least one fragment, got none")
        if len(fragments) == 1:
            return fragments[0]
        lengths = {f.length for f in fragments}
        if len(lengths) != 1:
            raise ValueError(f"Fragment.concat: sequence lengths differ: {sorted(lengths)}")
        offsets = np.cumsum([0] + [len(f) for f in fragments[:-1]])
        return Fragment(
            SampleBatch.concat([f.batch for f in fragments]),
            length=fragments[0].length,
            bootstrap_rows=np.concatenate([f.bootstrap_rows + o for f, o in zip(fragments, offsets,
                                                                                strict=True)]),
            bootstrap_obs=np.concatenate([f.bootstrap_obs for f in fragments]),
            version=min(f.version for f in fragments),
        )

    def sequences(self, indices: npt.NDArray[np.intp]) -> Fragment:
        """The sequences at `indices`, in that order (without episode statistics)."""
        order = np.asarray(indices, dtype=np.int64)
        rows = (order[:, None] * self.length + np.arange(self.length)).ravel()
        # bootstrap rows of the chosen sequences, renumbered into the new row order
        position = np.full(len(self.batch), -1, dtype=np.int64)
        position[rows] = np.arange(len(rows))
        new = position[self.bootstrap_rows]
        keep = new >= 0
        sort = np.argsort(new[keep], kind="stable")
        return Fragment(self.batch.take(rows), self.length, new[keep][sort],
                        self.bootstrap_obs[keep][sort], self.version)

    def time_major(self, column: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """A per-row array `[B, ...]` as `[length, num_sequences, ...]` (what `vtrace` takes)."""
        return np.swapaxes(column.reshape(self.num_sequences, self.length, *column.shape[1:]), 0, 1)

    def next_values(self, values: npt.NDArray[np.float32],
                    bootstrap_values: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Per row, the value of the observation that followed it: the next row's value inside
        a sequence, the bootstrap observation's value where there is one."""
        out = np.empty_like(values)
        out[:-1] = values[1:]
        out[self.bootstrap_rows] = bootstrap_values
        return out


__all__ = ["Fragment"]
