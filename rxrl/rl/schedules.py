"""Schedules of a number over time: linear annealing (epsilon, PER's beta) and Ape-X's epsilons.

>>> schedule = epsilon_schedule(start=1.0, end=0.05, fraction=0.1, run_env_steps=100_000, num_workers=2)
>>> schedule
LinearSchedule(start=1.0, end=0.05, duration=5000)
>>> [round(schedule(t), 3) for t in (0, 2500, 5000, 10**9)]
[1.0, 0.525, 0.05, 0.05]
>>> [round(apex_epsilon(i, 3), 4) for i in range(3)]
[0.4, 0.0162, 0.0007]
"""

from __future__ import annotations

import attrs


def _duration(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"LinearSchedule.{attribute.name} must be an integer >= 0, got {value!r}")


@attrs.frozen
class LinearSchedule:
    """`start` at t = 0, moving linearly to `end` at t = `duration`, then `end` for ever.

    `t` is whatever the owner counts: a worker's env steps for epsilon, a buffer's
    `sample` calls for beta. `duration=0` is `end` from the start; `start == end` is a
    constant. Picklable and frozen, so it travels inside configs and actor arguments.
    """

    start: float
    end: float
    duration: int = attrs.field(validator=_duration)

    def __call__(self, t: int) -> float:
        """The value at time `t` (t < 0 counts as 0)."""
        if t >= self.duration:
            return self.end
        frac = max(t, 0) / self.duration
        return self.start + frac * (self.end - self.start)


def epsilon_schedule(
    start: float, end: float, fraction: float, run_env_steps: int, num_workers: int = 1
) -> LinearSchedule:
    """A worker's epsilon: `start` → `end` over `fraction` of a run of `run_env_steps`.

    Each worker counts only its own env steps, so with `num_workers` sampling equally the
    decay lasts `fraction * run_env_steps / num_workers` steps of each worker: the whole
    run reaches `end` after `fraction` of its steps, as DQN's usual schedule says.
    """
    for name, value in (("start", start), ("end", end), ("fraction", fraction)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"epsilon_schedule: {name} must be in [0, 1], got {value!r}")
    if run_env_steps < 1 or num_workers < 1:
        raise ValueError(
            f"epsilon_schedule: run_env_steps and num_workers must be >= 1, "
            f"got {run_env_steps} and {num_workers}"
        )
    return LinearSchedule(start, end, round(fraction * run_env_steps / num_workers))


def apex_epsilon(worker_index: int, num_workers: int, base: float = 0.4, exponent: float = 7.0) -> float:
    """Ape-X's fixed epsilon of worker `i` of `N`: `base ** (1 + exponent * i / (N - 1))`.

    Worker 0 explores most (0.4), worker N-1 least (0.4**8 ~ 0.00066). A single worker gets
    `base` (the formula's i / (N - 1) is undefined there; RLlib does the same).
    """
    if num_workers < 1 or not 0 <= worker_index < num_workers:
        raise ValueError(
            f"apex_epsilon: need 0 <= worker_index < num_workers, got worker_index={worker_index}, "
            f"num_workers={num_workers}"
        )
    if num_workers == 1:
        return base
    return float(base ** (1.0 + exponent * worker_index / (num_workers - 1)))


__all__ = ["LinearSchedule", "apex_epsilon", "epsilon_schedule"]
