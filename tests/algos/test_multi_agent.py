"""The multi-agent plans: the two-trainer plan on every backend, each learner's weights to its own
policies only, a Ray run replayed from its trace, readiness before learning_starts, and
learning smoke tests of multi-agent PPO and of the two-trainer mix; greedy evaluation of a
checkpoint's policies."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import rxrl
from rxrl import ops
from rxrl.algos.common import Start
from rxrl.algos.multi_agent import ma_ppo as multi_agent
from rxrl.algos.multi_agent import two_trainer
from rxrl.algos.multi_agent.ma_ppo import MultiAgentPPO, MultiAgentWorkerFactory, MultiTrained
from rxrl.algos.multi_agent.two_trainer import TwoTrainer
from rxrl.envs import make_parallel_env
from rxrl.rl import DQNConfig, PPOConfig, ReplayConfig
from rxrl.rl.data.ma_metrics import MultiAgentMetrics
from rxrl.rl.learners.multi_agent import MultiPPOLearner
from rxrl.rl.models.policy import make_policy
from rxrl.rl.schedules import LinearSchedule
from rxrl.training.checkpoint import deterministic_fields, same

SMALL_PPO = PPOConfig(lr=2e-3, num_epochs=1, minibatch_size=32, ent_coef=0.0, clip_vloss=False)


def small_two_trainer(**kwargs: Any) -> TwoTrainer:
    """Rounds of 2 workers x 2 envs x 8 steps; DQN starts after 32 transitions."""
    replay = ReplayConfig(capacity=2000, batch_size=16, learning_starts=32)
    dqn = DQNConfig(training_intensity=4.0, replay=replay)
    return TwoTrainer(num_envs_per_worker=2, fragment_length=8, train_batch_size=64, ppo=SMALL_PPO, dqn=dqn,
                      dqn_steps_per_call=2, **kwargs)


def _run(plan: rxrl.Plan[MultiAgentMetrics], backend: str, n: int, **options: Any
         ) -> tuple[list[MultiAgentMetrics], rxrl.Trace]:
    with rxrl.run(plan | ops.take(n), backend, **options) as run:
        return list(run), run.trace


@pytest.mark.parametrize("backend", ["reference", "rx", "ray"])
@pytest.mark.timeout(180)
def test_the_two_trainer_plan_runs_both_learners_on_every_backend(backend: str, request: pytest.FixtureRequest
                                                                    ) -> None:
    if backend == "ray":
        request.getfixturevalue("ray_session")
    records, _ = _run(two_trainer.plan(small_two_trainer()), backend, 24)
    trained = [set(r.policy_train) for r in records]
    assert trained[-1] == {"cartpole_0", "cartpole_1"}  # both learners have reported
    steps = [r.env_steps_sampled for r in records]
    assert steps == sorted(steps) and steps[-1] % 64 == 0  # whole rounds of 2 x 2 x 8 x 2 workers
    assert records[-1].policy_train["cartpole_1"].num_updates == 2  # dqn_steps_per_call per reply


def test_each_learner_s_weights_reach_the_workers_for_its_own_policies_only() -> None:
    sent: list[set[str]] = []

    def record(event: rxrl.Event) -> None:
        if event.kind == "call" and event.op.startswith("broadcast") and isinstance(event.item, MultiTrained):
            sent.append(set(event.item.weights))

    list(rxrl.run(two_trainer.plan(small_two_trainer()) | ops.take(24), on_event=record))
    assert {"cartpole_0"} in [s for s in sent] and {"cartpole_1"} in sent
    assert all(s in ({"cartpole_0"}, {"cartpole_1"}) for s in sent)


def test_dqn_trains_only_once_the_replay_holds_learning_starts() -> None:
    records, _ = _run(two_trainer.plan(small_two_trainer()), "reference", 30)
    first_dqn = next(r for r in records if "cartpole_1" in r.policy_train)
    # 32 DQN transitions need at least one round (<= 32 per round for one agent of 2 x 2 x 8 x 2)
    assert first_dqn.env_steps_sampled >= 32 and records[0].policy_train.keys() == {"cartpole_0"}


def test_a_split_lag_below_one_ppo_batch_runs_both_learners() -> None:
    """With max_lag=1 the PPO branch cannot fill its batch alone: the DQN branch's store flow
    must catch the split up (while its replay waits for learning_starts) and the PPO branch be
    asked again — both learners train, no DeadlockError."""
    records, _ = _run(two_trainer.plan(small_two_trainer(max_lag=1)), "reference", 24)
    trained = {p for r in records for p in r.policy_train}
    assert trained == {"cartpole_0", "cartpole_1"}


@pytest.mark.timeout(180)
def test_a_ray_run_of_the_two_trainer_plan_is_replayed_exactly_from_its_trace(ray_session: None) -> None:
    records, trace = _run(two_trainer.plan(small_two_trainer()), "ray", 20)
    plan = two_trainer.plan(small_two_trainer()) | ops.take(20)
    replayed = list(rxrl.run(plan, "reference", schedule=trace))
    assert len(replayed) == len(records) == 20
    for rerun, recorded in zip(replayed, records, strict=True):
        a, b = deterministic_fields(rerun), deterministic_fields(recorded)
        assert a.keys() == b.keys() and all(same(a[k], b[k]) for k in a), (a, b)


def test_multi_agent_ppo_learns_on_two_cartpoles() -> None:
    config = MultiAgentPPO(num_workers=1, num_envs_per_worker=4, fragment_length=64, train_batch_size=256,
                           learner=PPOConfig(lr=2e-3, num_epochs=4, minibatch_size=128, ent_coef=0.0,
                                             clip_vloss=False))
    records = list(rxrl.run(multi_agent.plan(config) | ops.take(25)))
    first, last = records[2], records[-1]
    for agent in ("cartpole_0", "cartpole_1"):
        assert last.agent_return_mean[agent] > 1.5 * first.agent_return_mean[agent]
    assert last.episode_return_mean == min(last.agent_return_mean.values())
    assert last.agent_steps_sampled > last.env_steps_sampled == 25 * 256


def test_shared_and_independent_mappings_give_one_or_k_policies() -> None:
    three = {"num_agents": 3}
    shared = multi_agent.env_policies(MultiAgentPPO(policy_mapping="shared", env_kwargs=three), "x")
    independent = multi_agent.env_policies(MultiAgentPPO(env_kwargs={"num_agents": 3}), "x")
    assert list(shared) == ["shared"] and len(independent) == 3


def test_a_heterogeneous_env_cannot_share_one_policy() -> None:
    config = MultiAgentPPO(env="mpe2.simple_speaker_listener_v4", env_kwargs={"continuous_actions": False},
                           policy_mapping="shared")
    with pytest.raises(ValueError, match="share policy 'shared' but have different spaces"):
        multi_agent.groups(config)


def _by_hand(config: MultiAgentPPO, state: dict[str, Any], episodes: int, seed: int) -> list[list[float]]:
    """The oracle: each agent's own policy built from ``state``, its argmax action, one env."""
    spaces = multi_agent.env_policies(config, "test")
    policies = {}
    for pid, s in spaces.items():
        policies[pid] = make_policy(s.observation, s.action, config.policy, 0)
        policies[pid].load_state_dict(state["learners"][pid]["policy"])
    env = make_parallel_env(config.env, config.env_kwargs)
    obs, _ = env.reset(seed=seed)
    out = []
    for _ in range(episodes):
        totals = dict.fromkeys(env.possible_agents, 0.0)
        while env.agents:
            actions = {a: int(policies[a].act(np.asarray(obs[a])[None], deterministic=True)[0][0])
                       for a in env.agents}
            obs, rewards, _, _, _ = env.step(actions)
            for a, r in rewards.items():
                totals[a] += float(r)
        out.append([totals[a] for a in env.possible_agents])
        obs, _ = env.reset()
    return out


