"""Ray backend: synchronization observed inside the actors, object-ref passthrough, options."""

from __future__ import annotations

import gc
import importlib
import itertools
import os
import pickle
import re
import sys
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray

import rxrl
from rxrl import ActorGroup, ops
from rxrl.backends.ray import RayTimeoutError
from rxrl.backends.ray.runtime import stored_per_call
from tests.conformance.harness import Adder, Counter, CountingIterable, is_merge

pytestmark = [pytest.mark.usefixtures("ray_session"), pytest.mark.timeout(120)]


# ------------------------------------------------------------------- an event log in Ray


class Ledger:
    """A causally ordered log: actors note events synchronously, tests read and wait on it."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.cond = threading.Condition()

    def note(self, *event: Any) -> None:
        with self.cond:
            self.events.append(event)
            self.cond.notify_all()

    def read(self) -> list[tuple[Any, ...]]:
        with self.cond:
            return list(self.events)

    def wait_for(self, event: tuple[Any, ...], timeout: float) -> bool:
        """Wait until ``event`` was noted; whether it was."""
        with self.cond:
            return self.cond.wait_for(lambda: event in self.events, timeout)

    def wait_for_starts(self, shard: int, count: int, timeout: float) -> int:
        """Wait until shard ``shard`` started ``count`` samples; return how many it started."""
        with self.cond:
            self.cond.wait_for(lambda: _starts(self.events, shard) >= count, timeout)
            return _starts(self.events, shard)


def new_ledger() -> Any:
    """A Ledger actor (threaded, so that waits and notes can overlap)."""
    remote: Any = ray.remote
    return remote(num_cpus=0, max_concurrency=4)(Ledger).remote()


def _starts(events: list[tuple[Any, ...]], shard: int) -> int:
    return sum(1 for e in events if e[0] == "start" and e[1] == shard)


class LoggedWorker:
    """A rollout-worker stand-in that notes each sample it starts in the ledger."""

    def __init__(self, index: int, ledger: Any) -> None:
        self.index = index
        self.ledger = ledger
        self.samples = 0

    def sample(self) -> tuple[int, int]:
        ray.get(self.ledger.note.remote("start", self.index, self.samples))
        self.samples += 1
        return self.index, self.samples - 1


def logged_workers(n: int, ledger: Any) -> rxrl.ActorGroup[LoggedWorker]:
    return rxrl.indexed_actors(lambda i: LoggedWorker(i, ledger), n, name="LoggedWorker")


def test_barrier_requests_no_sample_of_round_r_plus_1_before_round_r_is_pulled() -> None:
    ledger = new_ledger()
    plan = rxrl.from_actors(logged_workers(3, ledger), LoggedWorker.sample) | ops.barrier()
    with rxrl.run(plan, "ray") as run:
        for r in range(4):
            batch = next(run)
            assert batch == [(i, r) for i in range(3)]
            started = ray.get(ledger.read.remote())
            # every sample of round r started; none of round r + 1 has been requested
            assert sorted(e[1:] for e in started) == sorted((i, j) for i in range(3) for j in range(r + 1))


@pytest.mark.parametrize("k", [1, 3])
def test_gather_keeps_exactly_k_samples_in_flight_per_worker(k: int) -> None:
    ledger = new_ledger()
    plan = rxrl.from_actors(logged_workers(2, ledger), LoggedWorker.sample) | ops.gather(k)
    taken = [0, 0]
    with rxrl.run(plan, "ray") as run:
        for shard, j in itertools.islice(run, 12):
            assert j == taken[shard]  # each worker's order is kept
            taken[shard] += 1
            for s in (0, 1):
                # the staleness bound: started <= taken + k, and the pipeline is full
                started = ray.get(ledger.wait_for_starts.remote(s, taken[s] + k, 30.0))
                assert started == taken[s] + k


def test_an_async_union_reads_at_most_one_item_ahead_per_input() -> None:
    fast = CountingIterable()
    slow = rxrl.from_iterables([list(range(3))]) | ops.gather()
    with rxrl.run(ops.union(rxrl.from_iterable(fast), slow, mode="async"), "ray") as run:
        taken = list(itertools.islice(run, 20))
        # one item buffered and one being handed over, however fast the input is
        assert fast.pulled <= sum(1 for x in taken if x >= 0) + 2
    assert fast.pulled < 40


class Gate:
    """A gate that actors wait at until the test opens it."""

    def __init__(self) -> None:
        self.opened = threading.Event()

    def wait(self, timeout: float) -> bool:
        return self.opened.wait(timeout)

    def open(self) -> None:
        self.opened.set()


def test_a_broadcast_moves_on_while_its_effects_run_and_they_land_in_order() -> None:
    """The driver does not wait for a broadcast's effects: with the first effect held on
    every actor, ``max_pending_broadcasts`` items still pass; once it lands, every actor has
    applied every item, in order."""
    remote: Any = ray.remote
    gate = remote(num_cpus=0, max_concurrency=4)(Gate).remote()  # 2 waits + open
    ledger = new_ledger()
    group = logged_workers(2, ledger)

    def held(worker: LoggedWorker, x: int) -> None:
        if x == 1:
            assert ray.get(gate.wait.remote(60.0)), "the gate was never opened"
        ray.get(ledger.note.remote("weights", worker.index, x))

    plan = rxrl.from_iterable(range(1, 9)) | ops.broadcast(group, held)
    with rxrl.run(plan, "ray", max_pending_broadcasts=3, timeout_s=90) as run:
        assert [next(run) for _ in range(3)] == [1, 2, 3]  # while the first effect is held
        assert ray.get(ledger.read.remote()) == []
        gate.open.remote()
        assert list(run) == [4, 5, 6, 7, 8]
    notes = ray.get(ledger.read.remote())
    for index in (0, 1):
        assert [e[2] for e in notes if e[1] == index] == list(range(1, 9))


# --------------------------------------------------------------- values stay off the driver

#: how often a Payload was unpickled in this process (the driver, here)
UNPICKLED = [0]


def _restore_payload(n: int, blob: bytes) -> Payload:
    UNPICKLED[0] += 1
    return Payload(n, blob)


class Payload:
    """A batch whose every unpickling in a process is counted in that process."""

    def __init__(self, n: int, blob: bytes = b"") -> None:
        self.n = n
        self.blob = blob

    def __reduce__(self) -> tuple[Any, ...]:
        return _restore_payload, (self.n, self.blob)


class Producer:
    def __init__(self, index: int, size: int) -> None:
        self.index = index
        self.size = size
        self.made = 0

    def sample(self) -> Payload:
        self.made += 1
        return Payload(100 * self.index + self.made, bytes(self.size))


class Consumer:
    def train(self, p: Payload) -> int:
        return p.n

    def train_round(self, ps: list[Payload]) -> int:
        return sum(p.n for p in ps)

    def train_tagged(self, t: rxrl.Tagged[Payload]) -> tuple[int, int]:
        return t.shard, t.value.n

    def echo(self, p: Payload) -> Payload:
        return p


@pytest.mark.parametrize("size", [10, 300_000])  # inlined in the reply, and in the object store
def test_a_batch_flows_from_producer_to_consumer_without_visiting_the_driver(size: int) -> None:
    producers = rxrl.indexed_actors(lambda i: Producer(i, size), 2, name="Producer")
    consumer = rxrl.actors(Consumer, 1)
    samples = rxrl.from_actors(producers, Producer.sample)
    flows: list[rxrl.Plan[tuple[str, Any]]] = [  # every way a value moves between actors
        samples | ops.gather(2) | ops.take(6) | ops.call(consumer, Consumer.echo)
        | ops.call(consumer, Consumer.train) | ops.map(lambda n: ("gather, take, call, call", n)),
        samples | ops.barrier() | ops.broadcast(producers, lambda p, batch: None)
        | ops.call(consumer, Consumer.train_round) | ops.take(3) | ops.map(lambda n: ("barrier", n)),
        samples | ops.gather(tagged=True) | ops.call(consumer, Consumer.train_tagged) | ops.take(4)
        | ops.map(lambda t: ("tagged", t)),
        ops.union(samples | ops.gather(), samples | ops.gather(), mode="async")
        | ops.call(consumer, Consumer.train) | ops.take(4) | ops.map(lambda n: ("union", n)),
    ]
    before = UNPICKLED[0]
    out: dict[str, list[Any]] = {}
    for flow, result in rxrl.run(ops.union(*flows), "ray"):
        out.setdefault(flow, []).append(result)
    assert UNPICKLED[0] == before, "a Payload was fetched to the driver"
    assert [len(v) for v in out.values()] == [6, 3, 4, 4]
    assert all(n // 100 == shard for shard, n in out["tagged"])
    # the control: a driver operator that looks at the value does fetch it
    assert list(rxrl.run(samples | ops.gather() | ops.map(lambda p: p.n) | ops.take(2), "ray"))
    assert UNPICKLED[0] > before


#: how often a Pickled was pickled in this process (the driver, here)
PICKLED = [0]


class Pickled:
    """A value whose every pickling in a process is counted in that process."""

    def __init__(self, n: int, blob: bytes = b"") -> None:
        self.n, self.blob = n, blob

    def __reduce__(self) -> tuple[Any, ...]:
        PICKLED[0] += 1
        return Pickled, (self.n, self.blob)


@pytest.mark.parametrize(("size", "per_item"), [(10, 1 + 3), (300_000, 1 + 1)])
def test_a_large_broadcast_value_is_stored_once_for_all_its_actors(size: int, per_item: int) -> None:
    """A value made on the driver and broadcast to three actors: one pickle sizes it; a large
    one (which Ray would put in the object store for every call) is then put there once and
    every actor reads that copy — 2 picklings an item, not 3; a small one is inlined in each
    actor's call as before (a put costs more than inlining it: docs/benchmarks.md). Every
    actor applies every item, in order."""
    ledger = new_ledger()
    group = logged_workers(3, ledger)

    def hold(worker: LoggedWorker, p: Pickled) -> None:
        assert len(p.blob) == size
        ray.get(ledger.note.remote("weights", worker.index, p.n))

    items = rxrl.from_iterable(range(5)) | ops.map(lambda n: Pickled(n, bytes(size)))
    before = PICKLED[0]
    plan = items | ops.broadcast(group, hold) | ops.map(lambda p: p.n)
    assert list(rxrl.run(plan, "ray")) == [0, 1, 2, 3, 4]
    assert PICKLED[0] - before == 5 * per_item
    notes = ray.get(ledger.read.remote())
    for index in range(3):
        assert [e[2] for e in notes if e[1] == index] == [0, 1, 2, 3, 4]


def test_a_value_is_judged_stored_per_call_by_its_bytes_arrays_included() -> None:
    assert not stored_per_call({"w": np.zeros(1_000, np.float32)})
    assert stored_per_call({"w": np.zeros(100_000, np.float32)})
    assert stored_per_call([np.zeros((500, 500), np.float32)[:, ::2]])  # not contiguous
    assert not stored_per_call(lambda x: x)  # plain pickle cannot: left to Ray, per call


def test_a_tagged_item_that_round_trips_through_an_actor_still_routes_home() -> None:
    group = rxrl.indexed_actors(lambda i: Producer(i, 0), 3, name="Producer")
    echo = rxrl.actors(Consumer, 1)
    plan = (rxrl.from_actors(group, Producer.sample) | ops.take(2) | ops.gather(tagged=True)
            | ops.call(echo, lambda c, t: t)  # the Tagged comes back from another process
            | ops.call(group, lambda p, t: (p.index, t.shard)))
    out = list(rxrl.run(plan, "ray"))
    assert sorted(out) == [(i, i) for i in range(3) for _ in range(2)]


# --------------------------------------------------------------------------- the rest


def test_a_generator_shard_runs_on_the_driver_and_still_replays() -> None:
    shards = rxrl.from_iterables([(x for x in range(4)), [10, 11, 12]]) | ops.gather(2)
    with rxrl.run(shards, "ray") as run:
        out = list(run)
        trace = run.trace
    assert is_merge(out, [[0, 1, 2, 3], [10, 11, 12]])
    replay = rxrl.from_iterables([(x for x in range(4)), [10, 11, 12]]) | ops.gather(2)
    assert list(rxrl.run(replay, "reference", schedule=trace)) == out


def test_choice_events_match_the_trace() -> None:
    events: list[rxrl.Event] = []
    plan = rxrl.from_iterables([[1, 2], [3]]) | ops.gather()
    with rxrl.run(plan, "ray", on_event=events.append) as run:
        out = list(run)
        trace = run.trace
    assert sorted(out) == [1, 2, 3]
    assert tuple(e.item for e in events if e.kind == "choice") == trace.choices[0]


def test_call_events_name_the_actor() -> None:
    events: list[rxrl.Event] = []
    plan = rxrl.from_iterable([1, 2]) | ops.call(rxrl.actors(Adder, 2), Adder.add)
    assert list(rxrl.run(plan, "ray", on_event=events.append)) == [1, 2]
    assert [e.detail for e in events if e.kind == "call"] == ["Adder[0].Adder.add", "Adder[1].Adder.add"]


def test_an_observable_source_runs_on_the_driver() -> None:
    import reactivex as rx

    plan = rxrl.from_observable(rx.of(1, 2, 3)) | ops.call(rxrl.actors(Adder, 1), Adder.add)
    assert list(rxrl.run(plan, "ray")) == [1, 3, 6]


def test_a_schedule_is_refused() -> None:
    with pytest.raises(rxrl.ScheduleError, match="cannot follow a schedule"):
        rxrl.run(rxrl.from_iterable([1]), "ray", schedule=rxrl.Schedule.round_robin())


def test_unknown_and_invalid_options_are_refused() -> None:
    with pytest.raises(TypeError, match=r"no option\(s\) \['adress'\]"):
        rxrl.run(rxrl.from_iterable([1]), "ray", adress="auto")
    with pytest.raises(ValueError, match="timeout_s"):
        rxrl.run(rxrl.from_iterable([1]), "ray", timeout_s=0)
    with pytest.raises(ValueError, match="max_pending_broadcasts must be an integer >= 1"):
        rxrl.run(rxrl.from_iterable([1]), "ray", max_pending_broadcasts=0)


def test_a_group_option_ray_refuses_names_the_group() -> None:
    group = rxrl.actors(Adder, 1).with_options(num_cpu=1)
    with pytest.raises(rxrl.PlanError, match=r"Adder×1 \(built at .*test_ray.py:\d+\): Ray refused"):
        rxrl.run(rxrl.from_iterable([1]) | ops.call(group, Adder.add), "ray")


def test_an_actor_that_cannot_be_placed_times_out_with_its_resources_named() -> None:
    group = rxrl.actors(Adder, 1).with_options(resources={"tpu": 1})
    with pytest.raises(RayTimeoutError, match=r"Adder\[0\].*not constructed.*'tpu': 1"):
        rxrl.run(rxrl.from_iterable([1]) | ops.call(group, Adder.add), "ray", start_timeout_s=1)
    assert not _actors_named("Adder")


def test_resource_options_reach_ray() -> None:
    class Probe:
        def resources(self) -> dict[str, Any]:
            context: Any = ray.get_runtime_context()
            return dict(context.get_assigned_resources())

    group = rxrl.actors(Probe, 1).with_options(num_cpus=1)
    assert list(rxrl.run(rxrl.from_iterable([0]) | ops.call(group, lambda p, _: p.resources()),
                         "ray")) == [{"CPU": 1.0}]


def _actors_named(fragment: str) -> list[str]:
    return [n for n in ray.util.list_named_actors() if n.startswith("rxrl:") and fragment in n]


def test_actors_are_gone_when_the_run_ends_early() -> None:
    group = rxrl.indexed_actors(lambda i: Producer(i, 0), 2, name="EarlyEnd")
    with rxrl.run(rxrl.from_actors(group, Producer.sample) | ops.gather(), "ray") as run:
        next(run)
        assert len(_actors_named("EarlyEnd")) == 2
    assert not _actors_named("EarlyEnd")


def test_pooled_iterable_hosts_are_reused_across_runs() -> None:
    plan = rxrl.from_iterables([[1], [2]]) | ops.map(lambda x: (x, _pid())) | ops.barrier()
    first = list(rxrl.run(plan, "ray"))
    second = list(rxrl.run(plan, "ray"))
    assert {pid for row in first for _, pid in row} == {pid for row in second for _, pid in row}


def _pid() -> int:
    import os

    return os.getpid()


def iterate(n: int) -> Iterator[int]:
    yield from range(n)


def test_an_actor_class_the_workers_cannot_import_is_one_clear_error(tmp_path: Path) -> None:
    """A class from a module the Ray workers do not have (put on the driver's sys.path after
    Ray started, as on a cluster whose nodes lack it): one line naming the module and how to
    ship it, not Ray's worker tracebacks."""
    (tmp_path / "elsewhere_actors.py").write_text(
        "class Echo:\n    def echo(self, x: int) -> int:\n        return x\n")
    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module("elsewhere_actors")
        group = rxrl.actors(module.Echo, 1)
        with pytest.raises(rxrl.ActorError) as e:
            list(rxrl.run(rxrl.from_iterable([1]) | ops.call(group, module.Echo.echo), "ray"))
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("elsewhere_actors", None)
    message = str(e.value)
    assert "\n" not in message
    assert re.search(r"creating actor Echo\[0\] \(group built at .*\) failed: the Ray workers "
                     r"cannot import module 'elsewhere_actors'", message), message
    assert "'working_dir'" in message and "'py_modules'" in message


