"""The torch-free rollout path (`rxrl.rl.models.forward`): a worker acting with numpy weights samples
exactly what the torch policy samples, through weight updates and normalization, and never
imports torch; `ray_init_options` keeps torch out of such workers' processes."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import torch

import rxrl
from rxrl import ops
from rxrl.algos.on_policy import a2c, ppo
from rxrl.algos.vtrace import impala
from rxrl.rl import EnvSpaces, PolicyConfig, PPOConfig, RolloutWorker, SampleBatch, make_policy
from rxrl.rl.data.batch import COLUMNS
from rxrl.rl.data.running_stats import NormStats
from rxrl.rl.models.forward import NumpyActorCritic
from rxrl.rl.models.initial import weights_of
from rxrl.rl.workers.rollout import RolloutWorkerFactory
from rxrl.training.setup import TORCH_FREE_PRELOAD, WORKER_PRELOAD, ray_init_options
from tests.cli.helpers import ROOT, environment
from tests.rl import torch_probe

CASES = {
    "categorical, Box observations": ("CartPole-v1", PolicyConfig()),
    "Gaussian, normalized": ("Pendulum-v1", PolicyConfig(normalize_obs=True, scale_rewards=True)),
    "one-hot observations, shared trunk": ("FrozenLake-v1", PolicyConfig(shared_trunk=True)),
}


def _same(a: SampleBatch, b: SampleBatch) -> None:
    for name in COLUMNS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_array_equal(a.episode_returns, b.episode_returns)
    assert a.env_steps == b.env_steps
    assert (a.norm_stats is None) == (b.norm_stats is None)
    if isinstance(a.norm_stats, NormStats) and isinstance(b.norm_stats, NormStats):
        for part in ("obs", "returns"):
            x, y = getattr(a.norm_stats, part), getattr(b.norm_stats, part)
            assert (x is None) == (y is None)
            if x is not None and y is not None:
                assert x.count == y.count
                np.testing.assert_array_equal(x.mean, y.mean)
                np.testing.assert_array_equal(x.var, y.var)


@pytest.mark.parametrize("case", list(CASES))
def test_a_worker_with_numpy_weights_samples_what_the_torch_worker_samples(case: str) -> None:
    """Law: for the same seed, a `RolloutWorker` given the initial weights (`NumpyActorCritic`,
    no torch) returns the same batches, bit for bit, as one that builds its torch policy from
    the seed, and still does after both load new weights, normalization statistics included."""
    env, config = CASES[case]
    torch_worker = RolloutWorker(env, num_envs=4, fragment_length=16, seed=3, worker_index=1, policy=config)
    spaces = torch_worker.spaces
    initial = make_policy(spaces.observation, spaces.action, config, 3).get_weights()
    numpy_worker = RolloutWorker(env, num_envs=4, fragment_length=16, seed=3, worker_index=1, policy=config,
                                 weights=initial)
    assert isinstance(numpy_worker.policy, NumpyActorCritic)
    rng = np.random.default_rng(0)
    for _ in range(3):
        _same(torch_worker.sample(), numpy_worker.sample())
        new: dict[str, npt.NDArray[Any]] = {
            k: (v + rng.normal(0, 0.3, v.shape)).astype(v.dtype) if k.endswith(("weight", "bias", "log_std"))
            else v for k, v in torch_worker.get_weights().items()}
        if config.normalizes:  # statistics as a learner's merge leaves them
            new["normalizer.obs_mean"] = rng.normal(0, 1, new["normalizer.obs_mean"].shape)
            new["normalizer.obs_var"] = rng.uniform(0.5, 2.0, new["normalizer.obs_var"].shape)
            new["normalizer.return_var"] = np.array(rng.uniform(0.5, 5.0))
        torch_worker.set_weights(new)
        numpy_worker.set_weights(new)
    mine = numpy_worker.get_weights()
    assert all(np.array_equal(v, mine[k]) for k, v in torch_worker.get_weights().items())


def test_numpy_weights_are_validated_as_torch_weights_are_and_cannot_give_gradients() -> None:
    worker = RolloutWorker("CartPole-v1", num_envs=2, fragment_length=4, weights=ppo_weights())
    weights = worker.get_weights()
    with pytest.raises(ValueError, match=r"shape mismatch.*vf_head\.bias"):
        worker.set_weights({**weights, "vf_head.bias": np.zeros(2, np.float32)})
    with pytest.raises(ValueError, match=r"missing entries \['vf_head.bias'\]"):
        worker.set_weights({k: v for k, v in weights.items() if k != "vf_head.bias"})
    with pytest.raises(ValueError, match="compute_gradients needs a torch policy"):
        worker.compute_gradients(worker.sample())


def ppo_weights() -> dict[str, npt.NDArray[np.float32]]:
    """PPO's initial CartPole weights."""
    spaces = EnvSpaces.of("CartPole-v1")
    return make_policy(spaces.observation, spaces.action, PolicyConfig(), 0).get_weights()


