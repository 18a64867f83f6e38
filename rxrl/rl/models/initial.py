"""A policy's initial weights, built when first needed, and a learner class named lazily.

Both keep torch out of a process that only describes a plan: `InitialWeights` imports torch
only when the weights are built (on a driver that starts a local Ray, in the background while
``ray.init`` waits: `rxrl.warmup`), and `LazyClass` names a learner class that the learner's
own process imports.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any, Generic, TypeVar

import gymnasium as gym

from rxrl import warmup
from rxrl.rl.config import PolicyConfig, QNetConfig
from rxrl.rl.models.forward import Weights

T = TypeVar("T")


class InitialWeights:
    """The initial weights that `rxrl.rl.models.policy.make_policy` gives these spaces, policy config
    and seed (bit for bit what a torch worker builds from the seed itself), built once, on
    the first `get` or in the background (registered with `rxrl.warmup.defer`). For a
    `QNetConfig`, those of `rxrl.rl.models.qnet.make_q_network` (a DQN learner's and workers').

    Pickles as the weights themselves (a plain dict of arrays), so that a process it is sent
    to gets the weights, not the recipe.
    """

    def __init__(self, observation: gym.Space[Any], action: gym.Space[Any], policy: PolicyConfig | QNetConfig,
                 seed: int) -> None:
        self.observation, self.action, self.policy, self.seed = observation, action, policy, seed
        self._lock = threading.Lock()
        self._weights: Weights | None = None
        warmup.defer(self.get)

    def get(self) -> Weights:
        """The weights (built now if they are not yet)."""
        with self._lock:
            if self._weights is None:
                self._weights = self._build()
            return self._weights

    def _build(self) -> Weights:
        if isinstance(self.policy, QNetConfig):
            from rxrl.rl.models.qnet import make_q_network  # torch: only here

            return make_q_network(self.observation, self.action, self.policy, self.seed).get_weights()
        from rxrl.rl.models.policy import make_policy

        return make_policy(self.observation, self.action, self.policy, self.seed).get_weights()

    def __reduce__(self) -> tuple[type[dict[str, Any]], tuple[Weights]]:
        return dict, (self.get(),)


class LazyClass(Generic[T]):
    """``module.name``, imported when first called (or when `cls` is read): a class a
    factory names without importing it where the factory is built. ``__name__`` is
    ``name``, so that the actor group is named after the class."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.__name__ = module, name

    @property
    def cls(self) -> Any:
        """The class itself (imports its module)."""
        return getattr(importlib.import_module(self.module), self.__name__)

    def __call__(self, *args: Any, **kwargs: Any) -> T:
        instance: T = self.cls(*args, **kwargs)
        return instance

    def __repr__(self) -> str:
        return f"LazyClass({self.module}.{self.__name__})"


def weights_of(weights: Weights | InitialWeights) -> Weights:
    """The weights themselves, whichever form they come in."""
    return weights.get() if isinstance(weights, InitialWeights) else weights


__all__ = ["InitialWeights", "LazyClass", "weights_of"]
