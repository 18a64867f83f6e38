"""PPO on CartPole-v1: rxrl against its peers, side by side, with the same settings.

Runs rxrl's PPO plan on the Ray backend and each peer (`--peers`) in a subprocess of its own,
one after another, rotating the order from seed to seed (A/B alternation, so that load drifts
on a shared machine hit every system alike), while a thread samples the memory of each
subprocess's whole process tree. Prints, per system, the median over seeds of:

- sampling throughput: env steps sampled / (training wall time - SGD time);
- training throughput: env steps trained / training wall time (end to end);
- wall time and env steps until the mean return of the last 100 episodes first reaches 475
  (wall time from the first sample request; start-up — imports, Ray, actors — is separate);
- start-up included, from the process's start: the time to the first record (first
  training iteration) and the end-to-end time to 475;
- peak memory of the process tree (sum of PSS, and sum of RSS);

and the ratio rxrl / peer of each. Writes ``bench/results/<tag>.json`` (every run, with its
learning curve) and ``bench/results/<tag>.png`` (return against wall time and env steps).

    python bench/ppo_cartpole.py --budget-steps 100000 --budget-s 200 --seeds 0,1,2 \\
        --peers handwritten,rxrl-reference,cleanrl,sb3,rllib,rllib-tuned,rllib-1env

Systems: ``rxrl`` (always), ``handwritten`` (bench/handwritten_ray_ppo.py), ``cleanrl``
(bench/cleanrl_ppo.py), ``sb3``, ``rllib`` (matched settings), ``rllib-tuned`` (RLlib's own
tuned CartPole example), ``rllib-1env`` (matched, one env per env runner), ``rxrl-reference`` /
``rxrl-rx`` (the same plan on the other backends), ``rxrl-actor`` (on Ray with PPO's learner
in an actor process of its own, ``learner_placement="actor"``, rather than on the driver).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import ppo_settings as s
from proctree import TreeMemory

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"

#: system -> the runner script and its extra arguments
SYSTEMS: dict[str, tuple[str, list[str]]] = {
    "rxrl": ("rxrl_ppo.py", ["--backend", "ray"]),
    "rxrl-actor": ("rxrl_ppo.py", ["--backend", "ray", "--learner-placement", "actor"]),
    "rxrl-rx": ("rxrl_ppo.py", ["--backend", "rx"]),
    "rxrl-reference": ("rxrl_ppo.py", ["--backend", "reference"]),
    "handwritten": ("handwritten_ray_ppo.py", []),
    "cleanrl": ("cleanrl_ppo.py", []),
    "sb3": ("peer_sb3.py", []),
    "rllib": ("peer_rllib.py", []),
    "rllib-tuned": ("peer_rllib.py", ["--tuned"]),
    "rllib-1env": ("peer_rllib.py", ["--one-env"]),
}


def run_system(system: str, seed: int, budget_steps: int, budget_s: float | None, sets: Sequence[str],
               timeout_s: float, workdir: Path) -> s.RunRecord:
    """Run one system once in a subprocess, watching its process tree's memory."""
    script, extra = SYSTEMS[system]
    out = workdir / f"{system}-{seed}.json"
    argv = [sys.executable, str(BENCH / script), "--budget-steps", str(budget_steps), "--seed", str(seed),
            "--out", str(out), *extra, *(f"--set={a}" for a in sets),
            *([] if budget_s is None else ["--budget-s", str(budget_s)])]
    return run_runner(system, seed, budget_steps, argv, out, timeout_s, workdir)


