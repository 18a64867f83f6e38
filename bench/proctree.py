"""Peak memory of a process and all its descendants (Ray's GCS, raylet and workers included).

A `TreeMemory` thread samples the tree every `interval_s`: the sum of RSS (what `ps`
shows; counts shared pages once per process, so it overstates a Ray cluster whose workers
share libraries and the object store) and, less often, the sum of PSS (shared pages split
between the processes that map them: the honest total).
"""

from __future__ import annotations

import threading
from typing import Any

import ppo_settings as s


class TreeMemory(threading.Thread):
    """Samples the memory of process `pid` and its descendants until `stop()`."""

    def __init__(self, pid: int, interval_s: float = 0.25, pss_every: int = 4) -> None:
        super().__init__(daemon=True)
        self.psutil: Any = s.optional("psutil")
        self.root: Any = self.psutil.Process(pid)
        self.interval_s, self.pss_every = interval_s, pss_every
        self.peak_rss = self.peak_pss = 0
        self.max_processes = 0
        self._stopped = threading.Event()

    def run(self) -> None:
        tick = 0
        while not self._stopped.is_set():
            self.sample(pss=tick % self.pss_every == 0)
            tick += 1
            self._stopped.wait(self.interval_s)

    def sample(self, pss: bool) -> None:
        """One sample of the tree (processes that vanish meanwhile are skipped)."""
        errors = (self.psutil.NoSuchProcess, self.psutil.AccessDenied, self.psutil.ZombieProcess)
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except errors:
            return
        rss = pss_total = 0
        for proc in procs:
            try:
                rss += proc.memory_info().rss
                if pss:
                    pss_total += proc.memory_full_info().pss
            except errors:
                continue
        self.peak_rss = max(self.peak_rss, rss)
        self.peak_pss = max(self.peak_pss, pss_total)
        self.max_processes = max(self.max_processes, len(procs))

    def stop(self) -> None:
        """Stop sampling and wait for the thread."""
        self._stopped.set()
        self.join()
