"""Schedules: linear annealing, DQN's epsilon over a fraction of the run, Ape-X's epsilons."""

from __future__ import annotations

import pytest

from rxrl.rl.schedules import LinearSchedule, apex_epsilon, epsilon_schedule


def test_linear_schedule_interpolates_then_holds_the_end() -> None:
    s = LinearSchedule(1.0, 0.1, 10)
    assert [s(t) for t in (-5, 0, 5, 10, 11, 10**9)] == pytest.approx([1.0, 1.0, 0.55, 0.1, 0.1, 0.1])
    assert LinearSchedule(0.4, 1.0, 0)(0) == 1.0  # zero duration: the end at once
    with pytest.raises(ValueError, match=r"duration must be an integer >= 0"):
        LinearSchedule(1.0, 0.0, -1)


def test_epsilon_schedule_splits_the_decay_between_workers() -> None:
    """Each worker counts its own steps: with 2 workers a 10 % decay of 100k steps is 5k each."""
    assert epsilon_schedule(1.0, 0.05, 0.1, 100_000, num_workers=2) == LinearSchedule(1.0, 0.05, 5_000)
    assert epsilon_schedule(1.0, 0.05, 0.1, 100_000).duration == 10_000
    with pytest.raises(ValueError, match=r"fraction must be in"):
        epsilon_schedule(1.0, 0.05, 1.5, 100)
    with pytest.raises(ValueError, match=r"run_env_steps and num_workers must be >= 1"):
        epsilon_schedule(1.0, 0.05, 0.5, 100, num_workers=0)


def test_apex_epsilon_follows_the_paper_formula() -> None:
    """eps_i = 0.4 ** (1 + 7 i / (N - 1)): 0.4 for the first worker, 0.4**8 for the last."""
    n = 8
    eps = [apex_epsilon(i, n) for i in range(n)]
    assert eps == pytest.approx([0.4 ** (1 + 7 * i / (n - 1)) for i in range(n)])
    assert eps[0] == pytest.approx(0.4) and eps[-1] == pytest.approx(0.4**8)
    assert eps == sorted(eps, reverse=True)
    assert apex_epsilon(0, 1) == 0.4  # one worker: the formula's 0/0 avoided
    assert apex_epsilon(1, 2) == pytest.approx(0.4**8)
    for i, num in ((2, 2), (-1, 3), (0, 0)):
        with pytest.raises(ValueError, match=r"worker_index < num_workers"):
            apex_epsilon(i, num)
