"""Where requests go on Ray, and the one layer that recovers restarted actors under them.

A request to a plan actor is a ``RayRequest``: the engine sees it complete and reads its
outcome. If the actor died and Ray restarted it, reading the outcome recovers the actor
*inside* the request: the latest broadcasts are re-applied, every request the actor had
outstanding from its old life is sent again in its original order (a broadcast's effect is
covered by the re-application), and the outcome is that of the new request. No operator
knows about restarts. Pooled hosts of iterable shards and shards run on the driver complete
the same interface.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError
from concurrent.futures import wait as futures_wait
from typing import TYPE_CHECKING, Any

import attrs
import ray
from ray.exceptions import (
    ActorDiedError,
    ActorUnavailableError,
    GetTimeoutError,
    OwnerDiedError,
    RayActorError,
    RayError,
)

from rxrl import graph as g
from rxrl.actors import ActorGroup, Tagged
from rxrl.backends.engine.stream import Request, Shard
from rxrl.backends.local import LOCAL
from rxrl.backends.ray.connect import local_ray_lost
from rxrl.backends.ray.cores import pin_thread
from rxrl.backends.ray.host import END, NOT_READY, OK, STALE, Chain, Failure, Host, Shape, pack
from rxrl.errors import ActorError, BackendStoppedError, OperatorError, RestartWarning

if TYPE_CHECKING:
    from rxrl.backends.ray.runtime import RayRuntime

#: the first and the longest wait before asking a restarting actor again (`RayMember.recover`)
_RESTARTING_POLL_S, _RESTARTING_POLL_MAX_S = 0.01, 0.5
#: a Ray actor handle of ``Host`` (Ray's handle types do not describe ``num_returns=2``)
Handle = Any
#: an item encoded for ``Host.apply``: (shape, shard, group, values)
Encoded = tuple[Shape, int | None, Any, tuple[Any, ...]]

HostActor = ray.remote(Host)


@attrs.frozen(slots=True)
class Ref:
    """A driver-stream item whose value lives in Ray's object store (``ref``), or, for a shard
    run on the driver or a value read in one object with its status, already here (``local``).
    ``tag`` is the routing tag of a Tagged value."""

    ref: Any
    local: Any = None
    tag: Tagged[None] | None = None


class Round(list[Ref]):
    """A barrier round: one ``Ref`` per shard."""


@attrs.define(slots=True)
class Pending:
    """A submitted request's reply refs, or its reply once on the driver (``local``)."""

    status: Any
    value: Any
    epoch: int = 0
    local: tuple[Any, Any] | None = None
    #: the reply is one ``(status, value)`` object (``status`` is its ref)
    both: bool = False
    #: sent through an aggregator: ``status`` holds the refs of the actor's reply
    relayed: bool = False
    #: the aggregator it was sent through (its target): it owns the actor's reply refs
    via: Any = None
    #: the life of that aggregator (its ``epoch``) when it was sent through it
    life: int = 0
    #: ``status`` as a ``Future`` (see `ready`)
    future: Future[Any] | None = None

    def future_of(self) -> Future[Any]:
        """``status`` as a ``Future``: itself for a driver-hosted actor's reply; an object
        ref's ``future()``, asked for once (Ray calls back once per ``future()``)."""
        if type(self.status) is Future:
            return self.status
        if self.future is None:
            self.future = self.status.future()
        return self.future


def fetch_reply(ref: Any, timeout_s: float | None) -> Any:
    """``ray.get(ref)``, or the result of a driver-hosted actor's ``Future``, within ``timeout_s``
    (``GetTimeoutError`` past it, either way)."""
    if type(ref) is Future:
        try:
            return ref.result(timeout_s)
        except FutureTimeoutError as e:
            raise GetTimeoutError(str(e)) from e
    return ray.get(ref, timeout=timeout_s)


