"""Environment construction: gymnasium vector envs and the spaces a policy is built for.

Pixel envs are preprocessed here, so that a worker, a learner's spaces and an evaluation see the
same observations: ``ALE/<Game>-v5`` ids get the standard Atari preprocessing
(`rxrl.envs.atari`, the ``atari`` extra) and ``MinAtar/<Game>-v1`` ids channels-first uint8
observations (`rxrl.envs.minatar`, the ``minatar`` extra). An env that plays games of several
lives reports each game's raw score through its ``info`` (`GameScore`), and the workers report
those (`reported_episodes`), not their own per-life sums of clipped rewards.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from contextlib import closing
from typing import Any, SupportsFloat

import attrs
import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium.vector import AutoresetMode, VectorEnv


@attrs.frozen
class EnvSpaces:
    """The single-environment observation and action spaces of an environment.

    A learner needs these (not an environment) to build its policy; `EnvSpaces.of(id)`
    reads them from a throwaway instance.
    """

    observation: gym.Space[Any]
    action: gym.Space[Any]

    @staticmethod
    def of(env: str, env_kwargs: Mapping[str, Any] | None = None) -> EnvSpaces:
        """The spaces of the registered gymnasium environment `env`: an instance is built the
        first time a process asks for an (env, kwargs) pair, and its spaces kept (a run's
        config checks, its learner and its policy checks then share one build)."""
        key = (env, json.dumps(dict(env_kwargs or {}), sort_keys=True, default=repr))
        if key not in _SPACES:
            with closing(make_env(env, env_kwargs)) as instance:
                _SPACES[key] = EnvSpaces(instance.observation_space, instance.action_space)
        return _SPACES[key]


#: `EnvSpaces.of`'s builds, by env id and kwargs
_SPACES: dict[tuple[str, str], EnvSpaces] = {}


def make_env(env: str, env_kwargs: Mapping[str, Any] | None = None, training: bool = True
             ) -> gym.Env[Any, Any]:
    """One instance of `env`, preprocessed as a worker's (``training``) or as an evaluation's.

    ``ALE/`` ids: `rxrl.envs.atari.make_atari_env` (life-loss episodes and clipped rewards only
    for training); ``MinAtar/`` ids: `rxrl.envs.minatar.make_minatar_env`; any other id:
    ``gymnasium.make(env, **env_kwargs)``, the same either way.
    """
    name = registered_id(env)
    if is_atari(name):
        from rxrl.envs.atari import make_atari_env

        return make_atari_env(name, env_kwargs, training)
    if is_minatar(name):
        from rxrl.envs.minatar import make_minatar_env

        return make_minatar_env(name, env_kwargs)
    return gym.make(env, **dict(env_kwargs or {}))


def default_vectorization_mode(env: str) -> str:
    """`"vector_entry_point"` when `env` registers a native vector env, else `"sync"`."""
    return "vector_entry_point" if gym.spec(env).vector_entry_point is not None else "sync"


def make_vector_env(
    env: str,
    num_envs: int,
    vectorization_mode: str | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    vector_kwargs: Mapping[str, Any] | None = None,
) -> VectorEnv[Any, Any, Any]:
    """A gymnasium vector env of `num_envs` copies of `env`.

    The mode defaults to `default_vectorization_mode(env)` (native vector envs are ~3x
    faster than `"sync"` on CartPole). Raises ValueError if the env's autoreset mode is
    `DISABLED`, which a rollout worker cannot drive.

    ``ALE/`` ids are preprocessed for training (`rxrl.envs.atari.make_atari_vector_env`: ale-py's
    native vector env by default; ``"sync"``/``"async"``: gymnasium's wrappers; ``"envpool"``);
    ``MinAtar/`` ids are `make_env`'s instances in a ``"sync"`` or ``"async"`` vector env.
    """
    if num_envs < 1:
        raise ValueError(f"make_vector_env: num_envs must be >= 1, got {num_envs}")
    name = registered_id(env)
    if is_atari(name):
        from rxrl.envs.atari import make_atari_vector_env

        return make_atari_vector_env(name, num_envs, vectorization_mode, env_kwargs, vector_kwargs)
    if is_minatar(name):
        return _vector_of_instances(name, num_envs, vectorization_mode or "sync", env_kwargs,
                                    vector_kwargs)
    mode = vectorization_mode or default_vectorization_mode(env)
    vec = gym.make_vec(
        env,
        num_envs,
        vectorization_mode=mode,
        vector_kwargs=dict(vector_kwargs or {}),
        **dict(env_kwargs or {}),
    )
    if autoreset_mode(vec) is AutoresetMode.DISABLED:
        vec.close()
        raise ValueError(f"make_vector_env: {env!r} has autoreset mode DISABLED; use NEXT_STEP or SAME_STEP")
    return vec


def _vector_of_instances(env: str, num_envs: int, mode: str, env_kwargs: Mapping[str, Any] | None,
                         vector_kwargs: Mapping[str, Any] | None) -> VectorEnv[Any, Any, Any]:
    """`num_envs` of `make_env`'s training instances in gymnasium's ``"sync"`` or ``"async"``
    vector env."""
    from functools import partial

    factory = partial(make_env, env, dict(env_kwargs or {}), True)
    kwargs = dict(vector_kwargs or {})
    if mode == "sync":
        return gym.vector.SyncVectorEnv([factory] * num_envs, **kwargs)
    if mode == "async":
        return gym.vector.AsyncVectorEnv([factory] * num_envs, **kwargs)
    raise ValueError(f"make_vector_env: {env!r} has no vectorization_mode {mode!r}; "
                     "use 'sync' or 'async'")


def same_step_unless_native(env: str, vectorization_mode: str | None,
                            vector_kwargs: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """``vector_kwargs`` with SAME_STEP autoreset added where gymnasium's own vector env
    (``"sync"``/``"async"``, MinAtar's, Atari's) is made and no autoreset mode is given: every
    step is then a transition, where NEXT_STEP spends one step per episode on the reset alone
    (what a transition worker wants, and what SB3 and CleanRL step). A native vector env
    (``"vector_entry_point"``, e.g. CartPole's NEXT_STEP-only one) keeps its own mode."""
    if vector_kwargs is not None and "autoreset_mode" in vector_kwargs:
        return vector_kwargs
    name = registered_id(env)
    if not (is_atari(name) or is_minatar(name)) and (
            (vectorization_mode or default_vectorization_mode(env)) == "vector_entry_point"):
        return vector_kwargs
    return {**(vector_kwargs or {}), "autoreset_mode": AutoresetMode.SAME_STEP}


def autoreset_mode(vec: VectorEnv[Any, Any, Any]) -> AutoresetMode:
    """The vector env's autoreset mode (gymnasium's default, NEXT_STEP, when unstated)."""
    mode = vec.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    return mode if isinstance(mode, AutoresetMode) else AutoresetMode(mode)


def registered_id(env: str) -> str:
    """The registry id of ``env``: ``module:Env-v0`` imports ``module`` (which registers the
    env) and is ``Env-v0``; a plain id is itself. Not every gymnasium function takes the
    prefixed form (``gym.spec`` does not), so actors are given the plain one.

    ``ALE/`` and ``MinAtar/`` ids are registered on demand (ale-py, MinAtar); without their
    extra installed, a one-line ValueError names it.
    """
    module, _, name = env.rpartition(":")
    if module:
        importlib.import_module(module)
    if is_atari(name):
        from rxrl.envs.atari import register_atari

        register_atari(name)
    elif is_minatar(name):
        from rxrl.envs.minatar import register_minatar

        register_minatar(name)
    return name


def is_atari(env: str) -> bool:
    """Whether `env` (a registry id) is an Atari game of ale-py's ``ALE/`` namespace."""
    return env.startswith("ALE/")


def is_minatar(env: str) -> bool:
    """Whether `env` (a registry id) is a MinAtar game (``MinAtar/Breakout-v1``, ...)."""
    return env.startswith("MinAtar/")


# ----------------------------------------------------------------------------- raw game scores

#: ``info`` keys of an env that reports whole games (`GameScore`, Atari's `EpisodicLife`): on
#: every step that ends an episode, ``game_over`` (bool) says whether the game ended there
#: (False: only a life was lost, and the game goes on in the next episode); where it did,
#: ``game_return`` and ``game_length`` are the game's raw score and agent steps, over all lives
GAME_OVER, GAME_RETURN, GAME_LENGTH = "game_over", "game_return", "game_length"


class GameScore(gym.Wrapper[Any, Any, Any, Any]):
    """Records a game's raw score and length and reports them where the game ends.

    Placed where rewards are still the game's own (before any clipping), steps are the
    agent's and ``terminated``/``truncated`` mean the game ended (inside any life-loss
    episodes): the step that ends the game has ``info[GAME_OVER] = True`` with
    ``info[GAME_RETURN]`` (the rewards summed since the reset) and ``info[GAME_LENGTH]``
    (the steps since the reset).
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self._return, self._length = 0.0, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Any, dict[str, Any]]:
        """Reset the game and its score."""
        self._return, self._length = 0.0, 0
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the game; where it ends, its score in ``info``."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._return += float(reward)
        self._length += 1
        if terminated or truncated:
            info = {**info, GAME_OVER: True, GAME_RETURN: self._return, GAME_LENGTH: self._length}
        return obs, reward, terminated, truncated, info


def reported_episodes(
    infos: Mapping[str, Any], ended: npt.NDArray[np.intp], same_step: bool,
    returns: npt.NDArray[np.float64], lengths: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """The episodes a worker reports, of those that just ended in sub-envs ``ended`` with its own
    ``returns`` and ``lengths``: ``(envs, returns, lengths)``.

    A sub-env whose final ``info`` (``infos``, or ``infos["final_info"]`` if ``same_step``) has
    ``GAME_OVER`` reports whole games: a game that ended with its raw score and length, a lost
    life nothing. Any other sub-env's episodes are reported as the worker counted them.
    """
    source: Mapping[str, Any] = infos.get("final_info", {}) if same_step else infos
    over = source.get(GAME_OVER)
    if over is None:  # no game-scoring env ended here: the worker's own accounting
        return ended, returns, lengths
    has = np.asarray(source.get("_" + GAME_OVER, np.ones(len(over), np.bool_)), np.bool_)[ended]
    game = has & np.asarray(over, np.bool_)[ended]
    if game.any():
        returns = np.where(game, np.asarray(source[GAME_RETURN], np.float64)[ended], returns)
        lengths = np.where(game, np.asarray(source[GAME_LENGTH], np.int64)[ended], lengths)
    keep = ~has | game
    return ended[keep], returns[keep], lengths[keep]


__all__ = ["GAME_LENGTH", "GAME_OVER", "GAME_RETURN", "EnvSpaces", "GameScore", "autoreset_mode",
           "default_vectorization_mode", "is_atari", "is_minatar", "make_env", "make_vector_env",
           "registered_id", "reported_episodes", "same_step_unless_native"]
