"""Atari throughput side by side (issue 23): rxrl's PPO and IMPALA against the same loops
hand-written on Ray, CleanRL's ``ppo_atari``, SB3's PPO, RLlib's PPO and APPO and Sample Factory
2's APPO, with one preprocessing and one model (`atari_settings.MatchedAtari`), beside the raw
limits of this machine (ALE frames/s, the CNN's forward and training rates).

Every system runs in a subprocess of its own for ``--budget-steps`` agent steps, one after
another; each repetition rotates the order (A/B alternation, so load drifts on a shared
machine hit every system alike). Per system: the median over repetitions of env *frames* per
second (4 per agent step) sampled and trained, over training wall time (from the first sample
request; start-up excluded). Ratios rxrl / peer are medians of per-repetition ratios, within
a family: the PPO systems against ``rxrl-ppo``, IMPALA/APPO against ``rxrl-impala``.

Runners use this interpreter, except those in `PYTHON`: ``sf-appo`` runs with
``$RXRL_SF_PYTHON`` (default ``.sfvenv/bin/python`` in the checkout), a venv of its own since
Sample Factory pins ``gymnasium<1`` and ``numpy<2`` (bench/requirements-sample-factory.txt says
how to make it); without that interpreter the system fails, as a failed run does.

    python bench/atari.py --repeats 3 --budget-steps 20000
    python bench/atari.py --limits-only

Writes ``bench/results/<tag>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import atari_settings as a
import ppo_settings as s

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"

#: system -> (runner script, its arguments, family); a family's first system is rxrl's
SYSTEMS: dict[str, tuple[str, list[str], str]] = {
    "rxrl-ppo": ("rxrl_atari.py", [], "ppo"),
    "handwritten-ppo": ("handwritten_ray_atari.py", [], "ppo"),
    "cleanrl-ppo": ("cleanrl_ppo_atari.py", [], "ppo"),
    "sb3-ppo": ("peer_sb3_atari.py", [], "ppo"),
    "rllib-ppo": ("peer_rllib_atari.py", [], "ppo"),
    "rxrl-impala": ("rxrl_atari.py", ["--algo", "impala"], "impala"),
    "handwritten-impala": ("handwritten_ray_atari.py", ["--algo", "impala"], "impala"),
    "rxrl-appo": ("rxrl_atari.py", ["--algo", "appo"], "impala"),
    "rllib-appo": ("peer_rllib_atari.py", ["--algo", "appo"], "impala"),
    "sf-appo": ("peer_sample_factory_atari.py", ["--algo", "appo"], "impala"),
}
#: what a family's ratios are taken against
BASE = {"ppo": "rxrl-ppo", "impala": "rxrl-impala"}
#: system -> (environment variable naming its interpreter, the default) where not this one
PYTHON = {"sf-appo": ("RXRL_SF_PYTHON", str(BENCH.parent / ".sfvenv" / "bin" / "python"))}


def run_system(system: str, seed: int, budget: int, workdir: Path, timeout_s: float,
               settings: list[str]) -> s.RunRecord | None:
    """One run of ``system`` in a subprocess; its record, or None if it failed."""
    script, extra, _ = SYSTEMS[system]
    python = os.environ.get(*PYTHON[system]) if system in PYTHON else sys.executable
    if not Path(python).is_file():
        print(f"  {system} seed {seed}: no interpreter {python} (set {PYTHON[system][0]})", flush=True)
        return None
    out = workdir / f"{system}-{seed}-{time.time_ns()}.json"
    argv = [python, str(BENCH / script), "--budget-steps", str(budget), "--seed", str(seed),
            "--out", str(out), *extra, *(x for kv in settings for x in ("--set", kv))]
    return s.run_runner(argv, system, out, timeout_s)


def frames_per_s(r: s.RunRecord, frame_skip: int) -> tuple[float, float]:
    """Env frames sampled and trained per second of training wall time."""
    return frame_skip * r.env_steps_sampled / r.train_s, frame_skip * r.env_steps_trained / r.train_s


def limits(m: a.MatchedAtari, seconds: float = 5.0) -> dict[str, float]:
    """The raw rates of this machine: ALE frames/s with the preprocessing (one env on one
    core, and one worker's native vector env), the Nature CNN's forward rate at one worker's
    batch on one thread (observations/s, as a worker acts), and its PPO training rate on
    minibatches (samples/s, one thread and ``m.learner_threads``); and from those the bound
    they put on PPO's and IMPALA's frames/s with every core busy (``bound_*``)."""
    import numpy as np
    import torch

    from rxrl.envs.vector import make_env, make_vector_env
    from rxrl.rl import PolicyConfig, PPOConfig, PPOLearner
    from rxrl.rl.data.batch import SampleBatch
    from rxrl.rl.models.forward import NumpyActorCritic

    def steps_per_s(num_envs: int, threads: int) -> float:
        vec = make_vector_env(m.env, num_envs, env_kwargs={**m.env_kwargs(), "num_threads": threads})
        vec.reset(seed=0)
        rng = np.random.default_rng(0)
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            vec.step(rng.integers(0, 6, size=num_envs))
            n += num_envs
        rate = n / (time.perf_counter() - start)
        vec.close()
        return rate

    out = {"ale_frames_per_s_1_env_1_thread": m.frame_skip * steps_per_s(1, 1),
           "ale_frames_per_s_worker_envs_1_thread": m.frame_skip * steps_per_s(m.envs_per_worker, 1),
           f"ale_frames_per_s_all_envs_{os.cpu_count()}_threads":
               m.frame_skip * steps_per_s(m.num_envs, os.cpu_count() or 1)}
    config = PPOConfig(lr=m.lr, num_epochs=1, minibatch_size=m.minibatch_size, clip_vloss=False)
    learner = PPOLearner(m.env, config, env_kwargs=m.env_kwargs())
    env: Any = make_env(m.env, m.env_kwargs())  # gymnasium's close() is untyped
    acting = NumpyActorCritic(env.observation_space, env.action_space, PolicyConfig(),
                              learner.get_weights(), 0)
    env.close()
    shape = (m.frame_stack, m.screen_size, m.screen_size)
    rng = np.random.default_rng(0)
    torch.set_num_threads(1)
    obs = rng.integers(0, 255, (m.envs_per_worker, *shape), dtype=np.uint8)
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        acting.act(obs)
        n += m.envs_per_worker
    out["cnn_act_obs_per_s_1_thread"] = n / (time.perf_counter() - start)
    rows = 4 * m.minibatch_size
    batch = SampleBatch(obs=rng.integers(0, 255, (rows, *shape), dtype=np.uint8),
                        actions=rng.integers(0, 6, rows), rewards=np.zeros(rows, np.float32),
                        terminateds=np.zeros(rows, bool), truncateds=np.zeros(rows, bool),
                        logp=np.full(rows, -1.79, np.float32), values=np.zeros(rows, np.float32),
                        advantages=rng.standard_normal(rows).astype(np.float32),
                        value_targets=rng.standard_normal(rows).astype(np.float32))
    for threads in sorted({1, m.learner_threads}):
        torch.set_num_threads(threads)
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            learner.train(batch)
            n += rows
        out[f"cnn_train_samples_per_s_{threads}_thread{'s' if threads > 1 else ''}"] = (
            n / (time.perf_counter() - start))
    # CPU-seconds an agent step costs, ideally spread over every core: its env step (one
    # worker's vector env on one thread), its action, and its training epochs (one thread)
    cores = os.cpu_count() or 1
    per_step = (m.frame_skip / out["ale_frames_per_s_worker_envs_1_thread"]
                + 1 / out["cnn_act_obs_per_s_1_thread"])
    train = 1 / out["cnn_train_samples_per_s_1_thread"]
    out["bound_ppo_frames_per_s"] = m.frame_skip * cores / (per_step + m.num_epochs * train)
    out["bound_impala_frames_per_s"] = m.frame_skip * cores / (per_step + m.impala_num_epochs * train)
    return out


def report(runs: dict[str, list[s.RunRecord | None]], systems: list[str], frame_skip: int,
           raw: dict[str, float] | None) -> tuple[str, dict[str, Any]]:
    """The Markdown tables and the figures behind them."""
    lines = ["| system | runs | frames/s sampled | frames/s trained |", "|---|---:|---:|---:|"]
    figures: dict[str, Any] = {}
    for system in systems:
        ok = [r for r in runs[system] if r is not None and r.train_s > 0]
        sampled = [frames_per_s(r, frame_skip)[0] for r in ok]
        trained = [frames_per_s(r, frame_skip)[1] for r in ok]
        med_s = statistics.median(sampled) if sampled else None
        med_t = statistics.median(trained) if trained and any(trained) else None
        figures[system] = {"runs": len(ok), "frames_sampled_per_s": med_s, "frames_trained_per_s": med_t,
                           "sampled_all": sampled, "trained_all": trained}
        lines.append(f"| {system} | {len(ok)} | {'-' if med_s is None else f'{med_s:,.0f}'} | "
                     f"{'-' if med_t is None else f'{med_t:,.0f}'} |")
    lines += ["", "| rxrl / peer (paired by repetition, median) | frames/s sampled | frames/s trained |",
              "|---|---:|---:|"]
    ratios: dict[str, Any] = {}
    for peer in systems:
        base = BASE[SYSTEMS[peer][2]]
        if peer == base or base not in runs:
            continue
        pairs = [(x, y) for x, y in zip(runs[base], runs[peer], strict=False)
                 if x is not None and y is not None]
        if not pairs:
            continue
        rs = [frames_per_s(x, frame_skip)[0] / frames_per_s(y, frame_skip)[0] for x, y in pairs]
        rt = [frames_per_s(x, frame_skip)[1] / frames_per_s(y, frame_skip)[1] for x, y in pairs
              if y.env_steps_trained > 0]
        ratios[f"{base} / {peer}"] = {"sampled": statistics.median(rs),
                                      "trained": statistics.median(rt) if rt else None,
                                      "sampled_all": rs, "trained_all": rt}
        cell = "-" if not rt else f"{statistics.median(rt):.2f} ({', '.join(f'{x:.2f}' for x in rt)})"
        lines.append(f"| {base} / {peer} | {statistics.median(rs):.2f} ({', '.join(f'{x:.2f}' for x in rs)}) "
                     f"| {cell} |")
    figures["ratios"] = ratios
    if raw:
        lines += ["", "| raw limit on this machine | rate |", "|---|---:|"]
        lines += [f"| {k} | {v:,.0f} |" for k, v in raw.items()]
        for family, base in BASE.items():
            got = figures.get(base, {}).get("frames_trained_per_s")
            if got:
                share = got / raw[f"bound_{family}_frames_per_s"]
                figures[f"{base} / bound"] = share
                lines.append(f"| {base}'s frames/s trained / bound_{family} | {share:.2f} |")
    return "\n".join(lines), figures


def main(argv: list[str]) -> None:
    """Run every system ``--repeats`` times, rotating the order; print and save the tables."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--budget-steps", type=int, default=20_000, help="agent steps per run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rllib-repeats", type=int, default=1,
                        help="repetitions that include the RLlib systems (the first ones)")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="override a matched setting for every system")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tag", default="atari")
    parser.add_argument("--timeout-s", type=float, default=900)
    parser.add_argument("--no-limits", action="store_true", help="skip the raw limits")
    parser.add_argument("--limits-only", action="store_true")
    args = parser.parse_args(argv)
    m = a.override(a.MatchedAtari(), args.set)
    systems = [x for x in args.systems.split(",") if x]
    if unknown := set(systems) - set(SYSTEMS):
        raise SystemExit(f"--systems: unknown {sorted(unknown)}; known: {list(SYSTEMS)}")
    raw = None if args.no_limits else limits(m)
    if raw:
        print(json.dumps(raw, indent=1), flush=True)
    if args.limits_only:
        systems = []
    runs: dict[str, list[s.RunRecord | None]] = {x: [] for x in systems}
    with tempfile.TemporaryDirectory(prefix="rxrl-atari-bench-") as tmp:
        for k in range(args.repeats if systems else 0):
            here = [x for x in systems if not x.startswith("rllib") or k < args.rllib_repeats]
            order = here[k % len(here):] + here[:k % len(here)]
            print(f"repetition {k + 1}/{args.repeats}: {order}", flush=True)
            for system in order:
                runs[system].append(run_system(system, args.seed, args.budget_steps, Path(tmp),
                                               args.timeout_s, args.set))
    table, figures = report(runs, systems, m.frame_skip, raw)
    print()
    print(table)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{args.tag}.json"
    path.write_text(json.dumps({
        "command": "python bench/atari.py " + " ".join(argv),
        "date": time.strftime("%Y-%m-%d %H:%M"), "nproc": os.cpu_count(), "settings": m.env_kwargs(),
        "versions": s.versions(["rxrl", "ray", "torch", "gymnasium", "ale-py", "numpy"]),
        "table": table, "figures": figures, "limits": raw,
        "runs": {x: [None if r is None else r.to_json() for r in rs] for x, rs in runs.items()},
    }))
    print(f"\nwrote {path.relative_to(BENCH.parent)}")


if __name__ == "__main__":
    main(sys.argv[1:])