def run_runner(system: str, seed: int, budget_steps: int, argv: list[str], out: Path, timeout_s: float,
               workdir: Path, summary_prefix: str | None = None) -> s.RunRecord:
    """Run a runner's command line ``argv`` (which writes its `RunRecord` to ``out``) in a
    subprocess, watching its process tree's memory; print its summary line (the last line
    starting with ``summary_prefix``, default ``"<system>:"``); the record, named ``system``."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BENCH), env.get("PYTHONPATH")) if p)
    log = workdir / f"{system}-{seed}.log"
    load_before = os.getloadavg()[0]
    with log.open("w") as log_file:
        proc = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT, env=env, cwd=BENCH.parent)
        memory = TreeMemory(proc.pid)
        memory.start()
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        finally:
            memory.stop()
    text = log.read_text()
    prefix = summary_prefix or f"{system}:"
    summary = next((line for line in reversed(text.splitlines()) if line.startswith(prefix)), "")
    print(f"  [{time.strftime('%H:%M:%S')}] {system} seed {seed}: "
          f"{summary or f'FAILED rc={rc}, see {log}'}", flush=True)
    if rc != 0 or not out.exists():
        record = s.RunRecord(system, seed, budget_steps, {}, notes=[f"failed (rc={rc}): {text[-2000:]}"])
    else:
        record = s.RunRecord.from_json(json.loads(out.read_text()))
        record.system = system
    # other people's work on a shared machine shows up here: keep it next to the figures
    record.notes.append(f"1-min load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")
    record.peak_rss_mb = memory.peak_rss / 2**20
    record.peak_pss_mb = memory.peak_pss / 2**20
    record.processes = memory.max_processes
    return record


# --------------------------------------------------------------------------------- figures


@attrs.frozen
class Figures:
    """One system's figures: medians over its seeds (None where no seed has the figure)."""

    system: str
    runs: int
    sampled_per_s: float | None
    trained_per_s: float | None
    time_to_target_s: float | None  # median over seeds; a seed that never got there counts as +inf
    steps_to_target: float | None
    reached: int  # seeds that reached the target
    not_before_s: float | None  # when no seed reached it: the shortest training time that did not
    setup_s: float | None
    first_record_s: float | None  # from the process's start to the end of the first iteration
    end_to_end_s: float | None  # from the process's start to 475 (a seed that never got there: +inf)
    peak_pss_mb: float | None
    peak_rss_mb: float | None
    processes: int


def _median(values: list[float]) -> float | None:
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return None
    m = statistics.median(finite)
    return None if math.isinf(m) else m


def figures(system: str, records: list[s.RunRecord]) -> Figures:
    """Median figures of one system's successful runs."""
    ok = [r for r in records if r.curve]
    hits = [r.first_at() for r in ok]

    def per_run(f: Callable[[s.RunRecord], float]) -> float | None:
        return _median([f(r) for r in ok])

    return Figures(
        system=system,
        runs=len(ok),
        sampled_per_s=per_run(lambda r: r.env_steps_sampled / max(r.train_s - r.learner_s, 1e-9)),
        trained_per_s=per_run(lambda r: r.env_steps_trained / r.train_s),
        time_to_target_s=_median([math.inf if h is None else h.time_s for h in hits]),
        steps_to_target=_median([math.inf if h is None else float(h.env_steps_sampled) for h in hits]),
        reached=sum(h is not None for h in hits),
        not_before_s=min((r.train_s for r in ok), default=None) if ok and not any(hits) else None,
        setup_s=per_run(lambda r: r.setup_s),
        first_record_s=per_run(lambda r: r.setup_s + r.curve[0].time_s),
        end_to_end_s=_median([math.inf if h is None else r.setup_s + h.time_s
                              for r, h in zip(ok, hits, strict=True)]),
        peak_pss_mb=per_run(lambda r: r.peak_pss_mb),
        peak_rss_mb=per_run(lambda r: r.peak_rss_mb),
        processes=max((r.processes for r in ok), default=0),
    )


#: the figures of start-up included (issue 14, item 10): in the tables only when asked for
STARTUP_FIELDS = ("first_record_s", "end_to_end_s")
#: the figures a ratio is printed for, and whether higher is better
RATIO_FIELDS = {"sampled_per_s": True, "trained_per_s": True, "time_to_target_s": False,
                "steps_to_target": False, "first_record_s": False, "end_to_end_s": False,
                "peak_pss_mb": False}


def ratios(ours: Figures, peer: Figures) -> dict[str, float | None]:
    """rxrl / peer for each figure in `RATIO_FIELDS` (None where either side lacks it).

    Where the peer never reached the target, `time_to_target_s_below` bounds the ratio:
    rxrl's time over the peer's training time without reaching it.
    """
    out: dict[str, float | None] = {}
    for name in RATIO_FIELDS:
        a, b = getattr(ours, name), getattr(peer, name)
        out[name] = a / b if a is not None and b else None
    bound = peer.not_before_s
    out["time_to_target_s_below"] = (ours.time_to_target_s / bound
                                     if ours.time_to_target_s is not None and bound else None)
    return out


