"""Driver-side runtime of one Ray run: its actors and shards, waits with deadlines, recovery."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import attrs
import ray
from ray.exceptions import ActorDiedError, RayActorError, RayError

from rxrl import graph as g
from rxrl.actors import ActorGroup, Tagged
from rxrl.backends.ray.host import END, OK, STALE, Chain, Failure, Host, MemberSpec, Shape, dumps
from rxrl.backends.reference import local_table
from rxrl.errors import ActorError, OperatorError, PlanError, RxrlError
from rxrl.events import Event, EventSink
from rxrl.schedule import Recorder

#: a Ray actor handle of ``Host`` (Ray's handle types do not describe ``num_returns=2``)
Handle = Any
#: an item encoded for ``Host.apply``: (shape, shard, group, values)
Encoded = tuple[Shape, int | None, Any, tuple[Any, ...]]

HostActor = ray.remote(Host)


class RayTimeoutError(RxrlError, TimeoutError):
    """A Ray run waited longer than its ``timeout_s`` for an actor, a shard or an input."""


@attrs.frozen(slots=True)
class Ref:
    """A driver-stream item whose value lives in Ray's object store (``ref``), or, for a shard
    run on the driver, already here (``local``). ``tag`` is the routing tag of a Tagged value."""

    ref: Any
    local: Any = None
    tag: Tagged[None] | None = None


@attrs.define(slots=True)
class Pending:
    """A submitted request: its status and value refs, or its result if computed locally."""

    status: Any
    value: Any
    epoch: int = 0
    local: tuple[Any, Any] | None = None


class Recoverable(Protocol):
    """Something requests go to, that may lose its actor: a shard, or a plan actor."""

    @property
    def where(self) -> str:
        """How error messages name it."""
        ...

    def recover(self, failed: Pending, node: g.Node, cause: BaseException | None) -> None:
        """Bring it back after ``failed`` found its actor dead/restarted, or raise."""
        ...


class Shard(Recoverable, Protocol):
    """Where one shard stream is computed: a plan actor, a pooled host, or the driver."""

    def request(self) -> Pending:
        """Submit a request for the shard's next item."""
        ...


def raise_failure(f: Failure) -> None:
    """Raise a host's failure as the driver-side exception the reference would raise."""
    if f.kind == "operator":
        raise OperatorError(f.operator, f.site, f.cause) from f.cause
    if f.kind == "actor":
        raise ActorError(f.message) from f.cause
    raise f.cause


def item_of(p: Pending, status: Any) -> Ref:
    """The stream item of ok request ``p`` (``status`` is OK or a value-less Tagged hint)."""
    tag = status if isinstance(status, Tagged) else None
    return Ref(p.value, tag=tag) if p.local is None else Ref(None, p.local[1], tag)


@attrs.define(eq=False)
class GroupState:
    """A plan actor group in one run: what its members host, their handles, latest broadcasts."""

    group: ActorGroup[Any]
    chains: list[dict[int, Chain]]
    effects: dict[int, g.Broadcast | g.Call] = attrs.field(factory=dict)
    members: list[Member] = attrs.field(factory=list)
    #: per broadcast occurrence, its latest item, most recently applied last
    latest: OrderedDict[int, Encoded] = attrs.field(factory=OrderedDict)
    lock: threading.Lock = attrs.field(factory=threading.Lock)


class Member:
    """The driver's view of one plan actor: submissions and restart recovery."""

    def __init__(self, ctx: RunContext, state: GroupState, index: int, handle: Handle) -> None:
        self.ctx, self.state, self.index, self.handle = ctx, state, index, handle
        group = state.group
        self.where = f"{group.name}[{index}]"
        self.max_restarts: int = group.options.get("max_restarts", 0)
        self.epoch = 0
        self.restarts = 0
        self.lock = threading.Lock()

    def pull(self, key: int) -> Pending:
        """Request the next item of chain ``key``."""
        status, value = self.handle.pull.remote(key)
        return Pending(status, value, self.epoch)

    def apply(self, fn_id: int, item: Encoded) -> Pending:
        """Submit ``fn(actor, item)`` of call/broadcast ``fn_id``."""
        shape, shard, group, values = item
        status, value = self.handle.apply.remote(fn_id, shape, shard, group, *values)
        return Pending(status, value, self.epoch)

    def recover(self, failed: Pending, node: g.Node, cause: BaseException | None) -> None:
        """After a restart: re-apply the latest broadcasts, then carry on; else raise."""
        with self.lock:
            if failed.epoch != self.epoch:
                return  # another request of the same incident already recovered the actor
            if self.max_restarts == 0 or isinstance(cause, ActorDiedError):
                raise self._death(node, cause)
            while True:
                self.restarts += 1
                with self.state.lock:
                    effects = [(fn_id, *item) for fn_id, item in self.state.latest.items()]
                ref = self.handle.refresh.remote(effects)
                try:
                    status = self.ctx.get(ref, node, self.where)
                except ActorDiedError as e:
                    raise self._death(node, e) from e
                except RayActorError as e:
                    if 0 <= self.max_restarts < self.restarts:
                        raise self._death(node, e) from e
                    continue  # restarted again while being refreshed
                if isinstance(status, Failure):
                    raise_failure(status)
                self.epoch += 1
                return

    def _death(self, node: g.Node, cause: BaseException | None) -> ActorError:
        group = self.state.group
        policy = ("its group has no restart policy (group.with_restarts(n) restarts dead actors)"
                  if self.max_restarts == 0 else
                  f"Ray gave up restarting it (max_restarts={self.max_restarts})")
        reason = _reason(cause) if cause is not None else "it was restarted"
        return ActorError(f"actor {self.where} (group built at {group.site}) died while "
                          f"running {node.describe()}: {reason}; {policy}")


