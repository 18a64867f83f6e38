"""rxrl.envs: the multi-agent env registry (PettingZoo Parallel API) and rxrl's own envs.

Single-agent envs are gymnasium ids, built by `make_env` and `rxrl.envs.vector.make_vector_env`;
pixel games come preprocessed: ``ALE/`` ids as `AtariSettings` say (`rxrl.envs.atari`),
``MinAtar/`` ids channels first (`rxrl.envs.minatar`).

A multi-agent env is named by a string, so that configs stay JSON and Ray actors can build
their own copies:

* a built-in name: ``MultiCartPole-v0`` (`MultiAgentCartPole`, k CartPoles as k agents);
* a module with a ``parallel_env(**kwargs)`` function, as every PettingZoo env has:
  ``mpe2.simple_spread_v3``, ``pettingzoo.butterfly.pistonball_v6``;
* ``module:function``, a function returning a Parallel env.

>>> env = make_parallel_env("MultiCartPole-v0", {"num_agents": 3})
>>> env.possible_agents
['cartpole_0', 'cartpole_1', 'cartpole_2']
>>> make_parallel_env("CartPole-v1")  # doctest: +ELLIPSIS
Traceback (most recent call last):
ValueError: 'CartPole-v1' is a single-agent gymnasium env, not a multi-agent (PettingZoo Parallel) env: ...
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from rxrl.envs.api import ParallelEnvLike, check_parallel_env
from rxrl.envs.atari import AtariSettings
from rxrl.envs.multi_cartpole import MultiAgentCartPole
from rxrl.envs.navigation import Navigation2D, Navigation2DTasks, TaskEnv, register_gym_envs
from rxrl.envs.stateless import (
    StatelessCartPoleEnv,
    StatelessCartPoleVectorEnv,
    StatelessPendulumEnv,
    register_stateless_envs,
)
from rxrl.envs.vector import make_env

#: task-distribution envs (MAML) by gymnasium id: ``make(num_envs=, seed=, **env_kwargs)``
TASK_ENVS: Mapping[str, Callable[..., TaskEnv]] = {"rxrl/Navigation2D-v0": Navigation2DTasks}

#: rxrl's own multi-agent envs, by name
BUILTIN: Mapping[str, Callable[..., ParallelEnvLike]] = {"MultiCartPole-v0": MultiAgentCartPole}

_KINDS = ("multi-agent envs are MultiCartPole-v0, a module with parallel_env() "
          "(e.g. mpe2.simple_spread_v3) or module:function")


def make_parallel_env(name: str, kwargs: Mapping[str, Any] | None = None) -> ParallelEnvLike:
    """A new Parallel env called ``name`` (see the module docstring), built with ``kwargs``.

    ValueError, in one line, for a name that is no multi-agent env: a gymnasium id, a
    module that cannot be imported or has no ``parallel_env``, or an object without the
    Parallel API.
    """
    args = dict(kwargs or {})
    if name in BUILTIN:
        return check_parallel_env(BUILTIN[name](**args), name)
    module, sep, attr = name.partition(":")
    if not sep:
        module, attr = name, "parallel_env"
    if not module or ("." not in module and not sep):
        raise ValueError(_not_multi_agent(name))
    try:
        found = importlib.import_module(module)
    except ImportError as e:
        if _is_gym_id(name):
            raise ValueError(_not_multi_agent(name)) from None
        raise ValueError(f"cannot import the multi-agent env module {module!r}: {e}") from None
    factory = getattr(found, attr, None)
    if not callable(factory):
        raise ValueError(f"{name!r}: module {module!r} has no function {attr}() making a PettingZoo "
                         f"Parallel env; {_KINDS}")
    try:
        env = factory(**args)
    except TypeError as e:
        raise ValueError(f"{name!r}: {attr}() does not take these env_kwargs {args}: {e}") from None
    return check_parallel_env(env, name)


def _is_gym_id(name: str) -> bool:
    import gymnasium as gym

    try:
        gym.spec(name.rpartition(":")[2])
    except gym.error.Error:
        return False
    return True


def _not_multi_agent(name: str) -> str:
    if _is_gym_id(name):
        return (f"{name!r} is a single-agent gymnasium env, not a multi-agent (PettingZoo Parallel) "
                f"env: use it with ppo, a2c, a3c; {_KINDS}")
    return f"{name!r} is not a multi-agent (PettingZoo Parallel) env; {_KINDS}"


__all__ = ["BUILTIN", "TASK_ENVS", "AtariSettings", "MultiAgentCartPole", "Navigation2D", "Navigation2DTasks",
           "ParallelEnvLike", "StatelessCartPoleEnv", "StatelessCartPoleVectorEnv", "StatelessPendulumEnv",
           "TaskEnv", "check_parallel_env", "make_env", "make_parallel_env", "register_gym_envs",
           "register_stateless_envs"]
