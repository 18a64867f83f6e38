"""Learners: own a policy and its Adam optimizer, train on batches, hand out weights."""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import numpy.typing as npt
import torch

from rxrl.envs.vector import EnvSpaces
from rxrl.rl.config import A2CConfig, PolicyConfig, PPOConfig
from rxrl.rl.data.batch import SampleBatch
from rxrl.rl.data.metrics import TrainMetrics
from rxrl.rl.data.running_stats import NormStats
from rxrl.rl.data.sequences import SequenceBatch
from rxrl.rl.learners.adam import Adam
from rxrl.rl.models.policy import ActorCritic, Weights, make_policy
from rxrl.rl.objectives.losses import (
    A2C_UNREPORTED,
    Gradients,
    LossTerms,
    TensorBatch,
    a2c_loss,
    grad_norm,
    ppo_loss,
    train_metrics,
)

if TYPE_CHECKING:  # torch.distributed: imported by a learner group's members only
    from rxrl.rl.learners.collective import Collective

#: where a learner trains: ``"cpu"``, ``"cuda"`` (or ``"cuda:N"``), or ``"auto"`` (CUDA when
#: this process has it, else the CPU)
Device = str


def resolve_device(device: Device) -> torch.device:
    """The torch device ``device`` names (``"auto"``: CUDA if available here, else CPU).

    Raises ValueError for an unknown name, or for CUDA in a process that has none (on Ray:
    an actor that did not ask for a GPU sees none).
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'auto', got {device!r}") from None
    if resolved.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'auto', got {device!r}")
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r}: CUDA is not available in this process (a CPU build "
                         "of torch, no GPU, or a Ray actor that did not ask for one)")
    return resolved


def _cpu_copy(value: Any) -> Any:
    """A deep copy of ``value`` with every tensor on the CPU (a checkpoint loads anywhere)."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, Mapping):
        return {k: _cpu_copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_cpu_copy(v) for v in value)
    return copy.deepcopy(value)


