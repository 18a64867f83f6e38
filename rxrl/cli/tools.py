"""``rxrl show | eval | export | plot | replay``: look at an algorithm, a checkpoint, runs, a trace."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import rxrl
from rxrl.algos import get
from rxrl.algos.common import Start, spaces_of
from rxrl.algos.configs import from_dict, parse_assignment, with_settings
from rxrl.algos.spec import Algorithm
from rxrl.envs.vector import registered_id
from rxrl.rl.config import PolicyConfig, QNetConfig, resolve_trunk
from rxrl.training.checkpoint import (
    TRACE_FORMAT,
    CheckpointClock,
    deterministic_fields,
    load_checkpoint,
    read_metrics,
    same,
    training_plan,
)
from rxrl.training.evaluation import EvalResult, Evaluation, PolicyMismatch, greedy_episodes, greedy_policy

# ------------------------------------------------------------------------------------ show


def add_show_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rxrl show``."""
    p.add_argument("algo", help="an algorithm (ppo | a2c | a3c | impala | appo | dqn | apex | sac | "
                                 "ma-ppo | two-trainer | maml), or a run directory with --stats")
    p.add_argument("--stats", action="store_true",
                   help="ALGO is a run trained with --profile: its plan with each operator's "
                        "timings, and its actors' utilization")
    p.add_argument("--format", default="text", help="text (default) | dot | mermaid")
    p.add_argument("--env", help="gymnasium env id (default CartPole-v1)")
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                   help="override a setting, as for rxrl train")


def show(args: argparse.Namespace) -> int:
    """Print the algorithm's plan as a graph (with ``--stats``: a profiled run's, timed)."""
    if args.stats:
        from rxrl.training.profile import format_stats, read_stats

        print(format_stats(read_stats(args.algo)))
        return 0
    if args.format not in ("text", "dot", "mermaid"):
        raise ValueError(f"unknown format {args.format!r}; choose text, dot or mermaid")
    algo = get(args.algo)
    settings = dict(parse_assignment(s) for s in args.settings)
    config = with_settings(algo.config(), {**({"env": args.env} if args.env else {}), **settings})
    model = model_line(algo, config) if args.format == "text" else None
    print(rxrl.show(algo.plan(config, None), args.format))
    if model is not None:
        print(model)
    return 0


def model_line(algo: Algorithm, config: Any) -> str | None:
    """``rxrl show``'s line naming the network ``config`` builds for its env's spaces, e.g.
    ``policy: nature_cnn trunk (4x84x84 uint8) + lstm 64 + categorical(6) and value heads``
    (a ValueError when its trunk does not fit them); None for the algorithms whose networks
    have no trunk setting (SAC, the multi-agent ones)."""
    q_net = getattr(getattr(config, "learner", None), "q_net", None)
    if not isinstance(q_net, QNetConfig) and (algo.greedy is not None or algo.evaluate is not None):
        return None
    spaces = spaces_of(registered_id(config.env), config.env_kwargs)
    obs, action = spaces.observation, spaces.action
    if isinstance(obs, gym.spaces.Box):
        seen = f"{'x'.join(map(str, obs.shape))} {obs.dtype}"
    else:
        seen = f"{obs} one-hot" if isinstance(obs, gym.spaces.Discrete) else str(obs)
    if isinstance(q_net, QNetConfig):
        trunk = _trunk_text(resolve_trunk(q_net.trunk, obs, "learner.q_net.trunk"), q_net.hidden_sizes,
                            q_net.activation, shared=True)
        actions = int(action.n) if isinstance(action, gym.spaces.Discrete) else action
        heads = "dueling value and advantage heads" if q_net.dueling else "Q head"
        return f"q_net: {trunk} ({seen}) + {heads} ({actions} actions)"
    policy: PolicyConfig = config.policy
    trunk = _trunk_text(resolve_trunk(policy.trunk, obs), policy.hidden_sizes, policy.activation,
                        policy.shared_trunk)
    two = "" if policy.shared_trunk else " ×2 (actor, critic)"
    core = f" + {policy.recurrent} {policy.recurrent_size}{two}" if policy.is_recurrent else ""
    head = (f"categorical({action.n})" if isinstance(action, gym.spaces.Discrete)
            else f"gaussian({action.shape[0] if action.shape else action})")
    return f"policy: {trunk} ({seen}){core} + {head} and value heads"


def _trunk_text(trunk: str, hidden_sizes: tuple[int, ...], activation: str, shared: bool) -> str:
    if trunk != "mlp":  # one CNN feeds both heads (`PolicyConfig`)
        return f"{trunk} trunk"
    two = "" if shared else " ×2 (actor, critic)"
    return f"mlp trunk {'x'.join(map(str, hidden_sizes))} {activation}{two}"


# ------------------------------------------------------------------------------------ eval


