"""Learning on MinAtar Breakout (issue 23): rxrl's PPO and DQN against CleanRL-style single-file
loops with the same settings (`minatar_settings`), at the same env steps.

The target: over 3 seeds, rxrl's mean final return (mean of the last 100 episodes at the end)
is at least the peer's, and its wall time (set-up plus training: from the process's start to
the last record) is lower. For every seed and algorithm, rxrl (bench/rxrl_minatar.py, through
`rxrl.train` on Ray, 2 workers) and the peer (bench/cleanrl_minatar.py, one process) run in
subprocesses one after the other, the order alternating by seed, so that load drifts on a
shared machine hit both alike.

    python bench/minatar_breakout.py                       # 1M env steps, seeds 0,1,2, ppo and dqn
    python bench/minatar_breakout.py --steps 20000 --seeds 0 --algos ppo --tag minatar_smoke

Writes ``bench/results/<tag>.json``: the command, the versions, the tables and every record.
(Not ``bench/minatar.py``: a module of that name in bench/, which the runners and their Ray
workers have on ``sys.path``, would shadow the ``minatar`` package.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import minatar_settings as ms
import ppo_settings as s

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
#: system -> runner script
SYSTEMS = {"rxrl": "rxrl_minatar.py", "cleanrl": "cleanrl_minatar.py"}


def run_system(system: str, algo: str, seed: int, steps: int, workdir: Path,
               timeout_s: float, sets: list[str] = []) -> s.RunRecord | None:  # noqa: B006 (read only)
    """One run in a subprocess; its record, or None if it failed."""
    out = workdir / f"{system}-{algo}-{seed}-{time.time_ns()}.json"
    argv = [sys.executable, str(BENCH / SYSTEMS[system]), "--algo", algo, "--budget-steps", str(steps),
            "--seed", str(seed), "--out", str(out), *(f"--set={a}" for a in sets)]
    return s.run_runner(argv, f"{algo} seed {seed}", out, timeout_s)


def _json_safe(x: Any) -> Any:
    """``x`` with every NaN float made None (strict JSON)."""
    if isinstance(x, float) and x != x:
        return None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_json_safe(v) for v in x]
    return x


def _cell(x: float, fmt: str) -> str:
    return "-" if x != x else format(x, fmt)  # NaN: no episode ended


def table(algo: str, runs: dict[str, list[s.RunRecord | None]],
          seeds: list[int]) -> tuple[str, dict[str, Any]]:
    """The Markdown table of one algorithm and the figures behind it."""
    lines = [f"**{algo.upper()}**", "",
             "| seed | rxrl final return | peer final return | rxrl wall s | peer wall s |",
             "|---|---:|---:|---:|---:|"]
    finals: dict[str, list[float]] = {"rxrl": [], "cleanrl": []}
    walls: dict[str, list[float]] = {"rxrl": [], "cleanrl": []}
    for seed, ours, peer in zip(seeds, runs["rxrl"], runs["cleanrl"], strict=True):
        cells = []
        for system, r in (("rxrl", ours), ("cleanrl", peer)):
            final = ms.final_return(r) if r is not None else float("nan")
            seconds = ms.wall_s(r) if r is not None else float("nan")
            finals[system].append(final)
            walls[system].append(seconds)
            cells.append((final, seconds))
        lines.append(f"| {seed} | {_cell(cells[0][0], '.2f')} | {_cell(cells[1][0], '.2f')} | "
                     f"{_cell(cells[0][1], '.1f')} | {_cell(cells[1][1], '.1f')} |")
    complete = all(x == x for xs in (*finals.values(), *walls.values()) for x in xs)
    mean = {k: statistics.fmean(v) if complete else float("nan") for k, v in finals.items()}
    wall = {k: statistics.fmean(v) if complete else float("nan") for k, v in walls.items()}
    ratio = wall["rxrl"] / wall["cleanrl"] if complete else float("nan")
    holds = complete and mean["rxrl"] >= mean["cleanrl"] and wall["rxrl"] < wall["cleanrl"]
    lines.append(f"| mean | {_cell(mean['rxrl'], '.2f')} | {_cell(mean['cleanrl'], '.2f')} | "
                 f"{_cell(wall['rxrl'], '.1f')} | {_cell(wall['cleanrl'], '.1f')} |")
    verdict = "holds" if holds else "does not hold" if complete else "runs failed"
    lines += ["", f"wall time rxrl / peer: {_cell(ratio, '.2f')}; target (rxrl mean final >= peer's and "
                  f"rxrl wall time lower): {verdict}"]
    figures = {"final": finals, "wall_s": walls, "mean_final": mean, "mean_wall_s": wall,
               "wall_ratio": ratio, "target_holds": holds}
    return "\n".join(lines), figures


def main(argv: list[str]) -> None:
    """Run both systems per seed and algorithm, alternating; print and save the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--algos", default="ppo,dqn")
    parser.add_argument("--tag", default="minatar")
    parser.add_argument("--timeout-s", type=float, default=4 * 3600)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a matched setting for both systems (minatar_settings; rxrl-only ones "
                             "such as replay_placement the peer ignores)")
    args = parser.parse_args(argv)
    seeds = [int(x) for x in args.seeds.split(",") if x]
    algos = [x for x in args.algos.split(",") if x]
    if set(algos) - {"ppo", "dqn"}:
        raise SystemExit("--algos: ppo and/or dqn")
    runs: dict[str, dict[str, list[s.RunRecord | None]]] = {a: {x: [] for x in SYSTEMS} for a in algos}
    with tempfile.TemporaryDirectory(prefix="rxrl-minatar-bench-") as tmp:
        for k, seed in enumerate(seeds):
            for algo in algos:
                order = list(SYSTEMS) if k % 2 == 0 else list(reversed(SYSTEMS))
                for system in order:
                    runs[algo][system].append(run_system(system, algo, seed, args.steps, Path(tmp),
                                                         args.timeout_s, args.set))
    tables, figures = [], {}
    for algo in algos:
        text, figures[algo] = table(algo, runs[algo], seeds)
        tables.append(text)
    report = "\n\n".join(tables)
    print()
    print(report)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{args.tag}.json"
    path.write_text(json.dumps({
        "command": "python bench/minatar_breakout.py " + " ".join(argv),
        "date": time.strftime("%Y-%m-%d %H:%M"), "nproc": os.cpu_count(),
        "versions": s.versions(["rxrl", "ray", "torch", "gymnasium", "numpy", "MinAtar"]),
        "table": report, "figures": _json_safe(figures),
        "runs": {a: {x: [None if r is None else r.to_json() for r in rs] for x, rs in by.items()}
                 for a, by in runs.items()},
    }, indent=1))
    print(f"\nwrote {path.relative_to(BENCH.parent)}")


if __name__ == "__main__":
    main(sys.argv[1:])