def test_what_a_torch_free_worker_imports_does_not_import_torch() -> None:
    code = ("import sys, rxrl.rl.workers.rollout, rxrl.rl.workers.reply, rxrl.rl.models.forward, "
            "rxrl.rl.data.running_stats, rxrl.rl; "
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environment(), capture_output=True,
                          text=True, timeout=120, check=True)
    assert done.stdout.strip() == "False"


def test_ppo_and_a2c_plans_preload_no_torch_and_others_do() -> None:
    """Where most actors are torch-free rollout workers (PPO's and A2C's), the local Ray's
    processes preload no torch; a plan of torch actors keeps the torch preload."""
    for algo in (ppo.plan(ppo.PPO()), a2c.plan(a2c.A2C())):
        assert ray_init_options(algo)["_system_config"]["preload_python_modules"] == list(TORCH_FREE_PRELOAD)
    options = ray_init_options(impala.plan(impala.IMPALA()))
    assert options["_system_config"]["preload_python_modules"] == list(WORKER_PRELOAD)


def test_a_learner_on_the_driver_gets_no_worker_process() -> None:
    """The local Ray starts a worker process per actor (`ray_init_options`); a learner hosted
    on the driver is not one."""
    n = (os.cpu_count() or 1) + 1  # more actors than cores: the count decides num_cpus
    on_driver = ray_init_options(ppo.plan(ppo.PPO(num_workers=n)))
    in_actor = ray_init_options(ppo.plan(ppo.PPO(num_workers=n, learner_placement="actor")))
    assert (on_driver["num_cpus"], in_actor["num_cpus"]) == (n, n + 1)


@pytest.mark.timeout(300)
def test_ppo_on_ray_trains_with_rollout_workers_that_never_import_torch(ray_session: None) -> None:
    config = ppo.PPO(num_envs_per_worker=2, fragment_length=16, train_batch_size=64,
                     learner=PPOConfig(num_epochs=1, minibatch_size=32))
    g = ppo.groups(config)
    plan = (ppo.plan(config, g) | ops.take(2)
            | ops.call(g.workers, torch_probe.torch_loaded, route=torch_probe.To(0))
            | ops.call(g.workers, torch_probe.torch_loaded, route=torch_probe.To(1)))
    with rxrl.run(plan, "ray") as run:
        seen = list(run)
    assert seen and all(record == [False, False] for record in seen), seen


def test_initial_weights_do_not_depend_on_the_thread_count() -> None:
    """The driver builds torch-free workers' initial weights at its own thread count, a
    learner at ``learner_threads``: orthogonal init differs in its last bits between 1 and
    2 threads unless it runs on one (`rxrl.rl.models.policy.one_thread`)."""
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        two = ppo_weights()
        factory = ppo.groups(ppo.PPO()).workers.make
        assert isinstance(factory, RolloutWorkerFactory) and factory.weights is not None
        built = weights_of(factory.weights)  # built now, at 2 threads (they are built when first needed)
        torch.set_num_threads(1)
        one = ppo_weights()
    finally:
        torch.set_num_threads(threads)
    for name, value in one.items():
        assert np.array_equal(value, two[name]) and np.array_equal(value, built[name]), name


def test_both_policies_refuse_to_normalize_one_hot_observations() -> None:
    spaces = EnvSpaces.of("FrozenLake-v1")
    config = PolicyConfig(normalize_obs=True)
    with pytest.raises(ValueError, match="normalize_obs needs a Box observation space"):
        make_policy(spaces.observation, spaces.action, config)
    weights = make_policy(spaces.observation, spaces.action).get_weights()
    with pytest.raises(ValueError, match="normalize_obs needs a Box observation space"):
        NumpyActorCritic(spaces.observation, spaces.action, config, weights, 0)
