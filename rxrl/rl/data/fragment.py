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

A recurrent policy's fragment also carries `starts` (row `i` begins an episode: the state was
zeroed before it) and `initial_state` (the state each sequence's first step was taken in), as
`rxrl.rl.data.sequences.SequenceBatch` does, so that a learner replays the worker's cores; both
or neither. Every bootstrap row then ends its stretch of an episode inside its sequence (the
row after a truncated row starts an episode), which is what lets a learner read each bootstrap
value one core step past its row (`rxrl.rl.models.recurrent.Segments.run_past`).

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
from rxrl.rl.data.sequences import sequence_rows

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float32]


def _int_rows(rows: Any) -> IntArray:
    """Row indices as an int64 array."""
    return np.asarray(rows, dtype=np.int64)


def _bools(value: Any) -> BoolArray | None:
    return None if value is None else np.asarray(value, dtype=np.bool_)


def _floats(value: Any) -> FloatArray | None:
    return None if value is None else np.asarray(value, dtype=np.float32)


@attrs.frozen(eq=False)
class Fragment:
    """Env-major sequences of `length` transitions with their bootstrap observations.

    `batch` holds the transitions (`advantages` and `value_targets` are zeros: a learner
    fills them in); `version` is the number of learner updates behind the weights that
    sampled it (`RolloutWorker.weights_version`). A recurrent policy's fragment has `starts`
    (`[B]` bool) and `initial_state` (`[num_sequences, state_size]`); see the module docstring
    for the layout.
    """

    batch: SampleBatch
    length: int
    bootstrap_rows: IntArray = attrs.field(converter=_int_rows)
    bootstrap_obs: npt.NDArray[Any]
    version: int = 0
    starts: BoolArray | None = attrs.field(default=None, converter=_bools)
    initial_state: FloatArray | None = attrs.field(default=None, converter=_floats)

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
        if self.starts is not None or self.initial_state is not None:
            self._check_recurrent()

    def _check_recurrent(self) -> None:
        """`starts` and `initial_state`: both given, of the fragment's shapes, and every
        bootstrap row the last of its episode's rows in its sequence."""
        n, starts, state = len(self.batch), self.starts, self.initial_state
        if starts is None or state is None:
            missing = "initial_state" if state is None else "starts"
            raise ValueError(f"Fragment: {missing} is missing: a recurrent policy's fragment has both "
                             "starts and initial_state, any other fragment neither")
        if starts.shape != (n,):
            raise ValueError(f"Fragment: starts must be [{n}] (one flag per row), got {starts.shape}")
        if state.ndim != 2 or len(state) != self.num_sequences:
            raise ValueError(f"Fragment: initial_state must be [{self.num_sequences}, state_size] "
                             f"(one state per sequence), got {state.shape}")
        inner = self.bootstrap_rows[(self.bootstrap_rows + 1) % self.length != 0]
        if not starts[inner + 1].all():
            raise ValueError("Fragment: a bootstrap row inside a sequence must be followed by a row "
                             "that starts an episode (a truncated row's successor starts one)")

    def __len__(self) -> int:
        """Transitions in the fragment."""
        return len(self.batch)

    @property
    def num_sequences(self) -> int:
        """Sequences (environments' stretches) of `length` steps."""
        return len(self.batch) // self.length

    @property
    def recurrent(self) -> bool:
        """Whether the fragment carries `starts` and `initial_state` (a recurrent policy's)."""
        return self.initial_state is not None

    @staticmethod
    def concat(fragments: Sequence[Fragment]) -> Fragment:
        """Fragments of one sequence length joined in order; `version` is the oldest one's.
        Recurrent state is kept: all of them carry it (of one size), or none."""
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
            **_joined_states(fragments),
        )

    def sequences(self, indices: npt.NDArray[np.intp]) -> Fragment:
        """The sequences at `indices`, in that order (without episode statistics)."""
        order = np.asarray(indices, dtype=np.int64)
        rows = sequence_rows(order, self.length)
        # bootstrap rows of the chosen sequences, renumbered into the new row order
        position = np.full(len(self.batch), -1, dtype=np.int64)
        position[rows] = np.arange(len(rows))
        new = position[self.bootstrap_rows]
        keep = new >= 0
        sort = np.argsort(new[keep], kind="stable")
        return Fragment(self.batch.take(rows), self.length, new[keep][sort],
                        self.bootstrap_obs[keep][sort], self.version,
                        starts=None if self.starts is None else self.starts[rows],
                        initial_state=None if self.initial_state is None else self.initial_state[order])

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


def _joined_states(fragments: Sequence[Fragment]) -> dict[str, Any]:
    """`starts` and `initial_state` of fragments joined in order: all or none carry them."""
    carrying = sum(f.recurrent for f in fragments)
    if carrying == 0:
        return {}
    if carrying < len(fragments):
        raise ValueError(f"Fragment.concat: {carrying} of {len(fragments)} fragments carry recurrent "
                         "state (starts, initial_state): join fragments of one policy, all or none")
    states = [f.initial_state for f in fragments if f.initial_state is not None]
    sizes = {s.shape[1] for s in states}
    if len(sizes) != 1:
        raise ValueError(f"Fragment.concat: recurrent state sizes differ: {sorted(sizes)}")
    return {"starts": np.concatenate([f.starts for f in fragments if f.starts is not None]),
            "initial_state": np.concatenate(states)}


__all__ = ["Fragment"]