def test_an_actor_group_serializes_its_factory_once(ray_session: None) -> None:
    """A group crosses processes inside every Tagged item: its factory (a closure) is pickled
    once and then travels as bytes; unpickling it where the group is known returns that group."""
    from rxrl.backends.ray.host import dumps, loads

    calls: list[int] = []

    class Counting:
        def __reduce__(self) -> tuple[Any, ...]:
            calls.append(1)
            return (int, ())

    marker = Counting()
    group = rxrl.indexed_actors(lambda i: (marker, i), 2, name="Closure")
    for _ in range(3):
        assert loads(dumps(rxrl.Tagged(1, 0, group))).group is group
    assert len(calls) == 1


#: how often `CountedFactory` was unpickled in this process
FACTORY_LOADS: list[int] = []


def _load_counted_factory() -> CountedFactory:
    FACTORY_LOADS.append(1)
    return CountedFactory()


class CountedFactory:
    """A group factory that counts its loads (its unpickling) in `FACTORY_LOADS`."""

    def __call__(self, index: int) -> int:
        return index

    def __reduce__(self) -> tuple[Any, ...]:
        return (_load_counted_factory, ())


def test_a_foreign_group_arriving_in_every_item_loads_its_factory_once() -> None:
    """A process that does not hold a group (a learner receiving the workers' Tagged items)
    restores it from its bytes; the next item, after the first item and its group were
    collected, finds it restored already instead of loading the factory again."""
    import gc

    from rxrl.actors import RESTORED_KEPT

    group = rxrl.indexed_actors(CountedFactory(), 2, name="Foreign")
    wire = pickle.dumps(rxrl.Tagged(1, 0, group))
    key = group.key
    del group
    gc.collect()  # this process no longer holds the group: like a host that never made it
    FACTORY_LOADS.clear()
    for _ in range(3):
        item = pickle.loads(wire)
        assert item.group.key == key and item.group.name == "Foreign"
        del item
        gc.collect()
    assert len(FACTORY_LOADS) == 1
    others = [rxrl.indexed_actors(CountedFactory(), 1) for _ in range(RESTORED_KEPT)]
    wires = [pickle.dumps(g) for g in others]
    del others
    gc.collect()
    for w in wires:  # as many other foreign groups as are kept push this one out
        pickle.loads(w)
    gc.collect()
    FACTORY_LOADS.clear()
    pickle.loads(wire)
    assert len(FACTORY_LOADS) == 1  # loaded again: the cache is bounded


