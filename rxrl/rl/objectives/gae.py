"""Advantage estimation over time-major `[T, N]` fragments: GAE(gamma, lambda) and V-trace.

Both take `next_values`: `next_values[t, i]` is the value of the observation that followed
step `t` in environment `i`, i.e. the *final* observation when the episode ended at `t`.
With it, the two ways an episode ends are told apart without special cases:

* terminated at `t`: the return ends there, `next_values[t]` is ignored (no bootstrap);
* truncated at `t` (time limit): the return is cut but bootstraps from `next_values[t]`;
* the last row `T - 1` of a fragment that did not end: bootstraps from `next_values[T - 1]`.

In every case the recursion does not reach from `t` into `t + 1` when the episode ended at
`t`, so row `t + 1` may start a new episode.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]


def _check_shapes(**arrays: npt.NDArray[np.generic]) -> tuple[int, ...]:
    shapes = {name: np.shape(a) for name, a in arrays.items()}
    first = next(iter(shapes.values()))
    if len(first) < 1 or any(s != first for s in shapes.values()):
        listing = ", ".join(f"{n}={s}" for n, s in shapes.items())
        raise ValueError(f"advantage estimation needs equal [T, N] shapes, got {listing}")
    return first


def compute_gae(
    rewards: npt.NDArray[np.floating],
    values: npt.NDArray[np.floating],
    next_values: npt.NDArray[np.floating],
    terminateds: npt.NDArray[np.bool_],
    truncateds: npt.NDArray[np.bool_],
    gamma: float,
    lam: float,
) -> tuple[FloatArray, FloatArray]:
    """Generalized advantage estimates and value targets (`advantages + values`).

    All inputs are `[T, N]` (or any shape with time first); see the module docstring for
    `next_values`. `A[t] = delta[t] + gamma * lam * (1 - done[t]) * A[t + 1]` with
    `delta[t] = r[t] + gamma * (1 - terminated[t]) * next_values[t] - values[t]` and
    `A[T] = 0`. Returns float32 arrays of the input shape.

    >>> import numpy as np
    >>> r, v, nv = np.ones((2, 1)), np.zeros((2, 1)), np.array([[0.0], [10.0]])
    >>> no = np.zeros((2, 1), bool)
    >>> compute_gae(r, v, nv, no, no, gamma=0.5, lam=1.0)[0].ravel().tolist()  # bootstrap at T-1
    [4.0, 6.0]
    >>> compute_gae(r, v, nv, np.array([[True], [False]]), no, 0.5, 1.0)[0].ravel().tolist()
    [1.0, 6.0]
    """
    shape = _check_shapes(
        rewards=rewards,
        values=values,
        next_values=next_values,
        terminateds=terminateds,
        truncateds=truncateds,
    )
    values64 = values.astype(np.float64)
    deltas = rewards + gamma * next_values * ~terminateds - values64
    carry = gamma * lam * ~(terminateds | truncateds)
    advantages = np.empty(shape, dtype=np.float64)
    running = np.zeros(shape[1:], dtype=np.float64)
    for t in range(shape[0] - 1, -1, -1):
        running = deltas[t] + carry[t] * running
        advantages[t] = running
    return advantages.astype(np.float32), (advantages + values64).astype(np.float32)


def vtrace(
    behaviour_logp: npt.NDArray[np.floating],
    target_logp: npt.NDArray[np.floating],
    rewards: npt.NDArray[np.floating],
    values: npt.NDArray[np.floating],
    next_values: npt.NDArray[np.floating],
    terminateds: npt.NDArray[np.bool_],
    truncateds: npt.NDArray[np.bool_],
    gamma: float,
    lam: float = 1.0,
    rho_clip: float = 1.0,
    c_clip: float = 1.0,
) -> tuple[FloatArray, FloatArray]:
    """V-trace value targets `vs` and policy-gradient advantages (Espeholt et al., 2018).

    With ratios `r = exp(target_logp - behaviour_logp)`, `rho = min(rho_clip, r)` and
    `c = lam * min(c_clip, r)`:
    `vs[t] = values[t] + delta[t] + gamma * c[t] * (1 - done[t]) * (vs[t+1] - next_values[t])`,
    `delta[t] = rho[t] * (r[t] + gamma * (1 - terminated[t]) * next_values[t] - values[t])`,
    and the advantage is `rho[t] * (r[t] + gamma * (1 - terminated[t]) * vs'[t+1] - values[t])`
    where `vs'[t+1]` is `vs[t+1]` inside an episode and `next_values[t]` at its end or at
    the fragment's end. On-policy (equal log-probs, clips >= 1) `vs` equals the GAE value
    targets with the same `lam`. Returns float32 `(vs, advantages)`.
    """
    shape = _check_shapes(
        behaviour_logp=behaviour_logp,
        target_logp=target_logp,
        rewards=rewards,
        values=values,
        next_values=next_values,
        terminateds=terminateds,
        truncateds=truncateds,
    )
    ratios = np.exp(target_logp.astype(np.float64) - behaviour_logp)
    rhos = np.minimum(rho_clip, ratios)
    cs = lam * np.minimum(c_clip, ratios)
    not_terminated = ~terminateds
    continues = ~(terminateds | truncateds)
    values64 = values.astype(np.float64)
    deltas = rhos * (rewards + gamma * not_terminated * next_values - values64)
    corrections = np.empty(shape, dtype=np.float64)  # vs - values
    running = np.zeros(shape[1:], dtype=np.float64)
    for t in range(shape[0] - 1, -1, -1):
        running = deltas[t] + gamma * cs[t] * continues[t] * running
        corrections[t] = running
    vs = values64 + corrections
    # vs'[t+1]: next_values[t] plus the next row's correction while the episode goes on.
    next_corrections = np.zeros(shape, dtype=np.float64)
    next_corrections[:-1] = corrections[1:] * continues[:-1]
    vs_next = next_values + next_corrections
    advantages = rhos * (rewards + gamma * not_terminated * vs_next - values64)
    return vs.astype(np.float32), advantages.astype(np.float32)


__all__ = ["compute_gae", "vtrace"]
