"""DQN on CartPole-v1: rxrl against its peers, side by side, with the same settings.

Shaped like bench/ppo_cartpole.py (whose figures, table and memory sampling it reuses): rxrl's
DQN plan on the Ray backend and each peer (`--peers`) run in a subprocess of their own, one
after another, rotating the order from seed to seed (A/B alternation on a shared machine),
each until the mean return of the last 100 episodes reaches 475 or the budget is spent.
Prints, per system, medians over seeds of: env steps sampled per second of training wall time
less SGD time (where the system reports it), transitions trained per second, wall time and
env steps to 475 (wall time from the first sample; start-up is separate), peak memory of the
process tree, and the ratios rxrl / peer. Writes ``bench/results/<tag>.json`` and ``.png``.

    python bench/dqn_cartpole.py --seeds 0,1,2 --peers sb3,cleanrl,rxrl-reference[,rllib]

Systems: ``rxrl`` (always; `rxrl.algos.qlearning.dqn` on Ray), ``rxrl-reference`` (the same plan on
the reference backend, one process), ``rxrl-lean`` (on Ray with its learner and replay in the
driver's process: DQN's default on CartPole since 2026-12-07), ``rxrl-replay-driver`` (the replay
alone there), ``rxrl-learner-process`` (the learner in a process, the replay where DQN puts it),
``rxrl-rx`` (the rx backend: one
process, a thread per actor), ``sb3`` (bench/peer_sb3_dqn.py), ``cleanrl``
(bench/peer_cleanrl_dqn.py), ``rllib`` (bench/peer_rllib_dqn.py; needs RLlib's dependencies).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import attrs
import dqn_settings as d
import ppo_cartpole as pc
import ppo_settings as s

BENCH = Path(__file__).resolve().parent

#: system -> the runner script and its extra arguments
SYSTEMS: dict[str, tuple[str, list[str]]] = {
    "rxrl": ("rxrl_dqn.py", ["--backend", "ray"]),
    "rxrl-reference": ("rxrl_dqn.py", ["--backend", "reference"]),
    "rxrl-lean": ("rxrl_dqn.py", ["--backend", "ray", "--lean"]),
    "rxrl-replay-driver": ("rxrl_dqn.py", ["--backend", "ray", "--replay-on-driver"]),
    "rxrl-learner-process": ("rxrl_dqn.py", ["--backend", "ray", "--learner-process"]),
    "rxrl-rx": ("rxrl_dqn.py", ["--backend", "rx"]),
    "sb3": ("peer_sb3_dqn.py", []),
    "cleanrl": ("peer_cleanrl_dqn.py", []),
    "rllib": ("peer_rllib_dqn.py", []),
}


def run_system(system: str, seed: int, budget_steps: int, sets: list[str], timeout_s: float,
               workdir: Path, python: str) -> s.RunRecord:
    """Run one system once in a subprocess, watching its process tree's memory."""
    script, extra = SYSTEMS[system]
    out = workdir / f"{system}-{seed}.json"
    argv = [python, str(BENCH / script), "--budget-steps", str(budget_steps), "--seed", str(seed),
            "--out", str(out), "--stop-at-target", *extra, *(f"--set={a}" for a in sets)]
    # the rxrl runner prints "rxrl: ..." for both of its backends
    return pc.run_runner(system, seed, budget_steps, argv, out, timeout_s, workdir,
                         summary_prefix=system.split("-")[0])


def main(argv: list[str]) -> None:
    """Parse the command line, run every system for every seed, report and write results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-steps", type=int, default=100_000, help="env steps per run at most")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds, e.g. 0,1,2")
    parser.add_argument("--peers", default="sb3,cleanrl", help=f"comma-separated, from {sorted(SYSTEMS)}")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="override a matched setting for every system")
    parser.add_argument("--tag", default="dqn_cartpole", help="results go to bench/results/<tag>.{json,png}")
    parser.add_argument("--timeout-s", type=float, default=1500, help="per run")
    parser.add_argument("--rllib-python", default=sys.executable,
                        help="the interpreter of a venv with RLlib's dependencies, for the rllib peer")
    args = parser.parse_args(argv)
    peers = [p for p in args.peers.split(",") if p and p != "rxrl"]
    if set(peers) - set(SYSTEMS):
        unknown = sorted(set(peers) - set(SYSTEMS))
        raise SystemExit(f"unknown peer(s) {unknown}; choose from {sorted(SYSTEMS)}")
    systems, seeds = ["rxrl", *peers], [int(x) for x in args.seeds.split(",")]
    matched = d.override(d.Matched(), args.set)
    print(f"DQN {matched.env}: {systems}, seeds {seeds}, settings {attrs.asdict(matched)}", flush=True)
    records: list[s.RunRecord] = []
    with tempfile.TemporaryDirectory(prefix="rxrl-bench-") as tmp:
        for k, seed in enumerate(seeds):
            order = systems[k % len(systems):] + systems[:k % len(systems)]  # rotate: A/B alternation
            records += [run_system(system, seed, args.budget_steps, args.set, args.timeout_s, Path(tmp),
                                   args.rllib_python if system == "rllib" else sys.executable)
                        for system in order]
    all_figures = [pc.figures(system, [r for r in records if r.system == system]) for system in systems]
    report = pc.table(all_figures, d.TARGET_RETURN)
    print()
    print(report, flush=True)
    pc.RESULTS.mkdir(exist_ok=True)
    result = {
        "command": "python bench/dqn_cartpole.py " + " ".join(argv),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": pc.machine(),
        "versions": s.versions(["rxrl", "ray", "torch", "gymnasium", "numpy", "stable_baselines3", "psutil"]),
        "settings": attrs.asdict(matched),
        "target_return": d.TARGET_RETURN,
        "figures": [attrs.asdict(f) for f in all_figures],
        "ratios_rxrl_over_peer": {f.system: pc.ratios(all_figures[0], f) for f in all_figures[1:]},
        "table": report,
        "runs": [r.to_json() for r in records],
    }
    (pc.RESULTS / f"{args.tag}.json").write_text(json.dumps(result, separators=(",", ":")))
    pc.plot(records, systems, pc.RESULTS / f"{args.tag}.png", d.TARGET_RETURN,
            "DQN CartPole-v1, matched settings (each line one seed)")
    print(f"\nwrote bench/results/{args.tag}.json and .png")


if __name__ == "__main__":
    main(sys.argv[1:])