class FreezeProbe:
    """Reports how many objects its process's collector has frozen."""

    def frozen(self) -> int:
        return gc.get_freeze_count()


def test_an_actor_s_process_freezes_what_it_holds_once_the_actor_is_built() -> None:
    """Its imports and the actor live as long as the process: a full collection skips them
    (one walked torch's objects in a PPO learner's second update, +90 ms)."""
    plan = rxrl.from_actors(rxrl.actors(FreezeProbe, 1), FreezeProbe.frozen) | ops.gather() | ops.take(1)
    (count,) = list(rxrl.run(plan, "ray"))
    assert count > 10_000


# --------------------------------------------------------------- actors hosted on the driver


#: the `Where` instances alive in this process
LIVE: weakref.WeakSet[Where] = weakref.WeakSet()


class Where:
    """Answers with its process id; ``total`` keeps a running sum of what it is called with."""

    def __init__(self, fail: bool = False) -> None:
        if fail:
            raise RuntimeError("no learner today")
        self.sum = 0
        LIVE.add(self)

    def pid(self) -> int:
        return os.getpid()

    def total(self, xs: list[int]) -> int:
        self.sum += sum(xs)
        return self.sum

    def explode(self, x: int) -> int:
        raise ValueError(f"bad item {x}")

    def cpus(self) -> list[int]:
        """The CPUs the calling thread may run on."""
        return sorted(os.sched_getaffinity(0))


