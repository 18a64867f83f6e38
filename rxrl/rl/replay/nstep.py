"""n-step returns: fold time-major env steps into n-step transitions, exactly across fragments.

A transition starting at step `t` of one sub-environment folds the next `m <= n` steps:
`R = sum_{k<m} gamma^k r_{t+k}`, `next_obs` and the end flags of step `t+m-1`, `n_steps = m`.
The window stops early at the first termination (no bootstrap: the learner sees
`terminateds`) or truncation (bootstrap from the real final observation with `gamma^m`), so
it never crosses an episode end, and it never contains a NEXT_STEP reset step (one only
follows an episode end). A window that runs off the end of the data is *open*:
`NStepFolder` holds it back and completes it with the next fragment's steps, so
n-step returns do not depend on how a run is cut into fragments.

Why here and not in the replay buffer: only the sampler knows which rows are consecutive
steps of one sub-environment; a buffer shard receives interleaved batches of many workers.

>>> import numpy as np
>>> r = np.array([[1.0], [2.0], [4.0], [8.0]])          # one env, 4 steps
>>> end = np.array([[False], [False], [True], [False]])  # terminated at step 2
>>> w = fold_n_step(r, end, np.zeros_like(end), np.array([[True], [True], [True], [False]]), 2, 0.5)
>>> w.returns[:, 0].tolist(), w.lengths[:, 0].tolist(), w.complete[:, 0].tolist()
([2.0, 4.0, 4.0, 0.0], [2, 2, 1, 0], [True, True, True, False])
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from rxrl.rl.data.transitions import TransitionBatch

BoolMatrix = npt.NDArray[np.bool_]


@attrs.frozen(eq=False)
class Windows:
    """The n-step windows starting at each `(step, env)` of time-major `[S, N]` arrays.

    `returns` (float64) the discounted reward sums, `lengths` the steps folded (0 where the
    step is not a transition), `ends` the step index of each window's last step, `complete`
    whether the window is closed (n steps, or an episode end within them).
    """

    returns: npt.NDArray[np.float64]
    lengths: npt.NDArray[np.int64]
    ends: npt.NDArray[np.intp]
    complete: BoolMatrix


def fold_n_step(
    rewards: npt.NDArray[np.floating[Any]],
    terminateds: BoolMatrix,
    truncateds: BoolMatrix,
    valid: BoolMatrix,
    n: int,
    gamma: float,
) -> Windows:
    """The n-step windows of time-major `[S, N]` steps; `valid` is False at reset steps.

    Raises ValueError for `n < 1`, `gamma` outside [0, 1], or a non-transition step that
    follows a transition which did not end its episode (steps of one env must be
    consecutive).
    """
    check_n_step(n, gamma, "fold_n_step")
    done = terminateds | truncateds
    steps = len(rewards)
    if (valid[:-1] & ~done[:-1] & ~valid[1:]).any():
        raise ValueError("fold_n_step: a reset (invalid) step follows a step that did not end its episode")
    returns = np.where(valid, rewards, 0.0).astype(np.float64)
    lengths = valid.astype(np.int64)
    open_ = valid & ~done  # the window starting here may take in the next step
    for k in range(1, min(n, steps)):
        extend = open_[: steps - k]
        returns[: steps - k] += np.where(extend, gamma**k * rewards[k:], 0.0)
        lengths[: steps - k] += extend
        open_[: steps - k] = extend & ~done[k:]
    ends = np.arange(steps)[:, None] + np.maximum(lengths - 1, 0)
    closed = np.take_along_axis(done, ends, axis=0)
    return Windows(returns, lengths, ends, valid & ((lengths == n) | closed))


def check_n_step(n: int, gamma: float, where: str) -> None:
    """Raise ValueError (naming `where`) unless `n` is an int >= 1 and 0 <= gamma <= 1."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{where}: n_step must be an integer >= 1, got {n!r}")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"{where}: gamma must be in [0, 1], got {gamma!r}")


