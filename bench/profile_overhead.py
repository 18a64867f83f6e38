"""What per-operator timings cost: runs on the ray backend with ``profile`` off and on, alternating.

For each algorithm (PPO: synchronous rounds; IMPALA: asynchronous, an item per fragment),
alternates runs with timings off and on (``Trainer(profile=True)``, i.e. ``rxrl train
--profile``) on one Ray instance, and prints each run's trained env steps per second in the
steady state (from the ``--skip``-th record to the last, from metrics.csv), then the ratio
on/off of the medians::

    python bench/profile_overhead.py --algos ppo,impala --steps 40000 --pairs 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from evaluation import steady_rate

from rxrl.training import Trainer


def one_run(root: Path, algo: str, name: str, steps: int, profile: bool, skip: int) -> float:
    """Steady trained env steps per second of one run."""
    Trainer(algo, root / name, backend="ray", steps=steps, loggers=["csv"], handle_signals=False,
            profile=profile).run()
    assert (root / name / "stats.json").is_file() == profile
    return steady_rate(root / name, skip)


def main() -> None:
    """Alternate off/on runs per algorithm; print the per-run figures and the median ratios."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--algos", default="ppo,impala")
    p.add_argument("--steps", type=int, default=40_000)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--skip", type=int, default=3, help="records left out of the steady rate")
    args = p.parse_args()
    import ray

    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    ratios = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for algo in args.algos.split(","):
            off: list[float] = []
            on: list[float] = []
            for i in range(args.pairs):
                first, second = (False, True) if i % 2 == 0 else (True, False)  # A/B, then B/A
                for profile in (first, second):
                    rate = one_run(root, algo, f"{algo}-{i}-{profile}", args.steps, profile, args.skip)
                    (on if profile else off).append(rate)
                print(f"{algo} pair {i}: off {off[-1]:,.0f}, on {on[-1]:,.0f} trained steps/s")
            ratios[algo] = statistics.median(on) / statistics.median(off)
    ray.shutdown()
    for algo, ratio in ratios.items():
        print(f"{algo}: trained steps/s with timings on / off (medians of {args.pairs}): {ratio:.3f}")


if __name__ == "__main__":
    main()
