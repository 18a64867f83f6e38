"""Aggregators on Ray: each sub-plan of an ``ops.aggregate`` runs on an actor of its own.

The driver registers a sub-plan's shard chains and calls on the actors it reads (as for any
plan), creates one ``Aggregator`` per sub-plan once those actors are up, on the node of its
part's first actor, and hands it their handles. The aggregator runs the driver engine over
them (a `SubRuntime`): its gathers, barriers, calls and shard-local steps. The driver pulls
each aggregator like a shard; every answer carries, beside the item, the choices the
aggregator made for it, which the driver records in the run's trace, so that the reference
replays the run, sub-plans included. The driver's own requests to an aggregated actor go
through its aggregator (``relay``), behind what the aggregator asked before. An aggregator that
dies is made again when its actors have a restart policy (``AggTarget.revive``).
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import attrs
import ray
from ray.exceptions import RayActorError

from rxrl import graph as g
from rxrl.actors import ActorGroup
from rxrl.backends.engine.lowering import Steps, driver, observing
from rxrl.backends.engine.stream import Request, Shard, Stream
from rxrl.backends.ray.host import (
    END,
    NOT_READY,
    Chain,
    Failure,
    Header,
    failure_of,
    portable,
    status_of,
    unpack,
)
from rxrl.backends.ray.members import (
    GroupState,
    Handle,
    LocalShard,
    Member,
    Pending,
    RayRequest,
    Target,
    death_reason,
    on_node,
    warn_restarted,
)
from rxrl.backends.ray.runtime import Options, RayRuntime, ship
from rxrl.compile import Compiled, Step, lower
from rxrl.errors import ActorError
from rxrl.events import Event
from rxrl.events import portable as portable_event
from rxrl.schedule import Recorder


@attrs.frozen
class Part:
    """What an aggregator holds of one group: its chains and calls, and the members it owns."""

    group: ActorGroup[Any]
    chains: list[dict[int, Chain]]
    effects: dict[int, g.Broadcast | g.Call | g.CallAll]
    handles: dict[int, Handle]
    #: the latest broadcasts the driver sent the group (a restarted aggregator's starting point)
    latest: tuple[tuple[int, Any], ...] = ()


@attrs.frozen
class AggregatorSpec:
    """Everything aggregator ``index`` needs, sent once at construction."""

    index: int
    where: str
    plan: Step
    #: the shard chain's local steps after the aggregate, run on the aggregator too
    steps: tuple[g.Node, ...]
    parts: dict[str, Part]
    options: Options
    #: when the driver reports events (``on_event``), the origin the sub-plan's events carry
    #: (``aggregator[<key>]``, as its actor's name ends); they are then sent to the driver
    events_as: str | None = None


class _Choices(Recorder):
    """The choices made since they were last taken (shipped with each answer)."""

    def __init__(self) -> None:
        super().__init__("", "ray")
        self.made: list[tuple[int, int]] = []

    def record(self, point: int, choice: int) -> None:
        self.made.append((point, choice))

    def take(self) -> list[tuple[int, int]]:
        made, self.made = self.made, []
        return made


class _Events:
    """The events of a sub-plan made since they were last taken (shipped with each answer)."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.made: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.made.append(portable_event(event, self.origin))

    def take(self) -> list[Event]:
        made, self.made = self.made, []
        return made


class _Foreign(Member):
    """An actor of the group that another aggregator owns: nothing may be sent to it from here."""

    def __init__(self, rt: RayRuntime, state: GroupState, index: int, where: str) -> None:
        super().__init__(rt, state, index, None)
        self.owner = where

    def _refuse(self) -> Pending:
        raise ActorError(f"{self.owner}: its sub-plan sent a request to {self.where}, which is "
                         "another aggregator's: a sub-plan only reaches the actors of its own part")

    def pull(self, key: int, both: bool) -> Pending:
        return self._refuse()

    def apply(self, fn_id: int, item: Any, both: bool = False) -> Pending:
        return self._refuse()

    def effect(self, fn_id: int, item: Any) -> Pending:
        return self._refuse()


