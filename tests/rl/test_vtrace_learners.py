"""V-trace and the V-trace learners: n-step returns, hand-computed IMPALA and APPO losses,
batching, weights per worker, staleness, the target network, checkpoints."""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rxrl.rl import (
    APPOConfig,
    APPOLearner,
    EnvSpaces,
    Fragment,
    IMPALAConfig,
    IMPALALearner,
    PolicyConfig,
    SampleBatch,
    vtrace,
)
from rxrl.rl.learners.vtrace import VTraceLearner, kl_divergence
from rxrl.rl.models.policy import ActorCritic, GaussianActorCritic, make_policy

F = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]
SPACES = EnvSpaces(gym.spaces.Box(-1.0, 1.0, (2,), np.float32), gym.spaces.Discrete(2))
LN2 = math.log(2.0)


# ------------------------------------------------------------------------ V-trace itself


def n_step_returns(rewards: F, next_values: F, term: B, trunc: B, gamma: float) -> F:
    """Each step's discounted return to its episode's end or the fragment's end, plus the
    discounted value there (none after a termination), one (t, env) at a time."""
    T, N = rewards.shape
    out = np.zeros((T, N))
    for i in range(N):
        for t in range(T):
            total, discount = 0.0, 1.0
            for k in range(t, T):
                total += discount * rewards[k, i]
                discount *= gamma
                if term[k, i]:
                    break
                if trunc[k, i] or k == T - 1:
                    total += discount * next_values[k, i]
                    break
            out[t, i] = total
    return out


@st.composite
def on_policy_fragments(draw: st.DrawFn) -> tuple[F, F, F, F, B, B, float]:
    T, N = draw(st.integers(1, 10)), draw(st.integers(1, 3))
    floats = st.floats(-10, 10)
    logp = draw(hnp.arrays(np.float64, (T, N), elements=st.floats(-5, 0)))
    rewards = draw(hnp.arrays(np.float64, (T, N), elements=floats))
    values = draw(hnp.arrays(np.float64, (T, N), elements=floats))
    next_values = draw(hnp.arrays(np.float64, (T, N), elements=floats))
    # inside an episode a step's next value is the next step's value
    next_values[:-1] = values[1:]
    term = draw(hnp.arrays(np.bool_, (T, N)))
    trunc = draw(hnp.arrays(np.bool_, (T, N))) & ~term
    return logp, rewards, values, next_values, term, trunc, draw(st.floats(0, 1))


@given(on_policy_fragments())
def test_vtrace_without_clipping_on_policy_is_the_n_step_return(case: tuple[F, F, F, F, B, B, float]) -> None:
    """Law: with rho-bar = c-bar = inf (and lam = 1) on on-policy data, V-trace's value target
    at t is the n-step return to the end of the episode or the fragment, bootstrapped there."""
    logp, rewards, values, next_values, term, trunc, gamma = case
    vs, _ = vtrace(logp, logp, rewards, values, next_values, term, trunc, gamma,
                   rho_clip=math.inf, c_clip=math.inf)
    expected = n_step_returns(rewards, next_values, term, trunc, gamma)
    np.testing.assert_allclose(vs, expected, rtol=1e-4, atol=1e-3)


# ---------------------------------------------------------------- hand-computed losses


def constant_policy(learner_policy: ActorCritic, logits: list[float], value: float) -> None:
    """Zero every weight: the policy's logits and values are then its heads' biases."""
    with torch.no_grad():
        for p in learner_policy.parameters():
            p.zero_()
        learner_policy.pi_head.bias.copy_(torch.tensor(logits))
        learner_policy.vf_head.bias.fill_(value)


def three_steps(behaviour: list[float], terminated: list[bool] | None = None) -> Fragment:
    """One sequence of three steps of action 0 with reward 1 and the given behaviour
    probabilities; it bootstraps at its end."""
    z = np.zeros(3, np.float32)
    batch = SampleBatch(obs=np.zeros((3, 2), np.float32), actions=np.zeros(3, np.int64),
                        rewards=np.ones(3, np.float32), terminateds=np.array(terminated or [False] * 3),
                        truncateds=np.zeros(3, bool), logp=np.log(np.array(behaviour, np.float32)),
                        values=z, advantages=z, value_targets=z)
    return Fragment(batch, 3, [2], np.zeros((1, 2), np.float32))


