"""What ``rxrl train`` writes as records arrive: metrics.csv, TensorBoard scalars, the progress line."""

from __future__ import annotations

import csv
import math
import sys
import time
from collections import deque
from pathlib import Path
from typing import IO, TYPE_CHECKING

from rxrl.cli_run import Counters, MetricsRepair, repair_metrics
from rxrl.rl import Metrics

if TYPE_CHECKING:  # imported when the first row is written: it takes a while
    from tensorboardX import SummaryWriter

#: metrics columns written as integers
COUNTS = frozenset({"iteration", "env_steps_sampled", "env_steps_trained", "episodes",
                    "train/env_steps_trained", "train/num_updates"})


class Logger:
    """metrics.csv and TensorBoard scalars, one row per iteration; opened at the first row.

    A run resumed in its own directory (``resumed`` is the checkpoint's counters) continues
    that directory's metrics.csv, first cut back to the checkpoint (rows after it were
    trained again, or were never part of the checkpoint) and rid of a torn last row; its
    TensorBoard writer purges the old events past the checkpoint's step. Otherwise the
    files are new. Nothing is touched until the first row, so a run that fails to start
    leaves the directory as it was.
    """

    def __init__(self, out: Path, resumed: Counters | None = None, stream: IO[str] = sys.stderr) -> None:
        self.out, self.resumed, self.stream = out, resumed, stream
        self.path = out / "metrics.csv"
        self.repair: MetricsRepair | None = None
        self._file: IO[str] | None = None
        self._csv: csv.DictWriter[str] | None = None
        self._tb: SummaryWriter | None = None

    def _open(self, row: dict[str, float]) -> csv.DictWriter[str]:
        from tensorboardX import SummaryWriter

        header = list(row)
        if self.resumed is not None:
            self.repair = repair_metrics(self.path, self.resumed.iteration)
        if self.repair is not None:
            r = self.repair
            if r.dropped or r.torn:
                print(f"resuming: metrics.csv cut back to the checkpoint's {r.kept} rows "
                      f"({r.dropped} later row(s) dropped{', a torn last row removed' if r.torn else ''})",
                      file=self.stream)
            header = r.header
        self._file = self.path.open("a" if self.repair is not None else "w", newline="")
        writer = csv.DictWriter(self._file, fieldnames=header, extrasaction="ignore", restval="")
        if self.repair is None:
            writer.writeheader()
        purge = None if self.resumed is None else self.resumed.env_steps_sampled + 1
        self._tb = SummaryWriter(logdir=str(self.out / "tb"), purge_step=purge)
        return writer

    def write(self, m: Metrics) -> None:
        """Log one record (env steps sampled are TensorBoard's step); flushed at once, so
        that an interrupted run's file ends with a whole row."""
        row = m.as_row()
        if self._csv is None:
            self._csv = self._open(row)
        self._csv.writerow({k: int(v) if k in COUNTS else v for k, v in row.items()})
        assert self._file is not None and self._tb is not None
        self._file.flush()
        for key, value in row.items():
            if key not in ("iteration", "env_steps_sampled") and math.isfinite(value):
                self._tb.add_scalar(key, value, global_step=m.env_steps_sampled)

    def close(self) -> None:
        """Flush and close both outputs (if opened)."""
        if self._file is not None:
            self._file.close()
        if self._tb is not None:
            self._tb.close()


class ProgressLine:
    """The live progress line on stderr: rewritten in place on a terminal, else every few seconds."""

    def __init__(self, label: str, total: int, stream: IO[str] = sys.stderr) -> None:
        self.label, self.total, self.stream = label, total, stream
        self.tty = stream.isatty()
        self.recent: deque[tuple[float, int]] = deque()
        self.last_print = -math.inf

    def update(self, m: Metrics, final: bool = False) -> None:
        """Show ``m``; a rate over the last ~10 s of wall time."""
        now = time.perf_counter()
        self.recent.append((now, m.env_steps_sampled))
        while len(self.recent) > 2 and now - self.recent[0][0] > 10:
            self.recent.popleft()
        if not final and now - self.last_print < (0.2 if self.tty else 5.0):
            return
        self.last_print = now
        (t0, s0), (t1, s1) = self.recent[0], self.recent[-1]
        rate = (s1 - s0) / (t1 - t0) if t1 > t0 else math.nan
        ret = "     n/a" if math.isnan(m.episode_return_mean) else f"{m.episode_return_mean:8.1f}"
        pct = min(100.0, 100.0 * m.env_steps_sampled / self.total)
        mins, secs = divmod(int(m.time_s), 60)
        line = (f"{self.label} | steps {m.env_steps_sampled:>9,}/{self.total:,} ({pct:3.0f}%) | "
                f"return {ret} | {rate:7,.0f} steps/s | {mins:d}:{secs:02d}")
        if self.tty:
            self.stream.write("\r" + line + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


__all__ = ["COUNTS", "Logger", "ProgressLine"]