def ready(requests: Sequence[RayRequest], num_returns: int, timeout_s: float | None) -> list[RayRequest]:
    """The requests of ``requests`` whose replies have landed, in their order: at most
    ``num_returns``, waiting until as many have (or ``timeout_s`` passed; 0: look, do not
    wait), as ``ray.wait`` does over their refs. A driver-hosted actor's reply is a
    ``Future``; to block on both kinds at once, an object ref is waited on through its
    ``future()`` (asked once per reply: ``Pending.future``)."""
    refs = [r.p.status for r in requests]
    if not any(type(ref) is Future for ref in refs):
        if not refs:
            return []
        landed = ray.wait(refs, num_returns=num_returns, timeout=timeout_s)[0]
        if len(landed) == 1:
            return [requests[refs.index(landed[0])]]
        seen = set(landed)
        return [r for r, ref in zip(requests, refs, strict=True) if ref in seen]
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        objects = [ref for ref in refs if type(ref) is not Future]
        seen = set(ray.wait(objects, num_returns=len(objects), timeout=0)[0]) if objects else set()
        landed = [ref.done() if type(ref) is Future else ref in seen for ref in refs]
        done = [r for r, is_done in zip(requests, landed, strict=True) if is_done]
        left = None if deadline is None else deadline - time.monotonic()
        if len(done) >= num_returns or (left is not None and left <= 0):
            return done[:num_returns]
        waiting = [r.p.future_of() for r, is_done in zip(requests, landed, strict=True) if not is_done]
        futures_wait(waiting, timeout=left, return_when=FIRST_COMPLETED)


def raise_failure(f: Failure) -> None:
    """Raise a host's failure as the driver-side exception the reference would raise."""
    if f.kind == "operator":
        raise OperatorError(f.operator, f.site, f.cause) from f.cause
    if f.kind == "actor":
        raise ActorError(f.message) from f.cause
    raise f.cause


class RayRequest(Request):
    """A request on Ray (see the module docstring). ``send`` submits it (again after a restart)."""

    __slots__ = ("_done", "effect", "nid", "node", "p", "rt", "send", "target")

    def __init__(self, rt: RayRuntime, target: Target, node: g.Node, send: Callable[[], Pending],
                 effect: bool = False, nid: int = -1) -> None:
        self.rt, self.target, self.node, self.send, self.effect = rt, target, node, send, effect
        self.nid = nid
        if rt.report.on_event is not None:
            rt.report.request("sent", nid, node, self, target.where)
        self.p = send()
        self._done = False
        if self.p.local is not None:
            self._seen()
        else:
            rt.running[id(self)] = self
            target.sent(self)

    def _seen(self) -> None:
        if not self._done:
            self._done = True
            self.rt.running.pop(id(self), None)
            self.stamp = self.rt.observed()
            if self.rt.report.on_event is not None:
                self.rt.report.request("done", self.nid, self.node, self, self.target.where)

    def done(self) -> bool:
        """Whether the runtime has seen it complete (``RayRuntime.poll`` and the waits look)."""
        return self._done

    def mark(self) -> None:
        """The runtime saw it complete."""
        self._seen()

    def resend(self) -> None:
        """Submit it again (its actor was restarted); a broadcast's effect was re-applied."""
        self._done = False
        self.stamp = 0
        if self.effect:
            self.p = Pending(None, None, self.target.epoch, local=(OK, None))
            self._seen()
            self.target.settled(self)
            return
        self.p = self.send()
        self.rt.running[id(self)] = self

    def fetch(self) -> Any:
        """The reply's status object, within the run's deadline; a dead actor's
        ``RayActorError`` passes (the caller recovers it), Ray's other errors are ActorErrors."""
        try:
            if self.rt.report.on_event is None:
                return fetch_reply(self.p.status, self.rt.options.timeout_s)
            with self.rt.report.waiting(self.target.where):
                return fetch_reply(self.p.status, self.rt.options.timeout_s)
        except GetTimeoutError as e:
            raise self.rt.timeout(self.node, self.target.where) from e
        except RayActorError:
            raise
        except OwnerDiedError as e:  # the reply refs an aggregator handed on died with it
            if self.p.via is not None:
                raise  # the caller revives the aggregator
            raise ActorError(f"{self.target.where} failed while running "
                             f"{self.node.describe()}: {e}") from e
        except RayError as e:
            raise ActorError(f"{self.target.where} failed while running "
                             f"{self.node.describe()}: {e}") from e

    def revived(self, revive: Callable[[], None]) -> None:
        """Run ``revive`` (an aggregator made again, which sends its outstanding requests
        again, or raises); then this request too, if it was not among those it sent."""
        sent = self.p
        revive()
        if self.p is sent:
            self.resend()

    def status(self) -> Any:
        """The reply's status, recovering the actor (and waiting again) if it had died."""
        while True:
            if self.p.local is not None:
                return self.p.local[0]
            try:
                status = self.fetch()
            except (RayActorError, OwnerDiedError) as e:
                if self.p.via is not None and (self.p.relayed or isinstance(e, OwnerDiedError)):
                    # the aggregator died, not the actor: a new one sends this again (or raises)
                    via, life = self.p.via, self.p.life
                    self.revived(functools.partial(via.revive, life, self.node, e))
                    continue
                self.target.recover(self, self.node, e)
                continue
            self._seen()
            if self.p.relayed:  # the aggregator sent it on: now wait for the actor's reply
                self.p = Pending(status[0], status[1], self.p.epoch, both=self.p.both, via=self.p.via,
                                 life=self.p.life)
                continue
            if self.p.both:
                self.p.local = status
                status = status[0]
            if status == STALE:
                self.target.recover(self, self.node, None)
                continue
            self.target.settled(self)
            return status

    def outcome(self) -> Any:
        status = self.status()
        if status is END or status is NOT_READY:
            return status
        if isinstance(status, Failure):
            raise_failure(status)
        tag = status if isinstance(status, Tagged) else None
        p = self.p
        return Ref(p.value, tag=tag) if p.local is None else Ref(None, p.local[1], tag)


