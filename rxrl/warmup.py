"""Work that may be done ahead of its use, while the process waits anyway.

A driver that starts a local Ray spends ~2 s in ``ray.init`` mostly waiting for Ray's
processes to come up. Work registered here with `defer` (the initial weights of PPO's
rollout workers, which need torch: `rxrl.rl.models.initial.InitialWeights`) is done then, in a
thread (`rxrl.backends.ray.connect`), instead of before ``ray.init`` on the main thread
(docs/design-notes.md, "The start-up's critical path").

Each registered callable must be idempotent and thread-safe, and leave an error for its real
use to raise: `run_deferred` ignores what it raises, and the value is then computed (or the
error raised) where it is needed, on the calling thread.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
import weakref
from collections.abc import Callable

_lock = threading.Lock()
#: registered work, held weakly when it is a bound method: an object no one uses any more
#: (a plan built and dropped in a process that never starts Ray) is not kept alive here
_pending: list[Callable[[], Callable[[], object] | None]] = []


def defer(work: Callable[[], object]) -> None:
    """Register ``work`` to be done by the next `run_deferred` (if any runs)."""
    ref: Callable[[], Callable[[], object] | None] = (
        weakref.WeakMethod(work) if inspect.ismethod(work) else (lambda: work))
    with _lock:  # dropping what died meanwhile: a process that builds plans and never starts Ray
        _pending[:] = [r for r in _pending if r() is not None]
        _pending.append(ref)


def run_deferred() -> None:
    """Do (and forget) the work registered so far; what raises is left to its real use."""
    with _lock:
        todo = list(_pending)
        _pending.clear()
    for ref in todo:
        work = ref()
        if work is not None:
            with contextlib.suppress(Exception):  # raised again where the value is used
                work()


__all__ = ["defer", "run_deferred"]
