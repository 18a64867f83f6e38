"""Issue 26: rxrl's 16-trial ASHA sweep of PPO CartPole-v1 beside RL Zoo's Optuna tuning of SB3 PPO.

    python bench/sweep_vs_zoo.py --tag issue26

Both tools tune PPO on CartPole-v1 with the same budget (``--trials 16`` trials of
``--trial-steps 30000`` env steps, two at a time, search seed 0); then each one's best settings
train for ``--budget 200000`` env steps on ``--seeds 0,1,2``, and the table gives the env steps
at which the mean return of the last 100 finished training episodes first reached 475 (rxrl's
``--target-return`` rule: checked after every iteration, here after every SB3 rollout; env steps
counted over all environments).

- rxrl: ``rxrl sweep ppo --env CartPole-v1 --steps 30000 --trials 16 --scheduler asha --space
  'learner.lr=loguniform(1e-4,3e-3)' --space 'gamma=choice(0.98,0.99,0.995)' --space
  'num_epochs=choice(4,10)' --seed 0 --out OUT/rxrl-sweep`` (docs/sweeps.md), then ``rxrl train
  ppo --env CartPole-v1 --target-return 475 --steps 200000 --backend rx --seed S`` with
  best.json's ``--set`` values, and without them (the defaults).
- RL Zoo: ``python -m rl_zoo3.train --algo ppo --env CartPole-v1 -optimize --n-trials 16
  --n-timesteps 30000 --sampler tpe --pruner median --n-jobs 2 --seed 0 --num-threads 1
  --no-optim-plots -f OUT/zoo-sweep``: its defaults otherwise (TPE with 10 start-up trials,
  the median pruner, its PPO search space, its CartPole-v1 settings: 8 envs). The best trial
  is the pickled study's ``best_trial`` (``OUT/zoo-sweep/ppo/report_*.pkl``, which RL Zoo writes
  beside the report csv). Its parameters become SB3 arguments through RL Zoo's own
  converter (``hyperparams_opt.HYPERPARAMS_CONVERTER["ppo"]``, as its objective does), laid
  over the CartPole-v1 entry of rl_zoo3's ``hyperparams/ppo.yml`` (8 envs, MlpPolicy) in a
  Python config file; ``python -m rl_zoo3.train -conf FILE -n 200000 --seed S`` trains it,
  with a callback (``reach_target`` below, RL Zoo's ``callback`` hyperparameter) that stops
  the run at 475. For reference, the same with the published CartPole-v1 entry unchanged
  (its ``lin_`` schedules anneal over the 200k budget, not its 100k ``n_timesteps``).

**At an equal budget** (issue 26's comparison, ``--equal-budget``): RL Zoo's sweep runs first
and rxrl's gets ``--budget`` = the env steps RL Zoo's trials trained (at most: a pruned trial
counted as complete), so the two searches spend the same env steps however their trials,
rungs and caps differ:

    python bench/sweep_vs_zoo.py --equal-budget --sweep-to-target --search optuna \
        --defaults-first --rxrl-trials 64 --rxrl-trial-steps 100000 --tag issue26_equal_budget

(rxrl: Optuna's TPE as RL Zoo's, PPO's defaults as the first trial, trials to 475 capped at
100k and ranked by env steps to it, ASHA; ``--sweep-seed`` seeds both searches.)

Everything goes to ``--out`` (default ``runs/sweep_vs_zoo/<date>-<time>``); the results to
``bench/results/sweep_vs_zoo_<tag>.json`` and a Markdown table on stdout. ``--skip-rxrl`` /
``--skip-zoo`` run one side.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import json
import math
import os
import pickle
import platform
import shutil
import subprocess
import sys
import time
from contextlib import suppress
from importlib import metadata
from pathlib import Path
from typing import Any

ENV = "CartPole-v1"
TARGET = 475.0
BENCH = Path(__file__).resolve().parent
RXRL_SPACE = ("learner.lr=loguniform(1e-4,3e-3)", "gamma=choice(0.98,0.99,0.995)",
              "num_epochs=choice(4,10)")


# --------------------------------------------------------------------------- shared helpers


def clean_env(pythonpath: Path | None = None) -> dict[str, str]:
    """The environment of a child: no RAY_ADDRESS (a private local Ray), ``pythonpath`` first."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(pythonpath), env.get("PYTHONPATH")) if p)
    return env


