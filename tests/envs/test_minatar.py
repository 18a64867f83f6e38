"""MinAtar: channels-first uint8 observations of MinAtar's own states, in one env, a vector env,
the spaces and a worker's batch, the missing extra, and its rendering modules left unimported."""

from __future__ import annotations

import subprocess
import sys
import types
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import rxrl.envs.minatar as rxrl_minatar
from rxrl.envs.minatar import channels_first
from rxrl.envs.vector import EnvSpaces, make_env, make_vector_env, registered_id

BREAKOUT = "MinAtar/Breakout-v1"


@pytest.mark.parametrize(("game", "channels"), [("Asterix", 4), ("Breakout", 4), ("Freeway", 7),
                                                ("Seaquest", 10), ("SpaceInvaders", 6)])
def test_observations_are_channels_first_uint8(game: str, channels: int) -> None:
    env: Any = make_env(f"MinAtar/{game}-v1")  # gymnasium's close() is untyped
    assert env.observation_space == gym.spaces.Box(0, 1, (channels, 10, 10), np.uint8)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (channels, 10, 10) and obs.dtype == np.uint8 and obs.max() == 1
    env.close()


def test_observations_are_minatars_states_step_for_step() -> None:
    """Same seed, same actions: each observation is MinAtar's state moved to channels first,
    across episode ends and resets."""
    registered_id(BREAKOUT)  # registers MinAtar's ids
    env, ref = make_env(BREAKOUT), gym.make(BREAKOUT)
    obs, _ = env.reset(seed=4)
    state, _ = ref.reset(seed=4)
    ends = 0
    for a in np.random.default_rng(0).integers(0, 3, 300):
        np.testing.assert_array_equal(obs, np.moveaxis(state, -1, 0).astype(np.uint8))
        obs, reward, terminated, truncated, _ = env.step(a)
        state, ref_reward, ref_terminated, ref_truncated, _ = ref.step(a)
        assert (reward, terminated, truncated) == (ref_reward, ref_terminated, ref_truncated)
        if terminated or truncated:
            ends += 1
            (obs, _), (state, _) = env.reset(), ref.reset()
    assert ends >= 1
    assert channels_first(state).flags.c_contiguous


def test_vector_env_spaces_and_a_workers_batch_are_uint8() -> None:
    from rxrl.rl.workers.rollout import RolloutWorker

    space = gym.spaces.Box(0, 1, (4, 10, 10), np.uint8)
    assert EnvSpaces.of(BREAKOUT) == EnvSpaces(space, gym.spaces.Discrete(3))
    vec = make_vector_env(BREAKOUT, 3)
    assert vec.single_observation_space == space
    obs, _ = vec.reset(seed=0)
    assert obs.shape == (3, 4, 10, 10) and obs.dtype == np.uint8
    vec.close()
    worker = RolloutWorker(BREAKOUT, num_envs=2, fragment_length=16)
    batch = worker.sample()
    worker.close()
    assert batch.obs.shape == (32, 4, 10, 10) and batch.obs.dtype == np.uint8


def test_a_missing_minatar_extra_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("minatar", "minatar.gym"):
        monkeypatch.setitem(sys.modules, module, None)
    message = r'^MinAtar/Breakout-v1 needs the minatar extra: pip install -e "\.\[minatar\]"$'
    calls: list[Any] = [lambda: registered_id(BREAKOUT), lambda: make_env(BREAKOUT),
                        lambda: make_vector_env(BREAKOUT, 2)]
    for call in calls:
        with pytest.raises(ValueError, match=message):
            call()


FRESH_PROCESS = """
import importlib.util, sys
from rxrl.envs.minatar import RENDER_ONLY, make_minatar_env
make_minatar_env("MinAtar/Breakout-v1").reset(seed=0)
print(sorted(n for n in (*RENDER_ONLY, "pandas", "scipy.stats") if n in sys.modules))
import minatar.environment as e
installed = all(importlib.util.find_spec(n) is not None for n in ("seaborn", "matplotlib"))
if installed:  # MinAtar's render names reach the real modules
    print(len(e.sns.color_palette("cubehelix", 3)), e.plt.subplots.__module__)
    import seaborn
    print(type(seaborn).__name__, hasattr(seaborn, "color_palette"))
else:
    print("not installed")
"""


def test_minatar_imports_its_rendering_modules_only_when_it_renders() -> None:
    """A fresh process that makes a MinAtar env has none of seaborn, pyplot, pandas or
    scipy.stats loaded (MinAtar imports them only to render: ~2 s and ~160 MB a process), no
    stand-in is left in ``sys.modules``, and MinAtar's render names still reach the real
    modules on first use."""
    out = subprocess.run([sys.executable, "-c", FRESH_PROCESS], capture_output=True, text=True,
                         timeout=120, check=True).stdout.splitlines()
    assert out[0] == "[]"
    if out[1] != "not installed":
        assert out[1] == "3 matplotlib.pyplot"
        assert out[2] == "module True"


def test_stand_ins_load_the_real_module_on_first_use_and_leave_sys_modules_as_it_was(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The mechanism on modules of the test's choosing: an installed one that is not imported
    gets a stand-in while the block runs, which imports the real module at its first attribute
    read; one that is not installed gets none (its import still fails); afterwards no stand-in
    is left in ``sys.modules``; with MinAtar already imported, none is made."""
    missing = "rxrl_test_no_such_module"
    monkeypatch.setattr(rxrl_minatar, "RENDER_ONLY", ("wave", missing))
    monkeypatch.delitem(sys.modules, "wave", raising=False)
    monkeypatch.delitem(sys.modules, "minatar.environment", raising=False)
    with rxrl_minatar.render_modules_on_first_use():
        stand_in = sys.modules["wave"]
        assert isinstance(stand_in, rxrl_minatar.OnFirstUse) and missing not in sys.modules
    assert "wave" not in sys.modules
    assert callable(stand_in.open) and type(sys.modules["wave"]) is not rxrl_minatar.OnFirstUse
    assert stand_in.__name__ == "wave" and stand_in.open is sys.modules["wave"].open
    with pytest.raises(ImportError):
        __import__(missing)
    monkeypatch.delitem(sys.modules, "wave")
    monkeypatch.setitem(sys.modules, "minatar.environment", types.ModuleType("minatar.environment"))
    with rxrl_minatar.render_modules_on_first_use():
        assert "wave" not in sys.modules