def impala(**config: Any) -> IMPALALearner:
    return IMPALALearner(SPACES, IMPALAConfig(**config), gamma=0.9, lam=1.0)


def test_impala_loss_by_hand_with_clipped_ratios() -> None:
    """Uniform policy, V = 2 everywhere, behaviour probabilities 1/4, 1/2, 1 (ratios 2, 1, 1/2;
    rho = c = 1, 1, 1/2), gamma 0.9: deltas rho * (1 + 1.8 - 2) = .8, .8, .4; vs = 3.844, 3.16,
    2.4; advantages rho * (1 + 0.9 vs[t+1] - 2) = 1.844, 1.16, 0.4."""
    learner = impala(vf_coef=0.5, ent_coef=0.1)
    constant_policy(learner.policy, [0.0, 0.0], 2.0)
    loss = learner.loss(three_steps([0.25, 0.5, 1.0]))
    np.testing.assert_allclose(loss.vs, [3.844, 3.16, 2.4], rtol=1e-5)
    np.testing.assert_allclose(loss.advantages, [1.844, 1.16, 0.4], rtol=1e-5)
    policy_loss = LN2 * (1.844 + 1.16 + 0.4) / 3  # -E[logp * A], logp = -ln 2
    value_loss = 0.5 * (1.844**2 + 1.16**2 + 0.4**2) / 3
    t = loss.terms
    assert t.policy_loss == pytest.approx(policy_loss, rel=1e-5)
    assert t.value_loss == pytest.approx(value_loss, rel=1e-5)
    assert t.entropy == pytest.approx(LN2, rel=1e-5)
    assert t.loss.item() == pytest.approx(policy_loss + 0.5 * value_loss - 0.1 * LN2, rel=1e-5)
    assert t.clip_fraction == pytest.approx(1 / 3)  # the ratio 2 was clipped
    assert loss.rho_mean == pytest.approx((2 + 1 + 0.5) / 3, rel=1e-5)


def test_impala_loss_by_hand_across_a_termination() -> None:
    """On-policy, the episode ends at step 1: vs = 2 + .8 + .9 (1 - 2) = 1.9, 1, 2.8 and the
    advantages -0.1, -1, 0.8 (step 1 does not bootstrap; step 2 starts a new episode)."""
    learner = impala()
    constant_policy(learner.policy, [0.0, 0.0], 2.0)
    loss = learner.loss(three_steps([0.5, 0.5, 0.5], terminated=[False, True, False]))
    np.testing.assert_allclose(loss.vs, [1.9, 1.0, 2.8], rtol=1e-5)
    np.testing.assert_allclose(loss.advantages, [-0.1, -1.0, 0.8], rtol=1e-5, atol=1e-6)
    assert loss.terms.approx_kl == pytest.approx(0.0, abs=1e-6)


def test_appo_loss_by_hand_clips_the_ratio_to_the_target_network() -> None:
    """Target network p(a=0) = 3/4, policy 1/2, behaviour 1/4, 1/2, 1: V-trace against the
    target (ratios 3, 1.5, .75; rho = 1, 1, .75) gives vs = 4.006, 3.34, 2.6 and advantages
    2.006, 1.34, 0.6; the surrogate ratio clip(mu / pi_t, 0, 2) * pi / mu = pi / pi_t = 2/3
    lies outside 1 +- 0.2, so min(2/3 A, 0.8 A) = 2/3 A; KL(pi_t || pi) = .75 ln 1.5 + .25 ln .5."""
    learner = APPOLearner(SPACES, APPOConfig(clip_coef=0.2, vf_coef=0.5, ent_coef=0.1, kl_coef=0.5),
                          gamma=0.9, lam=1.0)
    constant_policy(learner.policy, [0.0, 0.0], 2.0)
    constant_policy(learner.target, [math.log(3.0), 0.0], -50.0)  # the target's critic is unused
    loss = learner.loss(three_steps([0.25, 0.5, 1.0]))
    np.testing.assert_allclose(loss.vs, [4.006, 3.34, 2.6], rtol=1e-5)
    np.testing.assert_allclose(loss.advantages, [2.006, 1.34, 0.6], rtol=1e-5)
    policy_loss = -(2 / 3) * (2.006 + 1.34 + 0.6) / 3
    value_loss = 0.5 * (2.006**2 + 1.34**2 + 0.6**2) / 3
    kl = 0.75 * math.log(1.5) + 0.25 * math.log(0.5)
    t = loss.terms
    assert t.policy_loss == pytest.approx(policy_loss, rel=1e-5)
    assert t.value_loss == pytest.approx(value_loss, rel=1e-5)
    assert t.approx_kl == pytest.approx(kl, rel=1e-5)
    assert t.clip_fraction == 1.0
    assert t.loss.item() == pytest.approx(policy_loss + 0.5 * value_loss - 0.1 * LN2 + 0.5 * kl, rel=1e-5)


