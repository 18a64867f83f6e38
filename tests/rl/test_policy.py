"""Actor-critic policies: hot-path sampling agrees with the loss path and with torch.distributions."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import pytest
import torch

from rxrl.rl.config import PolicyConfig
from rxrl.rl.models.policy import ActorCritic, CategoricalActorCritic, GaussianActorCritic, make_policy

BOX_OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
DISCRETE: gym.spaces.Discrete[np.int64] = gym.spaces.Discrete(3)
CONTINUOUS = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)


def obs_batch(n: int = 32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (n, 4)).astype(np.float32)


@pytest.mark.parametrize("action_space", [DISCRETE, CONTINUOUS], ids=["discrete", "box"])
def test_act_logp_equals_evaluate_logp(action_space: gym.Space[object]) -> None:
    policy = make_policy(BOX_OBS, action_space, seed=1)
    obs = obs_batch()
    actions, logp, values = policy.act(obs)
    assert logp.dtype == values.dtype == np.float32
    assert logp.shape == values.shape == (32,)
    with torch.no_grad():
        logp2, _, values2 = policy.evaluate(torch.as_tensor(obs), torch.as_tensor(actions))
    np.testing.assert_allclose(logp, logp2.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(values, values2.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(values, policy.value(obs), rtol=1e-6)


def test_categorical_matches_torch_distributions() -> None:
    policy = make_policy(BOX_OBS, DISCRETE, PolicyConfig(hidden_sizes=(8,)), seed=2)
    with torch.no_grad():
        policy.pi_head.weight.mul_(300.0)  # make the distribution far from uniform
    obs = torch.as_tensor(obs_batch())
    actions = torch.randint(0, 3, (32,))
    with torch.no_grad():
        logp, entropy, _ = policy.evaluate(obs, actions)
        dist = torch.distributions.Categorical(logits=policy.heads(policy.encode(obs))[0])
    log_prob: Callable[[torch.Tensor], torch.Tensor] = dist.log_prob  # untyped in torch
    dist_entropy: Callable[[], torch.Tensor] = dist.entropy
    torch.testing.assert_close(logp, log_prob(actions))
    torch.testing.assert_close(entropy, dist_entropy())


def test_gaussian_matches_torch_distributions() -> None:
    policy = make_policy(BOX_OBS, CONTINUOUS, PolicyConfig(init_log_std=-0.5), seed=3)
    assert isinstance(policy, GaussianActorCritic)
    obs = torch.as_tensor(obs_batch())
    actions = torch.randn(32, 2)
    with torch.no_grad():
        logp, entropy, _ = policy.evaluate(obs, actions)
        mean = policy.heads(policy.encode(obs))[0]
        dist = torch.distributions.Normal(mean, policy.log_std.exp())
    log_prob: Callable[[torch.Tensor], torch.Tensor] = dist.log_prob  # untyped in torch
    dist_entropy: Callable[[], torch.Tensor] = dist.entropy
    torch.testing.assert_close(logp, log_prob(actions).sum(-1))
    torch.testing.assert_close(entropy, dist_entropy().sum(-1))


def test_gumbel_sampling_frequencies_follow_softmax() -> None:
    policy = make_policy(BOX_OBS, DISCRETE, PolicyConfig(hidden_sizes=(8,)), seed=4)
    with torch.no_grad():
        policy.pi_head.weight.zero_()
        policy.pi_head.bias.copy_(torch.tensor([0.0, 1.0, 2.0]))
    actions, logp, _ = policy.act(np.zeros((20000, 4), dtype=np.float32))
    probs = torch.softmax(torch.tensor([0.0, 1.0, 2.0]), 0).numpy()
    freq = np.bincount(actions.astype(np.int64), minlength=3) / len(actions)
    np.testing.assert_allclose(freq, probs, atol=0.015)  # ~4 sigma at n=20000, seeded
    np.testing.assert_allclose(logp, np.log(probs)[actions], rtol=1e-5)


def test_deterministic_act_takes_the_mode() -> None:
    policy = make_policy(BOX_OBS, CONTINUOUS, seed=5)
    obs = obs_batch()
    actions, _, _ = policy.act(obs, deterministic=True)
    with torch.no_grad():
        mean = policy.heads(policy.encode(torch.as_tensor(obs)))[0].numpy()
    np.testing.assert_allclose(actions.astype(np.float32), mean, atol=1e-6)


def test_sampling_is_reproducible_per_sampling_seed() -> None:
    a, b = make_policy(BOX_OBS, DISCRETE, seed=6), make_policy(BOX_OBS, DISCRETE, seed=6)
    obs = obs_batch(256)
    a.seed_sampling(11)
    b.seed_sampling(11)
    assert np.array_equal(a.act(obs)[0], b.act(obs)[0])
    b.seed_sampling(12)
    assert not np.array_equal(a.act(obs)[0], b.act(obs)[0])


def test_equal_seeds_give_equal_weights_and_different_seeds_differ() -> None:
    w0, w0b, w1 = (make_policy(BOX_OBS, DISCRETE, seed=s).get_weights() for s in (0, 0, 1))
    assert all(np.array_equal(w0[k], w0b[k]) for k in w0)
    assert not np.array_equal(w0["pi_head.weight"], w1["pi_head.weight"])


def test_orthogonal_init_with_cleanrl_gains() -> None:
    policy = make_policy(BOX_OBS, DISCRETE, seed=0)
    w = policy.pi_head.weight.detach().numpy()  # [3, 64]: orthonormal rows scaled by 0.01
    np.testing.assert_allclose(w @ w.T, 0.01**2 * np.eye(3), atol=1e-9)
    hidden = policy.pi_trunk[2]
    assert isinstance(hidden, torch.nn.Linear)
    h = hidden.weight.detach().numpy()  # [64, 64] hidden: gain sqrt(2)
    np.testing.assert_allclose(h @ h.T, 2 * np.eye(64), atol=1e-4)
    assert not policy.pi_head.bias.detach().any()


def test_weights_roundtrip_are_copies_and_validated() -> None:
    src, dst = make_policy(BOX_OBS, CONTINUOUS, seed=0), make_policy(BOX_OBS, CONTINUOUS, seed=1)
    weights = src.get_weights()
    assert "log_std" in weights and all(isinstance(v, np.ndarray) for v in weights.values())
    dst.set_weights(weights)
    obs = obs_batch()
    np.testing.assert_array_equal(src.act(obs, deterministic=True)[0], dst.act(obs, deterministic=True)[0])
    weights["vf_head.bias"][:] = 123.0
    assert not np.any(src.get_weights()["vf_head.bias"] == 123.0)  # a copy, not a view
    with pytest.raises(ValueError, match=r"shape mismatch.*vf_head\.bias"):
        dst.set_weights({**weights, "vf_head.bias": np.zeros(2, np.float32)})
    with pytest.raises(ValueError, match=r"missing entries \['log_std'\]"):
        dst.set_weights({k: v for k, v in weights.items() if k != "log_std"})


@pytest.mark.parametrize("shared_trunk", [False, True])
def test_numpy_rollout_path_tracks_in_place_weight_updates(shared_trunk: bool) -> None:
    """`act`/`value` read the torch parameters' memory: optimizer steps, `set_weights` and
    `load_state_dict` are all seen at once."""
    policy = make_policy(BOX_OBS, CONTINUOUS, PolicyConfig(shared_trunk=shared_trunk), seed=0)
    obs = obs_batch()
    policy.act(obs)  # builds the numpy views

    def agree() -> None:
        actions, logp, values = policy.act(obs)
        with torch.no_grad():
            logp2, _, values2 = policy.evaluate(torch.as_tensor(obs), torch.as_tensor(actions))
        np.testing.assert_allclose(values, values2.numpy(), atol=1e-5)
        np.testing.assert_allclose(logp, logp2.numpy(), atol=1e-4)

    assert isinstance(policy, GaussianActorCritic)
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.5)
    before = policy.value(obs)
    _, _, values = policy.evaluate(torch.as_tensor(obs), torch.zeros(32, 2))
    torch.autograd.backward((values - 10.0).square().mean() - policy.log_std.sum())
    optimizer.step()
    assert not np.allclose(before, policy.value(obs))
    agree()
    policy.set_weights(
        make_policy(BOX_OBS, CONTINUOUS, PolicyConfig(shared_trunk=shared_trunk), seed=1).get_weights()
    )
    agree()
    policy.load_state_dict(
        make_policy(BOX_OBS, CONTINUOUS, PolicyConfig(shared_trunk=shared_trunk), seed=2).state_dict()
    )
    agree()
    np.testing.assert_allclose(
        policy.value(obs),
        make_policy(BOX_OBS, CONTINUOUS, PolicyConfig(shared_trunk=shared_trunk), seed=2).value(obs),
    )


def test_copied_policy_acts_with_its_own_weights() -> None:
    """A deep copy or pickle must not keep numpy views of the original's parameters."""
    policy = make_policy(BOX_OBS, DISCRETE, seed=0)
    obs = obs_batch()
    policy.act(obs)
    for clone in (copy.deepcopy(policy), pickle.loads(pickle.dumps(policy))):
        clone.set_weights(make_policy(BOX_OBS, DISCRETE, seed=1).get_weights())
        np.testing.assert_allclose(clone.value(obs), make_policy(BOX_OBS, DISCRETE, seed=1).value(obs))
        assert not np.allclose(clone.value(obs), policy.value(obs))