def test_a_group_on_the_driver_lives_in_the_driver_s_process_and_the_others_do_not() -> None:
    here = rxrl.actors(Where, 1).on_driver()
    there = rxrl.actors(Where, 1)
    plan = ops.zip(rxrl.from_actors(here, Where.pid) | ops.gather(),
                   rxrl.from_actors(there, Where.pid) | ops.gather()) | ops.take(3)
    out = list(rxrl.run(plan, "ray"))
    assert [h for h, _ in out] == [os.getpid()] * 3
    assert all(t != os.getpid() for _, t in out)
    assert gc.get_freeze_count() == 0  # the driver's heap is the user's: never frozen


def test_a_call_on_the_driver_takes_the_values_of_actor_shards_and_gives_the_reference_s_output() -> None:
    counters = rxrl.actors(Counter, 2, start=3)
    learner = rxrl.actors(Where, 1).on_driver()
    plan = (rxrl.from_actors(counters, Counter.next) | ops.barrier()
            | ops.call(learner, Where.total) | ops.broadcast(counters, Counter.bump) | ops.take(6))
    with rxrl.run(plan, "ray") as run:
        out, trace = list(run), run.trace
    assert out == list(rxrl.run(plan, "reference", schedule=trace))
    assert out == list(rxrl.run(plan))


