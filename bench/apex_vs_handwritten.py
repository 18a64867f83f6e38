"""rxrl's Ape-X plan against Ape-X hand-written on raw Ray: the same settings, alternating.

Each round runs ``rxrl_dqn.py --apex`` (the plan of `rxrl.algos.qlearning.apex` on the Ray backend) and
``handwritten_ray_apex.py`` once each, in a subprocess of their own with a fresh Ray, in
alternating order (A/B, B/A, ...) and with the round's seed, for ``--budget-steps`` env steps.
Per run: env steps sampled per second and transitions trained per second of training wall time
(from the first sample request to the last record; the training intensity ties the two). Prints
every run, the per-round ratios rxrl / hand-written and their medians (target: >= 0.97), and
writes ``bench/results/<tag>.json``.

    python bench/apex_vs_handwritten.py --rounds 5 --budget-steps 40000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ppo_settings as s

BENCH = Path(__file__).resolve().parent
SYSTEMS = {"rxrl": ["rxrl_dqn.py", "--apex"], "handwritten": ["handwritten_ray_apex.py"]}


def run(system: str, seed: int, budget_steps: int, workdir: Path) -> s.RunRecord:
    """One run of ``system`` in a subprocess; its record."""
    out = workdir / f"{system}-{seed}-{time.monotonic_ns()}.json"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BENCH), env.get("PYTHONPATH")) if p)
    script, *extra = SYSTEMS[system]
    done = subprocess.run([sys.executable, str(BENCH / script), *extra, "--budget-steps", str(budget_steps),
                           "--seed", str(seed), "--out", str(out)], capture_output=True, text=True, env=env,
                          cwd=BENCH.parent, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{system} failed: {done.stdout[-1000:]}{done.stderr[-2000:]}")
    return s.RunRecord.from_json(json.loads(out.read_text()))


def rates(r: s.RunRecord) -> tuple[float, float]:
    """Env steps sampled and transitions trained per second of training wall time."""
    return r.env_steps_sampled / r.train_s, r.env_steps_trained / r.train_s


def main(argv: list[str]) -> None:
    """Alternate the two systems for ``--rounds`` rounds; print and write the ratios."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--budget-steps", type=int, default=40_000)
    p.add_argument("--tag", default="apex_vs_handwritten")
    a = p.parse_args(argv)
    runs: list[dict[str, object]] = []
    ratios: dict[str, list[float]] = {"sampled": [], "trained": []}
    with tempfile.TemporaryDirectory(prefix="rxrl-apex-") as tmp:
        for k in range(a.rounds):
            order = ["rxrl", "handwritten"] if k % 2 == 0 else ["handwritten", "rxrl"]
            got: dict[str, tuple[float, float]] = {}
            for system in order:
                load = os.getloadavg()[0]
                record = run(system, k, a.budget_steps, Path(tmp))
                got[system] = rates(record)
                runs.append({"round": k, "system": system, "seed": k, "load_before": load,
                             "env_steps_sampled": record.env_steps_sampled,
                             "env_steps_trained": record.env_steps_trained, "train_s": record.train_s,
                             "setup_s": record.setup_s, "sampled_per_s": got[system][0],
                             "trained_per_s": got[system][1]})
                sampled, trained = got[system]
                print(f"round {k} {system:>11}: {sampled:8,.0f} env steps/s, {trained:9,.0f} trained/s "
                      f"({record.train_s:.1f} s; load {load:.1f})", flush=True)
            ratios["sampled"].append(got["rxrl"][0] / got["handwritten"][0])
            ratios["trained"].append(got["rxrl"][1] / got["handwritten"][1])
            print(f"round {k} rxrl / hand-written: sampled {ratios['sampled'][-1]:.3f}, "
                  f"trained {ratios['trained'][-1]:.3f}", flush=True)
    medians = {k: statistics.median(v) for k, v in ratios.items()}
    print(f"\nmedian rxrl / hand-written over {a.rounds} rounds: env steps sampled/s "
          f"{medians['sampled']:.3f}, transitions trained/s {medians['trained']:.3f}")
    result = {"command": "python bench/apex_vs_handwritten.py " + " ".join(argv),
              "date": time.strftime("%Y-%m-%d %H:%M"),
              "versions": s.versions(["rxrl", "ray", "torch", "gymnasium", "numpy"]), "ratios": ratios,
              "median_ratios": medians, "runs": runs}
    (BENCH / "results").mkdir(exist_ok=True)
    (BENCH / "results" / f"{a.tag}.json").write_text(json.dumps(result, indent=1))
    print(f"wrote bench/results/{a.tag}.json")


if __name__ == "__main__":
    main(sys.argv[1:])
