"""The DQN learner's step as one TorchScript call: the same kernels on the same tensors as
`DQNLearner`'s eager step, so the same bits, with one return into Python instead of ~50.

Why: a learner on a thread of the driver (DQN's ``learner_placement="auto"``) shares the
interpreter with the driver's routing, which holds it a quarter to a third of a run. Every
torch op of an eager step returns into Python and waits for the interpreter there: at that
load a MinAtar step took ~3.2 ms against 1.3 ms alone. One call into the TorchScript
interpreter, which runs without the interpreter lock, took 1.5-1.9 ms at the same load
(``python bench/learner_gil.py --step eager scripted``; docs/algorithms.md, "The learner's
step as one TorchScript call").

What it runs, in order, as `DQNLearner` does eagerly: the online network's forward (traced
from the learner's `QNetwork`, sharing its parameters), the bootstrap's forwards without
gradients (`rxrl.rl.learners.dqn.td_targets`), the (importance-weighted) Huber loss
(`dqn_loss`), the gradients, their global norm and clipping (`clip_gradients`: torch's
``clip_grad_norm_``), and torch's fused Adam over the learner's `FusedAdam` state. It runs
with the TorchScript executor's optimizations off: optimized, the executor differentiates
its own graphs (other gradient formulas, other bits); unoptimized, it calls the same aten
ops as eager torch and autograd records them the same way. A test checks the bits against
the eager step over every setting (tests/rl/test_dqn_script.py).
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import nn


class DQNStep(nn.Module):
    """A DQN optimizer step over traced ``online`` and ``target`` Q-networks (modules whose
    parameters are the learner's own): `forward` returns the step's figures (the loss, the
    gradients' global norm before clipping, the variances of the targets and of their
    residuals by ``Q(s, a)``, as one float64 tensor: one conversion into Python), the rows'
    ``|TD|``, then the gradients themselves (one list, as TorchScript returns it)."""

    def __init__(self, online: nn.Module, target: nn.Module, double_q: bool, gamma: float,
                 huber_delta: float, max_grad_norm: float | None) -> None:
        super().__init__()
        self.online, self.target = online, target
        self.double_q, self.gamma, self.huber_delta = double_q, gamma, huber_delta
        self.clip = max_grad_norm is not None
        self.max_grad_norm = 0.0 if max_grad_norm is None else float(max_grad_norm)

    def forward(self, obs: torch.Tensor, next_obs: torch.Tensor, rewards: torch.Tensor,
                terminateds: torch.Tensor, n_steps: torch.Tensor, actions: torch.Tensor,
                weights: torch.Tensor | None, params: list[torch.Tensor], exp_avgs: list[torch.Tensor],
                exp_avg_sqs: list[torch.Tensor], steps: list[torch.Tensor], lr: float, beta1: float,
                beta2: float, eps: float) -> list[torch.Tensor]:
        """One step: ``[figures, |TD|, *gradients]``."""
        q_all = self.online(obs)
        with torch.no_grad():  # td_targets
            next_target = self.target(next_obs)
            if self.double_q:
                best = self.online(next_obs).argmax(dim=1, keepdim=True)
                bootstrap = next_target.gather(1, best).squeeze(1)
            else:
                bootstrap = next_target.max(dim=1).values
            discount = torch.pow(self.gamma, n_steps.to(bootstrap.dtype)) * (~terminateds).to(bootstrap.dtype)
            targets = rewards + discount * bootstrap
        q_taken = q_all.gather(1, actions.long().unsqueeze(1)).squeeze(1)
        if weights is None:  # dqn_loss
            loss = nn.functional.huber_loss(q_taken, targets, delta=self.huber_delta)
        else:
            per_row = nn.functional.huber_loss(q_taken, targets, reduction="none", delta=self.huber_delta)
            loss = (weights * per_row).mean()
        grads: list[torch.Tensor] = []
        for g in torch.autograd.grad([loss], params):
            assert g is not None
            grads.append(g)
        with torch.no_grad():
            # clip_gradients: torch's clip_grad_norm_ on the CPU (its foreach path), or the norm alone
            norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
            if self.clip:  # `max_norm / (norm + 1e-6)` is eager torch's reciprocal, then multiply
                coef = torch.clamp((norm + 1e-6).reciprocal() * self.max_grad_norm, max=1.0)
                torch._foreach_mul_(grads, coef)
            torch._foreach_add_(steps, 1)  # FusedAdam.step
            no_max: list[torch.Tensor] = []
            torch._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, no_max, steps, lr=lr, beta1=beta1,
                               beta2=beta2, weight_decay=0.0, eps=eps, amsgrad=False, maximize=False)
        q = q_taken.detach()
        if q.size(0) > 1:  # rxrl.rl.learners.dqn._variances
            variances = [targets.var(), (targets - q).var()]
        else:
            variances = [torch.zeros_like(norm), torch.zeros_like(norm)]
        stats = torch.stack([loss.detach(), norm] + variances).double()  # noqa: RUF005 (TorchScript: no *)
        return [stats, (q - targets).abs()] + grads  # noqa: RUF005


def script_step(online: nn.Module, target: nn.Module, example_obs: torch.Tensor, double_q: bool,
                gamma: float, huber_delta: float, max_grad_norm: float | None) -> Any | None:
    """`DQNStep` as a TorchScript module over traces of ``online`` and ``target`` (their
    parameters shared: every in-place update reaches both), or None where a trace does not
    compute what its module computes on ``example_obs`` (bit for bit): the caller then
    keeps the eager step."""
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # TracerWarnings of shape arithmetic the trace keeps dynamic
        try:
            traced = [torch.jit.trace(net, example_obs, check_trace=False)  # type: ignore[no-untyped-call]
                          for net in (online, target)]
        except RuntimeError:
            return None
        if not all(torch.equal(t(example_obs), net(example_obs)) for t, net in zip(traced, (online, target),
                                                                                  strict=True)):
            return None
        # torch 2.13 marks TorchScript deprecated (for torch.compile, which imports torch._dynamo:
        # ~70 MB and seconds of compiling in the learner's process); it is what runs here
        return torch.jit.script(DQNStep(traced[0], traced[1], double_q, gamma, huber_delta, max_grad_norm))


class unoptimized:
    """The TorchScript executor's optimizations off on this thread within (the flag is
    thread-local), as it was after."""

    def __enter__(self) -> None:
        self.was = torch._C._get_graph_executor_optimize()
        torch._C._set_graph_executor_optimize(False)

    def __exit__(self, *exc: object) -> None:
        torch._C._set_graph_executor_optimize(self.was)


__all__ = ["DQNStep", "script_step", "unoptimized"]