class SubRuntime(RayRuntime):
    """The engine's runtime inside an aggregator: the actors are the driver's, already up."""

    def __init__(self, spec: AggregatorSpec) -> None:
        #: the sub-plan's events not yet sent (when the driver observes the run)
        self.events = _Events(spec.events_as) if spec.events_as is not None else None
        super().__init__(_Choices(), self.events, spec.options)
        for key, part in spec.parts.items():
            state = self.states[key] = GroupState(part.group, part.chains, dict(part.effects))
            state.latest.update(part.latest)
            state.members = [Member(self, state, i, part.handles[i]) if i in part.handles
                             else _Foreign(self, state, i, spec.where) for i in range(part.group.size)]

    def shards(self, node: g.ShardChain, nid: int) -> list[Shard]:
        source = node.source
        if isinstance(source, g.FromIterables):  # run here, as the reference runs them
            steps = tuple(ship(step) for _, step in node.steps)
            return [LocalShard(self, node, f"shard {i} of {source.describe()}", steps, source.open(i), i)
                    for i in (node.index(j) for j in range(node.shards))]
        return super().shards(node, nid)


class Aggregator:
    """The Ray actor running one sub-plan (see the module docstring)."""

    def __init__(self, spec: AggregatorSpec) -> None:
        self.where = spec.where
        self.broken: Failure | None = None
        self.rt = SubRuntime(spec)
        try:
            table = observing(_table()) if spec.events_as is not None else _table()
            root = lower(Compiled(spec.plan, {}, "", ()), table, self.rt, "ray")
            stream = driver(root)
            for step in spec.steps:
                stream = Steps(self.rt, step, stream)
            stream.want()
            self.stream: Stream = stream
        except Exception as e:
            self.broken = Failure("actor", portable(e, self.where), message=(
                f"{self.where} could not lower its sub-plan: {type(e).__name__}: {e}"))

    def ready(self) -> str | Failure:
        """The id of the node it runs on, or why it cannot run."""
        return self.broken or str(ray.get_runtime_context().get_node_id())

    @ray.method(num_returns=2)
    def pull(self) -> tuple[tuple[Any, list[tuple[int, int]], list[Event]], Any]:
        """The sub-plan's next item: ``((status, choices made for it, events), item)`` (the
        events the sub-plan made since the last pull, when the driver observes the run)."""
        rt = self.rt
        if self.broken is not None:
            return (self.broken, [], []), None
        status: Any
        value: Any = None
        try:
            while True:
                seen, ticks = rt.generation, rt.clock.ticks
                x = self.stream.pull()
                if x is END or x is NOT_READY:
                    if x is NOT_READY and rt.clock.ticks != ticks:
                        continue  # something moved on the way: ask again
                    if x is NOT_READY and rt.in_flight():
                        rt.wait_for_change(seen, f"{self.where}: its sub-plan's output")
                        continue
                    status = x
                    break
                value = rt.value(x)
                status = status_of(value)
                break
        except Exception as e:
            status = self.broken = failure_of(e, self.where)
        recorder = rt.report.recorder
        assert isinstance(recorder, _Choices)
        events = rt.events.take() if rt.events is not None else []
        return (status, recorder.take(), events), value

    def relay(self, key: str, index: int, header: Header, values: tuple[Any, ...], both: bool,
              effect: bool) -> tuple[Any, Any]:
        """Send the driver's request on to the member ``index`` of group ``key``: the refs
        of its reply (after every request this aggregator sent it before)."""
        state = self.rt.states[key]
        member = state.members[index]
        self.rt.count_effect(state.group, index)
        handle = member.handle
        if effect:  # kept, as the driver keeps it: a restarted actor gets it again first
            fn_id, shape, shard, group = unpack(header)
            state.latest[fn_id] = (shape, shard, group, values)
            state.latest.move_to_end(fn_id)
            return handle.effect.remote(header, *values), None
        if both:
            return handle.apply_both.remote(header, *values), None
        status, value = handle.apply.remote(header, *values)
        return status, value


def _table() -> Any:
    from rxrl.backends.ray.lowering import TABLE

    return TABLE


AggregatorActor = ray.remote(Aggregator)


