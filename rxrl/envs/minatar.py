"""MinAtar through gymnasium: ``MinAtar/<Game>-v1`` ids with channels-first uint8 observations.

MinAtar (the ``minatar`` extra) registers ``MinAtar/Asterix``, ``Breakout``, ``Freeway``,
``Seaquest`` and ``SpaceInvaders`` (``-v0``: all 6 actions, ``-v1``: the game's minimal set);
rxrl registers them when an id first asks (`rxrl.envs.vector.registered_id`). A MinAtar state is
``[10, 10, C]`` bool; rxrl's observation is ``[C, 10, 10]`` uint8 (0/1), the layout of every
pixel observation in rxrl. ``env_kwargs`` go to MinAtar's ``Environment``
(``sticky_action_prob``, 0.1 by default; ``difficulty_ramping``).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import sys
import types
from collections.abc import Iterator, Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt

#: what MinAtar's ``environment`` module imports only to render (``Environment.display_state``):
#: with them, importing MinAtar took ~2 s and ~160 MB (matplotlib's pyplot, seaborn, and
#: through it pandas and scipy) in the driver and in every worker process of a MinAtar run
RENDER_ONLY = ("seaborn", "matplotlib.pyplot")


class OnFirstUse(types.ModuleType):
    """Stands in for a module MinAtar imports only to render: the real module is imported when
    an attribute is first read through it (MinAtar's ``display_state``), and kept."""

    def __getattr__(self, attr: str) -> Any:
        real = self.__dict__.get("_real")
        if real is None:
            if attr.startswith("__"):  # the import system's probes (``__path__``, ...) load nothing
                raise AttributeError(attr)
            if sys.modules.get(self.__name__) is self:  # read while MinAtar imports
                del sys.modules[self.__name__]
            real = self.__dict__["_real"] = importlib.import_module(self.__name__)
        return getattr(real, attr)


@contextlib.contextmanager
def render_modules_on_first_use() -> Iterator[None]:
    """While MinAtar is first imported, `OnFirstUse` stand-ins for the `RENDER_ONLY` modules
    that are installed and not imported yet; afterwards ``sys.modules`` is as it was (a later
    ``import seaborn`` gets the real one; one that is not installed still fails to import).
    Once MinAtar is imported it does nothing (every env made calls it)."""
    stand_ins = {}
    if "minatar.environment" not in sys.modules:
        for name in RENDER_ONLY:
            top = name.partition(".")[0]
            if name not in sys.modules and importlib.util.find_spec(top) is not None:
                stand_ins[name] = sys.modules[name] = OnFirstUse(name)
    try:
        yield
    finally:
        for name, module in stand_ins.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]


def register_minatar(env_id: str) -> None:
    """Register MinAtar's ids unless they are; a one-line ValueError naming the ``minatar`` extra
    if MinAtar is not installed. MinAtar's rendering modules are imported when it first renders
    (`render_modules_on_first_use`), not with it."""
    before = logging.root.manager.disable
    logging.disable(max(before, logging.WARNING))  # its first import warns that seaborn is missing
    try:  # (seaborn only renders)
        with render_modules_on_first_use():
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
