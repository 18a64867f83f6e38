"""CPUs of its own for an actor hosted on the driver (a group's ``own_cores`` option), on Linux.

A DQN learner on a thread of the driver shares a small machine's cores with the rollout
workers, the driver's routing and Ray: on 2 cores it was preempted so often that an optimizer
step took 2.5 ms in a run against 1.6 ms alone (docs/design-notes.md, "A learner's own
cores"). With ``own_cores=n`` the Ray backend gives that actor's thread the last ``n`` CPUs
the driver may run on, and keeps the rest of the run off them: the driver's other threads and
the plan's Ray actors on the driver's node run on the remaining CPUs. The driver's threads get
their CPUs back when the run closes. Elsewhere than Linux (no ``os.sched_setaffinity``), or
where the driver may run on no more than ``n`` CPUs, nothing is pinned and a warning says so.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings
from collections.abc import Collection

import attrs


@attrs.frozen
class CoreSplit:
    """The CPUs of an actor hosted on the driver (``own``) and those of the rest of the run on
    the driver's node (``rest``), and the driver's CPUs before the split (``before``)."""

    own: frozenset[int]
    rest: frozenset[int]
    before: frozenset[int]


def split(n: int, who: str) -> CoreSplit | None:
    """The last ``n`` of the CPUs this thread may run on for ``who``, the others for the rest;
    None (with a warning naming ``who``) where that cannot be done."""
    if not hasattr(os, "sched_setaffinity") or not os.path.isdir("/proc/self/task"):
        warnings.warn(f"{who}: own_cores={n} is ignored on {sys.platform} (no CPU affinity): "
                      "it shares the CPUs with the rest of the run", RuntimeWarning, stacklevel=3)
        return None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) <= n:
        warnings.warn(f"{who}: own_cores={n} is ignored: the driver may run on {len(cpus)} CPU(s) "
                      f"({cpus}), which leaves none for the rest of the run", RuntimeWarning, stacklevel=3)
        return None
    return CoreSplit(frozenset(cpus[-n:]), frozenset(cpus[:-n]), frozenset(cpus))


def pin_thread(cpus: Collection[int]) -> None:
    """Run the calling thread (and the threads it starts from now on) on ``cpus`` only."""
    os.sched_setaffinity(threading.get_native_id(), cpus)


def pin_process(cpus: Collection[int]) -> None:
    """Run every thread of this process on ``cpus`` only (a thread that ends meanwhile is
    passed over)."""
    for name in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):  # the thread has ended
            os.sched_setaffinity(int(name), cpus)


__all__ = ["CoreSplit", "pin_process", "pin_thread", "split"]
