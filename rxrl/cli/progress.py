"""``rxrl train``'s live progress line on stderr, fed by a `rxrl.training.Callback`."""

from __future__ import annotations

import math
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

from rxrl.rl.data.metrics import Metrics
from rxrl.training.callbacks import Callback

if TYPE_CHECKING:
    from rxrl.training.trainer import Trainer, TrainResult


class ProgressLine:
    """The live progress line on stderr: rewritten in place on a terminal, else every few seconds."""

    def __init__(self, label: str, total: int, stream: IO[str] = sys.stderr,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.label, self.total, self.stream, self.clock = label, total, stream, clock
        self.tty = stream.isatty()
        self.recent: deque[tuple[float, int]] = deque()
        self.last_print = -math.inf
        self.last_printed = -1  # env steps of the last line printed

    def update(self, m: Metrics, final: bool = False) -> None:
        """Show ``m``; a rate over the last ~10 s of wall time. The final call (the run's last
        record, already seen as an iteration) adds no rate sample and prints nothing new off a
        terminal if that record's line was printed."""
        now = self.clock()
        repeated = bool(self.recent) and self.recent[-1][1] == m.env_steps_sampled
        if not (final and repeated):
            self.recent.append((now, m.env_steps_sampled))
        while len(self.recent) > 2 and now - self.recent[0][0] > 10:
            self.recent.popleft()
        if not final and now - self.last_print < (0.2 if self.tty else 5.0):
            return
        if final and repeated and not self.tty and self.last_printed == m.env_steps_sampled:
            return
        self.last_print, self.last_printed = now, m.env_steps_sampled
        (t0, s0), (t1, s1) = self.recent[0], self.recent[-1]
        rate = f"{(s1 - s0) / (t1 - t0):7,.0f}" if t1 > t0 else "    n/a"
        ret = "     n/a" if math.isnan(m.episode_return_mean) else f"{m.episode_return_mean:8.1f}"
        pct = min(100.0, 100.0 * m.env_steps_sampled / self.total)
        mins, secs = divmod(int(m.time_s), 60)
        line = (f"{self.label} | steps {m.env_steps_sampled:>9,}/{self.total:,} ({pct:3.0f}%) | "
                f"return {ret} | {rate} steps/s | {mins:d}:{secs:02d}")
        if self.tty:
            self.stream.write("\r" + line + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


class Progress(Callback):
    """A `ProgressLine` kept by a trainer's callbacks: every record, and the last one at the end."""

    def __init__(self, stream: IO[str] = sys.stderr) -> None:
        self.stream = stream
        self.line: ProgressLine | None = None

    def on_start(self, trainer: Trainer) -> None:
        """Say where the run writes (its directory is claimed by now), and open the line with
        its label and budget."""
        print(f"{trainer.label}: training for {trainer.total:,} env steps; writing to "
              f"{trainer.run_dir}", file=self.stream, flush=True)
        self.line = ProgressLine(trainer.label, trainer.total, self.stream)

    def on_iteration(self, trainer: Trainer, record: Metrics) -> None:
        """Show ``record`` (at most every 0.2 s on a terminal, 5 s otherwise)."""
        if self.line is not None:
            self.line.update(record)

    def on_end(self, trainer: Trainer, result: TrainResult) -> None:
        """Show the last record."""
        if self.line is not None and trainer.last is not None:
            self.line.update(trainer.last, final=True)


__all__ = ["Progress", "ProgressLine"]
