"""What the algorithm plans share: rollout settings, actor factories, and the items they pass.

An algorithm module (``ppo.py``, ``a2c.py``, ``a3c.py``) is its config and its plan; the
pieces those plans name live here, small and named, so that ``rxrl show`` prints
``call(PPOLearner×1, train_and_get_weights)`` rather than ``<lambda>``.
"""

from __future__ import annotations

import math
import sys
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol, TypeVar, get_args

import attrs
import gymnasium as gym
import numpy as np

import rxrl
from rxrl.actors import ActorGroup, Placement, Tagged
from rxrl.envs.vector import EnvSpaces, registered_id
from rxrl.rl.config import PolicyConfig, QNetConfig, resolve_trunk
from rxrl.rl.data.batch import SampleBatch, standardize
from rxrl.rl.data.episode_metrics import declared_names, resolve_episode_metrics
from rxrl.rl.data.metrics import EpisodeStats, Metrics, MetricsAccumulator, TrainMetrics
from rxrl.rl.data.sequences import SequenceBatch
from rxrl.rl.models.forward import Weights
from rxrl.rl.models.initial import InitialWeights
from rxrl.rl.workers.reply import Trained, set_weights
from rxrl.rl.workers.rollout import RolloutWorker, RolloutWorkerFactory

if TYPE_CHECKING:  # torch: the learner's process imports these, not a driver
    import torch

    from rxrl.rl.learners.actor_critic import Learner
    from rxrl.rl.learners.collective import Rendezvous
    from rxrl.rl.objectives.losses import Gradients

L = TypeVar("L", bound="Learner")
A = TypeVar("A")
#: what a rollout worker's fragment is: flat transitions, or sequences (a recurrent policy's)
Fragments = TypeVar("Fragments", SampleBatch, SequenceBatch)


# ------------------------------------------------------------------------------- validation


def int_at_least(minimum: int) -> Callable[[Any, attrs.Attribute[int], int], None]:
    """An attrs validator: an int (not a bool) >= ``minimum``; the error names the field."""

    def check(inst: Any, attribute: attrs.Attribute[int], value: int) -> None:
        """Raise ValueError unless ``value`` is an int >= ``minimum``."""
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{type(inst).__name__}.{attribute.name} must be an integer "
                             f">= {minimum}, got {value!r}")

    return check


def float_in(low: float, high: float) -> Callable[[Any, attrs.Attribute[float], float], None]:
    """An attrs validator: a number in ``[low, high]``; the error names the field."""

    def check(inst: Any, attribute: attrs.Attribute[float], value: float) -> None:
        """Raise ValueError unless ``value`` is a number in ``[low, high]``."""
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
            raise ValueError(f"{type(inst).__name__}.{attribute.name} must be a number in "
                             f"[{low}, {high}], got {value!r}")

    return check


