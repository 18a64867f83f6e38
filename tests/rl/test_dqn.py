"""DQN loss and learner: hand-computed targets and Huber values, target-network updates,
priorities, checkpoints."""

from __future__ import annotations

import copy
import math

import attrs
import numpy as np
import pytest
import torch

from rxrl.envs.vector import EnvSpaces
from rxrl.rl.config import DQNConfig, QNetConfig
from rxrl.rl.data.transitions import TransitionBatch
from rxrl.rl.learners.dqn import DQNLearner, dqn_loss, huber, td_targets
from rxrl.rl.objectives.losses import clip_gradients
from tests.rl.replay_helpers import numbered
from tests.rl.toy_env import TOY_ID

SMALL = QNetConfig(hidden_sizes=(8,))


def test_td_targets_by_hand_plain_and_double() -> None:
    """Row 0 bootstraps one step, row 1 is terminated (no bootstrap), row 2 folds 3 steps.

    Next-state Q: target net [[1, 5], [2, 3], [4, 0]], online net [[9, 0], [0, 9], [0, 9]].
    Plain DQN takes the target net's max: 5, (3), 4. Double DQN evaluates the online
    argmax with the target net: actions 0, 1, 1 -> 1, (3), 0."""
    rewards = torch.tensor([1.0, 2.0, 3.0])
    terminated = torch.tensor([False, True, False])
    n_steps = torch.tensor([1, 1, 3])
    target_q = torch.tensor([[1.0, 5.0], [2.0, 3.0], [4.0, 0.0]])
    online_q = torch.tensor([[9.0, 0.0], [0.0, 9.0], [0.0, 9.0]])
    gamma = 0.5
    plain = td_targets(rewards, terminated, n_steps, target_q, None, gamma)
    torch.testing.assert_close(plain, torch.tensor([1 + 0.5 * 5, 2.0, 3 + 0.125 * 4]))
    double = td_targets(rewards, terminated, n_steps, target_q, online_q, gamma)
    torch.testing.assert_close(double, torch.tensor([1 + 0.5 * 1, 2.0, 3 + 0.125 * 0]))


def test_huber_is_quadratic_inside_delta_and_linear_outside() -> None:
    x = torch.tensor([-3.0, -1.0, -0.5, 0.0, 0.5, 2.0])
    torch.testing.assert_close(huber(x, 1.0), torch.tensor([2.5, 0.5, 0.125, 0.0, 0.125, 1.5]))
    torch.testing.assert_close(huber(x, 2.0), torch.tensor([4.0, 0.5, 0.125, 0.0, 0.125, 2.0]))
    torch.testing.assert_close(
        huber(x, 1.0), torch.nn.functional.huber_loss(x, torch.zeros(6), reduction="none")
    )


def test_dqn_loss_weights_rows_and_returns_raw_td_errors() -> None:
    q, targets = torch.tensor([1.0, 4.0]), torch.tensor([0.5, 1.0])  # td 0.5 and 3
    loss, td = dqn_loss(q, targets, None, 1.0)
    assert float(loss) == pytest.approx((0.125 + 2.5) / 2)
    loss, td = dqn_loss(q, targets, torch.tensor([1.0, 0.2]), 1.0)
    assert float(loss) == pytest.approx((0.125 + 0.2 * 2.5) / 2)
    torch.testing.assert_close(td, torch.tensor([0.5, 3.0]))


def learner(**config: object) -> DQNLearner:
    spaces = EnvSpaces.of(TOY_ID)
    return DQNLearner(spaces, attrs.evolve(DQNConfig(), **config), q_net=SMALL, seed=0)  # type: ignore[arg-type]


def batch(n: int = 16) -> TransitionBatch:
    b = numbered(0, n, obs_dim=3)
    return attrs.evolve(b, actions=b.actions % 2)


def same_params(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))


def test_target_network_is_copied_every_n_optimizer_steps_only() -> None:
    dqn = learner(target_update_interval=3, tau=1.0)
    initial = copy.deepcopy(dqn.target_net)
    for step in range(1, 7):
        dqn.train(batch())
        if step % 3 == 0:
            assert same_params(dqn.target_net, dqn.q_net), step
        else:
            assert not same_params(dqn.target_net, dqn.q_net), step
        if step < 3:
            assert same_params(dqn.target_net, initial)
    assert dqn.num_updates == 6 and dqn.num_target_updates == 2


