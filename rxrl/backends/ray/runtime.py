"""Driver-side runtime of one Ray run: its actors and shards, waits with deadlines, recovery."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError

from rxrl import graph as g
from rxrl.actors import ActorGroup
from rxrl.backends.ray.host import STALE, Chain, Failure, MemberSpec, dumps
from rxrl.backends.ray.members import (
    POOL,
    GroupState,
    Handle,
    HostActor,
    LocalShard,
    Member,
    MemberShard,
    Pending,
    PoolShard,
    Recoverable,
    Shard,
    kill,
    raise_failure,
)
from rxrl.errors import ActorError, PlanError, RxrlError
from rxrl.events import Event, EventSink
from rxrl.schedule import Recorder


class RayTimeoutError(RxrlError, TimeoutError):
    """A Ray run waited longer than its ``timeout_s`` for an actor, a shard or an input."""


class RunContext:
    """The state of one run on the driver; lowering functions receive it."""

    def __init__(self, recorder: Recorder, on_event: EventSink | None, timeout_s: float | None,
                 start_timeout_s: float | None, iterable_hosts: int,
                 max_pending_broadcasts: int = 4) -> None:
        self.recorder = recorder
        self.max_pending_broadcasts = max_pending_broadcasts
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

    def landed(self, pending: list[Pending]) -> bool:
        """Whether every request in ``pending`` has completed (without waiting)."""
        remote = [p.status for p in pending if p.local is None]
        return not remote or len(ray.wait(remote, num_returns=len(remote), timeout=0)[0]) == len(
            remote)

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

    def settle(self, p: Pending, shard: Recoverable, node: g.Node, *, wait: bool = False) -> Any:
        """The status of completed request ``p`` (``wait``: once it completes, within the
        deadline), or None if its actor had to be recovered (the caller resubmits)."""
        if p.local is not None:
            return p.local[0]
        try:
            status = ray.get(p.status, timeout=self.timeout_s if wait else None)
            if p.both:
                p.local = status
                status = status[0]
        except GetTimeoutError as e:
            raise self.timeout(node, shard.where) from e
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
            kill(handle)
        if self.created and ray.is_initialized():
            self._await_killed()
        if self.pool_hosts and ray.is_initialized():
            releases = {h.release.remote(self.run_id): h for h in self.pool_hosts}
            # releases queue behind the run's last requests: a host that cannot finish them
            # promptly is still busy with user code, and is replaced rather than waited for
            done, _ = ray.wait(list(releases), num_returns=len(releases), timeout=2.0)
            for ref, host in releases.items():
                if ref not in done:
                    POOL.discard(host)


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


def describe_shards(shards: list[Shard], live: Iterator[int] | list[int]) -> str:
    """``A[0], A[2]``: the shards a wait is waiting for."""
    return ", ".join(shards[i].where for i in live)
