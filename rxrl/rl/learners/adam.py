"""Adam for the actor-critic learners: torch's update, bit for bit, without ``torch.optim``.

``torch.optim.Adam`` imports ``torch._dynamo`` on its first call (its methods are wrapped
to stay out of ``torch.compile`` graphs): ~0.7 s of CPU in every learner process, on the
critical path of a run's start (the learner is the last actor ready; docs/design-notes.md,
"The start-up's critical path"). Its step also goes through ~0.3 ms of Python bookkeeping per
call, a fifth of a PPO minibatch step with a 64x64 policy on the CPU.

`Adam` computes what ``torch.optim.Adam(params, lr=lr, eps=eps)`` computes on the CPU
(its single-tensor path: no weight decay, no AMSGrad, not capturable), with the same
kernels in the same order, so the parameters agree bit for bit (a test checks it), and its
`state_dict` has ``torch.optim.Adam``'s format: a checkpoint written with either loads
into the other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

import torch

#: the param-group keys of ``torch.optim.Adam``'s state dict (torch 2.13), with the values
#: `Adam` implements; a checkpoint whose group asks for anything else is refused
TORCH_GROUP = {"amsgrad": False, "weight_decay": 0, "maximize": False, "foreach": None,
               "capturable": False, "differentiable": False, "fused": None,
               "decoupled_weight_decay": False}


class Adam:
    """Adam over ``params`` with learning rate ``lr`` (``param_groups[0]["lr"]``, read at
    every step, is what a schedule sets), ``betas`` and ``eps``."""

    def __init__(self, params: Iterable[torch.Tensor], lr: float, eps: float = 1e-8,
                 betas: tuple[float, float] = (0.9, 0.999)) -> None:
        self.params = list(params)
        if not self.params:
            raise ValueError("Adam: got no parameters")
        self.param_groups: list[dict[str, Any]] = [
            {"lr": lr, "betas": betas, "eps": eps, **TORCH_GROUP, "params": self.params}]
        #: per parameter (by position): step count, first and second moments, made at the
        #: parameter's first step (as torch does)
        self.steps: list[torch.Tensor | None] = [None] * len(self.params)
        self.exp_avgs: list[torch.Tensor | None] = [None] * len(self.params)
        self.exp_avg_sqs: list[torch.Tensor | None] = [None] * len(self.params)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop (or zero) every parameter's gradient."""
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        """One Adam update of every parameter that has a gradient: torch's single-tensor
        update, as ``torch._foreach_*`` calls (on the CPU, a loop of the same kernels)."""
        group = self.param_groups[0]
        lr, (beta1, beta2), eps = float(group["lr"]), group["betas"], group["eps"]
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not live:
            return
        for i in live:
            if self.steps[i] is None:
                p = self.params[i]
                self.steps[i] = torch.tensor(0.0)
                self.exp_avgs[i] = torch.zeros_like(p, memory_format=torch.preserve_format)
                self.exp_avg_sqs[i] = torch.zeros_like(p, memory_format=torch.preserve_format)
        params = [self.params[i] for i in live]
        grads = [cast(torch.Tensor, p.grad) for p in params]
        steps = [cast(torch.Tensor, self.steps[i]) for i in live]
        exp_avgs = [cast(torch.Tensor, self.exp_avgs[i]) for i in live]
        exp_avg_sqs = [cast(torch.Tensor, self.exp_avg_sqs[i]) for i in live]
        torch._foreach_add_(steps, 1)  # float32 counters, as torch's
        counts = [s.item() for s in steps]
        torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
        denoms = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_div_(denoms, [(1 - beta2**n) ** 0.5 for n in counts])
        torch._foreach_add_(denoms, eps)
        torch._foreach_addcdiv_(params, exp_avgs, denoms, [-(lr / (1 - beta1**n)) for n in counts])

    def state_dict(self) -> dict[str, Any]:
        """``torch.optim.Adam``'s format: ``state`` by parameter index (only parameters that
        have stepped), ``param_groups`` with the indices. The tensors are the live ones (as
        torch's are): copy them to keep a snapshot."""
        state = {i: {"step": s, "exp_avg": m, "exp_avg_sq": v}
                 for i, (s, m, v) in enumerate(zip(self.steps, self.exp_avgs, self.exp_avg_sqs, strict=True))
                 if s is not None}
        group = {k: v for k, v in self.param_groups[0].items() if k != "params"}
        return {"state": state, "param_groups": [{**group, "params": list(range(len(self.params)))}]}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore a `state_dict` of this class or of ``torch.optim.Adam`` over the same
        parameters (the moments are copied onto each parameter's device and dtype)."""
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.params):
            raise ValueError(f"Adam.load_state_dict: the state is for {[len(g['params']) for g in groups]} "
                             f"parameters in {len(groups)} group(s), this optimizer has "
                             f"{len(self.params)} in one")
        group = groups[0]
        other = {k: group[k] for k in TORCH_GROUP if k in group and group[k] != TORCH_GROUP[k]}
        if other:
            raise ValueError(f"Adam.load_state_dict: the state asks for {other}, which this Adam "
                             "does not implement")
        self.param_groups[0].update({k: group[k] for k in ("lr", "betas", "eps")})
        state = state_dict["state"]
        for i, (p, index) in enumerate(zip(self.params, group["params"], strict=True)):
            s = state.get(index)
            if s is None:
                self.steps[i] = self.exp_avgs[i] = self.exp_avg_sqs[i] = None
                continue
            self.steps[i] = torch.as_tensor(s["step"], dtype=torch.float32).detach().clone().cpu()
            self.exp_avgs[i] = s["exp_avg"].detach().to(p.device, p.dtype, copy=True)
            self.exp_avg_sqs[i] = s["exp_avg_sq"].detach().to(p.device, p.dtype, copy=True)


__all__ = ["TORCH_GROUP", "Adam"]
