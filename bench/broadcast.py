"""A broadcast's cost on the driver: weights of a given size sent to N actors, per item.

Each item is a dict of float32 arrays (``--mb`` megabytes: 0.54 is MinAtar's DQN net, 6.7 the
Nature CNN's) made on the driver and broadcast to ``--actors`` actors that copy them in (as
`set_q_weights` does); the driver's CPU seconds and the wall time per item, the best of
``--reps`` passes. Against an older rxrl: put a ``git archive`` of it first on PYTHONPATH and
run both, alternating.

    python bench/broadcast.py --actors 2,8 --mb 0.54,6.7
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import ray

import rxrl
from rxrl import ops


class Receiver:
    """An actor that copies in the weights it is sent."""

    def __init__(self) -> None:
        self.weights: dict[str, np.ndarray] = {}

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Keep a writable copy of each array."""
        self.weights = {k: np.array(v) for k, v in weights.items()}


def once(actors: int, mb: float, items: int) -> tuple[float, float]:
    """Driver CPU and wall seconds per item of one run."""
    n = max(1, int(mb * 2**20 / 4))
    weights = {"w": np.ones(n, np.float32)}
    group = rxrl.actors(Receiver, actors).with_options(num_cpus=0)
    plan = (rxrl.from_iterable(range(items)) | ops.map(lambda i: {**weights, "i": np.full(1, i, np.float32)})
            | ops.broadcast(group, Receiver.set_weights))
    with rxrl.run(plan, "ray") as run:
        next(run)  # actors started
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in run:
            pass
        return (time.process_time() - cpu) / (items - 1), (time.perf_counter() - wall) / (items - 1)


def main(argv: list[str]) -> None:
    """Print the driver's CPU and wall time per broadcast item for each size and group size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actors", default="2,8", help="comma-separated group sizes")
    parser.add_argument("--mb", default="0.54,6.7", help="comma-separated weight sizes in MB")
    parser.add_argument("--items", type=int, default=101)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    for mb in (float(x) for x in args.mb.split(",")):
        for actors in (int(x) for x in args.actors.split(",")):
            runs = [once(actors, mb, args.items) for _ in range(args.reps)]
            cpu, wall = min(r[0] for r in runs), min(r[1] for r in runs)
            print(f"{mb:5.2f} MB to {actors} actors: driver CPU {cpu * 1e3:7.2f} ms, "
                  f"wall {wall * 1e3:7.2f} ms an item")
    ray.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
