"""Atari through ale-py with the standard preprocessing, as one env or as a vector env.

``ALE/<Game>-v5`` ids (the ``atari`` extra) are built preprocessed wherever rxrl builds an env
(`rxrl.envs.vector.make_env`, `rxrl.envs.vector.make_vector_env`): `AtariSettings`, read from
the run's ``env_kwargs``, says how. An observation is uint8 ``[frame_stack, 84, 84]``: grayscale
frames, channels first, oldest first. A worker's env ends an episode at every lost life and
clips rewards to [-1, 1] (training only); an evaluation's plays whole games with the game's
rewards; either reports each game's raw score (`rxrl.envs.vector.GameScore`), and the workers
report those, as the peers do.

Three implementations, chosen per run by ``vectorization_mode``, step the same games:

* ``"vector_entry_point"`` (the default): ale-py's native ``AtariVectorEnv`` (C++ threads);
* ``"sync"`` / ``"async"``: gymnasium's ``AtariPreprocessing`` and ``FrameStackObservation``
  (zero-padded) on ``frameskip=1`` ALE envs, in gymnasium's vector envs;
* ``"envpool"``: EnvPool (the ``envpool`` extra).

With the same seed they differ only in their random numbers (no-op counts, sticky actions):
with ``noop_max`` 0 (envpool: 1) and ``repeat_action_probability`` 0 they give identical
observations (tests/envs/test_atari.py). Two conventions differ: the native env draws 0 to
``noop_max - 1`` no-ops at a reset, gymnasium and EnvPool 1 to ``noop_max``.

A lost life ends a training episode but not the game: the next episode goes on from the
observation the life ended with, without a step (`EpisodicLife`; the native envs' own
``episodic_life`` would reset the whole game at every lost life, as gymnasium's
``terminal_on_life_loss`` does). The module is over 400 lines because the three
implementations and the wrappers that make them agree belong together.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, SupportsFloat

import attrs
import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.vector.utils import batch_space

from rxrl.envs.vector import GAME_LENGTH, GAME_OVER, GAME_RETURN, GameScore, _vector_of_instances

#: ``vectorization_mode``s of Atari vector envs (`make_atari_vector_env`)
VECTORIZATION_MODES = ("vector_entry_point", "sync", "async", "envpool")

#: ALE env kwargs the native vector envs take as well (any other needs ``"sync"``/``"async"``)
_NATIVE_ALE_KWARGS = ("full_action_space", "max_num_frames_per_episode")


def _at_least(minimum: int) -> Any:
    def check(inst: Any, attribute: attrs.Attribute[int], value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"AtariSettings.{attribute.name} must be an integer >= {minimum}, "
                             f"got {value!r}")
    return check


def _flag(inst: Any, attribute: attrs.Attribute[bool], value: bool) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"AtariSettings.{attribute.name} must be true or false, got {value!r}")


def _probability(inst: Any, attribute: attrs.Attribute[float | None], value: float | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                              or not 0.0 <= value <= 1.0):
        raise ValueError(f"AtariSettings.{attribute.name} must be a probability in [0, 1] or "
                         f"null (the env's default), got {value!r}")


def _mode(inst: Any, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    if value is not None and value not in VECTORIZATION_MODES:
        raise ValueError(f"AtariSettings.{attribute.name} must be one of "
                         f"{', '.join(VECTORIZATION_MODES)} (or null: vector_entry_point), got {value!r}")


@attrs.frozen
class AtariSettings:
    """The preprocessing of an ``ALE/`` env; its fields are read from the run's ``env_kwargs``
    (`split`), the other keys go to the ALE env. The defaults are the standard preprocessing
    (Mnih et al. 2015; Machado et al. 2018 for the sticky actions of v5).

    >>> settings, ale_kwargs = AtariSettings.split({"frame_stack": 2, "full_action_space": True})
    >>> settings.frame_stack, settings.noop_max, ale_kwargs
    (2, 30, {'full_action_space': True})
    """

    #: at most this many no-op actions after a reset (0: none; see the module docstring)
    noop_max: int = attrs.field(default=30, validator=_at_least(0))
    #: an agent step repeats its action for this many frames, and its observation is the
    #: pixel-wise maximum of the last two (flicker)
    frame_skip: int = attrs.field(default=4, validator=_at_least(1))
    #: frames are resized to ``screen_size × screen_size`` (area interpolation)
    screen_size: int = attrs.field(default=84, validator=_at_least(1))
    #: grayscale frames (one channel each); False: RGB, three channels per frame
    grayscale: bool = attrs.field(default=True, validator=_flag)
    #: the observation stacks this many frames on the channel axis, oldest first, zeros
    #: before an episode's first frame
    frame_stack: int = attrs.field(default=4, validator=_at_least(1))
    #: training only: an episode ends at every lost life (the game goes on in the next one)
    terminal_on_life_loss: bool = attrs.field(default=True, validator=_flag)
    #: training only: rewards are clipped to [-1, 1] (the reported scores stay raw)
    clip_rewards: bool = attrs.field(default=True, validator=_flag)
    #: the ALE's sticky actions; None leaves the env's own default (0.25 for v5 ids)
    repeat_action_probability: float | None = attrs.field(default=None, validator=_probability)
    #: the vector env a worker steps (`make_atari_vector_env`); None: ``"vector_entry_point"``
    vectorization_mode: str | None = attrs.field(default=None, validator=_mode)
    #: threads of a native vector env (``vector_entry_point``, ``envpool``); 0: its default
    num_threads: int = attrs.field(default=0, validator=_at_least(0))

    @property
    def channels(self) -> int:
        """Channels of an observation: ``frame_stack`` frames of one (gray) or three (RGB)."""
        return self.frame_stack * (1 if self.grayscale else 3)

    @staticmethod
    def split(env_kwargs: Mapping[str, Any] | None) -> tuple[AtariSettings, dict[str, Any]]:
        """``(settings, ale_kwargs)``: the settings named in ``env_kwargs`` and the other keys.
        ValueError (one line) for ``frameskip``, which the preprocessing owns."""
        kwargs = dict(env_kwargs or {})
        if "frameskip" in kwargs:
            raise ValueError("Atari env_kwargs: frameskip belongs to the preprocessing; "
                             "set frame_skip instead")
        names = {a.name for a in attrs.fields(AtariSettings)}
        settings = AtariSettings(**{k: kwargs.pop(k) for k in list(kwargs) if k in names})
        return settings, kwargs


# ------------------------------------------------------------------------------ registration


def _missing(env_id: str) -> ValueError:
    return ValueError(f'{env_id} needs the atari extra: pip install -e ".[atari]"')


def register_atari(env_id: str) -> None:
    """Register ale-py's ``ALE/`` ids (importing ale-py does); a one-line ValueError naming the
    ``atari`` extra if it is not installed."""
    try:
        import ale_py
    except ImportError:
        raise _missing(env_id) from None
    gym.register_envs(ale_py)


def _require_opencv(env_id: str) -> None:
    try:
        import cv2  # noqa: F401  (gymnasium's AtariPreprocessing resizes with it)
    except ImportError:
        raise _missing(env_id) from None


# ------------------------------------------------------------------------------ one env


class EpisodicLife(gym.Wrapper[Any, Any, Any, Any]):
    """Training episodes of one life each, the game going on across them.

    A step that loses a life (and does not end the game) is ``terminated`` with
    ``info[GAME_OVER] = False``. The reset that follows continues the game: it returns the
    observation that life ended with and steps nothing. Any other reset (after the game ended,
    or with a seed or options) resets the game.
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self._lives = 0
        self._goes_on: tuple[Any, dict[str, Any]] | None = None

    def _ale_lives(self) -> int:
        return int(getattr(self.env.unwrapped, "ale").lives())  # noqa: B009 - an AtariEnv's

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Any, dict[str, Any]]:
        """Continue the game after a lost life, else reset it."""
        goes_on, self._goes_on = self._goes_on, None
        if goes_on is not None and seed is None and options is None:
            return goes_on
        obs, info = self.env.reset(seed=seed, options=options)
        self._lives = self._ale_lives()
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the game; ``terminated`` where it ends or a life is lost."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives, self._goes_on = self._ale_lives(), None
        if not (terminated or truncated) and lives < self._lives:
            self._goes_on = (obs, dict(info))
            info, terminated = {**info, GAME_OVER: False}, True
        self._lives = lives
        return obs, reward, terminated, truncated, info


