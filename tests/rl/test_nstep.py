"""n-step folding against a slow per-transition reference, and independence from fragment cuts."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rxrl.rl.replay.nstep import NStepFolder, StepArrays, fold_n_step

B = npt.NDArray[np.bool_]
F = npt.NDArray[np.float64]


@st.composite
def episodes(draw: st.DrawFn) -> tuple[F, B, B, B, int, float]:
    """Time-major `[S, N]` steps of random episodes with terminations and truncations; with
    NEXT_STEP resets (a non-transition step after every episode end) or SAME_STEP (none)."""
    steps, envs = draw(st.integers(1, 25)), draw(st.integers(1, 4))
    next_step = draw(st.booleans())
    rewards = np.array(
        draw(st.lists(st.integers(-5, 5), min_size=steps * envs, max_size=steps * envs)), dtype=np.float64
    ).reshape(steps, envs)
    ends = draw(st.lists(st.sampled_from([0, 0, 0, 1, 2]), min_size=steps * envs, max_size=steps * envs))
    kind = np.array(ends).reshape(steps, envs)
    term, trunc, valid = kind == 1, kind == 2, np.ones((steps, envs), dtype=np.bool_)
    if next_step:
        for i in range(envs):
            for s in range(1, steps):
                valid[s, i] = not (valid[s - 1, i] and (term[s - 1, i] or trunc[s - 1, i]))
        term, trunc = term & valid, trunc & valid
    return rewards, term, trunc, valid, draw(st.integers(1, 5)), draw(st.sampled_from([0.0, 0.5, 0.9, 1.0]))


def reference(
    rewards: F, term: B, trunc: B, valid: B, n: int, gamma: float
) -> dict[tuple[int, int], tuple[float, int, int, bool]]:
    """For each transition (step, env): (return, steps folded, last step, closed), walking
    forward one step at a time until n steps, an episode end, or the end of the data."""
    out = {}
    steps, envs = rewards.shape
    for i in range(envs):
        for s in range(steps):
            if not valid[s, i]:
                continue
            total, k = 0.0, 0
            while True:
                total += gamma**k * rewards[s + k, i]
                k += 1
                ended = term[s + k - 1, i] or trunc[s + k - 1, i]
                if ended or k == n or s + k == steps:
                    break
            out[(s, i)] = (total, k, s + k - 1, ended or k == n)
    return out


@given(episodes())
def test_n_step_windows_equal_a_slow_per_transition_reference(case: tuple[F, B, B, B, int, float]) -> None:
    """Law: each window is sum_k gamma^k r_{t+k} over at most n steps, stopping at the first
    termination or truncation (never crossing an episode end); it is closed when it holds
    n steps or ends an episode, and open when the data runs out first."""
    rewards, term, trunc, valid, n, gamma = case
    windows = fold_n_step(rewards, term, trunc, valid, n, gamma)
    expected = reference(rewards, term, trunc, valid, n, gamma)
    for (s, i), (total, length, end, closed) in expected.items():
        assert windows.returns[s, i] == pytest.approx(total, abs=1e-9)
        assert (windows.lengths[s, i], windows.ends[s, i], windows.complete[s, i]) == (length, end, closed)
    assert not windows.complete[~valid].any() and (windows.lengths[~valid] == 0).all()


def stream(rewards: F, term: B, trunc: B, valid: B) -> StepArrays:
    """Steps whose observations name them: obs = (step, env), next_obs = (step + 1, env)."""
    steps, envs = rewards.shape
    ids = np.stack(np.meshgrid(np.arange(steps), np.arange(envs), indexing="ij"), axis=-1).astype(np.float32)
    return StepArrays(
        obs=ids,
        actions=np.zeros((steps, envs), np.int64),
        rewards=rewards.astype(np.float32),
        next_obs=ids + np.array([1.0, 0.0], np.float32),
        terminateds=term,
        truncateds=trunc,
        valid=valid,
    )


@given(episodes(), st.lists(st.integers(1, 6), min_size=1, max_size=10))
def test_folding_is_independent_of_how_the_stream_is_cut_into_fragments(
    case: tuple[F, B, B, B, int, float], cuts: list[int]
) -> None:
    """Law: NStepFolder fed a stream fragment by fragment emits, per environment and in
    time order, exactly the closed windows of the whole stream, each once, with the same
    return, length, next observation and end flags; the open ones are held back."""
    rewards, term, trunc, valid, n, gamma = case
    whole = stream(rewards, term, trunc, valid)
    folder, start, parts = NStepFolder(n, gamma), 0, []
    for size in [*cuts, len(whole)]:
        if start >= len(whole):
            break
        stop = min(start + size, len(whole))
        parts.append(
            folder.fold(
                StepArrays(
                    **{
                        k: getattr(whole, k)[start:stop]
                        for k in (
                            "obs",
                            "actions",
                            "rewards",
                            "next_obs",
                            "terminateds",
                            "truncateds",
                            "valid",
                        )
                    }
                )
            )
        )
        start = stop
    expected = {k: v for k, v in reference(rewards, term, trunc, valid, n, gamma).items() if v[3]}
    got = [
        (int(o[1]), int(o[0]), float(r), int(m), int(nx[0]), bool(te), bool(tr))
        for b in parts
        for o, r, m, nx, te, tr in zip(
            b.obs, b.rewards, b.n_steps, b.next_obs, b.terminateds, b.truncateds, strict=True
        )
    ]
    by_env = sorted(got, key=lambda row: row[0])  # stable: keeps each env's emission order
    assert [(env, s) for env, s, *_ in by_env] == sorted((i, s) for s, i in expected)
    for env, s, ret, length, next_step, te, tr in got:
        total, k, end, _ = expected[(s, env)]
        assert ret == pytest.approx(total, abs=1e-4) and (length, next_step) == (k, end + 1)
        assert (te, tr) == (bool(term[end, env]), bool(trunc[end, env]))
    assert folder.held == int(valid.sum()) - len(got)
    assert sum(b.env_steps for b in parts) == int(valid.sum())


def test_a_terminated_window_does_not_bootstrap_and_a_truncated_one_does_with_its_length() -> None:
    rewards = np.array([[1.0], [1.0], [1.0], [1.0], [1.0]])
    term = np.array([[False], [True], [False], [False], [False]])
    trunc = np.array([[False], [False], [False], [True], [False]])
    valid = np.array([[True], [True], [False], [True], [False]])
    windows = fold_n_step(rewards, term, trunc, valid, 3, 0.5)
    assert windows.returns[:, 0].tolist() == [1.5, 1.0, 0.0, 1.0, 0.0]
    assert windows.lengths[:, 0].tolist() == [2, 1, 0, 1, 0]
    assert windows.ends[:, 0].tolist()[:2] == [1, 1]


def test_bad_input_is_refused() -> None:
    z = np.zeros((2, 1), np.bool_)
    with pytest.raises(ValueError, match=r"n_step must be an integer >= 1"):
        fold_n_step(np.zeros((2, 1)), z, z, ~z, 0, 0.9)
    with pytest.raises(ValueError, match=r"gamma must be in"):
        NStepFolder(3, 1.5)
    with pytest.raises(ValueError, match=r"reset .* follows a step that did not end its episode"):
        fold_n_step(np.zeros((2, 1)), z, z, np.array([[True], [False]]), 2, 0.9)
