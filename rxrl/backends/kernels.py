"""The state machines every backend runs the same way: split's tee, weighted round-robin turns.

A backend only decides how to *pull* an input (a generator, a stream that may wait on actors);
what happens with the answer — item, ``END`` or ``NOT_READY`` — is decided here, once, so that
the reference interpreter and the concurrent backends agree by construction.
"""

from __future__ import annotations

import math
import sys
from collections import deque
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import attrs

from rxrl import graph as g
from rxrl.ready import END, NOT_READY


class Clock:
    """Counts what can make a not-ready stream ready: an item taken by a split branch (its
    siblings' lead changes) and a call or broadcast sent to an actor (a source that answered
    NOT_READY may be asked again). "Not ready since the last progress" means: since the clock
    last moved. One per run; every backend ticks it at the same points, so their decisions
    agree."""

    __slots__ = ("ticks",)

    def __init__(self) -> None:
        self.ticks = 0

    def tick(self) -> None:
        """Something happened that may make a not-ready stream ready."""
        self.ticks += 1


class Tried:
    """The inputs of a union that answered NOT_READY while the clock stood where it is now."""

    __slots__ = ("at", "clock")

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.at: dict[int, int] = {}

    def add(self, i: int) -> None:
        """Input ``i`` answered NOT_READY just now."""
        self.at[i] = self.clock.ticks

    def __contains__(self, i: object) -> bool:
        return isinstance(i, int) and self.at.get(i) == self.clock.ticks

    def all(self, live: Sequence[int]) -> bool:
        """Whether every input in ``live`` is not ready since the clock last moved."""
        ticks = self.clock.ticks
        return all(self.at.get(i) == ticks for i in live)


@attrs.frozen
class _Raised:
    """An error of the split's source, waiting in a branch's buffer at the point it occurred."""

    error: BaseException


class Tee:
    """The buffers of one ``split`` run: each branch yields every item of the source, in order.

    ``next(i, pull)`` is branch i's pull: an item it has not taken yet from its buffer, else
    (unless branch i is ``max_lag`` items ahead of the slowest open branch: ``NOT_READY``) a new
    item from ``pull()`` that every other open branch buffers. So no branch is ever more than
    ``max_lag`` items ahead, and each buffer holds at most ``max_lag`` items. The source's end
    ends every branch after its buffered items; an error of the source is raised first by the
    branch whose pull met it, and by every other branch when it reaches that point.
    ``close(i)`` says branch i will not be pulled again (its consumer is done): it stops
    buffering and no longer holds the others back.
    """

    __slots__ = ("_others", "buffers", "clock", "ended", "max_lag", "open", "taken")

    def __init__(self, n: int, max_lag: int, clock: Clock | None = None) -> None:
        #: ticked whenever a branch takes an item (the others' lead changes)
        self.clock = clock or Clock()
        self.buffers: list[deque[Any]] = [deque() for _ in range(n)]
        #: items taken per branch; a closed branch counts as infinitely far ahead
        self.taken = [0] * n
        self.open = [True] * n
        self.max_lag = max_lag
        self.ended = False
        #: per branch, the buffers of the other open branches (what a new item goes into)
        self._others = [[b for j, b in enumerate(self.buffers) if j != i] for i in range(n)]

    def next(self, i: int, pull: Callable[[], Any]) -> Any:
        """Branch ``i``'s next item, ``END`` or ``NOT_READY``."""
        buffer = self.buffers[i]
        if buffer:
            x = buffer.popleft()
            self.taken[i] += 1
            self.clock.ticks += 1
            if type(x) is _Raised:
                raise x.error
            return x
        if self.ended:
            return END
        taken = self.taken
        if taken[i] - min(taken) >= self.max_lag:
            return NOT_READY
        try:
            x = pull()
        except BaseException as e:
            self.ended = True
            for other in self._others[i]:
                other.append(_Raised(e))
            raise
        if x is END:
            self.ended = True
        elif x is not NOT_READY:
            for other in self._others[i]:
                other.append(x)
            taken[i] += 1
            self.clock.ticks += 1
        return x

    def lag(self, i: int) -> int:
        """How many items branch ``i`` is ahead of the slowest open branch."""
        return self.taken[i] - min(self.taken)

    def lagging(self, i: int) -> bool:
        """Whether branch ``i`` must wait for the slowest branch before it can take a new item."""
        return not self.buffers[i] and not self.ended and self.lag(i) >= self.max_lag

    def slowest(self) -> int:
        """The open branch furthest behind."""
        return self.taken.index(min(self.taken))

    def close(self, i: int) -> bool:
        """Branch ``i`` is done; True once every branch is (the source may stop)."""
        if self.open[i]:
            self.open[i] = False
            closed = self.buffers[i]
            closed.clear()
            self.taken[i] = sys.maxsize
            for others in self._others:
                if any(b is closed for b in others):
                    others[:] = [b for b in others if b is not closed]
        return not any(self.open)

    def why(self, node: g.Split, i: int) -> str | None:
        """Why branch ``i`` is not ready now (for a deadlock report), or None if it is."""
        if not self.open[i] or not self.lagging(i):
            return None
        return (f"branch {i} of {node.describe()} is {self.max_lag} items ahead of branch "
                f"{self.slowest()} (max_lag={self.max_lag}), which nothing pulls")


