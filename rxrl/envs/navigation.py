"""2-D navigation tasks (MAML's point robot): a task-distribution env and its gymnasium form.

A point starts at the origin and moves by its action, clipped to ``[-0.1, 0.1]`` per
coordinate, for ``horizon`` steps; the reward is minus its distance to the task's goal. A
*task* is a goal drawn uniformly from ``[-0.5, 0.5]^2`` (Finn et al., 2017, section 5.2). A
policy that ignores the goal can at best wait near the centre; one adapted to the goal
walks to it.

>>> tasks = Navigation2DTasks(num_envs=3, seed=0)
>>> goals = tasks.sample_tasks(2)
>>> tasks.set_task(goals[0])
>>> obs = tasks.reset()
>>> obs.shape, tasks.horizon
((3, 2), 100)
>>> obs, rewards, terminated, truncated = tasks.step(np.full((3, 2), 0.5))
>>> obs[0].tolist(), bool((rewards < 0).all())
([0.10000000149011612, 0.10000000149011612], True)
"""

from __future__ import annotations

from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import numpy.typing as npt

#: a navigation task: the goal's coordinates
Goal = tuple[float, float]
_STEP = 0.1
_GOAL_RANGE = 0.5


class TaskEnv(Protocol):
    """A task-distribution env (what MAML workers step): tasks drawn, then set.

    ``sample_tasks(n)`` draws ``n`` tasks from the env's distribution (with its own seeded
    generator); ``set_task(task)`` makes every later episode one of that task, until the
    next ``set_task``. Vectorized: ``num_envs`` episodes of the same task run side by side,
    ``horizon`` steps each, from ``reset()``.
    """

    num_envs: int
    horizon: int
    observation_space: gym.Space[Any]
    action_space: gym.Space[Any]

    def sample_tasks(self, n: int) -> list[Any]:
        """``n`` tasks drawn from the distribution."""
        ...

    def set_task(self, task: Any) -> None:
        """Use ``task`` from the next ``reset`` on."""
        ...

    def reset(self) -> npt.NDArray[np.float32]:
        """Start ``num_envs`` episodes of the current task: observations ``[N, *obs]``."""
        ...

    def step(self, actions: npt.NDArray[Any]) -> tuple[
        npt.NDArray[np.float32], npt.NDArray[np.float32], npt.NDArray[np.bool_], npt.NDArray[np.bool_]
    ]:
        """One step of every episode: observations, rewards, terminated, truncated (``[N]``)."""
        ...


def _spaces() -> tuple[gym.spaces.Box, gym.spaces.Box]:
    obs = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    act = gym.spaces.Box(-_STEP, _STEP, (2,), np.float32)
    return obs, act


def _goal(task: Any) -> npt.NDArray[np.float64]:
    goal = np.asarray(task, dtype=np.float64)
    if goal.shape != (2,) or not np.isfinite(goal).all():
        raise ValueError(f"a navigation task is a goal (x, y), got {task!r}")
    return goal


class Navigation2DTasks:
    """``num_envs`` point robots navigating to one task's goal at once (a `TaskEnv`)."""

    def __init__(self, num_envs: int = 20, horizon: int = 100, seed: int = 0) -> None:
        if num_envs < 1 or horizon < 1:
            raise ValueError(f"Navigation2DTasks: num_envs and horizon must be >= 1, got {num_envs}, "
                             f"{horizon}")
        self.num_envs, self.horizon = num_envs, horizon
        self.observation_space: gym.Space[Any]
        self.action_space: gym.Space[Any]
        self.observation_space, self.action_space = _spaces()
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 0x7A5C]))
        self.goal = np.zeros(2)
        self._pos = np.zeros((num_envs, 2))
        self._t = 0

    def sample_tasks(self, n: int) -> list[Goal]:
        """``n`` goals uniform in ``[-0.5, 0.5]^2``."""
        goals = self.rng.uniform(-_GOAL_RANGE, _GOAL_RANGE, size=(n, 2))
        return [(float(x), float(y)) for x, y in goals]

    def set_task(self, task: Any) -> None:
        """Navigate to ``task`` (a goal ``(x, y)``) from the next ``reset`` on."""
        self.goal = _goal(task)

    def reset(self) -> npt.NDArray[np.float32]:
        """Every robot back at the origin."""
        self._pos = np.zeros((self.num_envs, 2))
        self._t = 0
        return self._pos.astype(np.float32)

    def step(self, actions: npt.NDArray[Any]) -> tuple[
        npt.NDArray[np.float32], npt.NDArray[np.float32], npt.NDArray[np.bool_], npt.NDArray[np.bool_]
    ]:
        """Move by the clipped actions; reward minus the distance to the goal."""
        moves = np.asarray(actions, np.float64).reshape(self.num_envs, 2)
        self._pos = self._pos + np.clip(moves, -_STEP, _STEP)
        self._t += 1
        rewards = -np.linalg.norm(self._pos - self.goal, axis=1)
        done = np.full(self.num_envs, self._t >= self.horizon)
        return self._pos.astype(np.float32), rewards.astype(np.float32), np.zeros_like(done), done


class Navigation2D(gym.Env[npt.NDArray[np.float32], npt.NDArray[np.float32]]):
    """One point robot as a gymnasium env (``rxrl/Navigation2D-v0``): spaces, ``rxrl eval``.

    ``goal`` is its task (default the first goal `Navigation2DTasks(seed=0)` draws);
    ``set_task``/``sample_tasks`` as `TaskEnv`.
    """

    def __init__(self, goal: Goal | None = None, horizon: int = 100) -> None:
        self.observation_space, self.action_space = _spaces()
        self.horizon = horizon
        self._tasks = Navigation2DTasks(num_envs=1, horizon=horizon)
        self._tasks.set_task(goal if goal is not None else self._tasks.sample_tasks(1)[0])

    def sample_tasks(self, n: int) -> list[Goal]:
        """``n`` goals drawn from the task distribution."""
        return self._tasks.sample_tasks(n)

    def set_task(self, task: Any) -> None:
        """Navigate to ``task`` from the next ``reset`` on."""
        self._tasks.set_task(task)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[npt.NDArray[np.float32], dict[str, Any]]:
        """Back at the origin."""
        super().reset(seed=seed)
        return self._tasks.reset()[0], {}

    def step(self, action: npt.NDArray[np.float32]) -> tuple[
        npt.NDArray[np.float32], float, bool, bool, dict[str, Any]
    ]:
        """Move by the clipped action; reward minus the distance to the goal."""
        obs, rewards, terminated, truncated = self._tasks.step(np.asarray(action)[None])
        return obs[0], float(rewards[0]), bool(terminated[0]), bool(truncated[0]), {}


def register_gym_envs() -> None:
    """Register ``rxrl/Navigation2D-v0`` with gymnasium (once; rxrl.envs does it on import)."""
    if "rxrl/Navigation2D-v0" not in gym.registry:
        gym.register("rxrl/Navigation2D-v0", entry_point=_make_navigation, max_episode_steps=None)


def _make_navigation(**kwargs: Any) -> Navigation2D:
    return Navigation2D(**kwargs)


register_gym_envs()

__all__ = ["Goal", "Navigation2D", "Navigation2DTasks", "TaskEnv", "register_gym_envs"]