def test_a_driver_actor_s_failures_are_the_reference_s_errors() -> None:
    broken = rxrl.actors(Where, 1, fail=True).on_driver()
    with pytest.raises(rxrl.ActorError, match=r"no learner today"):
        list(rxrl.run(rxrl.from_actors(broken, Where.pid) | ops.gather() | ops.take(1), "ray"))
    plan = rxrl.from_iterable([1, 2]) | ops.call(rxrl.actors(Where, 1).on_driver(), Where.explode)
    with pytest.raises(rxrl.OperatorError, match=r"call\(Where×1 on the driver, Where.explode\)") as caught:
        list(rxrl.run(plan, "ray"))
    assert isinstance(caught.value.__cause__, ValueError)
    assert any("raised in Where[0] (on the driver)" in note for note in caught.value.__cause__.__notes__)


def test_a_group_on_the_driver_refuses_ray_actor_options() -> None:
    group = rxrl.actors(Where, 1).on_driver().with_options(num_gpus=1)
    others = rxrl.actors(Where, 1)
    plan = ops.zip(rxrl.from_actors(group, Where.pid) | ops.gather(),
                   rxrl.from_actors(others, Where.pid) | ops.gather()) | ops.take(1)
    refused = r"hosted on the driver takes no Ray actor options, got \['num_gpus'\]"
    with pytest.raises(rxrl.PlanError, match=refused):
        list(rxrl.run(plan, "ray"))
    # on_driver=False is an actor process, as without it
    (pids,) = rxrl.run(rxrl.from_actors(group.with_options(on_driver=False, num_gpus=0), Where.pid)
                       | ops.gather() | ops.take(1), "ray")
    assert pids != os.getpid()


