"""ReplayShard: one replay buffer as an actor — add, sample (or NOT_READY), priorities back, checkpoint.

A plain Python class; a plan makes it an actor (`rxrl.actors(ReplayShard, M, config)` or
`indexed_actors`), so several shards split the replay of a run (Ape-X). A sampled batch
carries the `indices` its shard needs to take priorities back; a plan routes them to the
shard the batch came from (by tag), since indices of different shards are unrelated.

>>> import numpy as np
>>> from rxrl.rl.config import ReplayConfig
>>> from rxrl.rl.data.transitions import TransitionBatch
>>> shard = ReplayShard(ReplayConfig(capacity=100, batch_size=4, learning_starts=8))
>>> x = np.zeros((5, 2), np.float32)
>>> batch = TransitionBatch(obs=x, actions=np.zeros(5, np.int64), rewards=x[:, 0], next_obs=x,
...                         terminateds=x[:, 0] > 0, truncateds=x[:, 0] > 0)
>>> shard.add(batch), shard.sample()
(5, rxrl.NOT_READY)
>>> shard.add(batch), len(shard.sample())
(10, 4)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from rxrl.ready import NOT_READY, NotReady
from rxrl.rl.config import ReplayConfig
from rxrl.rl.data.transitions import TransitionBatch
from rxrl.rl.replay.buffers import PrioritizedReplayBuffer, make_replay_buffer


class ReplayShard:
    """A replay buffer (uniform or prioritized, per `config.prioritized`) behind an actor API.

    `sample()` returns `rxrl.NOT_READY` while the shard holds fewer than
    `config.learning_starts` transitions — the plan then skips it and asks again later —
    and a `TransitionBatch` of `config.batch_size` rows (with `indices`, and `weights` when
    prioritized) after. The sampling generator is seeded from `(seed, shard_index)`.
    """

    def __init__(self, config: ReplayConfig | None = None, seed: int = 0, shard_index: int = 0) -> None:
        self.config = config = config or ReplayConfig()
        self.shard_index = shard_index
        self.buffer = make_replay_buffer(config, [seed, shard_index, 0x5EED])
        #: env steps of the batches added (`TransitionBatch.env_steps`: the transitions stepped,
        #: n-step rows a worker still holds back included; a NEXT_STEP reset-only step is none)
        self.env_steps_added = 0
        #: transitions handed out by `sample` (None: not known, a checkpoint from before they
        #: were counted; `within` starts counting at the budget then)
        self.num_replayed: int | None = 0

    def __len__(self) -> int:
        """Transitions held now (at most `config.capacity`)."""
        return len(self.buffer)

    @property
    def num_added(self) -> int:
        """Transitions added since the shard was created (or checkpointed)."""
        return self.buffer.num_added

    def add(self, batch: TransitionBatch) -> int:
        """Store the batch's transitions; returns the transitions added to this shard so far."""
        self.buffer.add(batch)
        self.env_steps_added += batch.env_steps
        return self.buffer.num_added

    def sample(self) -> TransitionBatch | NotReady:
        """A batch of `config.batch_size` replayed transitions, or `NOT_READY` before `learning_starts`."""
        if len(self.buffer) < self.config.learning_starts:
            return NOT_READY
        if self.num_replayed is not None:
            self.num_replayed += self.config.batch_size
        return self.buffer.sample(self.config.batch_size)

    def within(self, transitions: int, intensity: float, lead: int = 0) -> bool:
        """Whether handing out ``transitions`` more keeps this shard to ``intensity`` replayed
        transitions per env step added past ``learning_starts``, ``lead`` transitions ahead at
        most (the peers' schedule: CleanRL's and SB3's train every ``batch_size / intensity``
        env steps once they passed ``learning_starts``; the lead lets a pipelined learner's
        next call be under way while the workers sample). It depends only on the calls the
        shard received, as a source's readiness must (docs/semantics.md)."""
        budget = intensity * max(0, self.env_steps_added - self.config.learning_starts)
        if self.num_replayed is None:  # resumed from a state without the count: from here
            self.num_replayed = int(budget)
        return self.num_replayed + transitions <= budget + lead

    def update_priorities(self, indices: npt.ArrayLike, priorities: npt.ArrayLike) -> None:
        """New priorities for sampled transitions (e.g. `|TD error|`); a uniform shard ignores
        them, so that one plan serves both kinds."""
        if isinstance(self.buffer, PrioritizedReplayBuffer):
            self.buffer.update_priorities(np.asarray(indices), np.asarray(priorities))

    def state_dict(self) -> dict[str, Any]:
        """The buffer's `state_dict()` (stored rows, ids, priorities, generator state)."""
        return {"shard_index": self.shard_index, "buffer": self.buffer.state_dict(),
                "env_steps_added": self.env_steps_added, "num_replayed": self.num_replayed}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a `state_dict()` of a shard with the same config (one from before the env
        steps and replayed transitions were counted: from the transitions it holds)."""
        self.buffer.load_state_dict(state["buffer"])
        self.env_steps_added = int(state.get("env_steps_added", self.buffer.num_added))
        replayed = state.get("num_replayed")
        self.num_replayed = None if replayed is None else int(replayed)


__all__ = ["ReplayShard"]
