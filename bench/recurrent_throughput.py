"""What a recurrent core costs rxrl's PPO: trained env steps per second, LSTM against MLP, on CartPole-v1.

    python bench/recurrent_throughput.py --pairs 3 --steps 100000 [--recurrent lstm|gru] [--out TAG]

Runs ``--pairs`` pairs of rxrl PPO runs (``rxrl.train("ppo", env="CartPole-v1", ...)``, PPO's
defaults, the default Ray backend, 2 workers), one with ``policy.recurrent=lstm`` (or ``gru``)
and one with ``policy.recurrent=none``, both with the same seed (the pair's index), each in a
subprocess of its own (bench/recurrent.py's runner), the order within a pair alternated
from pair to pair. A run's steady throughput is the env steps trained per second of training
wall time after its first ``--skip`` iterations (start-up, the first weights broadcast, the
first epochs' warm-up excluded): ``(trained[-1] - trained[skip]) / (time[-1] - time[skip])``
over the run's records. Prints each run, the median steady trained steps/s of each policy, the
ratio of the medians recurrent / MLP and the median of the per-pair ratios (the two runs of a
pair measured side by side); writes ``bench/results/recurrent_throughput_<recurrent>_<out>.json``.

The recurrent policy trains on whole fragments as sequences (``policy.sequence_length`` None:
64 steps); ``--set KEY=VALUE`` changes a setting for both (e.g. ``policy.sequence_length=16``).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ppo_settings as s
from ppo_cartpole import machine
from recurrent import Run, fmt, median, rxrl_settings, spawn, write_result

ENV = "CartPole-v1"


def steady_rate(run: Run, skip: int) -> float:
    """Env steps trained per second after the first ``skip`` records (NaN with too few)."""
    curve = run.record.curve
    if len(curve) < skip + 2:
        return float("nan")
    first, last = curve[skip], curve[-1]
    return (last.env_steps_trained - first.env_steps_trained) / (last.time_s - first.time_s)


def main(argv: list[str]) -> None:
    """Run the pairs, alternating the order; print and write the results."""
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--pairs", type=int, default=3, help="pairs of runs (recurrent, MLP)")
    p.add_argument("--steps", type=int, default=100_000, help="env steps per run")
    p.add_argument("--recurrent", default="lstm", choices=["lstm", "gru"])
    p.add_argument("--skip", type=int, default=5, help="records left out at the start of each run")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="an rxrl setting (rxrl train's --set path) for both policies")
    p.add_argument("--out", default="run",
                   help="results go to bench/results/recurrent_throughput_<recurrent>_<out>.json")
    p.add_argument("--timeout-s", type=float, default=1800, help="per run")
    args = p.parse_args(argv)
    core, mlp = args.recurrent, "mlp"
    settings = {core: rxrl_settings(ENV, args.set, {"policy.recurrent": core}),
                mlp: rxrl_settings(ENV, args.set, {"policy.recurrent": "none"})}
    print(f"PPO {ENV}, {core} against mlp: {args.pairs} pairs of {args.steps:,} env steps; settings over "
          f"PPO's defaults {settings}", flush=True)
    runs: dict[str, list[Run]] = {core: [], mlp: []}
    with tempfile.TemporaryDirectory(prefix="rxrl-recurrent-throughput-") as tmp:
        for pair in range(args.pairs):
            order = [core, mlp] if pair % 2 == 0 else [mlp, core]  # A/B alternation
            for name in order:
                runs[name].append(spawn(name, "rxrl", ENV, pair, args.steps, settings[name], Path(tmp),
                                        args.timeout_s))
    rates = {name: [steady_rate(r, args.skip) for r in rs] for name, rs in runs.items()}
    pair_ratios = [a / b for a, b in zip(rates[core], rates[mlp], strict=True)
                   if not math.isnan(a) and not math.isnan(b)]
    medians = {name: median(rs) for name, rs in rates.items()}
    ours, theirs = medians[core], medians[mlp]
    ratio = ours / theirs if ours is not None and theirs else None
    ratio_of_pairs = statistics.median(pair_ratios) if pair_ratios else None
    rows = ["| pair | policy | steady trained steps/s | trained steps/s, whole run | training (s) | "
            "end to end (s) | final return |", "|---:|---|---:|---:|---:|---:|---:|"]
    for pair in range(args.pairs):
        for name in (core, mlp):
            r = runs[name][pair]
            rec = r.record
            whole = rec.env_steps_trained / rec.train_s if rec.train_s else None
            rows.append(f"| {pair} | {name} | {fmt(rates[name][pair])} | {fmt(whole)} | "
                        f"{fmt(rec.train_s, '.1f')} | {r.process_s:.1f} | {fmt(r.final_return, '.1f')} |")
    rows += ["", f"| median steady trained steps/s: {core} | mlp | {core} / mlp (ratio of medians) | "
                 f"{core} / mlp (median of the pairs' ratios) |", "|---:|---:|---:|---:|",
             f"| {fmt(medians[core])} | {fmt(medians[mlp])} | {fmt(ratio, '.2f')} | "
             f"{fmt(ratio_of_pairs, '.2f')} |"]
    report = "\n".join(rows)
    print()
    print(report, flush=True)
    result: dict[str, Any] = {
        "command": "python bench/recurrent_throughput.py " + " ".join(argv),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": machine(),
        "versions": s.versions(["rxrl", "ray", "torch", "gymnasium", "numpy"]),
        "env": ENV, "steps": args.steps, "pairs": args.pairs, "skip": args.skip, "settings": settings,
        "steady_trained_per_s": rates, "median_steady_trained_per_s": medians,
        "ratio_of_medians": ratio, "pair_ratios": pair_ratios, "median_pair_ratio": ratio_of_pairs,
        "table": report,
        "runs": {name: [r.to_json() for r in rs] for name, rs in runs.items()},
    }
    write_result(f"recurrent_throughput_{core}_{args.out}", result)


if __name__ == "__main__":
    main(sys.argv[1:])
