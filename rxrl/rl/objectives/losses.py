"""Actor-critic losses (PPO's clipped surrogate, A2C) and gradients as plain arrays."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable

import attrs
import numpy as np
import numpy.typing as npt
import torch

from rxrl.rl.config import A2CConfig
from rxrl.rl.data.batch import SampleBatch
from rxrl.rl.data.metrics import TrainMetrics
from rxrl.rl.data.sequences import SequenceBatch
from rxrl.rl.models.policy import ActorCritic


@attrs.frozen
class TensorBatch:
    """The columns of a `SampleBatch` that losses read, as torch tensors (shared memory); of a
    `SequenceBatch`, also its episode starts and initial states."""

    obs: torch.Tensor
    actions: torch.Tensor
    logp: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    value_targets: torch.Tensor
    starts: torch.Tensor | None = None
    initial_state: torch.Tensor | None = None

    @staticmethod
    def from_batch(batch: SampleBatch | SequenceBatch) -> TensorBatch:
        """Wrap the batch's arrays without copying where dtypes allow."""
        t = torch.as_tensor
        rows = batch.batch if isinstance(batch, SequenceBatch) else batch
        sequences = ({"starts": t(batch.starts), "initial_state": t(batch.initial_state)}
                     if isinstance(batch, SequenceBatch) else {})
        return TensorBatch(
            obs=t(rows.obs),
            actions=t(rows.actions),
            logp=t(rows.logp),
            values=t(rows.values),
            advantages=t(rows.advantages),
            value_targets=t(rows.value_targets),
            **sequences,
        )

    def __len__(self) -> int:
        return len(self.obs)

    def rows(self, index: torch.Tensor | slice) -> TensorBatch:
        """These rows of a flat batch (gathered where the tensors are: on the learner's device)."""
        if self.starts is not None:
            raise ValueError("TensorBatch.rows: a sequence batch is cut by whole sequences")
        return TensorBatch(self.obs[index], self.actions[index], self.logp[index], self.values[index],
                           self.advantages[index], self.value_targets[index])

    def slice(self, start: int, stop: int) -> TensorBatch:
        """Rows ``start:stop`` (`SampleBatch.slice`'s counterpart)."""
        return self.rows(slice(start, stop))

    def with_columns(self, *, advantages: torch.Tensor) -> TensorBatch:
        """A copy with other advantages."""
        return attrs.evolve(self, advantages=advantages)

    def evaluate(self, policy: ActorCritic) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The policy's differentiable `(logp, entropy, values)` of these rows: over sequences
        (`ActorCritic.evaluate_sequences`) when they are a sequence batch's."""
        if self.starts is None or self.initial_state is None:
            return policy.evaluate(self.obs, self.actions)
        return policy.evaluate_sequences(self.obs, self.actions, self.starts, self.initial_state)


@attrs.frozen
class LossTerms:
    """A differentiable total `loss` and the float statistics of its parts."""

    loss: torch.Tensor
    policy_loss: float
    value_loss: float
    entropy: float
    approx_kl: float
    clip_fraction: float


def normalized(advantages: torch.Tensor, enabled: bool = True) -> torch.Tensor:
    """A minibatch's advantages standardized over it (``enabled``, two rows or more; else as
    they are): what the losses' ``normalize_advantages`` computes."""
    if not enabled or advantages.numel() < 2:
        return advantages
    return (advantages - advantages.mean()) / (advantages.std() + 1e-8)



def ppo_loss(
    policy: ActorCritic,
    b: TensorBatch,
    *,
    clip_coef: float,
    clip_vloss: bool,
    vf_coef: float,
    ent_coef: float,
    normalize_advantages: bool,
) -> LossTerms:
    """PPO's clipped surrogate + (optionally clipped) value loss - entropy bonus (CleanRL).

    `loss = -E[min(ratio * A, clip(ratio, 1 +- clip_coef) * A)] + vf_coef * 0.5 *
    E[max((v - R)^2, (v_clip - R)^2)] - ent_coef * E[entropy]`, where `v_clip` is the new
    value clipped to within `clip_coef` of the behaviour value (or just `(v - R)^2` without
    `clip_vloss`).
    """
    logp, entropy, values = b.evaluate(policy)
    log_ratio = logp - b.logp
    ratio = log_ratio.exp()
    adv = normalized(b.advantages, normalize_advantages)
    pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip_coef, 1 + clip_coef)).mean()
    v_err = (values - b.value_targets).square()
    if clip_vloss:
        v_clipped = b.values + (values - b.values).clamp(-clip_coef, clip_coef)
        v_err = torch.max(v_err, (v_clipped - b.value_targets).square())
    v_loss = 0.5 * v_err.mean()
    ent = entropy.mean()
    with torch.no_grad():
        approx_kl = ((ratio - 1) - log_ratio).mean().item()
        clip_fraction = ((ratio - 1).abs() > clip_coef).float().mean().item()
    return LossTerms(
        loss=pg_loss - ent_coef * ent + vf_coef * v_loss,
        policy_loss=pg_loss.item(),
        value_loss=v_loss.item(),
        entropy=ent.item(),
        approx_kl=approx_kl,
        clip_fraction=clip_fraction,
    )


