"""Learners on a device (issue 14, item 11): ``"cpu"``, ``"cuda"``, ``"auto"``.

What leaves a learner is on the CPU whatever its device (numpy weights, CPU tensors in a
``state_dict``), a ``state_dict`` loads on either, and a learner that will use CUDA asks Ray
for a GPU. The CPU tests run everywhere; the CUDA test needs a CUDA build of torch and a GPU.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pytest
import torch

from rxrl.algos.common import device_of
from rxrl.algos.on_policy.ppo import PPO, groups
from rxrl.rl.config import A2CConfig, PPOConfig
from rxrl.rl.data.batch import SampleBatch
from rxrl.rl.learners.actor_critic import A2CLearner, PPOLearner, resolve_device
from rxrl.rl.objectives.losses import a2c_gradients
from rxrl.rl.workers.rollout import RolloutWorker

CUDA = torch.cuda.is_available()
CONFIG = PPOConfig(num_epochs=2, minibatch_size=128)


@pytest.fixture(scope="module")
def batch() -> SampleBatch:
    return RolloutWorker("CartPole-v1", num_envs=4, fragment_length=64, seed=0).sample()


def tensors(state: Any) -> list[torch.Tensor]:
    """Every tensor inside a nested state dict."""
    if isinstance(state, torch.Tensor):
        return [state]
    if isinstance(state, dict):
        return [t for v in state.values() for t in tensors(v)]
    if isinstance(state, list | tuple):
        return [t for v in state for t in tensors(v)]
    return []


def test_devices_resolve_or_are_refused_in_one_line() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cuda" if CUDA else "cpu")
    with pytest.raises(ValueError, match=r"^device must be 'cpu', 'cuda' or 'auto', got 'tpu'$"):
        resolve_device("tpu")
    if not CUDA:
        with pytest.raises(ValueError, match=r"^device 'cuda': CUDA is not available in this process"):
            PPOLearner("CartPole-v1", device="cuda")


def test_an_auto_learner_without_cuda_trains_exactly_as_a_cpu_learner(batch: SampleBatch) -> None:
    if CUDA:
        pytest.skip("'auto' is CUDA on this machine: test_a_cuda_learner_... covers it")
    cpu, auto = (PPOLearner("CartPole-v1", CONFIG, seed=3, device=d) for d in ("cpu", "auto"))
    cpu.train(batch)
    auto.train(batch)
    assert all(np.array_equal(a, b) for a, b in zip(cpu.get_weights().values(),
                                                    auto.get_weights().values(), strict=True))


def test_a_state_dict_is_a_cpu_copy_that_later_training_does_not_change(batch: SampleBatch) -> None:
    learner = PPOLearner("CartPole-v1", CONFIG, seed=0)
    learner.train(batch)
    state = learner.state_dict()
    saved = [t.clone() for t in tensors(state)]
    assert saved and all(t.device.type == "cpu" for t in tensors(state))
    learner.train(batch)
    assert all(torch.equal(a, b) for a, b in zip(saved, tensors(state), strict=True))


@pytest.mark.parametrize(("device", "gpus"), [("cpu", None), ("cuda", 1), ("auto", 1 if CUDA else None)])
def test_the_learner_actor_asks_ray_for_a_gpu_exactly_when_it_uses_one(device: str,
                                                                      gpus: int | None) -> None:
    config = PPO(learner_device=device, learner_placement="actor")  # type: ignore[arg-type]
    actors = groups(config)
    assert actors.learner.options.get("num_gpus") == gpus
    assert "num_gpus" not in actors.workers.options
    # on the driver (PPO's default) it asks Ray for nothing: it uses the driver's device
    on_driver = groups(PPO(learner_device=device)).learner  # type: ignore[arg-type]
    assert dict(on_driver.options) == {"on_driver": True}
    assert device_of(config) == ("cuda" if gpus else "cpu")


@pytest.mark.skipif(not CUDA, reason="needs CUDA (a CUDA build of torch and a GPU); this "
                                     "process has none")
def test_a_cuda_learner_trains_on_the_gpu_and_hands_out_cpu_values(batch: SampleBatch) -> None:
    gpu = PPOLearner("CartPole-v1", CONFIG, seed=0, device="cuda")
    cpu = PPOLearner("CartPole-v1", CONFIG, seed=0)
    assert next(gpu.policy.parameters()).device.type == "cuda"
    gpu.train(batch)
    weights = gpu.get_weights()
    assert all(isinstance(w, np.ndarray) for w in weights.values())
    state = gpu.state_dict()
    assert all(t.device.type == "cpu" for t in tensors(state))
    cpu.load_state_dict(state)  # a GPU checkpoint loads on the CPU ...
    assert all(np.allclose(cpu.get_weights()[k], w) for k, w in weights.items())
    cpu.train(batch)
    again = PPOLearner("CartPole-v1", CONFIG, seed=0, device="cuda")
    again.load_state_dict(cpu.state_dict())  # ... and a CPU one on the GPU
    again.train(batch)
    on_cpu, on_gpu = A2CLearner("CartPole-v1", seed=0), A2CLearner("CartPole-v1", seed=0, device="cuda")
    grads = a2c_gradients(on_cpu.policy, batch, A2CConfig())  # what an A3C worker sends
    expected = on_cpu.apply_gradients(grads)
    got = on_gpu.apply_gradients(grads)
    assert all(np.allclose(got[k], w, atol=1e-5) for k, w in expected.items())


@pytest.mark.parametrize("num_learners", [1, 2])
def test_learner_gpus_is_what_each_cuda_learner_asks_ray_for(num_learners: int) -> None:
    """``learner_gpus=0.5``: two learners of a group share one GPU (Ray places both on it)."""
    config = PPO(learner_device="cuda", learner_gpus=0.5, learner_placement="actor",
                 learner=PPOConfig(num_learners=num_learners))
    assert groups(config).learner.options.get("num_gpus") == 0.5
    assert groups(attrs.evolve(config, learner_device="cpu")).learner.options.get("num_gpus") is None


@pytest.mark.parametrize("bad", [0, -1, 1.5, float("nan"), float("inf"), True, "1"])
def test_bad_learner_gpus_are_refused_in_one_line(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"^PPO.learner_gpus must be a fraction in \(0, 1\] or a whole "
                                         r"number of GPUs, got "):
        PPO(learner_gpus=bad)


@pytest.mark.parametrize("normalize", [True, False])
def test_minibatches_gathered_on_the_device_train_exactly_as_host_gathered_ones(
        batch: SampleBatch, normalize: bool) -> None:
    """A GPU learner copies the batch to its device once and gathers each minibatch there
    (``gather_on_device``, on by default off the CPU): the same rows in the same order as the
    host's `SampleBatch.minibatches`, so the same training, bit for bit (checked on the CPU)."""
    config = PPOConfig(num_epochs=3, minibatch_size=100, normalize_advantages=normalize)
    host, device = (PPOLearner("CartPole-v1", config, seed=0) for _ in range(2))
    assert not host.gather_on_device
    device.gather_on_device = True
    for _ in range(2):
        a, b = host.train(batch), device.train(batch)
        assert (a.policy_loss, a.value_loss, a.num_updates) == (b.policy_loss, b.value_loss, b.num_updates)
    assert all(np.array_equal(x, y) for x, y in zip(host.get_weights().values(),
                                                    device.get_weights().values(), strict=True))
