"""Continuous control side by side: rxrl's PPO and SAC against CleanRL-style PPO and SB3.

Tasks (``TASKS``): ``ppo-hopper`` (PPO, Hopper-v5, target 2000, CleanRL's settings, which are
rxrl's ``ppo.MUJOCO``), ``sac-pendulum`` (SAC, Pendulum-v1, target -200) and ``sac-hopper``
(SAC, Hopper-v5, target 2000), SAC with SB3's settings on both systems (one learning rate
of 3e-4 for critics, actor and temperature; batches of 256; one update per env step), and
``sac-hopper-cleanrl``: rxrl's SAC defaults (CleanRL's learning rates: critics 1e-3, actor
3e-4, temperature 1e-3), SB3 given the same three.

Each run is its own subprocess (``--one``), the systems alternate within each seed, and every
run reports: wall time, the mean return of the last 100 training episodes at the budget, the
env steps and seconds until that mean first reached the target, and the mean return of 10
deterministic evaluation episodes of the final policy (rxrl: ``rxrl eval``). rxrl runs through
its console script on the default (Ray) backend with 2 workers, as a user runs it.

    python bench/continuous.py ppo-hopper --seeds 0 --systems rxrl,cleanrl,sb3
    python bench/continuous.py sac-pendulum --seeds 0,1,2 --systems rxrl,sb3
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

HERE = Path(__file__).parent


@attrs.frozen
class Task:
    """One benchmark: an algorithm on an env, its budget and target, rxrl's extra settings."""

    algo: str
    env: str
    budget: int
    target: float
    rxrl_sets: tuple[str, ...] = ()
    #: SB3's SAC learning rates (critics, actor, temperature); None: its one lr, 3e-4
    sb3_lrs: tuple[float, float, float] | None = None


#: SB3's SAC settings, given to rxrl: one lr for everything (rxrl's defaults: 1e-3 critics)
SB3_SAC = ("learner.lr=3e-4", "learner.alpha_lr=3e-4")
TASKS = {
    "ppo-hopper": Task("ppo", "Hopper-v5", 1_000_000, 2000.0),
    "sac-pendulum": Task("sac", "Pendulum-v1", 20_000, -200.0, SB3_SAC),
    "sac-hopper": Task("sac", "Hopper-v5", 300_000, 2000.0, SB3_SAC),
    # rxrl's defaults (CleanRL's lrs), and SB3 given the same three lrs (`_SplitLrSAC`)
    "sac-hopper-cleanrl": Task("sac", "Hopper-v5", 300_000, 2000.0, (), (1e-3, 3e-4, 1e-3)),
}

Curve = list[tuple[int, float, float]]  # (env steps, mean return of the last 100 episodes, s)


