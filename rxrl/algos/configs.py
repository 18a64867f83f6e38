"""Configs as data: to and from JSON-able dicts, and ``key=value`` overrides (``rxrl train --set``).

Keys are dotted paths into the nested config (``learner.lr``, ``policy.hidden_sizes``); a
bare name that is the last part of exactly one path is accepted too (``lr``).

>>> from rxrl.algos.on_policy.ppo import PPO
>>> config = with_settings(PPO(), {"lr": 1e-3, "policy.hidden_sizes": [32, 32]})
>>> config.learner.lr, config.policy.hidden_sizes
(0.001, (32, 32))
>>> with_settings(PPO(), {"lrr": 1})
Traceback (most recent call last):
ValueError: unknown setting 'lrr' for PPO; did you mean 'learner.lr'?
"""

from __future__ import annotations

import difflib
import json
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

import attrs

C = TypeVar("C")


def to_dict(config: Any) -> dict[str, Any]:
    """A JSON-able dict of an attrs config, nested configs as nested dicts."""
    out: dict[str, Any] = {}
    for field in attrs.fields(type(config)):
        value = getattr(config, field.name)
        if attrs.has(type(value)):
            out[field.name] = to_dict(value)
        elif isinstance(value, tuple):
            out[field.name] = list(value)
        elif isinstance(value, Mapping):
            out[field.name] = dict(value)
        else:
            out[field.name] = value
    return out


def from_dict(cls: type[C], data: Mapping[str, Any], path: str = "") -> C:
    """Build ``cls`` from a dict made by `to_dict` (missing keys keep their defaults).

    Values are checked against the field types (an int where a float is expected is fine,
    a list becomes a tuple); the config's own validators then run. Errors are ValueErrors
    that name the field.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"{path.rstrip('.') or cls.__name__} must be a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in attrs.fields(typing.cast(Any, cls)) if f.init}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(f"unknown setting {path + unknown[0]!r} for {cls.__name__}")
    kwargs = {name: _coerce(value, hints[name], path + name) for name, value in data.items()}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{path.rstrip('.')}: {e}" if path else str(e)) from None


def paths(cls: type[Any], prefix: str = "", groups: bool = False) -> list[str]:
    """Every settable leaf of a config class as a dotted path, in field order.

    With ``groups`` the nested configs themselves (``learner``) are listed too.
    """
    out: list[str] = []
    hints = typing.get_type_hints(cls)
    for field in attrs.fields(cls):
        kind = hints[field.name]
        if isinstance(kind, type) and attrs.has(kind):
            out += [prefix + field.name] if groups else []
            out += paths(kind, f"{prefix}{field.name}.", groups)
        else:
            out.append(prefix + field.name)
    return out


def resolve(cls: type[Any], key: str) -> str:
    """The full dotted path ``key`` names: itself, or the one path ending in ``.key``."""
    if key in paths(cls, groups=True):
        return key
    known = paths(cls)
    matches = [p for p in known if p.rpartition(".")[2] == key]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise ValueError(f"setting {key!r} is ambiguous for {cls.__name__}: use one of {matches}")
    close = difflib.get_close_matches(key, known + [p.rpartition(".")[2] for p in known], n=1)
    hint = f"; did you mean {resolve(cls, close[0])!r}?" if close else f"; known settings: {known}"
    raise ValueError(f"unknown setting {key!r} for {cls.__name__}{hint}")


def with_settings(config: C, settings: Mapping[str, Any]) -> C:
    """``config`` with each ``path: value`` of ``settings`` applied (see the module doc)."""
    data = to_dict(config)
    cls = type(config)
    for key, value in settings.items():
        *parents, leaf = resolve(cls, key).split(".")
        node = data
        for part in parents:
            node = node[part]
        node[leaf] = value
    return from_dict(cls, data)


def parse_assignment(text: str) -> tuple[str, Any]:
    """``"key=value"`` as ``(key, value)``: the value is JSON if it parses, else a string.

    ``true``/``false``/``null`` and Python's ``True``/``False``/``None`` are accepted;
    ``64,64`` is the list ``[64, 64]``.
    """
    key, sep, raw = text.partition("=")
    key, raw = key.strip(), raw.strip()
    if not sep or not key:
        raise ValueError(f"bad setting {text!r}: expected key=value, e.g. lr=0.001")
    words: dict[str, Any] = {"True": True, "False": False, "None": None}
    if raw in words:
        return key, words[raw]
    try:
        value: Any = json.loads(raw)
    except json.JSONDecodeError:
        if "," in raw:
            return key, [parse_assignment(f"x={part}")[1] for part in raw.split(",")]
        return key, raw
    return key, value


def _coerce(value: Any, kind: Any, path: str) -> Any:
    """``value`` as the type ``kind`` (see `from_dict`); ValueError naming ``path`` if not."""
    origin, args = get_origin(kind), get_args(kind)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for option in (a for a in args if a is not type(None)):
            try:
                return _coerce(value, option, path)
            except ValueError as e:
                errors.append(str(e))
        raise ValueError(errors[0] if errors else f"{path} must not be None")
    if origin is Literal:
        if value in args:
            return value
        raise ValueError(f"{path} must be one of {list(args)}, got {value!r}")
    if kind is Any:
        return value
    if kind is bool:
        if isinstance(value, bool):
            return value
    elif kind is int:
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif kind is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif kind is str:
        if isinstance(value, str):
            return value
        if isinstance(value, list) and value and all(isinstance(x, str) for x in value):
            return ",".join(value)  # text with commas, which parse_assignment read as a list
    elif origin is tuple:
        items = [value] if isinstance(value, int | float | str) else value
        if isinstance(items, list | tuple):
            item_kind = args[0] if args else Any
            return tuple(_coerce(x, item_kind, f"{path}[{i}]") for i, x in enumerate(items))
    elif origin is Mapping or kind is dict or origin is dict:
        if isinstance(value, Mapping):
            return dict(value)
    elif isinstance(kind, type) and attrs.has(kind):
        if isinstance(value, kind):
            return value
        return from_dict(kind, value, path + ".")
    name = getattr(kind, "__name__", str(kind))
    raise ValueError(f"{path} must be {name}, got {value!r}")


__all__ = ["from_dict", "parse_assignment", "paths", "resolve", "to_dict", "with_settings"]