def run_logged(cmd: list[str], log: Path, env: dict[str, str] | None = None,
               timeout: float = 4 * 3600) -> float:
    """Run ``cmd`` with stdout and stderr to ``log``; its wall time. CalledProcessError on failure."""
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with log.open("w") as f:
        f.write(" ".join(cmd) + "\n\n")
        f.flush()
        done = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env=env if env is not None else clean_env(), timeout=timeout)
    if done.returncode != 0:
        tail = log.read_text()[-600:]
        raise subprocess.CalledProcessError(done.returncode, cmd, tail)
    return time.perf_counter() - started


def outcome(seed: int, reached: bool, env_steps: int, ret: float | None, run_dir: Path,
            wall_s: float) -> dict[str, Any]:
    """One training run: env steps to the target (reached) or at the end (missed), the mean return."""
    return {"seed": seed, "reached": reached, "env_steps": env_steps, "episode_return_mean": ret,
            "wall_s": round(wall_s, 1), "run_dir": str(run_dir)}


def versions() -> dict[str, str]:
    """Versions of Python and of the packages compared."""
    found = {"python": platform.python_version()}
    for name in ("rxrl", "rl_zoo3", "stable_baselines3", "optuna", "torch", "gymnasium", "ray"):
        with suppress(metadata.PackageNotFoundError):
            found[name] = metadata.version(name)
    with suppress(OSError, subprocess.SubprocessError):
        found["rxrl_git"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=BENCH,
                                           capture_output=True, text=True).stdout.strip()
    return found


# ------------------------------------------------------------------------------ rxrl side


def rxrl_script() -> str:
    """The ``rxrl`` entry point of this interpreter's environment."""
    return shutil.which("rxrl", path=str(Path(sys.executable).parent)) or "rxrl"


