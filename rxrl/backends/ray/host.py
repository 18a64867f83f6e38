"""The one Ray actor class rxrl uses: it hosts a plan actor (or iterable shards) and runs its calls.

A ``Host`` constructs the user's actor with ``make(index)`` and keeps, registered once, the
fused shard chains (``from_actors(...) | map | window ...``, run with the reference
interpreter's shard-local generators) and the functions of every ``call``/``broadcast`` that
targets it; a request then names a chain or a function by its occurrence id instead of
shipping code. Every request answers ``(status, value)`` as two objects, so that the driver
reads the small status (ok / end / stale / failure) and leaves the value in the object store.
"""

from __future__ import annotations

import gc
import traceback
import warnings
from collections.abc import Callable, Hashable, Iterator
from typing import Any, Literal, cast

import attrs
import ray
from ray import cloudpickle

from rxrl import graph as g
from rxrl.actors import Tagged, serialize_factories_with
from rxrl.backends.common import creation_message
from rxrl.backends.local import LOCAL, actor_stream
from rxrl.backends.ray.cores import pin_process
from rxrl.errors import OperatorError, RxrlError
from rxrl.ready import END, NOT_READY

#: statuses of a request (besides ``END``, ``NOT_READY``, a ``Failure``, or a ``Tagged`` hint
#: for an ok Tagged value); ``END`` and ``NOT_READY`` unpickle to the driver's own markers
OK = "ok"
#: the actor was restarted and has not been brought up to date yet: nothing was executed
STALE = "stale"

__all__ = ["END", "NOT_READY", "OK", "STALE", "Chain", "Failure", "Host", "MemberSpec", "PinnedSpec",
           "RemoteError"]

#: ``cloudpickle.dumps`` (untyped upstream)
dumps = cast(Callable[[Any], bytes], cloudpickle.dumps)
loads = cast(Callable[[bytes], Any], cloudpickle.loads)
# actor groups cross processes inside Tagged items: their factories may be closures
serialize_factories_with(dumps)

#: how an item travels to ``Host.apply``: the value itself, one object ref, a Tagged object
#: ref, or a list of object refs (a barrier round)
Shape = Literal["value", "ref", "tagged", "list"]


class RemoteError(RxrlError, RuntimeError):
    """Stands in for an exception raised in a Ray actor that could not be sent back as is."""


@attrs.frozen
class Failure:
    """An exception raised inside a host, packed so that it always unpickles on the driver.

    ``kind`` says how the driver raises it again: ``operator`` as an ``OperatorError`` of
    ``operator``/``site`` caused by ``cause``; ``raw`` as ``cause`` itself (an iterable's own
    error, as the reference interpreter lets it through); ``actor`` as an ``ActorError`` with
    ``message``.
    """

    kind: Literal["operator", "raw", "actor"]
    cause: BaseException
    operator: str = ""
    site: str = ""
    message: str = ""


def portable(e: BaseException, where: str) -> BaseException:
    """``e`` with the remote traceback as a note, or a RemoteError if ``e`` does not round-trip."""
    note = f"(raised in {where}; remote traceback follows)\n" + "".join(
        traceback.format_exception(type(e), e, e.__traceback__))
    try:
        e.add_note(note)
        loads(dumps(e))
        return e
    except Exception:
        stand_in = RemoteError(f"{type(e).__module__}.{type(e).__qualname__}: {e}")
        stand_in.add_note(note)
        return stand_in


def failure_of(e: Exception, where: str) -> Failure:
    """Pack an exception raised by a chain or an effect for the trip to the driver."""
    if isinstance(e, OperatorError):
        cause = e.__cause__ if e.__cause__ is not None else e
        return Failure("operator", portable(cause, where), e.operator, e.site)
    return Failure("raw", portable(e, where))


@attrs.frozen
class Chain:
    """A fused shard chain: a source (``from_actors`` node or an iterator) and local steps."""

    steps: tuple[g.Node, ...]
    source: g.FromActors | None = None
    iterator: Iterator[Any] | None = None


@attrs.frozen
class MemberSpec:
    """Everything a host needs to be one plan actor, sent once at construction (and reused by
    Ray when it restarts the actor)."""

    make: Callable[[int], Any]
    index: int
    where: str
    site: str
    chains: dict[int, Chain]
    effects: dict[int, g.Broadcast | g.Call | g.CallAll]
    on_restart: Callable[[Any], object] | None = None
    #: ``(node id, CPUs)``: on that node (the driver's), run on those CPUs only, off those of
    #: an actor hosted there with ``own_cores`` (`rxrl.backends.ray.cores`)
    cpus: tuple[str, tuple[int, ...]] | None = None


#: the namespace of Ray's key-value store (in the GCS) that holds `PinnedSpec` specs
SPEC_NAMESPACE = "rxrl-specs"