class Target:
    """Something requests go to: a plan actor (recoverable), a pooled host, the driver."""

    where: str
    epoch: int = 0

    def sent(self, request: RayRequest) -> None:
        """``request`` was submitted to it."""

    def settled(self, request: RayRequest) -> None:
        """``request``'s reply was read."""

    def recover(self, failed: RayRequest, node: g.Node, cause: BaseException | None) -> None:
        """Bring it back after ``failed`` found its actor dead/restarted, or raise."""
        raise ActorError(f"the Ray actor running {self.where} died while running "
                         f"{node.describe()}: {cause}")


@attrs.define(eq=False)
class GroupState:
    """A plan actor group in one run: what its members host, their handles, latest broadcasts."""

    group: ActorGroup[Any]
    chains: list[dict[int, Chain]]
    effects: dict[int, g.Broadcast | g.Call | g.CallAll] = attrs.field(factory=dict)
    members: list[Member] = attrs.field(factory=list)
    #: per broadcast occurrence, its latest item, most recently applied last
    latest: OrderedDict[int, Encoded] = attrs.field(factory=OrderedDict)
    #: the aggregator that pulls each aggregated member (by index): the driver's requests to
    #: that member go through it
    owners: dict[int, Any] = attrs.field(factory=dict)


class Member(Target):
    """The driver's view of one plan actor: submissions, outstanding requests, recovery."""

    def __init__(self, rt: RayRuntime, state: GroupState, index: int, handle: Handle) -> None:
        self.rt, self.state, self.index, self.handle = rt, state, index, handle
        group = state.group
        self.where = f"{group.name}[{index}]"
        self.max_restarts: int = group.options.get("max_restarts", 0)
        self.epoch = 0
        self.restarts = 0
        #: the id of the node the actor runs on (known once it is constructed)
        self.node_id: str | None = None
        self.lock = threading.RLock()
        #: requests submitted and not yet read, in submission order
        self.outstanding: dict[int, RayRequest] = {}
        chains = state.chains[index]
        #: the key of the actor's only shard chain, pulled with ``Host.next`` (no argument)
        self.only: int | None = next(iter(chains)) if len(chains) == 1 else None

    def sent(self, request: RayRequest) -> None:
        self.outstanding[id(request)] = request

    def settled(self, request: RayRequest) -> None:
        self.outstanding.pop(id(request), None)

    def pull(self, key: int, both: bool) -> Pending:
        """Submit a request for the next item of chain ``key``."""
        with self.lock:
            if key == self.only:  # no argument to send (see Host.next)
                if both:
                    return Pending(self.handle.next_both.remote(), None, self.epoch, both=True)
                status, value = self.handle.next.remote()
            elif both:
                return Pending(self.handle.pull_both.remote(key), None, self.epoch, both=True)
            else:
                status, value = self.handle.pull.remote(key)
            return Pending(status, value, self.epoch)

    def apply(self, fn_id: int, item: Encoded, both: bool = False) -> Pending:
        """Submit ``fn(actor, item)`` of call/broadcast ``fn_id``."""
        shape, shard, group, values = item
        header = pack(fn_id, shape, shard, group)
        with self.lock:
            if both:
                return Pending(self.handle.apply_both.remote(header, *values), None, self.epoch,
                               both=True)
            status, value = self.handle.apply.remote(header, *values)
            return Pending(status, value, self.epoch)

    def effect(self, fn_id: int, item: Encoded) -> Pending:
        """Submit ``fn(actor, item)`` of broadcast ``fn_id``, answering with its status alone."""
        shape, shard, group, values = item
        with self.lock:
            return Pending(self.handle.effect.remote(pack(fn_id, shape, shard, group), *values),
                           None, self.epoch)

    def recover(self, failed: RayRequest, node: g.Node, cause: BaseException | None) -> None:
        """After a restart: re-apply the latest broadcasts, send the old life's outstanding
        requests again, in order; without a restart policy (or past it), raise."""
        with self.lock:
            if failed.p.epoch != self.epoch:
                return  # already sent again to the new life by an earlier recovery
            if self.max_restarts == 0 or isinstance(cause, ActorDiedError) or local_ray_lost():
                raise self._death(node, cause)
            self.restarts += 1
            self.bring_up_to_date(node)
            self.resend()
            warn_restarted(f"actor {self.where}", node, cause, self.node_id, self.restarts,
                           self.max_restarts)

    def bring_up_to_date(self, node: g.Node) -> None:
        """Re-apply the latest broadcasts to the actor (waiting while Ray restarts it), so that
        it serves requests again; raise if it died for good."""
        with self.lock:
            backoff = _RESTARTING_POLL_S
            while True:
                effects = [(fn_id, *item) for fn_id, item in self.state.latest.items()]
                ref = self.handle.refresh.remote(effects)
                try:
                    status = self.rt.get(ref, node, self.where)
                except ActorDiedError as e:
                    raise self._death(node, e) from e
                except ActorUnavailableError:
                    # still restarting (a loaded machine takes seconds): the same restart, not
                    # another one; Ray ends it either way (a new life, or ActorDiedError)
                    time.sleep(backoff)
                    backoff = min(2 * backoff, _RESTARTING_POLL_MAX_S)
                    continue
                except RayActorError as e:
                    self.restarts += 1  # restarted again while being refreshed
                    if 0 <= self.max_restarts < self.restarts:
                        raise self._death(node, e) from e
                    continue
                if isinstance(status, Failure):
                    raise_failure(status)
                self.node_id = status
                return

    def resend(self) -> None:
        """Begin a new life: send every request outstanding from an earlier one again, in
        submission order (through the member's aggregator as it is now, if it has one)."""
        with self.lock:
            self.epoch += 1
            for request in list(self.outstanding.values()):
                if request.p.epoch != self.epoch:
                    request.resend()

    def _death(self, node: g.Node, cause: BaseException | None) -> ActorError:
        group = self.state.group
        lost = local_ray_lost()
        info = None if lost is not None else node_info(self.node_id)
        if lost is None and info is not None:
            lost = local_ray_lost(self.node_id, bool(info.get("Alive")))
        if lost is not None:  # nothing more to ask the GCS, nothing to restart
            return BackendStoppedError(
                f"actor {self.where} (group built at {group.site}) died while running "
                f"{node.describe()}: the local Ray this run started has stopped ({lost}; a "
                f"signal sent to every process, as a batch scheduler's stop sends it, reaches "
                f"Ray's processes too)")
        policy = ("its group has no restart policy (group.with_restarts(n) restarts dead actors)"
                  if self.max_restarts == 0 else
                  f"Ray gave up restarting it (max_restarts={self.max_restarts})")
        reason = death_reason(cause) if cause is not None else "it was restarted"
        where = on_node(self.node_id, info)
        return ActorError(f"actor {self.where} (group built at {group.site}) {where}died "
                          f"while running {node.describe()}: {reason}; {policy}")