def test_polyak_update_moves_the_target_by_tau() -> None:
    dqn = learner(target_update_interval=1, tau=0.25)
    before = [p.clone() for p in dqn.target_net.parameters()]
    dqn.train(batch())
    for old, new, online in zip(before, dqn.target_net.parameters(), dqn.q_net.parameters(), strict=True):
        torch.testing.assert_close(new, 0.75 * old + 0.25 * online)


def test_the_learning_rate_decays_linearly_over_the_steps_lr_decay_steps_buy() -> None:
    """``lr_decay_steps=E``: step k (from 0) runs at ``lr * (1 - k / U)``, U the optimizer steps
    that E sampled env steps buy (``training_intensity * E / batch_size``), 0 from U on."""
    config = DQNConfig(lr=1e-3, training_intensity=8.0, lr_decay_steps=64)
    assert config.lr_decay_updates == 8.0 * 64 / config.replay.batch_size == 4.0
    dqn = learner(lr=1e-3, training_intensity=8.0, lr_decay_steps=64)
    seen = []
    for _ in range(6):
        dqn.train(batch())
        seen.append(dqn.optimizer.param_groups[0]["lr"])
    assert seen == pytest.approx([1e-3, 0.75e-3, 0.5e-3, 0.25e-3, 0.0, 0.0])
    constant = learner(lr=1e-3)
    for _ in range(3):
        constant.train(batch())
    assert constant.optimizer.param_groups[0]["lr"] == 1e-3
    with pytest.raises(ValueError, match="lr_decay_steps"):
        DQNConfig(lr_decay_steps=0)


def test_train_returns_abs_td_errors_of_the_weights_before_the_step() -> None:
    dqn = learner(double_q=False, gamma=0.9)
    b = batch()
    with torch.no_grad():
        obs, nxt = torch.as_tensor(b.obs), torch.as_tensor(b.next_obs)
        q = dqn.q_net(obs).gather(1, torch.as_tensor(b.actions)[:, None]).squeeze(1)
        boot = dqn.target_net(nxt).max(1).values
        gammas = 0.9 ** torch.as_tensor(b.n_steps).float()
        target = torch.as_tensor(b.rewards) + gammas * (~torch.as_tensor(b.terminateds)) * boot
    metrics, priorities = dqn.train(b)
    np.testing.assert_allclose(priorities, (q - target).abs().numpy(), rtol=1e-5)
    assert priorities.dtype == np.float32 and metrics.env_steps_trained == 16 and metrics.num_updates == 1
    assert metrics.value_loss > 0 and metrics.grad_norm > 0


def test_a_double_dqn_step_is_the_gradient_of_the_taken_q_values_alone() -> None:
    """Law: a double-DQN step is the Adam step on the Huber loss's gradient through Q(s, a)
    only; the bootstrap (the online net's argmax at s', the target net's value there) is a
    constant, whichever forwards the learner runs to get it."""
    dqn = learner(double_q=True, gamma=0.9, max_grad_norm=None, target_update_interval=1000)
    rng = np.random.default_rng(0)

    def noisy() -> TransitionBatch:
        b = batch()
        return attrs.evolve(b, obs=rng.normal(size=b.obs.shape).astype(np.float32),
                            next_obs=rng.normal(size=b.obs.shape).astype(np.float32))

    for _ in range(20):
        dqn.train(noisy())
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # a target net whose argmaxes differ from the online net's
        for p in dqn.target_net.parameters():
            p.copy_(torch.randn(p.shape, generator=generator))
    online, target = copy.deepcopy(dqn.q_net), copy.deepcopy(dqn.target_net)
    online.zero_grad(set_to_none=True)  # a deep copy copies the last step's gradients
    optimizer = torch.optim.Adam(online.parameters(), lr=dqn.config.lr, fused=True)
    optimizer.load_state_dict(copy.deepcopy(dqn.optimizer.state_dict()))  # its step counts too
    b = noisy()
    obs, nxt = torch.as_tensor(b.obs), torch.as_tensor(b.next_obs)
    q = online(obs).gather(1, torch.as_tensor(b.actions)[:, None]).squeeze(1)
    with torch.no_grad():
        best = online(nxt).argmax(1, keepdim=True)
        gammas = 0.9 ** torch.as_tensor(b.n_steps).float()
        y = torch.as_tensor(b.rewards) + gammas * (~torch.as_tensor(b.terminateds)) * target(nxt).gather(
            1, best).squeeze(1)
    torch.autograd.backward(torch.nn.functional.huber_loss(q, y, delta=1.0))
    optimizer.step()
    dqn.train(b)
    for mine, theirs in zip(dqn.q_net.parameters(), online.parameters(), strict=True):
        torch.testing.assert_close(mine, theirs)
    assert same_params(dqn.target_net, target)  # not due
    assert not torch.equal(online(nxt).argmax(1), target(nxt).argmax(1))