def _with_driver_cpus(x: tuple[list[int], list[int]]) -> tuple[list[int], list[int], list[int]]:
    return (*x, sorted(os.sched_getaffinity(0)))


def _own_cores_plan(own_cores: int) -> rxrl.Plan[tuple[list[int], list[int], list[int]]]:
    """The CPUs of a driver actor with ``own_cores``, of a Ray actor, and of the driver's routing."""
    own = rxrl.actors(Where, 1).on_driver(own_cores=own_cores)
    there = rxrl.actors(Where, 1)
    return (ops.zip(rxrl.from_actors(own, Where.cpus) | ops.gather(),
                    rxrl.from_actors(there, Where.cpus) | ops.gather())
            | ops.map(_with_driver_cpus) | ops.take(2))


def _every_thread_has(cpus: list[int]) -> bool:
    return all(sorted(os.sched_getaffinity(int(t))) == cpus for t in os.listdir("/proc/self/task"))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="own_cores=1 needs a second CPU for the rest")
def test_a_driver_actor_with_own_cores_runs_on_them_and_the_rest_of_the_run_off_them() -> None:
    """own_cores=1: the driver actor's thread runs on the last CPU the driver may run on, the
    driver's routing and the plan's Ray actors on its node on the others; once the run closes
    every thread of the driver has all its CPUs back."""
    before = sorted(os.sched_getaffinity(0))
    assert list(rxrl.run(_own_cores_plan(1), "ray")) == [([before[-1]], before[:-1], before[:-1])] * 2
    assert _every_thread_has(before)


