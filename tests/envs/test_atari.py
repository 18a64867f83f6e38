"""Atari preprocessing: gymnasium's own wrappers on the same seed, training episodes of one life
with the game going on, raw game scores reported by the workers, the native and EnvPool vector
envs against the single env, shapes, and the missing extras."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

from rxrl.envs.atari import AtariSettings, make_atari_env
from rxrl.envs.vector import (
    GAME_LENGTH,
    GAME_OVER,
    GAME_RETURN,
    EnvSpaces,
    make_env,
    make_vector_env,
    registered_id,
    reported_episodes,
)
from rxrl.training.evaluation import greedy_episodes

BREAKOUT = "ALE/Breakout-v5"  # a life lasts ~30 random steps, a game of 5 lives ~200
#: deterministic games: no no-ops (EnvPool's minimum is one) and no sticky actions
DETERMINISTIC = {"noop_max": 0, "repeat_action_probability": 0.0}
HAS_ENVPOOL = importlib.util.find_spec("envpool") is not None
needs_envpool = pytest.mark.skipif(not HAS_ENVPOOL, reason="envpool is not installed "
                                   "(pip install -e '.[envpool]')")


def actions(steps: int, num_actions: int = 4, seed: int = 0) -> np.ndarray[Any, Any]:
    """A fixed random action sequence (Breakout: FIRE launches the ball, so lives are lost)."""
    return np.random.default_rng(seed).integers(0, num_actions, steps)


def reference(env_id: str, **ale_kwargs: Any) -> gym.Env[Any, Any]:
    """The standard preprocessing built from gymnasium's own wrappers, whole games."""
    env = gym.make(env_id, frameskip=1, **ale_kwargs)
    return FrameStackObservation(AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84,
                                                    terminal_on_life_loss=False), 4, padding_type="zero")


def test_evaluation_env_is_gymnasiums_preprocessing_step_for_step() -> None:
    """Same seed, same actions: identical observations, rewards and ends, across lost lives,
    a game over and the reset after it (no-ops and sticky actions on)."""
    env, ref = make_atari_env(BREAKOUT, training=False), reference(BREAKOUT)
    obs, _ = env.reset(seed=3)
    expected, _ = ref.reset(seed=3)
    games = 0
    for a in actions(400):
        np.testing.assert_array_equal(obs, expected)
        obs, reward, terminated, truncated, info = env.step(a)
        expected, ref_reward, ref_terminated, ref_truncated, _ = ref.step(a)
        assert (reward, terminated, truncated) == (ref_reward, ref_terminated, ref_truncated)
        if terminated or truncated:
            games += 1
            assert info[GAME_OVER]
            obs, _ = env.reset()
            expected, _ = ref.reset()
    assert games >= 1


@pytest.mark.parametrize("game", [BREAKOUT, "ALE/SpaceInvaders-v5"])
def test_training_env_ends_an_episode_per_life_clips_rewards_and_reports_the_raw_game(game: str) -> None:
    """The training env plays the reference's game frame for frame: a lost life terminates
    its episode and the reset after it continues the game from the same observation; rewards
    are the reference's clipped; the game's end reports the reference's raw sum and steps."""
    env, ref = make_atari_env(game, training=True), reference(game)
    obs, _ = env.reset(seed=5)
    expected, info = ref.reset(seed=5)
    lives, raw, steps, lost, games, clipped = info["lives"], 0.0, 0, 0, 0, 0
    for a in actions(700 if game == BREAKOUT else 1100, int(env.action_space.n)):  # type: ignore[attr-defined]
        np.testing.assert_array_equal(obs, expected)
        obs, reward, terminated, truncated, info = env.step(a)
        expected, ref_reward, ref_terminated, ref_truncated, ref_info = ref.step(a)
        raw, steps = raw + float(ref_reward), steps + 1
        clipped += ref_reward != reward
        assert reward == min(max(float(ref_reward), -1.0), 1.0) and truncated == ref_truncated
        game_over = bool(ref_terminated or ref_truncated)
        life_lost = not game_over and ref_info["lives"] < lives
        lives = ref_info["lives"]
        assert terminated == (ref_terminated or life_lost)
        if life_lost:
            lost += 1
            assert info[GAME_OVER] is False and GAME_RETURN not in info
            again, _ = env.reset()
            np.testing.assert_array_equal(again, obs)  # the game goes on: no step, no frame
        if game_over:
            games += 1
            assert info[GAME_OVER] is True
            assert (info[GAME_RETURN], info[GAME_LENGTH]) == (raw, steps)
            (obs, _), (expected, ref_info) = env.reset(), ref.reset()
            lives, raw, steps = ref_info["lives"], 0.0, 0
    assert lost >= 2 and games >= 1
    if game != BREAKOUT:
        assert clipped > 0  # Space Invaders scores 5 to 30 an invader: clipping was tested


