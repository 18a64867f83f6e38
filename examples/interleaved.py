"""Interleaving two algorithms on one stream, by weights: a pattern no predefined template offers.

The same two-CartPole workers as ``two_trainer_mix.py``, but the algorithms take turns in a
fixed, deterministic rhythm instead of running concurrently: one PPO iteration for agent 0,
then four DQN updates for agent 1, then one round stored for DQN, and again. A round-robin
``concurrently`` with ``weights=[1, 4, 1]`` says exactly that; ``max_lag=1`` keeps both
branches on the same round (the workers sample a round, PPO trains on it, DQN stores it),
and until the replay holds ``learning_starts`` transitions the DQN input is not ready and
simply skipped. The run is the same on every backend: it has no schedule choice.

Run it: ``python examples/interleaved.py`` (add ``ray`` or ``rx`` to pick a backend).
"""

from __future__ import annotations

import sys
from typing import Any

import rxrl
from rxrl import ops
from rxrl.algos.multi_agent.ma_ppo import Progress, set_policy_weights
from rxrl.algos.multi_agent.two_trainer import select, store, train_dqn, train_ppo
from rxrl.rl import DQNConfig, PPOConfig, ReplayConfig
from rxrl.rl.data.ma_metrics import MultiAgentMetrics
from rxrl.rl.data.multiagent import policy_mapping_fn, policy_spaces
from rxrl.rl.learners.multi_agent import MultiDQNLearner, MultiPPOLearner, MultiReplay
from rxrl.rl.workers.multi_agent import MultiAgentRolloutWorker, QPolicySpec

ENV, PPO_AGENT, DQN_AGENT = "MultiCartPole-v0", "cartpole_0", "cartpole_1"


def interleaved(ppo_turns: int = 1, dqn_turns: int = 4, seed: int = 0) -> rxrl.Plan[MultiAgentMetrics]:
    """``ppo_turns`` PPO iterations, ``dqn_turns`` DQN updates and one store, in turn, forever."""
    dqn = DQNConfig(replay=ReplayConfig(capacity=50_000, batch_size=32, learning_starts=256))
    rollout = rxrl.indexed_actors(lambda i: MultiAgentRolloutWorker(
        ENV, num_envs=4, fragment_length=32, seed=seed, worker_index=i,
        q_policies={DQN_AGENT: QPolicySpec(dqn.q_net, n_step=3, epsilon=0.1)}), 2, name="Worker")
    spaces = policy_spaces(MultiAgentRolloutWorker(ENV, 1, 1).envs[0], policy_mapping_fn("independent"))
    ppo = PPOConfig(lr=2e-3, num_epochs=4, minibatch_size=128, clip_vloss=False)
    ppo_learner = rxrl.actors(MultiPPOLearner, 1, {PPO_AGENT: spaces[PPO_AGENT]}, ppo, seed=seed)
    dqn_learner = rxrl.actors(MultiDQNLearner, 1, {DQN_AGENT: spaces[DQN_AGENT]}, dqn, seed=seed)
    replay = rxrl.actors(MultiReplay, 1, [DQN_AGENT], dqn.replay, seed=seed, steps=8)
    progress = Progress([PPO_AGENT, DQN_AGENT], [PPO_AGENT, DQN_AGENT])

    rounds = (rxrl.from_actors(rollout, MultiAgentRolloutWorker.sample) | ops.barrier()
              | ops.map(progress.observe_rounds))
    to_ppo, to_dqn = ops.split(rounds, 2, max_lag=1)
    ppo_turn = (to_ppo | ops.map(select([PPO_AGENT])) | ops.call(ppo_learner, train_ppo)
                | ops.broadcast(rollout, set_policy_weights) | ops.map(progress.observe_trained))
    q_learning = (rxrl.from_actors(replay, MultiReplay.sample) | ops.gather()
                  | ops.call(dqn_learner, train_dqn(8)) | ops.broadcast(rollout, set_policy_weights)
                  | ops.map(progress.observe_trained))
    # Plan[Any]: concurrently types every input as its output, though it drops this one's items
    stored: rxrl.Plan[Any] = to_dqn | ops.map(select([DQN_AGENT])) | ops.call(replay, store)
    return ops.concurrently(ppo_turn, q_learning, stored, weights=[ppo_turns, dqn_turns, 1], emit=[0, 1])


def main(backend: str = "reference", records: int = 50) -> list[MultiAgentMetrics]:
    """Print the plan, train for ``records`` learner replies, return the records."""
    plan = interleaved()
    print(rxrl.show(plan, sites=False))
    out = []
    with rxrl.run(plan | ops.take(records), backend) as run:
        for m in run:
            out.append(m)
            if m.iteration % 10 == 0:
                ret = {a: round(r, 1) for a, r in m.agent_return_mean.items()}
                print(f"{m.iteration:>4}  {m.env_steps_sampled:>7,} env steps   returns {ret}")
    return out


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "reference")