def _frames_channels_first(obs: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """``[..., stack, H, W, 3]`` RGB frames as ``[..., stack * 3, H, W]`` channels."""
    *batch, stack, height, width, rgb = obs.shape
    moved = np.moveaxis(obs, -1, -3)
    return np.ascontiguousarray(moved).reshape(*batch, stack * rgb, height, width)


def _observation_space(settings: AtariSettings) -> gym.spaces.Box:
    shape = (settings.channels, settings.screen_size, settings.screen_size)
    return gym.spaces.Box(0, 255, shape, np.uint8)


def make_atari_env(env_id: str, env_kwargs: Mapping[str, Any] | None = None, training: bool = True
                   ) -> gym.Env[Any, Any]:
    """One preprocessed Atari env (`AtariSettings` from ``env_kwargs``) of gymnasium's wrappers:
    ``AtariPreprocessing`` (no-op reset, frame skip with max-pooling, resize, grayscale) and
    ``FrameStackObservation`` on the ALE env with ``frameskip=1``, then `GameScore`; for
    ``training`` also `EpisodicLife` and ``ClipReward`` where the settings ask for them."""
    from gymnasium.wrappers import (
        AtariPreprocessing,
        ClipReward,
        FrameStackObservation,
        TransformObservation,
    )

    register_atari(env_id)
    _require_opencv(env_id)
    settings, ale_kwargs = AtariSettings.split(env_kwargs)
    if settings.repeat_action_probability is not None:
        ale_kwargs["repeat_action_probability"] = settings.repeat_action_probability
    env: gym.Env[Any, Any] = gym.make(env_id, frameskip=1, **ale_kwargs)
    env = AtariPreprocessing(env, noop_max=settings.noop_max, frame_skip=settings.frame_skip,
                             screen_size=settings.screen_size, terminal_on_life_loss=False,
                             grayscale_obs=settings.grayscale)
    env = FrameStackObservation(env, settings.frame_stack, padding_type="zero")
    if not settings.grayscale:
        env = TransformObservation(env, _frames_channels_first, _observation_space(settings))
    env = GameScore(env)
    if training and settings.terminal_on_life_loss:
        env = EpisodicLife(env)
    if training and settings.clip_rewards:
        env = ClipReward(env, -1.0, 1.0)
    return env


# ------------------------------------------------------------------------------ vector envs


def make_atari_vector_env(env_id: str, num_envs: int, vectorization_mode: str | None = None,
                          env_kwargs: Mapping[str, Any] | None = None,
                          vector_kwargs: Mapping[str, Any] | None = None) -> VectorEnv[Any, Any, Any]:
    """`num_envs` preprocessed training copies of `env_id` (`AtariSettings` from
    ``env_kwargs``), stepped by ``vectorization_mode`` (else the settings' own, else
    ``"vector_entry_point"``; the module docstring). ``vector_kwargs`` go to the vector env's
    constructor (gymnasium's, ``AtariVectorEnv`` or ``envpool.make_gymnasium``). The native
    ones autoreset in the SAME_STEP mode."""
    settings, ale_kwargs = AtariSettings.split(env_kwargs)
    mode = vectorization_mode or settings.vectorization_mode or "vector_entry_point"
    if mode in ("sync", "async"):
        return _vector_of_instances(env_id, num_envs, mode, env_kwargs, vector_kwargs)
    if mode not in VECTORIZATION_MODES:
        raise ValueError(f"make_vector_env: {env_id!r} has no vectorization_mode {mode!r}; "
                         f"use one of {', '.join(VECTORIZATION_MODES)}")
    register_atari(env_id)
    native = _native_kwargs(env_id, settings, ale_kwargs, dict(vector_kwargs or {}))
    if mode == "envpool":
        vec: VectorEnv[Any, Any, Any] = EnvPoolAtari(env_id, num_envs, settings, native)
    else:
        from ale_py.vector_env import AtariVectorEnv

        vec = AtariVectorEnv(
            native.pop("game"), num_envs, img_height=settings.screen_size,
            img_width=settings.screen_size, grayscale=settings.grayscale,
            stack_num=settings.frame_stack, frameskip=settings.frame_skip, maxpool=True,
            noop_max=settings.noop_max, episodic_life=False, life_loss_info=False,
            reward_clipping=False, use_fire_reset=False, autoreset_mode=AutoresetMode.SAME_STEP,
            **{"num_threads": settings.num_threads, **native})
    return AtariGames(vec, settings)


def _native_kwargs(env_id: str, settings: AtariSettings, ale_kwargs: dict[str, Any],
                   vector_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The game and the ALE's settings for a native vector env, as the registered id has them
    unless ``env_kwargs`` set them; ValueError for an ALE kwarg a native env does not take."""
    others = sorted(set(ale_kwargs) - set(_NATIVE_ALE_KWARGS))
    if others:
        raise ValueError(f"{env_id}: env_kwargs {others} are not taken by the native Atari vector "
                         "envs; use vectorization_mode 'sync' or 'async'")
    if vector_kwargs.pop("autoreset_mode", AutoresetMode.SAME_STEP) not in (
            AutoresetMode.SAME_STEP, AutoresetMode.SAME_STEP.value):
        raise ValueError(f"{env_id}: the native Atari vector envs autoreset in the SAME_STEP mode")
    spec = gym.spec(env_id).kwargs
    rap = settings.repeat_action_probability
    return {"game": spec["game"],
            "repeat_action_probability": spec.get("repeat_action_probability", 0.0) if rap is None else rap,
            "full_action_space": ale_kwargs.get("full_action_space", spec.get("full_action_space", False)),
            "max_num_frames_per_episode": ale_kwargs.get("max_num_frames_per_episode",
                                                         spec.get("max_num_frames_per_episode", 108_000)),
            **vector_kwargs}


class AtariGames(VectorWrapper):
    """A native Atari vector env's games as training episodes (the vector twin of `GameScore`,
    `EpisodicLife` and ``ClipReward``).

    The wrapped env autoresets in the SAME_STEP mode, its episodes are whole games, its rewards
    the game's own and its ``info["lives"]`` the lives left. This one ends an episode at a lost
    life too (``settings.terminal_on_life_loss``; the final observation is the current one, and
    the game goes on), clips rewards (``settings.clip_rewards``) and reports each ended episode in
    ``info["final_info"]`` with `rxrl.envs.vector.GAME_OVER` (and a game's raw score and length).
    Observations are channels first (RGB frames too).
    """

    def __init__(self, env: VectorEnv[Any, Any, Any], settings: AtariSettings) -> None:
        super().__init__(env)
        self.terminal_on_life_loss, self.clip_rewards = settings.terminal_on_life_loss, settings.clip_rewards
        self.single_observation_space = _observation_space(settings)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.metadata = {**env.metadata, "autoreset_mode": AutoresetMode.SAME_STEP}
        self._returns = np.zeros(self.num_envs, np.float64)
        self._lengths = np.zeros(self.num_envs, np.int64)
        self._lives = np.zeros(self.num_envs, np.int64)

    @staticmethod
    def _obs(obs: Any) -> npt.NDArray[np.uint8]:
        """Channels first: the native env's RGB frames come as ``[N, stack, H, W, 3]``."""
        obs = np.asarray(obs)
        return _frames_channels_first(obs) if obs.ndim == 5 else obs

    def reset(self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Any, dict[str, Any]]:
        """Reset the games (those of ``options["reset_mask"]``, if given); env i is seeded
        ``seed + i`` (``seed`` taken modulo 2**31 - num_envs)."""
        if isinstance(seed, list):
            raise ValueError("AtariGames.reset takes one seed (env i gets seed + i), not a list")
        if seed is not None:  # the native env's seeds are C ints (a worker's may be 32-bit unsigned)
            seed %= 2**31 - self.num_envs
        obs, info = self.env.reset(seed=seed, options=options)
        mask = np.ones(self.num_envs, np.bool_) if not options or "reset_mask" not in options \
            else np.asarray(options["reset_mask"], np.bool_)
        self._returns[mask], self._lengths[mask] = 0.0, 0
        self._lives[mask] = np.asarray(info["lives"])[mask]
        return self._obs(obs), info

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step every game; ends, clipping and scores as the class docstring says."""
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        raw = np.asarray(rewards, np.float64)
        self._returns += raw
        self._lengths += 1
        over = np.asarray(terminated, np.bool_) | np.asarray(truncated, np.bool_)
        lives = np.asarray(info["lives"], np.int64)
        lost = ~over & (lives < self._lives) if self.terminal_on_life_loss else np.zeros_like(over)
        self._lives = lives  # after a game over: the new game's (SAME_STEP)
        obs = self._obs(obs)
        ends = over | lost
        if ends.any():
            info = self._with_final(info, obs, over, ends)
            self._returns[over], self._lengths[over] = 0.0, 0
        out = np.clip(raw, -1.0, 1.0) if self.clip_rewards else raw
        return obs, out, np.asarray(terminated, np.bool_) | lost, np.asarray(truncated, np.bool_), info

    def _with_final(self, info: dict[str, Any], obs: npt.NDArray[np.uint8], over: npt.NDArray[np.bool_],
                    ends: npt.NDArray[np.bool_]) -> dict[str, Any]:
        """``info`` with gymnasium's SAME_STEP entries for the episodes that ``ends``: the final
        observations (a game's from the wrapped env, a life's the current one) and infos."""
        final = obs.copy()
        if over.any():
            final[over] = self._obs(info["final_obs"])[over]
        final_info = {GAME_OVER: over.copy(), "_" + GAME_OVER: ends,
                      GAME_RETURN: self._returns.copy(), "_" + GAME_RETURN: over,
                      GAME_LENGTH: self._lengths.copy(), "_" + GAME_LENGTH: over}
        return {**info, "final_obs": final, "_final_obs": ends, "final_info": final_info,
                "_final_info": ends}


class EnvPoolAtari(VectorEnv[Any, Any, Any]):
    """EnvPool's Atari as a gymnasium vector env that `AtariGames` wraps: SAME_STEP autoreset
    (a game that ends is reset in the same step), whole games, raw rewards, ``info["lives"]``,
    and zeros before an episode's first frame (EnvPool repeats the first frame), as ale-py's
    native env has them. EnvPool fixes its seeds when built, so the pool is built at the first
    reset (env i seeded ``seed + i``), and again at a reset with another seed."""

    def __init__(self, env_id: str, num_envs: int, settings: AtariSettings, native: dict[str, Any]) -> None:
        self._pool: Any = None  # built at the first reset, with its seed (~0.2 s an env)
        if settings.noop_max < 1:
            raise ValueError(f"{env_id}: vectorization_mode 'envpool' needs noop_max >= 1 "
                             f"(EnvPool always steps at least one no-op), got {settings.noop_max}")
        try:
            import envpool
        except ImportError:
            raise ValueError('vectorization_mode \'envpool\' needs the envpool extra: '
                             'pip install -e ".[envpool]"') from None
        self._make = envpool.make_gymnasium
        self.num_envs = num_envs
        frames = native.pop("max_num_frames_per_episode")
        self._kwargs = {
            "task_id": env_id.removeprefix("ALE/"), "num_envs": num_envs,
            "img_height": settings.screen_size, "img_width": settings.screen_size,
            "gray_scale": settings.grayscale, "stack_num": settings.frame_stack,
            "frame_skip": settings.frame_skip, "noop_max": settings.noop_max,
            "episodic_life": False, "reward_clip": False, "use_fire_reset": False,
            "max_episode_steps": max(1, frames // settings.frame_skip), "num_threads": settings.num_threads,
            **{k: v for k, v in native.items() if k != "game"}}
        self._seed: int | None = None
        spec = envpool.make_spec(seed=0, **self._kwargs)
        self.single_observation_space = spec.gymnasium_observation_space
        self.single_action_space = spec.gymnasium_action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}
        self._padding = settings.frame_stack - 1
        self._channels = 1 if settings.grayscale else 3
        self._age = np.zeros(num_envs, np.int64)  # steps since each env's reset

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Any, dict[str, Any]]:
        """Reset every game (a new pool if ``seed`` differs from the pool's)."""
        if options:
            raise ValueError("EnvPoolAtari.reset takes no options")
        if self._pool is None or (seed is not None and seed != self._seed):
            if self._pool is not None:
                self._pool.close()
            self._seed = seed or 0
            self._pool = self._make(seed=self._seed, **self._kwargs)
        obs, info = self._pool.reset()
        self._age[:] = 0
        return self._zero_padded(np.array(obs)), {"lives": np.array(info["lives"])}

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step every game; those that end are reset in the same step."""
        obs, rewards, terminated, truncated, info = self._pool.step(np.asarray(actions))
        obs, lives = np.array(obs), np.array(info["lives"])
        self._age += 1
        done = np.asarray(terminated, np.bool_) | np.asarray(truncated, np.bool_)
        out: dict[str, Any] = {"lives": lives}
        if done.any():
            ids = np.flatnonzero(done).astype(np.int32)
            out["final_obs"] = self._zero_padded(obs.copy())
            fresh, fresh_info = self._pool.reset(ids)
            obs[ids], lives[ids], self._age[ids] = fresh, fresh_info["lives"], 0
        return self._zero_padded(obs), np.asarray(rewards), terminated, truncated, out

    def _zero_padded(self, obs: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
        """Zero the frames from before each env's reset (in place)."""
        young = np.flatnonzero(self._age < self._padding)
        for i in young:
            obs[i, : (self._padding - self._age[i]) * self._channels] = 0
        return obs

    def close_extras(self, **kwargs: Any) -> None:
        """Close the pool."""
        if self._pool is not None:
            self._pool.close()


__all__ = ["VECTORIZATION_MODES", "AtariGames", "AtariSettings", "EnvPoolAtari", "EpisodicLife",
           "make_atari_env", "make_atari_vector_env", "register_atari"]