def _fmt(x: float | None, spec: str = ",.0f") -> str:
    return "-" if x is None else format(x, spec)


def _time(f: Figures) -> str:
    if f.time_to_target_s is None and f.not_before_s is not None:
        return f"> {f.not_before_s:.0f} (not reached)"
    return _fmt(f.time_to_target_s, ".1f")


def table(all_figures: list[Figures], target: float, startup: bool = False) -> str:
    """A Markdown table of the figures, then one of the ratios rxrl / peer (with ``startup``,
    also the time to the first record and the end-to-end time, start-up included)."""
    extra = ["first record (s)", f"end to end to {target:.0f} (s)"] if startup else []
    rows = ["| system | runs | sampled steps/s | trained steps/s | time to "
            f"{target:.0f} (s) | steps to {target:.0f} | reached | setup (s) | "
            + "".join(f"{e} | " for e in extra) + "peak PSS (MB) | peak RSS (MB) | processes |",
            "|---|" + "---:|" * (10 + len(extra))]
    for f in all_figures:
        cells = [f.system, str(f.runs), _fmt(f.sampled_per_s), _fmt(f.trained_per_s), _time(f),
                 _fmt(f.steps_to_target), f"{f.reached}/{f.runs}", _fmt(f.setup_s, ".1f")]
        if startup:
            cells += [_fmt(f.first_record_s, ".1f"), _fmt(f.end_to_end_s, ".1f")]
        cells += [_fmt(f.peak_pss_mb), _fmt(f.peak_rss_mb), str(f.processes)]
        rows.append("| " + " | ".join(cells) + " |")
    ours = next((f for f in all_figures if f.system == "rxrl"), None)
    if ours is None:
        return "\n".join(rows)
    fields = [k for k in RATIO_FIELDS if startup or k not in STARTUP_FIELDS]
    rows += ["", "| rxrl / peer | sampled steps/s (higher: rxrl ahead) | trained steps/s (higher) | "
             f"time to {target:.0f} (lower: rxrl ahead) | steps to {target:.0f} (lower) | "
             + "".join(f"{e.removesuffix(' (s)')} (lower) | " for e in extra) + "peak PSS (lower) |",
             "|---|" + "---:|" * len(fields)]
    for f in all_figures:
        if f.system != "rxrl":
            r = ratios(ours, f)
            ratio_cells = [_fmt(r[k], ".2f") for k in fields]
            if r["time_to_target_s"] is None and r["time_to_target_s_below"] is not None:
                ratio_cells[2] = f"< {r['time_to_target_s_below']:.2f}"
            rows.append(f"| {f.system} | " + " | ".join(ratio_cells) + " |")
    return "\n".join(rows)


# ------------------------------------------------------------------------------------ plot


def plot(records: list[s.RunRecord], systems: list[str], path: Path, target: float,
         title: str = "PPO CartPole-v1, matched settings (each line one seed)") -> None:
    """Mean return (last 100 episodes) against wall time and env steps, every run overlaid."""
    matplotlib: Any = s.optional("matplotlib")
    matplotlib.use("Agg")
    plt: Any = s.optional("matplotlib.pyplot")
    fig, (by_time, by_steps) = plt.subplots(1, 2, figsize=(10, 3.8), dpi=80)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, system in enumerate(systems):
        color = colors[i % len(colors)]
        for k, r in enumerate(rec for rec in records if rec.system == system and rec.curve):
            label = system if k == 0 else None
            ys = [p.return_mean for p in r.curve]
            by_time.plot([p.time_s for p in r.curve], ys, color=color, lw=1, alpha=0.8, label=label)
            by_steps.plot([p.env_steps_sampled for p in r.curve], ys, color=color, lw=1, alpha=0.8)
    for ax, xlabel in ((by_time, "wall time since first sample (s, log scale)"), (by_steps, "env steps")):
        ax.axhline(target, color="grey", lw=0.8, ls="--")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("mean return, last 100 episodes")
        ax.grid(alpha=0.3)
    by_time.set_xscale("log")
    by_time.legend(fontsize=8, loc="upper left")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# ------------------------------------------------------------------------------------ main


def machine() -> dict[str, Any]:
    """What this was measured on."""
    psutil: Any = s.optional("psutil")
    return {"nproc": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "platform": platform.platform(), "processor": platform.processor() or platform.machine()}


