"""A policy's recurrent core in torch: an LSTM or GRU run over sequences with episode resets.

How state flows (docs/rl.md, "Recurrent policies"): a worker carries each environment's state
from step to step and from fragment to fragment, zeroes it before the first step of every
episode, and records the state each sequence starts from. The learner runs the core over a
sequence from that state, zeroing it where a row starts an episode, and so recomputes what
the worker computed step by step (`rxrl.rl.models.cells`, the worker's numpy step).

Why segments and not a masked loop: a step-by-step `LSTMCell` loop costs several small
kernel calls per time step forward and backward. Cutting every sequence at its episode starts
gives segments that each begin from a known state (the recorded one, or zeros); one
`nn.LSTM` / `nn.GRU` call runs all of them side by side, each padded at its end. Padding at
the end changes no output that is read (the core is causal), so the call needs no
`PackedSequence`, whose per-step slicing made the backward pass 3x slower (32 sequences of
8 steps, forward and backward: 4.8 ms packed, 1.5 ms as segments, 3.1 ms for an `LSTMCell` loop).

A V-trace learner also needs each bootstrap observation's value in the state after its row;
every such row ends its segment, so `Segments.run_past` appends that observation as one more
step of the segment, in its padding, and the same call computes it.
"""

from __future__ import annotations

import torch
from torch import nn

from rxrl.rl.config import PolicyConfig


def make_core(config: PolicyConfig, n_in: int, generator: torch.Generator) -> nn.LSTM | nn.GRU:
    """The config's core (one layer of ``recurrent_size`` units over ``n_in`` inputs), with
    orthogonal weights and zero biases drawn from ``generator`` (CleanRL's LSTM init)."""
    cls = {"lstm": nn.LSTM, "gru": nn.GRU}.get(config.recurrent)
    if cls is None:
        raise ValueError(f"make_core: policy.recurrent must be 'lstm' or 'gru', got {config.recurrent!r}")
    core: nn.LSTM | nn.GRU = cls(n_in, config.recurrent_size)
    for name, param in core.named_parameters():
        if name.startswith("weight"):
            nn.init.orthogonal_(param, 1.0, generator=generator)
        else:
            nn.init.zeros_(param)
    return core


def _split_state(core: nn.LSTM | nn.GRU,
                 state: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """A ``[B, state_size]`` state as the core's ``h0`` (``(h0, c0)`` for an LSTM), each ``[1, B, size]``."""
    size = core.hidden_size
    if isinstance(core, nn.LSTM):
        return state[None, :, :size].contiguous(), state[None, :, size:].contiguous()
    return state[None].contiguous()


class Segments:
    """How sequences ``[S, T]`` cut at their episode starts (``starts``, ``[S, T]`` bool) lie
    side by side: each row's segment and position in it, and which segments carry their
    sequence's recorded state (the others start an episode, from zeros). Computed once, run
    through every core of a policy (the actor's and the critic's)."""

    def __init__(self, starts: torch.Tensor) -> None:
        self.num_seq, self.length = starts.shape
        first = starts.clone()
        first[:, 0] = True  # a segment begins at every episode start and at every sequence start
        flat_first = first.reshape(-1)
        self.segment = torch.cumsum(flat_first.long(), 0) - 1  # [S*T]: each row's segment
        self.num_segments = int(self.segment[-1].item()) + 1
        begins = torch.nonzero(flat_first).squeeze(1)  # the row each segment begins at
        self.position = torch.arange(self.num_seq * self.length, device=starts.device) - begins[self.segment]
        self.max_length = int(torch.bincount(self.segment, minlength=self.num_segments).max().item())
        # a segment starts from its sequence's recorded state unless it starts an episode
        self.carries = ~starts.reshape(-1)[begins] & (begins % self.length == 0)
        self.source = begins[self.carries] // self.length
        #: [S*T] bool: the row is its segment's last (the next row begins another segment)
        self.ends = torch.ones_like(flat_first)
        self.ends[:-1] = flat_first[1:]

    def run(self, core: nn.LSTM | nn.GRU, x: torch.Tensor, initial_state: torch.Tensor) -> torch.Tensor:
        """The core's outputs ``[S*T, size]`` over inputs ``[S*T, n_in]`` (rows env-major),
        sequence ``s`` starting from ``initial_state[s]`` (``[S, core state]``)."""
        return self._run(core, x, initial_state, None)[0]

    def run_past(self, core: nn.LSTM | nn.GRU, x: torch.Tensor, initial_state: torch.Tensor,
                 rows: torch.Tensor, x_past: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`run`'s outputs, and the outputs ``[len(rows), size]`` of one more step past each of
        ``rows`` (each the last row of its segment), over inputs ``x_past`` (``[len(rows), n_in]``):
        what the core gives for ``x_past[j]`` in the state it reached after row ``rows[j]``.

        A V-trace learner reads its bootstrap values so (`rxrl.rl.data.fragment.Fragment`): a
        bootstrap row ends its segment, so the extra step lies in that segment's padding, and
        costs no call of its own."""
        if not bool(self.ends[rows].all()):
            raise ValueError("Segments.run_past: every row must be the last of its segment "
                             "(a sequence's last row, or a row whose successor starts an episode)")
        out, past = self._run(core, x, initial_state, (rows, x_past))
        assert past is not None
        return out, past

    def _run(self, core: nn.LSTM | nn.GRU, x: torch.Tensor, initial_state: torch.Tensor,
             past: tuple[torch.Tensor, torch.Tensor] | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        h0 = x.new_zeros(self.num_segments, initial_state.shape[1])
        h0[self.carries] = initial_state[self.source].to(x.dtype)
        length = self.max_length
        if past is not None and len(past[0]):
            length = max(length, int(self.position[past[0]].max().item()) + 2)
        padded = x.new_zeros(length, self.num_segments, x.shape[-1])
        padded[self.position, self.segment] = x
        if past is not None:
            rows, x_past = past
            padded[self.position[rows] + 1, self.segment[rows]] = x_past.to(x.dtype)
        # no packing: a segment's padding comes after its steps, so it cannot change their outputs
        # (the core is causal), and nothing is read from it but the steps `run_past` put there;
        # packing costs more than it saves here
        out, _ = core(padded, _split_state(core, h0))
        result: torch.Tensor = out[self.position, self.segment]
        if past is None:
            return result, None
        return result, out[self.position[past[0]] + 1, self.segment[past[0]]]


def run_sequences(core: nn.LSTM | nn.GRU, x: torch.Tensor, starts: torch.Tensor,
                  initial_state: torch.Tensor) -> torch.Tensor:
    """The core's outputs ``[S, T, size]`` over inputs ``[S, T, n_in]``: sequence ``s`` starts
    from ``initial_state[s]`` (``[S, state_size]``) and the state is zeroed before every step
    where ``starts[s, t]`` (``[S, T]`` bool) is set, as the worker zeroed it."""
    num_seq, length = starts.shape
    out = Segments(starts).run(core, x.reshape(num_seq * length, -1), initial_state)
    return out.reshape(num_seq, length, -1)


def step(core: nn.LSTM | nn.GRU, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of the core: ``(output [B, size], new_state [B, state_size])`` (the torch twin
    of `rxrl.rl.models.cells.Cell`, for tests and tools)."""
    out, new = core(x[None], _split_state(core, state))
    if isinstance(new, tuple):
        return out[0], torch.cat([new[0][0], new[1][0]], dim=1)
    return out[0], new[0]


__all__ = ["Segments", "make_core", "run_sequences", "step"]