@attrs.frozen
class PinnedSpec:
    """A `MemberSpec` kept in Ray's key-value store under ``key``, for an actor Ray may
    restart: the actor reads it in its constructor (again after every restart), so the
    constructor's own argument is this small record. The driver deletes it when the run
    closes. Ray keeps a constructor argument that is in the object store (anything over
    ~100 KB: a resumed run's workers carry the checkpoint's weights) only until the first
    construction, so a restart failed with "the object has already been deleted"
    (ray-project/ray#53727); an object ref nested in the argument works, but Ray then
    warns that "the actor restart will fail" on every such run."""

    key: str

    @staticmethod
    def put(key: str, spec: MemberSpec) -> PinnedSpec:
        """Store ``spec`` under ``key`` (driver side)."""
        from ray.experimental import internal_kv

        internal_kv._internal_kv_put(key, dumps(spec), namespace=SPEC_NAMESPACE)
        return PinnedSpec(key)

    def get(self) -> MemberSpec:
        """The stored spec (actor side)."""
        from ray.experimental import internal_kv

        data = internal_kv._internal_kv_get(self.key, namespace=SPEC_NAMESPACE)
        if data is None:
            raise RuntimeError(f"the spec of actor {self.key} is gone (its run has closed)")
        return cast(MemberSpec, cloudpickle.loads(data))

    def delete(self) -> None:
        """Remove the stored spec (driver side, when the run closes)."""
        from ray.experimental import internal_kv

        internal_kv._internal_kv_del(self.key, namespace=SPEC_NAMESPACE)


def _keep_off(node_id: str, cpus: tuple[int, ...]) -> None:
    """On node ``node_id``, run this process's threads on ``cpus`` only."""
    if ray.get_runtime_context().get_node_id() == node_id:
        pin_process(cpus)


def _reconstructed() -> bool:
    with warnings.catch_warnings():  # Ray's own property warns about an API it uses inside
        warnings.simplefilter("ignore")
        return bool(ray.get_runtime_context().was_current_actor_reconstructed)