def same_step(env: gym.Env[Any, Any], actions: np.ndarray[Any, Any]) -> Iterator[tuple[Any, ...]]:
    """One env driven as a SAME_STEP vector env drives its sub-envs: per step, the observation
    after it (the reset one where an episode ended), reward, terminated, truncated, and the
    final observation and info where it ended."""
    for a in actions:
        obs, reward, terminated, truncated, info = env.step(a)
        final = None
        if terminated or truncated:
            final = (obs, info)
            obs, _ = env.reset()
        yield obs, reward, terminated, truncated, final


#: (game, settings, steps, episode ends at least): lives lost and games over; RGB frames; whole
#: games with unclipped rewards (Space Invaders scores 5 to 30 an invader)
VARIANTS = {"gray": (BREAKOUT, {}, 400, 6), "rgb": (BREAKOUT, {"grayscale": False}, 60, 1),
            "whole-games": ("ALE/SpaceInvaders-v5", {"terminal_on_life_loss": False,
                                                     "clip_rewards": False}, 300, 0)}


@pytest.mark.parametrize("mode", ["vector_entry_point", pytest.param("envpool", marks=needs_envpool)])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_native_vector_envs_step_the_single_envs_games(mode: str, variant: str) -> None:
    """ale-py's native vector env and EnvPool against `make_atari_env`, sub-env by sub-env, on
    deterministic games (their random numbers are not gymnasium's): identical observations,
    rewards, ends, final observations and game scores, across lost lives and game overs."""
    game, settings, steps, min_ends = VARIANTS[variant]
    kwargs = {**DETERMINISTIC, **settings, "noop_max": 1 if mode == "envpool" else 0}
    grayscale = settings.get("grayscale", True)
    channels = 1 if grayscale else 3
    vec = make_vector_env(game, 2, mode, kwargs)
    plays = [actions(steps, int(vec.single_action_space.n), seed=i) for i in range(2)]  # type: ignore[attr-defined]
    singles = [make_atari_env(game, kwargs, training=True) for _ in range(2)]
    obs, _ = vec.reset(seed=0)
    expected = [env.reset(seed=i)[0] for i, env in enumerate(singles)]
    assert obs.shape == (2, 4 * channels, 84, 84) and obs.dtype == np.uint8
    np.testing.assert_array_equal(obs, np.stack(expected))
    ends, unclipped = 0, 0
    for t, steps_of in enumerate(zip(*(same_step(e, p) for e, p in zip(singles, plays, strict=True)),
                                     strict=True)):
        obs, rewards, terminated, truncated, info = vec.step(np.array([p[t] for p in plays]))
        for i, (single_obs, reward, single_terminated, single_truncated, final) in enumerate(steps_of):
            np.testing.assert_array_equal(obs[i], single_obs)
            assert (rewards[i], terminated[i], truncated[i]) == (reward, single_terminated, single_truncated)
            unclipped += float(reward) > 1
            if final is not None:
                ends += 1
                frames = info["final_obs"][i]
                if mode == "envpool" and final[1][GAME_OVER]:  # the module docstring: a game's
                    frames, final = frames[:-channels], (final[0][:-channels], final[1])  # last frame
                np.testing.assert_array_equal(frames, final[0])
                final_info = info["final_info"]
                assert final_info[GAME_OVER][i] == final[1][GAME_OVER]
                if final[1][GAME_OVER]:
                    assert final_info[GAME_RETURN][i] == final[1][GAME_RETURN]
                    assert final_info[GAME_LENGTH][i] == final[1][GAME_LENGTH]
    vec.close()
    assert ends >= min_ends
    assert unclipped > 0 if variant == "whole-games" else unclipped == 0


