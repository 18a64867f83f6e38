"""IMPALA throughput side by side (issue 12): rxrl's IMPALA plan against rxrl's PPO, IMPALA
hand-written on raw Ray, and RLlib 2.60's IMPALA and APPO, with matched settings.

Every system runs in a subprocess of its own for ``--budget-steps`` env steps, one after
another; each repetition rotates the order (A/B alternation, so load drifts on a shared
machine hit every system alike). Per system: the median over repetitions of env steps sampled
and trained per second of training wall time (end to end: from the first sample request, the
learner included; start-up excluded). Ratios rxrl / peer are medians of the per-repetition
ratios (each pair measured back to back). The staleness of every update of rxrl's runs (learner
updates between a fragment's weights and the update that trained it) is tabulated too.

    python bench/impala_throughput.py --repeats 5 --budget-steps 60000 --rllib-repeats 2

Systems: ``rxrl-impala`` (bench/rxrl_impala.py), ``handwritten-impala``
(bench/handwritten_ray_impala.py), ``rxrl-ppo`` (bench/rxrl_ppo.py: PPO's defaults, the same 2
workers), ``rllib-impala`` and ``rllib-appo`` (bench/peer_rllib_impala.py), ``rxrl-appo``.
Writes ``bench/results/<tag>.json``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ppo_settings as s

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"

#: system -> (runner script, its arguments)
SYSTEMS: dict[str, tuple[str, list[str]]] = {
    "rxrl-impala": ("rxrl_impala.py", []),
    "handwritten-impala": ("handwritten_ray_impala.py", []),
    "rxrl-ppo": ("rxrl_ppo.py", ["--backend", "ray"]),
    "rxrl-appo": ("rxrl_impala.py", ["--algo", "appo"]),
    "rllib-impala": ("peer_rllib_impala.py", []),
    "rllib-appo": ("peer_rllib_impala.py", ["--algo", "appo"]),
}


def run_system(system: str, seed: int, budget: int, workdir: Path, timeout_s: float) -> s.RunRecord | None:
    """One run of ``system`` in a subprocess; its record, or None if it failed."""
    script, extra = SYSTEMS[system]
    out = workdir / f"{system}-{seed}-{time.time_ns()}.json"
    argv = [sys.executable, str(BENCH / script), "--budget-steps", str(budget), "--seed", str(seed),
            "--out", str(out), *extra]
    return s.run_runner(argv, f"{system} seed {seed}", out, timeout_s)


def rates(r: s.RunRecord) -> tuple[float, float]:
    """Env steps sampled and trained per second of training wall time."""
    return r.env_steps_sampled / r.train_s, r.env_steps_trained / r.train_s


def staleness_counts(records: list[s.RunRecord]) -> dict[int, int]:
    """Per-fragment staleness of rxrl's updates (two fragments per batch: their min and max)."""
    counts: collections.Counter[int] = collections.Counter()
    for r in records:
        for note in r.notes:
            if note.startswith("staleness "):
                for low, high, _ in json.loads(note[len("staleness "):]):
                    counts[low] += 1
                    counts[high] += 1
    return dict(sorted(counts.items()))