def warn_restarted(what: str, node: g.Node, cause: BaseException | None, node_id: str | None,
                   count: int, limit: int) -> None:
    """Warn (``RestartWarning``) that ``what`` died while running ``node`` and runs again."""
    reason = death_reason(cause) if cause is not None else "it was restarted"
    if len(reason) > 160:
        reason = reason[:157] + "..."
    of = f"{count}, no limit" if limit < 0 else f"{count} of {limit}"
    warnings.warn(f"{what} died while running {node.describe()} ({reason}); it runs again "
                  f"{on_node(node_id)}(restart {of}) and the run goes on", RestartWarning, stacklevel=2)


def node_info(node_id: str | None) -> dict[str, Any] | None:
    """What Ray's GCS says of node ``node_id`` (``ray.nodes()``'s entry), or None: unknown, or
    the cluster itself is going."""
    if node_id is None:
        return None
    untyped: Any = ray
    try:
        nodes = {n["NodeID"]: n for n in untyped.nodes()}
    except Exception:  # the cluster itself is going
        return None
    info: dict[str, Any] | None = nodes.get(node_id)
    return info


def on_node(node_id: str | None, info: dict[str, Any] | None = None) -> str:
    """``"on node <id> (<address>, lost) "`` for a death message: the node an actor ran on, its
    address and whether Ray still counts it alive (``info``, else asked of the GCS); empty
    when unknown."""
    if node_id is None:
        return ""
    info = info if info is not None else node_info(node_id)
    if info is None:
        return f"on node {node_id[:12]} "
    state = "alive" if info.get("Alive") else "lost"
    return f"on node {node_id[:12]} ({info.get('NodeManagerAddress', '?')}, {state}) "


