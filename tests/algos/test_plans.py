"""The algorithm plans: their printed shapes, the registry, and env checks before anything runs."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

import rxrl
from rxrl.algos import ALGORITHMS, get
from rxrl.algos.common import LearnerPlacement, PlacementSettings, env_spaces
from rxrl.algos.on_policy import a2c, a3c, ppo
from rxrl.algos.qlearning import dqn
from rxrl.algos.qlearning.common import QSettings, observation_bytes
from tests.rl.test_cnn import PIXELS_ID

PPO_SHAPE = """\
from_actors(RolloutWorker×2, RolloutWorker.sample)  [×2 shards]
| barrier()
| call(PPOLearner×1 on the driver, train_on_fragments)
| broadcast(RolloutWorker×2, set_weights)
| map(Progress.observe_trained)"""

#: when a train batch needs several rounds, the driver joins their fragments (still refs)
PPO_SHAPE_OF_ROUNDS = PPO_SHAPE.replace(
    "| barrier()\n", "| barrier()\n| window(min_size=4096, size=rows, combine=join_rounds)\n")

A3C_SHAPE = """\
from_actors(RolloutWorker×3, sample_and_compute_gradients)  [×3 shards]
| gather(max_in_flight=2, tagged=True)
| map(Progress.observe_gradients)
| call(A2CLearner×1, apply_gradients)
| call(RolloutWorker×3, set_weights_of_sender)
| map(MetricsAccumulator.observe_train)"""


def test_ppo_is_barrier_train_broadcast_with_a_window_only_for_batches_of_several_rounds() -> None:
    assert ppo.PPO().round_size == 1024
    assert rxrl.show(ppo.plan(ppo.PPO(train_batch_size=1024))) == PPO_SHAPE
    assert rxrl.show(ppo.plan(ppo.PPO(train_batch_size=256))) == PPO_SHAPE
    assert rxrl.show(ppo.plan(ppo.PPO(train_batch_size=4096))) == PPO_SHAPE_OF_ROUNDS


def test_a2c_has_the_same_synchronous_shape_with_its_own_learner() -> None:
    shape = rxrl.show(a2c.plan(a2c.A2C(train_batch_size=256)))
    assert shape == PPO_SHAPE.replace("PPOLearner", "A2CLearner")


def test_a3c_gathers_gradients_and_replies_only_to_the_sender() -> None:
    shape = rxrl.show(a3c.plan(a3c.A3C(num_workers=3, max_in_flight=2)))
    assert shape == A3C_SHAPE


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_plan_fits_on_a_screen_in_every_format(name: str) -> None:
    algo = get(name)
    plan = algo.plan(algo.config(), None)
    # a plan of two branches over a split prints each branch's chain: two screens' worth;
    # Ape-X's two flows (store: 6 steps, train: 4) and its report step fit in 13
    assert len(rxrl.show(plan).splitlines()) <= {"two-trainer": 24, "apex": 13}.get(name, 12)
    dot = rxrl.show(plan, "dot")
    assert dot.startswith("digraph plan {") and "->" in dot
    assert rxrl.show(plan, "mermaid").startswith("flowchart TD")


def test_the_registry_names_each_algorithm_with_its_config_and_plan() -> None:
    assert {"a2c", "a3c", "ppo", "ma-ppo", "two-trainer", "maml"} <= set(ALGORITHMS)
    assert get("ppo").config is ppo.PPO and get("ppo").plan is ppo.plan
    assert get("a3c").config is a3c.A3C and get("a2c").plan is a2c.plan
    with pytest.raises(ValueError, match=r"unknown algorithm 'nosuch'; choose one of \['a2c', 'a3c', .*"):
        get("nosuch")


def test_building_a_plan_checks_the_env_id() -> None:
    with pytest.raises(ValueError, match=r"unknown env id 'CartPol-v1'.*Did you mean: `CartPole`"):
        ppo.plan(ppo.PPO(env="CartPol-v1"))


@pytest.mark.parametrize(("env", "message"), [
    ("tests.algos.fake_envs:MultiDiscreteActions-v0",
     r"ppo does not support the action space MultiDiscrete\(\[2 3\]\) of .*; "
     r"supported: Discrete and 1-D Box"),
    ("tests.algos.fake_envs:DictObservations-v0",
     r"ppo does not support the observation space Dict\(.*\) of .*; supported: Box and Discrete"),
    ("tests.algos.no_such_module:Env-v0", r"cannot import the module of env"),
])
def test_unsupported_spaces_are_refused_by_name(env: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        env_spaces(ppo.PPO(env=env), "ppo")


def test_continuous_actions_are_supported() -> None:
    spaces = env_spaces(ppo.PPO(env="Pendulum-v1"), "ppo")
    assert spaces.action.shape == (1,)


def test_resumed_torch_workers_start_from_the_checkpoint_s_policy_and_carry_nothing_else() -> None:
    """A resumed IMPALA's worker group travels inside every tagged fragment: its factory holds
    the checkpoint's policy weights (and their version), not the whole learner state."""
    import pickle

    import numpy as np

    from rxrl.algos.common import Start, torch_workers
    from rxrl.algos.vtrace import impala
    from rxrl.rl import IMPALALearner
    from rxrl.rl.models.policy import ActorCritic

    config = impala.IMPALA()
    learner = IMPALALearner("CartPole-v1", config.learner, seed=3)
    for p in learner.policy.parameters():  # one optimizer step: the state holds Adam's moments
        p.grad = torch.full_like(p, 0.1)
    learner.optimizer.step()
    state = {**learner.state_dict(), "version": 7}
    factory = torch_workers(config, Start(state, reseed=1))
    worker = factory(0)
    assert isinstance(worker.policy, ActorCritic) and worker.weights_version == 7
    weights = learner.get_weights()
    assert all(np.array_equal(weights[k], v) for k, v in worker.get_weights().items())
    assert len(pickle.dumps(factory)) < len(pickle.dumps(state)) / 2
    fresh = torch_workers(config)(0)
    assert isinstance(fresh.policy, ActorCritic) and fresh.weights_version == 0