def run_rxrl(task: Task, seed: int, budget: int) -> dict[str, Any]:
    """``rxrl train`` then ``rxrl eval``, through the console script."""
    rxrl = shutil.which("rxrl", path=str(Path(sys.executable).parent))
    assert rxrl is not None, "the rxrl console script is not installed next to this python"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        sets = [a for s in task.rxrl_sets for a in ("--set", s)]
        start = time.perf_counter()
        subprocess.run([rxrl, "train", task.algo, "--env", task.env, "--steps", str(budget),
                        "--seed", str(seed), "--out", str(out), *sets], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        with (out / "metrics.csv").open() as f:
            rows = list(csv.DictReader(f))
        curve = [(int(r["env_steps_sampled"]), float(r["episode_return_mean"] or "nan"),
                  float(r["time_s"])) for r in rows]
        done = subprocess.run([rxrl, "eval", str(out), "--episodes", "10", "--seed", str(seed + 1000)],
                              check=True, capture_output=True, text=True)
        match = re.search(r"mean return (-?[\d.]+)", done.stdout)
        assert match, done.stdout
    return {"curve": curve, "wall_s": wall, "eval_mean": float(match.group(1))}


def run_cleanrl(task: Task, seed: int, budget: int) -> dict[str, Any]:
    """The CleanRL-style single-file PPO (``cleanrl_ppo_continuous.py``)."""
    assert task.algo == "ppo", "the CleanRL-style runner is PPO only"
    sys.path.insert(0, str(HERE))
    import cleanrl_ppo_continuous

    result = cleanrl_ppo_continuous.run(task.env, seed, budget)
    return {"curve": result["curve"], "wall_s": result["wall_s"],
            "eval_mean": sum(result["eval"]) / len(result["eval"])}


def run_sb3(task: Task, seed: int, budget: int) -> dict[str, Any]:
    """SB3's PPO (VecNormalize, CleanRL's settings) or SAC (its defaults, batches of 256)."""
    import numpy as np
    import torch

    sys.path.insert(0, str(HERE))
    from ppo_settings import optional  # SB3 is benchmark-only: untyped on purpose

    sb3: Any = optional("stable_baselines3")
    base_callback: Any = optional("stable_baselines3.common.callbacks").BaseCallback
    make_vec_env: Any = optional("stable_baselines3.common.env_util").make_vec_env
    vec_normalize: Any = optional("stable_baselines3.common.vec_env").VecNormalize

    torch.set_num_threads(1)
    start = time.perf_counter()
    curve: Curve = []
    env: Any = make_vec_env(task.env, n_envs=1, seed=seed)
    model: Any
    if task.algo == "ppo":
        env = vec_normalize(env, norm_obs=True, norm_reward=True, clip_obs=10.0, clip_reward=10.0,
                           gamma=0.99)
        model = sb3.PPO("MlpPolicy", env, learning_rate=lambda left: 3e-4 * left, n_steps=2048,
                        batch_size=64, n_epochs=10, gamma=0.99, gae_lambda=0.95, clip_range=0.2,
                        clip_range_vf=0.2, ent_coef=0.0, vf_coef=0.25, max_grad_norm=0.5,
                        policy_kwargs={"net_arch": {"pi": [64, 64], "vf": [64, 64]},
                                       "activation_fn": torch.nn.Tanh},
                        seed=seed, device="cpu", verbose=0)
    else:
        starts = 1_000 if task.env == "Pendulum-v1" else 5_000
        sac = sb3.SAC if task.sb3_lrs is None else _split_lr_sac(sb3.SAC, task.sb3_lrs)
        model = sac("MlpPolicy", env, learning_rate=3e-4, buffer_size=min(budget, 1_000_000),
                        learning_starts=starts, batch_size=256, tau=0.005, gamma=0.99, train_freq=1,
                        gradient_steps=1, ent_coef="auto", seed=seed, device="cpu", verbose=0,
                        policy_kwargs={"net_arch": [256, 256]})

    def on_step(_self: Any) -> bool:
        if model.num_timesteps % 1024 == 0 or model.num_timesteps == budget:
            returns = [e["r"] for e in model.ep_info_buffer]
            curve.append((model.num_timesteps, float(np.mean(returns)) if returns else math.nan,
                          time.perf_counter() - start))
        return True

    # SB3's callback hook; the class is built with type() since BaseCallback is untyped here
    model.learn(total_timesteps=budget, callback=type("Curve", (base_callback,), {"_on_step": on_step})())
    wall = time.perf_counter() - start
    evaluation: Any = make_vec_env(task.env, n_envs=1, seed=seed + 1000)
    if task.algo == "ppo":
        evaluation = vec_normalize(evaluation, training=False, norm_reward=False, clip_obs=10.0)
        evaluation.obs_rms = env.obs_rms
    returns: list[float] = []
    obs = evaluation.reset()
    total = 0.0
    while len(returns) < 10:
        action, _ = model.predict(obs, deterministic=True)
        obs, _, done, infos = evaluation.step(action)
        total += float(infos[0].get("episode", {}).get("r", 0.0)) if done[0] else 0.0
        if done[0]:
            returns.append(total)
            total = 0.0
    return {"curve": curve, "wall_s": wall, "eval_mean": float(np.mean(returns))}


def _split_lr_sac(base: Any, lrs: tuple[float, float, float]) -> Any:
    """SB3's SAC with a learning rate per optimizer (critics, actor, temperature): SB3 sets one
    schedule's value on all three every update (``_update_learning_rate``); this sets each its own."""
    critic_lr, actor_lr, alpha_lr = lrs

    def _update_learning_rate(self: Any, optimizers: Any) -> None:
        for optimizer in optimizers if isinstance(optimizers, list) else [optimizers]:
            lr = (critic_lr if optimizer is self.critic.optimizer
                  else alpha_lr if optimizer is getattr(self, "ent_coef_optimizer", None) else actor_lr)
            for group in optimizer.param_groups:
                group["lr"] = lr

    return type("SplitLrSAC", (base,), {"_update_learning_rate": _update_learning_rate})


RUNNERS: dict[str, Callable[[Task, int, int], dict[str, Any]]] = {
    "rxrl": run_rxrl, "cleanrl": run_cleanrl, "sb3": run_sb3}


def first_reaching(curve: Curve, target: float) -> tuple[int, float] | None:
    """The env steps and seconds at which the curve first reached ``target``."""
    for steps, ret, seconds in curve:
        if ret >= target:
            return steps, seconds
    return None


def summarize(system: str, seed: int, task: Task, result: dict[str, Any]) -> dict[str, Any]:
    """One run's figures."""
    curve: Curve = [(int(p[0]), float(p[1]), float(p[2])) for p in result["curve"]]
    reached = first_reaching(curve, task.target)
    return {"system": system, "seed": seed, "wall_s": result["wall_s"],
            "final_return": curve[-1][1] if curve else math.nan, "eval_mean": result["eval_mean"],
            "steps_to_target": reached[0] if reached else None,
            "s_to_target": reached[1] if reached else None, "curve": curve}


def table(task: Task, budget: int, runs: list[dict[str, Any]]) -> str:
    """A markdown table of the runs, with each peer's wall time over rxrl's of the same seed."""
    head = (f"| system | seed | wall s | return at {budget:,} | eval (10 det.) | "
            f"steps to {task.target:g} | s to {task.target:g} | wall / rxrl's |")
    lines = [head, "|" + "---|" * 8]
    ours = {r["seed"]: r["wall_s"] for r in runs if r["system"] == "rxrl"}
    for r in runs:
        ratio = f"{r['wall_s'] / ours[r['seed']]:.2f}" if r["seed"] in ours else "–"
        steps = f"{r['steps_to_target']:,}" if r["steps_to_target"] else "not reached"
        secs = f"{r['s_to_target']:.0f}" if r["s_to_target"] else "–"
        lines.append(f"| {r['system']} | {r['seed']} | {r['wall_s']:.0f} | {r['final_return']:.1f} | "
                     f"{r['eval_mean']:.1f} | {steps} | {secs} | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task", choices=sorted(TASKS))
    p.add_argument("--seeds", default="0")
    p.add_argument("--systems", default="rxrl,sb3")
    p.add_argument("--budget-steps", type=int, default=None)
    p.add_argument("--one", nargs=2, metavar=("SYSTEM", "SEED"), help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, default=HERE / "results")
    args = p.parse_args(argv)
    task = TASKS[args.task]
    budget = args.budget_steps or task.budget
    if args.one:
        system, seed = args.one[0], int(args.one[1])
        print(json.dumps(RUNNERS[system](task, seed, budget)))
        return
    runs = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for system in args.systems.split(","):  # alternating: every system per seed
            if system not in RUNNERS:
                raise SystemExit(f"unknown system {system!r}; choose from {sorted(RUNNERS)}")
            done = subprocess.run([sys.executable, __file__, args.task, "--budget-steps", str(budget),
                                   "--one", system, str(seed)], capture_output=True, text=True,
                                  check=False)
            if done.returncode != 0:
                raise SystemExit(f"{system} seed {seed} failed:\n{done.stderr[-3000:]}")
            runs.append(summarize(system, seed, task, json.loads(done.stdout.splitlines()[-1])))
            print(table(task, budget, runs[-1:]).splitlines()[-1], flush=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"continuous-{args.task}-{stamp}.json"
    command = "python bench/continuous.py " + " ".join(argv)
    path.write_text(json.dumps({"task": attrs.asdict(task), "budget": budget, "command": command,
                                "runs": runs}, indent=1))
    print(table(task, budget, runs))
    print(f"\n{command}\nwritten to {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