def report(runs: dict[str, list[s.RunRecord | None]], systems: list[str]) -> tuple[str, dict[str, Any]]:
    """The Markdown tables and the figures behind them."""
    lines = ["| system | runs | sampled steps/s | trained steps/s |", "|---|---:|---:|---:|"]
    figures: dict[str, Any] = {}
    for system in systems:
        ok = [r for r in runs[system] if r is not None and r.train_s > 0]
        sampled = [rates(r)[0] for r in ok]
        trained = [rates(r)[1] for r in ok]
        med_s = statistics.median(sampled) if sampled else None
        med_t = statistics.median(trained) if trained and any(trained) else None
        figures[system] = {"runs": len(ok), "sampled_per_s": med_s, "trained_per_s": med_t,
                           "sampled_all": sampled, "trained_all": trained}
        lines.append(f"| {system} | {len(ok)} | {'-' if med_s is None else f'{med_s:,.0f}'} | "
                     f"{'-' if med_t is None else f'{med_t:,.0f}'} |")
    lines += ["", "| rxrl-impala / peer (paired by repetition, median) | sampled steps/s | trained steps/s |",
              "|---|---:|---:|"]
    ratios: dict[str, Any] = {}
    for peer in systems[1:]:
        pairs = [(a, b) for a, b in zip(runs["rxrl-impala"], runs[peer], strict=False)
                 if a is not None and b is not None]
        if not pairs:
            continue
        rs = [rates(a)[0] / rates(b)[0] for a, b in pairs]
        rt = [rates(a)[1] / rates(b)[1] for a, b in pairs if rates(b)[1] > 0]
        ratios[peer] = {"sampled": statistics.median(rs), "trained": statistics.median(rt) if rt else None,
                        "sampled_all": rs, "trained_all": rt}
        trained_cell = "-" if not rt else f"{statistics.median(rt):.2f} ({', '.join(f'{x:.2f}' for x in rt)})"
        lines.append(f"| {peer} | {statistics.median(rs):.2f} ({', '.join(f'{x:.2f}' for x in rs)}) | "
                     f"{trained_cell} |")
    counts = staleness_counts([r for r in runs["rxrl-impala"] if r is not None])
    total = sum(counts.values())
    if total:
        lines += ["", "| staleness (updates) | " + " | ".join(str(k) for k in counts) + " |",
                  "|---|" + "---:|" * len(counts),
                  "| fragments | " + " | ".join(f"{v} ({100 * v / total:.0f} %)"
                                                for v in counts.values()) + " |"]
    figures["ratios"] = ratios
    figures["staleness_counts"] = counts
    return "\n".join(lines), figures


def main(argv: list[str]) -> None:
    """Run every system ``--repeats`` times, rotating the order; print and save the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-steps", type=int, default=60_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rllib-repeats", type=int, default=2,
                        help="repetitions that include the RLlib systems (the first ones)")
    parser.add_argument("--systems",
                        default="rxrl-impala,handwritten-impala,rxrl-ppo,rllib-impala,rllib-appo")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tag", default="impala_throughput")
    parser.add_argument("--timeout-s", type=float, default=600)
    args = parser.parse_args(argv)
    systems = [x for x in args.systems.split(",") if x]
    if systems[0] != "rxrl-impala" or set(systems) - set(SYSTEMS):
        raise SystemExit(f"--systems: rxrl-impala first, then any of {sorted(SYSTEMS)}")
    runs: dict[str, list[s.RunRecord | None]] = {x: [] for x in systems}
    with tempfile.TemporaryDirectory(prefix="rxrl-impala-bench-") as tmp:
        for k in range(args.repeats):
            here = [x for x in systems if not x.startswith("rllib") or k < args.rllib_repeats]
            order = here[k % len(here):] + here[:k % len(here)]
            print(f"repetition {k + 1}/{args.repeats}: {order}", flush=True)
            for system in order:
                runs[system].append(run_system(system, args.seed, args.budget_steps, Path(tmp),
                                               args.timeout_s))
    table, figures = report(runs, systems)
    print()
    print(table)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{args.tag}.json"
    path.write_text(json.dumps({
        "command": "python bench/impala_throughput.py " + " ".join(argv),
        "date": time.strftime("%Y-%m-%d %H:%M"), "nproc": os.cpu_count(),
        "versions": s.versions(["rxrl", "ray", "torch", "gymnasium", "numpy"]),
        "table": table, "figures": figures,
        "runs": {x: [None if r is None else r.to_json() for r in rs] for x, rs in runs.items()},
    }))
    print(f"\nwrote {path.relative_to(BENCH.parent)}")


if __name__ == "__main__":
    main(sys.argv[1:])