def test_worker_factories_keep_only_what_workers_read_of_a_checkpoint() -> None:
    """A checkpoint's optimizer and replay state never reaches a worker factory (which a
    plan's tagged items carry): the Q-learning, SAC, MAML and multi-agent factories hold
    `Start.for_workers` (the Q-learning one with its tensors as arrays: its workers have no
    torch), and a worker built from it resumes the same."""
    import numpy as np

    from rxrl.algos.common import WORKER_KEYS, Start
    from rxrl.algos.meta import maml
    from rxrl.algos.multi_agent import ma_ppo as multi_agent
    from rxrl.algos.qlearning import dqn, sac
    from rxrl.algos.qlearning.common import QWorkerFactory
    from rxrl.algos.qlearning.sac import SACWorkerFactory

    policy = {"w": torch.ones(2)}
    state = {"policy": policy, "optimizer": {"state": {}}, "replay": [b"x" * 10_000],
             "env_steps_sampled": 40, "version": 3,
             "learners": {"a": {"policy": policy, "optimizer": {"state": {}}}}}
    start = Start(state, reseed=2)
    slim = start.for_workers()
    assert slim.reseed == 2 and set(slim.learner_state) == {*WORKER_KEYS, "learners"}
    assert set(slim.learner_state["learners"]["a"]) == {"policy"}
    q_start = QWorkerFactory(dqn.DQN(), lambda i: 0.1, start).start
    assert q_start is not None and q_start.reseed == 2
    held_q = q_start.learner_state
    assert set(held_q) == set(slim.learner_state) and set(held_q["learners"]["a"]) == {"policy"}
    assert held_q["env_steps_sampled"] == 40 and held_q["version"] == 3
    assert isinstance(held_q["policy"]["w"], np.ndarray) and np.array_equal(held_q["policy"]["w"], np.ones(2))
    factories: list[Any] = [SACWorkerFactory(sac.SAC(), start),
                            maml.MAMLWorkerFactory(maml.MAML(), start),
                            multi_agent.MultiAgentWorkerFactory(multi_agent.MultiAgentPPO(), starts=(start,))]
    for factory in factories:
        multi = isinstance(factory, multi_agent.MultiAgentWorkerFactory)
        held = factory.starts[0] if multi else factory.start
        assert held == slim, type(factory).__name__

    worker = QWorkerFactory(dqn.DQN(), lambda i: 0.1, Start({**_dqn_state(), "replay": [b"x"]}))(0)
    assert worker.env_steps == 40 // dqn.DQN().num_workers


def _dqn_state() -> dict[str, object]:
    from rxrl.algos.qlearning import dqn
    from rxrl.rl import DQNLearner

    config = dqn.DQN()
    return {**DQNLearner("CartPole-v1", config.learner, seed=0).state_dict(), "env_steps_sampled": 40}