class DriverMember(Member):
    """A plan actor hosted on the driver (a group made with ``on_driver()``): its requests run
    in submission order on a thread of its own, as a Ray actor runs them in its process, so
    the driver routes the rest of the plan while it works (a DQN learner trains while the
    workers' rounds are stored). The values it takes are fetched from the object store on
    that thread; its replies stay on the driver (a ``Future`` of ``(status, value)``)."""

    def __init__(self, rt: RayRuntime, state: GroupState, index: int, host: Host,
                 cpus: Collection[int] | None = None) -> None:
        super().__init__(rt, state, index, None)
        self.host = host
        self.where = f"{self.where} (on the driver)"
        self.closed = False
        # with ``cpus`` (the group's own_cores), the thread runs on those alone
        pinned: dict[str, Any] = {} if cpus is None else {"initializer": pin_thread, "initargs": (cpus,)}
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"rxrl {self.where}", **pinned)
        self.last: Future[Any] | None = None

    def _submit(self, job: Callable[[], tuple[Any, Any]]) -> Pending:
        def run() -> tuple[Any, Any]:
            if self.closed:  # the run closed with this queued: not run
                return END, None
            return job()

        self.last = self.thread.submit(run)
        return Pending(self.last, None, both=True)

    def pull(self, key: int, both: bool) -> Pending:
        return self._submit(functools.partial(self.host.pull_both, key))

    def _values(self, item: Encoded) -> tuple[Any, ...]:
        """The values of ``item``: its refs fetched, as Ray resolves them for an actor's call."""
        shape, _, _, values = item
        if shape == "value":
            return values
        timeout = self.rt.options.timeout_s
        try:
            return tuple(ray.get(list(values), timeout=timeout))
        except GetTimeoutError as e:
            from rxrl.backends.ray.runtime import RayTimeoutError

            raise RayTimeoutError(f"{self.where}: the item it was sent could not be fetched from "
                                  f"the object store within timeout_s={timeout} s") from e
        except RayError as e:
            raise ActorError(f"{self.where}: the item it was sent could not be fetched from the "
                             f"object store: {death_reason(e)}") from e

    def apply(self, fn_id: int, item: Encoded, both: bool = False) -> Pending:
        header = pack(fn_id, *item[:3])
        return self._submit(lambda: self.host.apply_both(header, *self._values(item)))

    def effect(self, fn_id: int, item: Encoded) -> Pending:
        header = pack(fn_id, *item[:3])
        return self._submit(lambda: (self.host.apply_both(header, *self._values(item))[0], None))

    def close(self, timeout_s: float) -> bool:
        """Let go of the actor once the call it is running returns (those queued behind it
        do not run); False if that call did not return within ``timeout_s``."""
        self.closed = True
        last = self.last
        self.thread.submit(self.host.discard)
        self.thread.shutdown(wait=False)
        if last is None:
            return True
        done, _ = futures_wait([last], timeout=timeout_s)
        return bool(done)


