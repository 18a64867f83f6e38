"""The CleanRL-style single-process DQN (bench/cleanrl_dqn.py) with the matched settings.

One process, one `SyncVectorEnv` of `num_workers * envs_per_worker` envs, the settings of
`Matched` in the loop's flat `Args`; it stops at the target, as CleanRL-style scripts do when
asked, or at the budget.

Run alone: ``python bench/peer_cleanrl_dqn.py --budget-steps 50000 --seed 0``.
"""

from __future__ import annotations

import sys
import time

import attrs
import cleanrl_dqn as c
import dqn_settings as d
import ppo_settings as s


def args_of(m: d.Matched, seed: int, budget_steps: int) -> c.Args:
    """The matched settings as the loop's `Args` (epsilon over the same absolute steps)."""
    return c.Args(env_id=m.env, seed=seed, total_timesteps=budget_steps, num_envs=m.num_envs,
                  learning_rate=m.lr, buffer_size=m.capacity, gamma=m.gamma, n_step=m.n_step,
                  target_network_frequency=m.target_update_interval, batch_size=m.batch_size,
                  start_e=m.epsilon_start, end_e=m.epsilon_end,
                  exploration_fraction=m.exploration_fraction * m.exploration_steps / budget_steps,
                  learning_starts=m.learning_starts, training_intensity=m.training_intensity,
                  max_grad_norm=m.max_grad_norm, hidden=m.hidden)


def run(m: d.Matched, seed: int, budget_steps: int) -> s.RunRecord:
    """Train until the target or `budget_steps` env steps; return the record of the run."""
    record = s.RunRecord("cleanrl", seed, budget_steps, attrs.asdict(m),
                         versions=s.versions(["torch", "gymnasium", "numpy"]))
    record.setup_s = s.since_start()
    began = time.perf_counter()
    result = c.run(args_of(m, seed, budget_steps), record.add)
    if result["reached"] is not None:  # the loop stops at the target: its last point
        hit = result["reached"]
        record.add(hit["wall_s"], hit["env_steps"], result["trained_steps"] * m.batch_size, hit["mean100"])
    record.train_s = time.perf_counter() - began
    record.notes.append("learner time not measured (one process: sampling and SGD interleave)")
    return record


def main(argv: list[str]) -> None:
    """Run once and print the summary line (and write JSON with ``--out``)."""
    d.runner_main(argv, __doc__ or "", lambda a, m: run(m, a.seed, a.budget_steps))


if __name__ == "__main__":
    main(sys.argv[1:])
