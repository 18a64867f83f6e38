"""What Ray's primitives cost the driver on this machine, one at a time (what rxrl's requests
are made of): an actor call answered with one object, with ``(status, value)`` as one object,
and with two objects (``num_returns=2``, the status read); reading a landed status; a
``ray.wait`` over 32 and 64 landed refs (one returned, or all with ``timeout=0``).

Round trips are timed in wall time, the driver's and the actor's CPU time (``process_time``);
the rest in the driver's CPU time. Run: ``python bench/ray_call_cost.py [--calls 3000 --repeats 3]``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import numpy.typing as npt
import ray


class Answerer:
    """An actor that answers at once, in each of the shapes rxrl's requests take."""

    def __init__(self) -> None:
        self.value = np.zeros(64, np.uint8)

    def one(self) -> npt.NDArray[np.uint8]:
        """The value alone (a hand-written loop's call)."""
        return self.value

    def both(self) -> tuple[str, npt.NDArray[np.uint8]]:
        """``(status, value)`` as one object (rxrl's ``*_both``)."""
        return "ok", self.value

    @ray.method(num_returns=2)
    def two(self) -> tuple[str, npt.NDArray[np.uint8]]:
        """``(status, value)`` as two objects (rxrl's ``next`` / ``apply``)."""
        return "ok", self.value

    def cpu(self) -> float:
        """The actor process's CPU seconds so far."""
        return time.process_time()


def round_trips(actor: Any, shape: str, calls: int) -> tuple[float, float, float]:
    """(wall, driver CPU, actor CPU) in µs per call of ``shape``, each read before the next."""
    actor_cpu = ray.get(actor.cpu.remote())
    driver_cpu, start = time.process_time(), time.perf_counter()
    for _ in range(calls):
        if shape == "two":
            status, _ = actor.two.remote()
            ray.get(status)
        else:
            ray.get(getattr(actor, shape).remote())
    wall = time.perf_counter() - start
    driver = time.process_time() - driver_cpu
    spent = ray.get(actor.cpu.remote()) - actor_cpu
    return 1e6 * wall / calls, 1e6 * driver / calls, 1e6 * spent / calls


def driver_us(fn: Any, times: int) -> float:
    """The driver's CPU µs per call of ``fn``."""
    start = time.process_time()
    for _ in range(times):
        fn()
    return 1e6 * (time.process_time() - start) / times


def main() -> None:
    """Print each primitive's cost, ``--repeats`` times."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    actor: Any = ray.remote(num_cpus=0)(Answerer).remote()
    ray.get(actor.cpu.remote())
    for rep in range(args.repeats):
        for shape in ("one", "both", "two"):
            wall, driver, spent = round_trips(actor, shape, args.calls)
            print(f"[{rep}] call answered as {shape}: {wall:.0f} µs wall, {driver:.0f} µs driver "
                  f"CPU, {spent:.0f} µs actor CPU")
        pairs = [actor.two.remote() for _ in range(2000)]
        ray.wait([v for _, v in pairs], num_returns=len(pairs))
        statuses = iter([s for s, _ in pairs])
        read = driver_us(lambda statuses=statuses: ray.get(next(statuses)), 2000)
        print(f"[{rep}] a landed status read: {read:.1f} µs")
        for n in (32, 64):
            refs = [s for s, _ in pairs[:n]]
            first = driver_us(lambda refs=refs: ray.wait(refs, num_returns=1), 2000)
            every = driver_us(lambda refs=refs: ray.wait(refs, num_returns=len(refs), timeout=0), 2000)
            print(f"[{rep}] ray.wait over {n} landed refs: {first:.1f} µs for one, {every:.1f} µs for all")
    ray.shutdown()


if __name__ == "__main__":
    main()