#: the `TrainMetrics` fields the A2C loss does not compute (it clips nothing)
A2C_UNREPORTED = frozenset({"clip_fraction"})


def a2c_loss(
    policy: ActorCritic,
    b: TensorBatch,
    *,
    vf_coef: float,
    ent_coef: float,
    normalize_advantages: bool,
) -> LossTerms:
    """Advantage actor-critic: `-E[logp * A] + vf_coef * 0.5 * E[(v - R)^2] - ent_coef * E[H]`.

    `approx_kl` is measured against the batch's behaviour log-probs (0 on-policy).
    """
    logp, entropy, values = b.evaluate(policy)
    adv = normalized(b.advantages, normalize_advantages)
    pg_loss = -(logp * adv).mean()
    v_loss = 0.5 * (values - b.value_targets).square().mean()
    ent = entropy.mean()
    with torch.no_grad():
        log_ratio = logp - b.logp
        approx_kl = (log_ratio.exp() - 1 - log_ratio).mean().item()
    return LossTerms(
        loss=pg_loss - ent_coef * ent + vf_coef * v_loss,
        policy_loss=pg_loss.item(),
        value_loss=v_loss.item(),
        entropy=ent.item(),
        approx_kl=approx_kl,
        clip_fraction=0.0,
    )


def explained_variance(batch: SampleBatch) -> float:
    """`1 - Var[targets - values] / Var[targets]` of the batch (NaN if targets are constant)."""
    var = float(np.var(batch.value_targets))
    if len(batch) == 0 or var == 0.0:
        return math.nan
    return 1.0 - float(np.var(batch.value_targets - batch.values)) / var


def grad_norm(policy: ActorCritic, max_norm: float | None) -> float:
    """The global norm of the policy's current gradients; clip them to `max_norm` if set."""
    return clip_gradients(policy.parameters(), max_norm)


def clip_gradients(parameters: Iterable[torch.Tensor], max_norm: float | None) -> float:
    """The global (2-)norm of the gradients of ``parameters``, clipped to ``max_norm`` in place
    if set (``torch.nn.utils.clip_grad_norm_``). Without a limit only the norm is computed:
    clipping to infinity multiplies every gradient by 1, the same bits for ~7 % of a MinAtar
    DQN step's time."""
    if max_norm is not None:
        return float(torch.nn.utils.clip_grad_norm_(parameters, max_norm))
    grads = [p.grad for p in parameters if p.grad is not None]
    return float(torch.nn.utils.get_total_norm(grads)) if grads else 0.0


@attrs.frozen(eq=False)
class Gradients:
    """Gradients of a loss as numpy arrays keyed by parameter name, with the loss's stats.

    What an A3C worker sends to the learner (`A2CLearner.apply_gradients`).
    """

    arrays: dict[str, npt.NDArray[np.float32]]
    metrics: TrainMetrics


def a2c_gradients(policy: ActorCritic, batch: SampleBatch, config: A2CConfig) -> Gradients:
    """The A2C loss gradients of `policy` on `batch` (unclipped; the learner clips)."""
    start = time.perf_counter()
    terms = a2c_loss(
        policy,
        TensorBatch.from_batch(batch),
        vf_coef=config.vf_coef,
        ent_coef=config.ent_coef,
        normalize_advantages=config.normalize_advantages,
    )
    policy.zero_grad(set_to_none=True)
    torch.autograd.backward(terms.loss)
    norm = grad_norm(policy, None)
    arrays = {
        name: (p.grad if p.grad is not None else torch.zeros_like(p)).numpy().copy()
        for name, p in policy.named_parameters()
    }
    policy.zero_grad(set_to_none=True)
    return Gradients(arrays, train_metrics([terms], [norm], batch, start, num_updates=0,
                                           unreported=A2C_UNREPORTED))


def train_metrics(
    terms: list[LossTerms],
    norms: list[float],
    batch: SampleBatch,
    start: float,
    num_updates: int,
    unreported: frozenset[str] = frozenset(),
) -> TrainMetrics:
    """Average per-update loss statistics into a `TrainMetrics` (timed from `start`);
    ``unreported``: the fields the loss does not compute (`TrainMetrics.unreported`)."""

    def mean(values: list[float]) -> float:
        return float(np.mean(values)) if values else math.nan

    return TrainMetrics(
        policy_loss=mean([t.policy_loss for t in terms]),
        value_loss=mean([t.value_loss for t in terms]),
        entropy=mean([t.entropy for t in terms]),
        approx_kl=mean([t.approx_kl for t in terms]),
        clip_fraction=mean([t.clip_fraction for t in terms]),
        grad_norm=mean(norms),
        explained_variance=explained_variance(batch),
        env_steps_trained=len(batch),
        num_updates=num_updates,
        learner_time_s=time.perf_counter() - start,
        unreported=unreported,
    )


__all__ = [
    "A2C_UNREPORTED",
    "Gradients",
    "LossTerms",
    "TensorBatch",
    "a2c_gradients",
    "a2c_loss",
    "explained_variance",
    "clip_gradients",
    "grad_norm",
    "normalized",
    "ppo_loss",
    "train_metrics",
]
