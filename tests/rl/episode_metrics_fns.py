"""Episode-metrics functions for tests/rl/test_episode_metrics.py (``module:function`` names)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def fn(info: Mapping[str, Any]) -> Mapping[str, float]:
    """The episode's length as the worker saw it, and how many env info keys the final step had."""
    return {"length_seen": float(info["episode_length"]),
            "env_info_keys": float(len(set(info) - {"episode_return", "episode_length"}))}


def declared(info: Mapping[str, Any]) -> Mapping[str, float]:
    """`fn`'s length, with its name declared up front (``names``)."""
    return {"length_seen": float(info["episode_length"])}


declared.names = ("length_seen",)  # type: ignore[attr-defined]

not_callable = 3