def _reason(cause: BaseException) -> str:
    # Ray's actor errors: a headline, tab-indented context (ids, pid, ip), then the reason
    lines = [line.strip() for line in str(cause).splitlines()
             if line.strip() and not line.startswith("\t")]
    return " ".join(lines)[:500]


@attrs.frozen
class MemberShard:
    """Shard ``index`` of a ``from_actors`` chain: chain ``key`` on plan actor ``index``."""

    state: GroupState
    index: int
    key: int

    @property
    def where(self) -> str:
        """The actor, as error messages name it."""
        return f"{self.state.group.name}[{self.index}]"

    def request(self) -> Pending:
        """Submit a pull of the chain."""
        return self.state.members[self.index].pull(self.key)

    def recover(self, failed: Pending, node: g.Node, cause: BaseException | None) -> None:
        """Recover the plan actor (restart policy) or raise."""
        self.state.members[self.index].recover(failed, node, cause)


@attrs.define
class PoolShard:
    """A ``from_iterables`` shard chain on a pooled host actor."""

    key: tuple[str, int, int]
    where: str
    steps: tuple[g.Node, ...]
    iterator: Any
    host: Handle = None

    def request(self) -> Pending:
        """Submit a pull of the chain."""
        status, value = self.host.pull.remote(self.key)
        return Pending(status, value)

    def recover(self, failed: Pending, node: g.Node, cause: BaseException | None) -> None:
        """Pooled hosts are not restarted: their iterator position died with them."""
        raise ActorError(f"the Ray actor running {self.where} died while running "
                         f"{node.describe()}: {cause}")


class LocalShard:
    """A ``from_iterables`` shard whose iterable cannot be shipped (e.g. a generator): it runs
    on the driver, each request computed when it is submitted (as the reference does)."""

    def __init__(self, where: str, steps: tuple[g.Node, ...], iterator: Iterator[Any]) -> None:
        self.where = where
        it = iterator
        for step in steps:
            it = local_table[type(step)](step, it)
        self.it = it

    def request(self) -> Pending:
        """Compute the next item now."""
        try:
            x = next(self.it)
        except StopIteration:
            return Pending(None, None, local=(END, None))
        except OperatorError as e:
            cause = e.__cause__ if e.__cause__ is not None else e
            return Pending(None, None, local=(Failure("operator", cause, e.operator, e.site), None))
        except Exception as e:
            return Pending(None, None, local=(Failure("raw", e), None))
        status = Tagged(None, x.shard, x.group) if type(x) is Tagged else OK
        return Pending(None, None, local=(status, x))

    def recover(self, failed: Pending, node: g.Node, cause: BaseException | None) -> None:
        """Nothing to recover on the driver."""
        raise AssertionError("a driver-run shard has no actor to lose")


class HostPool:
    """Generic hosts for ``from_iterables`` shards, kept across runs of one Ray job."""

    def __init__(self) -> None:
        self.job: str | None = None
        self.hosts: list[Handle] = []
        self.lock = threading.Lock()

    def take(self, n: int) -> list[Handle]:
        """``n`` hosts of the current Ray job (created on first use)."""
        job = ray.get_runtime_context().get_job_id()
        with self.lock:
            if job != self.job:
                self.job, self.hosts = job, []
            while len(self.hosts) < n:
                self.hosts.append(HostActor.options(num_cpus=0, max_restarts=0).remote())
            return self.hosts[:n]

    def discard(self, host: Handle) -> None:
        """Forget (and kill) a host that may still be busy with a closed run."""
        with self.lock:
            if host in self.hosts:
                self.hosts.remove(host)
        _kill(host)