class AggTarget(Target):
    """The driver's view of one aggregator: its pulls, and its revival after it died."""

    def __init__(self, rt: RayRuntime, index: int, where: str, key: int) -> None:
        #: its index in its aggregate; its key among the run's aggregators (its actor's name)
        self.rt, self.index, self.where, self.key = rt, index, where, key
        self.handle: Handle = None
        #: the id of the node it runs on (known once it is constructed)
        self.node_id: str | None = None
        #: pulls submitted and not yet read (their choices are recorded when read)
        self.outstanding: dict[int, RayRequest] = {}
        #: its life: how many times it was made again after dying
        self.epoch = 0
        #: how many times it may be made again (-1: always; 0: never): its actors' restart
        #: policy (the least of them), set when the run starts
        self.max_restarts = 0
        self.lock = threading.RLock()

    def sent(self, request: RayRequest) -> None:
        self.outstanding[id(request)] = request

    def settled(self, request: RayRequest) -> None:
        self.outstanding.pop(id(request), None)

    def pull(self) -> Pending:
        """Submit a pull of the sub-plan."""
        status, value = self.handle.pull.remote()
        return Pending(status, value, self.epoch)

    def relay(self, member: Member, header: Header, values: tuple[Any, ...], both: bool,
              effect: bool) -> Pending:
        """Submit the driver's request to ``member`` through this aggregator."""
        ref = self.handle.relay.remote(member.state.group.key, member.index, header, tuple(values),
                                       both, effect)
        return Pending(ref, None, member.epoch, both=both and not effect, relayed=True, via=self,
                       life=self.epoch)

    def recover(self, failed: RayRequest, node: g.Node, cause: BaseException | None) -> None:
        """A pull found it dead: revive it (see ``revive``)."""
        self.revive(failed.p.epoch, node, cause)

    def revive(self, life: int, node: g.Node, cause: BaseException | None) -> None:
        """It died in its life ``life`` (its process, or its node, lost): when its actors have a
        restart policy, bring them up to date (waiting while Ray restarts those it lost), make
        a new aggregator beside them, and send it every request outstanding from the old one
        (its pulls, and the driver's requests relayed through it) in order; else raise an
        ActorError naming it and its node. What it held dies with it: the items its sub-plan
        had taken and not handed on, and the replies it owned (relayed requests are sent
        again, so a call may run twice on an actor that outlived it, as with Ray's retries)."""
        with self.lock:
            if life != self.epoch:
                return  # already made again by an earlier revival
            reason = death_reason(cause) if cause is not None else "it was restarted"
            if self.rt.closed:  # the run is closing (reading its last pulls): not made again
                raise ActorError(f"{self.where} {on_node(self.node_id)}died while running "
                                 f"{node.describe()}: {reason}; the run was closing")
            if self.max_restarts == 0 or 0 < self.max_restarts <= self.epoch:
                policy = ("its actors have no restart policy (group.with_restarts(n) restarts "
                          "them, and it with them)" if self.max_restarts == 0 else
                          f"it was made again {self.epoch} times (its actors' max_restarts)")
                raise ActorError(f"{self.where} {on_node(self.node_id)}died while running "
                                 f"{node.describe()}: {reason}; an aggregator is made again only "
                                 f"while its actors may restart: {policy}")
            members = self.rt.revive_aggregator(self, node)
            self.epoch += 1
            for member in members:
                member.resend()
            for request in list(self.outstanding.values()):  # in submission order
                if request.p.epoch != self.epoch:
                    request.resend()
            warn_restarted(self.where, node, cause, self.node_id, self.epoch, self.max_restarts)


class AggRequest(RayRequest):
    """A pull of an aggregator: its answer carries the choices made for the item."""

    __slots__ = ("_status",)

    def __init__(self, rt: RayRuntime, target: AggTarget, node: g.Node, nid: int) -> None:
        self._status: Any = None
        super().__init__(rt, target, node, target.pull, nid=nid)

    def status(self) -> Any:
        if self._status is not None:
            return self._status
        while True:
            try:
                got = self.fetch()
                break
            except RayActorError as e:  # revived (this pull sent again), or it raises
                self.revived(functools.partial(self.target.recover, self, self.node, e))
        self._seen()
        status, choices, events = got
        report = self.rt.report
        for point, choice in choices:
            report.recorder.record(point, choice)
        for event in events:
            report.event(event)
        self.target.settled(self)
        self._status = status
        return status


class AggShard(Shard):
    """Shard ``index`` of an aggregate on Ray: its aggregator."""

    def __init__(self, rt: RayRuntime, node: g.Node, target: AggTarget, index: int) -> None:
        self.rt, self.node, self.target, self.index = rt, node, target, index
        self.where, self.group = target.where, None

    def effects(self, rt: Any) -> int:
        return int(rt.clock.ticks)  # a sub-plan may move after an effect on any of its actors

    def request(self, want: bool) -> Request:
        return AggRequest(self.rt, self.target, self.reader or self.node, self.reader_id)


__all__ = ["AggRequest", "AggShard", "AggTarget", "Aggregator", "AggregatorActor", "AggregatorSpec",
           "Part", "SubRuntime"]
