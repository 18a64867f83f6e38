"""A CartPole that records which processes step it: ``--env tests.cli.pid_env:PidCartPole-v0``.

Only rollout workers step envs (the driver and the learner only read the spaces), so the
files named after process ids in ``$RXRL_TEST_PIDS`` are the rollout workers' processes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

#: the environment variable naming the directory the pid files go to
PIDS = "RXRL_TEST_PIDS"


class PidCartPole(CartPoleEnv):
    """CartPole-v1 that touches ``$RXRL_TEST_PIDS/<pid>`` at its first step."""

    recorded = False

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Record this process, then step as CartPole does."""
        if not self.recorded:
            self.recorded = True
            directory = os.environ.get(PIDS)
            if directory:
                Path(directory, str(os.getpid())).touch()
        out: tuple[np.ndarray, float, bool, bool, dict[str, Any]] = super().step(action)  # type: ignore[no-untyped-call]
        return out


gym.register("PidCartPole-v0", entry_point=f"{__name__}:PidCartPole", max_episode_steps=500)
