"""Multi-policy learners and replay: each trains and stores only its own policies; readiness
below learning_starts; several DQN steps per call; checkpoints round-trip."""

from __future__ import annotations

import numpy as np
import pytest

import rxrl
from rxrl.rl import DQNConfig, PPOConfig, ReplayConfig
from rxrl.rl.data.multiagent import policy_mapping_fn, policy_spaces
from rxrl.rl.learners.multi_agent import MultiDQNLearner, MultiPPOLearner, MultiReplay
from rxrl.rl.workers.multi_agent import MultiAgentRolloutWorker, QPolicySpec

SMALL = PPOConfig(num_epochs=1, minibatch_size=16)


def _worker() -> MultiAgentRolloutWorker:
    return MultiAgentRolloutWorker("MultiCartPole-v0", num_envs=2, fragment_length=16, torch_threads=None,
                                   q_policies={"cartpole_1": QPolicySpec(n_step=3, epsilon=0.5)})


def test_the_ppo_learner_trains_only_its_policies_and_starts_from_the_workers_weights() -> None:
    worker = _worker()
    spaces = policy_spaces(worker.envs[0], policy_mapping_fn("independent"))
    learner = MultiPPOLearner({"cartpole_0": spaces["cartpole_0"]}, SMALL)
    start = learner.get_weights()["cartpole_0"]
    assert all(np.array_equal(start[k], worker.get_weights(["cartpole_0"])["cartpole_0"][k]) for k in start)
    reports = learner.train(worker.sample())
    assert list(reports) == ["cartpole_0"] and reports["cartpole_0"].num_updates >= 1
    state = learner.state_dict()
    assert {"policy", "optimizer", "learners"} <= set(state)
    assert "cartpole_0/pi_head.weight" in state["policy"]
    fresh = MultiPPOLearner({"cartpole_0": spaces["cartpole_0"]}, SMALL)
    fresh.load_state_dict(state)
    assert all(np.array_equal(fresh.get_weights()["cartpole_0"][k], learner.get_weights()["cartpole_0"][k])
               for k in start)


def test_replay_is_not_ready_below_learning_starts_then_samples_steps_minibatches() -> None:
    worker = _worker()
    config = ReplayConfig(capacity=1000, batch_size=8, learning_starts=40)
    replay = MultiReplay(["cartpole_1"], config, steps=3)
    assert replay.sample() is rxrl.NOT_READY
    while replay.shards["cartpole_1"].num_added < 40:
        stored = replay.add(worker.sample())
    assert stored >= 40
    batches = replay.sample()
    assert not isinstance(batches, rxrl.NotReady) and len(batches["cartpole_1"]) == 24
    spaces = policy_spaces(worker.envs[0], policy_mapping_fn("independent"))
    learner = MultiDQNLearner({"cartpole_1": spaces["cartpole_1"]}, DQNConfig())
    report = learner.train(batches, steps=3)["cartpole_1"]
    assert (report.num_updates, report.env_steps_trained, learner.num_updates) == (3, 24, 3)


def test_prioritized_replay_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match=r"set replay\.prioritized=false"):
        MultiReplay(["p"], ReplayConfig(prioritized=True), steps=2)


def test_state_of_other_policies_is_refused_naming_both_sets() -> None:
    spaces = policy_spaces(_worker().envs[0], policy_mapping_fn("independent"))
    learner = MultiPPOLearner({"cartpole_0": spaces["cartpole_0"]}, SMALL)
    other = MultiPPOLearner({"cartpole_1": spaces["cartpole_1"]}, SMALL)
    with pytest.raises(ValueError, match=r"policies \['cartpole_1'\], this learner \['cartpole_0'\]"):
        learner.load_state_dict(other.state_dict())
    replay = MultiReplay(["cartpole_1"], ReplayConfig(capacity=64, batch_size=4, learning_starts=4))
    with pytest.raises(ValueError, match=r"replay has policies \['a', 'b'\], this replay \['cartpole_1'\]"):
        replay.load_state_dict({"shards": {"a": {}, "b": {}}})