@pytest.mark.parametrize("mode", ["sync", "vector_entry_point", pytest.param("envpool", marks=needs_envpool)])
def test_observations_are_uint8_stacks_channels_first(mode: str) -> None:
    kwargs = {"frame_stack": 2, "screen_size": 64, "noop_max": 2}
    vec = make_vector_env(BREAKOUT, 3, mode, kwargs)
    space = gym.spaces.Box(0, 255, (2, 64, 64), np.uint8)
    assert vec.single_observation_space == space and vec.single_action_space == gym.spaces.Discrete(4)
    obs, _ = vec.reset(seed=1)
    assert obs.shape == (3, 2, 64, 64) and obs.dtype == np.uint8
    obs, *_ = vec.step(np.ones(3, np.int64))
    assert obs.shape == (3, 2, 64, 64) and obs.dtype == np.uint8
    assert obs[:, 0].max() > 0 and obs[:, 1].max() > 0  # two frames since the reset: no padding
    vec.close()
    assert EnvSpaces.of(BREAKOUT, kwargs) == EnvSpaces(space, gym.spaces.Discrete(4))


def test_default_spaces_and_vector_env_are_the_standard_preprocessing() -> None:
    spaces = EnvSpaces.of("ALE/Pong-v5")
    assert spaces.observation == gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    assert spaces.action == gym.spaces.Discrete(6)
    vec = make_vector_env("ALE/Pong-v5", 2)
    assert vec.single_observation_space == spaces.observation
    assert vec.metadata["autoreset_mode"] is gym.vector.AutoresetMode.SAME_STEP  # native
    vec.close()


@pytest.mark.parametrize("mode", ["sync", "vector_entry_point"])
def test_rollout_worker_reports_whole_games_with_raw_scores(mode: str) -> None:
    """A worker's reported episodes are the games its training env played: the score and length
    of replaying its actions on the evaluation env, not one clipped return per life."""
    from rxrl.rl.workers.rollout import RolloutWorker

    worker = RolloutWorker(BREAKOUT, num_envs=1, fragment_length=450, vectorization_mode=mode,
                           env_kwargs=DETERMINISTIC)
    batch = worker.sample()
    worker.close()
    scores, lengths = replay_games(batch.actions)
    reported = len(batch.episode_returns)
    assert reported == len(scores) >= 1 and batch.terminateds.sum() >= 4 * reported  # lives
    np.testing.assert_array_equal(batch.episode_returns, np.array(scores, np.float32))
    np.testing.assert_array_equal(batch.episode_lengths, lengths)


def test_q_worker_reports_whole_games_with_raw_scores() -> None:
    from rxrl.rl.workers.qworker import QRolloutWorker

    worker = QRolloutWorker(BREAKOUT, num_envs=1, fragment_length=450, epsilon=1.0,
                            env_kwargs=DETERMINISTIC)
    batch = worker.sample()
    worker.close()
    scores, lengths = replay_games(batch.actions)
    assert len(scores) >= 1 and batch.obs.dtype == np.uint8
    np.testing.assert_array_equal(batch.episode_returns, np.array(scores, np.float32))
    np.testing.assert_array_equal(batch.episode_lengths, lengths)


def replay_games(played: np.ndarray[Any, Any]) -> tuple[list[float], list[int]]:
    """The raw scores and lengths of the games that end when ``played`` is replayed on the
    evaluation env (deterministic games: the worker's seed does not matter)."""
    env = make_env(BREAKOUT, DETERMINISTIC, training=False)
    env.reset(seed=0)
    scores: list[float] = []
    lengths: list[int] = []
    score, length = 0.0, 0
    for a in played:
        _, reward, terminated, truncated, _ = env.step(int(a))
        score, length = score + float(reward), length + 1
        if terminated or truncated:
            scores.append(score)
            lengths.append(length)
            score, length = 0.0, 0
            env.reset()
    return scores, lengths