def rxrl_sweep(out: Path, trials: int, trial_steps: int, target: float | None = None,
               search: str = "random", budget: int | None = None,
               defaults_first: bool = False, seed: int = 0) -> dict[str, Any]:
    """docs/sweeps.md's ASHA sweep into ``out`` (with ``target``: ``--target-return``, trials
    ranked by env steps to it; with ``budget``: ``--budget``, the env steps of all trials
    together); its wall time, best.json and results.csv."""
    cmd = [rxrl_script(), "sweep", "ppo", "--env", ENV, "--steps", str(trial_steps), "--trials",
           str(trials), "--scheduler", "asha", "--search", search,
           *(a for s in RXRL_SPACE for a in ("--space", s)),
           *(["--target-return", f"{target:g}"] if target is not None else []),
           *(["--budget", str(budget)] if budget is not None else []),
           *(["--defaults-first"] if defaults_first else []),
           "--seed", str(seed), "--out", str(out)]
    wall = run_logged(cmd, out.with_suffix(".log"))
    best = json.loads((out / "best.json").read_text())
    with (out / "results.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    trained = sum(int(r["env_steps"] or 0) for r in rows)
    print(f"rxrl sweep: {wall:.0f} s, best {best['set']} (return {best['episode_return_mean']:.1f})",
          flush=True)
    return {"command": " ".join(cmd), "wall_s": round(wall, 1), "best": best,
            "env_steps_trained": trained, "budget": budget, "trials": rows}


def rxrl_train(out: Path, seed: int, budget: int, sets: list[str]) -> dict[str, Any]:
    """``rxrl train ppo`` to 475 (rx backend) with ``--set`` values ``sets``; its outcome."""
    cmd = [rxrl_script(), "train", "ppo", "--env", ENV, "--target-return", str(TARGET), "--steps",
           str(budget), "--backend", "rx", "--seed", str(seed), "--out", str(out),
           *(a for s in sets for a in ("--set", s))]
    wall = run_logged(cmd, out.with_name(out.name + ".log"))
    summary = json.loads((out / "summary.json").read_text())
    reached = summary["reached_target"]
    steps = int(reached["env_steps"] if reached else summary["env_steps_sampled"])
    return outcome(seed, reached is not None, steps, summary["episode_return_mean"], out, wall)


# ---------------------------------------------------------------------------- RL Zoo side


def reach_target(target: float, out: str) -> Any:
    """RL Zoo's ``callback`` hyperparameter (``sweep_vs_zoo.reach_target``): an SB3 callback that
    checks after every rollout whether the mean return of the last 100 training episodes
    (``model.ep_info_buffer``, filled from the Monitor wrappers of all envs) reached ``target``,
    stops training when it did, and writes the outcome to the JSON file ``out``."""
    # SB3's callback hooks; the class is built with type() since BaseCallback is untyped here
    # (bench/requirements.txt is not installed where CI type-checks)
    base: Any = importlib.import_module("stable_baselines3.common.callbacks").BaseCallback
    state: dict[str, Any] = {"reached": None}

    def mean_return(self: Any) -> tuple[float | None, int]:
        episodes = self.model.ep_info_buffer or ()
        returns = [float(e["r"]) for e in episodes]
        return (sum(returns) / len(returns) if returns else None), len(returns)

    def on_rollout_end(self: Any) -> None:
        mean, n = mean_return(self)
        if state["reached"] is None and mean is not None and mean >= target:
            state["reached"] = {"env_steps": int(self.num_timesteps), "episode_return_mean": mean,
                                "episodes_in_window": n}

    def on_step(self: Any) -> bool:
        return state["reached"] is None

    def on_training_end(self: Any) -> None:
        mean, n = mean_return(self)
        reached = state["reached"]
        doc = {"target": target, "reached": reached is not None, "reached_at": reached,
               "env_steps": int(self.num_timesteps), "episode_return_mean": mean,
               "episodes_in_window": n}
        Path(out).write_text(json.dumps(doc, indent=2) + "\n")

    reach = type("ReachTarget", (base,), {"_on_rollout_end": on_rollout_end, "_on_step": on_step,
                                          "_on_training_end": on_training_end})
    return reach()


def zoo_dir() -> Path:
    """The installed rl_zoo3 package's directory."""
    return Path(importlib.import_module("rl_zoo3").__file__ or "").parent


def zoo_published() -> dict[str, Any]:
    """rl_zoo3's published PPO CartPole-v1 hyperparameters (hyperparams/ppo.yml), unprocessed."""
    yaml: Any = importlib.import_module("yaml")
    doc: dict[str, Any] = yaml.safe_load((zoo_dir() / "hyperparams" / "ppo.yml").read_text())[ENV]
    return dict(doc)


def zoo_sweep(out: Path, trials: int, trial_steps: int, seed: int = 0) -> dict[str, Any]:
    """RL Zoo's own hyperparameter search into ``out``; its wall time, best trial, and trials."""
    cmd = [sys.executable, "-m", "rl_zoo3.train", "--algo", "ppo", "--env", ENV, "-optimize",
           "--n-trials", str(trials), "--n-timesteps", str(trial_steps), "--sampler", "tpe",
           "--pruner", "median", "--n-jobs", "2", "--seed", str(seed), "--num-threads", "1",
           "--no-optim-plots", "-f", str(out)]
    wall = run_logged(cmd, out.with_suffix(".log"))
    reports = sorted((out / "ppo").glob("report_*.pkl"))
    if len(reports) != 1:
        raise RuntimeError(f"expected one RL Zoo report in {out / 'ppo'}, found {reports}")
    with reports[0].open("rb") as f:
        study: Any = pickle.load(f)
    best: Any = study.best_trial
    converter: Any = importlib.import_module("rl_zoo3.hyperparams_opt").HYPERPARAMS_CONVERTER["ppo"]
    converted = converter(dict(best.params))
    n_envs = int(zoo_published().get("n_envs", 1))
    rows = []
    for t in study.trials:
        rollout = None
        if "n_steps_pow" in t.params:
            rollout = 2 ** int(t.params["n_steps_pow"]) * n_envs
        rows.append({"number": t.number, "state": t.state.name, "value": t.value,
                     "params": dict(t.params), "rollout_env_steps": rollout,
                     "env_steps_if_complete": None if rollout is None
                     else math.ceil(trial_steps / rollout) * rollout})
    states = [r["state"] for r in rows]
    # what the sweep trained, at most: a pruned trial counted as if it had run to the end
    spent = sum(r["env_steps_if_complete"] or 0 for r in rows if r["state"] in ("COMPLETE", "PRUNED"))
    print(f"RL Zoo sweep: {wall:.0f} s, best trial {best.number} (eval return {best.value:.1f}): "
          f"{sweep_settings(converted)}", flush=True)
    return {"command": " ".join(cmd), "wall_s": round(wall, 1), "report": str(reports[0]),
            "best": {"number": best.number, "value": best.value, "params": dict(best.params),
                     "user_attrs": dict(best.user_attrs), "sb3": printable(converted)},
            "states": {s: states.count(s) for s in sorted(set(states))}, "trials": rows,
            "env_steps_at_most": spent,
            "converted": converted}


def printable(value: Any) -> Any:
    """``value`` with classes (``nn.Tanh``) as their names, for JSON."""
    if isinstance(value, dict):
        return {k: printable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [printable(v) for v in value]
    if isinstance(value, type):
        return f"nn.{value.__name__}"
    return value


def python_literal(value: Any) -> str:
    """``value`` as Python source for an RL Zoo config file (classes as ``nn.Name``)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {python_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(python_literal(v) for v in value) + "]"
    if isinstance(value, type):
        return f"nn.{value.__name__}"
    return repr(value)


def zoo_train(out: Path, seed: int, budget: int, hyperparams: dict[str, Any]) -> dict[str, Any]:
    """``python -m rl_zoo3.train`` of SB3 PPO with ``hyperparams`` (RL Zoo's form, as a Python
    config file) until 475 or ``budget`` env steps; its outcome."""
    out.mkdir(parents=True)
    result = out / "reach_target.json"
    conf = {**hyperparams, "callback": [{"sweep_vs_zoo.reach_target":
                                         {"target": TARGET, "out": str(result.resolve())}}]}
    conf_file = out / "hyperparams.py"
    conf_file.write_text(f"from torch import nn\n\nhyperparams = {{{ENV!r}: {python_literal(conf)}}}\n")
    cmd = [sys.executable, "-m", "rl_zoo3.train", "--algo", "ppo", "--env", ENV, "-conf",
           str(conf_file), "-n", str(budget), "--seed", str(seed), "--eval-freq", "-1",
           "--num-threads", "1", "-f", str(out / "logs")]
    wall = run_logged(cmd, out / "train.log", env=clean_env(BENCH))
    doc = json.loads(result.read_text())
    reached = doc["reached_at"]
    steps = int(reached["env_steps"] if reached else doc["env_steps"])
    return outcome(seed, reached is not None, steps, doc["episode_return_mean"], out, wall)


def sweep_settings(converted: dict[str, Any]) -> str:
    """RL Zoo's converted best parameters, one line."""
    parts = []
    for k, v in printable(converted).items():
        if isinstance(v, float):
            parts.append(f"{k}={v:.4g}")
        elif k == "policy_kwargs":
            arch = v["net_arch"]["pi"]
            parts.append(f"net_arch={arch} {v['activation_fn']}")
        else:
            parts.append(f"{k}={v}")
    return ", ".join(parts)


# ---------------------------------------------------------------------------------- report


def cell(o: dict[str, Any], budget: int) -> str:
    """A run's table cell: env steps to 475, or the miss."""
    if o["reached"]:
        return f"{o['env_steps']:,}"
    ret = o["episode_return_mean"]
    return f"missed, return {'n/a' if ret is None else f'{ret:.1f}'} at {budget // 1000}k"


def mean_cell(runs: list[dict[str, Any]], budget: int) -> str:
    """The mean env steps to 475 (a miss counts as the whole budget, shown as ≥)."""
    if not runs:
        return ""
    steps = [o["env_steps"] if o["reached"] else budget for o in runs]
    mean = sum(steps) / len(steps)
    return f"{'' if all(o['reached'] for o in runs) else '≥ '}{mean:,.0f}"


def table(systems: dict[str, dict[str, Any]], seeds: list[int], budget: int) -> str:
    """The Markdown table of all systems."""
    head = ["system", *(f"seed {s}" for s in seeds), "mean", "sweep wall time", "best settings"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, sys_doc in systems.items():
        by_seed = {o["seed"]: o for o in sys_doc["runs"]}
        cells = [cell(by_seed[s], budget) if s in by_seed else "" for s in seeds]
        wall = sys_doc.get("sweep_wall_s")
        lines.append("| " + " | ".join([name, *cells, mean_cell(sys_doc["runs"], budget),
                                        "" if wall is None else f"{wall:.0f} s",
                                        sys_doc.get("settings", "")]) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run both sides, write the JSON and print the table; 0 when every run finished."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", help="a new (or empty) directory for everything "
                                 "(default runs/sweep_vs_zoo/<date>-<time>)")
    p.add_argument("--seeds", default="0,1,2", help="training seeds (default 0,1,2)")
    p.add_argument("--trials", type=int, default=16, help="trials of each sweep (default 16)")
    p.add_argument("--trial-steps", type=int, default=30_000, help="env steps per trial (default 30000)")
    p.add_argument("--budget", type=int, default=200_000,
                   help="env steps of each training run (default 200000)")
    p.add_argument("--sweep-to-target", action="store_true",
                   help="rxrl's sweep with --target-return 475: trials stop at the target and rank "
                        "by the env steps they needed (RL Zoo's ranks by its evaluation as always)")
    p.add_argument("--search", default="random", choices=["random", "optuna"],
                   help="rxrl's search (default random; RL Zoo's is TPE, Optuna's)")
    p.add_argument("--rxrl-trials", type=int, help="rxrl's trials, at most (default --trials)")
    p.add_argument("--rxrl-trial-steps", type=int,
                   help="env steps per rxrl trial, at most (default --trial-steps)")
    p.add_argument("--rxrl-budget", type=int,
                   help="env steps of all rxrl trials together (rxrl sweep --budget)")
    p.add_argument("--equal-budget", action="store_true",
                   help="RL Zoo's sweep first, then rxrl's with --budget = the env steps RL Zoo's "
                        "trained (at most: a pruned trial counted as complete)")
    p.add_argument("--defaults-first", action="store_true",
                   help="rxrl's sweep runs PPO's defaults as its first trial (rxrl sweep --defaults-first)")
    p.add_argument("--sweep-seed", type=int, default=0, help="seed of both searches (default 0)")
    p.add_argument("--skip-rxrl", action="store_true", help="only RL Zoo's side")
    p.add_argument("--skip-zoo", action="store_true", help="only rxrl's side")
    p.add_argument("--tag", default=time.strftime("%Y-%m-%d"),
                   help="results file bench/results/sweep_vs_zoo_<tag>.json (default today's date)")
    args = p.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    out = Path(args.out or Path("runs/sweep_vs_zoo") / time.strftime("%Y%m%d-%H%M%S"))
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        p.error(f"--out {out} exists and is not an empty directory")
    out.mkdir(parents=True, exist_ok=True)
    budget = args.budget

    doc: dict[str, Any] = {
        "tag": args.tag, "date": time.strftime("%Y-%m-%d %H:%M:%S"), "argv": sys.argv,
        "out": str(out), "env": ENV, "target": TARGET, "seeds": seeds, "trials": args.trials,
        "trial_steps": args.trial_steps, "budget": budget, "versions": versions(),
        "sweep_to_target": args.sweep_to_target, "search": args.search,
        "defaults_first": args.defaults_first, "sweep_seed": args.sweep_seed,
        "equal_budget": args.equal_budget,
        "rule": "env steps (all envs) at which the mean return of the last 100 finished training "
                "episodes first reached the target, checked after every iteration (rxrl) / rollout (SB3)",
        "systems": {}, "sweeps": {},
    }
    systems: dict[str, dict[str, Any]] = doc["systems"]
    failed = False

    def train_all(name: str, fn: Any, settings: str, sweep_wall: float | None = None) -> None:
        nonlocal failed
        runs = []
        for seed in seeds:
            try:
                o = fn(seed)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError, KeyError,
                    ValueError) as e:
                print(f"{name} seed {seed}: failed: {e}", file=sys.stderr, flush=True)
                failed = True
                continue
            runs.append(o)
            print(f"{name} seed {seed}: {cell(o, budget)} ({o['wall_s']:.0f} s)", flush=True)
        systems[name] = {"runs": runs, "settings": settings, "sweep_wall_s": sweep_wall}

    rxrl_budget: int | None = args.rxrl_budget
    if args.equal_budget and (args.skip_zoo or args.rxrl_budget is not None):
        p.error("--equal-budget takes rxrl's budget from RL Zoo's sweep: not with --skip-zoo, --rxrl-budget")
    if not args.skip_zoo:
        published = zoo_published()
        zsweep = zoo_sweep(out / "zoo-sweep", args.trials, args.trial_steps, args.sweep_seed)
        converted = zsweep.pop("converted")
        doc["sweeps"]["rl_zoo"] = zsweep
        if args.equal_budget:
            rxrl_budget = int(zsweep["env_steps_at_most"])
        best = {**published, **converted}  # as RL Zoo's objective: its defaults, the sampled on top
        doc["sweeps"]["rl_zoo"]["hyperparams_trained"] = printable(best)
        train_all("SB3 + RL Zoo's best", lambda s: zoo_train(out / f"zoo-best-s{s}", s, budget, best),
                  sweep_settings(converted), zsweep["wall_s"])
        train_all("SB3 + RL Zoo's published (reference)",
                  lambda s: zoo_train(out / f"zoo-published-s{s}", s, budget, published),
                  sweep_settings({k: v for k, v in published.items() if k != "policy"}))

    if not args.skip_rxrl:
        sweep = rxrl_sweep(out / "rxrl-sweep", args.rxrl_trials or args.trials,
                           args.rxrl_trial_steps or args.trial_steps,
                           TARGET if args.sweep_to_target else None, args.search, rxrl_budget,
                           args.defaults_first, args.sweep_seed)
        doc["sweeps"]["rxrl"] = sweep
        sets: list[str] = list(sweep["best"]["set"])
        train_all("rxrl defaults", lambda s: rxrl_train(out / f"rxrl-defaults-s{s}", s, budget, []),
                  "PPO's CartPole defaults")
        train_all("rxrl sweep's best", lambda s: rxrl_train(out / f"rxrl-best-s{s}", s, budget, sets),
                  ", ".join(sets), sweep["wall_s"])

    results = BENCH / "results" / f"sweep_vs_zoo_{args.tag}.json"
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    print(f"\nPPO {ENV}: env steps to a mean return of {TARGET:g} (last 100 training episodes), "
          f"budget {budget:,}; sweeps of {args.trials} trials x {args.trial_steps:,} env steps\n")
    print(table(systems, seeds, budget))
    print(f"\nwrote {results}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
