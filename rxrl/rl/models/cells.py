"""One step of an LSTM or GRU core in numpy: the rollout path of a recurrent policy.

The same equations, gate order and state-dict names as torch's `nn.LSTM` / `nn.GRU` (one
layer, ``weight_ih_l0``, ``weight_hh_l0``, ``bias_ih_l0``, ``bias_hh_l0``), so that a worker
without torch acts as the learner's torch core computes, to float tolerance
(`tests/rl/test_recurrent.py`). A state is one float32 array ``[B, state_size]`` per batch
of environments: an LSTM's ``h`` then its ``c``, a GRU's ``h``.

>>> import numpy as np
>>> size, n_in = 3, 2
>>> params = {"core.weight_ih_l0": np.ones((4 * size, n_in), np.float32),
...           "core.weight_hh_l0": np.zeros((4 * size, size), np.float32),
...           "core.bias_ih_l0": np.zeros(4 * size, np.float32),
...           "core.bias_hh_l0": np.zeros(4 * size, np.float32)}
>>> cell = Cell.of(params, "lstm")
>>> out, state = cell(np.zeros((5, n_in), np.float32), np.zeros((5, 2 * size), np.float32))
>>> out.shape, state.shape, float(abs(state).max())
((5, 3), (5, 6), 0.0)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]

#: the state-dict prefix of a policy's recurrent core
CORE = "core"


def _sigmoid_(x: FloatArray) -> FloatArray:
    """``_sigmoid(x)`` computed in ``x``'s own memory (which it overwrites); returns ``x``."""
    np.negative(x, out=x)
    np.exp(x, out=x)
    x += np.float32(1.0)
    return np.reciprocal(x, out=x)


def _sigmoid(x: FloatArray) -> FloatArray:
    out: FloatArray = np.float32(1.0) / (np.float32(1.0) + np.exp(-x))
    return out


class Cell:
    """One step of a one-layer LSTM or GRU over arrays keyed by state-dict name (views of a
    torch core's parameters, or arrays a torch-free policy owns: updated in place, never
    copied here)."""

    def __init__(self, kind: str, w_ih: FloatArray, w_hh: FloatArray, b_ih: FloatArray,
                 b_hh: FloatArray) -> None:
        if kind not in ("lstm", "gru"):
            raise ValueError(f"Cell: kind must be 'lstm' or 'gru', got {kind!r}")
        self.kind = kind
        self.w_ih_t, self.w_hh_t, self.b_ih, self.b_hh = w_ih.T, w_hh.T, b_ih, b_hh
        self.size = int(w_hh.shape[1])

    @staticmethod
    def of(params: Mapping[str, npt.NDArray[Any]], kind: str, prefix: str = CORE) -> Cell:
        """The cell whose weights are ``params[f"{prefix}.*_l0"]`` (the actor's core is
        ``core``, the critic's ``vf_core``)."""
        return Cell(kind, *(params[f"{prefix}.{name}_l0"]
                            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")))

    def __call__(self, x: FloatArray, state: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``(output, new_state)`` for inputs ``[B, n_in]`` and states ``[B, state_size]``."""
        size = self.size
        h = state[:, :size]
        if self.kind == "lstm":
            # in place where it can be: at a worker's batch sizes each numpy call costs more
            # than its arithmetic (44.9 -> 26 us a step at 8 envs, 64 units)
            gates = x @ self.w_ih_t
            gates += h @ self.w_hh_t
            gates += self.b_ih
            gates += self.b_hh
            g = np.tanh(gates[:, 2 * size:3 * size])
            ifo = _sigmoid_(gates)  # the g columns' sigmoid is computed and not read
            new = np.empty((len(x), 2 * size), np.float32)
            c = np.multiply(ifo[:, size:2 * size], state[:, size:], out=new[:, size:])
            c += ifo[:, :size] * g
            h = np.multiply(ifo[:, 3 * size:], np.tanh(c), out=new[:, :size])
            return h, new
        gi = x @ self.w_ih_t + self.b_ih
        gh = h @ self.w_hh_t + self.b_hh
        r = _sigmoid(gi[:, :size] + gh[:, :size])
        z = _sigmoid(gi[:, size:2 * size] + gh[:, size:2 * size])
        n = np.tanh(gi[:, 2 * size:] + r * gh[:, 2 * size:])
        h = (np.float32(1.0) - z) * n + z * h
        return h, h


__all__ = ["CORE", "Cell"]
