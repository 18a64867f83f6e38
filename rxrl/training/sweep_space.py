"""The search-space language of ``rxrl sweep``: ``--space key=dist(...)`` and ``--space-file``.

A space maps ``--set`` paths (``learner.lr``, or a unique last part: ``lr``) to distributions,
written ``uniform(low, high)``, ``loguniform(low, high)``, ``randint(low, high)`` (Tune's: an
integer in ``[low, high)``), ``choice(a, b, ...)`` or ``grid(a, b, ...)`` (every value, in
order):

>>> parse_space(["lr=loguniform(1e-4,1e-2)", "gamma=choice(0.98, 0.99)"])
{'lr': Dist(kind='loguniform', args=(0.0001, 0.01)), 'gamma': Dist(kind='choice', args=(0.98, 0.99))}
>>> parse_dist("loguniform(1e-2)")
Traceback (most recent call last):
ValueError: loguniform takes 2 numbers (low, high), got 1
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs

from rxrl.algos.configs import parse_assignment

#: the distributions a space may use
DISTRIBUTIONS = ("uniform", "loguniform", "randint", "choice", "grid")


@attrs.frozen
class Dist:
    """One setting's distribution: ``kind`` (one of `DISTRIBUTIONS`) and its arguments."""

    kind: str
    args: tuple[Any, ...]

    @property
    def text(self) -> str:
        """As written on the command line: ``loguniform(0.0001, 0.01)`` (`parse_dist` reads it)."""
        return f"{self.kind}({', '.join(json.dumps(a) for a in self.args)})"

    @property
    def discrete(self) -> bool:
        """Whether the values are listed (choice, grid)."""
        return self.kind in ("choice", "grid")

    def probes(self) -> tuple[Any, ...]:
        """Values that check the whole range against the config: every value; the bounds of a
        range, and for a float range a value that is not a whole number (an integer setting
        accepts 1.0, not 1.0000000000000002)."""
        if self.discrete:
            return self.args
        low, high = self.args
        if self.kind == "randint":
            return (low, high - 1)
        return (low, math.nextafter(low, high), high)

    def clip(self, value: Any) -> Any:
        """``value`` brought back into the range (PBT multiplies values by 0.8 or 1.2)."""
        if self.discrete:
            return value
        low, high = self.args
        if self.kind == "randint":
            return int(min(max(round(value), low), high - 1))
        return float(min(max(value, low), high))

    def holds(self, value: Any) -> bool:
        """Whether ``value`` is one the distribution can draw."""
        if self.discrete:
            # equal, and not True for 1 (or 0 for False)
            return any(value == a and isinstance(value, bool) == isinstance(a, bool) for a in self.args)
        if not isinstance(value, int | float) or isinstance(value, bool):
            return False
        low, high = self.args
        if self.kind == "randint":
            return float(value).is_integer() and low <= value < high
        return bool(low <= value <= high)

    def tune_domain(self) -> Any:
        """The Ray Tune search-space object (``tune.loguniform(...)``, ``tune.grid_search``)."""
        from ray import tune

        if self.kind == "uniform":
            return tune.uniform(*self.args)
        if self.kind == "loguniform":
            return tune.loguniform(*self.args)
        if self.kind == "randint":
            return tune.randint(*self.args)
        if self.kind == "choice":
            return tune.choice(list(self.args))
        return tune.grid_search(list(self.args))


def parse_dist(text: str) -> Dist:
    """``name(arg, ...)`` as a `Dist`; ValueError (one line) if it is not one.

    Arguments are JSON or Python literals (``1e-4``, ``[64, 64]``, ``"tanh"``, ``True``) or
    bare words (``tanh``).
    """
    match = re.fullmatch(r"\s*([A-Za-z_]\w*)\s*\((.*)\)\s*", text, re.DOTALL)
    if match is None:
        raise ValueError(f"expected a distribution like loguniform(1e-4, 1e-2), got {text!r}")
    kind, inner = match.group(1), match.group(2)
    if kind not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {kind!r}; choose one of {', '.join(DISTRIBUTIONS)}")
    args = tuple(_literal(part) for part in _split_args(inner))
    return _checked(Dist(kind, args))