def add_eval_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rxrl eval``."""
    p.add_argument("checkpoint", help="a checkpoint.pt file or a run directory")
    p.add_argument("--episodes", type=int, default=10, help="episodes to run (default 10)")
    p.add_argument("--seed", type=int, default=0, help="env seed of the first episode (default 0)")


def evaluate(args: argparse.Namespace) -> int:
    """Run the checkpoint's policy greedily (argmax / mean action); print the mean return."""
    if args.episodes < 1:
        raise ValueError(f"--episodes must be >= 1, got {args.episodes}")
    ckpt = load_checkpoint(args.checkpoint)
    config = ckpt.config
    if ckpt.algo.evaluate is not None:  # a multi-agent checkpoint: its policies are per agent
        try:
            done = ckpt.algo.evaluate(config, ckpt.learner_state, args.episodes, args.seed)
        except (RuntimeError, KeyError, TypeError) as e:
            raise ValueError(f"corrupt checkpoint {ckpt.path}: the policies do not fit their config "
                             f"({' '.join(str(e).split())[:200]})") from e
        lowest, returns = done.lowest_agent()
        per_agent = ", ".join(f"{agent} {np.mean(r):.1f}" for agent, r in done.agent_returns.items())
        print(f"{ckpt.algo.name} {config.env}: mean return {_spread(returns)} over {len(done.returns)} "
              f"greedy episodes (the lowest agent's, {lowest}, as in training); per agent: {per_agent}; "
              f"total per episode {_spread(done.returns)}")
        return 0
    try:  # the algorithm's own (DQN: argmax Q), else the config's actor-critic
        act = greedy_policy(ckpt.algo, config, ckpt.learner_state)
    except PolicyMismatch as e:
        raise ValueError(f"corrupt checkpoint {ckpt.path}: {e}") from e
    returns = episode_returns(config.env, dict(config.env_kwargs), act, args.episodes, args.seed)
    print(f"{ckpt.algo.name} {config.env}: mean return {_spread(returns)} over {len(returns)} "
          "greedy episodes")
    return 0


def _spread(returns: list[float]) -> str:
    """``mean ± std (min ..., max ...)`` of episode returns."""
    return (f"{np.mean(returns):.1f} ± {np.std(returns):.1f} (min {min(returns):.1f}, "
            f"max {max(returns):.1f})")


def episode_returns(env_id: str, env_kwargs: dict[str, Any], act: Any, episodes: int,
                    seed: int) -> list[float]:
    """Returns of ``episodes`` episodes of ``act(obs_batch, deterministic=True)`` on one env,
    seeded ``seed`` at its first reset (`rxrl.training.evaluation.greedy_episodes`)."""
    return greedy_episodes(env_id, env_kwargs, act, episodes, seed)[0]


# ---------------------------------------------------------------------------------- export


def add_export_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rxrl export``."""
    p.add_argument("checkpoint", help="a checkpoint.pt file or a run directory")
    p.add_argument("--format", default="torchscript",
                   help="torchscript (default) | pt2 (torch.export) | onnx (the onnx extra)")
    p.add_argument("--out", required=True, help="the file to write")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")


def export(args: argparse.Namespace) -> int:
    """Write the checkpoint's greedy policy (normalization and action clipping inside) as a
    TorchScript, torch.export or ONNX file (`rxrl.training.export`)."""
    from rxrl.training.export import export_policy

    print(export_policy(args.checkpoint, args.out, args.format, overwrite=args.force).describe())
    return 0


# ------------------------------------------------------------------------------------ plot


def add_plot_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rxrl plot``."""
    p.add_argument("dirs", nargs="+", metavar="DIR", help="run directories (with metrics.csv)")
    p.add_argument("--out", default=PLOT_NAME,
                   help=f"the image to write, or a directory to write {PLOT_NAME} in "
                        f"(default {PLOT_NAME})")


#: the file ``rxrl plot`` writes (in ``--out`` when that is a directory)
PLOT_NAME = "learning_curves.png"


def read_curve(run: Path) -> tuple[str, dict[str, list[float]]]:
    """A run's label and its metrics columns (ValueError if it has no readable metrics.csv).

    A torn last row (a run killed while writing it) is left out.
    """
    path = run / "metrics.csv"
    if not path.is_file():
        raise ValueError(f"no metrics.csv in {run} (is it an rxrl train run directory?)")
    header, rows, _ = read_metrics(path)
    needed = ("env_steps_sampled", "time_s", "episode_return_mean")
    if not rows or any(k not in header for k in needed):
        raise ValueError(f"{path} has no metrics rows with {', '.join(needed)}")
    try:
        columns = {k: [float(r[k]) for r in rows] for k in needed}
    except (TypeError, ValueError) as e:
        raise ValueError(f"{path} is not a metrics file: {e}") from None
    label = run.name
    config = run / "config.json"
    if config.is_file():
        try:
            doc = json.loads(config.read_text())
            label = f"{doc['algo']} {doc['config']['env']} seed {doc['config']['seed']} ({run.name})"
        except (ValueError, KeyError, TypeError):
            pass
    return label, columns


