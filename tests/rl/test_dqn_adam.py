"""A DQN learner's `FusedAdam`: torch's fused Adam bit for bit (so DQN's numbers are those of
``torch.optim.Adam(fused=True)``), state dicts that load either way, and no ``torch._dynamo``
in the learner's process (issue 23: ~70 MB)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import torch

from rxrl.rl.config import DQNConfig
from rxrl.rl.data.transitions import TransitionBatch
from rxrl.rl.learners.dqn import DQNLearner, FusedAdam
from tests.cli.helpers import ROOT, environment


def batch(rng: np.random.Generator, n: int = 64) -> TransitionBatch:
    """A random CartPole-shaped batch."""
    return TransitionBatch(
        obs=rng.normal(size=(n, 4)).astype(np.float32), actions=rng.integers(0, 2, n),
        rewards=rng.normal(size=n).astype(np.float32), next_obs=rng.normal(size=(n, 4)).astype(np.float32),
        terminateds=rng.random(n) < 0.1, truncateds=np.zeros(n, bool), n_steps=rng.integers(1, 4, n),
        weights=rng.random(n).astype(np.float32), indices=None, episode_returns=np.zeros(0, np.float32),
        episode_lengths=np.zeros(0, np.int64), env_steps=0)


def with_torch_adam(config: DQNConfig) -> DQNLearner:
    """A learner stepping with ``torch.optim.Adam(fused=True)``, as DQN did before `FusedAdam`."""
    learner = DQNLearner("CartPole-v1", config, seed=3)
    learner.optimizer = torch.optim.Adam(learner.q_net.parameters(), lr=config.lr, eps=config.adam_eps,
                                         fused=True)  # type: ignore[assignment]
    return learner


def test_fused_adam_steps_as_torchs_fused_adam_bit_for_bit_and_their_states_load_either_way() -> None:
    config = DQNConfig(lr=3e-3, target_update_interval=7)
    theirs, mine = with_torch_adam(config), DQNLearner("CartPole-v1", config, seed=3)
    assert isinstance(mine.optimizer, FusedAdam)
    rng = np.random.default_rng(0)
    for _ in range(120):
        b = batch(rng)
        (m_theirs, p_theirs), (m_mine, p_mine) = theirs.train(b), mine.train(b)
        assert np.array_equal(p_theirs, p_mine) and m_theirs.value_loss == m_mine.value_loss
    a, b_ = theirs.state_dict(), mine.state_dict()
    assert a["optimizer"]["param_groups"] == b_["optimizer"]["param_groups"]
    for key in ("policy", "target"):
        assert all(torch.equal(v, b_[key][k]) for k, v in a[key].items())
    for i, entry in a["optimizer"]["state"].items():
        for k, v in entry.items():
            other = b_["optimizer"]["state"][i][k]
            assert torch.equal(v, other) and (v.dtype, v.device) == (other.dtype, other.device), (i, k)
    crossed = DQNLearner("CartPole-v1", config, seed=0)
    crossed.load_state_dict(a)  # torch's state into FusedAdam
    back = with_torch_adam(config)
    back.load_state_dict(b_)  # FusedAdam's into torch's
    for _ in range(20):
        b = batch(rng)
        out = [learner.train(b)[1] for learner in (theirs, mine, crossed, back)]
        assert all(np.array_equal(out[0], o) for o in out[1:])


#: a DQN learner built and trained in a fresh process: whether torch._dynamo got imported
LEARNER_WITHOUT_DYNAMO = """
import sys
import numpy as np
from rxrl.rl.config import DQNConfig
from rxrl.rl.learners.dqn import DQNLearner
from tests.rl.test_dqn_adam import batch
learner = DQNLearner("CartPole-v1", DQNConfig(), seed=0)
rng = np.random.default_rng(0)
for _ in range(3):
    learner.train(batch(rng))
learner.load_state_dict(learner.state_dict())
print("torch._dynamo" in sys.modules)
"""


def test_a_dqn_learner_does_not_import_torch_dynamo() -> None:
    done = subprocess.run([sys.executable, "-c", LEARNER_WITHOUT_DYNAMO], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=environment())
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "False"