def _checked(dist: Dist) -> Dist:
    kind, args = dist.kind, dist.args
    if dist.discrete:
        if not args:
            raise ValueError(f"{kind} takes at least one value, got none")
        return dist
    what = "integers" if kind == "randint" else "numbers"
    if len(args) != 2 or not all(_is_number(a, kind == "randint") for a in args):
        got = len(args) if len(args) != 2 else f"{args[0]!r}, {args[1]!r}"
        raise ValueError(f"{kind} takes 2 {what} (low, high), got {got}")
    low, high = args
    if not low < high:
        raise ValueError(f"{kind}({low}, {high}): low must be less than high")
    if kind == "loguniform" and low <= 0:
        raise ValueError(f"loguniform({low}, {high}): low must be > 0")
    if kind == "randint":
        return dist
    return Dist(kind, (float(low), float(high)))


def _is_number(x: Any, integer: bool) -> bool:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return False
    return isinstance(x, int) if integer else math.isfinite(x)


def _split_args(inner: str) -> list[str]:
    """The top-level comma-separated parts of ``inner`` (brackets and quotes kept whole)."""
    if not inner.strip():
        return []
    parts, depth, quote, escaped, start = [], 0, "", False, 0
    for i, ch in enumerate(inner):
        if quote:  # a backslash escapes the next character, so "\\" ends at its second quote
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    if any(not p.strip() for p in parts):
        raise ValueError(f"an empty argument in ({inner})")
    return [p.strip() for p in parts]


def _literal(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        pass
    if re.fullmatch(r"[A-Za-z_][\w.:/-]*", text):
        return text
    raise ValueError(f"cannot read the value {text!r} (a number, a list, or a word)")


def parse_space_entry(text: str) -> tuple[str, Dist]:
    """``key=dist(...)`` as ``(key, Dist)``; ValueError naming the entry."""
    key, sep, rest = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"bad --space {text!r}: expected key=distribution, e.g. lr=loguniform(1e-4,1e-2)")
    try:
        return key.strip(), parse_dist(rest)
    except ValueError as e:
        raise ValueError(f"bad --space {text!r}: {e}") from None


def parse_space(entries: Iterable[str]) -> dict[str, Dist]:
    """``--space`` entries as ``{key: Dist}`` (a key given twice is refused)."""
    space: dict[str, Dist] = {}
    for text in entries:
        key, dist = parse_space_entry(text)
        if key in space:
            raise ValueError(f"bad --space {text!r}: {key} is in the space twice")
        space[key] = dist
    return space


def read_space_file(path: str | Path) -> dict[str, Dist]:
    """A ``--space-file``: a JSON object (``{"lr": "loguniform(1e-4, 1e-2)"}`` or
    ``{"lr": {"loguniform": [1e-4, 1e-2]}}``), or one ``key=dist(...)`` per line (``#``
    comments and blank lines skipped)."""
    file = Path(path)
    try:
        text = file.read_text()
    except OSError as e:
        raise ValueError(f"cannot read --space-file {file}: {e.strerror or e}") from None
    if not text.lstrip().startswith("{"):
        lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
        return parse_space(line for line in lines if line)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"bad --space-file {file}: not JSON ({e.msg} at line {e.lineno})") from None
    space: dict[str, Dist] = {}
    for key, value in doc.items():
        try:
            space[key] = _dist_of_json(value)
        except ValueError as e:
            raise ValueError(f"bad --space-file {file}: {key}: {e}") from None
    return space


def _dist_of_json(value: Any) -> Dist:
    if isinstance(value, str):
        return parse_dist(value)
    if isinstance(value, dict) and len(value) == 1:
        (kind, args), = value.items()
        if kind not in DISTRIBUTIONS:
            raise ValueError(f"unknown distribution {kind!r}; choose one of {', '.join(DISTRIBUTIONS)}")
        return _checked(Dist(kind, tuple(args) if isinstance(args, list) else (args,)))
    raise ValueError(f'expected "dist(...)" or {{"dist": [args]}}, got {value!r}')


def setting_text(key: str, value: Any) -> str:
    """``key=value`` as ``rxrl train --set`` reads it back (`parse_assignment`)."""
    raw = json.dumps(value, separators=(",", ":")) if not isinstance(value, str) else value
    if isinstance(value, str) and parse_assignment(f"x={value}")[1] != value:
        raw = json.dumps(value)
    return f"{key}={raw}"


__all__ = ["DISTRIBUTIONS", "Dist", "parse_dist", "parse_space", "parse_space_entry", "read_space_file",
           "setting_text"]
