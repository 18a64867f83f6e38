"""RLlib 2.60's PPO (new API stack) with the matched settings, or with RLlib's own tuned example.

`matched`: 2 env runners x 8 envs (RLlib's default gymnasium "sync" vectorization: with
gymnasium's native `CartPoleVectorEnv`, which rxrl uses, RLlib 2.60 did not learn at all — the
return stayed ~30 for 100k steps — presumably its NEXT_STEP-only autoreset), fragments of 64,
train batch 1024, 10 epochs of minibatch 256, lr 2e-3, no KL penalty, no value clipping
(`vf_clip_param=inf`), `vf_loss_coeff = vf_coef / 2` (RLlib weights the plain MSE), grad clip
0.5 by global norm, 64x64 tanh with separate value trunk, mean return over the last 100
episodes. `rllib-1env`: the same with one env per env runner (RLlib picks fragments of 512):
with 8 envs per runner RLlib 2.60 did not learn at all here (mean return ~30 after 100k steps,
whatever lr, clipping or entropy), with one it does. `tuned`: RLlib's tuned example for
CartPole (rllib/tuned_examples/ppo/cartpole_ppo.py: lr 3e-4, 6 epochs, vf_loss_coeff 0.01, one
32-unit linear layer shared with the value head) on top of PPOConfig's defaults (2 env runners,
batch 4000, minibatch 128).

Run alone: ``python bench/peer_rllib.py --budget-steps 20000 --seed 0 [--tuned]``.
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import attrs
import ppo_settings as s


def config(m: s.Matched, seed: int, tuned: bool, one_env: bool = False) -> Any:
    """RLlib's `PPOConfig` for the matched settings or for its tuned CartPole example.

    `one_env`: the matched settings with one env per env runner (fragments of
    `train_batch / num_workers`): with 8 envs per runner RLlib 2.60 did not learn here.
    """
    ppo: Any = s.optional("ray.rllib.algorithms.ppo")
    model: Any = s.optional("ray.rllib.core.rl_module.default_model_config")
    cfg = ppo.PPOConfig().environment(m.env).framework("torch").debugging(seed=seed)
    cfg = cfg.reporting(metrics_num_episodes_for_smoothing=100).callbacks(on_episode_end=log_episode_return)
    if tuned:
        return cfg.training(lr=0.0003, num_epochs=6, vf_loss_coeff=0.01).rl_module(
            model_config=model.DefaultModelConfig(fcnet_hiddens=[32], fcnet_activation="linear",
                                                  vf_share_layers=True))
    cfg = cfg.env_runners(num_env_runners=m.num_workers,
                          num_envs_per_env_runner=1 if one_env else m.envs_per_worker,
                          rollout_fragment_length="auto" if one_env else m.fragment_length)
    cfg = cfg.training(
        lr=m.lr, gamma=m.gamma, lambda_=m.lam, clip_param=m.clip_coef, vf_clip_param=math.inf,
        vf_loss_coeff=m.vf_coef / 2, entropy_coeff=m.ent_coef, grad_clip=m.max_grad_norm,
        grad_clip_by="global_norm", num_epochs=m.num_epochs, minibatch_size=m.minibatch_size,
        train_batch_size_per_learner=m.train_batch, use_kl_loss=False,
    )
    return cfg.rl_module(model_config=model.DefaultModelConfig(
        fcnet_hiddens=list(m.hidden), fcnet_activation=m.activation, vf_share_layers=False))


#: where `log_episode_return` puts each finished episode's return in RLlib's results
RETURNS_KEY = "bench_episode_returns"


def log_episode_return(*, episode: Any, metrics_logger: Any, **_: Any) -> None:
    """RLlib callback (runs on the env runners): report every finished episode's return.

    RLlib's own `episode_return_mean` is not the mean of the last 100 episodes (each env
    runner smooths over its own window and the driver merges those), so the mean that the
    other systems report is computed from these on the driver.
    """
    metrics_logger.log_value(RETURNS_KEY, float(episode.get_return()), reduce="item_series")


def run(m: s.Matched, seed: int, budget_steps: int, tuned: bool = False,
        one_env: bool = False) -> s.RunRecord:
    """Train until `budget_steps` env steps were sampled; return the record of the run."""
    import ray

    name = "rllib-tuned" if tuned else "rllib-1env" if one_env else "rllib"
    settings = {"rllib_tuned_example": True} if tuned else attrs.asdict(m)
    record = s.RunRecord(name, seed, budget_steps, settings,
                         versions=s.versions(["ray", "torch", "gymnasium", "numpy"]))
    start_ray()
    try:
        algo = config(m, seed, tuned, one_env).build_algo()
        learner_time = _time_learner_updates(algo)
        record.setup_s = s.since_start()
        start = time.perf_counter()
        returns: collections.deque[float] = collections.deque(maxlen=100)
        while record.running():
            result = algo.train()
            sampled = int(_get(result, "env_runners", "num_env_steps_sampled_lifetime"))
            # PPO trains on everything it samples (RLlib's own "trained" counter counts each
            # epoch's passes)
            finished = _get(result, "env_runners", RETURNS_KEY, default=[])
            # a list of returns, or a bare number when one episode ended
            returns.extend(float(r) for r in (finished if isinstance(finished, list) else [finished]))
            record.learner_s = learner_time[0]
            mean = sum(returns) / len(returns) if returns else math.nan
            record.add(time.perf_counter() - start, sampled, sampled, mean)
        algo.stop()
    finally:
        ray.shutdown()
    return record


def start_ray() -> None:
    """Start the private local Ray every RLlib peer runs on (`ppo_settings.RAY_INIT`), with
    one torch thread here (the local learner runs in this process, like every other learner
    on one thread) and bench/ on the env runners' path (they import this module's callback)."""
    import ray
    import torch

    torch.set_num_threads(1)
    s.clean_ray_env()
    bench = str(Path(__file__).resolve().parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (bench, os.environ.get("PYTHONPATH")) if p)
    ray.init(**s.RAY_INIT)


def _time_learner_updates(algo: Any) -> list[float]:
    """Accumulate the time spent in `algo.learner_group.update` (SGD and RLlib's learner
    connectors, GAE included) into the returned one-element list.

    RLlib's own `timers/learner_update_timer` is an exponential moving average, not a sum.
    """
    total = [0.0]
    update = algo.learner_group.update

    def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return update(*args, **kwargs)
        finally:
            total[0] += time.perf_counter() - began

    algo.learner_group.update = timed
    return total


def _get(result: dict[str, Any], *keys: str, default: Any = None) -> Any:
    node: Any = result
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            if default is not None:
                return default
            raise KeyError(f"RLlib result has no {'/'.join(keys)}; top-level keys: {sorted(result)}")
        node = node[key]
    return node


def main(argv: list[str]) -> None:
    """Run once and print the summary line (and write JSON with ``--out``)."""
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--tuned", action="store_true", help="RLlib's tuned CartPole example")
        parser.add_argument("--one-env", action="store_true", help="matched, but 1 env per env runner")

    s.runner_main(argv, __doc__ or "", lambda args, m: run(m, args.seed, args.budget_steps, args.tuned,
                                                           args.one_env), arguments)


if __name__ == "__main__":
    main(sys.argv[1:])
