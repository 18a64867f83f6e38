"""V-trace learners: IMPALA's actor-critic and APPO's clipped surrogate, trained on `Fragment`s.

Both learn off-policy from fragments sampled with older weights: per minibatch of whole
sequences, the learner evaluates the fragments with its current critic, computes V-trace
targets and advantages (`rxrl.rl.objectives.gae.vtrace`, importance ratios against the behaviour
log-probabilities the workers recorded), and takes one optimizer step. They also buffer
fragments until a batch is full (`add_fragment`) and decide when a worker is due new weights
(`weights_for`), so that a plan can hand them fragments one at a time.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import numpy.typing as npt
import torch

from rxrl.envs.vector import EnvSpaces
from rxrl.rl.config import APPOConfig, IMPALAConfig, PolicyConfig, VTraceConfig
from rxrl.rl.data.fragment import Fragment
from rxrl.rl.data.metrics import TrainMetrics
from rxrl.rl.data.running_stats import NormStats
from rxrl.rl.learners.actor_critic import Device, Learner
from rxrl.rl.models.policy import ActorCritic, GaussianActorCritic, Weights
from rxrl.rl.objectives.gae import vtrace
from rxrl.rl.objectives.losses import LossTerms

if TYPE_CHECKING:  # torch.distributed: imported by a learner group's members only
    from rxrl.rl.learners.collective import Collective


@attrs.frozen
class VTraceMetrics(TrainMetrics):
    """`TrainMetrics` of a V-trace update, plus the staleness of its batch.

    A fragment's staleness is the number of learner updates (batches trained on) between
    the weights that sampled it and the update that trains on it (0: sampled with the
    current weights);
    `staleness_mean/min/max` summarize the batch's fragments. `rho_mean` is the mean
    importance ratio `pi_target / mu` before clipping. `approx_kl` is `KL(mu || pi)` (k3
    estimate) for IMPALA and `KL(pi_target || pi)` for APPO; `clip_fraction` the share of
    ratios clipped (IMPALA: rho above `rho_clip`; APPO: the surrogate's).
    """

    staleness_mean: float
    staleness_min: int
    staleness_max: int
    fragments: int
    rho_mean: float


@attrs.frozen(eq=False)
class VersionedWeights:
    """Policy weights with the learner's version (updates so far) behind them."""

    weights: Weights
    version: int


@attrs.frozen
class _PolicyTerms:
    """The policy part of a loss: differentiable ``loss`` (a KL penalty included), the
    surrogate alone (``policy_loss``) and statistics."""

    loss: torch.Tensor
    policy_loss: float
    approx_kl: float
    clip_fraction: float


@attrs.frozen(eq=False)
class VTraceLoss:
    """A minibatch's loss (`terms`), with its V-trace value targets `vs`, the critic's values
    and the mean importance ratio `pi_target / mu` (flat arrays in the fragment's row order)."""

    terms: LossTerms
    vs: npt.NDArray[np.float32]
    values: npt.NDArray[np.float32]
    advantages: npt.NDArray[np.float32]
    rho_mean: float


@attrs.frozen(eq=False)
class MinibatchInputs:
    """A minibatch fragment's tensors on the learner's device: what a policy's forward over it
    reads (`starts` and `initial_state` only for a recurrent policy)."""

    obs: torch.Tensor
    actions: torch.Tensor
    bootstrap_rows: torch.Tensor
    bootstrap_obs: torch.Tensor
    starts: torch.Tensor | None = None
    initial_state: torch.Tensor | None = None

    @staticmethod
    def of(f: Fragment, device: torch.device, policy: ActorCritic, where: str) -> MinibatchInputs:
        """`f`'s tensors for `policy`; a recurrent policy needs the fragment's recurrent state,
        else ValueError (``where`` names the caller)."""
        def tensor(a: npt.NDArray[Any]) -> torch.Tensor:
            return torch.as_tensor(a, device=device)

        columns = (tensor(f.batch.obs), tensor(f.batch.actions), tensor(f.bootstrap_rows),
                   tensor(f.bootstrap_obs))
        if policy.core is None:
            return MinibatchInputs(*columns)
        if f.starts is None or f.initial_state is None:
            missing = " and no ".join(n for n in ("starts", "initial_state") if getattr(f, n) is None)
            raise ValueError(f"{where}: the policy is recurrent (policy.recurrent="
                             f"{policy.config.recurrent!r}) but the fragment has no {missing}: sample "
                             "it with RolloutWorker.sample_fragment from a worker of this policy")
        return MinibatchInputs(*columns, starts=tensor(f.starts), initial_state=tensor(f.initial_state))

    def heads(self, policy: ActorCritic) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`policy`'s head output `[B, out]` and values `[B]` (differentiable), and the values of
        the bootstrap observations (no gradient): a recurrent policy's seen in the critic's
        state after their rows (`ActorCritic.sequence_heads`)."""
        if self.starts is None or self.initial_state is None:
            out, values = policy.heads(policy.encode(self.obs))
            with torch.no_grad():
                boot = policy.heads(policy.encode(self.bootstrap_obs))[1]
            return out, values, boot
        out, values, after = policy.sequence_heads(self.obs, self.starts, self.initial_state,
                                                   self.bootstrap_rows, self.bootstrap_obs)
        assert after is not None
        return out, values, after.detach()

    def policy_out(self, policy: ActorCritic) -> torch.Tensor:
        """`policy`'s head output `[B, out]` (APPO's target network; recurrent: over the
        sequences from the worker's recorded states)."""
        if self.starts is None or self.initial_state is None:
            return policy.heads(policy.encode(self.obs))[0]
        return policy.sequence_heads(self.obs, self.starts, self.initial_state)[0]


class VTraceLearner(Learner):
    """Common machinery of `IMPALALearner` and `APPOLearner` (see the module docstring).

    `gamma` and `lam` are V-trace's discount and trace coefficient (`c = lam * min(c_clip,
    ratio)`). Subclasses choose V-trace's target policy and the policy-gradient term.
    """

    config: VTraceConfig

    def __init__(
        self,
        env: str | EnvSpaces,
        config: VTraceConfig,
        policy: PolicyConfig | None = None,
        seed: int = 0,
        env_kwargs: Mapping[str, Any] | None = None,
        device: Device = "cpu",
        collective: Collective | None = None,
        *,
        gamma: float = 0.99,
        lam: float = 1.0,
    ) -> None:
        if not 0.0 <= gamma <= 1.0 or not 0.0 <= lam <= 1.0:
            raise ValueError(f"{type(self).__name__}: gamma and lam must be in [0, 1], got {gamma}, {lam}")
        self.config, self.gamma, self.lam = config, gamma, lam
        super().__init__(env, policy, seed, config.lr, config.adam_eps, env_kwargs, device, collective)
        self.pending: list[Fragment] = []
        #: per worker, the update count of the weights it was last given
        self.sent: dict[int, int] = {}
        self._base_version = 0
        #: updates so far: batches trained on (the version of the current weights; an update
        #: is ``num_epochs`` passes of minibatch steps, counted in ``num_updates``)
        self.version = 0

    # -- the plan's interface ---------------------------------------------------------------

    def add_fragment(self, fragment: Fragment, train_batch_size: int) -> VTraceMetrics | None:
        """Buffer `fragment`; once `train_batch_size` rows wait, train on them (whole
        fragments, in arrival order) and return the report."""
        self.pending.append(fragment)
        if sum(len(f) for f in self.pending) < train_batch_size:
            return None
        batch, self.pending = self.pending, []
        return self.train(batch)

    def weights_for(self, worker: int, interval: int) -> VersionedWeights | None:
        """The current weights for `worker` if at least `interval` updates passed since it was
        last given weights (its initial ones count as given at the start), else None."""
        last = self.sent.get(worker, self._base_version)
        if self.version - last < interval:
            return None
        self.sent[worker] = self.version
        return VersionedWeights(self.get_weights(), self.version)

    def train(self, fragments: Sequence[Fragment]) -> VTraceMetrics:
        """`num_epochs` passes of minibatch SGD over the fragments, V-trace per minibatch."""
        start, c = time.perf_counter(), self.config
        if not fragments:
            raise ValueError(f"{type(self).__name__}.train: got no fragments")
        staleness = [self.version - f.version for f in fragments]
        batch = Fragment.concat(fragments)
        self.env_steps_trained += len(batch)
        per = batch.num_sequences if c.minibatch_size is None else max(1, c.minibatch_size // batch.length)
        terms: list[LossTerms] = []
        norms: list[float] = []
        rhos: list[float] = []
        targets: list[npt.NDArray[np.float32]] = []
        values: list[npt.NDArray[np.float32]] = []
        for epoch in range(c.num_epochs):
            if per >= batch.num_sequences:
                minibatches = [batch]
            else:
                order = self.rng.permutation(batch.num_sequences)
                minibatches = [batch.sequences(order[i:i + per]) for i in range(0, len(order), per)]
            for minibatch in minibatches:
                if self.collective is not None:  # a learner group: this rank's sequences, summed
                    term, norm, rho, loss_or_none = self._group_update(minibatch)
                    norms.append(norm)
                    terms.append(term)
                    rhos.append(rho)
                    if epoch == 0 and loss_or_none is not None:
                        targets.append(loss_or_none.vs)
                        values.append(loss_or_none.values)
                    continue
                loss = self.loss(minibatch)
                norms.append(self._step(loss.terms.loss, c.max_grad_norm))
                terms.append(loss.terms)
                rhos.append(loss.rho_mean)
                if epoch == 0:
                    targets.append(loss.vs)
                    values.append(loss.values)
        self.version += 1
        self._after_update()
        self.merge_stats(NormStats.merge_all([f.batch.norm_stats for f in fragments]))
        return self._metrics(terms, norms, rhos, targets, values, staleness, len(batch), start)

    def _group_update(self, minibatch: Fragment) -> tuple[LossTerms, float, float, VTraceLoss | None]:
        """A learner group member's step on ``minibatch``: the loss on this rank's sequences
        (`Collective.part`; advantages standardized with the whole minibatch's moments, one
        allreduce), weighted by their share of its rows, summed over the group (`_group_step`).
        Returns the minibatch's loss statistics, gradient norm and mean rho, and this rank's
        loss (None: it had no sequences)."""
        collective = self.collective
        assert collective is not None
        seqs = collective.part(minibatch.num_sequences)
        normalize = self._group_normalized if self.config.normalize_advantages else None
        if seqs.stop == seqs.start:
            if normalize is not None:
                normalize(torch.zeros(0))
            term, norm, (rho,) = self._group_step(None, 0.0, self.config.max_grad_norm, [0.0])
            return term, norm, rho, None
        part = minibatch.sequences(np.arange(seqs.start, seqs.stop))
        share = len(part.batch) / len(minibatch.batch)
        loss = self.loss(part, normalize)
        term, norm, (rho,) = self._group_step(loss.terms, share, self.config.max_grad_norm,
                                              [share * loss.rho_mean])
        return term, norm, rho, loss

    def _group_normalized(self, advantages: torch.Tensor) -> torch.Tensor:
        """``advantages`` standardized with the mean and (unbiased) deviation of the whole
        minibatch's, summed over the group."""
        assert self.collective is not None
        a = advantages.double()
        moments = torch.stack([a.new_tensor(float(len(a))), a.sum(), a.square().sum()])
        self.collective.allreduce_(moments)
        n, total, squares = (float(x) for x in moments)
        if n < 2:
            return advantages
        mean = total / n
        std: float = max((squares - n * mean * mean) / (n - 1), 0.0) ** 0.5
        standardized: torch.Tensor = (advantages - mean) / (std + 1e-8)
        return standardized

    # -- the loss ---------------------------------------------------------------------------

    def loss(self, f: Fragment,
             normalize: Callable[[torch.Tensor], torch.Tensor] | None = None) -> VTraceLoss:
        """The loss on one minibatch of whole sequences (V-trace with the current critic):
        policy term + `vf_coef * 0.5 * E[(v - vs)^2]` - `ent_coef * E[entropy]`. A recurrent
        policy runs its cores over the sequences from their recorded states (the fragment's
        `starts` and `initial_state`). ``normalize``: how to standardize the advantages
        instead of over ``f`` (a learner group's, over its whole minibatch)."""
        b, dev, policy = f.batch, self.device, self.policy
        inputs = MinibatchInputs.of(f, dev, policy, f"{type(self).__name__}.loss")
        behaviour = torch.as_tensor(b.logp, device=dev)
        out, v, boot = inputs.heads(policy)
        logp, entropy = policy.log_prob_entropy(out, inputs.actions)
        with torch.no_grad():
            target_logp, target_out = self._target(inputs, logp)
        v_np = v.detach().cpu().numpy()
        target_np = target_logp.cpu().numpy()
        tm = f.time_major
        vs, adv = vtrace(tm(b.logp), tm(target_np), tm(b.rewards), tm(v_np),
                         tm(f.next_values(v_np, boot.cpu().numpy())), tm(b.terminateds),
                         tm(b.truncateds), self.gamma, self.lam, self.config.rho_clip, self.config.c_clip)
        vs_flat, adv_flat = _flat(vs), _flat(adv)
        advantages = torch.as_tensor(adv_flat, device=dev)
        if normalize is not None:  # a learner group's: over the whole minibatch
            advantages = normalize(advantages)
        elif self.config.normalize_advantages and len(adv_flat) > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        pg = self._policy_terms(out, logp, behaviour, target_logp, target_out, advantages)
        v_loss = 0.5 * (v - torch.as_tensor(vs_flat, device=dev)).square().mean()
        ent = entropy.mean()
        c = self.config
        loss = pg.loss + c.vf_coef * v_loss - c.ent_coef * ent
        terms = LossTerms(loss, pg.policy_loss, v_loss.item(), ent.item(), pg.approx_kl, pg.clip_fraction)
        return VTraceLoss(terms, vs_flat, v_np, adv_flat, float(np.exp(target_np - b.logp).mean()))

    def _target(self, inputs: MinibatchInputs,
                logp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """V-trace's target policy at the minibatch (no gradient): the actions' log-probs, and
        its head output where the loss needs the distribution (`logp`: the current policy's)."""
        raise NotImplementedError

    def _policy_terms(self, out: torch.Tensor, logp: torch.Tensor, behaviour: torch.Tensor,
                      target_logp: torch.Tensor, target_out: torch.Tensor | None,
                      advantages: torch.Tensor) -> _PolicyTerms:
        """The policy-gradient part of the loss and its statistics."""
        raise NotImplementedError

    def _after_update(self) -> None:
        """Called after every update (a batch trained on)."""

    def _metrics(self, terms: list[LossTerms], norms: list[float], rhos: list[float],
                 targets: list[npt.NDArray[np.float32]], values: list[npt.NDArray[np.float32]],
                 staleness: list[int], rows: int, start: float) -> VTraceMetrics:
        def mean(xs: list[float]) -> float:
            return float(np.mean(xs)) if xs else math.nan

        if not targets:  # a learner group member that had no sequences in the first epoch
            targets, values = [np.zeros(1, np.float32)], [np.zeros(1, np.float32)]
        vs, v = np.concatenate(targets), np.concatenate(values)
        var = float(np.var(vs))
        return VTraceMetrics(
            policy_loss=mean([t.policy_loss for t in terms]),
            value_loss=mean([t.value_loss for t in terms]),
            entropy=mean([t.entropy for t in terms]),
            approx_kl=mean([t.approx_kl for t in terms]),
            clip_fraction=mean([t.clip_fraction for t in terms]),
            grad_norm=mean(norms),
            explained_variance=math.nan if var == 0.0 else 1.0 - float(np.var(vs - v)) / var,
            env_steps_trained=rows,
            num_updates=len(terms),
            learner_time_s=time.perf_counter() - start,
            staleness_mean=float(np.mean(staleness)),
            staleness_min=int(min(staleness)),
            staleness_max=int(max(staleness)),
            fragments=len(staleness),
            rho_mean=mean(rhos),
        )

    # -- state ------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """`Learner.state_dict` plus the weights' version."""
        state = super().state_dict()
        state["version"] = self.version
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a `state_dict()`; workers' weights count as given at its update count."""
        super().load_state_dict(state)
        self.version = int(state.get("version", 0))
        self._base_version = self.version
        self.sent.clear()


class IMPALALearner(VTraceLearner):
    """IMPALA: V-trace with the current policy as the target, `-E[logp * A]` (see `VTraceConfig`)."""

    config: IMPALAConfig

    def __init__(
        self,
        env: str | EnvSpaces,
        config: IMPALAConfig | None = None,
        policy: PolicyConfig | None = None,
        seed: int = 0,
        env_kwargs: Mapping[str, Any] | None = None,
        device: Device = "cpu",
        collective: Collective | None = None,
        *,
        gamma: float = 0.99,
        lam: float = 1.0,
    ) -> None:
        super().__init__(env, config or IMPALAConfig(), policy, seed, env_kwargs, device, collective,
                         gamma=gamma, lam=lam)

    def _target(self, inputs: MinibatchInputs,
                logp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        return logp.detach(), None

    def _policy_terms(self, out: torch.Tensor, logp: torch.Tensor, behaviour: torch.Tensor,
                      target_logp: torch.Tensor, target_out: torch.Tensor | None,
                      advantages: torch.Tensor) -> _PolicyTerms:
        with torch.no_grad():
            log_ratio = logp - behaviour
            ratio = log_ratio.exp()
            approx_kl = ((ratio - 1) - log_ratio).mean().item()
            # a tolerance: on-policy, numpy (worker) and torch log-probs differ by an ulp
            clipped = (ratio > self.config.rho_clip * (1 + 1e-5)).float().mean().item()
        pg_loss = -(logp * advantages).mean()
        return _PolicyTerms(pg_loss, pg_loss.item(), approx_kl, clipped)


class APPOLearner(VTraceLearner):
    """APPO: the clipped surrogate on V-trace advantages against a target network, with an
    optional KL penalty (see `APPOConfig`). The target network is part of `state_dict`."""

    config: APPOConfig

    def __init__(
        self,
        env: str | EnvSpaces,
        config: APPOConfig | None = None,
        policy: PolicyConfig | None = None,
        seed: int = 0,
        env_kwargs: Mapping[str, Any] | None = None,
        device: Device = "cpu",
        collective: Collective | None = None,
        *,
        gamma: float = 0.99,
        lam: float = 1.0,
    ) -> None:
        super().__init__(env, config or APPOConfig(), policy, seed, env_kwargs, device, collective,
                         gamma=gamma, lam=lam)
        self.target: ActorCritic = copy.deepcopy(self.policy)
        self.target.requires_grad_(False)
        if self.policy.normalizer is not None:  # one set of statistics: the policy's
            self.target.normalizer = self.policy.normalizer
        #: updates (batches) since the target network last moved
        self.updates_since_target = 0

    def _target(self, inputs: MinibatchInputs,
                logp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        out = inputs.policy_out(self.target)  # a recurrent one from the worker's recorded states
        return self.target.log_prob_entropy(out, inputs.actions)[0], out

    def _policy_terms(self, out: torch.Tensor, logp: torch.Tensor, behaviour: torch.Tensor,
                      target_logp: torch.Tensor, target_out: torch.Tensor | None,
                      advantages: torch.Tensor) -> _PolicyTerms:
        c = self.config
        assert target_out is not None
        is_ratio = (behaviour - target_logp).exp().clamp(0.0, 2.0)
        ratio = is_ratio * (logp - behaviour).exp()
        surrogate = torch.min(advantages * ratio, advantages * ratio.clamp(1 - c.clip_coef, 1 + c.clip_coef))
        pg_loss = -surrogate.mean()
        loss = pg_loss
        if c.kl_coef > 0:
            kl = kl_divergence(self.target, target_out, self.policy, out).mean()
            loss = loss + c.kl_coef * kl
        else:
            with torch.no_grad():
                kl = kl_divergence(self.target, target_out, self.policy, out).mean()
        with torch.no_grad():
            clipped = ((ratio - 1).abs() > c.clip_coef).float().mean().item()
        return _PolicyTerms(loss, pg_loss.item(), kl.item(), clipped)

    def _after_update(self) -> None:
        self.updates_since_target += 1
        if self.updates_since_target >= self.config.target_update_interval:
            self.update_target()

    def update_target(self) -> None:
        """Move the target network to `tau * online + (1 - tau) * target` (tau 1: a copy)."""
        tau = self.config.tau
        with torch.no_grad():
            for t, p in zip(self.target.parameters(), self.policy.parameters(), strict=True):
                if tau < 1.0:
                    t.mul_(1.0 - tau).add_(p, alpha=tau)
                else:
                    t.copy_(p)
        self.updates_since_target = 0

    def state_dict(self) -> dict[str, Any]:
        """`Learner.state_dict` plus the target network and its update clock."""
        state = super().state_dict()
        state["target"] = {k: t.detach().to("cpu", copy=True) for k, t in self.target.state_dict().items()}
        state["updates_since_target"] = self.updates_since_target
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a `state_dict()` (without a target network in it: a copy of the policy)."""
        super().load_state_dict(state)
        self.target.load_state_dict(state.get("target", state["policy"]))
        self.updates_since_target = int(state.get("updates_since_target", 0))


def kl_divergence(p: ActorCritic, p_out: torch.Tensor, q: ActorCritic, q_out: torch.Tensor) -> torch.Tensor:
    """`KL(p || q)` per row, from two policies' head outputs at the same observations.

    Categorical heads: over the logits. Gaussian heads: diagonal Gaussians with each
    policy's own state-independent log-std.
    """
    if isinstance(p, GaussianActorCritic) and isinstance(q, GaussianActorCritic):
        log_sp, log_sq = p.log_std, q.log_std
        var_p, var_q = (2 * log_sp).exp(), (2 * log_sq).exp()
        per_dim = log_sq - log_sp + (var_p + (p_out - q_out).square()) / (2 * var_q) - 0.5
        return per_dim.sum(-1)
    log_p, log_q = torch.log_softmax(p_out, -1), torch.log_softmax(q_out, -1)
    return (log_p.exp() * (log_p - log_q)).sum(-1)


def _flat(time_major: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """`[T, S]` back to env-major rows `[S * T]`."""
    return np.ascontiguousarray(np.swapaxes(time_major, 0, 1)).reshape(-1)


__all__ = ["APPOLearner", "IMPALALearner", "MinibatchInputs", "VTraceLearner", "VTraceLoss", "VTraceMetrics",
           "VersionedWeights", "kl_divergence"]