@attrs.frozen(eq=False)
class StepArrays:
    """One fragment of env steps, time-major: `obs` / `next_obs` `[S, N, *obs_shape]`,
    `rewards`, `terminateds`, `truncateds`, `valid` `[S, N]`, `actions` `[S, N]` (discrete)
    or `[S, N, act_dim]` (continuous)."""

    obs: npt.NDArray[Any]
    actions: npt.NDArray[Any]
    rewards: npt.NDArray[np.float32]
    next_obs: npt.NDArray[Any]
    terminateds: BoolMatrix
    truncateds: BoolMatrix
    valid: BoolMatrix

    def __len__(self) -> int:
        return len(self.rewards)

    def join(self, later: StepArrays) -> StepArrays:
        """These steps followed by `later`'s (same sub-environments)."""
        fields = attrs.fields_dict(StepArrays)
        return StepArrays(**{n: np.concatenate([getattr(self, n), getattr(later, n)]) for n in fields})

    def tail(self, count: int) -> StepArrays:
        """The last `count` steps."""
        start = max(len(self) - count, 0)
        return StepArrays(**{n: getattr(self, n)[start:] for n in attrs.fields_dict(StepArrays)})


class NStepFolder:
    """Turns consecutive fragments of steps into complete n-step transitions (env-major).

    Holds back the last `n - 1` steps of each fragment, since windows starting there may
    still be open; they are completed (and emitted once) when the next fragment arrives.
    With `n = 1` nothing is held back. `held` is the number of transitions waiting.
    """

    def __init__(self, n: int, gamma: float) -> None:
        check_n_step(n, gamma, "NStepFolder")
        self.n, self.gamma = n, gamma
        self._carry: StepArrays | None = None
        self._emitted: BoolMatrix | None = None  # per carried step: already emitted

    @property
    def held(self) -> int:
        """Transitions received but not yet emitted (their windows are still open)."""
        if self._carry is None or self._emitted is None:
            return 0
        return int((self._carry.valid & ~self._emitted).sum())

    def fold(self, fragment: StepArrays) -> TransitionBatch:
        """The transitions whose windows closed, env-major, each sub-environment in time order.

        Episode statistics are left empty; `env_steps` is the fragment's valid steps.
        """
        steps, emitted = fragment, np.zeros_like(fragment.valid)
        if self._carry is not None and self._emitted is not None:
            steps, emitted = self._carry.join(fragment), np.concatenate([self._emitted, emitted])
        windows = fold_n_step(
            steps.rewards, steps.terminateds, steps.truncateds, steps.valid, self.n, self.gamma
        )
        emit = windows.complete & ~emitted
        if self.n > 1:
            keep = self.n - 1
            self._carry, self._emitted = steps.tail(keep), (emitted | emit)[-keep:]
        env, step = np.nonzero(emit.T)  # env-major: sorted by env, then by step
        end = windows.ends[step, env]
        return TransitionBatch(
            obs=steps.obs[step, env],
            actions=steps.actions[step, env],
            rewards=windows.returns[step, env].astype(np.float32),
            next_obs=steps.next_obs[end, env],
            terminateds=steps.terminateds[end, env],
            truncateds=steps.truncateds[end, env],
            n_steps=windows.lengths[step, env],
            env_steps=int(fragment.valid.sum()),
        )

    def state_dict(self) -> dict[str, Any]:
        """The held-back steps (numpy arrays), to resume a worker mid-run."""
        carry = None if self._carry is None else attrs.asdict(self._carry)
        return {"carry": carry, "emitted": self._emitted}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a `state_dict()`."""
        self._carry = None if state["carry"] is None else StepArrays(**state["carry"])
        self._emitted = state["emitted"]


__all__ = ["NStepFolder", "StepArrays", "Windows", "check_n_step", "fold_n_step"]