def test_importance_weights_scale_the_gradient() -> None:
    b = batch()
    plain, halved = learner(max_grad_norm=None), learner(max_grad_norm=None)
    m1, _ = plain.train(b)
    m2, _ = halved.train(attrs.evolve(b, weights=np.full(16, 0.5, np.float32)))
    assert m2.value_loss == pytest.approx(m1.value_loss / 2) and m2.grad_norm == pytest.approx(
        m1.grad_norm / 2
    )


def test_state_dict_round_trip_continues_identically() -> None:
    a = learner()
    for _ in range(3):
        a.train(batch())
    b = learner()
    b.load_state_dict(a.state_dict())
    assert {"policy", "optimizer"} <= set(a.state_dict())  # what rxrl's checkpoint loader requires
    for _ in range(3):
        (_, pa), (_, pb) = a.train(batch()), b.train(batch())
        np.testing.assert_array_equal(pa, pb)
    assert same_params(a.q_net, b.q_net) and same_params(a.target_net, b.target_net)


def test_weights_round_trip_and_a_learner_starts_from_the_seeds_weights() -> None:
    a, b = learner(), learner()
    a.train(batch())
    assert not same_params(a.q_net, b.q_net)
    b.set_weights(a.get_weights())
    assert same_params(a.q_net, b.q_net)


def test_empty_batches_and_bad_config_are_refused() -> None:
    with pytest.raises(ValueError, match=r"empty batch"):
        learner().train(numbered(0, 0, obs_dim=3))
    with pytest.raises(ValueError, match=r"DQNConfig.tau must be in"):
        DQNConfig(tau=0.0)
    with pytest.raises(ValueError, match=r"DQNConfig.target_update_interval must be an integer >= 1"):
        DQNConfig(target_update_interval=0)
    with pytest.raises(ValueError, match=r"'training_intensity' must be > 0"):
        DQNConfig(training_intensity=0.0)
    with pytest.raises(ValueError, match=r"DQNConfig.n_step must be an integer >= 1"):
        DQNConfig(n_step=0)


@pytest.mark.parametrize("max_norm", [None, 1e-3, 1e6])
def test_clip_gradients_is_torch_s_clip_grad_norm_bit_for_bit(max_norm: float | None) -> None:
    """Without a limit only the norm is computed (no multiply by 1): the same norm and the same
    gradient bits as ``clip_grad_norm_`` to infinity; with one, it is ``clip_grad_norm_``."""
    def grads() -> list[torch.nn.Parameter]:
        net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
        torch.manual_seed(0)
        for p in net.parameters():
            torch.nn.init.normal_(p)
        net(torch.ones(5, 3)).square().sum().backward()
        return list(net.parameters())

    ours, torch_s = grads(), grads()
    norm = clip_gradients(ours, max_norm)
    expected = float(torch.nn.utils.clip_grad_norm_(torch_s, math.inf if max_norm is None else max_norm))
    assert norm == expected > 0
    for a, b in zip(ours, torch_s, strict=True):
        assert a.grad is not None and b.grad is not None and torch.equal(a.grad, b.grad)
    assert clip_gradients([torch.nn.Parameter(torch.ones(2))], None) == 0.0  # no gradient yet
