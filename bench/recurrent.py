"""PPO with an LSTM on rxrl/StatelessCartPole-v0: rxrl against sb3-contrib's RecurrentPPO, side by side.

    python bench/recurrent.py --seeds 0,1,2 --steps 500000 --out full

runs, for each seed, three systems one after another, each in a subprocess of its own, the
order rotated from seed to seed (A/B alternation: load drifts on a shared machine hit every
system alike):

- ``rxrl``: ``rxrl.Trainer("ppo", env=..., settings=..., workers=2, ...)`` on the default Ray
  backend, 2 workers — what ``rxrl.train`` runs (`rxrl.train` is ``Trainer(...).run()``; the
  trainer is started first so that start-up, Ray and the actors, is timed apart from training).
  Its settings are PPO's defaults < ``rxrl.algos.on_policy.ppo.TUNED[env]`` (what ``rxrl train
  ppo --env rxrl/StatelessCartPole-v0`` applies) < ``policy.recurrent=lstm`` if TUNED lacks it
  < ``--set``; ``lr_decay_steps`` spans ``--steps`` as ``rxrl train`` has it;
- ``sb3``: sb3-contrib's ``RecurrentPPO("MlpLstmPolicy")`` with rxrl's resolved settings
  (`Matched.of_config`), one process, `DummyVecEnv` of ``num_workers * num_envs_per_worker``
  envs, ``torch.set_num_threads(1)``;
- ``rxrl-mlp`` (``--mlp``, on by default; ``--no-mlp``): rxrl with the same settings but
  ``policy.recurrent=none``, so the table shows what memory buys.

Reported per system and seed: the mean return of the last 100 episodes at the budget; env steps
and training wall time to the first record whose mean return reached 450 ("—" if never); the
training wall time (from the first sample request: actors up for rxrl, ``learn`` called for SB3)
and the end-to-end wall time of the process (interpreter start to exit: imports, Ray start and
shutdown included); then the median over seeds of each, and the ratios rxrl / SB3 and
rxrl / rxrl-mlp. Writes ``bench/results/recurrent_<out>.json`` with every run's learning curve
(one point per training iteration / SB3 rollout: env steps, mean return, wall time).

How SB3 is matched to rxrl, and where the two differ:

- rollout: ``n_envs = num_workers * num_envs_per_worker``, ``n_steps = train_batch_size /
  n_envs`` (= ``fragment_length`` for one round a batch), ``batch_size = minibatch_size``,
  ``n_epochs``, ``gamma``, ``gae_lambda = lam``, ``clip_range = clip_coef``, ``ent_coef``,
  ``max_grad_norm`` (None: inf), ``target_kl``, ``normalize_advantage=True``; the learning
  rate is ``lr`` decayed linearly to 0 over ``lr_decay_steps`` trained steps (a schedule that
  gives each update the rate rxrl gives the same update), constant when that is None;
- ``vf_coef``: rxrl's value loss is ``vf_coef * 0.5 * MSE``, SB3's ``vf_coef * MSE``, so SB3
  gets ``vf_coef / 2`` (as in bench/peer_sb3.py); value clipping (``clip_vloss``) becomes
  ``clip_range_vf = clip_coef``;
- observation normalization (``policy.normalize_obs``, TUNED has it) becomes
  ``VecNormalize(norm_obs=True, clip_obs=obs_clip, norm_reward=scale_rewards)``: both keep
  running statistics, rxrl inside the policy (merged on the learner, shipped with the weights),
  SB3 in the vector env;
- architecture: rxrl's actor is ``obs -> MLP trunk (hidden_sizes, tanh) -> LSTM(recurrent_size)
  -> head``, its critic the same with its own trunk and LSTM. SB3 puts the LSTM *before* its
  MLP: ``obs -> LSTM(lstm_hidden_size) -> MLP net_arch -> head``. It gets
  ``lstm_hidden_size = recurrent_size``, ``enable_critic_lstm=True``, ``shared_lstm=False``
  (two LSTMs, as rxrl), ``net_arch = {pi: hidden_sizes, vf: hidden_sizes}``, tanh: the same
  layers and widths, in another order (SB3's LSTM sees the 2 raw observations, rxrl's the
  trunk's 64 features). SB3 initializes its LSTMs with torch's defaults (rxrl: orthogonal);
- sequences: rxrl trains on sequences of ``policy.sequence_length`` steps (16 in TUNED; the
  recorded state at each one's start), minibatches of whole sequences; SB3 cuts each minibatch
  (``batch_size`` consecutive rows of its env-major buffer from a random offset) at env and
  episode boundaries and runs each piece from its recorded state — pieces of up to ``n_steps``;
- advantages: rxrl standardizes them over the whole batch and again per minibatch, SB3 per
  minibatch.

``--set KEY=VALUE`` (rxrl's ``--set`` paths) changes a setting for all three systems.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import ppo_settings as s
from ppo_cartpole import machine, run_runner

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
ENV = "rxrl/StatelessCartPole-v0"
TARGET = 450.0
WORKERS = 2
#: what a system name runs: the runner and the rxrl settings it adds (after TUNED and --set)
SYSTEMS: dict[str, tuple[str, dict[str, Any]]] = {
    "rxrl": ("rxrl", {}),
    "sb3": ("sb3", {}),
    "rxrl-mlp": ("rxrl", {"policy.recurrent": "none"}),
}
DASH = "—"


# ----------------------------------------------------------------------------- settings


@attrs.frozen
class Matched:
    """rxrl's resolved PPO config, in the terms SB3 is given (the module docstring says how)."""

    num_workers: int
    num_envs_per_worker: int
    fragment_length: int
    train_batch_size: int
    minibatch_size: int
    num_epochs: int
    lr: float
    lr_decay_steps: int | None
    gamma: float
    lam: float
    clip_coef: float
    clip_vloss: bool
    ent_coef: float
    vf_coef: float
    max_grad_norm: float | None
    target_kl: float | None
    adam_eps: float
    normalize_advantages: bool
    hidden_sizes: tuple[int, ...]
    activation: str
    recurrent: str
    recurrent_size: int
    sequence_length: int | None
    normalize_obs: bool
    obs_clip: float
    scale_rewards: bool
    reward_clip: float

    @property
    def num_envs(self) -> int:
        """Environments in all: SB3 steps them in one process."""
        return self.num_workers * self.num_envs_per_worker

    @property
    def n_steps(self) -> int:
        """SB3's steps per env per rollout: rxrl's train batch over the envs."""
        return self.train_batch_size // self.num_envs

    @staticmethod
    def of_config(config: Any) -> Matched:
        """The fields of an `rxrl.algos.on_policy.ppo.PPO` config that SB3 gets."""
        p, learner = config.policy, config.learner
        return Matched(
            num_workers=config.num_workers, num_envs_per_worker=config.num_envs_per_worker,
            fragment_length=config.fragment_length, train_batch_size=config.train_batch_size,
            minibatch_size=learner.minibatch_size, num_epochs=learner.num_epochs, lr=learner.lr,
            lr_decay_steps=config.lr_decay_steps, gamma=config.gamma, lam=config.lam,
            clip_coef=learner.clip_coef, clip_vloss=learner.clip_vloss, ent_coef=learner.ent_coef,
            vf_coef=learner.vf_coef, max_grad_norm=learner.max_grad_norm, target_kl=learner.target_kl,
            adam_eps=learner.adam_eps, normalize_advantages=learner.normalize_advantages,
            hidden_sizes=tuple(p.hidden_sizes), activation=p.activation, recurrent=p.recurrent,
            recurrent_size=p.recurrent_size, sequence_length=p.sequence_length,
            normalize_obs=p.normalize_obs, obs_clip=p.obs_clip, scale_rewards=p.scale_rewards,
            reward_clip=p.reward_clip)

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Matched:
        """Inverse of ``attrs.asdict``."""
        return Matched(**{**data, "hidden_sizes": tuple(data["hidden_sizes"])})


