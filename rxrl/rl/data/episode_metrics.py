"""Custom per-episode metrics, computed on the rollout workers (``episode_metrics`` setting).

A run's ``episode_metrics`` names an importable function, ``"module:function"`` (as
``--env module:Env-v0`` names an env's module). Every worker resolves it and, for every
episode that ends in any of its sub-environments, calls it with one mapping: the final step's
``info`` of that sub-environment (gymnasium vector infos split per env: NEXT_STEP envs give
it in the step that ends the episode, SAME_STEP envs under ``info["final_info"]``), plus the
worker's ``"episode_return"`` (raw, unscaled) and ``"episode_length"`` (these two shadow env
keys of the same names). It returns ``{name: number}``; the values travel with the batch's
episode statistics (`EpisodeMetricsArrays`, aligned with ``episode_returns``) and the driver
reports each name as a ``custom/<name>`` column: the mean over the same window as
``episode_return_mean`` (the last 100 episodes), NaN before an episode reported it.

Rule: the function must return the same names for every episode. A record holds every name
seen so far; a name missing from an episode counts as NaN there (left out of the mean). As a
CSV's header is fixed by its first row, a function may declare its names up front with a
``names`` attribute (a sequence of str; `declared_names`): they are then columns from the
first record, NaN until an episode ends. Without it, the names are those of the episodes
that ended before the first record (on CartPole, always all of them).

Torch-free: a torch-free rollout worker imports it.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

#: ``fn(info) -> {name: value}``: what an ``episode_metrics`` setting names
EpisodeMetricsFn = Callable[[Mapping[str, Any]], Mapping[str, float]]

#: per-episode values of the custom metrics, by name, each aligned with ``episode_returns``
EpisodeMetricsArrays = Mapping[str, npt.NDArray[np.float64]]


def resolve_episode_metrics(name: str, setting: str = "episode_metrics") -> EpisodeMetricsFn:
    """The function ``name`` (``"module:function"``, the function may be dotted: ``a.b:C.f``)
    names. Raises a one-line ValueError naming ``setting`` if it cannot be imported or is not
    callable."""
    if not isinstance(name, str) or name.count(":") != 1 or not all(name.split(":")):
        raise ValueError(f"{setting} must name a function as 'module:function', got {name!r}")
    module_name, qualname = name.split(":")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as e:
        raise ValueError(f"{setting}={name!r}: cannot import module {module_name!r}: "
                         f"{type(e).__name__}: {e}") from None
    for part in qualname.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ValueError(f"{setting}={name!r}: module {module_name!r} has no "
                             f"{qualname!r}") from None
    if not callable(target):
        raise ValueError(f"{setting}={name!r}: {qualname!r} is not callable")
    fn: EpisodeMetricsFn = target
    return fn


def declared_names(fn: EpisodeMetricsFn | str | None) -> tuple[str, ...]:
    """The names ``fn`` declares in its ``names`` attribute (``()`` if none, or no ``fn``);
    a string is resolved first."""
    if fn is None:
        return ()
    if isinstance(fn, str):
        fn = resolve_episode_metrics(fn)
    names = getattr(fn, "names", ())
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"episode_metrics: {fn!r}.names must be a sequence of str, got {names!r}")
    return tuple(names)


def env_info(infos: Mapping[str, Any], index: int) -> dict[str, Any]:
    """Sub-environment ``index``'s entries of a gymnasium vector ``info`` dict: arrays indexed,
    entries masked out by their ``_name`` array left out, nested dicts split the same way."""
    out: dict[str, Any] = {}
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get("_" + key)
        if mask is not None and not bool(mask[index]):
            continue
        if isinstance(value, Mapping):
            out[key] = env_info(value, index)
        else:
            try:
                out[key] = value[index]
            except (TypeError, IndexError, KeyError):
                out[key] = value
    return out


class EpisodeMetricsRecorder:
    """A worker's side: calls ``fn`` for every ended episode and collects its values.

    ``record`` once per vector step that ended episodes; ``take`` the values collected since
    the previous ``take``, aligned with the episodes recorded (NaN where an episode's result
    lacks a name another one has).
    """

    def __init__(self, fn: EpisodeMetricsFn | str) -> None:
        self.fn = resolve_episode_metrics(fn) if isinstance(fn, str) else fn
        self._rows: list[Mapping[str, float]] = []

    def record(self, infos: Mapping[str, Any], ended: npt.NDArray[np.intp], same_step: bool,
               returns: npt.NDArray[np.float64], lengths: npt.NDArray[np.int64]) -> None:
        """The episodes of sub-envs ``ended`` just ended with ``returns`` and ``lengths``;
        ``infos`` is the step's info (SAME_STEP: the final info is ``infos["final_info"]``)."""
        source: Mapping[str, Any] = infos.get("final_info", {}) if same_step else infos
        for env, ret, length in zip(ended, returns, lengths, strict=True):
            info = env_info(source, int(env))
            info["episode_return"], info["episode_length"] = float(ret), int(length)
            result = self.fn(info)
            if not isinstance(result, Mapping):
                raise TypeError(f"episode_metrics function {self.fn!r} returned {result!r}, "
                                "not a mapping of names to numbers")
            self._rows.append({str(k): float(v) for k, v in result.items()})

    def take(self) -> dict[str, npt.NDArray[np.float64]]:
        """The values recorded since the last call, by name."""
        rows, self._rows = self._rows, []
        names = list(dict.fromkeys(k for row in rows for k in row))
        return {n: np.array([row.get(n, math.nan) for row in rows], dtype=np.float64) for n in names}


def join(parts: Sequence[tuple[EpisodeMetricsArrays, int]]) -> dict[str, npt.NDArray[np.float64]]:
    """Concatenate ``(values, episodes)`` parts in order: every name of any part, NaN for the
    episodes of parts without it."""
    names = list(dict.fromkeys(k for values, _ in parts for k in values))
    return {n: np.concatenate([np.asarray(values[n], dtype=np.float64) if n in values
                               else np.full(count, math.nan) for values, count in parts]
                              or [np.zeros(0)])
            for n in names}


def check_aligned(values: EpisodeMetricsArrays, episodes: int, owner: str) -> None:
    """Raise ValueError unless every array of ``values`` has one entry per episode."""
    for name, array in values.items():
        if np.shape(array) != (episodes,):
            raise ValueError(f"{owner} episode_metrics[{name!r}] has shape {np.shape(array)}, "
                             f"not ({episodes},): one value per ended episode")


__all__ = ["EpisodeMetricsArrays", "EpisodeMetricsFn", "EpisodeMetricsRecorder", "check_aligned",
           "declared_names", "env_info", "join", "resolve_episode_metrics"]
