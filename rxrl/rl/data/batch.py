"""SampleBatch: a frozen, column-checked batch of transitions as numpy arrays."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

import attrs
import numpy as np
import numpy.typing as npt

from rxrl.rl.data.episode_metrics import EpisodeMetricsArrays, check_aligned, join
from rxrl.rl.data.running_stats import NormStats

FloatArray = npt.NDArray[np.float32]
BoolArray = npt.NDArray[np.bool_]

#: Per-transition columns: every one has the same leading dimension (the batch length).
COLUMNS: Final = (
    "obs",
    "actions",
    "rewards",
    "terminateds",
    "truncateds",
    "logp",
    "values",
    "advantages",
    "value_targets",
)
#: Columns that hold one scalar per transition (shape `[B]`).
SCALAR_COLUMNS: Final = COLUMNS[2:]
#: Float columns that `standardize` accepts.
FLOAT_COLUMNS: Final = ("rewards", "logp", "values", "advantages", "value_targets")


def _empty_floats() -> FloatArray:
    return np.zeros(0, dtype=np.float32)


def _default_env_steps(batch: SampleBatch) -> int:
    return len(batch.rewards)


@attrs.frozen(eq=False)
class SampleBatch:
    """A batch of `B` transitions; rows of all columns correspond.

    Columns (see `COLUMNS`): `obs` `[B, *obs_shape]`, `actions` `[B]` (discrete) or
    `[B, act_dim]` (continuous; the unclipped sample), `rewards`, `terminateds`,
    `truncateds`, `logp` (behaviour log-probabilities), `values` (behaviour value
    estimates), `advantages` and `value_targets`, each `[B]`.

    Batch-level extras, not per transition: `episode_returns` / `episode_lengths` of the
    episodes that ended while the batch was sampled, and `env_steps`, the environment
    transitions stepped to produce it (at least `B`: a worker may step a few it does not
    keep; defaults to `B`), and `norm_stats`, the running-statistics contribution of a
    normalizing worker (`rxrl.rl.data.running_stats`). `concat` sums, joins and merges them;
    `shuffle` keeps them; `slice` and `minibatches` return sub-batches without them (they
    would be counted twice otherwise) and with `env_steps` equal to their length.

    Rows from a `RolloutWorker` are env-major: each environment's transitions are
    consecutive, in time order. Equality is identity (arrays have no useful `==`).
    """

    obs: npt.NDArray[Any]
    actions: npt.NDArray[Any]
    rewards: FloatArray
    terminateds: BoolArray
    truncateds: BoolArray
    logp: FloatArray
    values: FloatArray
    advantages: FloatArray
    value_targets: FloatArray
    episode_returns: FloatArray = attrs.field(factory=_empty_floats)
    episode_lengths: npt.NDArray[np.int64] = attrs.field(factory=lambda: np.zeros(0, dtype=np.int64))
    env_steps: int = attrs.field(default=attrs.Factory(_default_env_steps, takes_self=True))
    #: the raw observation and return moments the worker saw (`rxrl.rl.data.running_stats`), when
    #: its policy normalizes; a learner merges them after training on the batch
    norm_stats: NormStats | None = None
    #: the custom per-episode metrics of the ended episodes, by name, aligned with
    #: `episode_returns` (`rxrl.rl.data.episode_metrics`); empty unless configured
    episode_metrics: EpisodeMetricsArrays = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        shapes = {name: np.shape(getattr(self, name)) for name in COLUMNS}
        for name in SCALAR_COLUMNS:
            if len(shapes[name]) != 1:
                raise ValueError(f"SampleBatch field {name!r} must be 1-D [B], got shape {shapes[name]}")
        for name in ("obs", "actions"):
            if len(shapes[name]) < 1:
                raise ValueError(f"SampleBatch field {name!r} must have a batch dimension, got a scalar")
        length = shapes["rewards"][0]
        ragged = {n: s for n, s in shapes.items() if s[0] != length}
        if ragged:
            listing = ", ".join(f"{n}={s}" for n, s in shapes.items())
            raise ValueError(
                f"SampleBatch fields {sorted(ragged)} have a leading dimension other than "
                f"{length} (the length of 'rewards'); shapes: {listing}"
            )
        if len(self.episode_returns) != len(self.episode_lengths):
            raise ValueError(
                "SampleBatch episode_returns and episode_lengths differ in length: "
                f"{np.shape(self.episode_returns)} vs {np.shape(self.episode_lengths)}"
            )
        if self.episode_metrics:
            check_aligned(self.episode_metrics, len(self.episode_returns), "SampleBatch")
        if self.env_steps < length:
            raise ValueError(f"SampleBatch env_steps={self.env_steps} is less than its {length} rows")

    def __len__(self) -> int:
        """The number of transitions `B`."""
        return len(self.rewards)

    @staticmethod
    def concat(batches: Sequence[SampleBatch]) -> SampleBatch:
        """Join batches row-wise in the given order (episode statistics and env steps too).

        Usable as `ops.map(SampleBatch.concat)` on a `list[SampleBatch]` and as the
        `combine` of a size window. Raises ValueError on an empty sequence or when a
        column's per-row shape or dtype differs between batches.
        """
        if not batches:
            raise ValueError("SampleBatch.concat needs at least one batch, got none")
        if len(batches) == 1:
            return batches[0]
        first = batches[0]
        for name in COLUMNS:
            ref = getattr(first, name)
            for i, b in enumerate(batches[1:], start=1):
                arr = getattr(b, name)
                if arr.shape[1:] != ref.shape[1:] or arr.dtype != ref.dtype:
                    raise ValueError(
                        f"SampleBatch.concat: field {name!r} is {ref.dtype}{list(ref.shape)} "
                        f"in batch 0 but {arr.dtype}{list(arr.shape)} in batch {i}"
                    )
        columns = {n: np.concatenate([getattr(b, n) for b in batches]) for n in COLUMNS}
        return SampleBatch(
            **columns,
            episode_returns=np.concatenate([b.episode_returns for b in batches]),
            episode_lengths=np.concatenate([b.episode_lengths for b in batches]),
            env_steps=sum(b.env_steps for b in batches),
            norm_stats=NormStats.merge_all([b.norm_stats for b in batches]),
            episode_metrics=join([(b.episode_metrics, len(b.episode_returns)) for b in batches]),
        )

    def slice(self, start: int, stop: int) -> SampleBatch:
        """Rows `start:stop` (Python slice rules), without episode statistics."""
        return self._rows(slice(start, stop))

    def take(self, indices: npt.NDArray[np.intp]) -> SampleBatch:
        """The rows at `indices`, in that order, without episode statistics."""
        return self._rows(indices)

    def shuffle(self, rng: np.random.Generator) -> SampleBatch:
        """All rows in a random order drawn from `rng`; batch-level extras are kept."""
        perm = rng.permutation(len(self))
        columns: dict[str, Any] = {n: getattr(self, n)[perm] for n in COLUMNS}
        return attrs.evolve(self, **columns)

    def minibatches(
        self, size: int, rng: np.random.Generator | None = None, *, drop_last: bool = False
    ) -> Iterator[SampleBatch]:
        """Consecutive sub-batches of `size` rows, in a random order if `rng` is given.

        Every row lands in exactly one minibatch; the last one is shorter when `size` does
        not divide the length, unless `drop_last` drops it.
        """
        for idx in self.minibatch_indices(size, rng, drop_last=drop_last):
            yield self._rows(idx)

    def minibatch_indices(
        self, size: int, rng: np.random.Generator | None = None, *, drop_last: bool = False
    ) -> Iterator[npt.NDArray[np.intp]]:
        """The rows of each of `minibatches` (the same order for the same ``rng`` state): for a
        learner that gathers them itself, from a copy of the batch on its device."""
        if size < 1:
            raise ValueError(f"SampleBatch.minibatches: size must be >= 1, got {size}")
        n = len(self)
        order = rng.permutation(n) if rng is not None else np.arange(n)
        for start in range(0, n, size):
            idx = order[start : start + size]
            if drop_last and len(idx) < size:
                return
            yield idx

    def with_columns(self, **columns: npt.NDArray[Any]) -> SampleBatch:
        """A copy with the named columns replaced (validated like a new batch)."""
        unknown = sorted(set(columns) - set(COLUMNS))
        if unknown:
            raise ValueError(f"SampleBatch.with_columns: unknown fields {unknown}; fields are {COLUMNS}")
        replaced: dict[str, Any] = dict(columns)
        return attrs.evolve(self, **replaced)

    def _rows(self, index: builtins.slice | npt.NDArray[np.intp]) -> SampleBatch:
        columns: dict[str, Any] = {n: getattr(self, n)[index] for n in COLUMNS}
        return SampleBatch(**columns)


def standardize(field: str, eps: float = 1e-8) -> Callable[[SampleBatch], SampleBatch]:
    """A function that rescales one float column of a batch to mean 0 and std 1.

    For `ops.map(standardize("advantages"))`. The column's std is floored at `eps` so a
    constant column becomes zeros. Raises ValueError at once for a field that is not one
    of `FLOAT_COLUMNS`.

    >>> import numpy as np
    >>> f = np.zeros(4, np.float32)
    >>> batch = SampleBatch(obs=np.zeros((4, 2)), actions=np.zeros(4, np.int64), rewards=f,
    ...                     terminateds=f > 0, truncateds=f > 0, logp=f, values=f,
    ...                     advantages=np.array([1, 2, 3, 4], np.float32), value_targets=f)
    >>> [round(float(a), 3) for a in standardize("advantages")(batch).advantages]
    [-1.342, -0.447, 0.447, 1.342]
    """
    if field not in FLOAT_COLUMNS:
        raise ValueError(f"standardize: {field!r} is not a float column; choose one of {FLOAT_COLUMNS}")

    def standardize_column(batch: SampleBatch) -> SampleBatch:
        x = getattr(batch, field)
        if len(x) == 0:
            return batch
        x64 = x.astype(np.float64)  # float32 means of constant columns are off by an ulp
        scaled = (x64 - x64.mean()) / max(float(x64.std()), eps)
        return batch.with_columns(**{field: scaled.astype(x.dtype, copy=False)})

    standardize_column.__name__ = f"standardize_{field}"
    standardize_column.__qualname__ = standardize_column.__name__
    return standardize_column


__all__ = [
    "COLUMNS",
    "FLOAT_COLUMNS",
    "SCALAR_COLUMNS",
    "BoolArray",
    "FloatArray",
    "SampleBatch",
    "standardize",
]