def rxrl_settings(env: str, sets: Iterable[str], extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``--set`` paths an rxrl run of this bench gets on top of TUNED[env] (which
    ``rxrl.Trainer`` applies itself): ``policy.recurrent=lstm`` if TUNED lacks it, ``sets``
    (``KEY=VALUE`` strings), then ``extra``."""
    from rxrl.algos.configs import parse_assignment
    from rxrl.algos.on_policy.ppo import TUNED

    settings: dict[str, Any] = {}
    if "policy.recurrent" not in TUNED.get(env, {}):
        settings["policy.recurrent"] = "lstm"
    settings.update(parse_assignment(a) for a in sets)
    settings.update(extra or {})
    return settings


def resolve(env: str, steps: int, settings: Mapping[str, Any]) -> Any:
    """The PPO config an ``rxrl.train("ppo", env=env, steps=steps, settings=settings)`` run trains."""
    from rxrl.training import prepare

    return prepare("ppo", env=env, settings=settings, steps=steps, workers=WORKERS).config


# ------------------------------------------------------------------------------ runners


def run_rxrl(name: str, env: str, seed: int, steps: int, settings: Mapping[str, Any], run_dir: Path
             ) -> s.RunRecord:
    """One ``rxrl.train``: the record of every iteration (time from the actors being up)."""
    import rxrl
    from rxrl.algos.configs import to_dict
    from rxrl.rl import Metrics

    trainer = rxrl.Trainer("ppo", run_dir, env=env, settings=settings, steps=steps, workers=WORKERS,
                           seed=seed, backend="ray", loggers=("csv",))
    record = s.RunRecord(name, seed, steps, {"env": env, "settings": dict(settings),
                                             "config": to_dict(trainer.config)},
                         versions=s.versions(["rxrl", "ray", "torch", "gymnasium", "numpy"]))
    trainer.start()  # Ray, the actors (what `run` would do at its first step)
    record.setup_s = s.since_start()
    start = time.perf_counter()

    class Curve(rxrl.Callback):
        def on_iteration(self, _trainer: rxrl.Trainer, m: Metrics) -> None:
            if m.train is not None:
                record.learner_s += m.train.learner_time_s
            record.add(time.perf_counter() - start, m.env_steps_sampled, m.env_steps_trained,
                       m.episode_return_mean)

    trainer.callbacks.append(Curve())
    result = trainer.run()
    record.notes.append(f"status {result.status}; run directory {result.run_dir}")
    return record


def run_sb3(name: str, env: str, seed: int, steps: int, m: Matched) -> s.RunRecord:
    """sb3-contrib's RecurrentPPO with the matched settings (an MLP `PPO` if ``m`` has no core)."""
    import torch
    from peer_sb3 import _Clock

    import rxrl.envs  # registers the env with gymnasium

    del rxrl.envs
    contrib: Any = s.optional("sb3_contrib")
    sb3: Any = s.optional("stable_baselines3")
    env_util: Any = s.optional("stable_baselines3.common.env_util")
    vec_env: Any = s.optional("stable_baselines3.common.vec_env")
    callbacks: Any = s.optional("stable_baselines3.common.callbacks")
    record = s.RunRecord(name, seed, steps, {"env": env, "matched": attrs.asdict(m)},
                         versions=s.versions(["sb3_contrib", "stable_baselines3", "torch", "gymnasium",
                                              "numpy"]))
    torch.set_num_threads(1)
    venv = env_util.make_vec_env(env, n_envs=m.num_envs, seed=seed, vec_env_cls=vec_env.DummyVecEnv)
    if m.normalize_obs or m.scale_rewards:
        venv = vec_env.VecNormalize(venv, norm_obs=m.normalize_obs, norm_reward=m.scale_rewards,
                                    clip_obs=m.obs_clip, clip_reward=m.reward_clip, gamma=m.gamma)
    batch = m.n_steps * m.num_envs
    decay = m.lr_decay_steps

    def learning_rate(progress_remaining: float) -> float:
        """rxrl's rate for this update: SB3 calls it after the rollout, rxrl before its count."""
        if decay is None:
            return m.lr
        trained_before = round((1.0 - progress_remaining) * steps) - batch
        return m.lr * max(0.0, 1.0 - max(trained_before, 0) / decay)

    arch = list(m.hidden_sizes)
    policy_kwargs: dict[str, Any] = {
        "net_arch": {"pi": arch, "vf": arch},
        "activation_fn": torch.nn.Tanh if m.activation == "tanh" else torch.nn.ReLU,
        "optimizer_kwargs": {"eps": m.adam_eps},
    }
    common: dict[str, Any] = {
        "learning_rate": learning_rate, "n_steps": m.n_steps, "batch_size": m.minibatch_size,
        "n_epochs": m.num_epochs, "gamma": m.gamma, "gae_lambda": m.lam, "clip_range": m.clip_coef,
        "clip_range_vf": m.clip_coef if m.clip_vloss else None,
        "normalize_advantage": m.normalize_advantages, "ent_coef": m.ent_coef, "vf_coef": m.vf_coef / 2,
        "max_grad_norm": math.inf if m.max_grad_norm is None else m.max_grad_norm,
        "target_kl": m.target_kl, "seed": seed, "device": "cpu", "verbose": 0,
    }
    if m.recurrent == "none":
        model = sb3.PPO("MlpPolicy", venv, policy_kwargs=policy_kwargs, **common)
    elif m.recurrent == "lstm":
        policy_kwargs.update(lstm_hidden_size=m.recurrent_size, enable_critic_lstm=True, shared_lstm=False)
        model = contrib.RecurrentPPO("MlpLstmPolicy", venv, policy_kwargs=policy_kwargs, **common)
    else:
        raise SystemExit(f"sb3-contrib has no {m.recurrent!r} policy (RecurrentPPO: LSTM only)")
    record.setup_s = s.since_start()
    clock = _Clock(record, batch)
    progress = type("Progress", (callbacks.BaseCallback,), {
        "_on_rollout_start": lambda _self: clock.rollout_start(model.ep_info_buffer),
        "_on_rollout_end": lambda _self: clock.rollout_end(),
        "_on_step": lambda _self: True,
    })
    model.learn(total_timesteps=steps, callback=progress())
    clock.rollout_start(model.ep_info_buffer)  # closes the last update
    venv.close()
    return record


def runner(argv: list[str]) -> None:
    """``--run rxrl|sb3``: one run in this process; its `RunRecord` to ``--record``."""
    p = argparse.ArgumentParser(description="one run of bench/recurrent.py (in its own process)")
    p.add_argument("--run", required=True, choices=["rxrl", "sb3"])
    p.add_argument("--name", required=True, help="the system's name in the record and summary line")
    p.add_argument("--env", default=ENV)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--settings", default="{}", help="rxrl: the settings (JSON); sb3: the `Matched` (JSON)")
    p.add_argument("--run-dir", type=Path, help="rxrl's run directory")
    p.add_argument("--record", type=Path, required=True)
    args = p.parse_args(argv)
    s.clean_ray_env()
    settings = json.loads(args.settings)
    if args.run == "rxrl":
        record = run_rxrl(args.name, args.env, args.seed, args.steps, settings, args.run_dir)
    else:
        record = run_sb3(args.name, args.env, args.seed, args.steps, Matched.from_json(settings))
    hit = record.first_at(TARGET)
    last = record.curve[-1].return_mean if record.curve else math.nan
    print(f"{args.name}: {record.env_steps_sampled} steps in {record.train_s:.1f} s, setup "
          f"{record.setup_s:.1f} s, final return {last:.1f}, {TARGET:.0f} at "
          f"{DASH if hit is None else f'{hit.env_steps_sampled} steps / {hit.time_s:.1f} s'}", flush=True)
    record.write(args.record)


# ------------------------------------------------------------------------------ figures


@attrs.define
class Run:
    """One run: its record and the wall time of its process, start to exit."""

    record: s.RunRecord
    process_s: float

    @property
    def ok(self) -> bool:
        """Whether it left a learning curve."""
        return bool(self.record.curve)

    @property
    def final_return(self) -> float:
        """Mean return of the last 100 episodes at the end of the run."""
        return self.record.curve[-1].return_mean if self.record.curve else math.nan

    def to_json(self) -> dict[str, Any]:
        """The record, with the process's wall time."""
        return {**self.record.to_json(), "process_s": self.process_s}


def spawn(name: str, kind: str, env: str, seed: int, steps: int, settings: Mapping[str, Any],
          workdir: Path, timeout_s: float) -> Run:
    """Run one system (``kind``: rxrl or sb3) in a subprocess (`ppo_cartpole.run_runner`,
    which watches its process tree's memory); the run, with the process's wall time."""
    out = workdir / f"{name}-{seed}.json"
    argv = [sys.executable, str(BENCH / "recurrent.py"), "--run", kind, "--name", name, "--env", env,
            "--seed", str(seed), "--steps", str(steps), "--settings", json.dumps(settings),
            "--run-dir", str(workdir / f"{name}-{seed}-run"), "--record", str(out)]
    started = time.perf_counter()
    record = run_runner(name, seed, steps, argv, out, timeout_s, workdir)
    return Run(record, time.perf_counter() - started)


@attrs.frozen
class Figures:
    """A system's medians over its seeds (None where no seed has the figure; a seed that never
    reached the target counts as +inf in the median of the figures to it)."""

    system: str
    runs: int
    reached: int
    final_return: float | None
    steps_to_target: float | None
    time_to_target_s: float | None
    train_s: float | None
    process_s: float | None
    setup_s: float | None
    trained_per_s: float | None


def median(values: Iterable[float]) -> float | None:
    """The median of the non-NaN values; None if there are none or it is infinite."""
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return None
    m = statistics.median(finite)
    return None if math.isinf(m) else m


def figures(system: str, runs: Sequence[Run]) -> Figures:
    """The medians of one system's successful runs."""
    ok = [r for r in runs if r.ok]
    hits = [r.record.first_at(TARGET) for r in ok]
    return Figures(
        system=system, runs=len(ok), reached=sum(h is not None for h in hits),
        final_return=median(r.final_return for r in ok),
        steps_to_target=median(math.inf if h is None else float(h.env_steps_sampled) for h in hits),
        time_to_target_s=median(math.inf if h is None else h.time_s for h in hits),
        train_s=median(r.record.train_s for r in ok), process_s=median(r.process_s for r in ok),
        setup_s=median(r.record.setup_s for r in ok),
        trained_per_s=median(r.record.env_steps_trained / r.record.train_s for r in ok if r.record.train_s))


#: the figures a ratio is given for
RATIO_FIELDS = ("final_return", "steps_to_target", "time_to_target_s", "train_s", "process_s",
                "trained_per_s")


def ratios(ours: Figures, other: Figures) -> dict[str, float | None]:
    """``ours / other`` for each of `RATIO_FIELDS` (None where either lacks it)."""
    out: dict[str, float | None] = {}
    for name in RATIO_FIELDS:
        a, b = getattr(ours, name), getattr(other, name)
        out[name] = a / b if a is not None and b else None
    return out


def fmt(x: float | None, spec: str = ",.0f") -> str:
    """``x`` formatted, or a dash."""
    return DASH if x is None or math.isnan(x) else format(x, spec)


def tables(runs: Sequence[Run], all_figures: Sequence[Figures]) -> str:
    """Markdown: every run, the medians, and the ratios rxrl / each other system."""
    t = f"{TARGET:.0f}"
    rows = [f"| system | seed | final return | env steps to {t} | time to {t} (s) | training (s) | "
            "end to end (s) | setup (s) | trained steps/s |", "|---|---:|" + "---:|" * 7]
    for r in runs:
        rec, hit = r.record, r.record.first_at(TARGET)
        if not r.ok:
            rows.append(f"| {rec.system} | {rec.seed} | failed | | | | {r.process_s:.0f} | | |")
            continue
        rows.append(f"| {rec.system} | {rec.seed} | {fmt(r.final_return, '.1f')} | "
                    f"{fmt(None if hit is None else hit.env_steps_sampled)} | "
                    f"{fmt(None if hit is None else hit.time_s, '.1f')} | {rec.train_s:.1f} | "
                    f"{r.process_s:.1f} | {rec.setup_s:.1f} | {fmt(rec.env_steps_trained / rec.train_s)} |")
    rows += ["", f"| system (median) | runs | reached {t} | final return | env steps to {t} | "
                 f"time to {t} (s) | training (s) | end to end (s) | setup (s) | trained steps/s |",
             "|---|" + "---:|" * 9]
    for f in all_figures:
        rows.append(f"| {f.system} | {f.runs} | {f.reached}/{f.runs} | {fmt(f.final_return, '.1f')} | "
                    f"{fmt(f.steps_to_target)} | {fmt(f.time_to_target_s, '.1f')} | "
                    f"{fmt(f.train_s, '.1f')} | {fmt(f.process_s, '.1f')} | {fmt(f.setup_s, '.1f')} | "
                    f"{fmt(f.trained_per_s)} |")
    ours = next((f for f in all_figures if f.system == "rxrl"), None)
    if ours is not None and len(all_figures) > 1:
        rows += ["", f"| ratio of medians | final return | env steps to {t} | time to {t} | training | "
                     "end to end | trained steps/s |", "|---|" + "---:|" * len(RATIO_FIELDS)]
        for f in all_figures:
            if f.system != "rxrl":
                q = ratios(ours, f)
                rows.append(f"| rxrl / {f.system} | " + " | ".join(fmt(q[k], ".2f") for k in RATIO_FIELDS)
                            + " |")
    return "\n".join(rows)


# --------------------------------------------------------------------------------- main


def main(argv: list[str]) -> None:
    """Run every system for every seed, alternating their order; print and write the results."""
    if "--run" in argv:
        runner(argv)
        return
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    p.add_argument("--steps", type=int, default=500_000, help="env steps per run (the budget)")
    p.add_argument("--out", default="run", help="results go to bench/results/recurrent_<out>.json")
    p.add_argument("--mlp", action=argparse.BooleanOptionalAction, default=True,
                   help="also run rxrl's MLP PPO (policy.recurrent=none) with the same settings")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="an rxrl setting (rxrl train's --set path) for every system, e.g. learner.lr=5e-4")
    p.add_argument("--timeout-s", type=float, default=3600, help="per run")
    args = p.parse_args(argv)
    seeds = [int(x) for x in args.seeds.split(",")]
    systems = [name for name in SYSTEMS if args.mlp or name != "rxrl-mlp"]
    settings = {name: rxrl_settings(ENV, args.set, extra) for name, (_, extra) in SYSTEMS.items()}
    matched = Matched.of_config(resolve(ENV, args.steps, settings["rxrl"]))
    payload = {"rxrl": settings["rxrl"], "sb3": attrs.asdict(matched), "rxrl-mlp": settings["rxrl-mlp"]}
    print(f"PPO-LSTM {ENV}: {systems}, seeds {seeds}, {args.steps:,} env steps each; rxrl settings "
          f"(over TUNED) {settings['rxrl']}; matched {attrs.asdict(matched)}", flush=True)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="rxrl-recurrent-") as tmp:
        for k, seed in enumerate(seeds):
            order = systems[k % len(systems):] + systems[:k % len(systems)]  # rotate: A/B alternation
            runs += [spawn(name, SYSTEMS[name][0], ENV, seed, args.steps, payload[name], Path(tmp),
                           args.timeout_s) for name in order]
    all_figures = [figures(name, [r for r in runs if r.record.system == name]) for name in systems]
    report = tables(runs, all_figures)
    print()
    print(report, flush=True)
    ours = all_figures[0]
    result = {
        "command": "python bench/recurrent.py " + " ".join(argv),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": machine(),
        "versions": s.versions(["rxrl", "ray", "torch", "gymnasium", "numpy", "sb3_contrib",
                                "stable_baselines3"]),
        "env": ENV, "target_return": TARGET, "steps": args.steps, "seeds": seeds,
        "settings": {"rxrl_over_tuned": settings["rxrl"], "rxrl-mlp_over_tuned": settings["rxrl-mlp"],
                     "matched": attrs.asdict(matched)},
        "figures": [attrs.asdict(f) for f in all_figures],
        "ratios_rxrl_over": {f.system: ratios(ours, f) for f in all_figures[1:]},
        "table": report,
        "runs": [r.to_json() for r in runs],
    }
    write_result(f"recurrent_{args.out}", result)


def write_result(name: str, result: Mapping[str, Any]) -> None:
    """Write ``result`` to ``bench/results/<name>.json`` and say where."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(result, separators=(",", ":")))
    print(f"\nwrote {path.relative_to(BENCH.parent)}")

if __name__ == "__main__":
    main(sys.argv[1:])
