"""MAML's inner and outer updates: the worker's inner step equals the same step in-process, the
meta-gradient flows through the inner step, the task env interface, the plan's adaptation."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
import torch

import rxrl
from rxrl import ops
from rxrl.algos.meta import maml
from rxrl.envs import Navigation2DTasks
from rxrl.rl import PolicyConfig
from rxrl.rl.learners.maml import (
    MAMLConfig,
    MAMLLearner,
    MAMLWorker,
    TaskBatch,
    inner_step,
    log_probs,
    with_params,
)

POLICY = PolicyConfig(hidden_sizes=(16, 16), init_log_std=-1.0)


def _worker(config: MAMLConfig | None = None, **kwargs: int) -> MAMLWorker:
    return MAMLWorker(Navigation2DTasks(num_envs=5, horizon=20, seed=1), config or MAMLConfig(), 2, POLICY,
                      torch_threads=None, **kwargs)


def test_the_inner_step_on_a_worker_equals_the_same_step_in_process() -> None:
    worker = _worker()
    task = worker.env.sample_tasks(1)[0]
    batch = worker.adapt(task)
    learner = MAMLLearner("rxrl/Navigation2D-v0", MAMLConfig(), POLICY)
    learner.set_weights(worker.get_weights())  # (equal already: both from seed 0)
    theta = inner_step(learner.policy, batch.pre, MAMLConfig().inner_lr, create_graph=True)
    adapted = worker.adapted.get_weights()
    for name, t in theta.items():
        np.testing.assert_allclose(t.detach().numpy(), adapted[name], rtol=1e-6, atol=1e-7)
    assert not np.allclose(adapted["pi_head.bias"], worker.get_weights()["pi_head.bias"])
    # the post-adaptation episodes were sampled with theta': their log-probs are theta''s
    post = batch.post
    logp = log_probs(learner.policy, theta, torch.as_tensor(post.obs), torch.as_tensor(post.actions))
    np.testing.assert_allclose(logp.detach().numpy(), batch.post.logp, rtol=1e-4, atol=1e-4)


def _meta_gradient(config: MAMLConfig, tasks: list[TaskBatch]) -> dict[str, torch.Tensor]:
    learner = MAMLLearner("rxrl/Navigation2D-v0", config, POLICY)
    loss, _, _ = learner.surrogate(tasks)
    names = [n for n, _ in learner.policy.named_parameters()]
    grads = torch.autograd.grad(loss, list(learner.policy.parameters()), allow_unused=True)
    return {n: g for n, g in zip(names, grads, strict=True) if g is not None}


def test_the_meta_gradient_flows_through_the_inner_step() -> None:
    tasks = _worker().adapt_and_sample()
    second = _meta_gradient(MAMLConfig(), tasks)
    # first order: the same surrogate with theta' held fixed (its gradient taken at theta')
    learner = MAMLLearner("rxrl/Navigation2D-v0", MAMLConfig(), POLICY)
    first: dict[str, torch.Tensor] = {}
    for tb in tasks:
        theta = {n: t.detach().requires_grad_(True)
                 for n, t in inner_step(learner.policy, tb.pre, MAMLConfig().inner_lr).items()}
        post = tb.post
        logp = log_probs(learner.policy, theta, torch.as_tensor(post.obs), torch.as_tensor(post.actions))
        ratio = logp.exp() / torch.as_tensor(post.logp).exp()
        loss = -(ratio * torch.as_tensor(post.advantages)).mean()
        for (n, t), g in zip(theta.items(), torch.autograd.grad(loss, list(theta.values())), strict=True):
            first[n] = first.get(n, torch.zeros_like(t)) + g / len(tasks)
    assert set(first) <= set(second)
    differs = [n for n in first if not torch.allclose(first[n], second[n], rtol=1e-3, atol=1e-6)]
    assert differs, "second-order equals first-order: nothing flowed through the inner step"
    # ... and with a vanishing inner step the two agree
    tiny = MAMLConfig(inner_lr=1e-9)
    small = _meta_gradient(tiny, tasks)
    plain = _meta_gradient(attrs.evolve(tiny, meta_gradient=False), [
        TaskBatch(tb.task, tb.post, tb.post) for tb in tasks])
    for n in plain:
        torch.testing.assert_close(small[n], plain[n], rtol=1e-3, atol=1e-6)


def test_the_meta_update_changes_only_the_policy_and_reports_its_steps() -> None:
    tasks = _worker().adapt_and_sample()
    learner = MAMLLearner("rxrl/Navigation2D-v0", MAMLConfig(num_epochs=2), POLICY)
    before = learner.get_weights()
    report = learner.meta_update(tasks)
    after = learner.get_weights()
    assert report.num_updates == 2 and report.env_steps_trained == 2 * 2 * 5 * 20
    assert not np.array_equal(before["pi_head.bias"], after["pi_head.bias"])
    assert np.array_equal(before["vf_head.weight"], after["vf_head.weight"])  # the critic is not adapted


def test_task_envs_draw_seeded_tasks_and_set_them() -> None:
    a, b = Navigation2DTasks(seed=3).sample_tasks(4), Navigation2DTasks(seed=3).sample_tasks(4)
    assert a == b and len(set(a)) == 4 and all(-0.5 <= x <= 0.5 for goal in a for x in goal)
    env = Navigation2DTasks(num_envs=2, horizon=3)
    env.set_task((0.1, 0.0))
    env.reset()
    obs, rewards, _, _ = env.step(np.array([[0.5, 0.0], [0.0, 0.0]]))
    assert obs[0].tolist() == pytest.approx([0.1, 0.0]) and rewards.tolist() == pytest.approx([0.0, -0.1])
    with pytest.raises(ValueError, match=r"a navigation task is a goal \(x, y\)"):
        env.set_task((1.0,))


def test_with_params_replaces_only_the_adapted_parameters() -> None:
    worker = _worker()
    theta = {"pi_head.bias": torch.ones(2)}
    weights = with_params(worker.policy, theta)
    assert weights["pi_head.bias"].tolist() == [1.0, 1.0]
    assert np.array_equal(weights["pi_head.weight"], worker.get_weights()["pi_head.weight"])


def test_the_maml_plan_adapts_on_the_workers_and_improves_after_adaptation() -> None:
    config = maml.MAML(num_workers=2, num_envs_per_worker=5, tasks_per_worker=3, policy=POLICY)
    records = list(rxrl.run(maml.plan(config) | ops.take(4)))
    assert [r.env_steps_sampled for r in records] == [(i + 1) * 2 * 2 * 3 * 5 * 100 for i in range(4)]
    gains = [r.post_adaptation_return - r.pre_adaptation_return for r in records]
    assert np.mean(gains) > 0  # one inner step already helps the initial policy find its goal


def test_an_env_without_a_task_distribution_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="maml needs a task-distribution env"):
        maml.groups(maml.MAML(env="CartPole-v1"))
