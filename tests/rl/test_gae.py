"""GAE and V-trace against slow, obviously-correct reference implementations."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rxrl.rl.objectives.gae import compute_gae, vtrace

F = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]


def reference_gae(rewards: F, values: F, next_values: F, term: B, trunc: B, gamma: float, lam: float) -> F:
    """Each advantage as the explicit sum  sum_k (gamma*lam)^k delta[t+k]  over the rest of
    its episode within the fragment, one (t, env) at a time."""
    T, N = rewards.shape
    adv = np.zeros((T, N))
    for i in range(N):
        for t in range(T):
            total, weight = 0.0, 1.0
            for k in range(t, T):
                bootstrap = 0.0 if term[k, i] else gamma * next_values[k, i]
                total += weight * (rewards[k, i] + bootstrap - values[k, i])
                if term[k, i] or trunc[k, i]:
                    break
                weight *= gamma * lam
            adv[t, i] = total
    return adv


@st.composite
def fragments(draw: st.DrawFn) -> tuple[F, F, F, B, B, float, float]:
    T, N = draw(st.integers(1, 12)), draw(st.integers(1, 4))
    floats = st.floats(-10, 10)
    rewards = draw(hnp.arrays(np.float64, (T, N), elements=floats))
    values = draw(hnp.arrays(np.float64, (T, N), elements=floats))
    next_values = draw(hnp.arrays(np.float64, (T, N), elements=floats))
    term = draw(hnp.arrays(np.bool_, (T, N)))
    trunc = draw(hnp.arrays(np.bool_, (T, N))) & ~term
    gamma, lam = draw(st.floats(0, 1)), draw(st.floats(0, 1))
    return rewards, values, next_values, term, trunc, gamma, lam


@given(fragments())
def test_gae_equals_the_explicit_discounted_sum_of_td_errors(
    case: tuple[F, F, F, B, B, float, float],
) -> None:
    """Law: GAE(t) = sum_k (gamma*lam)^k delta(t+k), stopping at episode ends; targets = A + V."""
    rewards, values, next_values, term, trunc, gamma, lam = case
    adv, targets = compute_gae(rewards, values, next_values, term, trunc, gamma, lam)
    expected = reference_gae(rewards, values, next_values, term, trunc, gamma, lam)
    np.testing.assert_allclose(adv, expected, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(targets, expected + values, rtol=1e-4, atol=1e-3)
    assert adv.dtype == targets.dtype == np.float32


def test_terminated_does_not_bootstrap_but_truncated_does() -> None:
    one = np.ones((1, 2))
    term = np.array([[True, False]])
    trunc = np.array([[False, True]])
    adv, _ = compute_gae(one, 0 * one, 10 * one, term, trunc, gamma=0.5, lam=1.0)
    assert adv.tolist() == [[1.0, 6.0]]  # r only vs r + gamma * V(final obs)


def test_lambda_one_gives_discounted_returns_minus_values() -> None:
    rewards = np.array([[1.0], [2.0], [3.0]])
    values = np.array([[0.5], [0.25], [0.125]])
    none = np.zeros((3, 1), dtype=np.bool_)
    next_values = np.array([[0.25], [0.125], [4.0]])
    _, targets = compute_gae(rewards, values, next_values, none, none, gamma=0.5, lam=1.0)
    assert targets[:, 0].tolist() == [1 + 0.5 * 2 + 0.25 * 3 + 0.125 * 4, 2 + 0.5 * 3 + 0.25 * 4, 3 + 0.5 * 4]


def test_gae_rejects_mismatched_shapes() -> None:
    a = np.zeros((3, 2))
    with pytest.raises(ValueError, match=r"values=\(3, 1\)"):
        compute_gae(a, np.zeros((3, 1)), a, a > 0, a > 0, 0.9, 0.9)


def reference_vtrace(
    mu: F,
    pi: F,
    rewards: F,
    values: F,
    next_values: F,
    term: B,
    trunc: B,
    gamma: float,
    lam: float,
    rho_clip: float,
    c_clip: float,
) -> tuple[F, F]:
    """V-trace from its definition (Espeholt et al. eq. 1), as an explicit sum per (t, env):
    vs_t = V(x_t) + sum_{k>=t} gamma^{k-t} (prod_{t<=j<k} c_j) rho_k delta_k, with the
    episode's end or the fragment's end cutting the sum."""
    T, N = rewards.shape
    ratio = np.exp(pi - mu)
    rho, c = np.minimum(rho_clip, ratio), lam * np.minimum(c_clip, ratio)
    vs = np.zeros((T, N))
    for i in range(N):
        for t in range(T):
            total, weight = values[t, i], 1.0
            for k in range(t, T):
                target = rewards[k, i] + (0.0 if term[k, i] else gamma * next_values[k, i])
                total += weight * rho[k, i] * (target - values[k, i])
                if term[k, i] or trunc[k, i]:
                    break
                weight *= gamma * c[k, i]
            vs[t, i] = total
    adv = np.zeros((T, N))
    for i in range(N):
        for t in range(T):
            ended = term[t, i] or trunc[t, i] or t == T - 1
            vs_next = next_values[t, i] if ended else vs[t + 1, i] - values[t + 1, i] + next_values[t, i]
            bootstrap = 0.0 if term[t, i] else gamma * vs_next
            adv[t, i] = rho[t, i] * (rewards[t, i] + bootstrap - values[t, i])
    return vs, adv


@given(fragments(), st.data())
def test_vtrace_equals_its_definition(case: tuple[F, F, F, B, B, float, float], data: st.DataObject) -> None:
    """Law: the backward V-trace recursion equals the explicit sum in its definition."""
    rewards, values, next_values, term, trunc, gamma, lam = case
    logps = hnp.arrays(np.float64, rewards.shape, elements=st.floats(-3, 0))
    mu, pi = data.draw(logps), data.draw(logps)
    rho_clip, c_clip = data.draw(st.floats(0.1, 2.0)), data.draw(st.floats(0.1, 2.0))
    vs, adv = vtrace(mu, pi, rewards, values, next_values, term, trunc, gamma, lam, rho_clip, c_clip)
    ref_vs, ref_adv = reference_vtrace(
        mu, pi, rewards, values, next_values, term, trunc, gamma, lam, rho_clip, c_clip
    )
    np.testing.assert_allclose(vs, ref_vs, rtol=1e-4, atol=1e-2)
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-4, atol=1e-2)


@given(fragments())
def test_vtrace_on_policy_equals_gae_value_targets(case: tuple[F, F, F, B, B, float, float]) -> None:
    """Law: with behaviour == target policy and clips >= 1, V-trace targets are GAE targets."""
    rewards, values, next_values, term, trunc, gamma, lam = case
    logp = np.full(rewards.shape, -0.7)
    vs, _ = vtrace(logp, logp, rewards, values, next_values, term, trunc, gamma, lam)
    _, targets = compute_gae(rewards, values, next_values, term, trunc, gamma, lam)
    np.testing.assert_allclose(vs, targets, rtol=1e-4, atol=1e-3)