def test_own_cores_that_would_leave_no_cpu_for_the_rest_warn_and_pin_nothing() -> None:
    """As many CPUs as the driver has: a warning naming the group, and every thread keeps them all."""
    before = sorted(os.sched_getaffinity(0))
    with pytest.warns(RuntimeWarning, match=rf"Where×1 on the driver \({len(before)} CPUs? of its own\): "
                                            rf"own_cores={len(before)} is ignored: the driver may run on "
                                            rf"{len(before)} CPU"):
        out = list(rxrl.run(_own_cores_plan(len(before)), "ray"))
    assert out == [(before, before, before)] * 2
    assert _every_thread_has(before)


@pytest.mark.parametrize(("group", "refused"), [
    (rxrl.actors(Where, 1).with_options(own_cores=1), r"own_cores is for a group hosted on the driver"),
    (rxrl.actors(Where, 1).on_driver().with_options(own_cores=0), r"own_cores must be a whole number of "
                                                                    r"CPUs, at least 1, got 0"),
])
def test_own_cores_outside_the_driver_or_below_one_is_refused(group: ActorGroup[Where], refused: str) -> None:
    with pytest.raises(rxrl.PlanError, match=refused):
        list(rxrl.run(rxrl.from_actors(group, Where.pid) | ops.gather() | ops.take(1), "ray"))


def test_a_wait_over_object_refs_and_driver_futures_returns_what_landed_in_their_order() -> None:
    """``members.ready``, the runtime's one wait: Ray's object refs and driver-hosted actors'
    futures in one list; it blocks until one lands (an object ref through its ``future()``),
    returns the landed ones in the list's order, at most ``num_returns``, and none past the
    timeout."""
    from concurrent.futures import Future

    from rxrl.backends.ray.members import Pending, ready

    class Stub:
        def __init__(self, status: Any) -> None:
            self.p = Pending(status, None)

    remote: Any = ray.remote
    blocker = remote(max_concurrency=2)(Blocker).remote()
    reply: Any = Stub(blocker.wait.remote())
    later: Any = Stub(Future())
    requests = [reply, later]
    releasing = threading.Thread(target=lambda: blocker.release.remote())
    releasing.start()  # the reply lands while (or before) the wait blocks on both kinds
    assert ready(requests, 1, 30) == [reply]
    releasing.join(30)
    assert ready(requests, 2, 0) == [reply]
    later.p.status.set_result(("ok", None))
    assert ready(requests, 2, 0) == [reply, later]
    assert ready(requests[::-1], 1, 0) == [later]
    never: Any = Stub(Future())
    assert ready([never], 1, 0.05) == []


