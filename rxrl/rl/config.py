"""Hyper-parameter records for policies and learners: frozen, validated, printable."""

from __future__ import annotations

from typing import Literal

import attrs
from attrs import validators as v

Activation = Literal["tanh", "relu"]


def _positive_ints(
    _inst: object, attribute: attrs.Attribute[tuple[int, ...]], value: tuple[int, ...]
) -> None:
    if not isinstance(value, tuple) or not value or not all(isinstance(x, int) and x > 0 for x in value):
        raise ValueError(f"{attribute.name} must be a non-empty tuple of positive ints, got {value!r}")


_nonneg = v.ge(0.0)


def _optional_positive(_inst: object, attribute: attrs.Attribute[float | None], value: float | None) -> None:
    if value is not None and not value > 0.0:
        raise ValueError(f"{attribute.name} must be None or > 0, got {value!r}")


# Typed as optional so that attrs infers the optional field type from the default.
_GRAD_CLIP: float | None = 0.5


@attrs.frozen
class PolicyConfig:
    """Architecture of the MLP actor-critic built by `make_policy`.

    `hidden_sizes` are the trunk widths (CleanRL: 64x64 tanh). With `shared_trunk=False`
    the actor and the critic each get their own trunk of that shape; with `True` they share
    one and differ only in their heads. `init_log_std` is the initial state-independent
    log standard deviation of the Gaussian head (Box action spaces only).
    """

    hidden_sizes: tuple[int, ...] = attrs.field(default=(64, 64), validator=_positive_ints)
    activation: Activation = attrs.field(default="tanh", validator=v.in_(("tanh", "relu")))
    shared_trunk: bool = False
    init_log_std: float = 0.0


@attrs.frozen
class A2CConfig:
    """Advantage actor-critic: one gradient step per batch (also the A3C worker loss)."""

    lr: float = attrs.field(default=7e-4, validator=v.gt(0.0))
    vf_coef: float = attrs.field(default=0.5, validator=_nonneg)
    ent_coef: float = attrs.field(default=0.01, validator=_nonneg)
    max_grad_norm: float | None = attrs.field(default=_GRAD_CLIP, validator=_optional_positive)
    normalize_advantages: bool = False
    adam_eps: float = attrs.field(default=1e-5, validator=v.gt(0.0))


@attrs.frozen
class PPOConfig:
    """Proximal policy optimization (clipped surrogate), CleanRL's defaults.

    `num_epochs` passes of minibatch SGD over each batch, minibatches of `minibatch_size`
    transitions (a short final minibatch is used, not dropped). `clip_vloss` clips the
    value update around the behaviour values with `clip_coef`, as CleanRL does.
    `target_kl` stops the epochs early once the approximate KL exceeds it.
    """

    lr: float = attrs.field(default=2.5e-4, validator=v.gt(0.0))
    num_epochs: int = attrs.field(default=4, validator=v.ge(1))
    minibatch_size: int = attrs.field(default=256, validator=v.ge(1))
    clip_coef: float = attrs.field(default=0.2, validator=v.gt(0.0))
    clip_vloss: bool = True
    vf_coef: float = attrs.field(default=0.5, validator=_nonneg)
    ent_coef: float = attrs.field(default=0.01, validator=_nonneg)
    max_grad_norm: float | None = attrs.field(default=_GRAD_CLIP, validator=_optional_positive)
    normalize_advantages: bool = True
    target_kl: float | None = attrs.field(default=None, validator=_optional_positive)
    adam_eps: float = attrs.field(default=1e-5, validator=v.gt(0.0))


def check_discount(gamma: float, lam: float) -> None:
    """Raise ValueError unless 0 <= gamma <= 1 and 0 <= lam <= 1."""
    for name, value in (("gamma", gamma), ("lam", lam)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value!r}")


__all__ = ["A2CConfig", "Activation", "PPOConfig", "PolicyConfig", "check_discount"]