class Learner:
    """Common learner state: the policy, an Adam optimizer (`rxrl.rl.learners.adam.Adam`: torch's, bit
    for bit) and a minibatch RNG.

    `env` is a gymnasium id (its spaces are read from one throwaway instance) or the
    `EnvSpaces` themselves. The policy's initial weights depend only on `seed` and the
    policy config, so a `RolloutWorker` with the same `seed` starts from the same weights.
    The policy trains on `device` (see `resolve_device`); what leaves the learner is on the
    CPU either way: weights are numpy arrays, a `state_dict` holds CPU tensors, and
    `load_state_dict` takes one made on any device.
    """

    def __init__(
        self,
        env: str | EnvSpaces,
        policy: PolicyConfig | None,
        seed: int,
        lr: float,
        adam_eps: float,
        env_kwargs: Mapping[str, Any] | None,
        device: Device = "cpu",
        collective: Collective | None = None,
    ) -> None:
        spaces = env if isinstance(env, EnvSpaces) else EnvSpaces.of(env, env_kwargs)
        #: this learner's place in a learner group (`rxrl.rl.learners.collective`), or None
        self.collective = collective
        self.spaces = spaces
        self.device = resolve_device(device)
        # built on the CPU (same initial weights everywhere), then moved
        self.policy: ActorCritic = make_policy(spaces.observation, spaces.action, policy, seed)
        self.policy.to(self.device)
        self.optimizer = Adam(self.policy.parameters(), lr=lr, eps=adam_eps)
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 0x1EA12]))
        self.num_updates = 0
        #: whether flat batches cross to the device once and minibatches are gathered there
        #: (on a GPU; on the CPU the host gathers them, as the numpy rows are there already)
        self.gather_on_device = self.device.type != "cpu"
        #: transitions trained on so far (a learning-rate schedule's clock)
        self.env_steps_trained = 0

    def tensors(self, batch: SampleBatch | SequenceBatch | TensorBatch) -> TensorBatch:
        """The loss columns of ``batch`` as tensors on the learner's device (a `TensorBatch` is
        there already)."""
        if isinstance(batch, TensorBatch):
            return batch
        t = TensorBatch.from_batch(batch)
        if self.device.type == "cpu":
            return t
        moved: dict[str, Any] = {f.name: None if getattr(t, f.name) is None
                                 else getattr(t, f.name).to(self.device, non_blocking=True)
                                 for f in attrs.fields(TensorBatch)}
        return TensorBatch(**moved)

    def _flat(self, method: str) -> None:
        """ValueError when a recurrent policy is asked to train on flat transitions."""
        if self.policy.core is not None:
            raise ValueError(f"{type(self).__name__}.{method}: this policy is recurrent "
                             f"(policy.recurrent={self.policy.config.recurrent!r}); it trains on "
                             "sequences: train_sequences(SequenceBatch), from RolloutWorker.sample_sequences")

    def get_weights(self) -> Weights:
        """The policy weights as a dict of numpy arrays (what workers' `set_weights` takes)."""
        return self.policy.get_weights()

    def set_weights(self, weights: Mapping[str, npt.NDArray[np.generic]]) -> None:
        """Overwrite the policy weights (the optimizer state is kept)."""
        self.policy.set_weights(weights)

    def state_dict(self) -> dict[str, Any]:
        """A deep copy of everything needed to resume: policy, optimizer, RNG, update count
        (tensors on the CPU, whatever the learner's device)."""
        state: dict[str, Any] = _cpu_copy(
            {
                "policy": self.policy.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "rng": self.rng.bit_generator.state,
                "num_updates": self.num_updates,
                "env_steps_trained": self.env_steps_trained,
            }
        )
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a `state_dict()` (made on any device); training then continues exactly
        as it would have."""
        self.policy.load_state_dict(state["policy"])  # copies onto the policy's device
        self.optimizer.load_state_dict(state["optimizer"])  # casts to the parameters' device
        self.rng.bit_generator.state = state["rng"]
        self.num_updates = int(state["num_updates"])
        self.env_steps_trained = int(state.get("env_steps_trained", 0))

    def merge_stats(self, stats: NormStats | None) -> None:
        """Add a trained batch's running-statistics contribution to the policy's (a
        normalizing policy, `PolicyConfig.normalize_obs` / `scale_rewards`; else nothing).
        Called *after* training on the batch: it trains with the statistics it was sampled
        with (`rxrl.rl.data.running_stats`)."""
        if self.policy.normalizer is not None:
            self.policy.normalizer.merge(stats)

    def _step(self, loss: torch.Tensor, max_grad_norm: float | None) -> float:
        """One optimizer step on `loss`; returns the pre-clipping gradient norm."""
        self.optimizer.zero_grad(set_to_none=True)
        torch.autograd.backward(loss)
        norm = grad_norm(self.policy, max_grad_norm)
        self.optimizer.step()
        self.num_updates += 1
        return norm

    def _group_step(self, term: LossTerms | None, share: float, max_grad_norm: float | None,
                    extra: Sequence[float] = ()) -> tuple[LossTerms, float, list[float]]:
        """A learner group member's optimizer step: ``term``, the loss on this rank's rows (None:
        it has none), scaled by their ``share`` of the minibatch; its gradients, loss statistics
        and ``extra`` floats (each already weighted) summed over the group in one allreduce
        (`Collective.sum_gradients_`); then the same clipped step on every rank. Returns the
        whole minibatch's loss statistics, the pre-clipping gradient norm and the summed
        ``extra``."""
        assert self.collective is not None
        self.optimizer.zero_grad(set_to_none=True)
        stats = [0.0] * 5
        if term is not None:
            torch.autograd.backward(term.loss * share)
            stats = [share * v for v in (term.policy_loss, term.value_loss, term.entropy,
                                         term.approx_kl, term.clip_fraction)]
        summed = self.collective.sum_gradients_(list(self.policy.parameters()), [*stats, *extra])
        norm = grad_norm(self.policy, max_grad_norm)
        self.optimizer.step()
        self.num_updates += 1
        return LossTerms(torch.zeros(()), *summed[:5]), norm, summed[5:]

class PPOLearner(Learner):
    """Proximal policy optimization: `num_epochs` of minibatch SGD per batch.

    `train` expects advantages and value targets already in the batch (a worker computes
    GAE); per-minibatch advantage normalization is `config.normalize_advantages`.
    """

    def __init__(
        self,
        env: str | EnvSpaces,
        config: PPOConfig | None = None,
        policy: PolicyConfig | None = None,
        seed: int = 0,
        env_kwargs: Mapping[str, Any] | None = None,
        device: Device = "cpu",
        collective: Collective | None = None,
    ) -> None:
        self.config = config = config or PPOConfig()
        super().__init__(env, policy, seed, config.lr, config.adam_eps, env_kwargs, device, collective)

    def train(self, batch: SampleBatch) -> TrainMetrics:
        """Update the policy on `batch`; stops early once approx-KL exceeds `target_kl`.

        On a GPU the batch crosses to the device once and each minibatch is gathered there
        (the same rows in the same order as `SampleBatch.minibatches`): gathering and copying
        every minibatch on the host, again in every epoch, left the GPU mostly waiting."""
        self._flat("train")
        if not self.gather_on_device:
            return self._train(batch, batch.minibatches, batch.norm_stats)
        whole = self.tensors(batch)

        def minibatches(size: int, rng: np.random.Generator) -> Iterator[TensorBatch]:
            for idx in batch.minibatch_indices(size, rng):
                yield whole.rows(torch.as_tensor(idx, device=self.device))

        return self._train(batch, minibatches, batch.norm_stats)

    def train_sequences(self, batch: SequenceBatch) -> TrainMetrics:
        """`train` over sequences (a recurrent policy's): minibatches of whole sequences,
        each evaluated from its initial state with the episode starts' resets."""
        if self.collective is not None:
            raise ValueError("PPOLearner.train_sequences: a learner group member trains on flat "
                             "batches only (learner.num_learners > 1 with a recurrent policy)")
        return self._train(batch.batch, batch.minibatches, batch.batch.norm_stats)

    def _train(self, batch: SampleBatch,
               minibatches: Callable[[int, np.random.Generator],
                                     Iterator[SampleBatch | SequenceBatch | TensorBatch]],
               norm_stats: NormStats | None) -> TrainMetrics:
        start, c = time.perf_counter(), self.config
        if len(batch) == 0:
            raise ValueError("PPOLearner.train: got an empty batch")
        terms: list[LossTerms] = []
        norms: list[float] = []
        loss = functools.partial(ppo_loss, self.policy, clip_coef=c.clip_coef, clip_vloss=c.clip_vloss,
                                 vf_coef=c.vf_coef, ent_coef=c.ent_coef)
        for _ in range(c.num_epochs):
            for minibatch in minibatches(c.minibatch_size, self.rng):
                if self.collective is not None:  # a learner group: this rank's rows, summed
                    assert not isinstance(minibatch, SequenceBatch)
                    part, share = self.collective.shard(minibatch, c.normalize_advantages)
                    mine = None if part is None else loss(self.tensors(part), normalize_advantages=False)
                    term, norm, _ = self._group_step(mine, share, c.max_grad_norm)
                    terms.append(term)
                    norms.append(norm)
                    continue
                term = ppo_loss(
                    self.policy,
                    self.tensors(minibatch),
                    clip_coef=c.clip_coef,
                    clip_vloss=c.clip_vloss,
                    vf_coef=c.vf_coef,
                    ent_coef=c.ent_coef,
                    normalize_advantages=c.normalize_advantages,
                )
                norms.append(self._step(term.loss, c.max_grad_norm))
                terms.append(term)
            if c.target_kl is not None and terms[-1].approx_kl > c.target_kl:
                break
        self.merge_stats(norm_stats)
        self.env_steps_trained += len(batch)
        return train_metrics(terms, norms, batch, start, num_updates=len(terms))


class A2CLearner(Learner):
    """Advantage actor-critic: one gradient step per batch; also the A3C parameter server."""

    def __init__(
        self,
        env: str | EnvSpaces,
        config: A2CConfig | None = None,
        policy: PolicyConfig | None = None,
        seed: int = 0,
        env_kwargs: Mapping[str, Any] | None = None,
        device: Device = "cpu",
    ) -> None:
        self.config = config = config or A2CConfig()
        super().__init__(env, policy, seed, config.lr, config.adam_eps, env_kwargs, device)

    def train(self, batch: SampleBatch) -> TrainMetrics:
        """One optimizer step of the A2C loss on the whole batch."""
        self._flat("train")
        return self._train(batch, self.tensors(batch))

    def train_sequences(self, batch: SequenceBatch) -> TrainMetrics:
        """`train` over sequences (a recurrent policy's), each evaluated from its initial
        state with the episode starts' resets."""
        return self._train(batch.batch, self.tensors(batch))

    def _train(self, batch: SampleBatch, tensors: TensorBatch) -> TrainMetrics:
        start, c = time.perf_counter(), self.config
        if len(batch) == 0:
            raise ValueError("A2CLearner.train: got an empty batch")
        term = a2c_loss(
            self.policy,
            tensors,
            vf_coef=c.vf_coef,
            ent_coef=c.ent_coef,
            normalize_advantages=c.normalize_advantages,
        )
        norm = self._step(term.loss, c.max_grad_norm)
        self.merge_stats(batch.norm_stats)
        self.env_steps_trained += len(batch)
        return train_metrics([term], [norm], batch, start, num_updates=1, unreported=A2C_UNREPORTED)

    def apply_gradients(self, grads: Gradients) -> Weights:
        """A3C: one optimizer step with a worker's gradients; returns the new weights.

        Gradients are clipped to `config.max_grad_norm` here, by their global norm.
        Raises ValueError when the parameter names differ from this policy's.
        """
        params = dict(self.policy.named_parameters())
        if set(grads.arrays) != set(params):
            raise ValueError(
                "apply_gradients: parameter names differ; missing "
                f"{sorted(set(params) - set(grads.arrays))}, "
                f"unexpected {sorted(set(grads.arrays) - set(params))}"
            )
        self.optimizer.zero_grad(set_to_none=True)
        for name, p in params.items():
            p.grad = torch.as_tensor(grads.arrays[name]).reshape(p.shape).to(p.device, copy=True)
        grad_norm(self.policy, self.config.max_grad_norm)
        self.optimizer.step()
        self.num_updates += 1
        return self.get_weights()


__all__ = ["A2CLearner", "Device", "Learner", "PPOLearner", "resolve_device"]
