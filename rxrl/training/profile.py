"""A run's timings on disk (``rxrl train --profile``): ``stats.json`` (per operator and actor,
with the plan annotated) and ``profile.json`` (a Chrome trace / Perfetto timeline), and
``rxrl show RUN --stats``'s reading of them.

A resumed run profiles its own session: its files are ``stats-from-<iteration>.json`` and
``profile-from-<iteration>.json`` (the iteration it resumed from), so no session's files are
overwritten; `read_stats` reads the latest session's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import rxrl
from rxrl.show import render
from rxrl.timings import Timings, annotate
from rxrl.training.setup import write_json

#: the files of a run that was not resumed
STATS, PROFILE = "stats.json", "profile.json"


def names(resumed_from: int) -> tuple[str, str]:
    """The stats and profile file names of a session that resumed from ``resumed_from`` (0:
    a new run)."""
    if resumed_from == 0:
        return STATS, PROFILE
    return f"stats-from-{resumed_from}.json", f"profile-from-{resumed_from}.json"


def write_profile(run_dir: Path, timings: Timings, plan: rxrl.Plan[Any], backend: str,
                  resumed_from: int = 0) -> tuple[Path, Path]:
    """Write ``timings`` of ``plan`` (run on ``backend``) into ``run_dir``; the two paths."""
    timings.stop()
    stats = timings.stats()
    stats["backend"] = backend
    stats["resumed_from"] = resumed_from
    stats["plan"] = render(plan.node, ids=True, annotate=annotate(stats))
    stats_name, profile_name = names(resumed_from)
    write_json(run_dir / stats_name, stats)
    tmp = run_dir / (profile_name + ".tmp")
    tmp.write_text(json.dumps(timings.chrome_trace()))
    tmp.replace(run_dir / profile_name)
    return run_dir / stats_name, run_dir / profile_name


def read_stats(run_dir: str | Path) -> dict[str, Any]:
    """The latest session's ``stats.json`` of a run directory (ValueError, one line, when it
    has none)."""
    run = Path(run_dir)
    found = sorted(run.glob("stats-from-*.json"), key=lambda p: int(p.stem.rpartition("-")[2])
                   if p.stem.rpartition("-")[2].isdigit() else -1)
    path = found[-1] if found else run / STATS
    if not path.is_file():
        raise ValueError(f"{run} has no {STATS}: train it with --profile (rxrl train ... --profile)")
    try:
        doc: dict[str, Any] = json.loads(path.read_text())
        doc["plan"], doc["operators"], doc["actors"], doc["wall_s"]
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path} is not an rxrl stats file: {e}") from None
    doc["path"] = str(path)
    return doc


def format_stats(doc: dict[str, Any]) -> str:
    """``rxrl show RUN --stats``: the annotated plan, the actors, and where the time went."""
    wall, pulling = float(doc["wall_s"]), float(doc.get("pulling_s", 0.0))
    threads: dict[str, float] = dict(doc.get("threads") or {"driver": pulling})
    driver = threads.pop("driver", 0.0)
    head = (f"{doc['path']} ({doc.get('backend', '?')} backend): wall {wall:.2f} s, the driver "
            f"pulling the plan {driver:.2f} s")
    if threads:  # the rx backend's actor threads, Ray's aggregators: each pulls a part too
        others = (", ".join(f"{row} {s:.2f} s" for row, s in sorted(threads.items()))
                  if len(threads) <= 4 else f"{len(threads)} more threads {sum(threads.values()):.2f} s")
        head += f" (and {others})"
    lines = [head, "", doc["plan"]]
    if doc["actors"]:
        lines += ["", "actors (busy: from when it could start a request to when the driver saw "
                      "it done):"]
        width = max(len(name) for name in doc["actors"])
        for name, a in doc["actors"].items():
            lines.append(f"  {name:<{width}}  {a['requests']:>7,} requests  busy {a['busy_s']:8.2f} s"
                         f"  utilization {100 * a['utilization']:5.1f} %")
    if doc.get("spans_dropped"):
        lines.append(f"(the timeline kept the first spans only: {doc['spans_dropped']:,} left out)")
    return "\n".join(lines)


__all__ = ["PROFILE", "STATS", "format_stats", "names", "read_stats", "write_profile"]
