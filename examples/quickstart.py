"""A distributed-RL-shaped plan in miniature: sample on workers, batch, train, broadcast.

Run it: ``python examples/quickstart.py`` (add ``ray`` or ``rx`` as an argument to pick a
backend). The workers and learner are toys so that this runs anywhere in a second; the real
ones live in ``rxrl.rl``.
"""

from __future__ import annotations

import sys

import rxrl
from rxrl import ops


class Worker:
    """Produces 'fragments' of experience that depend on the weights it was last sent."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.weights = 0

    def sample(self) -> list[int]:
        """A fragment of three 'steps'."""
        return [self.weights * 10 + self.index] * 3

    def set_weights(self, weights: int) -> None:
        """Receive new weights from the learner."""
        self.weights = weights


class Learner:
    """Counts training steps; its 'weights' are the number of steps taken."""

    def __init__(self) -> None:
        self.steps = 0

    def train(self, batch: list[int]) -> int:
        """One 'SGD step' on a batch; returns the new weights."""
        self.steps += 1
        return self.steps


def concat(fragments: list[list[int]]) -> list[int]:
    """Concatenate fragments into one batch."""
    return [x for f in fragments for x in f]


def build() -> rxrl.Plan[int]:
    """Synchronous (PPO-style) training: barrier -> batch -> train -> broadcast weights."""
    workers = rxrl.indexed_actors(Worker, 2, name="Worker")
    learner = rxrl.actors(Learner, 1)
    return (rxrl.from_actors(workers, Worker.sample)      # Shards[list[int]]
            | ops.barrier()                               # Plan[list[list[int]]]
            | ops.map(concat)                             # Plan[list[int]]
            | ops.window(min_size=12, combine=concat)     # batches of >= 12 steps
            | ops.call(learner, Learner.train)            # Plan[int]: new weights
            | ops.broadcast(workers, Worker.set_weights)  # every worker gets them
            | ops.take(3))


def main(backend: str = "reference") -> list[int]:
    """Print the plan, run it, print and return the weights after each training step."""
    plan = build()
    print(plan, end="\n\n")
    with rxrl.run(plan, backend) as run:
        weights = list(run)
    print(f"weights after each train step ({backend}): {weights}")
    return weights


if __name__ == "__main__":
    main(*sys.argv[1:2])
