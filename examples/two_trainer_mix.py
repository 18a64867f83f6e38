"""Two algorithms on one set of rollout workers, written by hand: PPO for one agent, DQN for the other.

Two CartPoles are two agents of one PettingZoo Parallel env (``MultiCartPole-v0``). Every
worker steps both; a round of their experience is split in two. One branch trains agent 0's
policy with PPO; the other stores agent 1's transitions in a replay actor and trains agent
1's Q-network from it, 2 learner calls (of 4 steps) per minibatch stored, once the replay
holds ``learning_starts`` transitions (until then it answers ``rxrl.NOT_READY``). The two
branches run concurrently (an async union), and each learner's reply sets only its own
policy's weights on the workers. ``rxrl train two-trainer`` is this plan with a config.

Run it: ``python examples/two_trainer_mix.py`` (add ``ray`` or ``rx`` to pick a backend).
"""

from __future__ import annotations

import sys

import rxrl
from rxrl import ops
from rxrl.algos.multi_agent.ma_ppo import MultiTrained, Progress, set_policy_weights
from rxrl.algos.multi_agent.two_trainer import IntensityClock, select, store, train_dqn, train_ppo
from rxrl.rl import DQNConfig, PPOConfig, ReplayConfig
from rxrl.rl.data.ma_metrics import MultiAgentMetrics
from rxrl.rl.data.multiagent import policy_mapping_fn, policy_spaces
from rxrl.rl.learners.multi_agent import MultiDQNLearner, MultiPPOLearner, MultiReplay
from rxrl.rl.workers.multi_agent import MultiAgentRolloutWorker, QPolicySpec

ENV, PPO_AGENT, DQN_AGENT = "MultiCartPole-v0", "cartpole_0", "cartpole_1"


def mix(workers: int = 2, seed: int = 0) -> rxrl.Plan[MultiAgentMetrics]:
    """PPO for ``cartpole_0`` and DQN for ``cartpole_1``, concurrently, on one stream of rounds."""
    dqn = DQNConfig(replay=ReplayConfig(capacity=50_000, batch_size=32, learning_starts=256))
    rollout = rxrl.indexed_actors(lambda i: MultiAgentRolloutWorker(
        ENV, num_envs=4, fragment_length=16, seed=seed, worker_index=i,
        q_policies={DQN_AGENT: QPolicySpec(dqn.q_net, n_step=3, epsilon=0.1)}), workers, name="Worker")
    spaces = policy_spaces(MultiAgentRolloutWorker(ENV, 1, 1).envs[0], policy_mapping_fn("independent"))
    ppo = PPOConfig(lr=2e-3, num_epochs=4, minibatch_size=128, clip_vloss=False)
    ppo_learner = rxrl.actors(MultiPPOLearner, 1, {PPO_AGENT: spaces[PPO_AGENT]}, ppo, seed=seed)
    dqn_learner = rxrl.actors(MultiDQNLearner, 1, {DQN_AGENT: spaces[DQN_AGENT]}, dqn, seed=seed)
    replay = rxrl.actors(MultiReplay, 1, [DQN_AGENT], dqn.replay, seed=seed, steps=4)
    progress, clock = Progress([PPO_AGENT, DQN_AGENT], [PPO_AGENT, DQN_AGENT]), IntensityClock(32)

    rounds = (rxrl.from_actors(rollout, MultiAgentRolloutWorker.sample) | ops.barrier()
              | ops.map(progress.observe_rounds))
    to_ppo, to_dqn = ops.split(rounds, 2, max_lag=1)
    ppo_branch = (to_ppo | ops.map(select([PPO_AGENT])) | ops.call(ppo_learner, train_ppo)
                  | ops.broadcast(rollout, set_policy_weights) | ops.map(progress.observe_trained))
    stored = to_dqn | ops.map(select([DQN_AGENT])) | ops.call(replay, store) | ops.flat_map(clock.tokens)
    q_learning = (rxrl.from_actors(replay, MultiReplay.sample) | ops.gather()
                  | ops.call(dqn_learner, train_dqn(4)) | ops.broadcast(rollout, only_q_weights)
                  | ops.map(progress.observe_trained))
    return ops.union(ppo_branch, ops.alongside(q_learning, stored, weights=[2, 1]), mode="async")


def only_q_weights(worker: MultiAgentRolloutWorker, trained: MultiTrained) -> None:
    """A user's own effect: the DQN learner's reply sets the Q-network's weights only."""
    assert set(trained.weights) == {DQN_AGENT}
    set_policy_weights(worker, trained)


def main(backend: str = "reference", records: int = 60) -> list[MultiAgentMetrics]:
    """Print the plan, train for ``records`` learner replies, return the records."""
    plan = mix()
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
