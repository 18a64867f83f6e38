"""Learner groups (data-parallel SGD): n learners on shards of a batch equal one learner on it.

Law (issue 25): a group of n learners, each given the whole train batch and taking its share
of every minibatch's rows, its gradients summed over the group before every step, ends with the
same parameters (float tolerance) as one learner on the whole batch with the same minibatch
order — for any batch size, minibatch size and n, including ranks whose share of a minibatch
is empty; and the members end equal to each other bit for bit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rxrl.rl import (
    APPOConfig,
    DQNConfig,
    IMPALAConfig,
    PPOConfig,
    QRolloutWorker,
    RolloutWorker,
    SampleBatch,
    TransitionBatch,
)
from rxrl.rl.data.fragment import Fragment
from rxrl.rl.learners.actor_critic import A2CLearner, Learner, PPOLearner
from rxrl.rl.learners.collective import Collective, Rendezvous, backend_for
from rxrl.rl.learners.dqn import DQNLearner
from rxrl.rl.learners.vtrace import APPOLearner, IMPALALearner

ENV = "CartPole-v1"


@pytest.fixture(scope="module")
def batch() -> SampleBatch:
    return RolloutWorker(ENV, num_envs=2, fragment_length=40, seed=3).sample()


def run_group(make: Callable[[Collective], Any], n: int, train: Callable[[Any], Any],
              timeout_s: float = 60.0) -> list[Any]:
    """``n`` group members (threads, as the in-process backends run them), each ``train``ed."""
    rendezvous = Rendezvous.open(n, timeout_s=timeout_s)
    learners = [make(Collective(rendezvous, rank)) for rank in range(n)]
    errors: list[BaseException] = []

    def member(learner: Any) -> None:
        try:
            train(learner)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=member, args=(x,)) for x in learners]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s + 10)
    assert not any(t.is_alive() for t in threads), "a group member hung"
    if errors:
        raise errors[0]
    return learners


def params(learner: Learner) -> list[torch.Tensor]:
    return [p.detach().clone() for p in learner.policy.parameters()]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.integers(1, 80), minibatch=st.integers(1, 40), n=st.integers(2, 3),
       normalize=st.booleans())
def test_a_ppo_group_ends_where_one_learner_does(batch: SampleBatch, rows: int, minibatch: int, n: int,
                                                 normalize: bool) -> None:
    """The law, for PPO: equal parameters (1e-5) and equal reports; members bit-identical.
    A minibatch of fewer rows than ranks leaves some rank with none."""
    part = batch.slice(0, rows)
    config = PPOConfig(num_epochs=2, minibatch_size=min(minibatch, rows), normalize_advantages=normalize,
                       max_grad_norm=0.5)
    single = PPOLearner(ENV, config, seed=1)
    alone = single.train(part)
    reports: list[Any] = []
    group = run_group(lambda c: PPOLearner(ENV, config, seed=1, collective=c), n,
                      lambda learner: reports.append(learner.train(part)))
    for a, b in zip(params(single), params(group[0]), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)
    for other in group[1:]:
        assert all(torch.equal(a, b) for a, b in zip(params(group[0]), params(other), strict=True))
    for report in reports:
        assert report.num_updates == alone.num_updates
        assert report.policy_loss == pytest.approx(alone.policy_loss, rel=1e-4, abs=1e-5)
        assert report.grad_norm == pytest.approx(alone.grad_norm, rel=1e-4, abs=1e-5)


def test_parts_cover_every_row_once() -> None:
    """Rank parts of a minibatch are disjoint, consecutive and cover it (some may be empty)."""
    rendezvous = Rendezvous.open(3)
    for rows in range(0, 12):
        parts = [Collective(rendezvous, r).part(rows) for r in range(3)]
        covered = [i for p in parts for i in range(p.start, p.stop)]
        assert covered == list(range(rows))


@pytest.mark.parametrize("local_data", [False, True])
def test_a_group_gathering_on_its_device_trains_as_one_gathering_on_the_host(batch: SampleBatch,
                                                                            local_data: bool) -> None:
    """Members that gather their minibatches from a device copy of the batch (a GPU learner's
    ``gather_on_device``; here on the CPU) end bit for bit where host-gathering members do."""
    config = PPOConfig(num_epochs=2, minibatch_size=24, max_grad_norm=0.5)

    def group(on_device: bool) -> list[Any]:
        def make(c: Collective) -> PPOLearner:
            c.local_data = local_data
            learner = PPOLearner(ENV, config, seed=1, collective=c)
            learner.gather_on_device = on_device
            return learner
        return run_group(make, 2, lambda learner: learner.train(batch))

    host, device = group(False), group(True)
    for a, b in zip(host, device, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(params(a), params(b), strict=True))


def test_cuda_ranks_use_nccl_only_on_gpus_of_their_own() -> None:
    """NCCL refuses two ranks on one device: ranks sharing a GPU (``learner_gpus=0.5``) sum on
    gloo, which takes CUDA tensors through host memory."""
    assert backend_for(["GPU-a", "GPU-b"]) == "nccl"
    assert backend_for(["GPU-a", "GPU-a"]) == "gloo"
    assert backend_for(["GPU-a", "GPU-b", "GPU-a"]) == "gloo"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (a CUDA build of torch and a GPU); "
                                                          "this process has none")
def test_a_cuda_group_sharing_one_gpu_ends_where_one_learner_does(batch: SampleBatch) -> None:
    """The law on a GPU: two ranks on one chip (gloo over CUDA tensors) end where one CUDA
    learner on the whole batch does."""
    config = PPOConfig(num_epochs=2, minibatch_size=32, max_grad_norm=0.5)
    single = PPOLearner(ENV, config, seed=1, device="cuda")
    single.train(batch)
    group = run_group(lambda c: PPOLearner(ENV, config, seed=1, device="cuda", collective=c), 2,
                      lambda learner: learner.train(batch))
    assert next(group[0].policy.parameters()).device.type == "cuda"
    for a, b in zip(params(single), params(group[0]), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
    assert all(torch.equal(a, b) for a, b in zip(params(group[0]), params(group[1]), strict=True))


def test_a_rank_that_never_comes_is_an_error_not_a_hang(batch: SampleBatch) -> None:
    """One of two ranks trains; the other never does: the first fails within the timeout,
    naming its rank."""
    rendezvous = Rendezvous.open(2, timeout_s=2.0)
    learner = PPOLearner(ENV, PPOConfig(num_epochs=1, minibatch_size=64), seed=0,
                         collective=Collective(rendezvous, 0))
    with pytest.raises(RuntimeError, match="rank 0 of 2"):
        learner.train(batch)


def test_bad_ranks_are_refused() -> None:
    rendezvous = Rendezvous.open(2)
    with pytest.raises(ValueError, match=r"rank must be in \[0, 2\)"):
        Collective(rendezvous, 2)
    with pytest.raises(ValueError, match="size must be >= 1"):
        Rendezvous.open(0)


def test_a2c_is_not_grouped_silently(batch: SampleBatch) -> None:
    """A2C takes no collective yet: its learner refuses one rather than train alone."""
    with pytest.raises(TypeError):
        A2CLearner(ENV, seed=0, collective=Collective(Rendezvous.open(2), 0))  # type: ignore[call-arg]


def test_weights_start_equal(batch: SampleBatch) -> None:
    """Members are built from one seed: the same initial weights as a single learner."""
    rendezvous = Rendezvous.open(2)
    a = PPOLearner(ENV, seed=4, collective=Collective(rendezvous, 0)).get_weights()
    b = PPOLearner(ENV, seed=4).get_weights()
    assert all(np.array_equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def fragments() -> list[Fragment]:
    worker = RolloutWorker(ENV, num_envs=3, fragment_length=8, seed=5)
    return [worker.sample_fragment() for _ in range(2)]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(algo=st.sampled_from(["impala", "appo"]), sequences=st.integers(1, 6), n=st.integers(2, 3),
       normalize=st.booleans())
def test_a_vtrace_group_ends_where_one_learner_does(fragments: list[Fragment], algo: str, sequences: int,
                                                    n: int, normalize: bool) -> None:
    """The law, for IMPALA and APPO: minibatches of whole sequences, each rank its share of
    them (a minibatch of fewer sequences than ranks leaves a rank none); advantages
    standardized over the whole minibatch."""
    cls: Any = IMPALALearner if algo == "impala" else APPOLearner
    config_cls: Any = IMPALAConfig if algo == "impala" else APPOConfig
    config = config_cls(num_epochs=2, minibatch_size=8 * sequences, normalize_advantages=normalize)
    single = cls(ENV, config, seed=1)
    alone = single.train(fragments)
    reports: list[Any] = []
    group = run_group(lambda c: cls(ENV, config, seed=1, collective=c), n,
                      lambda learner: reports.append(learner.train(fragments)))
    for a, b in zip(params(single), params(group[0]), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)
    for other in group[1:]:
        assert all(torch.equal(a, b) for a, b in zip(params(group[0]), params(other), strict=True))
    for report in reports:
        assert report.num_updates == alone.num_updates
        assert report.rho_mean == pytest.approx(alone.rho_mean, rel=1e-4)
        assert report.grad_norm == pytest.approx(alone.grad_norm, rel=1e-4, abs=1e-6)


@pytest.fixture(scope="module")
def transitions() -> TransitionBatch:
    return QRolloutWorker(ENV, num_envs=2, fragment_length=40, seed=2, epsilon=1.0, n_step=3).sample()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.integers(1, 80), n=st.integers(2, 3), weighted=st.booleans(), steps=st.integers(1, 4))
def test_a_dqn_group_ends_where_one_learner_does(transitions: TransitionBatch, rows: int, n: int,
                                                 weighted: bool, steps: int) -> None:
    """The law, for DQN: ``steps`` optimizer steps on replayed batches (importance-weighted or
    not; a batch of fewer rows than ranks leaves a rank none) end with the parameters and
    target network one learner has, and every member reports the whole batch's priorities."""
    part = transitions.take(slice(0, rows))
    weights = np.linspace(0.2, 1.0, len(part), dtype=np.float32) if weighted else None
    batch = attrs.evolve(part, weights=weights)
    config = DQNConfig(target_update_interval=2)
    single = DQNLearner(ENV, config, seed=1)
    alone = [single.train(batch) for _ in range(steps)]
    reports: dict[int, Any] = {}
    group = run_group(lambda c: DQNLearner(ENV, config, seed=1, collective=c), n,
                      lambda x: reports.update({id(x): [x.train(batch) for _ in range(steps)]}))
    for a, b in zip(single.q_net.parameters(), group[0].q_net.parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)
    for a, b in zip(single.target_net.parameters(), group[0].target_net.parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)
    for other in group[1:]:
        pairs = zip(group[0].q_net.parameters(), other.q_net.parameters(), strict=True)
        assert all(torch.equal(a, b) for a, b in pairs)
    for got in reports.values():
        for (metrics, priorities), (want_metrics, want_priorities) in zip(got, alone, strict=True):
            np.testing.assert_allclose(priorities, want_priorities, rtol=1e-4, atol=1e-5)
            assert metrics.value_loss == pytest.approx(want_metrics.value_loss, rel=1e-4, abs=1e-6)