POOL = HostPool()


def _kill(handle: Handle) -> None:
    with contextlib.suppress(Exception):  # already dead, or Ray shut down underneath us
        ray.kill(handle, no_restart=True)


class RunContext:
    """The state of one run on the driver; lowering functions receive it."""

    def __init__(self, recorder: Recorder, on_event: EventSink | None, timeout_s: float | None,
                 start_timeout_s: float | None, iterable_hosts: int) -> None:
        self.recorder = recorder
        self.on_event = on_event
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.iterable_hosts = iterable_hosts
        self.run_id = uuid.uuid4().hex[:12]
        self.states: dict[str, GroupState] = {}
        self.pool_shards: list[PoolShard] = []
        self.pool_hosts: list[Handle] = []
        self.created: list[Handle] = []
        self.closers: list[Callable[[], None]] = []
        self.closed = threading.Event()

    # ------------------------------------------------------------------ plan actors, shards

    def state(self, group: ActorGroup[Any]) -> GroupState:
        """The run's state of ``group`` (made on first mention)."""
        state = self.states.get(group.key)
        if state is None:
            state = self.states[group.key] = GroupState(group, [{} for _ in range(group.size)])
        return state

    def open_shards(self, source: g.FromActors | g.FromIterables, steps: tuple[g.Node, ...],
                    nid: int) -> list[Shard]:
        """Register the chain collected at occurrence ``nid``, one request stream per shard."""
        if isinstance(source, g.FromActors):
            state = self.state(source.group)
            for chains in state.chains:
                chains[nid] = Chain(steps, source=source)
            return [MemberShard(state, i, nid) for i in range(source.group.size)]
        shards: list[Shard] = []
        for i in range(source.shards):
            where = f"shard {i} of {source.describe()}"
            iterator = source.open(i)
            try:
                dumps(iterator)
            except Exception:  # a generator: run this shard on the driver
                shards.append(LocalShard(where, steps, iterator))
                continue
            shard = PoolShard((self.run_id, nid, i), where, steps, iterator)
            self.pool_shards.append(shard)
            shards.append(shard)
        return shards

    def start(self) -> None:
        """Create the plan's actors (waiting until constructed) and place iterable shards."""
        started: list[tuple[Member, Any]] = []
        for state in self.states.values():
            for i in range(state.group.size):
                handle = self._create(state, i)
                member = Member(self, state, i, handle)
                state.members.append(member)
                started.append((member, handle.ready.remote()))
        if self.pool_shards:
            self.pool_hosts = POOL.take(min(self.iterable_hosts, len(self.pool_shards)))
            for j, shard in enumerate(self.pool_shards):
                shard.host = self.pool_hosts[j % len(self.pool_hosts)]
                shard.host.register.remote(shard.key, shard.steps, shard.iterator)
        if not started:
            return
        ready, _ = ray.wait([ref for _, ref in started], num_returns=len(started),
                            timeout=self.start_timeout_s)
        done = set(ready)
        for member, ref in started:
            if ref not in done:
                raise RayTimeoutError(
                    f"actor {member.where} (group built at {member.state.group.site}) was not "
                    f"constructed within start_timeout_s={self.start_timeout_s} s: Ray may "
                    "have no node "
                    f"with the resources it asks for ({dict(member.state.group.options)})")
            try:
                status = ray.get(ref)
            except RayError as e:
                raise ActorError(f"creating actor {member.where} (group built at "
                                 f"{member.state.group.site}) failed: {e}") from e
            if isinstance(status, Failure):
                raise_failure(status)

    def _create(self, state: GroupState, index: int) -> Handle:
        group = state.group
        options = dict(group.options)
        options.setdefault("max_restarts", 0)
        on_restart = options.pop("on_restart", None)
        taken = sorted(set(options) & {"name", "max_task_retries", "num_returns"})
        if taken:
            raise PlanError(repr(group), group.site, f"the Ray backend sets {taken} itself",
                            "remove them from the group's options")
        spec = MemberSpec(group.make, index, f"{group.name}[{index}]", group.site,
                          state.chains[index], dict(state.effects), on_restart)
        try:
            ordinal = list(self.states).index(group.key)  # two groups may share a name
            actor = HostActor.options(name=f"rxrl:{self.run_id}:{ordinal}:{group.name}[{index}]",
                                      max_task_retries=0, **options)
        except (TypeError, ValueError) as e:
            raise PlanError(repr(group), group.site, f"Ray refused the group's options: {e}",
                            "see docs/ray.md for the options a group takes") from e
        try:
            handle = actor.remote(spec)
        except Exception as e:  # pickling: a lambda over a lock, a local class, ...
            raise PlanError(repr(group), group.site,
                            f"its actor or functions cannot be sent to a Ray actor: "
                            f"{type(e).__name__}: {e}",
                            "use module-level classes and functions, or closures over "
                            "picklable values") from e
        self.created.append(handle)
        return handle

    def member(self, group: ActorGroup[Any], index: int) -> Member:
        """Plan actor ``index`` of ``group`` (after ``start``)."""
        return self.states[group.key].members[index]

    # ---------------------------------------------------------------- waiting, with deadlines

    def wait_any(self, heads: list[Pending], node: g.Node, wheres: Callable[[], str]) -> int:
        """The index of a completed request among ``heads`` (ready ones in list order)."""
        remote = [p.status for p in heads if p.local is None]
        if len(remote) < len(heads):  # driver-run shards are always ready: still be fair
            done = set(ray.wait(remote, num_returns=len(remote), timeout=0)[0]) if remote else set()
            return next(j for j, p in enumerate(heads) if p.local is not None or p.status in done)
        ready, _ = ray.wait(remote, num_returns=1, timeout=self.timeout_s)
        if not ready:
            raise self.timeout(node, wheres())
        first = ready[0]
        return next(j for j, p in enumerate(heads) if p.status == first)

    def wait_all(self, pending: list[Pending], node: g.Node, wheres: Callable[[], str]) -> None:
        """Return once every request in ``pending`` completed."""
        remote = [p.status for p in pending if p.local is None]
        if remote:
            ready, _ = ray.wait(remote, num_returns=len(remote), timeout=self.timeout_s)
            if len(ready) < len(remote):
                raise self.timeout(node, wheres())

    def get(self, ref: Any, node: g.Node, where: str) -> Any:
        """``ray.get(ref)`` within the deadline."""
        ready, _ = ray.wait([ref], timeout=self.timeout_s)
        if not ready:
            raise self.timeout(node, where)
        return ray.get(ref)

    def settle(self, p: Pending, shard: Recoverable, node: g.Node) -> Any:
        """The status of completed request ``p``, or None if its actor had to be recovered
        (the caller resubmits)."""
        if p.local is not None:
            return p.local[0]
        try:
            status = ray.get(p.status)
        except RayActorError as e:
            shard.recover(p, node, e)
            return None
        except RayError as e:
            raise ActorError(f"{shard.where} failed while running {node.describe()}: {e}") from e
        if status == STALE:
            shard.recover(p, node, None)
            return None
        return status

    def timeout(self, node: g.Node, where: str) -> RayTimeoutError:
        """The error of a wait that ran past ``timeout_s``."""
        return RayTimeoutError(
            f"{node.describe()}: no result from {where} within timeout_s={self.timeout_s} s — "
            "a call may be stuck, or take longer: pass a larger timeout_s to rxrl.run")

    # ---------------------------------------------------------------------- records, close

    def record(self, nid: int, node: g.Node, choice: int, ready: list[int]) -> None:
        """Note the input taken at choice point ``nid``."""
        self.recorder.record(nid, choice)
        if self.on_event is not None:
            self.on_event(Event("choice", nid, node.label, None, choice, str(ready)))

    def effect(self, nid: int, node: g.Broadcast | g.Call, index: int, item: Any) -> None:
        """Report an actor effect to ``on_event``."""
        if self.on_event is not None:
            self.on_event(Event("call", nid, node.label, index, item,
                                f"{node.group.name}[{index}].{g.fn_name(node.fn)}"))

    def close(self) -> None:
        """Stop the run: end merge threads, kill its actors, release pooled hosts (idempotent)."""
        if self.closed.is_set():
            return
        self.closed.set()
        for closer in self.closers:
            closer()
        for handle in self.created:
            _kill(handle)
        if self.pool_hosts and ray.is_initialized():
            releases = {h.release.remote(self.run_id): h for h in self.pool_hosts}
            # releases queue behind the run's last requests: a host that cannot finish them
            # promptly is still busy with user code, and is replaced rather than waited for
            done, _ = ray.wait(list(releases), num_returns=len(releases), timeout=2.0)
            for ref, host in releases.items():
                if ref not in done:
                    POOL.discard(host)


def describe_shards(shards: list[Shard], live: Iterator[int] | list[int]) -> str:
    """``A[0], A[2]``: the shards a wait is waiting for."""
    return ", ".join(shards[i].where for i in live)