class Host:
    """Runs inside a Ray actor: the user's actor instance, its chains and its effects."""

    def __init__(self, spec: MemberSpec | PinnedSpec | None = None, *, on_driver: bool = False) -> None:
        if isinstance(spec, PinnedSpec):
            spec = spec.get()
        self.instance: Any = None
        self.broken: Failure | None = None
        self.stale = False
        self.where = ("a Ray host of from_iterables shards" if spec is None else
                      f"{spec.where} (on the driver)" if on_driver else f"Ray actor {spec.where}")
        self.chains: dict[Hashable, Chain] = {}
        self.running: dict[Hashable, Iterator[Any]] = {}
        self.effects: dict[int, g.Broadcast | g.Call | g.CallAll] = {}
        #: the key of the actor's only chain (what ``next`` pulls), if it has exactly one
        self.only: Hashable = None
        if spec is None:
            return
        self.chains.update(spec.chains.items())
        if len(spec.chains) == 1:
            (self.only,) = spec.chains
        self.effects.update(spec.effects)
        try:
            self.instance = spec.make(spec.index)
        except Exception as e:
            self.broken = Failure("actor", portable(e, self.where),
                                  message=creation_message(spec.where, spec.site, e))
            return
        if on_driver:  # the driver's heap is the user's: neither frozen nor ever restarted
            return
        if spec.cpus is not None:  # once built: its imports had every CPU
            _keep_off(*spec.cpus)
        # What the process holds now (its imports, torch's ~10^6 objects, the actor) lives as
        # long as the process: out of the collector's sight, so that its first full
        # collections do not walk it (~90 ms in a PPO learner's second update otherwise)
        gc.freeze()
        if _reconstructed():
            self.stale = True  # until the driver re-applies the latest broadcasts
            if spec.on_restart is not None:
                try:
                    spec.on_restart(self.instance)
                except Exception as e:
                    self.broken = Failure("actor", portable(e, self.where), message=(
                        f"the on_restart hook of restarted actor {spec.where} (group built at "
                        f"{spec.site}) raised {type(e).__name__}: {e}"))

    def ready(self) -> str | Failure:
        """The id of the node it runs on, or the failure of the constructor."""
        return self.broken or str(ray.get_runtime_context().get_node_id())

    # Ray charges every task argument a fixed cost (~70 us for the first, ~17 us for each
    # more, on 2 cores): the hot methods take as few as they can. ``next`` pulls the actor's
    # only chain with none; ``apply`` and ``effect`` take one ``header`` before the values.

    @ray.method(num_returns=2)
    def pull(self, key: Hashable) -> tuple[Any, Any]:
        """The next item of chain ``key``: ``(OK or a Tagged hint, item)``, ``(END, None)``, ...

        Two objects: the driver reads the status and may hand the item on as a ref."""
        return self.pull_both(key)

    @ray.method(num_returns=2)
    def next(self) -> tuple[Any, Any]:
        """``pull`` of the actor's only chain."""
        return self.pull_both(self.only)

    def next_both(self) -> tuple[Any, Any]:
        """``pull_both`` of the actor's only chain."""
        return self.pull_both(self.only)

    def pull_both(self, key: Hashable) -> tuple[Any, Any]:
        """``pull`` as one object, for an item the driver is going to read anyway."""
        if self.broken is not None:
            return self.broken, None
        if self.stale:
            return STALE, None
        it = self.running.get(key)
        if it is None:
            chain = self.chains.get(key)
            if chain is None:  # released (the run was closed): behave as an ended shard
                return END, None
            it = self.running[key] = self._open(chain)
        try:
            x = next(it)
        except StopIteration:
            return END, None
        except Exception as e:
            return failure_of(e, self.where), None
        return status_of(x), x

    def _open(self, chain: Chain) -> Iterator[Any]:
        it: Iterator[Any]
        if chain.source is not None:
            it = actor_stream(chain.source, self.instance)
        else:
            assert chain.iterator is not None
            it = chain.iterator  # its own exceptions pass unwrapped, as in the reference
        for step in chain.steps:
            it = LOCAL[type(step)](step, it)
        return it

    @ray.method(num_returns=2)
    def apply(self, header: Header, *values: Any) -> tuple[Any, Any]:
        """``fn(instance, item)`` of the call/broadcast the header names; answers like ``pull``."""
        return self.apply_both(header, *values)

    def apply_both(self, header: Header, *values: Any) -> tuple[Any, Any]:
        """``apply`` as one object, for a result the driver is going to read anyway."""
        if self.broken is not None:
            return self.broken, None
        if self.stale:
            return STALE, None
        fn_id, shape, shard, group = unpack(header)
        node = self.effects[fn_id]
        try:
            y = node.fn(self.instance, rebuild(shape, shard, group, values))
        except Exception as e:
            return Failure("operator", portable(e, self.where), node.label, node.site), None
        return status_of(y), y

    def effect(self, header: Header, *values: Any) -> Any:
        """``apply`` whose result is dropped (a broadcast): its status alone."""
        return self.apply_both(header, *values)[0]

    def refresh(self, effects: list[tuple[int, Shape, int | None, Any, tuple[Any, ...]]]
                ) -> str | Failure:
        """Re-apply the latest broadcasts (after a restart), then serve requests again; the id
        of the node it now runs on, or a failure."""
        if self.broken is not None:
            return self.broken
        for fn_id, shape, shard, group, values in effects:
            if shape != "value":
                values = tuple(ray.get(list(values)))
            node = self.effects[fn_id]
            try:
                node.fn(self.instance, rebuild(shape, shard, group, values))
            except Exception as e:
                return Failure("operator", portable(e, self.where), node.label, node.site)
        self.stale = False
        return str(ray.get_runtime_context().get_node_id())

    def discard(self) -> None:
        """Let go of the actor and its open chains (a driver-hosted actor whose run ended)."""
        self.instance = None
        self.running.clear()

    def register(self, key: Hashable, steps: tuple[g.Node, ...], iterator: Iterator[Any]) -> None:
        """Host an iterable shard chain under ``key`` (a ``(run, node, shard)`` tuple)."""
        self.chains[key] = Chain(steps, iterator=iterator)

    def release(self, run: str) -> None:
        """Forget the chains of run ``run``."""
        for key in [k for k in self.chains if isinstance(k, tuple) and k[0] == run]:
            del self.chains[key]
            self.running.pop(key, None)


def status_of(x: Any) -> Any:
    """``OK``, ``NOT_READY`` (an actor source with nothing to give yet), or for a Tagged item
    a value-less ``Tagged`` so the driver can route without fetching it."""
    if x is NOT_READY:
        return NOT_READY
    return Tagged(None, x.shard, x.group) if type(x) is Tagged else OK


#: ``Host.apply``'s first argument: ``(fn_id, shape, shard, group)``, or, when there is no
#: shard and group (all but tagged items), the int ``fn_id * 4 + shape number``
Header = int | tuple[int, Shape, int | None, Any]
SHAPES: tuple[Shape, ...] = ("value", "ref", "tagged", "list")


def pack(fn_id: int, shape: Shape, shard: int | None, group: Any) -> Header:
    """The header of ``apply(fn_id, item)`` for an item of ``shape``."""
    if shard is None and group is None:
        return fn_id * 4 + SHAPES.index(shape)
    return fn_id, shape, shard, group


def unpack(header: Header) -> tuple[int, Shape, int | None, Any]:
    """``(fn_id, shape, shard, group)`` of a header."""
    if isinstance(header, int):
        return header >> 2, SHAPES[header & 3], None, None
    return header


def rebuild(shape: Shape, shard: int | None, group: Any, values: tuple[Any, ...]) -> Any:
    """The item ``Host.apply`` was sent (see ``Shape``)."""
    if shape == "value":
        return values[0][0]
    if shape == "ref":
        return values[0]
    if shape == "tagged":
        assert shard is not None
        return Tagged(values[0], shard, group)
    return list(values)
