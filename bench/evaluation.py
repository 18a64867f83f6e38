"""Evaluation beside training: PPO CartPole on the ray backend, evaluation off vs on.

Alternates runs with evaluation off and on (``evaluation_workers=1``) and prints each run's
trained env steps per second and the ratio on/off of the medians::

    python bench/evaluation.py --steps 20000 --pairs 3 --interval 1 --episodes 10
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from rxrl.training import Trainer


def one_run(root: Path, name: str, steps: int, interval: int, episodes: int) -> float:
    """Trained env steps per second of one run (evaluation off when ``interval`` is 0)."""
    trainer = Trainer("ppo", root / name, backend="ray", steps=steps, loggers=["csv"],
                      handle_signals=False, evaluation_interval=interval,
                      evaluation_workers=1, evaluation_episodes=episodes)
    began = time.perf_counter()
    result = trainer.run()
    elapsed = time.perf_counter() - began
    assert result.last is not None
    return result.last.env_steps_trained / elapsed


def main() -> None:
    """Alternate off/on runs; print the per-run figures and the median ratio."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=20_000)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--interval", type=int, default=1, help="iterations between evaluations")
    p.add_argument("--episodes", type=int, default=10)
    args = p.parse_args()
    import ray

    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    off: list[float] = []
    on: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i in range(args.pairs):
            off.append(one_run(root, f"off{i}", args.steps, 0, args.episodes))
            on.append(one_run(root, f"on{i}", args.steps, args.interval, args.episodes))
            print(f"pair {i}: off {off[-1]:,.0f} steps/s, on {on[-1]:,.0f} steps/s")
    ray.shutdown()
    ratio = statistics.median(on) / statistics.median(off)
    print(f"trained steps/s on/off (medians of {args.pairs}): {ratio:.3f}")


if __name__ == "__main__":
    main()
