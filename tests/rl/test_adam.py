"""`rxrl.rl.learners.adam.Adam`: torch's Adam update bit for bit, its state-dict format both ways, and
no ``torch._dynamo`` import (what it is for)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import gymnasium as gym
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rxrl.rl.learners.adam import Adam
from rxrl.rl.models.policy import ActorCritic, make_policy
from tests.cli.helpers import ROOT, environment


def policy() -> ActorCritic:
    return make_policy(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), None, seed=0)


def train(policy: ActorCritic, optimizer: torch.optim.Adam | Adam, steps: int, seed: int,
          lr_at: dict[int, float], skip: int | None = None) -> None:
    """``steps`` updates with random gradients (parameter ``skip`` gets none every third
    step); the learning rate set to ``lr_at[k]`` before step ``k``."""
    g = torch.Generator().manual_seed(seed)
    for k in range(steps):
        if k in lr_at:
            optimizer.param_groups[0]["lr"] = lr_at[k]
        optimizer.zero_grad()
        for i, p in enumerate(policy.parameters()):
            grad = torch.randn(p.shape, generator=g)
            p.grad = None if (i == skip and k % 3 == 0) else grad
        optimizer.step()


def same(a: ActorCritic, b: ActorCritic) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))


@settings(max_examples=15, deadline=None)
@given(steps=st.integers(1, 60), seed=st.integers(0, 2**16), lr=st.floats(1e-5, 1e-1),
       eps=st.sampled_from([1e-8, 1e-5]), skip=st.none() | st.integers(0, 5))
def test_adam_moves_the_parameters_exactly_as_torch_s_adam_does(
        steps: int, seed: int, lr: float, eps: float, skip: int | None) -> None:
    """Law: from equal parameters, the same gradients and learning-rate changes give
    bit-identical parameters and moments after any number of steps, also when a parameter
    misses its gradient on some steps (its step count then lags, as in torch)."""
    ours, theirs = policy(), policy()
    mine = Adam(ours.parameters(), lr=lr, eps=eps)
    torch_adam = torch.optim.Adam(theirs.parameters(), lr=lr, eps=eps)
    schedule = {steps // 2: lr / 3}
    train(ours, mine, steps, seed, schedule, skip)
    train(theirs, torch_adam, steps, seed, schedule, skip)
    assert same(ours, theirs)
    a, b = mine.state_dict()["state"], torch_adam.state_dict()["state"]
    assert a.keys() == b.keys()
    for i in a:
        assert all(torch.equal(a[i][k], b[i][k]) for k in ("step", "exp_avg", "exp_avg_sq")), i


def make(kind: str, params: Iterator[torch.nn.Parameter]) -> torch.optim.Adam | Adam:
    """``rxrl``'s `Adam` or ``torch``'s, with one learning rate and epsilon."""
    return Adam(params, lr=1e-3, eps=1e-5) if kind == "rxrl" else torch.optim.Adam(params, lr=1e-3, eps=1e-5)


@pytest.mark.parametrize(("before", "after"), [("torch", "rxrl"), ("rxrl", "torch")])
def test_a_state_dict_of_either_optimizer_loads_into_the_other_and_training_goes_on_the_same(
        before: str, after: str) -> None:
    """A checkpoint written before `Adam` (torch's state dict) resumes with it, and the
    reverse; the resumed run matches the uninterrupted one bit for bit."""
    whole = policy()
    whole_opt = make(before, whole.parameters())
    train(whole, whole_opt, 20, seed=1, lr_at={})
    train(whole, whole_opt, 20, seed=2, lr_at={})

    first, resumed = policy(), policy()
    first_opt = make(before, first.parameters())
    train(first, first_opt, 20, seed=1, lr_at={})
    resumed.load_state_dict(first.state_dict())
    resumed_opt = make(after, resumed.parameters())
    resumed_opt.param_groups[0]["lr"] = 1.0  # the state's learning rate replaces it
    resumed_opt.load_state_dict(first_opt.state_dict())
    train(resumed, resumed_opt, 20, seed=2, lr_at={})
    assert same(resumed, whole)


def test_a_state_dict_it_does_not_implement_is_refused_in_one_line() -> None:
    theirs = torch.optim.Adam(policy().parameters(), lr=1e-3, amsgrad=True)
    with pytest.raises(ValueError, match="amsgrad"):
        Adam(policy().parameters(), lr=1e-3).load_state_dict(theirs.state_dict())
    other = torch.optim.Adam(list(policy().parameters())[:2], lr=1e-3)
    with pytest.raises(ValueError, match="parameters"):
        Adam(policy().parameters(), lr=1e-3).load_state_dict(other.state_dict())


def test_a_ppo_learner_trains_without_importing_torch_dynamo() -> None:
    """``torch.optim``'s optimizers import ``torch._dynamo`` (~0.7 s) at their first call;
    the learners' `Adam` does not (a fresh process: this one may have imported it)."""
    code = (
        "import sys\n"
        "from rxrl.algos.common import torch_free_workers\n"
        "from rxrl.algos.on_policy.ppo import PPO\n"
        "from rxrl.rl import PPOLearner, SampleBatch\n"
        "config = PPO()\n"
        "worker = torch_free_workers(config)(0)\n"
        "learner = PPOLearner('CartPole-v1', config.learner, seed=0)\n"
        "learner.train(worker.sample())\n"
        "learner.load_state_dict(learner.state_dict())\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environment(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "False"
