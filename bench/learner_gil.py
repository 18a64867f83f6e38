"""The DQN learner's step on a thread of its own CPU while another thread holds the GIL part of the time.

A learner on a thread of the driver (DQN's ``learner_placement="auto"`` on MinAtar) has a CPU of
its own (``learner_cores=1``) but shares the interpreter with the driver's routing. This times
`DQNLearner.train` (the matched MinAtar settings, as ``bench/dqn_step.py --net minatar``) on a
thread pinned to the last CPU while the main thread, on the first, runs Python for ``--chunk-ms``
then sleeps, busy ``--duty`` of the time. ``--load cpu`` instead runs a torch and numpy loop in
another process on the first CPU (no shared interpreter): what the other CPU's work costs the
learner's CPU by itself. Linux only (CPU affinity).

    python bench/learner_gil.py --duty 0 0.35 0.6 [--chunk-ms 0.3] [--switch-interval-s 5e-5]
    python bench/learner_gil.py --load cpu
    python bench/learner_gil.py --step scripted --duty 0 0.35

``--step scripted`` times, in place of `DQNLearner.train`, the same step as one TorchScript
function (`scripted_step`: the forwards, the Huber loss, the gradients by
``torch.autograd.grad`` and torch's fused Adam, the TD errors and the explained variance's two
variances as tensors), checked against the learner's Q-net on the first batch: a probe of
how much of the step's time under a busy main thread is its returns into Python (one call
instead of ~50 ops). It is not the learner's code.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from typing import Any

import dqn_step
import numpy as np
import torch
from torch.nn.functional import conv2d, linear

LOAD = """
import numpy as np, torch
torch.set_num_threads(1)
net = torch.nn.Sequential(torch.nn.Conv2d(4, 16, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                          torch.nn.Linear(1024, 128), torch.nn.ReLU(), torch.nn.Linear(128, 3))
x, buf, rng = torch.rand(1, 4, 10, 10), np.zeros((100000, 4, 10, 10), np.uint8), np.random.default_rng(0)
while True:
    with torch.no_grad():
        net(x)
    buf[rng.integers(0, 100000, 32)].sum()
"""


@torch.jit.script
def minatar_q(obs: torch.Tensor, w: list[torch.Tensor]) -> torch.Tensor:
    """The MinAtar CNN's Q-values (conv 16 3x3, ReLU, linear 128, ReLU, linear) from its
    parameters in module order."""
    x = torch.relu(conv2d(obs.float(), w[0], w[1]))
    return linear(torch.relu(linear(x.flatten(1), w[2], w[3])), w[4], w[5])


@torch.jit.script
def scripted_step(obs: torch.Tensor, next_obs: torch.Tensor, actions: torch.Tensor, rewards: torch.Tensor,
                  terminateds: torch.Tensor, w: list[torch.Tensor], target: list[torch.Tensor],
                  exp_avgs: list[torch.Tensor], exp_avg_sqs: list[torch.Tensor], steps: list[torch.Tensor],
                  lr: float, gamma: float, eps: float) -> list[torch.Tensor]:
    """One DQN step on the MinAtar CNN (`minatar_q`) as one call:
    the loss, the rows' |TD|, the targets' variance and the residuals' variance."""
    q = minatar_q(obs, w)
    with torch.no_grad():
        next_q = minatar_q(next_obs, target)
        targets = rewards + gamma * next_q.max(1)[0] * (1.0 - terminateds)
    q_taken = q.gather(1, actions.unsqueeze(1)).squeeze(1)
    loss = torch.nn.functional.huber_loss(q_taken, targets)
    grads: list[torch.Tensor] = []
    for g in torch.autograd.grad([loss], w):
        assert g is not None
        grads.append(g)
    no_max: list[torch.Tensor] = []
    torch._fused_adam_(w, grads, exp_avgs, exp_avg_sqs, no_max, steps, lr=lr, beta1=0.9, beta2=0.999,
                       weight_decay=0.0, eps=eps, amsgrad=False, maximize=False)
    q_taken = q_taken.detach()
    return [loss.detach(), (q_taken - targets).abs(), targets.var(), (targets - q_taken).var()]


class ScriptedLearner:
    """`scripted_step` on a copy of a `DQNLearner`'s weights (a probe: no target updates)."""

    def __init__(self, learner: Any) -> None:
        self.w = [p.detach().clone().requires_grad_(True) for p in learner.q_net.parameters()]
        self.target = [p.detach().clone() for p in learner.target_net.parameters()]
        self.exp_avgs = [torch.zeros_like(p) for p in self.w]
        self.exp_avg_sqs = [torch.zeros_like(p) for p in self.w]
        self.steps = [torch.zeros(()) for _ in self.w]
        self.lr, self.gamma, self.eps = learner.config.lr, learner.config.gamma, learner.config.adam_eps

    def train(self, b: Any) -> tuple[float, np.ndarray]:
        """One step; the loss and the rows' |TD| (what the learner's caller reads)."""
        out = scripted_step(torch.from_numpy(b.obs), torch.from_numpy(b.next_obs),
                            torch.from_numpy(b.actions.astype(np.int64)), torch.from_numpy(b.rewards),
                            torch.from_numpy(b.terminateds.astype(np.float32)), self.w, self.target,
                            self.exp_avgs, self.exp_avg_sqs, self.steps, self.lr, self.gamma, self.eps)
        return float(out[0]), out[1].detach().numpy()


def check_forward(learner: Any, obs: np.ndarray) -> None:
    """The scripted step's forward is the learner's Q-net (its parameters in module order)."""
    with torch.no_grad():
        q = minatar_q(torch.from_numpy(obs), [p.detach() for p in learner.q_net.parameters()])
        expected = learner.q_net(torch.from_numpy(obs))
    if not torch.allclose(q, expected, atol=1e-5):
        raise SystemExit("the scripted forward is not the learner's Q-net")


def time_steps(cpu: int, passes: int = 5, step: str = "eager") -> list[float]:
    """Milliseconds a step, per pass of 64 batches, on a thread pinned to ``cpu``."""
    os.sched_setaffinity(threading.get_native_id(), {cpu})
    learner, batches = dqn_step.learner_and_batches("minatar", np.random.default_rng(0))
    trainer: Any = learner
    if step == "scripted":
        check_forward(learner, batches[0].obs)
        trainer = ScriptedLearner(learner)
    for b in batches[:20]:
        trainer.train(b)
    out = []
    for _ in range(passes):
        began = time.perf_counter()
        for b in batches:
            trainer.train(b)
        out.append((time.perf_counter() - began) / len(batches) * 1e3)
    return out


def with_busy_main_thread(duty: float, chunk_ms: float, cpus: tuple[int, int], step: str = "eager"
                          ) -> list[float]:
    """`time_steps` on a thread while this (main) thread runs Python ``duty`` of the time."""
    got: list[float] = []
    worker = threading.Thread(target=lambda: got.extend(time_steps(cpus[1], step=step)))
    os.sched_setaffinity(0, {cpus[0]})
    worker.start()
    x = 0
    while worker.is_alive():
        if duty <= 0:
            time.sleep(0.01)
            continue
        began = time.perf_counter()
        while time.perf_counter() - began < chunk_ms / 1e3:
            x += 1
        time.sleep(chunk_ms / 1e3 * (1 - duty) / duty)
    worker.join()
    return got


def with_cpu_load(cpus: tuple[int, int]) -> list[float]:
    """`time_steps` alone, then with a torch and numpy loop in another process on the other CPU."""
    load = subprocess.Popen(["taskset", "-c", str(cpus[0]), sys.executable, "-c", LOAD])
    try:
        time.sleep(2)
        return time_steps(cpus[1])
    finally:
        load.kill()
        load.wait()


def main(argv: list[str]) -> None:
    """Print the step's best and median milliseconds per setting."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--duty", type=float, nargs="*", default=[0.0, 0.35, 0.6])
    parser.add_argument("--chunk-ms", type=float, default=0.3)
    parser.add_argument("--switch-interval-s", type=float, default=None)
    parser.add_argument("--load", choices=["gil", "cpu"], default="gil")
    parser.add_argument("--step", choices=["eager", "scripted"], nargs="*", default=["eager"],
                        help="the learner's step, or the same step as one TorchScript call")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.switch_interval_s is not None:
        sys.setswitchinterval(args.switch_interval_s)
    available = sorted(os.sched_getaffinity(0))
    if len(available) < 2:
        raise SystemExit("needs 2 CPUs")
    cpus = (available[0], available[-1])
    if args.load == "cpu":
        alone = time_steps(cpus[1])
        loaded = with_cpu_load(cpus)
        for name, ms in (("other CPU idle", alone), ("other CPU loaded (another process)", loaded)):
            print(f"{name}: best {min(ms):.3f} ms, median {sorted(ms)[len(ms) // 2]:.3f} ms a step")
        return
    for duty in args.duty:
        for step in args.step:  # alternated at each duty
            ms = with_busy_main_thread(duty, args.chunk_ms, cpus, step)
            print(f"{step} step, main thread busy {duty:.0%} in {args.chunk_ms} ms chunks: "
                  f"best {min(ms):.3f} ms, median {sorted(ms)[len(ms) // 2]:.3f} ms a step", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