def exact_weights(weights: Sequence[float]) -> list[Fraction]:
    """Weights as exact fractions (``2.5`` -> 5/2, ``0.1`` -> 1/10), so that turns keep the
    ratio exactly however long a run is."""
    return [Fraction(w).limit_denominator(10**6) for w in weights]


class Turns:
    """Whose turn it is in a weighted round robin, and how many items the turn has left.

    Input i's turn takes ``floor(credit_i + w_i)`` items and keeps the fraction as credit, so
    a real weight (RL's training intensity, 2.5) gives turns of 2 and 3 items whose counts
    keep the exact ratio. Only items taken count: an input that is not ready passes the
    union on to the next input *without* ending its turn, and continues it when the union
    comes back (no catch-up burst, no lost turn). Weights are exact fractions over one
    common denominator, so the arithmetic is on integers.
    """

    __slots__ = ("at", "credit", "left", "live", "scale", "units")

    def __init__(self, weights: Sequence[float]) -> None:
        exact = exact_weights(weights)
        self.scale = math.lcm(*(w.denominator for w in exact))
        #: each weight in units of 1/scale, and each input's credit in the same units
        self.units = [int(w * self.scale) for w in exact]
        self.credit = [0] * len(weights)
        self.live = list(range(len(weights)))
        self.at = 0
        #: items left in each input's current turn (None: its turn has not started)
        self.left: list[int | None] = [None] * len(weights)

    def current(self) -> int:
        """The input whose turn it is (starting its turn if needed)."""
        while True:
            i = self.live[self.at]
            left = self.left[i]
            if left is None:
                left, self.credit[i] = divmod(self.credit[i] + self.units[i], self.scale)
                self.left[i] = left
            if left:
                return i
            self.left[i] = None  # a turn of 0 items (a weight below 1): pass it on
            self.at = (self.at + 1) % len(self.live)

    def took(self, i: int) -> None:
        """Input ``i`` (the current one) delivered an item."""
        left = self.left[i]
        assert left
        self.left[i] = left - 1
        if left == 1:
            self.left[i] = None
            self.at = (self.at + 1) % len(self.live)

    def skip(self) -> None:
        """The current input is not ready: move on, keeping what is left of its turn."""
        self.at = (self.at + 1) % len(self.live)

    def drop(self, i: int) -> None:
        """Input ``i`` (the current one) has ended."""
        self.live.pop(self.at)
        if self.live:
            self.at %= len(self.live)


def round_robin_next(turns: Turns, pull: Callable[[int], Any], emits: Callable[[int], bool],
                     clock: Clock) -> Any:
    """The next emitted item of a weighted round robin over ``pull(i)``, ``END`` or ``NOT_READY``
    (every live input, each pulled in its turn, was not ready since ``clock`` last moved)."""
    tried = Tried(clock)  # passed over, not pulled again, until something moves
    while turns.live:
        i = turns.current()
        if i in tried:
            if tried.all(turns.live):
                return NOT_READY
            turns.skip()
            continue
        x = pull(i)
        if x is END:
            turns.drop(i)
        elif x is NOT_READY:
            tried.add(i)
            turns.skip()
        else:
            turns.took(i)
            if emits(i):
                return x
    return END
