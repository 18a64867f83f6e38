"""Async union on the driver: each input runs in its own thread into a bounded buffer."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Literal

Kind = Literal["item", "end", "error"]


class Merge:
    """Runs ``inputs`` concurrently; iterating yields ``(input, kind, item)`` in arrival order.

    Each input may be at most ``capacity`` items ahead of the consumer (plus the one it is
    computing), so memory stays bounded however fast an input is. Threads start on the first
    pull (nothing runs before the consumer asks). ``close()`` stops the threads at their next
    hand-over; the threads are daemons, so a run that is abandoned cannot keep the process up.
    """

    def __init__(self, inputs: list[Iterator[Any]], *, name: str, capacity: int,
                 timeout_s: float | None, on_timeout: Callable[[list[int]], Exception]) -> None:
        self.inputs = inputs
        self.name = name
        self.capacity = capacity
        self.timeout_s = timeout_s
        self.on_timeout = on_timeout
        self.cond = threading.Condition()
        self.queue: deque[tuple[int, Kind, Any]] = deque()
        self.buffered = [0] * len(inputs)
        self.running = [True] * len(inputs)
        self.closed = False

    def __iter__(self) -> Iterator[tuple[int, Kind, Any]]:
        for i, it in enumerate(self.inputs):
            threading.Thread(target=self._pump, args=(i, it), daemon=True,
                             name=f"rxrl-{self.name}-input-{i}").start()
        try:
            left = len(self.inputs)
            while left:
                event = self._take()
                if event[1] != "item":
                    left -= 1
                yield event
        finally:
            self.close()

    def _take(self) -> tuple[int, Kind, Any]:
        with self.cond:
            deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
            while not self.queue:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    busy = [i for i, r in enumerate(self.running) if r]
                    raise self.on_timeout(busy)
                self.cond.wait(remaining)
            event = self.queue.popleft()
            self.buffered[event[0]] -= 1
            self.cond.notify_all()
            return event

    def _put(self, i: int, kind: Kind, item: Any) -> bool:
        with self.cond:
            while self.buffered[i] >= self.capacity and not self.closed:
                self.cond.wait()
            if self.closed:
                return False
            if kind != "item":
                self.running[i] = False
            self.queue.append((i, kind, item))
            self.buffered[i] += 1
            self.cond.notify_all()
            return True

    def _pump(self, i: int, it: Iterator[Any]) -> None:
        try:
            for x in it:
                if not self._put(i, "item", x):
                    return
        except BaseException as e:  # handed to the consumer, raised where the item would be
            self._put(i, "error", e)
            return
        self._put(i, "end", None)

    def close(self) -> None:
        """Release threads waiting to hand over an item (idempotent)."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()
