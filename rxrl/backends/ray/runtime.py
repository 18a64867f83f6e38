"""The Ray backend's runtime for the engine: its actors and shards, requests, waits, values, close."""

from __future__ import annotations

import contextlib
import itertools
import pickle
import re
import time
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import attrs
import ray
from ray.exceptions import RayError

from rxrl import graph as g
from rxrl.actors import ActorGroup, Placement, Tagged
from rxrl.backends import common
from rxrl.backends.common import Blocked, Reporter
from rxrl.backends.engine.stream import Request, Runtime, Shard
from rxrl.backends.kernels import Clock
from rxrl.backends.ray.connect import CLOSE_TIMEOUT_S, local_ray_lost, within
from rxrl.backends.ray.cores import CoreSplit, pin_process, split
from rxrl.backends.ray.host import Chain, Failure, Host, MemberSpec, PinnedSpec, dumps, pack
from rxrl.backends.ray.members import (
    POOL,
    DriverMember,
    Encoded,
    GroupState,
    Handle,
    HostActor,
    LocalShard,
    Member,
    MemberShard,
    PoolShard,
    PoolTarget,
    RayRequest,
    Ref,
    Round,
    kill,
    raise_failure,
    ready,
)
from rxrl.compile import Step
from rxrl.errors import ActorError, PlanError, WaitTimeoutError
from rxrl.events import EventSink
from rxrl.schedule import Recorder


class RayTimeoutError(WaitTimeoutError):
    """A Ray run waited longer than its ``timeout_s`` for an actor, a shard or an input."""


@attrs.frozen(kw_only=True)
class Options(common.Options):
    """The Ray backend's options (keyword arguments of ``rxrl.run(plan, "ray", ...)``)."""

    ALIASES: ClassVar[Mapping[str, str]] = {}

    #: the cluster to connect to when Ray is not initialised yet ("auto", "ray://head:10001")
    address: str | None = None
    #: more ``ray.init`` keyword arguments (same condition)
    init_options: dict[str, Any] | None = None
    #: seconds the run waits for its actors to be placed and constructed
    start_timeout_s: float | None = 300.0
    #: how many pooled hosts run ``from_iterables`` shards
    iterable_hosts: int = 4

    def check(self) -> None:
        super().check()
        common.seconds("start_timeout_s", self.start_timeout_s)
        common.at_least("iterable_hosts", self.iterable_hosts, 1)


#: stands in for a shard-local node's input once the node is shipped to an actor
_SHIPPED = g.FromIterable(iterable=(), site="(the shard's input)")


def ship(node: g.Node) -> g.Node:
    """``node`` without its input graph, ready to be pickled to an actor."""
    return attrs.evolve(node, input=_SHIPPED) if isinstance(node, g.Unary) else node


def encode(x: Any) -> Encoded:
    """Item ``x`` as ``Host.apply`` takes it: object refs travel as refs, not as values."""
    if type(x) is Ref and x.ref is not None:
        return "ref", None, None, (x.ref,)
    if type(x) is Tagged and type(x.value) is Ref and x.value.ref is not None:
        return "tagged", x.shard, x.group, (x.value.ref,)
    if type(x) is Round and all(r.ref is not None for r in x):
        return "list", None, None, tuple(r.ref for r in x)
    return "value", None, None, ((materialize(x),),)


#: the largest task argument Ray inlines in the call (its ``max_direct_call_object_size``,
#: 100 KiB by default); a larger one it puts in the object store, once per call
INLINE_LIMIT_BYTES = 100 * 1024


def stored_per_call(value: Any) -> bool:
    """Whether Ray would put ``value``, as a task argument, in the object store (larger than
    `INLINE_LIMIT_BYTES`), judged by a pickle that leaves array buffers out of band (no copy
    of their bytes); False for a value plain pickle cannot take (Ray's cloudpickle can)."""
    buffers: list[pickle.PickleBuffer] = []
    try:
        head = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    except Exception:
        return False
    return len(head) + sum(memoryview(b).nbytes for b in buffers) > INLINE_LIMIT_BYTES


