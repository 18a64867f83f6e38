"""Evaluation beside training: PPO CartPole on the ray backend, evaluation off vs on.

Alternates runs with evaluation off and on (``evaluation_workers=1``) and prints each run's
trained env steps per second, end to end (the evaluator's process start-up included) and in
the steady state (from the ``--skip``-th record to the last, from metrics.csv), and the ratios
on/off of the medians::

    python bench/evaluation.py --steps 20000 --pairs 3 --interval 1 --episodes 10
"""

from __future__ import annotations

import argparse
import csv
import statistics
import tempfile
import time
from pathlib import Path

from rxrl.training import Trainer


def steady_rate(run: Path, skip: int) -> float:
    """Trained env steps per second from record ``skip`` to the last (metrics.csv)."""
    with open(run / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    first, last = rows[min(skip, len(rows) - 2)], rows[-1]
    steps = float(last["env_steps_trained"]) - float(first["env_steps_trained"])
    return steps / (float(last["time_s"]) - float(first["time_s"]))


def one_run(root: Path, name: str, steps: int, interval: int, episodes: int,
            skip: int, workers: int) -> tuple[float, float]:
    """Trained env steps per second of one run, end to end and steady (evaluation off when
    ``interval`` is 0)."""
    trainer = Trainer("ppo", root / name, backend="ray", steps=steps, loggers=["csv"], workers=workers,
                      handle_signals=False, evaluation_interval=interval,
                      evaluation_workers=1, evaluation_episodes=episodes)
    began = time.perf_counter()
    result = trainer.run()
    elapsed = time.perf_counter() - began
    assert result.last is not None
    return result.last.env_steps_trained / elapsed, steady_rate(root / name, skip)


def main() -> None:
    """Alternate off/on runs; print the per-run figures and the median ratio."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=20_000)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--interval", type=int, default=1, help="iterations between evaluations")
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--skip", type=int, default=3, help="records left out of the steady rate")
    p.add_argument("--workers", type=int, default=2,
                   help="rollout workers (PPO is synchronous: with 1, a 2-core machine has a core "
                        "to spare for the evaluator)")
    args = p.parse_args()
    import ray

    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    off: list[tuple[float, float]] = []
    on: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i in range(args.pairs):
            off.append(one_run(root, f"off{i}", args.steps, 0, args.episodes, args.skip,
                               args.workers))
            on.append(one_run(root, f"on{i}", args.steps, args.interval, args.episodes, args.skip,
                               args.workers))
            print(f"pair {i}: off {off[-1][0]:,.0f} / {off[-1][1]:,.0f} steps/s (end to end / "
                  f"steady), on {on[-1][0]:,.0f} / {on[-1][1]:,.0f}")
    ray.shutdown()
    for k, what in enumerate(("end to end", "steady")):
        ratio = statistics.median(r[k] for r in on) / statistics.median(r[k] for r in off)
        print(f"trained steps/s on/off, {what} (medians of {args.pairs}): {ratio:.3f}")


if __name__ == "__main__":
    main()