def test_appo_without_kl_coef_leaves_the_penalty_out_of_the_loss() -> None:
    learner = APPOLearner(SPACES, APPOConfig(ent_coef=0.0, vf_coef=0.0), gamma=0.9)
    constant_policy(learner.policy, [0.0, 0.0], 2.0)
    constant_policy(learner.target, [math.log(3.0), 0.0], 2.0)
    t = learner.loss(three_steps([0.25, 0.5, 1.0])).terms
    assert t.approx_kl > 0.1 and t.loss.item() == pytest.approx(t.policy_loss, rel=1e-6)


@pytest.mark.parametrize("action_space", [gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (2,))])
def test_kl_divergence_matches_torch_distributions(action_space: gym.Space[Any]) -> None:
    obs = torch.randn(5, 2)
    p, q = (make_policy(SPACES.observation, action_space, PolicyConfig(), seed) for seed in (1, 2))
    p_out, q_out = p.heads(p.encode(obs))[0], q.heads(q.encode(obs))[0]
    if isinstance(p, GaussianActorCritic) and isinstance(q, GaussianActorCritic):
        with torch.no_grad():
            q.log_std.fill_(-0.3)
        normal = torch.distributions.Normal
        theirs = torch.distributions.kl_divergence(normal(p_out, p.log_std.exp()),
                                                   normal(q_out, q.log_std.exp())).sum(-1)
    else:
        categorical = torch.distributions.Categorical
        theirs = torch.distributions.kl_divergence(categorical(logits=p_out), categorical(logits=q_out))
    torch.testing.assert_close(kl_divergence(p, p_out, q, q_out), theirs)


# ------------------------------------------------------------------ the learner's protocol


def fragment(version: int = 0, sequences: int = 2, length: int = 4, seed: int = 0) -> Fragment:
    """Random on-policy-ish transitions: a fragment of ``sequences * length`` rows."""
    rng = np.random.default_rng(seed)
    n = sequences * length
    z = np.zeros(n, np.float32)
    batch = SampleBatch(obs=rng.normal(size=(n, 2)).astype(np.float32),
                        actions=rng.integers(0, 2, n), rewards=np.ones(n, np.float32),
                        terminateds=rng.random(n) < 0.1, truncateds=np.zeros(n, bool),
                        logp=np.full(n, -LN2, np.float32), values=z, advantages=z, value_targets=z)
    ends = np.arange(length - 1, n, length)
    return Fragment(batch, length, ends, rng.normal(size=(len(ends), 2)).astype(np.float32), version)


def test_fragments_are_buffered_until_a_batch_is_full_then_trained_in_one_update() -> None:
    learner = impala()
    assert learner.add_fragment(fragment(), train_batch_size=20) is None
    assert learner.add_fragment(fragment(), train_batch_size=20) is None  # 16 rows
    report = learner.add_fragment(fragment(), train_batch_size=20)
    assert report is not None and report.env_steps_trained == 24 and report.fragments == 3
    assert learner.version == 1 and learner.num_updates == 1 and learner.pending == []
    assert learner.env_steps_trained == 24


def test_staleness_counts_the_updates_since_each_fragments_weights() -> None:
    learner = impala()
    for _ in range(3):
        learner.train([fragment()])
    report = learner.train([fragment(version=3), fragment(version=1), fragment(version=0)])
    assert (report.staleness_min, report.staleness_max) == (0, 3)
    assert report.staleness_mean == pytest.approx(5 / 3)  # 0, 2, 3


def test_minibatches_of_whole_sequences_and_epochs_count_optimizer_steps() -> None:
    learner = impala(num_epochs=3, minibatch_size=8)
    report = learner.train([fragment(sequences=4, length=4)])  # 4 sequences, 2 per minibatch
    assert report.num_updates == 6 and learner.num_updates == 6 and learner.version == 1