def optional(check: Callable[[Any, attrs.Attribute[Any], Any], None]
             ) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    """An attrs validator: None, or what ``check`` accepts."""

    def check_optional(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        """Accept None; else defer to ``check``."""
        if value is not None:
            check(inst, attribute, value)

    return check_optional


def instance_of(cls: type[Any]) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    """An attrs validator: ``isinstance(value, cls)``; the error names the field."""

    def check(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        """Raise ValueError unless ``value`` is a ``cls``."""
        if not isinstance(value, cls):
            raise ValueError(f"{type(inst).__name__}.{attribute.name} must be a {cls.__name__}, "
                             f"got {value!r}")

    return check


def _env_id(inst: Any, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{type(inst).__name__}.{attribute.name} must be a gymnasium env id, "
                         f"got {value!r}")


def _mapping(inst: Any, attribute: attrs.Attribute[Mapping[str, Any]], value: Any) -> None:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ValueError(f"{type(inst).__name__}.{attribute.name} must be a mapping with str "
                         f"keys, got {value!r}")


def _episode_metrics(inst: Any, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    if value is not None:  # imported here, on the driver, as env ids are checked
        resolve_episode_metrics(value, f"{type(inst).__name__}.{attribute.name}")


def episode_metric_names(settings: object) -> tuple[str, ...]:
    """The names ``settings.episode_metrics`` declares (its ``names`` attribute; ``()`` when
    unset or absent): a plan's `Progress` reports them from its first record
    (`rxrl.rl.data.episode_metrics`)."""
    return declared_names(getattr(settings, "episode_metrics", None))


#: ``RolloutSettings.learner_device``
LearnerDevice = Literal["cpu", "cuda", "auto"]


def one_of(choices: Any) -> Callable[[Any, attrs.Attribute[str], str], None]:
    """An attrs validator: the value is one of the ``Literal`` type ``choices``' values; the
    error names the field and lists them (``DQN.replay_placement must be one of [...]``)."""
    allowed = list(get_args(choices))

    def validate(inst: Any, attribute: attrs.Attribute[str], value: str) -> None:
        if value not in allowed:
            raise ValueError(f"{type(inst).__name__}.{attribute.name} must be one of {allowed}, "
                             f"got {value!r}")

    return validate


_device = one_of(LearnerDevice)


def is_positive(value: Any) -> bool:
    """Whether ``value`` is a finite number (not a bool) above 0."""
    return not isinstance(value, bool) and isinstance(value, int | float) and 0 < value < math.inf


def positive(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """An attrs validator: a finite number > 0; the error names the field."""
    if not is_positive(value):
        raise ValueError(f"{type(inst).__name__}.{attribute.name} must be a positive number, got {value!r}")


def _gpus(inst: Any, attribute: attrs.Attribute[float], value: float) -> None:
    """attrs validator of ``learner_gpus``: a fraction in (0, 1] or a whole number of GPUs (as
    Ray takes them)."""
    if not is_positive(value) or (value > 1 and value != int(value)):
        raise ValueError(f"{type(inst).__name__}.{attribute.name} must be a fraction in (0, 1] or a "
                         f"whole number of GPUs, got {value!r}")


#: ``RolloutSettings.learner_placement``
LearnerPlacement = Literal["actor", "driver"]
#: the same, for an algorithm that chooses (`RolloutSettings.auto_learner_placement`: DQN)
AutoLearnerPlacement = Literal["actor", "driver", "auto"]


_placement_of = {False: one_of(LearnerPlacement), True: one_of(AutoLearnerPlacement)}


def valid_placement(inst: Any, attribute: attrs.Attribute[str], value: str) -> None:
    """attrs validator of a `LearnerPlacement`, or an `AutoLearnerPlacement` where the
    settings class resolves ``"auto"`` (`RolloutSettings.auto_learner_placement`)."""
    _placement_of[type(inst).auto_learner_placement](inst, attribute, value)


def refuse_placed_on_driver(settings: Any, role: str, on_driver: bool) -> None:
    """A ValueError when ``role``'s actors are hosted on the driver (``on_driver``, from its
    ``<role>_placement``) and ``settings.placement.<role>`` also places them on nodes, which
    would be ignored: one line naming both settings."""
    where = getattr(settings.placement, role)
    if on_driver and where != "any":
        raise ValueError(f"{type(settings).__name__}.placement.{role} ({where!r}) places {role} actors, "
                         f"and the {role} is hosted on the driver: set {role}_placement=actor too")


def device_of(settings: RolloutSettings) -> str:
    """The device the learner trains on, decided on the driver (``"auto"`` resolved here, so
    that the learner's actor asks for a GPU exactly when it will use one)."""
    if settings.learner_device == "auto":
        import torch  # only here: a driver of a CPU learner does without torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return settings.learner_device


def _policy(inst: Any, attribute: attrs.Attribute[PolicyConfig], value: PolicyConfig) -> None:
    instance_of(PolicyConfig)(inst, attribute, value)
    if value.normalizes and not type(inst).supports_normalization:
        raise ValueError(f"{type(inst).__name__} does not support policy.normalize_obs or "
                         "policy.scale_rewards (running statistics need a learner that trains on "
                         "the workers' batches: ppo, a2c, impala, appo)")
    if value.is_recurrent and not type(inst).supports_recurrence:
        raise ValueError(f"{type(inst).__name__} does not support policy.recurrent={value.recurrent!r} "
                         "(recurrent policies train with: ppo, a2c, impala, appo)")


@attrs.frozen
class IterationSample:
    """What one training iteration samples at least: ``steps`` env steps, ``shape`` the
    product of settings that makes them (its factors multiply to ``steps``), and ``lower``
    the config paths that make it smaller (the settings this algorithm really uses)."""

    steps: int
    shape: str
    lower: tuple[str, ...]


def times(*factors: tuple[int, str]) -> str:
    """A product in words: ``times((2, "workers"), (8, "envs"))`` is ``"2 workers × 8 envs"``."""
    return " × ".join(f"{n:,} {what}" for n, what in factors)


def _placement(inst: Any, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str):
        raise ValueError(f"placement.{attribute.name} must be text such as 'spread' or 'zone=a', "
                         f"got {value!r}")
    try:
        each = per_actor(value)
        for text in each or [value]:
            where = Placement.parse(text)
            if each and (where.strategy != "any" or not where.labels):
                raise ValueError(f"a placement per actor takes node labels only, got {text!r}")
    except ValueError as e:
        raise ValueError(f"placement.{attribute.name}: {e}") from None


def per_actor(text: str) -> list[str] | None:
    """The node-label placements of ``"zone=a|zone=b"`` (actor ``i`` gets entry ``i`` modulo
    their number: the actors dealt out over the labels in turn); None for one placement."""
    return [part.strip() for part in text.split("|")] if "|" in text else None


@attrs.frozen(kw_only=True)
class PlacementSettings:
    """Where a distributed backend puts each role's actors (`rxrl.Placement` as text: ``"any"``,
    ``"pack"``, ``"spread"``, or node labels ``"zone=a"``, ``"zone=a,disk=ssd"``):
    ``workers`` (rollout workers; DD-PPO's members), ``learner`` (the learner or learner group,
    unless it is hosted on the driver) and ``replay`` (replay shards). ``rxrl train ... --set
    placement.workers=spread``. Node labels separated by ``|`` place the actors in turn:
    ``"zone=a|zone=b"`` puts actors 0, 2, 4, ... on ``zone=a`` nodes and 1, 3, 5, ... on
    ``zone=b`` nodes (``aggregate_by="placement"`` then gives each its aggregator)."""

    workers: str = attrs.field(default="any", validator=_placement)
    learner: str = attrs.field(default="any", validator=_placement)
    replay: str = attrs.field(default="any", validator=_placement)


def placed(group: ActorGroup[A], placement: str) -> ActorGroup[A]:
    """``group`` placed as ``placement`` (`PlacementSettings`' text) says; a group hosted on
    the driver stays there (``learner_placement="driver"``)."""
    if group.driver_hosted:
        return group
    each = per_actor(placement)
    return group.placed(placement if each is None else [each[i % len(each)] for i in range(group.size)])


#: how ``ops.aggregate`` splits the workers among the aggregators (``aggregate_by``)
AggregateBy = Literal["index", "placement"]


def check_aggregation(settings: RolloutSettings, num_aggregators: int, aggregate_by: str) -> None:
    """ValueError unless ``num_aggregators`` aggregators can split the workers ``aggregate_by``
    says: at most one per worker; by placement, one per distinct placement of
    ``placement.workers`` (``"zone=a|zone=b"``)."""
    name = type(settings).__name__
    if aggregate_by not in get_args(AggregateBy):
        raise ValueError(f"{name}.aggregate_by must be one of {list(get_args(AggregateBy))}, "
                         f"got {aggregate_by!r}")
    if num_aggregators > settings.num_workers:
        raise ValueError(f"{name}.num_aggregators ({num_aggregators}) must not exceed "
                         f"num_workers ({settings.num_workers}): an aggregator needs workers")
    if aggregate_by != "placement" or not num_aggregators:
        return
    distinct = _worker_placements(settings)
    if distinct is None:
        raise ValueError(f"{name}.aggregate_by='placement' needs a placement per worker: set "
                         "placement.workers to node labels separated by '|' (e.g. 'zone=a|zone=b')")
    if num_aggregators != len(distinct):
        raise ValueError(f"{name}.num_aggregators ({num_aggregators}) must be the number of the "
                         f"workers' placements ({len(distinct)}: {', '.join(distinct)}) with "
                         "aggregate_by='placement': one aggregator per placement")


def aggregate_parts(settings: RolloutSettings, num_aggregators: int, aggregate_by: str) -> dict[str, Any]:
    """``ops.aggregate``'s keyword for the parts: ``num_aggregators``, or by placement the
    workers' distinct placements (in the order of ``placement.workers``)."""
    distinct = _worker_placements(settings)
    if aggregate_by == "placement" and distinct is not None:
        return {"placements": distinct}
    return {"num_aggregators": num_aggregators}


def _worker_placements(settings: RolloutSettings) -> list[str] | None:
    """The distinct placements of ``placement.workers`` that some worker gets, in order; None
    for one placement for all."""
    each = per_actor(settings.placement.workers)
    if each is None:
        return None
    return list(dict.fromkeys(each[i % len(each)] for i in range(settings.num_workers)))


def hosted(learner: ActorGroup[A], settings: RolloutSettings, on_driver: bool | None = None) -> ActorGroup[A]:
    """A single ``learner`` where ``settings`` put it: the driver's process
    (``learner_placement="driver"``, or ``on_driver`` where the algorithm resolved its own
    ``"auto"``: `ActorGroup.on_driver`), or an actor process of its own that asks Ray for
    ``learner_gpus`` when it trains on CUDA (Ray gives an actor a GPU only if it asks for one).
    Every algorithm with one learner builds it through here, so that the setting is never
    silently ignored."""
    if settings.learner_placement == "driver" if on_driver is None else on_driver:
        return learner.on_driver(own_cores=settings.learner_cores)
    if settings.learner_cores:  # an "auto" the algorithm resolved to a process
        raise ValueError(f"{type(settings).__name__}.learner_cores ({settings.learner_cores}) is for a "
                         "learner on the driver, and this one has a process of its own: set "
                         "learner_placement=driver, or learner_cores=0")
    if device_of(settings) != "cpu":
        return learner.with_options(num_gpus=settings.learner_gpus)
    return learner


@attrs.frozen(kw_only=True)
class RolloutSettings:
    """Settings every algorithm here shares: the env, the rollout workers and the policy.

    ``num_workers`` rollout workers each step ``num_envs_per_worker`` copies of ``env`` and
    return fragments of ``fragment_length`` steps per copy, with GAE(``gamma``, ``lam``)
    advantages. Worker ``i`` is seeded with ``(seed, i)``; the learner's initial weights
    with ``seed``. ``learner_threads`` is the learner's torch thread count (process-wide);
    ``learner_device`` where it trains: ``"cpu"``, ``"cuda"`` (the learner's Ray actor then
    asks for ``learner_gpus`` GPUs) or ``"auto"`` (``"cuda"`` when the driver sees CUDA, else
    ``"cpu"``). ``learner_gpus`` (default 1): what each learner actor on CUDA asks Ray for; a
    fraction lets the members of a learner group share a chip (0.5: two learners on one GPU).
    ``learner_placement`` where the learner lives on a distributed backend: ``"actor"``, a
    process of its own (an asynchronous learner works while the driver routes samples), or
    ``"driver"``, the driver's own process (`ActorGroup.on_driver`: no process to start and
    no torch to import in one; its calls run on the driver, which suits a synchronous learner
    that the workers wait for anyway; building it then sets the driver's torch thread count
    to ``learner_threads``, and with CUDA the driver's GPU is the one it uses). PPO and A2C
    place it on the driver by default; DQN chooses (``"auto"``: the driver where its replay is
    on the driver, `rxrl.algos.qlearning.common.learner_on_driver`). A learner on the driver
    runs its calls on a thread of its own, so the driver routes the rest of the plan while it
    trains (docs/ray.md, "On the driver").

    ``learner_cores`` (default 0: none): on Linux, CPUs of its own for a learner on the
    driver. Its thread runs on the last ``learner_cores`` CPUs the driver may run on, and the
    rest of the run on that node (the driver's other threads, the rollout workers, replay
    shards) on the others, so that the learner is not preempted by them (DQN on MinAtar with
    2 cores: ~9 % less training time; docs/ray.md, "A learner's own cores"). Two runs on one
    machine would pin the same CPUs: start each under its own ``taskset -c``.

    ``episode_metrics``: ``"module:function"``, a function every rollout worker calls for
    each episode that ends (with that sub-env's final ``info``, the episode's return and
    length) that returns ``{name: number}``; the driver reports each name as a
    ``custom/<name>`` column, the mean over the last 100 episodes
    (`rxrl.rl.data.episode_metrics`). Imported when the settings are built: a name that does
    not import is a ValueError naming the setting.

    ``placement``: where each role's actors go on a multi-node cluster (`PlacementSettings`).
    """

    env: str = attrs.field(default="CartPole-v1", validator=_env_id)
    env_kwargs: Mapping[str, Any] = attrs.field(factory=dict, validator=_mapping, hash=False)
    seed: int = attrs.field(default=0, validator=int_at_least(0))
    num_workers: int = attrs.field(default=2, validator=int_at_least(1))
    num_envs_per_worker: int = attrs.field(default=8, validator=int_at_least(1))
    fragment_length: int = attrs.field(default=128, validator=int_at_least(1))
    gamma: float = attrs.field(default=0.99, validator=float_in(0.0, 1.0))
    lam: float = attrs.field(default=0.95, validator=float_in(0.0, 1.0))
    policy: PolicyConfig = attrs.field(factory=PolicyConfig, validator=_policy)
    learner_threads: int = attrs.field(default=1, validator=int_at_least(1))
    learner_device: LearnerDevice = attrs.field(default="cpu", validator=_device)
    learner_gpus: float = attrs.field(default=1.0, validator=_gpus)
    learner_placement: LearnerPlacement = attrs.field(default="actor", validator=valid_placement)
    learner_cores: int = attrs.field(default=0, validator=int_at_least(0))
    episode_metrics: str | None = attrs.field(default=None, validator=_episode_metrics)
    placement: PlacementSettings = attrs.field(factory=PlacementSettings,
                                               validator=attrs.validators.instance_of(PlacementSettings))

    #: whether the plan merges the workers' running statistics on its learner (so that
    #: ``policy.normalize_obs`` / ``policy.scale_rewards`` may be set)
    supports_normalization: ClassVar[bool] = False
    #: whether the plan trains a recurrent policy on sequences (so that ``policy.recurrent``
    #: may be set)
    supports_recurrence: ClassVar[bool] = False
    #: whether ``learner_placement="auto"`` is resolved by the algorithm (DQN: yes)
    auto_learner_placement: ClassVar[bool] = False

    def __attrs_post_init__(self) -> None:
        grouped = int(getattr(getattr(self, "learner", None), "num_learners", 1)) > 1
        refuse_placed_on_driver(self, "learner", self.learner_placement == "driver" and not grouped)
        if self.learner_cores and (grouped or self.learner_placement == "actor"):
            raise ValueError(f"{type(self).__name__}.learner_cores ({self.learner_cores}) is for a learner "
                             "on the driver: set learner_placement=driver (with learner.num_learners=1), "
                             "or learner_cores=0")
        length = self.policy.sequence_length
        if length is not None and self.fragment_length % length:
            raise ValueError(f"{type(self).__name__}.policy.sequence_length ({length}) must divide "
                             f"fragment_length ({self.fragment_length})")

    @property
    def round_size(self) -> int:
        """Transitions in one round: one fragment from every worker."""
        return self.num_workers * self.num_envs_per_worker * self.fragment_length

    def iteration_sample(self) -> IterationSample:
        """Env steps one training iteration samples at least (`IterationSample`): whole
        barrier rounds up to ``train_batch_size`` for the batched algorithms (PPO, A2C, the
        multi-agent ones), else one worker's fragment (A3C, DQN, Ape-X, SAC, which report per
        fragment or round stored); algorithms that sample otherwise override it."""
        fragment = ((self.num_envs_per_worker, "envs"), (self.fragment_length, "steps"))
        batch = getattr(self, "train_batch_size", None)
        if isinstance(batch, int):
            rounds = math.ceil(batch / self.round_size)
            factors: tuple[tuple[int, str], ...] = ((self.num_workers, "workers"), *fragment)
            if rounds > 1:
                factors = ((rounds, "rounds"), *factors)
            return IterationSample(
                rounds * self.round_size, times(*factors),
                ("num_workers", "num_envs_per_worker", "fragment_length",
                 *(("train_batch_size",) if rounds > 1 else ())))
        return IterationSample(self.num_envs_per_worker * self.fragment_length,
                               times(*fragment) + ", one worker's fragment",
                               ("num_envs_per_worker", "fragment_length"))


# ---------------------------------------------------------------------------- environments


def env_spaces(config: RolloutSettings, algorithm: str) -> EnvSpaces:
    """The env's spaces, checked against what the MLP actor-critic supports.

    Raises ValueError naming the env id (unknown) or the space (unsupported). An id of the
    form ``module:Env-v0`` imports ``module`` first, as ``gymnasium.make`` does.
    """
    try:
        name = registered_id(config.env)
    except ImportError as e:
        raise ValueError(f"cannot import the module of env {config.env!r}: {e}") from e
    try:
        gym.spec(name)
    except gym.error.Error as e:
        raise ValueError(f"unknown env id {config.env!r}: {e}") from e
    spaces = spaces_of(config.env, config.env_kwargs)
    action, obs = spaces.action, spaces.observation
    if not (isinstance(action, gym.spaces.Discrete)
            or (isinstance(action, gym.spaces.Box) and len(action.shape) == 1)):
        raise ValueError(f"{algorithm} does not support the action space {action} of {config.env}; "
                         "supported: Discrete and 1-D Box")
    if not isinstance(obs, gym.spaces.Box | gym.spaces.Discrete):
        raise ValueError(f"{algorithm} does not support the observation space {obs} of "
                         f"{config.env}; supported: Box and Discrete")
    check_trunks(config, obs)
    return spaces


def check_trunks(config: RolloutSettings, observation: gym.Space[Any]) -> None:
    """The config's trunk settings (``policy.trunk``, a Q-network's ``learner.q_net.trunk``)
    checked against the observation space: a one-line ValueError before any actor starts
    (`rxrl.rl.config.resolve_trunk`), not from inside a worker."""
    policy = getattr(config, "policy", None)
    if isinstance(policy, PolicyConfig):
        resolve_trunk(policy.trunk, observation, "policy.trunk")
    q_net = getattr(getattr(config, "learner", None), "q_net", None)
    if isinstance(q_net, QNetConfig):
        resolve_trunk(q_net.trunk, observation, "learner.q_net.trunk")


def spaces_of(env: str, env_kwargs: Mapping[str, Any] | None = None) -> EnvSpaces:
    """`EnvSpaces.of(env)`, with a missing optional dependency as one ValueError line that
    names what to install (MuJoCo envs: the ``mujoco`` extra)."""
    try:
        return EnvSpaces.of(env, env_kwargs)
    except gym.error.DependencyNotInstalled as e:
        entry = str(gym.spec(registered_id(env)).entry_point)
        if entry.startswith("gymnasium.envs.mujoco"):
            raise ValueError(f"{env} needs MuJoCo, which is not installed here: pip install -e "
                             "\".[mujoco]\" (the mujoco extra: mujoco<4 and imageio)") from None
        raise ValueError(f"{env} needs a package that is not installed: {e}") from None


# ------------------------------------------------------------------------ actors of a plan


@attrs.frozen
class Start:
    """Where a run starts from: a learner ``state_dict`` (a checkpoint) and a reseed count.

    Resumed workers are seeded with ``(seed, i, reseed)`` so that they do not replay the
    episodes of the original run; they start from the checkpoint's policy weights.
    """

    learner_state: Mapping[str, Any]
    reseed: int = 0

    def weights(self) -> Weights:
        """The checkpoint's policy weights, as workers' ``set_weights`` takes them (copies; the
        state may hold tensors or, made torch-free with `arrays_of`, numpy arrays)."""
        policy: Mapping[str, torch.Tensor | np.ndarray[Any, Any]] = self.learner_state["policy"]
        return {k: np.array(arrays_of(t), copy=True) for k, t in policy.items()}

    def version(self) -> int:
        """The version of the checkpoint's weights (a V-trace learner's updates; 0 for others)."""
        return int(self.learner_state.get("version", 0))

    def for_workers(self) -> Start:
        """This start with only what rollout workers read of its learner state
        (`WORKER_KEYS`, and the same of each policy's learner under ``"learners"``): what a
        worker factory holds. A factory travels with its actor group — into every actor it
        builds and, in an asynchronous plan, with every tagged item — while a checkpoint's
        optimizer and replay state can be megabytes."""
        return Start(_for_workers(self.learner_state), self.reseed)


def map_leaves(value: Any, leaf: Callable[[Any], Any]) -> Any:
    """``value`` with ``leaf`` applied to everything that is not a mapping, list or tuple,
    nested (a state dict's ``OrderedDict`` stays one, other mappings become dicts): the walk
    of `arrays_of` and of `rxrl.training.checkpoint.tensors_of`."""
    if isinstance(value, OrderedDict):  # a torch state dict's type
        return OrderedDict((k, map_leaves(v, leaf)) for k, v in value.items())
    if isinstance(value, Mapping):
        return {k: map_leaves(v, leaf) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(map_leaves(v, leaf) for v in value)
    return leaf(value)


def arrays_of(value: Any) -> Any:
    """``value`` with every torch tensor in it (in dicts, lists and tuples, nested) as a
    numpy array on the CPU; the rest as it is. Imports no torch: a process holding a tensor
    has it already. What a factory sends to a process that must not load torch."""
    torch = sys.modules.get("torch")
    if torch is None:
        return map_leaves(value, lambda x: x)
    return map_leaves(value, lambda x: x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x)


#: the entries of a learner state that rollout workers read: the policy weights, their
#: version, and the env steps sampled (a Q-learning worker's exploration clock)
WORKER_KEYS = ("policy", "version", "env_steps_sampled")


def _for_workers(state: Mapping[str, Any]) -> dict[str, Any]:
    slim = {k: state[k] for k in WORKER_KEYS if k in state}
    if "learners" in state:
        slim["learners"] = {pid: _for_workers(s) for pid, s in state["learners"].items()}
    return slim


def for_workers(start: Start | None) -> Start | None:
    """`Start.for_workers` of ``start``, if any (an attrs converter for worker factories)."""
    return None if start is None else start.for_workers()


def worker_seed(settings: RolloutSettings, start: Start | None) -> int:
    """The seed of a run's workers: ``settings.seed``, or for a resumed run (``start`` with a
    reseed count) one drawn from ``(seed, reseed)``, so that it does not replay the episodes
    of the run it continues."""
    if start is None or not start.reseed:
        return settings.seed
    return int(np.random.SeedSequence([settings.seed, start.reseed]).generate_state(1)[0] >> 1)


def torch_workers(settings: RolloutSettings, start: Start | None = None) -> RolloutWorkerFactory:
    """The factory of rollout workers with torch policies (A3C's, IMPALA's, APPO's): from
    ``settings.seed``'s initial weights, built in each worker, or from the checkpoint's
    weights (``start``; reseeded, see `worker_seed`)."""
    return _workers(settings, start, torch_free=False)


#: `torch_workers`'s name when it was a class of its own
WorkerFactory = torch_workers


@attrs.frozen
class LearnerFactory(Generic[L]):
    """``index -> learner``: builds ``cls(env, config, policy, seed, **kwargs)``, restores
    ``start``."""

    cls: Callable[..., L]
    settings: RolloutSettings
    config: Any
    start: Start | None = None
    kwargs: Mapping[str, Any] = attrs.field(factory=dict, hash=False)
    #: a learner group's meeting point: learner ``index`` is its rank ``index``
    rendezvous: Rendezvous | None = None

    def __call__(self, index: int) -> L:
        import torch  # where the learner is built

        s = self.settings
        torch.set_num_threads(s.learner_threads)
        device = device_of(s)
        # only when not the CPU: a learner class without a device setting still works there
        on: dict[str, Any] = {} if device == "cpu" else {"device": device}
        if self.rendezvous is not None:
            from rxrl.rl.learners.collective import Collective

            on["collective"] = Collective(self.rendezvous, index)
        learner = self.cls(registered_id(s.env), self.config, s.policy, seed=s.seed,
                           env_kwargs=s.env_kwargs, **on, **self.kwargs)
        if self.start is not None:
            learner.load_state_dict(self.start.learner_state)
        return learner


@attrs.frozen
class Groups(Generic[L]):
    """The actor groups of one training plan: rollout workers and one learner."""

    workers: ActorGroup[RolloutWorker]
    learner: ActorGroup[L]

    @property
    def pair(self) -> tuple[ActorGroup[RolloutWorker], ActorGroup[L]]:
        """``workers, learner = groups.pair``."""
        return self.workers, self.learner


def torch_free_workers(settings: RolloutSettings, start: Start | None = None) -> RolloutWorkerFactory:
    """The factory of rollout workers that act with numpy weights and never import torch:
    the checkpoint's weights (``start``), or the initial weights of ``settings.seed``, built
    once, when first needed (`InitialWeights`: what a torch worker would build from the seed
    itself, bit for bit; on a driver that starts a local Ray, while ``ray.init`` runs)."""
    return _workers(settings, start, torch_free=True)


def _workers(settings: RolloutSettings, start: Start | None, *, torch_free: bool) -> RolloutWorkerFactory:
    s = settings
    weights: Weights | InitialWeights | None = None
    spaces = spaces_of(registered_id(s.env), s.env_kwargs) if torch_free else None
    if spaces is not None and resolve_trunk(s.policy.trunk, spaces.observation) != "mlp":
        torch_free = False  # a CNN acts through torch (`rxrl.rl.models.policy.TorchForward`)
    if start is not None:
        weights = start.weights()
    elif torch_free and spaces is not None:
        weights = InitialWeights(spaces.observation, spaces.action, s.policy, s.seed)
    return RolloutWorkerFactory(s.env, s.num_envs_per_worker, s.fragment_length, worker_seed(s, start),
                                s.gamma, s.lam, s.policy, weights, s.env_kwargs,
                                start.version() if start is not None else 0, torch_policy=not torch_free,
                                episode_metrics=s.episode_metrics)


def make_groups(settings: RolloutSettings, cls: Callable[..., L], learner_config: Any,
                start: Start | None = None, *, torch_free: bool = False, **learner_kwargs: Any) -> Groups[L]:
    """Rollout workers and a learner for ``settings``, both starting from ``start`` if given
    (``learner_kwargs``: more keyword arguments of the learner's constructor). With
    ``torch_free``, the workers act with numpy weights (`torch_free_workers`; they cannot
    compute gradients)."""
    name = str(getattr(cls, "__name__", "Learner"))
    factory = torch_free_workers(settings, start) if torch_free else torch_workers(settings, start)
    workers = placed(rxrl.indexed_actors(factory, settings.num_workers, name="RolloutWorker"),
                     settings.placement.workers)
    n = int(getattr(learner_config, "num_learners", 1))
    if n > 1:  # a learner group: n actors (wherever the single learner would be), one allreduce
        from rxrl.rl.learners.collective import Rendezvous  # torch: on the driver, for groups only

        if settings.policy.is_recurrent:
            raise ValueError("learner.num_learners > 1 takes flat batches: a recurrent policy "
                             f"(policy.recurrent={settings.policy.recurrent!r}) trains with one learner")
        learners = rxrl.indexed_actors(LearnerFactory(cls, settings, learner_config, start, learner_kwargs,
                                                      Rendezvous.open(n)), n, name=f"{name}-allreduce")
        if device_of(settings) != "cpu":
            learners = learners.with_options(num_gpus=settings.learner_gpus)
        return Groups(workers, placed(learners, settings.placement.learner))
    learner = hosted(rxrl.indexed_actors(LearnerFactory(cls, settings, learner_config, start, learner_kwargs),
                                         1, name=name), settings)
    return Groups(workers, placed(learner, settings.placement.learner))


# ------------------------------------------------------------------ items and plan functions


def episodes_of(batch: SampleBatch) -> EpisodeStats:
    """``batch``'s episode statistics and env steps without its (large) rows."""
    return EpisodeStats(batch.episode_returns, batch.episode_lengths, batch.env_steps, batch.episode_metrics)


class TrainsOnBatches(Protocol):
    """A learner that trains on whole batches (``PPOLearner``, ``A2CLearner``)."""

    def train(self, batch: SampleBatch) -> TrainMetrics:
        """Update on ``batch``."""
        ...

    def get_weights(self) -> Weights:
        """The current policy weights."""
        ...


def train_and_get_weights(learner: TrainsOnBatches, batch: SampleBatch) -> Trained:
    """Train on ``batch``; return the report and the new weights in one reply."""
    return Trained(learner.train(batch), learner.get_weights())


_standardize_advantages = standardize("advantages")


def train_on_fragments(learner: TrainsOnBatches, fragments: list[SampleBatch]) -> Trained:
    """Concatenate ``fragments``, standardize advantages over the batch, and train on it.

    Runs on the learner, so that fragments go from the rollout workers to the learner as
    object refs, fetched once where the learner is (on Ray; a learner in an actor's process
    is sent them without the driver reading them); returns the report, the new weights and
    the batch's episodes in one reply.
    """
    batch = _standardize_advantages(SampleBatch.concat(fragments))
    return Trained(learner.train(batch), learner.get_weights(), episodes_of(batch))


class TrainsOnSequences(Protocol):
    """A learner that trains on sequence batches (``PPOLearner``, ``A2CLearner`` of a
    recurrent policy)."""

    def train_sequences(self, batch: SequenceBatch) -> TrainMetrics:
        """Update on ``batch``."""
        ...

    def get_weights(self) -> Weights:
        """The current policy weights."""
        ...


def train_on_sequences(learner: TrainsOnSequences, fragments: list[SequenceBatch]) -> Trained:
    """`train_on_fragments` for a recurrent policy: concatenate the workers' sequence batches,
    standardize advantages over all of them, and train on the sequences (on the learner)."""
    batch = SequenceBatch.concat(fragments)
    batch = batch.with_batch(_standardize_advantages(batch.batch))
    return Trained(learner.train_sequences(batch), learner.get_weights(), episodes_of(batch.batch))


def join_rounds(rounds: list[list[Fragments]]) -> list[Fragments]:
    """The fragments of several barrier rounds, in order (a train batch of many rounds)."""
    return [fragment for fragments in rounds for fragment in fragments]


def rows(fragments: list[Fragments]) -> int:
    """Transitions in a round (or a joined list of rounds)."""
    return sum(len(fragment) for fragment in fragments)


def set_learning_rate(learner: Learner, lr: float) -> None:
    """Set the learning rate of the learner's optimizer (a schedule's step)."""
    for group in learner.optimizer.param_groups:
        group["lr"] = lr


@attrs.frozen(eq=False)
class WorkerGradients:
    """What an A3C worker sends: its gradients and its fragment's episodes, without rows."""

    gradients: Gradients
    episodes: EpisodeStats

    @staticmethod
    def of(gradients: Gradients, batch: SampleBatch) -> WorkerGradients:
        """Keep ``batch``'s episode statistics and env steps, drop its (large) rows."""
        return WorkerGradients(gradients, episodes_of(batch))


class Progress(MetricsAccumulator):
    """The driver-side ``MetricsAccumulator`` of a plan, with adapters for its item types.

    One per plan built: running the same plan object twice continues its counts.
    """

    def observe_trained(self, trained: Trained) -> Metrics:
        """Close an iteration with a learner report (and the episodes it carries, if any)."""
        if trained.episodes is not None:
            self.observe_episodes(trained.episodes)
        return self.observe_train(trained.metrics)

    def observe_gradients(self, item: Tagged[WorkerGradients]) -> Tagged[WorkerGradients]:
        """Record the episodes and env steps behind an A3C worker's gradients."""
        self.observe_episodes(item.value.episodes)
        return item


__all__ = [
    "Groups", "IterationSample", "LearnerDevice", "LearnerFactory", "LearnerPlacement", "Progress",
    "RolloutSettings",
    "Start", "Trained", "TrainsOnBatches", "WorkerFactory", "WorkerGradients", "arrays_of", "env_spaces",
    "episodes_of", "map_leaves",
    "episode_metric_names",
    "WORKER_KEYS", "device_of", "float_in", "for_workers", "instance_of", "int_at_least", "join_rounds",
    "AggregateBy", "aggregate_parts", "check_aggregation", "hosted", "make_groups", "per_actor",
    "is_positive", "one_of", "optional", "positive", "refuse_placed_on_driver",
    "valid_placement", "registered_id", "rows", "spaces_of",
    "worker_seed",
    "set_learning_rate", "set_weights", "torch_free_workers", "torch_workers", "train_and_get_weights",
    "times", "train_on_fragments", "TrainsOnSequences", "train_on_sequences",
]
