"""The part of PettingZoo's Parallel API that rxrl's multi-agent workers use, as a Protocol."""

from __future__ import annotations

from typing import Any, Protocol, cast, runtime_checkable

import gymnasium as gym


@runtime_checkable
class ParallelEnvLike(Protocol):
    """A PettingZoo Parallel env, structurally (``pettingzoo.ParallelEnv`` and rxrl's own).

    ``agents`` are the agents alive now; an agent that is terminated or truncated at a step
    leaves it after that step (its final observation and reward come with that step), and
    agents may join mid-episode (they appear in ``agents`` and in the step's observations).
    The episode is over when ``agents`` is empty.
    """

    possible_agents: list[Any]
    agents: list[Any]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[Any, Any], dict[Any, Any]]:
        """Start an episode: observations and infos of the agents alive."""
        ...

    def step(self, actions: dict[Any, Any]) -> tuple[
        dict[Any, Any], dict[Any, Any], dict[Any, Any], dict[Any, Any], dict[Any, Any]
    ]:
        """One step of every live agent: observations, rewards, terminated, truncated, infos."""
        ...

    def observation_space(self, agent: Any) -> gym.Space[Any]:
        """The agent's observation space (the same object every call)."""
        ...

    def action_space(self, agent: Any) -> gym.Space[Any]:
        """The agent's action space (the same object every call)."""
        ...

    def close(self) -> None:
        """Release the env's resources."""
        ...


def check_parallel_env(env: object, name: str) -> ParallelEnvLike:
    """``env`` if it has the Parallel API; else ValueError naming ``name`` (an AEC env, say)."""
    needed = ("possible_agents", "reset", "step", "observation_space", "action_space")
    # not isinstance(env, ParallelEnvLike): `agents` may exist only after the first reset
    if not all(hasattr(env, name) for name in needed) or hasattr(env, "agent_iter"):
        kind = type(env).__name__
        hint = " (an AEC env: use the module's parallel_env())" if hasattr(env, "agent_iter") else ""
        raise ValueError(f"{name!r} made a {kind!r}, not a PettingZoo Parallel env{hint}")
    return cast(ParallelEnvLike, env)


__all__ = ["ParallelEnvLike", "check_parallel_env"]