def test_greedy_evaluation_acts_with_the_checkpoint_s_policies() -> None:
    """Law: `multi_agent.evaluate` gives the returns of every agent acting with the argmax of
    its own policy, loaded from the learner state (per agent, and their sum per episode)."""
    config = MultiAgentPPO()
    learner = MultiPPOLearner(multi_agent.env_policies(config, "test"), config.learner, config.policy,
                              seed=config.seed)
    initial = learner.state_dict()
    noise = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for part in learner.learners.values():
            for p in part.policy.parameters():
                p.add_(torch.randn(p.shape, generator=noise))
    state = learner.state_dict()
    expected = _by_hand(config, state, 3, seed=7)
    assert expected != _by_hand(config, initial, 3, seed=7)  # the weights change the returns
    done = multi_agent.evaluate(config, state, 3, seed=7)
    agents = ["cartpole_0", "cartpole_1"]
    assert done.agent_returns == {a: [e[i] for e in expected] for i, a in enumerate(agents)}
    assert done.returns == [sum(e) for e in expected]
    means = {a: float(np.mean(r)) for a, r in done.agent_returns.items()}
    lowest = min(means, key=means.__getitem__)
    assert done.lowest_agent() == (lowest, done.agent_returns[lowest])  # training's episode_return_mean



def test_a_resumed_two_trainer_run_continues_the_replay_and_epsilon() -> None:
    """Law: a replay restored from a checkpoint's ``"dqn_replay"`` is the saved one (same rows,
    same next sample), and a resumed worker's DQN epsilon continues from its share of the
    transitions stored, not from the schedule's start."""
    config = small_two_trainer(exploration_steps=4000)
    specs = two_trainer.q_specs(config)
    worker = MultiAgentWorkerFactory(config, specs)(0)
    replay = two_trainer.ReplayFactory(config)(0)
    for _ in range(4):
        replay.add(worker.sample())
    start = Start({"dqn_replay": replay.state_dict()})
    restored = two_trainer.ReplayFactory(config, start)(0)
    stored = replay.shards["cartpole_1"].num_added
    assert stored > 0 and restored.shards["cartpole_1"].num_added == stored
    a, b = replay.sample(), restored.sample()
    assert isinstance(a, dict) and isinstance(b, dict)
    assert np.array_equal(a["cartpole_1"].obs, b["cartpole_1"].obs)
    clock = two_trainer.resumed_q_steps(config, start)
    assert clock == {"cartpole_1": stored // config.num_workers}
    assert two_trainer.resumed_q_steps(config, None) == {}
    resumed = MultiAgentWorkerFactory(config, specs, (), clock)(0)
    schedule = specs["cartpole_1"].epsilon
    assert isinstance(schedule, LinearSchedule)
    assert resumed.q_nets["cartpole_1"].epsilon() == schedule(clock["cartpole_1"]) < schedule(0)
