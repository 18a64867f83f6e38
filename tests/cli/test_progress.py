"""``rxrl train``'s progress line (`rxrl.cli.progress.ProgressLine`) off a terminal: a line every
5 s of wall time, the rate over the last ~10 s, and the run's last record once, with its rate."""

from __future__ import annotations

import io
import math

from rxrl.cli import progress
from rxrl.rl.data.metrics import Metrics


def _record(steps: int, time_s: float) -> Metrics:
    return Metrics(iteration=steps // 100, env_steps_sampled=steps, env_steps_trained=steps, episodes=0,
                   episode_return_mean=math.nan, episode_return_min=math.nan, episode_return_max=math.nan,
                   episode_length_mean=math.nan, steps_per_s=0.0, time_s=time_s)


def test_the_last_record_is_not_printed_twice_nor_with_a_zero_rate() -> None:
    clock = [0.0]
    stream = io.StringIO()
    line = progress.ProgressLine("ppo X [ray]", 400, stream, lambda: clock[0])
    for steps, at in ((100, 0.0), (200, 6.0), (300, 12.0), (400, 30.0)):
        clock[0] = at
        line.update(_record(steps, at))
    clock[0] = 31.0
    line.update(_record(400, 30.0), final=True)  # the trainer's end: the last record again
    printed = stream.getvalue().splitlines()
    assert len(printed) == 4, printed
    assert "n/a steps/s" in printed[0]  # one sample: no rate yet
    assert printed[-1].count("400/400") == 1 and "(100%)" in printed[-1]
    assert " 0 steps/s" not in printed[-1] and "n/a steps/s" not in printed[-1], printed[-1]


def test_a_final_record_not_yet_shown_is_printed() -> None:
    clock = [0.0]
    stream = io.StringIO()
    line = progress.ProgressLine("a2c X [rx]", 300, stream, lambda: clock[0])
    for steps, at in ((100, 0.0), (200, 1.0), (300, 2.0)):  # within 5 s: only the first printed
        clock[0] = at
        line.update(_record(steps, at))
    line.update(_record(300, 2.0), final=True)
    printed = stream.getvalue().splitlines()
    assert len(printed) == 2 and "300/300" in printed[-1] and "100 steps/s" in printed[-1], printed