def plot_path(out: str) -> Path:
    """Where ``--out`` writes: ``DIR/learning_curves.png`` for a directory (an existing one, or
    one named with a trailing slash, made if need be), else the file (``.png`` added when it
    has no suffix, as matplotlib would)."""
    path = Path(out)
    if path.is_dir():
        return path / PLOT_NAME
    if out.endswith(("/", os.sep)):
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ValueError(f"cannot write --out {out}: {e.strerror or e}") from None
        return path / PLOT_NAME
    return path if path.suffix else path.with_name(path.name + ".png")


def plot(args: argparse.Namespace) -> int:
    """Learning curves of several runs, overlaid: return vs env steps and vs wall time.

    A run without metrics rows (empty, or just started) is skipped with a warning; the
    command fails only when no run has any.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves, skipped = [], []
    for d in args.dirs:
        try:
            curves.append(read_curve(Path(d)))
        except ValueError as e:
            skipped.append(str(e))
    if not curves:
        raise ValueError(skipped[0] if len(skipped) == 1 else
                         f"none of the {len(skipped)} runs has metrics rows ({skipped[0]}, ...)")
    for reason in skipped:
        print(f"rxrl plot: warning: skipping a run: {reason}", file=sys.stderr)
    out = plot_path(args.out)
    if not out.parent.is_dir():
        raise ValueError(f"cannot write --out {out}: no directory {out.parent}")
    fig, (by_steps, by_time) = plt.subplots(1, 2, figsize=(12, 4.5))
    for label, c in curves:
        by_steps.plot(c["env_steps_sampled"], c["episode_return_mean"], label=label)
        by_time.plot(c["time_s"], c["episode_return_mean"], label=label)
    by_steps.set_xlabel("env steps")
    by_time.set_xlabel("wall time (s)")
    for ax in (by_steps, by_time):
        ax.set_ylabel("episode return (mean of last 100)")
        ax.grid(alpha=0.3)
    by_steps.legend(fontsize="small")
    fig.tight_layout()
    try:
        fig.savefig(out, dpi=100)
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot write --out {out}: {getattr(e, 'strerror', None) or e}") from None
    finally:
        plt.close(fig)
    print(f"wrote {out} ({len(curves)} run{'s' if len(curves) != 1 else ''})")
    return 0


# ---------------------------------------------------------------------------------- replay


def add_replay_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rxrl replay``."""
    p.add_argument("trace", help="a trace file written by rxrl train --trace FILE")


def replay(args: argparse.Namespace) -> int:
    """Rerun a recorded run on the reference backend and check that it reproduces the records."""
    path = Path(args.trace)
    try:
        doc: Any = json.loads(path.read_text())
    except OSError as e:
        raise ValueError(f"cannot read trace {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise ValueError(f"{path} is not a trace file: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != TRACE_FORMAT:
        raise ValueError(f"{path} is not a trace file written by rxrl train --trace")
    try:
        algo = get(doc["algo"])
        config = from_dict(algo.config, doc["config"])
        trace = rxrl.Trace.from_json(json.dumps(doc["trace"]))
        records: list[dict[str, float]] = doc["records"]
        every, final = int(doc["checkpoint_every"]), int(doc["final_steps"])
        resumed = doc.get("resumed_from")
        evaluation = Evaluation(**doc["evaluation"]) if doc.get("evaluation") else None
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path} is not a complete trace file: {e}") from None
    start = None
    if resumed:
        ckpt = load_checkpoint(resumed)
        start = Start(ckpt.learner_state, reseed=ckpt.counters.iteration)
    clock = CheckpointClock(every, final)
    plan = training_plan(algo, config, start, clock, evaluation=evaluation)
    print(f"replaying {len(records)} iterations of {algo.name} {config.env} (seed {config.seed}, "
          f"recorded on {trace.backend or '?'}, {len(trace)} choices) on the reference backend")
    done = 0
    with rxrl.run(plan, "reference", schedule=trace) as run:
        snapshots = (x for x in run if not isinstance(x, EvalResult))  # evaluations: not records
        for recorded, snapshot in zip(records, snapshots, strict=False):
            done += 1
            replayed = deterministic_fields(snapshot.metrics)
            for key, value in recorded.items():
                if not same(float(value), replayed.get(key, math.nan)):
                    print(f"diverged at iteration {done}: {key} recorded {value!r}, replayed "
                          f"{replayed.get(key)!r}")
                    return 1
            last = snapshot.metrics
    if done < len(records):
        print(f"diverged: the replay ended after {done} of {len(records)} iterations")
        return 1
    if done:
        print(f"last iteration: env steps {last.env_steps_sampled:,}, return "
              f"{last.episode_return_mean:.1f}")
    print(f"identical: all {done} recorded iterations reproduced exactly")
    return 0


__all__ = [
    "add_eval_arguments", "add_export_arguments", "add_plot_arguments", "add_replay_arguments",
    "add_show_arguments",
    "PLOT_NAME", "episode_returns", "evaluate", "export", "plot", "plot_path", "read_curve", "replay", "show",
]
