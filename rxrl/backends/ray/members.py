"""The driver's handles on where requests go: plan actors (with restart recovery), pooled
hosts of iterable shards, and shards run on the driver itself."""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import ray
from ray.exceptions import ActorDiedError, RayActorError

from rxrl import graph as g
from rxrl.actors import ActorGroup, Tagged
from rxrl.backends.ray.host import END, OK, Chain, Failure, Host, Shape, pack
from rxrl.backends.reference import local_table
from rxrl.errors import ActorError, OperatorError

if TYPE_CHECKING:
    from rxrl.backends.ray.runtime import RunContext

#: a Ray actor handle of ``Host`` (Ray's handle types do not describe ``num_returns=2``)
Handle = Any
#: an item encoded for ``Host.apply``: (shape, shard, group, values)
Encoded = tuple[Shape, int | None, Any, tuple[Any, ...]]

HostActor = ray.remote(Host)


@attrs.frozen(slots=True)
class Ref:
    """A driver-stream item whose value lives in Ray's object store (``ref``), or, for a shard
    run on the driver, already here (``local``). ``tag`` is the routing tag of a Tagged value."""

    ref: Any
    local: Any = None
    tag: Tagged[None] | None = None


@attrs.define(slots=True)
class Pending:
    """A submitted request: its status and value refs, or its result once it is on the driver
    (``local``: computed here, or read as one object because the driver needs the value)."""

    status: Any
    value: Any
    epoch: int = 0
    local: tuple[Any, Any] | None = None
    #: the reply is one ``(status, value)`` object (``status`` is its ref)
    both: bool = False


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

    def request(self, both: bool) -> Pending:
        """Submit a request for the shard's next item (``both``: as one object)."""
        ...

    def current(self, p: Pending) -> bool:
        """Whether ``p`` was submitted after the shard's last recovery (so it stays valid)."""
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
        #: the broadcast items the last refresh re-applied (by broadcast occurrence)
        self.refreshed: dict[int, Encoded] = {}
        chains = state.chains[index]
        #: the key of the actor's only shard chain, pulled with ``Host.next`` (no argument)
        self.only: int | None = next(iter(chains)) if len(chains) == 1 else None

    # Submissions hold the lock that a recovery holds from its refresh to its new epoch, so a
    # request's epoch says exactly whether it was sent before or after the refresh.

    def pull(self, key: int, both: bool) -> Pending:
        """Request the next item of chain ``key``."""
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
                    latest = dict(self.state.latest)
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
                self.refreshed = latest
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

    def request(self, both: bool) -> Pending:
        """Submit a pull of the chain."""
        return self.state.members[self.index].pull(self.key, both)

    def current(self, p: Pending) -> bool:
        """Whether ``p`` was submitted to the actor's present life, after its refresh."""
        return p.epoch == self.state.members[self.index].epoch

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

    def request(self, both: bool) -> Pending:
        """Submit a pull of the chain."""
        if both:
            return Pending(self.host.pull_both.remote(self.key), None, both=True)
        status, value = self.host.pull.remote(self.key)
        return Pending(status, value)

    def current(self, p: Pending) -> bool:
        """Pooled hosts are never recovered: every request stays valid."""
        return True

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

    def request(self, both: bool) -> Pending:
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

    def current(self, p: Pending) -> bool:
        """Always: nothing is lost on the driver."""
        return True

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
        kill(host)


POOL = HostPool()


def kill(handle: Handle) -> None:
    """Kill a Ray actor for good, if it is still there."""
    with contextlib.suppress(Exception):  # already dead, or Ray shut down underneath us
        ray.kill(handle, no_restart=True)
