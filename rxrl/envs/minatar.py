"""MinAtar through gymnasium: ``MinAtar/<Game>-v1`` ids with channels-first uint8 observations.

MinAtar (the ``minatar`` extra) registers ``MinAtar/Asterix``, ``Breakout``, ``Freeway``,
``Seaquest`` and ``SpaceInvaders`` (``-v0``: all 6 actions, ``-v1``: the game's minimal set);
rxrl registers them when an id first asks (`rxrl.envs.vector.registered_id`). A MinAtar state is
``[10, 10, C]`` bool; rxrl's observation is ``[C, 10, 10]`` uint8 (0/1), the layout of every
pixel observation in rxrl. ``env_kwargs`` go to MinAtar's ``Environment``
(``sticky_action_prob``, 0.1 by default; ``difficulty_ramping``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt


def register_minatar(env_id: str) -> None:
    """Register MinAtar's ids unless they are; a one-line ValueError naming the ``minatar`` extra
    if MinAtar is not installed."""
    before = logging.root.manager.disable
    logging.disable(max(before, logging.WARNING))  # its first import warns that seaborn is missing
    try:  # (seaborn only renders)
        import minatar.gym  # type: ignore[import-untyped]
    except ImportError:
        raise ValueError(f'{env_id} needs the minatar extra: pip install -e ".[minatar]"') from None
    finally:
        logging.disable(before)
    if env_id not in gym.registry:
        minatar.gym.register_envs()


def channels_first(state: npt.NDArray[np.bool_]) -> npt.NDArray[np.uint8]:
    """A MinAtar state ``[10, 10, C]`` (bool) as ``[C, 10, 10]`` uint8."""
    return np.ascontiguousarray(np.moveaxis(state, -1, 0), dtype=np.uint8)


def make_minatar_env(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> gym.Env[Any, Any]:
    """One MinAtar env with `channels_first` observations (``env_kwargs`` to MinAtar)."""
    from gymnasium.wrappers import TransformObservation

    register_minatar(env_id)
    env: gym.Env[Any, Any] = gym.make(env_id, **dict(env_kwargs or {}))
    height, width, channels = env.observation_space.shape or ()
    space = gym.spaces.Box(0, 1, (channels, height, width), np.uint8)
    return TransformObservation(env, channels_first, space)


__all__ = ["channels_first", "make_minatar_env", "register_minatar"]