def test_a_worker_is_sent_weights_at_most_every_broadcast_interval_updates() -> None:
    learner = impala()
    assert learner.weights_for(0, interval=2) is None  # its initial weights are version 0
    learner.train([fragment()])
    assert learner.weights_for(0, interval=2) is None
    learner.train([fragment()])
    sent = learner.weights_for(0, interval=2)
    assert sent is not None and sent.version == 2
    assert learner.weights_for(0, interval=2) is None  # given just now
    other = learner.weights_for(1, interval=2)  # worker 1 has had nothing since the start
    assert other is not None and other.version == 2
    for k, v in learner.get_weights().items():
        np.testing.assert_array_equal(sent.weights[k], v)


def changes(learner: APPOLearner) -> bool:
    """Whether the target network differs from the policy."""
    return any(not torch.equal(a, b) for a, b in zip(learner.target.parameters(),
                                                     learner.policy.parameters(), strict=True))


@pytest.mark.parametrize("interval", [1, 3])
def test_the_appo_target_network_follows_the_policy_every_interval_updates(interval: int) -> None:
    learner = APPOLearner(SPACES, APPOConfig(target_update_interval=interval, num_epochs=2))
    lagging = []
    for i in range(1, 7):
        learner.train([fragment(seed=i)])
        lagging.append(changes(learner))
    assert lagging == [i % interval != 0 for i in range(1, 7)]


def test_the_appo_target_moves_by_tau() -> None:
    learner = APPOLearner(SPACES, APPOConfig(tau=0.25))
    before = {k: v.clone() for k, v in learner.target.state_dict().items()}
    learner.train([fragment()])
    after, policy = learner.target.state_dict(), learner.policy.state_dict()
    for k in before:
        torch.testing.assert_close(after[k], 0.75 * before[k] + 0.25 * policy[k])


@pytest.mark.parametrize("cls", [IMPALALearner, APPOLearner])
def test_a_restored_learner_continues_exactly(cls: type[VTraceLearner]) -> None:
    config: Any = (APPOConfig(num_epochs=2, minibatch_size=4, target_update_interval=2)
                   if cls is APPOLearner else IMPALAConfig(num_epochs=2, minibatch_size=4))
    a = cls(SPACES, config, seed=3)
    a.train([fragment(seed=1)])
    b = cls(SPACES, config, seed=4)
    b.load_state_dict(a.state_dict())
    assert b.version == 1 and b.env_steps_trained == 8
    assert b.weights_for(0, 1) is None  # workers resumed from the checkpoint hold its weights
    ra, rb = a.train([fragment(seed=2, version=1)]), b.train([fragment(seed=2, version=1)])
    assert ra.policy_loss == rb.policy_loss and ra.staleness_max == rb.staleness_max == 0
    for k, v in a.get_weights().items():
        np.testing.assert_array_equal(b.get_weights()[k], v)
    if isinstance(a, APPOLearner) and isinstance(b, APPOLearner):
        assert a.updates_since_target == b.updates_since_target == 0
        for x, y in zip(a.target.parameters(), b.target.parameters(), strict=True):
            assert torch.equal(x, y)


def test_learners_refuse_bad_discounts_and_empty_batches() -> None:
    with pytest.raises(ValueError, match="gamma and lam must be in"):
        IMPALALearner(SPACES, gamma=1.5)
    with pytest.raises(ValueError, match="got no fragments"):
        impala().train([])


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"rho_clip": 0.0}, r"IMPALAConfig.rho_clip must be a number > 0 \(inf: no clipping\), got 0.0"),
    ({"c_clip": -1}, r"IMPALAConfig.c_clip must be a number > 0"),
    ({"num_epochs": 0}, r"IMPALAConfig.num_epochs must be an integer >= 1, got 0"),
    ({"minibatch_size": 0}, r"IMPALAConfig.minibatch_size must be None \(the whole batch\) or an integer"),
])
def test_configs_name_the_bad_setting(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        IMPALAConfig(**kwargs)


def test_appo_config_checks_its_own_settings() -> None:
    with pytest.raises(ValueError, match=r"APPOConfig.tau must be in \(0, 1\]"):
        APPOConfig(tau=0.0)
    with pytest.raises(ValueError, match="target_update_interval must be an integer >= 1"):
        APPOConfig(target_update_interval=0)