def test_synchronous_learners_live_on_the_driver_and_asynchronous_ones_in_a_process() -> None:
    """PPO's and A2C's workers wait for the learner's weights: it runs on the driver (no
    process of its own to start); A3C's, IMPALA's and APPO's learners work while the driver
    routes samples, in an actor process."""
    for name, placement in [("ppo", "driver"), ("a2c", "driver"), ("a3c", "actor"),
                            ("impala", "actor"), ("appo", "actor")]:
        assert get(name).config().learner_placement == placement, name
    assert dict(ppo.groups(ppo.PPO()).learner.options) == {"on_driver": True}
    assert dict(a2c.groups(a2c.A2C()).learner.options) == {"on_driver": True}
    assert "on_driver" not in a3c.groups(a3c.A3C()).learner.options
    assert "on_driver" not in ppo.groups(ppo.PPO(learner_placement="actor")).learner.options
    # `rxrl show` says where it lives
    assert "call(PPOLearner×1, train" in rxrl.show(ppo.plan(ppo.PPO(learner_placement="actor")))
    refused = r"^PPO.learner_placement must be one of \['actor', 'driver'\], got 'gpu'$"
    with pytest.raises(ValueError, match=refused):
        ppo.PPO(learner_placement="gpu")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(set(ALGORITHMS) - {"ddppo"}))  # DD-PPO has no learner
def test_every_algorithm_puts_its_learner_where_learner_placement_says(name: str) -> None:
    """``learner_placement`` is honoured by every algorithm with one learner (DQN, SAC,
    Ape-X, MA-PPO, two-trainer and MAML ignored it once): ``"driver"`` hosts it on the
    driver, ``"actor"`` gives it a process of its own; the plan's text says which."""
    spec = get(name)
    cases: list[tuple[LearnerPlacement, bool]] = [("driver", True), ("actor", False)]
    for placement, hosted in cases:
        text = rxrl.show(spec.plan(spec.config(learner_placement=placement), None))
        learners = [line for line in text.splitlines() if "Learner×1" in line]
        assert learners, text
        assert any("Learner×1 on the driver" in line for line in learners) is hosted, (placement, text)


@pytest.mark.parametrize("name", sorted(set(ALGORITHMS) - {"ddppo"}))
def test_a_learner_on_the_driver_placed_on_a_node_is_refused_in_one_line(name: str) -> None:
    """``learner_placement="driver"`` with ``placement.learner`` set would ignore the latter
    (the Q-learning settings once skipped this check): one line naming both settings."""
    spec = get(name)
    with pytest.raises(ValueError, match=r"placement\.learner \('zone=a'\) places learner actors.*"
                                         r"set learner_placement=actor too$"):
        spec.config(learner_placement="driver", placement=PlacementSettings(learner="zone=a"))


@pytest.mark.parametrize("name", ["dqn", "apex"])
def test_the_replay_lives_where_replay_placement_says(name: str) -> None:
    """``replay_placement="driver"`` hosts the replay shards on the driver (one process fewer
    each), ``"actor"`` in processes; ``"auto"`` (the default) on the driver for DQN with small
    observations only (CartPole's vectors, MinAtar-sized images): Ape-X's shards, large images
    (whose frames would all pass through the driver) and a ``placement.replay`` keep actors.
    The plan's text says which; bad values and a node placement beside ``"driver"`` are one
    line."""
    spec = get(name)
    settings = type(spec.config())
    assert issubclass(settings, QSettings)

    def on_driver(config: QSettings) -> bool:
        return re.search(r"ReplayShard×\d+ on the driver", rxrl.show(spec.plan(config, None))) is not None

    assert on_driver(settings()) is (name == "dqn")
    assert on_driver(settings(replay_placement="driver"))
    assert not on_driver(settings(replay_placement="actor"))
    assert on_driver(settings(env=PIXELS_ID)) is (name == "dqn")  # 2x10x10 uint8: 200 bytes
    atari_sized = {"channels": 4, "side": 84}  # 28,224 bytes
    assert observation_bytes(settings(env=PIXELS_ID, env_kwargs=atari_sized)) == 4 * 84 * 84
    assert not on_driver(settings(env=PIXELS_ID, env_kwargs=atari_sized))
    assert not on_driver(settings(placement=PlacementSettings(replay="zone=a")))
    with pytest.raises(ValueError, match=r"\.replay_placement must be one of \['auto', 'actor', 'driver'\], "
                                         r"got 'x'$"):
        settings(replay_placement="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"placement\.replay \('zone=a'\) places replay actors.*"
                                         r"set replay_placement=actor too$"):
        settings(replay_placement="driver", placement=PlacementSettings(replay="zone=a"))