#: opened by the driver's own routing (`open_gate`), waited on by `Gated` on the driver
GATE = threading.Event()


class Gated:
    """A driver-hosted actor whose call of 1 returns once the driver routed another item."""

    def wait_for_the_driver(self, x: int) -> tuple[int, bool, bool]:
        """(x, whether the gate opened, whether this ran off the driver's main thread)."""
        opened = x == 0 or GATE.wait(30)
        return x, opened, threading.current_thread() is not threading.main_thread()


def open_gate(x: int) -> tuple[int, bool, bool]:
    GATE.set()
    return x, True, threading.current_thread() is not threading.main_thread()


def test_a_driver_actor_s_call_runs_on_its_own_thread_while_the_driver_routes() -> None:
    """The law: a call on a driver-hosted actor does not hold the driver up. Of two calls
    pipelined, the second waits until the driver has routed an item of the union's other
    input; run inline (as before), the driver would stop in that call when it submitted it,
    and the gate would not open for 30 s."""
    GATE.clear()
    gated = rxrl.actors(Gated, 1).on_driver()
    waits = rxrl.from_iterable([0, 1]) | ops.call(gated, Gated.wait_for_the_driver, max_in_flight=2)
    opens = rxrl.from_iterable([2]) | ops.map(open_gate)
    with rxrl.run(ops.union(waits, opens, mode="async"), "ray") as run:
        out, trace = list(run), run.trace
    assert sorted(out) == [(0, True, True), (1, True, True), (2, True, False)]
    assert out.index((2, True, False)) < out.index((1, True, True))
    GATE.set()  # the reference runs each call when it is submitted: the same order of items
    assert [x for x, *_ in rxrl.run(ops.union(waits, opens, mode="async"), "reference",
                                    schedule=trace)] == [x for x, *_ in out]


def test_a_closed_run_lets_go_of_its_driver_actors() -> None:
    group = rxrl.actors(Where, 2).on_driver()
    gc.collect()
    before = len(LIVE)
    with rxrl.run(rxrl.from_actors(group, Where.pid) | ops.gather() | ops.take(4), "ray") as run:
        records = iter(run)
        pids = [next(records)]
        during = len(LIVE)  # counted outside assert: pytest's rewriting keeps what it shows
        pids += records
        gc.collect()
        after = len(LIVE)  # while the run object is still held
    assert pids == [os.getpid()] * 4
    assert (during - before, after - before) == (2, 0)


class Blocker:
    """A threaded actor whose ``wait`` returns only once ``release`` was called."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def wait(self) -> int:
        self.event.wait(60)
        return 1

    def release(self) -> None:
        self.event.set()


def test_a_driver_actor_waits_for_its_input_within_timeout_s() -> None:
    from rxrl.backends.ray.host import Host
    from rxrl.backends.ray.members import DriverMember, GroupState

    group = rxrl.actors(Where, 1).on_driver()
    rt: Any = type("Rt", (), {"options": rxrl.backends.ray.Options(timeout_s=0.2)})()
    member = DriverMember(rt, GroupState(group, [{}]), 0, Host(on_driver=True))
    remote: Any = ray.remote
    blocker = remote(max_concurrency=2)(Blocker).remote()
    pending = blocker.wait.remote()
    try:
        with pytest.raises(RayTimeoutError, match=r"^Where\[0\] \(on the driver\): the item it was sent "
                                                  r"could not be fetched .* within timeout_s=0.2 s$"):
            member.apply(0, ("ref", None, None, (pending,))).status.result(timeout=30)
    finally:
        ray.get(blocker.release.remote(), timeout=30)
        member.close(30)
    assert ray.get(pending, timeout=30) == 1
