"""Initial weights built when first needed (`rxrl.rl.models.initial.InitialWeights`), work done ahead
while the driver waits (`rxrl.warmup`), and learner classes named without importing them
(`rxrl.rl.models.initial.LazyClass`): what keeps torch out of a driver that builds PPO's plan."""

from __future__ import annotations

import gc
import pickle
import subprocess
import sys
import weakref
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rxrl import warmup
from rxrl.rl import PolicyConfig, PPOLearner, QNetConfig, make_policy, make_q_network
from rxrl.rl import policy as policy_module
from rxrl.rl.models.initial import InitialWeights, LazyClass, weights_of
from tests.cli.helpers import ROOT, environment

BOX = gym.spaces.Box(-1, 1, (4,))
TWO: gym.spaces.Discrete[Any] = gym.spaces.Discrete(2)


def test_initial_weights_are_make_policy_s_bit_for_bit_and_pickle_as_the_weights() -> None:
    lazy = InitialWeights(BOX, TWO, PolicyConfig(), seed=3)
    eager = make_policy(BOX, TWO, PolicyConfig(), 3).get_weights()
    assert lazy.get() is lazy.get()  # built once
    assert eager.keys() == lazy.get().keys()
    assert all(np.array_equal(eager[k], lazy.get()[k]) for k in eager)
    sent = pickle.loads(pickle.dumps(lazy))
    assert type(sent) is dict and all(np.array_equal(sent[k], eager[k]) for k in eager)
    assert weights_of(lazy) is lazy.get() and weights_of(eager) is eager


def test_initial_weights_of_a_q_network_are_make_q_network_s_bit_for_bit() -> None:
    """What DQN's torch-free workers start from: the Q-network a `DQNLearner` with that seed builds."""
    config = QNetConfig(hidden_sizes=(16, 8), dueling=True)
    lazy = InitialWeights(BOX, TWO, config, seed=3)
    eager = make_q_network(BOX, TWO, config, 3).get_weights()
    assert eager.keys() == lazy.get().keys()
    assert all(np.array_equal(eager[k], lazy.get()[k]) for k in eager)
    sent = pickle.loads(pickle.dumps(lazy))
    assert type(sent) is dict and all(np.array_equal(sent[k], eager[k]) for k in eager)


def test_deferred_work_builds_the_weights_ahead_so_that_their_use_does_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    warmup.run_deferred()  # what other tests left
    builds: list[int] = []
    real = policy_module.make_policy

    def counting(*args: Any) -> Any:
        builds.append(1)
        return real(*args)

    monkeypatch.setattr(policy_module, "make_policy", counting)
    lazy = InitialWeights(BOX, TWO, PolicyConfig(), seed=0)
    warmup.run_deferred()
    assert builds == [1]
    lazy.get()
    assert builds == [1]  # not again
    warmup.run_deferred()  # what ran is forgotten
    assert builds == [1]


def test_deferred_work_does_not_keep_an_object_alive() -> None:
    lazy = InitialWeights(BOX, TWO, PolicyConfig(), seed=0)
    ref = weakref.ref(lazy)
    del lazy
    gc.collect()
    assert ref() is None
    warmup.run_deferred()  # and the dead entry is skipped


def test_work_that_died_unrun_is_not_kept_either() -> None:
    """A process that builds plans and never starts Ray does not pile up dead entries."""
    warmup.run_deferred()  # what other tests left
    for _ in range(50):
        InitialWeights(BOX, TWO, PolicyConfig(), seed=0)  # dropped at once
    gc.collect()
    InitialWeights(BOX, TWO, PolicyConfig(), seed=0)
    assert len(warmup._pending) <= 2


def test_deferred_work_that_fails_leaves_the_error_to_the_real_use() -> None:
    lazy = InitialWeights(gym.spaces.Tuple((BOX, BOX)), TWO, PolicyConfig(), seed=0)
    warmup.run_deferred()  # does not raise
    with pytest.raises(ValueError, match="Tuple"):
        lazy.get()


def test_a_lazy_class_constructs_its_class_pickles_by_name_and_names_the_group() -> None:
    lazy: LazyClass[PPOLearner] = LazyClass("rxrl.rl.learners.actor_critic", "PPOLearner")
    assert lazy.__name__ == "PPOLearner" and lazy.cls is PPOLearner
    sent = pickle.loads(pickle.dumps(lazy))
    assert isinstance(sent("CartPole-v1"), PPOLearner)
    assert "PPOLearner" in repr(lazy)


#: what ``rxrl train ppo`` does in its driver before it starts Ray
DRIVER = """
import sys
import rxrl.cli
from rxrl.algos import get
from rxrl.training.checkpoint import CheckpointClock, training_plan
from rxrl.training.setup import ray_init_options
for name in ("ppo", "a2c"):
    algo = get(name)
    plan = training_plan(algo, algo.config(), None, CheckpointClock(25_000, 100_000), 3)
    ray_init_options(plan)
loaded = ("torch", "rxrl.algos.qlearning.dqn", "rxrl.algos.qlearning.sac")
print(sorted(m for m in loaded if m in sys.modules))
"""


def test_a_driver_that_builds_ppo_s_or_a2c_s_plan_imports_neither_torch_nor_other_algorithms() -> None:
    """Importing the CLI and building the plan (rollout workers with initial weights, a
    learner named by its class) cost the driver 1 s of torch import before ``ray.init``
    could start; the weights are now built while Ray starts (`rxrl.warmup`)."""
    done = subprocess.run([sys.executable, "-c", DRIVER], cwd=ROOT, env=environment(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