def death_reason(cause: BaseException) -> str:
    # Ray's actor errors: a headline, tab-indented context (ids, pid, ip), then the reason
    lines = [line.strip() for line in str(cause).splitlines()
             if line.strip() and not line.startswith("\t")]
    return " ".join(lines)


class MemberShard(Shard):
    """Shard ``index`` of a ``from_actors`` chain: chain ``key`` on plan actor ``index``."""

    def __init__(self, rt: RayRuntime, node: g.Node, state: GroupState, index: int, key: int
                 ) -> None:
        self.rt, self.node, self.state, self.index, self.key = rt, node, state, index, key
        self.group = state.group
        self.where = f"{state.group.name}[{index}]"

    def request(self, want: bool) -> Request:
        member = self.state.members[self.index]
        return RayRequest(self.rt, member, self.reader or self.node,
                          lambda: member.pull(self.key, want), nid=self.reader_id)


class PoolTarget(Target):
    """A ``from_iterables`` shard chain on a pooled host actor (never restarted: its
    iterator's position died with it)."""

    def __init__(self, key: tuple[str, int, int], where: str, steps: tuple[g.Node, ...],
                 iterator: Any) -> None:
        self.key, self.where, self.steps, self.iterator = key, where, steps, iterator
        self.host: Handle = None

    def pull(self, both: bool) -> Pending:
        """Submit a pull of the chain."""
        if both:
            return Pending(self.host.pull_both.remote(self.key), None, both=True)
        status, value = self.host.pull.remote(self.key)
        return Pending(status, value)


class PoolShard(Shard):
    """A shard of ``from_iterables`` on a pooled host."""

    def __init__(self, rt: RayRuntime, node: g.Node, target: PoolTarget, index: int) -> None:
        self.rt, self.node, self.target, self.index = rt, node, target, index
        self.where, self.group = target.where, None

    def request(self, want: bool) -> Request:
        return RayRequest(self.rt, self.target, self.reader or self.node,
                          lambda: self.target.pull(want), nid=self.reader_id)


class LocalShard(Shard, Target):
    """A ``from_iterables`` shard whose iterable cannot be shipped (e.g. a generator): it runs
    on the driver, each request computed when it is submitted (as the reference does)."""

    def __init__(self, rt: RayRuntime, node: g.Node, where: str, steps: tuple[g.Node, ...],
                 iterator: Iterator[Any], index: int) -> None:
        self.rt, self.node, self.where, self.index, self.group = rt, node, where, index, None
        it = iterator
        for step in steps:
            it = LOCAL[type(step)](step, it)
        self.it = it

    def _next(self) -> Pending:
        try:
            x = next(self.it)
        except StopIteration:
            return Pending(None, None, local=(END, None))
        except OperatorError as e:
            cause = e.__cause__ if e.__cause__ is not None else e
            return Pending(None, None, local=(Failure("operator", cause, e.operator, e.site), None))
        except Exception as e:
            return Pending(None, None, local=(Failure("raw", e), None))
        if x is NOT_READY:
            return Pending(None, None, local=(NOT_READY, None))
        status = Tagged(None, x.shard, x.group) if type(x) is Tagged else OK
        return Pending(None, None, local=(status, x))

    def request(self, want: bool) -> Request:
        return RayRequest(self.rt, self, self.reader or self.node, self._next, nid=self.reader_id)


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
        kill(host)


POOL = HostPool()


def kill(handle: Handle) -> None:
    """Kill a Ray actor for good, if it is still there."""
    with contextlib.suppress(Exception):  # already dead, or Ray shut down underneath us
        ray.kill(handle, no_restart=True)