@pytest.mark.parametrize("name", ["dqn", "apex"])
def test_dqn_s_learner_goes_where_its_replay_is_unless_told(name: str) -> None:
    """``learner_placement="auto"`` (DQN's default) hosts the learner on the driver exactly
    where the replay is (small observations, no ``placement.learner``), so a CartPole run is
    the driver and its workers; Ape-X keeps ``"actor"``, and refuses ``"auto"`` as every
    algorithm that does not resolve it does (one line listing the choices)."""
    spec = get(name)
    settings = type(spec.config())
    assert issubclass(settings, QSettings)

    def placed(config: QSettings) -> tuple[bool, bool]:
        text = rxrl.show(spec.plan(config, None))
        return ("DQNLearner×1 on the driver" in text,
                re.search(r"ReplayShard×\d+ on the driver", text) is not None)

    if name == "apex":
        assert placed(settings()) == (False, False)
        with pytest.raises(ValueError, match=r"^ApeX\.learner_placement must be one of "
                                             r"\['actor', 'driver'\], got 'auto'$"):
            settings(learner_placement="auto")  # type: ignore[arg-type]
        return
    assert str(settings().learner_placement) == "auto"
    assert placed(settings()) == (True, True)
    assert placed(settings(replay_placement="actor")) == (False, False)
    assert placed(settings(learner_placement="actor")) == (False, True)
    assert placed(settings(learner_placement="driver", replay_placement="actor")) == (True, False)
    assert placed(settings(env=PIXELS_ID, env_kwargs={"channels": 4, "side": 84})) == (False, False)
    assert placed(settings(placement=PlacementSettings(learner="zone=a"))) == (False, True)
    with pytest.raises(ValueError, match=r"^DQN\.learner_placement must be one of "
                                         r"\['actor', 'driver', 'auto'\], got 'x'$"):
        settings(learner_placement="x")  # type: ignore[arg-type]


def test_only_dqn_resolves_learner_placement_auto() -> None:
    for name in sorted(ALGORITHMS):
        config = get(name).config()
        resolves = type(config).auto_learner_placement
        assert resolves is (name == "dqn"), name
        if not resolves and name != "ddppo":
            with pytest.raises(ValueError, match=r"\.learner_placement must be one of \['actor', 'driver'\], "
                                                 r"got 'auto'$"):
                get(name).config(learner_placement="auto")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(set(ALGORITHMS) - {"ddppo"}))
def test_learner_cores_gives_a_learner_on_the_driver_cpus_of_its_own_and_nothing_else(name: str) -> None:
    """``learner_cores=n`` asks the Ray backend for ``n`` CPUs of the learner's own
    (``own_cores``), which only a learner on the driver can have: the plan's text says so, and
    a learner in a process (asked for, or a learner group) is refused in one line."""
    spec = get(name)
    text = rxrl.show(spec.plan(spec.config(learner_placement="driver", learner_cores=1), None))
    assert "Learner×1 on the driver (1 CPU of its own)" in text, text
    assert "of its own" not in rxrl.show(spec.plan(spec.config(learner_placement="driver"), None))
    with pytest.raises(ValueError, match=r"\.learner_cores \(2\) is for a learner on the driver: set "
                                         r"learner_placement=driver .*or learner_cores=0$"):
        spec.config(learner_placement="actor", learner_cores=2)
    with pytest.raises(ValueError, match=r"\.learner_cores must be an integer >= 0, got -1$"):
        spec.config(learner_cores=-1)


def test_learner_cores_with_dqn_s_auto_placement_follows_where_the_learner_went() -> None:
    """DQN's ``"auto"`` decides at plan time: on the driver (small observations) the learner
    gets its CPUs; where it went to a process (Atari-sized frames) the setting is refused."""
    text = rxrl.show(dqn.plan(dqn.DQN(learner_cores=1), None))
    assert "DQNLearner×1 on the driver (1 CPU of its own)" in text
    atari_sized = dqn.DQN(env=PIXELS_ID, env_kwargs={"channels": 4, "side": 84}, learner_cores=1)
    with pytest.raises(ValueError, match=r"^DQN\.learner_cores \(1\) is for a learner on the driver, "
                                         r"and this one has a process of its own"):
        dqn.plan(atari_sized, None)
