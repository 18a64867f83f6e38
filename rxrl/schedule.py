"""Schedules decide every nondeterministic choice of a run; traces record them for replay."""

from __future__ import annotations

import json
import random as _random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from rxrl.errors import ScheduleError


@attrs.frozen
class Trace:
    """The choices a run made, per choice point: ``choices[point]`` is the inputs chosen, in order.

    A choice point is an operator occurrence (async union/concurrently, gather) numbered by the
    shared graph walk. ``fingerprint`` identifies the plan's shape so that replaying a trace on
    another plan fails clearly instead of silently diverging.
    """

    choices: Mapping[int, tuple[int, ...]] = attrs.field(factory=dict)
    fingerprint: str = ""
    backend: str = ""

    def __len__(self) -> int:
        return sum(len(c) for c in self.choices.values())

    def to_json(self) -> str:
        """A JSON document (``Trace.from_json`` reads it back)."""
        return json.dumps({
            "format": "rxrl-trace/1",
            "backend": self.backend,
            "fingerprint": self.fingerprint,
            "choices": {str(k): list(v) for k, v in sorted(self.choices.items())},
        })

    @classmethod
    def from_json(cls, text: str) -> Trace:
        """Parse ``to_json`` output; a ValueError names what is wrong with the document."""
        try:
            doc: Any = json.loads(text)
            if doc.get("format") != "rxrl-trace/1":
                raise ValueError(f"unknown format {doc.get('format')!r}")
            choices = {int(k): tuple(int(c) for c in v) for k, v in doc["choices"].items()}
            return cls(choices, str(doc["fingerprint"]), str(doc.get("backend", "")))
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            raise ValueError(f"not an rxrl trace: {e}") from e

    def save(self, path: str | Path) -> None:
        """Write the trace as JSON to ``path``."""
        Path(path).write_text(self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> Trace:
        """Read a trace written by ``save``."""
        return cls.from_json(Path(path).read_text())


class Schedule:
    """Chooses which ready input goes next at a choice point.

    ``ready`` is the sorted list of eligible input indices (never empty); the result must be
    one of them. Make one with ``Schedule.round_robin()``, ``Schedule.random(seed)`` or
    ``Schedule.replay(trace)``.
    """

    def choose(self, point: int, ready: Sequence[int]) -> int:
        """The input index (one of ``ready``) that goes next at choice point ``point``."""
        raise NotImplementedError

    def check_plan(self, fingerprint: str) -> None:
        """Raise ScheduleError if this schedule cannot drive a plan of this shape."""

    @staticmethod
    def round_robin() -> Schedule:
        """Cycle through the ready inputs of each point in index order (the default)."""
        return _RoundRobin()

    @staticmethod
    def random(seed: int) -> Schedule:
        """Pick uniformly among ready inputs with a seeded generator (reproducible)."""
        return _Random(seed)

    @staticmethod
    def replay(trace: Trace) -> Schedule:
        """Make exactly the choices recorded in ``trace``."""
        return _Replay(trace)


class _RoundRobin(Schedule):
    def __init__(self) -> None:
        self._last: dict[int, int] = {}

    def choose(self, point: int, ready: Sequence[int]) -> int:
        last = self._last.get(point, -1)
        choice = next((i for i in ready if i > last), ready[0])
        self._last[point] = choice
        return choice

    def __repr__(self) -> str:
        return "Schedule.round_robin()"


class _Random(Schedule):
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._rng = _random.Random(seed)

    def choose(self, point: int, ready: Sequence[int]) -> int:
        return ready[self._rng.randrange(len(ready))]

    def __repr__(self) -> str:
        return f"Schedule.random({self.seed})"


class _Replay(Schedule):
    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self._pos: dict[int, int] = {}

    def check_plan(self, fingerprint: str) -> None:
        if self.trace.fingerprint and fingerprint != self.trace.fingerprint:
            raise ScheduleError(
                "this trace was recorded for a different plan (its shape differs); "
                "replay it on the plan that produced it"
            )

    def choose(self, point: int, ready: Sequence[int]) -> int:
        recorded = self.trace.choices.get(point, ())
        pos = self._pos.get(point, 0)
        if pos >= len(recorded):
            raise ScheduleError(
                f"the trace has only {len(recorded)} choices for choice point {point}, and the "
                "replay needs more: it was recorded for a shorter run (or another plan)"
            )
        choice = recorded[pos]
        if choice not in ready:
            raise ScheduleError(
                f"choice {pos} at point {point} is input {choice}, which is not ready here "
                f"(ready: {list(ready)}): the replay diverged from the recorded run — are the "
                "plan's sources and actors deterministic?"
            )
        self._pos[point] = pos + 1
        return choice

    def __repr__(self) -> str:
        return f"Schedule.replay(<trace of {len(self.trace)} choices>)"


class Recorder:
    """Records the choices of a run (made by a schedule, or observed by a concurrent backend).

    Thread-safe for concurrent backends as long as each choice point records from one thread
    at a time (appending to a per-point list).
    """

    def __init__(self, fingerprint: str, backend: str) -> None:
        self.fingerprint = fingerprint
        self.backend = backend
        self._choices: dict[int, list[int]] = {}

    def record(self, point: int, choice: int) -> None:
        """Note that input ``choice`` went next at ``point``."""
        self._choices.setdefault(point, []).append(choice)

    def trace(self) -> Trace:
        """A snapshot of the choices so far."""
        return Trace({k: tuple(v) for k, v in list(self._choices.items())},
                     self.fingerprint, self.backend)