def _commands(results: dict[str, Any]) -> list[str]:
    return list(results.get("commands") or [results["command"]])


def main(argv: list[str]) -> None:
    """Parse the command line, run every system for every seed, report and write results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-steps", type=int, default=150_000, help="env steps per run")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="also stop each run after this much training wall time (s)")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds, e.g. 0,1,2")
    parser.add_argument("--peers", default="rllib,sb3,handwritten,cleanrl",
                        help=f"comma-separated, from {sorted(set(SYSTEMS) - {'rxrl'})}")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="override a matched setting for every system, e.g. --set lr=1e-3")
    parser.add_argument("--tag", default="ppo_cartpole", help="results go to bench/results/<tag>.{json,png}")
    parser.add_argument("--timeout-s", type=float, default=1500, help="per run")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--no-run", action="store_true",
                        help="run nothing: report (and plot) the --merge'd results only")
    parser.add_argument("--merge", type=Path, action="append", default=[],
                        help="also count the runs of an earlier results JSON (same settings), e.g. to "
                             "add seeds or redo a peer's failed runs; failed runs there are dropped")
    args = parser.parse_args(argv)
    peers = [p for p in args.peers.split(",") if p and p != "rxrl"]
    unknown = sorted(set(peers) - set(SYSTEMS))
    if unknown:
        raise SystemExit(f"unknown peer(s) {unknown}; choose from {sorted(set(SYSTEMS) - {'rxrl'})}")
    systems = ["rxrl", *peers]
    seeds = [int(x) for x in args.seeds.split(",")]
    matched = s.override(s.Matched(), args.set)
    if not args.no_run:
        print(f"PPO {matched.env}: {systems}, seeds {seeds}, {args.budget_steps} env steps each; "
              f"settings {attrs.asdict(matched)}", flush=True)
    records: list[s.RunRecord] = []
    with tempfile.TemporaryDirectory(prefix="rxrl-bench-") as tmp:
        for k, seed in enumerate([] if args.no_run else seeds):
            order = systems[k % len(systems):] + systems[:k % len(systems)]  # rotate: A/B alternation
            records += [run_system(system, seed, args.budget_steps, args.budget_s, args.set, args.timeout_s,
                                   Path(tmp))
                        for system in order]
    for path in args.merge:
        earlier = json.loads(path.read_text())
        if earlier["settings"] != json.loads(json.dumps(attrs.asdict(matched))):
            raise SystemExit(f"--merge {path}: its settings differ from this run's")
        merged = [s.RunRecord.from_json(r) for r in earlier["runs"]]
        records += [r for r in merged if r.curve]
        systems = list(dict.fromkeys([*systems, *(r.system for r in merged if r.curve)]))
    all_figures = [figures(system, [r for r in records if r.system == system]) for system in systems]
    report = table(all_figures, s.TARGET_RETURN, startup=True)
    print()
    print(report, flush=True)
    RESULTS.mkdir(exist_ok=True)
    ours = all_figures[0]
    result = {
        # how each run was made: the commands of the merged results, then this one
        "commands": [*(c for path in args.merge for c in _commands(json.loads(path.read_text()))),
                     *([] if args.no_run else ["python bench/ppo_cartpole.py " + " ".join(argv)])],
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": machine(),
        "versions": s.versions(["rxrl", "ray", "torch", "gymnasium", "numpy", "stable_baselines3",
                                "reactivex", "matplotlib", "psutil"]),
        "settings": attrs.asdict(matched),
        "target_return": s.TARGET_RETURN,
        "figures": [attrs.asdict(f) for f in all_figures],
        "ratios_rxrl_over_peer": {f.system: ratios(ours, f) for f in all_figures[1:]},
        "table": report,
        "runs": [r.to_json() for r in records],
    }
    json_path = RESULTS / f"{args.tag}.json"
    json_path.write_text(json.dumps(result, separators=(",", ":")))
    print(f"\nwrote {json_path.relative_to(BENCH.parent)}", end="")
    if not args.no_plot:
        png = RESULTS / f"{args.tag}.png"
        plot(records, systems, png, s.TARGET_RETURN)
        print(f" and {png.relative_to(BENCH.parent)}", end="")
    print()


if __name__ == "__main__":
    main(sys.argv[1:])