def materialize(x: Any) -> Any:
    """The plain value of a driver-stream item (one ``ray.get`` for what is in the store)."""
    kind = type(x)
    if kind is Ref:
        return x.local if x.ref is None else ray.get(x.ref)
    if kind is Tagged and type(x.value) is Ref:
        return Tagged(materialize(x.value), x.shard, x.group)
    if kind is Round:
        refs = [r.ref for r in x if r.ref is not None]
        fetched = iter(ray.get(refs)) if refs else iter(())
        return [r.local if r.ref is None else next(fetched) for r in x]
    return x


_NO_MODULE = re.compile(r"No module named '([^']+)'")


def _pg_strategy(strategy: str, size: int, bundle: Mapping[str, float]) -> str:
    """Ray's placement group strategy for ``pack`` / ``spread``: the strict one when the
    cluster's nodes can hold it at all (one node with room for every bundle; a node with room
    for one bundle per actor), which then waits for resources another run is still giving back
    rather than settle for less; else the best-effort one."""
    untyped: Any = ray
    room = [min((n["Resources"].get(k, 0.0) // v if v else size) for k, v in bundle.items())
            for n in untyped.nodes() if n["Alive"]]
    if strategy == "pack":
        return "STRICT_PACK" if any(r >= size for r in room) else "PACK"
    return "STRICT_SPREAD" if sum(r >= 1 for r in room) >= size else "SPREAD"


def source_site(plan: Step) -> str:
    """Where the sub-plan ending in ``plan`` was built (its last operator's call site)."""
    return plan.node.site


def creation_failure(where: str, site: str, e: RayError) -> ActorError:
    """The error of an actor Ray could not create: in one line if the workers could not
    import the module its class or functions come from, with how to ship it."""
    found = _NO_MODULE.search(str(e))
    if found is None:
        return ActorError(f"creating actor {where} (group built at {site}) failed: {e}")
    module = found.group(1)
    return ActorError(
        f"creating actor {where} (group built at {site}) failed: the Ray workers cannot import "
        f"module {module!r} (No module named {module!r}), which its class or functions come "
        "from — install it on every node, or ship it: rxrl.run(..., init_options={'runtime_env': "
        "{'working_dir': DIR}}) or {'py_modules': [DIR]} (on a Ray you started, the same in "
        "ray.init)")


class RayRuntime(Runtime):
    """The state of one run on the driver; the engine's operators call it."""

    def __init__(self, recorder: Recorder, on_event: EventSink | None, options: Options) -> None:
        self.report = Reporter(recorder, on_event)
        self.blocked = Blocked()
        self.clock = Clock()
        self.options: Options = options
        self.effects: dict[tuple[str, int], int] = {}
        self.run_id = uuid.uuid4().hex[:12]
        self.states: dict[str, GroupState] = {}
        self.pool_targets: list[PoolTarget] = []
        self.pool_hosts: list[Handle] = []
        self.created: list[Handle] = []
        #: the specs of actors Ray may restart, kept until the run closes (`PinnedSpec`)
        self.pinned: list[PinnedSpec] = []
        self.closers: list[Callable[[], None]] = []
        #: the placement group of each packed group (`_placement`), by group key
        self._groups_placed: dict[str, Any] = {}
        #: the node-label sets already looked for among the cluster's nodes (`_look_for`)
        self._labels_seen: set[tuple[tuple[str, str], ...]] = set()
        self.closed = False
        #: requests submitted and not yet seen complete (by id)
        self.running: dict[int, RayRequest] = {}
        self._stamps = itertools.count(1)
        self._generation = 0
        self._encoded: dict[int, tuple[Any, Encoded]] = {}  # per broadcast: its latest item
        #: (target, sub-plan, the aggregate's shard steps, its placement or None) per aggregator
        self.aggregators: list[tuple[Any, Step, tuple[g.Node, ...], Placement | None]] = []
        #: the CPUs of the driver-hosted groups with ``own_cores`` (by group key) and the CPUs
        #: of the rest of the run on the driver's node (`rxrl.backends.ray.cores`)
        self._own_cpus: dict[str, frozenset[int]] = {}
        self._cpus: tuple[str, CoreSplit] | None = None

    # ------------------------------------------------------------------ plan actors, shards

    def state(self, group: ActorGroup[Any]) -> GroupState:
        """The run's state of ``group`` (made on first mention)."""
        state = self.states.get(group.key)
        if state is None:
            state = self.states[group.key] = GroupState(group, [{} for _ in range(group.size)])
        return state

    def shards(self, node: g.ShardChain, nid: int) -> list[Shard]:
        source = node.source
        steps = tuple(ship(step) for _, step in node.steps)
        picked = [node.index(j) for j in range(node.shards)]
        if isinstance(source, g.FromActors):
            state = self.state(source.group)
            for i in picked:
                state.chains[i][nid] = Chain(steps, source=source)
            return [MemberShard(self, node, state, i, nid) for i in picked]
        assert isinstance(source, g.FromIterables), "aggregates are lowered by `aggregate`"
        shards: list[Shard] = []
        for i in picked:
            where = f"shard {i} of {source.describe()}"
            iterator = source.open(i)
            try:
                dumps(iterator)
            except Exception:  # a generator: run this shard on the driver
                shards.append(LocalShard(self, node, where, steps, iterator, i))
                continue
            target = PoolTarget((self.run_id, nid, i), where, steps, iterator)
            self.pool_targets.append(target)
            shards.append(PoolShard(self, node, target, i))
        return shards

    def aggregate(self, node: g.ShardChain, nid: int, plans: list[Step]) -> list[Shard]:
        """The shards of an aggregate: one aggregator per sub-plan (created by ``start``),
        whose chains and calls are registered on the actors they reach, as the driver's are."""
        from rxrl.backends.ray.aggregator import AggShard, AggTarget

        source = node.source
        assert isinstance(source, g.Aggregate)
        shards: list[Shard] = []
        for i, plan in enumerate(plans):  # the key: unique among the run's aggregators
            target = AggTarget(self, i, f"aggregator {i} of {source.label} (#{nid})",
                               len(self.aggregators))
            self._register_sub_plan(plan, target)
            where = None if source.placements is None else source.placements[i]
            self.aggregators.append((target, plan, tuple(ship(step) for _, step in node.steps), where))
            shards.append(AggShard(self, node, target, i))
        return shards

    def _register_sub_plan(self, top: Step, target: Any) -> None:
        seen: set[int] = set()
        stack = [top]
        while stack:
            step = stack.pop()
            if step.id in seen:
                continue
            seen.add(step.id)
            node = step.node
            if isinstance(node, g.ShardChain) and isinstance(node.source, g.FromActors):
                state = self.state(node.source.group)
                steps = tuple(ship(s) for _, s in node.steps)
                for i in (node.index(j) for j in range(node.shards)):
                    state.chains[i][step.id] = Chain(steps, source=node.source)
                    state.owners[i] = target
            elif isinstance(node, g.Call | g.CallAll | g.Broadcast):
                self.register(step.id, node)
            stack.extend(step.inputs)

    def register(self, nid: int, node: g.Call | g.CallAll | g.Broadcast) -> None:
        shipped = ship(node)
        assert isinstance(shipped, g.Call | g.CallAll | g.Broadcast)
        self.state(node.group).effects[nid] = shipped

    def start(self) -> None:
        """Create the plan's actors (waiting until constructed) and place iterable shards."""
        started: list[tuple[Member, Any]] = []
        on_driver = [s for s in self.states.values() if s.group.driver_hosted]
        for state in on_driver:  # before any actor is created
            extra = sorted(set(state.group.options) - {"on_driver", "own_cores"})
            if extra:
                raise PlanError(repr(state.group), state.group.site,
                                f"a group hosted on the driver takes no Ray actor options, got {extra}",
                                "drop on_driver(), or the options")
        self._split_cores(on_driver)
        for state in self.states.values():
            if state in on_driver:
                continue
            for i in range(state.group.size):
                handle = self._create(state, i)
                member = Member(self, state, i, handle)
                state.members.append(member)
                started.append((member, handle.ready.remote()))
        for state in on_driver:  # while Ray constructs the others
            for i in range(state.group.size):
                host = Host(self._spec(state, i), on_driver=True)
                state.members.append(DriverMember(self, state, i, host, self._own_cpus.get(state.group.key)))
                if host.broken is not None:
                    raise_failure(host.broken)
        if self.pool_targets:
            self.pool_hosts = POOL.take(min(self.options.iterable_hosts, len(self.pool_targets)))
            for j, target in enumerate(self.pool_targets):
                target.host = self.pool_hosts[j % len(self.pool_hosts)]
                target.host.register.remote(target.key, target.steps, target.iterator)
        if started:
            self._await_started(started)
        if self.aggregators:
            self._start_aggregators()

    def _split_cores(self, on_driver: list[GroupState]) -> None:
        """Give each driver-hosted group with ``own_cores`` its CPUs, and move the driver's
        threads off them (until the run closes); the plan's Ray actors on this node move off
        them when they are built (`MemberSpec.cpus`)."""
        for state in self.states.values():
            n = state.group.options.get("own_cores")
            if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
                raise PlanError(repr(state.group), state.group.site,
                                f"own_cores must be a whole number of CPUs, at least 1, got {n!r}",
                                "give it 1 (or the torch threads the actor runs)")
            if n is not None and state not in on_driver:
                raise PlanError(repr(state.group), state.group.site,
                                "own_cores is for a group hosted on the driver",
                                "add on_driver(), or drop own_cores")
        wanting = [s for s in on_driver if "own_cores" in s.group.options]
        if not wanting:
            return
        total = sum(int(s.group.options["own_cores"]) for s in wanting)
        cores = split(total, ", ".join(repr(s.group) for s in wanting))
        if cores is None:
            return
        own = sorted(cores.own)
        for state in wanting:
            n = int(state.group.options["own_cores"])
            self._own_cpus[state.group.key], own = frozenset(own[:n]), own[n:]
        self._cpus = ray.get_runtime_context().get_node_id(), cores
        pin_process(cores.rest)

    def _await_started(self, started: list[tuple[Member, Any]]) -> None:
        ready, _ = ray.wait([ref for _, ref in started], num_returns=len(started),
                            timeout=self.options.start_timeout_s)
        done = set(ready)
        for member, ref in started:
            if ref not in done:
                raise RayTimeoutError(
                    f"actor {member.where} (group built at {member.state.group.site}) was not "
                    f"constructed within start_timeout_s={self.options.start_timeout_s} s: Ray "
                    "may have no node with the resources it asks for "
                    f"({dict(member.state.group.options)})")
            try:
                status = ray.get(ref)
            except RayError as e:
                raise creation_failure(member.where, member.state.group.site, e) from e
            if isinstance(status, Failure):
                raise_failure(status)
            member.node_id = status

    def _start_aggregators(self) -> None:
        """Create one aggregator per sub-plan, on a node with its placement's labels
        (``aggregate(placements=...)``) or beside its part's first actor, and wait for them."""
        made = []
        for target, plan, steps, where in self.aggregators:
            owned = self._owned(target)
            for member in owned:
                group = member.state.group
                if group.driver_hosted:
                    raise PlanError(repr(group), group.site,
                                    "its actors are hosted on the driver, and an aggregator cannot "
                                    "reach those", "aggregate a group of Ray actors, or drop on_driver()")
            restarts = [m.max_restarts for m in owned]
            target.max_restarts = (0 if not restarts or 0 in restarts else
                                   min((r for r in restarts if r > 0), default=-1))
            made.append(self._make_aggregator(target, plan, steps, where, owned))
        self._await_aggregators(made)

    def _owned(self, target: Any) -> list[Member]:
        """The members aggregator ``target`` pulls, group by group, by index."""
        return [state.members[i] for state in self.states.values()
                for i in sorted(i for i, t in state.owners.items() if t is target)]

    def _make_aggregator(self, target: Any, plan: Step, steps: tuple[g.Node, ...],
                         where: Placement | None, owned: list[Member], life: int = 0
                         ) -> tuple[Any, Any, Any]:
        """Create the actor of aggregator ``target`` over the members it pulls, in its life
        ``life`` (0 the first; its actor's name says it after): ``(target, ref of its
        readiness, placement)``."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from rxrl.backends.ray.aggregator import AggregatorActor, AggregatorSpec, Part

        parts: dict[str, Part] = {}
        for member in owned:
            state = member.state
            if state.group.key not in parts:
                parts[state.group.key] = Part(state.group, state.chains, dict(state.effects), {},
                                              tuple(state.latest.items()))
            parts[state.group.key].handles[member.index] = member.handle
        node_id = owned[0].node_id if owned else None
        spec = AggregatorSpec(target.index, target.where, plan, steps, parts, self.options,
                              f"aggregator[{target.key}]" if self.report.observing else None)
        again = f"{life}:" if life else ""
        options: dict[str, Any] = {"num_cpus": 0, "max_restarts": 0, "max_task_retries": 0,
                                   "name": f"rxrl:{self.run_id}:{again}aggregator[{target.key}]"}
        if where is not None:  # on a node with its placement's labels, as its actors are
            self._look_for(where.labels, target.where)
            options["label_selector"] = dict(where.labels)
        elif node_id is not None:  # beside its actors (a soft affinity was seen to pick the
            # head node when the affinity's node had room; it takes no CPU, so it fits)
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id, soft=False)
        try:
            target.handle = AggregatorActor.options(**options).remote(spec)
        except Exception as e:  # pickling the sub-plan, mostly
            raise PlanError(target.where, source_site(plan), f"creating its actor failed: "
                            f"{type(e).__name__}: {e}",
                            "a sub-plan is sent to its actor: use module-level classes and "
                            "functions, or closures over picklable values") from e
        self.created.append(target.handle)
        return target, target.handle.ready.remote(), where

    def _await_aggregators(self, made: list[tuple[Any, Any, Any]]) -> None:
        ready, _ = ray.wait([ref for _, ref, _ in made], num_returns=len(made),
                            timeout=self.options.start_timeout_s)
        for target, ref, where in made:
            if ref not in ready:
                labels = "" if where is None else f" (placed on {dict(where.labels)}: no such node?)"
                raise RayTimeoutError(f"{target.where} was not constructed within "
                                      f"start_timeout_s={self.options.start_timeout_s} s{labels}")
            try:
                status = ray.get(ref)
            except RayError as e:
                raise creation_failure(target.where, "", e) from e
            if isinstance(status, Failure):
                raise_failure(status)
            target.node_id = status

    def revive_aggregator(self, target: Any, node: g.Node) -> list[Member]:
        """Make aggregator ``target`` again after it died (``AggTarget.revive``): bring its
        members up to date (those Ray restarted included, wherever they now run), then create
        it anew beside them and wait for it. Returns its members, for the caller to send
        their outstanding requests again once the new aggregator counts as current."""
        (plan, steps, where), = [(p, s, w) for t, p, s, w in self.aggregators if t is target]
        owned = self._owned(target)
        for member in owned:
            member.bring_up_to_date(node)
        self._await_aggregators([self._make_aggregator(target, plan, steps, where, owned,
                                                       life=target.epoch + 1)])
        return owned

    def _spec(self, state: GroupState, index: int,
              on_restart: Callable[[Any], object] | None = None) -> MemberSpec:
        group = state.group
        cpus = None if self._cpus is None else (self._cpus[0], tuple(sorted(self._cpus[1].rest)))
        return MemberSpec(group.make, index, f"{group.name}[{index}]", group.site,
                          state.chains[index], dict(state.effects), on_restart, cpus)

    def _placement(self, group: ActorGroup[Any], index: int, options: dict[str, Any]) -> None:
        """Ray options for the group's `Placement` (popped from ``options``): node labels as a
        ``label_selector``; ``pack`` and ``spread`` as a placement group of one bundle per actor
        (`_pg_strategy`; made with the first actor, so that Ray places all of them at once;
        removed when the run closes); a placement per actor (labels only) as actor ``index``'s
        ``label_selector``."""
        each: tuple[Placement, ...] | None = options.pop("placements", None)
        where: Placement | None = options.pop("placement", None) if each is None else each[index]
        if where is None:
            return
        if where.labels:
            self._look_for(where.labels, f"{group.name}[{index}]")
            options["label_selector"] = dict(where.labels)
        if where.strategy == "any":
            return
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        pg = self._groups_placed.get(group.key)
        if pg is None:
            cpus = float(options.get("num_cpus", 1) or 0)
            bundle = {"CPU": cpus} if cpus else {"memory": 1.0}
            pg = self._groups_placed[group.key] = placement_group(
                [dict(bundle)] * group.size, strategy=_pg_strategy(where.strategy, group.size, bundle))
            self.closers.append(lambda: None if local_ray_lost() else remove_placement_group(pg))
            ready, _ = ray.wait([pg.ready()], timeout=self.options.start_timeout_s)
            if not ready:
                raise RayTimeoutError(
                    f"the actors of {group!r} (built at {group.site}) could not be placed "
                    f"({where.strategy!r}: {group.size} bundles of {bundle}) within "
                    f"start_timeout_s={self.options.start_timeout_s} s")
        options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
            pg, placement_group_bundle_index=index)

    def _look_for(self, labels: Mapping[str, str], who: str) -> None:
        """Warn at once (not after ``start_timeout_s``) when no live node has ``labels``: the
        actor waits for one to join (an autoscaler may add it), and a typo or a local Ray
        without labels would otherwise be a silent wait."""
        key = tuple(sorted(labels.items()))
        if key in self._labels_seen:
            return
        self._labels_seen.add(key)
        untyped: Any = ray
        nodes = [n.get("Labels", {}) for n in untyped.nodes() if n["Alive"]]
        if any(all(node.get(k) == v for k, v in labels.items()) for node in nodes):
            return
        have = sorted({f"{k}={v}" for node in nodes for k, v in node.items() if not k.startswith("ray.io/")})
        warnings.warn(f"{who} is placed on nodes labelled {dict(labels)}, and no node of this "
                      f"cluster has those labels (theirs: {', '.join(have) or 'none'}): it waits up to "
                      f"start_timeout_s={self.options.start_timeout_s} s for such a node to join "
                      "(`ray start --labels KEY=VALUE`)", RuntimeWarning, stacklevel=2)

    def _create(self, state: GroupState, index: int) -> Handle:
        group = state.group
        options = dict(group.options)
        options.setdefault("max_restarts", 0)
        on_restart = options.pop("on_restart", None)
        options.pop("on_driver", None)  # False: in an actor, as without it
        self._placement(group, index, options)
        taken = sorted(set(options) & {"name", "max_task_retries", "num_returns"})
        if taken:
            raise PlanError(repr(group), group.site, f"the Ray backend sets {taken} itself",
                            "remove them from the group's options")
        spec = self._spec(state, index, on_restart)
        try:
            ordinal = list(self.states).index(group.key)  # two groups may share a name
            actor = HostActor.options(name=f"rxrl:{self.run_id}:{ordinal}:{group.name}[{index}]",
                                      max_task_retries=0, **options)
        except (TypeError, ValueError) as e:
            raise PlanError(repr(group), group.site, f"Ray refused the group's options: {e}",
                            "see docs/ray.md for the options a group takes") from e
        try:
            if options["max_restarts"]:
                self.pinned.append(PinnedSpec.put(f"{self.run_id}:{ordinal}:{index}", spec))
                handle = actor.remote(self.pinned[-1])
            else:
                handle = actor.remote(spec)
        except Exception as e:  # pickling: a lambda over a lock, a local class, ...
            raise PlanError(repr(group), group.site,
                            f"its actor or functions cannot be sent to a Ray actor: "
                            f"{type(e).__name__}: {e}",
                            "use module-level classes and functions, or closures over "
                            "picklable values") from e
        self.created.append(handle)
        return handle

    # --------------------------------------------------------------------------- requests

    def apply(self, nid: int, node: g.Call | g.CallAll, index: int, item: Any, want: bool) -> Request:
        state = self.states[node.group.key]
        member = state.members[index]
        encoded = encode(item)
        owner = state.owners.get(index)
        if owner is not None:  # an aggregated actor: through its aggregator
            header = pack(nid, *encoded[:3])
            return RayRequest(self, member, node,
                              lambda: owner.relay(member, header, encoded[3], want, False), nid=nid)
        return RayRequest(self, member, node, lambda: member.apply(nid, encoded, want), nid=nid)

    def effect(self, nid: int, node: g.Broadcast, index: int, item: Any) -> Request:
        state = self.states[node.group.key]
        cached = self._encoded.get(nid)
        if cached is None or cached[0] is not item:  # once per item, not per actor
            encoded = encode(item)
            if (encoded[0] == "value" and sum(not isinstance(m, DriverMember) for m in state.members) > 1
                    and stored_per_call(encoded[3][0][0])):
                # one copy in the object store that every actor reads, not one per actor's call
                # (a DQN broadcast of MinAtar weights: 0.7 ms of the driver's CPU per extra
                # actor); a small value stays inlined in each call, which is cheaper than a put
                # (docs/ray.md, "A broadcast value is put once")
                encoded = "ref", None, None, (ray.put(encoded[3][0][0]),)
            cached = self._encoded[nid] = (item, encoded)
            # recorded before its effects go out: a restarted actor is brought up to date
            state.latest[nid] = cached[1]
            state.latest.move_to_end(nid)
        encoded = cached[1]
        member = state.members[index]
        owner = state.owners.get(index)
        if owner is not None:  # an aggregated actor: through its aggregator
            header = pack(nid, *encoded[:3])
            return RayRequest(self, member, node,
                              lambda: owner.relay(member, header, encoded[3], False, True),
                              effect=True, nid=nid)
        return RayRequest(self, member, node, lambda: member.effect(nid, encoded), effect=True, nid=nid)

    def observed(self) -> int:
        """A new completion was seen: its stamp."""
        self._generation += 1
        return next(self._stamps)

    def poll(self, requests: Sequence[Request]) -> None:
        todo = [r for r in requests if isinstance(r, RayRequest) and r.stamp == 0 and r.p.local is None]
        if todo:
            for r in ready(todo, len(todo), 0):  # in the order given: the caller's rotation
                r.mark()

    def wait_any(self, requests: Sequence[Request], node: g.Node, where: str) -> None:
        self._wait(requests, node, where)

    def _wait(self, requests: Sequence[Request], node: g.Node, where: str) -> None:
        todo: list[RayRequest] = []
        for r in requests:  # one pass: a collector waits on every shard's oldest request
            if not isinstance(r, RayRequest) or r.done():
                return
            todo.append(r)
        # one ray.wait, which returns at once if one is done already: the first in list order
        with self.report.waiting(where):
            landed = ready(todo, 1, self.options.timeout_s)
        if not landed:
            raise self.timeout(node, where)
        landed[0].mark()

    def result(self, request: Request, node: g.Node, where: str) -> Any:
        return request.outcome()  # a ray.get with the run's deadline: one call, not two

    def wait_all(self, requests: Sequence[Request], node: g.Node, where: str) -> None:
        todo = [r for r in requests if isinstance(r, RayRequest) and not r.done()]
        if todo:
            with self.report.waiting(where):
                landed = ready(todo, len(todo), self.options.timeout_s)
            if len(landed) < len(todo):
                late = ", ".join(r.target.where for r in todo if r not in landed)
                raise self.timeout(node, late or where)
            for r in todo:
                r.mark()

    @property
    def generation(self) -> int:
        return self._generation

    def wait_for_change(self, seen: int, what: str) -> None:
        if self._generation != seen:
            return
        running = list(self.running.values())
        if not running:
            return
        with self.report.waiting(what):
            landed = ready(running, 1, self.options.timeout_s)
        if not landed:
            raise RayTimeoutError(f"{what}: no result arrived within timeout_s="
                                  f"{self.options.timeout_s} s")
        landed[0].mark()

    def in_flight(self) -> bool:
        return bool(self.running)

    def get(self, ref: Any, node: g.Node, where: str) -> Any:
        """``ray.get(ref)`` within the deadline."""
        with self.report.waiting(where):
            ready, _ = ray.wait([ref], timeout=self.options.timeout_s)
            if not ready:
                raise self.timeout(node, where)
            return ray.get(ref)

    def timeout(self, node: g.Node, where: str) -> RayTimeoutError:
        """The error of a wait that ran past ``timeout_s``."""
        return RayTimeoutError(
            f"{node.describe()}: no result from {where} within timeout_s={self.options.timeout_s}"
            " s — a call may be stuck, or take longer: pass a larger timeout_s to rxrl.run")

    # ------------------------------------------------------------------------------ values

    def value(self, item: Any) -> Any:
        return materialize(item)

    def route_key(self, item: Any) -> Any:
        return item.tag if type(item) is Ref and item.tag is not None else item

    def collect(self, items: list[Any]) -> Any:
        return Round(items)

    # ------------------------------------------------------------------------------- close

    def close(self) -> None:
        """Stop the run: kill its actors, release pooled hosts (idempotent).

        Nothing is asked of a local Ray that stopped under the run (`local_ray_lost`: it took
        the actors with it), and a Ray that does not answer within `CLOSE_TIMEOUT_S` — a GCS
        that is stopping answers no call, and Ray's calls have no deadline of their own, so a
        driver would wait until Ray aborts it a minute later — is left to end on its own."""
        if self.closed:
            return
        self.closed = True
        for state in self.states.values():  # driver-hosted actors go with the run
            for member in state.members:
                if isinstance(member, DriverMember) and not member.close(CLOSE_TIMEOUT_S):
                    warnings.warn(f"closing the run: {member.where} did not return from its call within "
                                  f"{CLOSE_TIMEOUT_S:.0f} s; it is let go when it does", RuntimeWarning,
                                  stacklevel=2)
        if self._cpus is not None:  # the driver's threads get their CPUs back
            pin_process(self._cpus[1].before)
        if not ray.is_initialized() or local_ray_lost() is not None:
            for closer in self.closers:
                closer()
        elif not within(CLOSE_TIMEOUT_S, self._release):
            warnings.warn(f"closing the run: Ray did not answer within {CLOSE_TIMEOUT_S:.0f} s (are its "
                          f"processes stopping?); the run's actors were not seen to go", RuntimeWarning,
                          stacklevel=2)
        self.pinned.clear()

    def _release(self) -> None:
        """`close`'s calls to Ray: the run's actors killed (and seen to go), its placement groups
        and restart specs removed, the pooled hosts released."""
        if self.aggregators:
            self._record_pulls_under_way()
        for closer in self.closers:
            closer()
        for handle in self.created:
            kill(handle)
        if self.created:
            self._await_killed()
        if self._groups_placed:
            self._await_unplaced()
        for pinned in list(self.pinned):  # the specs go once their actors are gone
            pinned.delete()
        if self.pool_hosts:
            releases = {h.release.remote(self.run_id): h for h in self.pool_hosts}
            # releases queue behind the run's last requests: a host that cannot finish them
            # promptly is still busy with user code, and is replaced rather than waited for
            done, _ = ray.wait(list(releases), num_returns=len(releases), timeout=2.0)
            for ref, host in releases.items():
                if ref not in done:
                    POOL.discard(host)

    def _record_pulls_under_way(self, timeout_s: float = 10.0) -> None:
        """Read the aggregators' pulls still under way, for the choices they carry: the
        reference performs a pull when it is submitted, so replaying the trace needs them."""
        requests = [r for target, *_ in self.aggregators for r in list(target.outstanding.values())]
        if not requests:
            return
        with contextlib.suppress(Exception):
            for r in ready(requests, len(requests), timeout_s):
                with contextlib.suppress(Exception):
                    r.status()

    def _await_unplaced(self, timeout_s: float = 5.0) -> None:
        """Return once Ray lists the run's placement groups as removed (their resources free
        for the next run), or after ``timeout_s``."""
        from ray.util.placement_group import placement_group_table

        deadline = time.monotonic() + timeout_s
        for pg in self._groups_placed.values():
            while time.monotonic() < deadline and placement_group_table(pg).get("state") != "REMOVED":
                time.sleep(0.02)
        self._groups_placed.clear()

    def _await_killed(self, timeout_s: float = 5.0) -> None:
        """Return once Ray no longer lists the run's actors (``ray.kill`` only requests the
        kill), so that a closed run leaves no actor behind; give up after ``timeout_s``."""
        prefix = f"rxrl:{self.run_id}:"
        deadline = time.monotonic() + timeout_s
        with contextlib.suppress(Exception):  # Ray shut down underneath us
            while any(n.startswith(prefix) for n in ray.util.list_named_actors()):
                if time.monotonic() > deadline:
                    return
                time.sleep(0.005)