def test_evaluation_plays_whole_games_with_the_games_rewards() -> None:
    """``rxrl eval`` and evaluation during training: one episode is one game of all its lives."""
    counter = iter(range(10**6))

    def act(obs: np.ndarray[Any, Any], deterministic: bool = False) -> tuple[Any, None, None]:
        assert obs.shape == (1, 4, 84, 84) and obs.dtype == np.uint8
        return np.array([actions(1, seed=next(counter))[0]]), None, None

    returns, lengths = greedy_episodes(BREAKOUT, DETERMINISTIC, act, 1, seed=0)
    played = np.array([actions(1, seed=i)[0] for i in range(lengths[0])])
    assert (returns, lengths) == replay_games(played)
    assert lengths[0] > 100  # five lives


def test_settings_are_checked_in_one_line() -> None:
    with pytest.raises(ValueError, match=r"^AtariSettings.frame_stack must be an integer >= 1, got 0$"):
        AtariSettings(frame_stack=0)
    with pytest.raises(ValueError, match=r"repeat_action_probability must be a probability"):
        AtariSettings.split({"repeat_action_probability": 2})
    with pytest.raises(ValueError, match=r"vectorization_mode must be one of"):
        AtariSettings(vectorization_mode="threads")
    with pytest.raises(ValueError, match=r"frameskip belongs to the preprocessing; set frame_skip"):
        make_env(BREAKOUT, {"frameskip": 4})
    with pytest.raises(ValueError, match=r"env_kwargs \['mode'\] are not taken by the native"):
        make_vector_env(BREAKOUT, 1, env_kwargs={"mode": 0})


def test_vectorization_mode_is_a_setting() -> None:
    """A run picks the vector env through its env_kwargs (``--set 'env_kwargs={...}'``)."""
    vec = make_vector_env(BREAKOUT, 1, env_kwargs={"vectorization_mode": "sync"})
    assert isinstance(vec, gym.vector.SyncVectorEnv)
    vec.close()


@pytest.mark.parametrize("missing", ["ale_py", "cv2"])
def test_a_missing_atari_extra_is_one_line(monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    monkeypatch.setitem(sys.modules, missing, None)  # import raises ImportError
    message = r'^ALE/Pong-v5 needs the atari extra: pip install -e "\.\[atari\]"$'
    with pytest.raises(ValueError, match=message):
        make_env("ALE/Pong-v5")
    if missing == "ale_py":
        with pytest.raises(ValueError, match=message):
            registered_id("ALE/Pong-v5")
        with pytest.raises(ValueError, match=message):
            make_vector_env("ALE/Pong-v5", 2)


def test_a_missing_envpool_extra_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "envpool", None)
    with pytest.raises(ValueError, match=r"""^vectorization_mode 'envpool' needs the envpool extra: """
                                         r"""pip install -e "\.\[envpool\]"$"""):
        make_vector_env("ALE/Pong-v5", 2, "envpool")


def test_reported_episodes_are_games_where_the_env_reports_them_else_the_workers_own() -> None:
    """Sub-env 0 lost a life (nothing reported), 1 ended a game (its raw score), 2 reports no
    games (the worker's own return); a step whose envs report nothing passes through."""
    infos = {GAME_OVER: np.array([False, True, False]), "_" + GAME_OVER: np.array([True, True, False]),
             GAME_RETURN: np.array([0.0, 21.0, 0.0]), "_" + GAME_RETURN: np.array([False, True, False]),
             GAME_LENGTH: np.array([0, 900, 0]), "_" + GAME_LENGTH: np.array([False, True, False])}
    own_returns, own_lengths = np.array([1.0, 1.0, 5.0]), np.array([10, 20, 30])
    ended = np.arange(3)
    envs, returns, lengths = reported_episodes(infos, ended, False, own_returns, own_lengths)
    assert (envs.tolist(), returns.tolist(), lengths.tolist()) == ([1, 2], [21.0, 5.0], [900, 30])
    same_step = reported_episodes({"final_info": infos}, ended, True, own_returns, own_lengths)
    assert [a.tolist() for a in same_step] == [[1, 2], [21.0, 5.0], [900, 30]]
    plain = reported_episodes({}, ended, False, own_returns, own_lengths)
    assert [a.tolist() for a in plain] == [[0, 1, 2], [1.0, 1.0, 5.0], [10, 20, 30]]
