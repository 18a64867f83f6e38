"""What the Q-learning plans (DQN, Ape-X) share: settings, env checks, actors, checkpoints, eval.

``dqn.py`` and ``apex.py`` are their configs and plans; the steps those plans name are in
``qsteps.py``. Rollout workers are `QRolloutWorker`s, the replay is one or more
`ReplayShard` actors (``NOT_READY`` below ``learning_starts``: the plans have no special
case for it), the learner a `DQNLearner`. ``rxrl train`` checkpoints all three: the
learner's state, every shard's buffer (so that ``--resume`` continues with the replay it
had) and the env steps sampled (the epsilon schedule's clock).

This module imports no torch: the processes of the rollout workers (an MLP Q-network acts
in numpy) and of the replay shards load it to build their actors, and neither needs torch
(~180 MB each; docs/benchmarks.md, "Memory (issue 23)"). What needs torch imports it where
it runs: the learner, the driver's checks, eval and export.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol, TypeAlias, TypeVar

import attrs
import gymnasium as gym
import numpy as np
import numpy.typing as npt

import rxrl
from rxrl import ops
from rxrl.actors import ActorGroup
from rxrl.algos.common import (
    RolloutSettings,
    Start,
    arrays_of,
    hosted,
    instance_of,
    int_at_least,
    one_of,
    placed,
    refuse_placed_on_driver,
    registered_id,
    spaces_of,
    worker_seed,
)
from rxrl.plan import Op
from rxrl.rl import (
    DQNConfig,
    EnvSpaces,
    LinearSchedule,
    QRolloutWorker,
    ReplayConfig,
    ReplayShard,
)
from rxrl.rl.config import resolve_trunk
from rxrl.rl.data.transitions import IntArray
from rxrl.rl.models.forward import Weights
from rxrl.rl.models.initial import InitialWeights, LazyClass, weights_of
from rxrl.rl.workers.qworker import TransitionWorker

if TYPE_CHECKING:  # rxrl.training.checkpoint imports the algorithms: the type only, to avoid a cycle
    from rxrl.algos.spec import Snapshot
    from rxrl.ready import NotReady
    from rxrl.rl.data.transitions import TransitionBatch
    from rxrl.rl.learners.collective import Rendezvous
    from rxrl.rl.learners.dqn import DQNLearner  # torch: the types only, here
    from rxrl.rl.models.greedy import GreedyPolicy
    from rxrl.rl.models.qnet import QNetwork

#: the `RolloutSettings` fields the Q-learning plans do not read, and where the setting lives
A = TypeVar("A")
W = TypeVar("W")
L = TypeVar("L")

_NOT_HERE = {"gamma": "learner.gamma", "lam": "nothing (no GAE in Q-learning)",
             "policy": "learner.q_net"}


#: what a Q-learning checkpoint's learner and replay state depend on (`Algorithm.state_settings`):
#: the Q-net, and the replay's layout (its transitions are folded with ``n_step`` returns)
Q_STATE = ("policy.", "learner.q_net.", "learner.n_step", "learner.replay.capacity",
           "learner.replay.prioritized")


class _HasReplay(Protocol):
    @property
    def replay(self) -> ReplayConfig: ...


class ReplaySettings(Protocol):
    """What the replay pieces read of a config (`QSettings`, `rxrl.algos.qlearning.sac.SAC`)."""

    @property
    def env(self) -> str: ...

    @property
    def env_kwargs(self) -> Mapping[str, Any]: ...

    @property
    def seed(self) -> int: ...

    @property
    def learner_threads(self) -> int: ...

    @property
    def learner(self) -> _HasReplay: ...


def refuse_unused(config: RolloutSettings, not_here: Mapping[str, str], family: str,
                  learner: str) -> None:
    """Refuse a `RolloutSettings` field that a replay algorithm does not use (``not_here``: the
    field -> the setting to use instead), and a learner device other than the CPU."""
    name, defaults = type(config).__name__, RolloutSettings()
    for field, instead in not_here.items():
        if getattr(config, field) != getattr(defaults, field):
            raise ValueError(f"{name}.{field} does not apply to {family}: set {instead}")
    if config.learner_device != "cpu":
        raise ValueError(f"{name}.learner_device must be 'cpu': {learner} trains on the CPU")


#: where a Q-learning plan's replay shards live (`QSettings.replay_placement`)
ReplayPlacement = Literal["auto", "actor", "driver"]


@attrs.frozen(kw_only=True)
class QSettings(RolloutSettings):
    """Settings of the Q-learning plans (the env, seed and worker counts are `RolloutSettings`').

    Each of the ``num_workers`` `QRolloutWorker`s steps ``num_envs_per_worker`` envs
    ``fragment_length`` times per sample, folding ``learner.n_step``-step returns with
    ``learner.gamma``. The learner (`DQNLearner`, settings ``learner``, its replay
    ``learner.replay`` and network ``learner.q_net``) takes ``updates_per_call`` optimizer
    steps per call, each on a batch of its own; the plans replay
    ``learner.training_intensity`` transitions per env step sampled as a round-robin weight,
    counting a round as vector-env steps times envs (an autoreset step, which only resets a
    finished sub-env and yields no transition, counts): exact in those units on the reference
    backend; by the env steps stored, on every backend, with ``exact_intensity`` (below).

    ``gamma``, ``lam`` and ``policy`` of `RolloutSettings` do not apply here: setting one is
    an error that names the setting to use. The learner trains on the CPU.
    """

    num_envs_per_worker: int = attrs.field(default=1, validator=int_at_least(1))
    fragment_length: int = attrs.field(default=16, validator=int_at_least(1))
    updates_per_call: int = attrs.field(default=8, validator=int_at_least(1))
    #: learner calls under way at once (the plans' learner call is pipelined this deep)
    learner_queue: int = attrs.field(default=2, validator=int_at_least(1))
    learner: DQNConfig = attrs.field(factory=DQNConfig, validator=instance_of(DQNConfig))
    #: where the replay shards live on a distributed backend: ``"actor"``, a process each;
    #: ``"driver"``, the driver's own process (`ActorGroup.on_driver`: one process fewer;
    #: storing and sampling then run on the driver, between its other requests); ``"auto"``:
    #: the driver where `auto_replay_on_driver` says so (DQN) for observations of at most
    #: `SMALL_OBSERVATION_BYTES` (CartPole, MinAtar), else actors (Atari's frames would all
    #: pass through the driver)
    replay_placement: ReplayPlacement = attrs.field(default="auto", validator=one_of(ReplayPlacement))
    #: whether the replay holds the learner to ``learner.training_intensity`` exactly: it hands
    #: out at most that many transitions per env step stored past ``learning_starts``
    #: (`rxrl.rl.replay.shard.ReplayShard.within`), so the learner waits for samples rather than
    #: training ahead of them. Off (the default), the plans' round robin sets the intensity in
    #: env steps (a native NEXT_STEP env's reset-only steps included: a few per cent more per
    #: transition while episodes are short; MinAtar DQN on Ray, 1M env steps, SAME_STEP: the
    #: peer's count to within a call), and on the concurrent backends the learner may take a
    #: further turn while a round is still being sampled at its turn; it also trains from the
    #: round the replay is ready, with no offset. On, the
    #: optimizer steps are the peers' (CleanRL's and SB3's ``train_freq`` after
    #: ``learning_starts``) to within a call, a pipelined learner at most ``learner_queue``
    #: calls ahead of the samples: the call the train flow's turn waits on and the next, under
    #: way while the workers sample (docs/design-notes.md, "The training intensity, exactly")
    exact_intensity: bool = False
    #: whether ``replay_placement="auto"`` may host the replay on the driver (DQN: yes;
    #: Ape-X, whose shards sample concurrently with the driver's routing: no)
    auto_replay_on_driver: ClassVar[bool] = False

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        refuse_unused(self, _NOT_HERE, "Q-learning", "DQNLearner")
        refuse_placed_on_driver(self, "replay", self.replay_placement == "driver")

    @property
    def sample_size(self) -> int:
        """Env steps in one worker sample: ``num_envs_per_worker * fragment_length``."""
        return self.num_envs_per_worker * self.fragment_length

    def replay_requests(self) -> Callable[[ReplayShard], list[TransitionBatch] | NotReady]:
        """What the train flow asks the replay for: ``updates_per_call`` batches, held to the
        training intensity with `exact_intensity` (``learner_queue`` calls ahead at most: the
        one the train flow's turn waits on and the next, under way while the workers sample)."""
        from rxrl.algos.qlearning.steps import sample_batches

        if not self.exact_intensity:
            return sample_batches(self.updates_per_call)
        return sample_batches(self.updates_per_call, self.learner.training_intensity,
                              self.learner_queue)

    def calls_per(self, env_steps: int) -> float:
        """Learner calls that keep the training intensity over ``env_steps`` sampled:
        ``training_intensity * env_steps / (batch_size * updates_per_call)``."""
        replayed = self.learner.training_intensity * env_steps
        return replayed / (self.learner.replay.batch_size * self.updates_per_call)


# ---------------------------------------------------------------------------- environments


def env_spaces_of(config: QSettings, algorithm: str) -> EnvSpaces:
    """The env's spaces; ValueError (one line) unless the actions are Discrete and the
    observations Box or Discrete, or the env id is unknown."""
    try:
        name = registered_id(config.env)
        gym.spec(name)
    except ImportError as e:
        raise ValueError(f"cannot import the module of env {config.env!r}: {e}") from e
    except gym.error.Error as e:
        raise ValueError(f"unknown env id {config.env!r}: {e}") from e
    spaces = spaces_of(config.env, config.env_kwargs)
    if not isinstance(spaces.action, gym.spaces.Discrete):
        raise ValueError(f"{algorithm} does not support the action space {spaces.action} of "
                         f"{config.env}: it needs a Discrete one (a Q-value per action)")
    if not isinstance(spaces.observation, gym.spaces.Box | gym.spaces.Discrete):
        raise ValueError(f"{algorithm} does not support the observation space {spaces.observation} "
                         f"of {config.env}; supported: Box and Discrete")
    return spaces


def check(algorithm: str) -> Callable[[QSettings, Mapping[str, Any] | None], None]:
    """``rxrl train``'s check of the env and of a checkpoint's state against ``config``."""

    def check_env_and_checkpoint(config: QSettings, state: Mapping[str, Any] | None) -> None:
        """The env's spaces; that the checkpoint's Q-net and replay shards fit the config."""
        spaces = env_spaces_of(config, algorithm)
        if state is None:
            return
        from rxrl.rl.models.qnet import make_q_network  # torch: a resume's check only

        own = make_q_network(spaces.observation, spaces.action, config.learner.q_net).state_dict()
        saved = state["policy"]
        if {k: tuple(v.shape) for k, v in own.items()} != {
                k: tuple(getattr(v, "shape", ())) for k, v in saved.items()}:
            raise ValueError(f"its Q-network does not fit the config (learner.q_net "
                             f"{attrs.asdict(config.learner.q_net)}): resume with the q_net settings "
                             "it was trained with")
        check_replay(config, state)

    return check_env_and_checkpoint


def check_replay(config: ReplaySettings, state: Mapping[str, Any]) -> None:
    """That a checkpoint's replay shards fit ``config`` (their number, capacity and kind)."""
    shards = state.get("replay", [])
    if len(shards) != num_shards(config):
        raise ValueError(f"it holds {len(shards)} replay shard(s), the config {num_shards(config)}")
    replay = config.learner.replay
    for shard in shards:
        buffer = shard["buffer"]
        if int(buffer["capacity"]) != replay.capacity or ("priorities" in buffer) != replay.prioritized:
            raise ValueError(f"its replay (capacity {buffer['capacity']}, prioritized "
                             f"{'priorities' in buffer}) does not fit learner.replay (capacity "
                             f"{replay.capacity}, prioritized {replay.prioritized})")


def num_shards(config: ReplaySettings) -> int:
    """Replay shards of ``config``'s plan (``num_shards``, or one)."""
    return int(getattr(config, "num_shards", 1))


# ------------------------------------------------------------------------ actors of a plan


def arrays_for_workers(start: Start | None) -> Start | None:
    """`Start.for_workers` of ``start``, with its tensors as numpy arrays (an attrs converter):
    unpickling a tensor in a worker's process would import torch there."""
    if start is None:
        return None
    slim = start.for_workers()
    return Start(arrays_of(slim.learner_state), slim.reseed)


def mlp_q_network(settings: QSettings) -> bool:
    """Whether ``settings``' Q-network has an MLP trunk (vector observations), not a CNN."""
    observation = spaces_of(registered_id(settings.env), settings.env_kwargs).observation
    return resolve_trunk(settings.learner.q_net.trunk, observation, "learner.q_net.trunk") == "mlp"


def _initial_weights(factory: QWorkerFactory) -> InitialWeights | None:
    if not factory.torch_free or factory.start is not None:
        return None
    s = factory.settings
    spaces = spaces_of(registered_id(s.env), s.env_kwargs)
    return InitialWeights(spaces.observation, spaces.action, s.learner.q_net, s.seed)


@attrs.frozen
class QWorkerFactory:
    """``index -> QRolloutWorker`` with ``epsilon(index)``; picklable, so a Ray actor builds it.

    Workers of an MLP Q-network (``torch_free``) act in numpy and never import torch: they
    get the initial weights of ``settings.seed`` (`InitialWeights`: what a `DQNLearner` and a
    torch worker build from the seed, bit for bit; built once, when first needed). Workers of
    a CNN build a torch Q-network from the seed.

    From a checkpoint (``start``, its tensors as arrays): reseeded as `torch_workers` does,
    the checkpoint's Q-net weights, and its env step count (the epsilon schedule continues
    where it was).
    """

    settings: QSettings
    epsilon: Callable[[int], float | LinearSchedule]
    start: Start | None = attrs.field(default=None, converter=arrays_for_workers)
    #: whether the workers never import torch (`rxrl.training.setup.ray_init_options` then
    #: leaves torch out of the Ray worker processes' preloaded modules): an MLP Q-network's
    torch_free: bool = attrs.field(
        init=False, default=attrs.Factory(lambda f: mlp_q_network(f.settings), takes_self=True))
    #: a new run's torch-free workers' initial weights (None: from the checkpoint, or torch's)
    initial: InitialWeights | None = attrs.field(
        init=False, eq=False, repr=False, default=attrs.Factory(_initial_weights, takes_self=True))

    def __call__(self, index: int) -> QRolloutWorker:
        s, start = self.settings, self.start
        weights: Weights | None = None
        if self.initial is not None:
            weights = weights_of(self.initial)
        elif self.torch_free and start is not None:
            weights = start.weights()
        worker = QRolloutWorker(registered_id(s.env), s.num_envs_per_worker, s.fragment_length,
                                seed=worker_seed(s, start), worker_index=index, epsilon=self.epsilon(index),
                                n_step=s.learner.n_step, gamma=s.learner.gamma, q_net=s.learner.q_net,
                                env_kwargs=s.env_kwargs, episode_metrics=s.episode_metrics, weights=weights)
        return resumed(worker, start, s.num_workers)


TW = TypeVar("TW", bound=TransitionWorker)
RL = TypeVar("RL", bound="Restorable")


class Restorable(Protocol):
    """A learner a checkpoint restores."""

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a ``state_dict()``."""
        ...


def resumed(worker: TW, start: Start | None, num_workers: int) -> TW:
    """A new transition worker, brought to ``start``'s checkpoint if given: its weights, and
    its share of the env steps sampled (the exploration clock: epsilon, SAC's random steps)."""
    if start is not None:
        worker.set_weights(start.weights())
        worker.env_steps = int(start.learner_state.get("env_steps_sampled", 0)) // num_workers
    return worker


@attrs.frozen
class ReplayLearnerFactory(Generic[RL]):
    """``index -> cls(env, settings.learner, seed=..., env_kwargs=...)`` (a `DQNLearner` or a
    `SACLearner`: initial weights from the seed, as the workers'), restoring ``start``."""

    cls: Callable[..., RL]
    settings: ReplaySettings
    start: Start | None = None
    #: a learner group's meeting point: learner ``index`` is its rank ``index``
    rendezvous: Rendezvous | None = None

    def __call__(self, index: int) -> RL:
        import torch  # where the learner is built

        s = self.settings
        torch.set_num_threads(s.learner_threads)
        group: dict[str, Any] = {}
        if self.rendezvous is not None:
            from rxrl.rl.learners.collective import Collective

            group["collective"] = Collective(self.rendezvous, index)
        learner = self.cls(registered_id(s.env), s.learner, seed=s.seed, env_kwargs=s.env_kwargs, **group)
        if self.start is not None:
            learner.load_state_dict(self.start.learner_state)
        return learner


def replay_start(start: Start | None) -> Start | None:
    """What a replay shard reads of ``start``: the replay states, their tensors as numpy
    arrays (an attrs converter: unpickling a tensor in a shard's process would import torch)."""
    if start is None:
        return None
    replay = start.learner_state.get("replay")
    return Start({} if replay is None else {"replay": arrays_of(replay)}, start.reseed)


@attrs.frozen
class ShardFactory:
    """``index -> ReplayShard`` seeded with ``(seed, index)``, restoring ``start``'s buffer.
    A shard never imports torch (``torch_free``, as `QWorkerFactory`'s)."""

    settings: ReplaySettings
    start: Start | None = attrs.field(default=None, converter=replay_start)
    torch_free: bool = attrs.field(default=True, init=False)

    def __call__(self, index: int) -> ReplayShard:
        shard = ReplayShard(self.settings.learner.replay, seed=self.settings.seed, shard_index=index)
        if self.start is not None and "replay" in self.start.learner_state:
            shard.load_state_dict(self.start.learner_state["replay"][index])
        return shard


@attrs.frozen
class QGroups(Generic[W, L]):
    """The actors of a Q-learning plan: rollout workers, the learner, the replay shards, and
    how many learner calls the plan pipelines (``learner_queue``: a checkpoint step reads
    that far ahead, so that its call to the learner does not wait behind them)."""

    workers: ActorGroup[W]
    learner: ActorGroup[L]
    replay: ActorGroup[ReplayShard]
    start: Start | None = None
    learner_queue: int = 1


@attrs.frozen
class Pickled(Generic[A]):
    """A factory kept as its pickle, unpickled when called.

    A `Tagged` item carries its actor group, and a group pickles with its factory; the Ape-X
    plan sends ~10 tagged items across processes per sample, so a factory holding a config
    (~1.2 KB, ~35 us to pickle and unpickle) would cost the driver a few per cent. As bytes
    it costs a copy (see the final report of issue 11: a group could pickle by key alone).
    """

    blob: bytes
    #: the factory's ``torch_free`` (`rxrl.training.setup.ray_init_options` reads it)
    torch_free: bool = False

    @staticmethod
    def of(factory: Callable[[int], A]) -> Pickled[A]:
        """``factory``, pickled once."""
        return Pickled(pickle.dumps(factory), bool(getattr(factory, "torch_free", False)))

    def __call__(self, index: int) -> A:
        factory: Callable[[int], A] = pickle.loads(self.blob)
        return factory(index)


#: the actors of the DQN and Ape-X plans
DQNGroups: TypeAlias = "QGroups[QRolloutWorker, DQNLearner]"
#: the learner's class, imported where the learner is built (torch)
DQN_LEARNER: LazyClass[DQNLearner] = LazyClass("rxrl.rl.learners.dqn", "DQNLearner")


class Stateful(Protocol):
    """A learner whose state a checkpoint holds."""

    def state_dict(self) -> dict[str, Any]:
        """A copy of everything needed to resume."""
        ...


#: ``replay_placement="auto"`` hosts the replay on the driver for observations up to this many
#: bytes: every transition then passes through the driver's process. CartPole's are 16 bytes,
#: MinAtar's 400–1,000, a stack of four 84×84 Atari frames 28,224 (those stay in processes, going
#: worker → replay → learner by reference)
SMALL_OBSERVATION_BYTES = 4096


def observation_bytes(settings: QSettings) -> int | None:
    """The size of one observation of ``settings``' env in bytes (None: not an array space)."""
    observation = spaces_of(registered_id(settings.env), settings.env_kwargs).observation
    shape, dtype = getattr(observation, "shape", None), getattr(observation, "dtype", None)
    if shape is None or dtype is None:
        return None
    return int(np.prod(shape, dtype=np.int64)) * int(np.dtype(dtype).itemsize)


def replay_on_driver(config: QSettings) -> bool:
    """Whether ``config``'s replay shards are hosted on the driver: ``replay_placement``, with
    ``"auto"`` resolved: the driver for a settings class with `auto_replay_on_driver` (DQN, not
    Ape-X, whose shards sample while the driver routes), observations of at most
    `SMALL_OBSERVATION_BYTES` and no ``placement.replay``; measured in docs/benchmarks.md,
    "Memory", and docs/algorithms.md (MinAtar)."""
    if config.replay_placement != "auto":
        return config.replay_placement == "driver"
    if not type(config).auto_replay_on_driver or config.placement.replay != "any":
        return False
    size = observation_bytes(config)
    return size is not None and size <= SMALL_OBSERVATION_BYTES


def learner_on_driver(config: QSettings) -> bool:
    """Whether ``config``'s single learner is hosted on the driver: ``learner_placement``, with
    ``"auto"`` resolved: the driver where the replay is (`replay_on_driver`: DQN's MLP
    Q-networks), whose batches it then trains on without a copy, and with nothing in another
    process to import torch for (docs/benchmarks.md, "Memory")."""
    placement: str = config.learner_placement  # "auto" where the settings class resolves it (DQN)
    if placement != "auto":
        return placement == "driver"
    return config.placement.learner == "any" and replay_on_driver(config)


def make_q_groups(config: QSettings, epsilon: Callable[[int], float | LinearSchedule],
                  start: Start | None, shards: int = 1) -> DQNGroups:
    """``num_workers`` workers (``epsilon(i)`` each), a `DQNLearner` and ``shards`` replay shards."""
    workers = rxrl.indexed_actors(Pickled.of(QWorkerFactory(config, epsilon, start)), config.num_workers,
                                  name="QRolloutWorker")
    n = config.learner.num_learners
    if n > 1:  # a learner group: every member gets every batch and trains its share of the rows
        from rxrl.rl.learners.collective import Rendezvous  # torch: on the driver, for groups only

        learner = rxrl.indexed_actors(Pickled.of(ReplayLearnerFactory(DQN_LEARNER, config, start,
                                                                      Rendezvous.open(n))),
                                      n, name="DQNLearner-allreduce")
    else:
        learner = hosted(rxrl.indexed_actors(Pickled.of(ReplayLearnerFactory(DQN_LEARNER, config, start)), 1,
                                             name="DQNLearner"), config, learner_on_driver(config))
    replay = rxrl.indexed_actors(Pickled.of(ShardFactory(config, start)), shards, name="ReplayShard")
    if replay_on_driver(config):
        replay = replay.on_driver()
    where = config.placement
    return QGroups(placed(workers, where.workers), placed(learner, where.learner),
                   placed(replay, where.replay), start, config.learner_queue)

# ------------------------------------------------------------------ rxrl train's checkpoints


@attrs.frozen(eq=False)
class PackedState:
    """A learner's state on its way to the driver past the replay shards, as its pickle: a
    shard adds its buffer to the record without unpickling the learner's tensors (which would
    load torch in the shard's process); the driver unpacks it (`EnvSteps`)."""

    blob: bytes

    @staticmethod
    def of(state: Mapping[str, Any]) -> PackedState:
        """``state``, pickled."""
        return PackedState(pickle.dumps(dict(state), protocol=pickle.HIGHEST_PROTOCOL))

    def unpack(self) -> dict[str, Any]:
        """The state (loads torch, if it holds tensors)."""
        state: dict[str, Any] = pickle.loads(self.blob)
        return state


#: the key of the learner's `PackedState` in a record's state until the driver unpacks it
PACKED = "packed_learner"


def learner_state_if_due(learner: Stateful, snapshot: Snapshot) -> Snapshot:
    """On the learner: its state (packed), with an empty list of replay shards, on a due record."""
    if not snapshot.due:
        return snapshot
    return attrs.evolve(snapshot, state={PACKED: PackedState.of(learner.state_dict()), "replay": []})


def shard_state_if_due(shard: ReplayShard, snapshot: Snapshot) -> Snapshot:
    """On a replay shard: its buffer appended to a due record's state."""
    if not snapshot.due or snapshot.state is None:
        return snapshot
    state = {**snapshot.state, "replay": [*snapshot.state["replay"], shard.state_dict()]}
    return attrs.evolve(snapshot, state=state)


@attrs.frozen
class Fixed:
    """A ``route`` that always picks actor ``index``."""

    index: int

    def __call__(self, _: object) -> int:
        return self.index


@attrs.frozen
class EnvSteps:
    """Driver side: a due record's state as a checkpoint holds it: the learner's state
    unpacked, the replay shards', and the env steps sampled since the first run."""

    base: int

    def __call__(self, snapshot: Snapshot) -> Snapshot:
        if snapshot.state is None:
            return snapshot
        state = dict(snapshot.state)
        packed = state.pop(PACKED, None)
        learner = packed.unpack() if isinstance(packed, PackedState) else {}
        steps = self.base + snapshot.metrics.env_steps_sampled
        return attrs.evolve(snapshot, state={**learner, **state, "env_steps_sampled": steps})


def snapshot(in_flight: int) -> Callable[[QGroups[Any, Any]], Op[Any, Any]]:
    """``rxrl train``'s checkpoint step: the learner's state, then every shard's, then the env
    steps (``in_flight``, at least the plan's ``learner_queue``: calls pipelined, so that the
    step's call to the learner, queued behind the plan's own, does not hold the run up).

    Each record makes a call to the learner and one to every shard (a state only on a due
    record). With the plan's learner calls pipelined, the learner answers the step's call for
    record n only after the calls already queued ahead of it; a step that waited for that
    answer before asking for record n + 1 would stop the pipeline at every record (DQN on Ray
    ran ~1.8x slower through ``rxrl train`` than without the step). So the step reads ahead
    as far as the plan pipelines (the shards' calls, behind no pipeline of the plan's, need not
    for DQN), and a checkpoint's learner and replay states hold those calls' updates and the
    rounds stored meanwhile (docs/algorithms.md)."""

    def snapshot_learner_and_replay(actors: QGroups[Any, Any]) -> Op[Any, Any]:
        """Learner, shards in index order, env steps."""
        ahead = max(in_flight, actors.learner_queue)
        op: Op[Any, Any] = ops.call(actors.learner, learner_state_if_due, max_in_flight=ahead)
        for index in range(actors.replay.size):
            op = op | ops.call(actors.replay, shard_state_if_due, route=Fixed(index),
                               max_in_flight=in_flight)
        base = 0 if actors.start is None else int(actors.start.learner_state.get("env_steps_sampled", 0))
        return op | ops.map(EnvSteps(base))

    return snapshot_learner_and_replay

# ------------------------------------------------------------------------------------ eval


def load_q_network(config: QSettings, state: Mapping[str, Any]) -> QNetwork:
    """The Q-network of a checkpoint's learner state; ValueError (one line) if it does not fit."""
    from rxrl.rl.models.qnet import make_q_network

    spaces = env_spaces_of(config, "eval")
    q_net = make_q_network(spaces.observation, spaces.action, config.learner.q_net, config.seed)
    try:
        q_net.load_state_dict(state["policy"])
    except (RuntimeError, KeyError, TypeError) as e:
        raise ValueError(f"the Q-network does not fit its config ({' '.join(str(e).split())[:200]})") from e
    return q_net


def greedy(config: QSettings, state: Mapping[str, Any]) -> Callable[..., Any]:
    """``rxrl eval``'s policy of a checkpoint: the argmax of its Q-network."""
    q_net = load_q_network(config, state)

    def act(obs: npt.NDArray[Any], deterministic: bool = True) -> tuple[IntArray, None, None]:
        """The greedy actions of a batch of observations."""
        return q_net.greedy(obs), None, None

    return act


def greedy_module(config: QSettings, state: Mapping[str, Any]) -> GreedyPolicy:
    """``rxrl export``'s policy of a checkpoint: its Q-network's argmax, as one torch module."""
    from rxrl.rl.models.greedy import q_network_greedy

    spaces = env_spaces_of(config, "export")
    return q_network_greedy(load_q_network(config, state), spaces.observation, spaces.action)


__all__ = [
    "Q_STATE",
    "refuse_unused",
    "DQN_LEARNER", "PACKED", "DQNGroups", "EnvSteps", "Fixed", "PackedState", "Pickled", "QGroups",
    "QSettings", "ReplayPlacement", "SMALL_OBSERVATION_BYTES", "mlp_q_network", "observation_bytes",
    "replay_on_driver",
    "QWorkerFactory", "ReplayLearnerFactory", "ReplaySettings", "ShardFactory", "Stateful", "check",
    "arrays_for_workers", "check_replay", "replay_start", "resumed",
    "env_spaces_of", "greedy", "greedy_module", "learner_state_if_due", "load_q_network", "make_q_groups",
    "num_shards",
    "shard_state_if_due", "snapshot",
]