def test_shared_trunk_has_no_separate_value_trunk() -> None:
    shared = make_policy(BOX_OBS, DISCRETE, PolicyConfig(shared_trunk=True))
    separate = make_policy(BOX_OBS, DISCRETE)
    assert not any(k.startswith("vf_trunk") for k in shared.get_weights())
    assert any(k.startswith("vf_trunk") for k in separate.get_weights())
    obs = obs_batch()
    np.testing.assert_allclose(shared.act(obs)[2], shared.value(obs), rtol=1e-6)


def test_discrete_observations_are_one_hot() -> None:
    policy = make_policy(gym.spaces.Discrete(5, start=1), DISCRETE, PolicyConfig(hidden_sizes=(8,)))
    assert isinstance(policy, CategoricalActorCritic)
    actions, logp, values = policy.act(np.array([1, 5, 3]))
    assert actions.shape == logp.shape == values.shape == (3,)
    assert policy.pi_trunk[0].in_features == 5


@pytest.mark.parametrize(
    ("obs_space", "act_space", "message"),
    [
        (BOX_OBS, gym.spaces.MultiDiscrete([2, 2]), "unsupported action space MultiDiscrete"),
        (BOX_OBS, gym.spaces.Box(-1, 1, (2, 2)), "unsupported action space Box"),
        (gym.spaces.Dict({"a": BOX_OBS}), DISCRETE, "unsupported observation space Dict"),
    ],
)
def test_unsupported_spaces_raise(
    obs_space: gym.Space[object], act_space: gym.Space[object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        make_policy(obs_space, act_space)


def test_policy_config_validation() -> None:
    with pytest.raises(ValueError, match="hidden_sizes"):
        PolicyConfig(hidden_sizes=())
    with pytest.raises(ValueError, match="activation"):
        PolicyConfig(activation="gelu")  # type: ignore[arg-type]
    relu: ActorCritic = make_policy(BOX_OBS, DISCRETE, PolicyConfig(activation="relu"))
    assert isinstance(relu.pi_trunk[1], torch.nn.ReLU)
