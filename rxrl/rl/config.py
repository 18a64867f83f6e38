"""Hyper-parameter records for policies and learners: frozen, validated, printable."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, get_args

import attrs
import gymnasium as gym
from attrs import validators as v

Activation = Literal["tanh", "relu"]
#: `PolicyConfig.recurrent`: no recurrent core, an LSTM or a GRU
Recurrent = Literal["none", "lstm", "gru"]
#: `PolicyConfig.trunk` / `QNetConfig.trunk`: what turns observations into features
#: (`resolve_trunk`; the CNNs are `rxrl.rl.models.cnn`'s)
Trunk = Literal["auto", "mlp", "nature_cnn", "impala_cnn", "minatar_cnn"]
#: a `Trunk` other than ``"auto"``: the one a network is built with
BuiltTrunk = Literal["mlp", "nature_cnn", "impala_cnn", "minatar_cnn"]
#: the smallest image side each CNN takes: the Nature CNN's 8x8/4, 4x4/2 and 3x3/1 convolutions
#: leave nothing of fewer than 36 px; the MinAtar CNN's 3x3 convolution needs 3
MIN_SIDE: dict[str, int] = {"nature_cnn": 36, "impala_cnn": 1, "minatar_cnn": 3}


def resolve_trunk(trunk: Trunk, space: gym.Space[Any], field: str = "policy.trunk") -> BuiltTrunk:
    """The trunk ``trunk`` gives observations of ``space`` (``field`` names the setting in
    errors).

    ``"auto"``: an image (a 3-D `Box`, channels first: ``[C, H, W]``) gets the Nature CNN from
    36 px a side and the MinAtar CNN from 3 px; anything else the MLP. A CNN named outright
    must get an image at least its `MIN_SIDE` a side. Raises a one-line ValueError for a CNN
    on a non-image space, an image too small for it, or a channels-last image (``[H, W, C]``
    with C <= 4 < H, W: transpose it in the env).

    >>> image = gym.spaces.Box(0, 255, (4, 84, 84), "uint8")
    >>> resolve_trunk("auto", image), resolve_trunk("auto", gym.spaces.Box(0, 1, (4, 10, 10), "uint8"))
    ('nature_cnn', 'minatar_cnn')
    >>> resolve_trunk("auto", gym.spaces.Box(-1, 1, (4,))), resolve_trunk("mlp", image)
    ('mlp', 'mlp')
    """
    if trunk not in get_args(Trunk):
        raise ValueError(f"{field} must be one of {list(get_args(Trunk))}, got {trunk!r}")
    if trunk == "mlp":
        return "mlp"
    shape = space.shape if isinstance(space, gym.spaces.Box) else None
    if shape is None or len(shape) != 3:
        if trunk == "auto":
            return "mlp"
        seen = f"a Box of shape {shape} {space.dtype}" if shape is not None else repr(space)
        raise ValueError(f"{field}={trunk!r} needs image observations (a 3-D Box [C, H, W]), got "
                         f"{seen}: use {field}='mlp' or 'auto'")
    channels, height, width = shape
    if width <= 4 < min(channels, height):
        raise ValueError(f"{field}={trunk!r}: observations of shape {shape} look channels-last; the "
                         "CNN trunks take [C, H, W] (stacked frames on the channel axis): transpose "
                         f"them in the env, or use {field}='mlp'")
    if trunk == "auto":
        side = min(height, width)
        return "nature_cnn" if side >= MIN_SIDE["nature_cnn"] else (
            "minatar_cnn" if side >= MIN_SIDE["minatar_cnn"] else "mlp")
    if min(height, width) < MIN_SIDE[trunk]:
        raise ValueError(f"{field}={trunk!r} needs images of at least {MIN_SIDE[trunk]} px a side, got "
                         f"{height}x{width} (shape {shape}): use {field}='auto' or 'impala_cnn' (any size)")
    return trunk


def _positive_ints(
    _inst: object, attribute: attrs.Attribute[tuple[int, ...]], value: tuple[int, ...]
) -> None:
    if not isinstance(value, tuple) or not value or not all(isinstance(x, int) and x > 0 for x in value):
        raise ValueError(f"{attribute.name} must be a non-empty tuple of positive ints, got {value!r}")


_nonneg = v.ge(0.0)


def _optional_positive(_inst: object, attribute: attrs.Attribute[float | None], value: float | None) -> None:
    if value is not None and not value > 0.0:
        raise ValueError(f"{attribute.name} must be None or > 0, got {value!r}")


def _tau(inst: object, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 < value <= 1.0:
        raise ValueError(f"{type(inst).__name__}.{attribute.name} must be in (0, 1], got {value!r}")


def _int_at_least(minimum: int) -> Callable[[object, attrs.Attribute[int], int], None]:
    def check(inst: object, attribute: attrs.Attribute[int], value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{type(inst).__name__}.{attribute.name} must be an integer >= {minimum}, "
                             f"got {value!r}")

    return check


def _unit_interval(inst: object, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{type(inst).__name__}.{attribute.name} must be in [0, 1], got {value!r}")


def _optional_int_at_least_1(inst: object, attribute: attrs.Attribute[int | None], value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{type(inst).__name__}.{attribute.name} must be None or an integer >= 1, "
                         f"got {value!r}")


# Typed as optional so that attrs infers the optional field type from the default.
_GRAD_CLIP: float | None = 0.5


@attrs.frozen
class PolicyConfig:
    """Architecture of the actor-critic built by `make_policy`.

    `trunk` turns observations into features (`resolve_trunk`): ``"mlp"``, a CNN for image
    observations (uint8 ``[C, H, W]``, stacked frames on the channel axis:
    ``"nature_cnn"``, Mnih et al. 2015; ``"impala_cnn"``, Espeholt et al. 2018's ResNet;
    ``"minatar_cnn"``, one 3x3 convolution for MinAtar's 10x10 images; `rxrl.rl.models.cnn`),
    or ``"auto"`` (the default): the MLP for flat observations, the Nature CNN for images of
    36 px a side or more, the MinAtar CNN for smaller ones.

    `hidden_sizes` are the MLP trunk's widths (CleanRL: 64x64 tanh). With `shared_trunk=False`
    the actor and the critic each get their own trunk of that shape; with `True` they share
    one and differ only in their heads. `init_log_std` is the initial state-independent
    log standard deviation of the Gaussian head (Box action spaces only).

    A CNN is one torso that feeds both heads, whatever `shared_trunk` says (as CleanRL's
    ``ppo_atari``, SB3's ``CnnPolicy`` and the IMPALA paper's network do): a second CNN for the
    critic would double the cost of every forward and backward pass, nearly all of which is
    the convolutions. Its last layer (512, 256 or 128 ReLU units) is the trunk's output:
    `hidden_sizes` and `activation` do not apply, and `shared_trunk` only decides whether the
    actor and the critic get a recurrent core each or share one. Pixels stay uint8 until the
    CNN's forward divides them by the space's upper bound (255; none for 0/1 images);
    `normalize_obs` does not apply to images.

    Running statistics (`rxrl.rl.data.running_stats`; CleanRL's and SB3's continuous-control
    details): `normalize_obs` feeds the networks `clip((obs - mean) / std, +-obs_clip)`
    with the running mean and std of the observations seen; `scale_rewards` has workers
    divide rewards by the running std of the discounted return (clipped to
    `+-reward_clip`) before GAE. The statistics live in the policy's `state_dict` (so in
    weights and checkpoints), are merged on the learner and reach workers with the weights.

    Recurrence (`rxrl.rl.models.recurrent`): `recurrent="lstm"` or `"gru"` puts a core of
    `recurrent_size` units between each trunk and its head (the actor's and the critic's;
    with `shared_trunk` one trunk and one core feed both heads); workers carry its state
    across fragments and reset it at episode starts, and learners train on
    `rxrl.rl.data.sequences.SequenceBatch` es of `sequence_length` steps (None: a whole
    fragment per sequence).
    """

    hidden_sizes: tuple[int, ...] = attrs.field(default=(64, 64), validator=_positive_ints)
    activation: Activation = attrs.field(default="tanh", validator=v.in_(("tanh", "relu")))
    shared_trunk: bool = False
    init_log_std: float = 0.0
    normalize_obs: bool = False
    obs_clip: float = attrs.field(default=10.0, validator=v.gt(0.0))
    scale_rewards: bool = False
    reward_clip: float = attrs.field(default=10.0, validator=v.gt(0.0))
    recurrent: Recurrent = attrs.field(default="none", validator=v.in_(("none", "lstm", "gru")))
    recurrent_size: int = attrs.field(default=64, validator=_int_at_least(1))
    sequence_length: int | None = attrs.field(default=None, validator=_optional_int_at_least_1)
    trunk: Trunk = attrs.field(default="auto", validator=v.in_(get_args(Trunk)))

    @property
    def normalizes(self) -> bool:
        """Whether the policy carries running statistics (`normalize_obs` or `scale_rewards`)."""
        return self.normalize_obs or self.scale_rewards

    @property
    def is_recurrent(self) -> bool:
        """Whether the policy has a recurrent core (`recurrent` is not ``"none"``)."""
        return self.recurrent != "none"

    @property
    def core_state_size(self) -> int:
        """Floats of one core's state: ``2 * recurrent_size`` for an LSTM (its ``h`` then its
        ``c``), ``recurrent_size`` for a GRU, 0 without a core."""
        return {"none": 0, "lstm": 2, "gru": 1}[self.recurrent] * self.recurrent_size

    @property
    def state_size(self) -> int:
        """Floats of recurrent state per environment: the actor's core's state, then the
        critic's (one core's with `shared_trunk`)."""
        return self.core_state_size * (1 if self.shared_trunk else 2)


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
    #: learners in a data-parallel group (`rxrl.rl.learners.collective`): each takes its share
    #: of every minibatch's rows and the gradients are summed over the group before each step
    num_learners: int = attrs.field(default=1, validator=v.ge(1))


_NO_ANNEALING: int | None = None
_NO_GRAD_CLIP: float | None = None
_DQN_GRAD_CLIP: float | None = 10.0


@attrs.frozen
class QNetConfig:
    """Architecture of the Q-network built by `rxrl.rl.models.qnet.make_q_network`.

    `trunk` as `PolicyConfig.trunk` (``"auto"``: the MLP for flat observations, a CNN for
    images; the Nature CNN is DQN's own network); `hidden_sizes` are the MLP trunk's widths
    (a CNN ends in its own 512, 256 or 128 ReLU units: they and `activation` do not apply to
    it). With `dueling` the trunk feeds a value head and an advantage head,
    `Q = V + A - mean(A)` (Wang et al. 2016), instead of one Q head.
    """

    hidden_sizes: tuple[int, ...] = attrs.field(default=(128, 128), validator=_positive_ints)
    activation: Activation = attrs.field(default="relu", validator=v.in_(("tanh", "relu")))
    dueling: bool = False
    trunk: Trunk = attrs.field(default="auto", validator=v.in_(get_args(Trunk)))


@attrs.frozen
class ReplayConfig:
    """A replay buffer or shard: size, batch size, when sampling starts, prioritization.

    `capacity` transitions are kept (the oldest overwritten); `sample` draws `batch_size`
    of them, and a `ReplayShard` answers `NOT_READY` until it holds `learning_starts`.
    With `prioritized`, transitions are drawn with probability proportional to
    `priority^alpha` and weighted by importance weights with exponent `beta`, annealed
    linearly to `final_beta` over `beta_annealing_samples` sample calls (None: constant
    `beta`). `priority_eps` is added to every priority so none is zero. `frames`: how
    observations are stored — "dedup" keeps each distinct frame of stacked `[C, H, W]`
    observations once (`rxrl.rl.replay.frames`), "plain" stores `obs` and `next_obs` whole,
    "auto" dedups uint8 observations of >= 3 dims; samples are the same either way.
    """

    capacity: int = attrs.field(default=100_000, validator=_int_at_least(1))
    batch_size: int = attrs.field(default=128, validator=_int_at_least(1))
    learning_starts: int = attrs.field(default=1_000, validator=_int_at_least(1))
    prioritized: bool = False
    alpha: float = attrs.field(default=0.6, validator=_nonneg)
    beta: float = attrs.field(default=0.4, validator=_unit_interval)
    final_beta: float = attrs.field(default=1.0, validator=_unit_interval)
    beta_annealing_samples: int | None = attrs.field(
        default=_NO_ANNEALING, validator=_optional_int_at_least_1
    )
    priority_eps: float = attrs.field(default=1e-6, validator=v.gt(0.0))
    frames: Literal["auto", "dedup", "plain"] = attrs.field(
        default="auto", validator=v.in_(("auto", "dedup", "plain"))
    )

    def __attrs_post_init__(self) -> None:
        for name in ("batch_size", "learning_starts"):
            if getattr(self, name) > self.capacity:
                raise ValueError(f"ReplayConfig.{name} ({getattr(self, name)}) must not exceed "
                                 f"ReplayConfig.capacity ({self.capacity})")


@attrs.frozen
class DQNConfig:
    """DQN's settings: the learner's, and what its workers and replay read from it.

    Learner (`DQNLearner`): Adam (`lr`, `adam_eps`), Huber loss of threshold `huber_delta`
    on TD errors, double DQN targets (`double_q`), gradients clipped to a global norm of
    `max_grad_norm`, and every `target_update_interval` optimizer steps the target network
    moves to `tau * online + (1 - tau) * target` (`tau = 1`: a hard copy). Bootstraps use
    `gamma ** n_steps` per transition.

    Workers (`QRolloutWorker`): `n_step`-step returns with `gamma`; epsilon-greedy from
    `epsilon_start` to `epsilon_end` over `exploration_fraction` of the run
    (`rxrl.rl.schedules.epsilon_schedule`). A loop or plan trains `training_intensity`
    replayed transitions per sampled one (optimizer steps = intensity * sampled / batch size).

    The defaults (with `ReplayConfig()` and `QNetConfig()`'s) reach a mean return of 475
    over the last 100 episodes on CartPole-v1 within 100k env steps on seeds 0-2 (72.7k,
    68.1k, 83.3k; 7 of seeds 0-7) with two workers of one env each sampling 16 steps per
    round and weights synced every round (`bench/dqn_loop.py`; docs/rl.md, "DQN on
    CartPole", has the sweep and the commands). Intensity 32 with batches of 128 is one
    optimizer step per four env steps; 3-step returns and the high replay ratio made the
    difference from the 1-step, intensity-8 start; a 128x128 net and batches of 128 made
    the late collapses typical of DQN on CartPole rarer (1 of seeds 0-7; 2 of 8 with
    batches of 64).
    """

    lr: float = attrs.field(default=1e-3, validator=v.gt(0.0))
    adam_eps: float = attrs.field(default=1e-8, validator=v.gt(0.0))
    gamma: float = attrs.field(default=0.99, validator=_unit_interval)
    n_step: int = attrs.field(default=3, validator=_int_at_least(1))
    double_q: bool = True
    huber_delta: float = attrs.field(default=1.0, validator=v.gt(0.0))
    max_grad_norm: float | None = attrs.field(default=_DQN_GRAD_CLIP, validator=_optional_positive)
    target_update_interval: int = attrs.field(default=100, validator=_int_at_least(1))
    tau: float = attrs.field(default=1.0, validator=_tau)
    training_intensity: float = attrs.field(default=32.0, validator=v.gt(0.0))
    epsilon_start: float = attrs.field(default=1.0, validator=_unit_interval)
    epsilon_end: float = attrs.field(default=0.05, validator=_unit_interval)
    exploration_fraction: float = attrs.field(default=0.1, validator=_unit_interval)
    replay: ReplayConfig = attrs.field(factory=ReplayConfig, validator=v.instance_of(ReplayConfig))
    q_net: QNetConfig = attrs.field(factory=QNetConfig, validator=v.instance_of(QNetConfig))
    #: learners in a data-parallel group (`rxrl.rl.learners.collective`): each takes its share
    #: of every replayed batch's rows and the gradients are summed over the group before each step
    num_learners: int = attrs.field(default=1, validator=v.ge(1))
    #: the learning rate decays linearly from `lr` to 0 over the optimizer steps that this many
    #: sampled env steps buy (`training_intensity * lr_decay_steps / replay.batch_size`); None:
    #: constant (PPO's and A2C's `lr_decay_steps`, in DQN's clock)
    lr_decay_steps: int | None = attrs.field(default=None, validator=_optional_int_at_least_1)

    @property
    def lr_decay_updates(self) -> float | None:
        """The optimizer steps over which the learning rate decays (None: it does not)."""
        if self.lr_decay_steps is None:
            return None
        return self.training_intensity * self.lr_decay_steps / self.replay.batch_size


def _clip_threshold(inst: object, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0.0:
        raise ValueError(f"{type(inst).__name__}.{attribute.name} must be a number > 0 (inf: no "
                         f"clipping), got {value!r}")


def _optional_minibatch(inst: object, attribute: attrs.Attribute[int | None], value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{type(inst).__name__}.{attribute.name} must be None (the whole batch) or "
                         f"an integer >= 1, got {value!r}")


_WHOLE_BATCH: int | None = None
_VTRACE_GRAD_CLIP: float | None = 40.0


@attrs.frozen(kw_only=True)
class VTraceConfig:
    """What the V-trace learners (`IMPALALearner`, `APPOLearner`) share.

    Each batch of fragments is trained for `num_epochs` passes of minibatches of
    `minibatch_size` rows (whole sequences, so a multiple of the fragment length; None: the
    whole batch, one optimizer step per pass). V-trace targets and advantages are computed
    per minibatch with the learner's current critic, importance ratios clipped at
    `rho_clip` (rho-bar, for the targets and the policy gradient) and `c_clip` (c-bar, the
    trace); `inf` turns a clip off. Adam (`lr`, `adam_eps`), gradients clipped to a global
    norm of `max_grad_norm`; the loss weights the value error `vf_coef * 0.5 * E[(v - vs)^2]`
    and the entropy bonus `ent_coef`. `normalize_advantages` standardizes the policy-gradient
    advantages per minibatch.
    """

    lr: float = attrs.field(default=5e-4, validator=v.gt(0.0))
    adam_eps: float = attrs.field(default=1e-7, validator=v.gt(0.0))
    vf_coef: float = attrs.field(default=0.5, validator=_nonneg)
    ent_coef: float = attrs.field(default=0.01, validator=_nonneg)
    max_grad_norm: float | None = attrs.field(default=_VTRACE_GRAD_CLIP, validator=_optional_positive)
    rho_clip: float = attrs.field(default=1.0, validator=_clip_threshold)
    c_clip: float = attrs.field(default=1.0, validator=_clip_threshold)
    normalize_advantages: bool = False
    num_epochs: int = attrs.field(default=1, validator=_int_at_least(1))
    minibatch_size: int | None = attrs.field(default=_WHOLE_BATCH, validator=_optional_minibatch)
    #: learners in a data-parallel group (`rxrl.rl.learners.collective`): each takes its share
    #: of every minibatch's sequences and the gradients are summed over the group before each step
    num_learners: int = attrs.field(default=1, validator=v.ge(1))


@attrs.frozen(kw_only=True)
class IMPALAConfig(VTraceConfig):
    """IMPALA's V-trace actor-critic (Espeholt et al., 2018): the policy gradient
    `-E[logp * A_vtrace]` with the current policy as V-trace's target policy (see
    `VTraceConfig` for the shared settings)."""


@attrs.frozen(kw_only=True)
class APPOConfig(VTraceConfig):
    """APPO: PPO's clipped surrogate on V-trace advantages (RLlib's APPO).

    A *target network* (a copy of the policy, moved to `tau * online + (1 - tau) * target`
    every `target_update_interval` updates, i.e. batches trained on; 1: the policy as it was
    before the current batch, PPO's old policy) stands in for the old policy: V-trace's
    target policy is the target network, and the surrogate ratio
    `clip(pi_target / mu, 0, 2) * pi / mu` (mu: the behaviour policy) is clipped to
    `1 +- clip_coef`. `kl_coef > 0` adds a penalty `kl_coef * KL(pi_target || pi)`.
    """

    clip_coef: float = attrs.field(default=0.4, validator=v.gt(0.0))
    target_update_interval: int = attrs.field(default=1, validator=_int_at_least(1))
    tau: float = attrs.field(default=1.0, validator=_tau)
    kl_coef: float = attrs.field(default=0.0, validator=_nonneg)


_AUTO_ENTROPY: float | None = None
_SAC_REPLAY = ReplayConfig(capacity=1_000_000, batch_size=256, learning_starts=5_000)


@attrs.frozen(kw_only=True)
class SACConfig:
    """Soft actor-critic (Haarnoja et al. 2018), CleanRL's and SB3's defaults.

    Learner (`rxrl.rl.learners.sac.SACLearner`): twin Q-networks trained on
    `r + gamma^n (1 - terminated) (min_i Q'_i(s', a') - alpha log pi(a'|s'))`, a' drawn from
    the current policy, Q' the target networks, which follow the online ones by Polyak
    averaging with `tau` after every step; a squashed Gaussian policy (tanh of a Gaussian with
    a state-dependent log-std in [`log_std_min`, `log_std_max`], scaled to the action bounds)
    trained on `E[alpha log pi(a|s) - min_i Q_i(s, a)]`; with `autotune`, the temperature
    alpha is trained towards the entropy `target_entropy` (None: minus the action dimension),
    starting from `init_alpha`; without it alpha stays `init_alpha`. Adam with `lr` (critics),
    `actor_lr` and `alpha_lr`. Both networks are MLPs of `hidden_sizes` (ReLU).

    Workers (`SACRolloutWorker`) act uniformly at random for their share of
    `replay.learning_starts` env steps, then sample from the policy; `n_step` returns with
    `gamma`. A plan takes `updates_per_step` optimizer steps per env step sampled, exactly
    (the update-to-data ratio; the round-robin weight of its train flow).
    """

    lr: float = attrs.field(default=1e-3, validator=v.gt(0.0))
    actor_lr: float = attrs.field(default=3e-4, validator=v.gt(0.0))
    alpha_lr: float = attrs.field(default=1e-3, validator=v.gt(0.0))
    adam_eps: float = attrs.field(default=1e-8, validator=v.gt(0.0))
    gamma: float = attrs.field(default=0.99, validator=_unit_interval)
    n_step: int = attrs.field(default=1, validator=_int_at_least(1))
    tau: float = attrs.field(default=0.005, validator=_tau)
    autotune: bool = True
    init_alpha: float = attrs.field(default=1.0, validator=v.gt(0.0))
    target_entropy: float | None = attrs.field(default=_AUTO_ENTROPY)
    log_std_min: float = -5.0
    log_std_max: float = 2.0
    hidden_sizes: tuple[int, ...] = attrs.field(default=(256, 256), validator=_positive_ints)
    max_grad_norm: float | None = attrs.field(default=_NO_GRAD_CLIP, validator=_optional_positive)
    updates_per_step: float = attrs.field(default=1.0, validator=v.gt(0.0))
    replay: ReplayConfig = attrs.field(default=_SAC_REPLAY, validator=v.instance_of(ReplayConfig))

    def __attrs_post_init__(self) -> None:
        if not self.log_std_min < self.log_std_max:
            raise ValueError(f"SACConfig.log_std_min ({self.log_std_min}) must be below "
                             f"log_std_max ({self.log_std_max})")


def check_discount(gamma: float, lam: float) -> None:
    """Raise ValueError unless 0 <= gamma <= 1 and 0 <= lam <= 1."""
    for name, value in (("gamma", gamma), ("lam", lam)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value!r}")


__all__ = [
    "A2CConfig",
    "APPOConfig",
    "Activation",
    "BuiltTrunk",
    "DQNConfig",
    "IMPALAConfig",
    "PPOConfig",
    "PolicyConfig",
    "QNetConfig",
    "ReplayConfig",
    "MIN_SIDE",
    "SACConfig",
    "Trunk",
    "VTraceConfig",
    "check_discount",
    "resolve_trunk",
]
