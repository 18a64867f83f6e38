"""The GPU checks of issues 23 and 25, as one prepared script of a few minutes on one GPU machine.

``python bench/gpu.py all --out DIR`` runs, each in a process of its own with a time limit (one
part failing leaves the others' results):

1. ``tests``: the CUDA tests (`tests/rl/test_learner_device.py`, `tests/rl/test_learner_group.py`:
   a CUDA learner, and a learner group of two ranks sharing one GPU).
2. ``learners``: trained rows/s of a PPO learner group on Atari batches (uint8 4×84×84 frames,
   the Nature CNN), 1 learner against 2 sharing the GPU (``learner_gpus=0.5``, gloo over CUDA
   tensors), at the same global batch and minibatch; each member a Ray actor built by rxrl's
   `LearnerFactory`; rounds alternate the two. Issue 25's target: 2 learners ≥ 1.5× one.
3. ``pong``: PPO on ``ALE/Pong-v5`` (bench/atari_settings.py's preprocessing and CleanRL's
   ``ppo_atari`` settings: 4 envs per worker, fragments of 128, 4 epochs of 4 minibatches) with
   the learner on CUDA, 2 workers and then ``--workers`` (≥ 8): env frames/s sampled and trained,
   scaling efficiency ``fps(W) / (W / 2 · fps(2))`` (issue 25's target ≥ 0.75) and the return
   curve of the larger run (issue 23).

Each part writes ``DIR/<part>.json``; ``all`` prints a summary and writes ``DIR/gpu.json``.
``--device cpu`` and small sizes (``--quick``) run the same code on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import attrs

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ATARI = "ALE/Pong-v5"


def write(out: Path, name: str, data: dict[str, Any]) -> None:
    """``out/name.json``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(data, indent=1, default=str))


def machine() -> dict[str, Any]:
    """The GPU (if any), the CPUs and the versions."""
    import torch

    info: dict[str, Any] = {"cpus": os.cpu_count(), "torch": torch.__version__,
                            "cuda": torch.cuda.is_available()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


# ------------------------------------------------------------------------------ part: learners


class Member:
    """One learner of a group (or a learner alone), as a Ray actor: built by rxrl's
    `LearnerFactory`, as `rxrl.algos.common.make_groups` builds it."""

    def __init__(self, settings: Any, config: Any, rendezvous: Any, rank: int) -> None:
        from rxrl.algos.common import LearnerFactory
        from rxrl.rl.learners.actor_critic import PPOLearner

        self.learner = LearnerFactory(PPOLearner, settings, config, None, {}, rendezvous)(rank)

    def train(self, batch: Any) -> float:
        """Seconds of one ``train`` on ``batch`` (the GPU's work finished)."""
        import torch

        start = time.perf_counter()
        self.learner.train(batch)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return time.perf_counter() - start

    def gpu(self) -> str:
        """The device of this member's policy."""
        return str(next(self.learner.policy.parameters()).device)


def learners(args: argparse.Namespace) -> dict[str, Any]:
    """1 learner against a group of 2 on the same batches: trained rows/s per round."""
    import ray

    from rxrl.algos.on_policy.ppo import PPO
    from rxrl.envs.atari import AtariSettings
    from rxrl.rl import PPOConfig
    from rxrl.rl.learners.collective import Rendezvous
    from rxrl.rl.workers.rollout import RolloutWorker

    kwargs = attrs.asdict(AtariSettings())
    envs = 8
    batch = RolloutWorker(ATARI, num_envs=envs, fragment_length=args.batch // envs, seed=0,
                          env_kwargs=kwargs).sample()
    config = PPOConfig(num_epochs=args.epochs, minibatch_size=args.batch // args.minibatches,
                       lr=2.5e-4, clip_coef=0.1, clip_vloss=False, max_grad_norm=0.5)
    share = 1.0 / 3 if args.device == "cuda" else 0.0  # all three members on the one GPU
    ray.init(num_cpus=4, num_gpus=1 if args.device == "cuda" else 0, include_dashboard=False,
             log_to_driver=False)
    try:
        remote = ray.remote(num_gpus=share)(Member) if share else ray.remote(Member)
        groups: dict[int, list[Any]] = {}
        for n in (1, 2):
            settings = PPO(env=ATARI, env_kwargs=kwargs, learner_device=args.device,
                           train_batch_size=len(batch), learner_gpus=0.5,
                           learner=attrs.evolve(config, num_learners=n))
            rdv = Rendezvous.open(n) if n > 1 else None
            groups[n] = [remote.remote(settings, attrs.evolve(config, num_learners=n), rdv, r)
                         for r in range(n)]
        ref = ray.put(batch)
        devices = {n: ray.get([m.gpu.remote() for m in g], timeout=300) for n, g in groups.items()}
        rounds: dict[int, list[float]] = {1: [], 2: []}
        for r in range(args.rounds + 1):  # round 0 warms up (CUDA kernels, the gloo connection)
            for n in ((1, 2) if r % 2 else (2, 1)):
                start = time.perf_counter()
                ray.get([m.train.remote(ref) for m in groups[n]], timeout=600)
                if r:
                    rounds[n].append(len(batch) / (time.perf_counter() - start))
        one, two = (sorted(rounds[n])[len(rounds[n]) // 2] for n in (1, 2))
        return {"rows": len(batch), "minibatch": config.minibatch_size, "epochs": config.num_epochs,
                "devices": devices, "rows_per_s": {str(n): v for n, v in rounds.items()},
                "median_1": one, "median_2": two, "ratio_2_over_1": two / one, "target": 1.5}
    finally:
        ray.shutdown()


# ------------------------------------------------------------------------------ part: pong


def pong(args: argparse.Namespace) -> dict[str, Any]:
    """PPO on Pong with ``args.workers`` workers and the learner on ``args.device``, for
    ``args.seconds`` of training."""
    sys.path.insert(0, str(HERE))
    import atari_settings as a
    import ppo_settings as s
    import rxrl_atari
    from rxrl_ppo import run_plan

    from rxrl.algos.on_policy import ppo

    m = a.override(a.MatchedAtari(), [f"num_workers={args.workers}"])
    m = attrs.evolve(m, minibatch_size=m.train_batch // 4)  # CleanRL's 4 minibatches an epoch
    config = attrs.evolve(rxrl_atari.ppo_config(m, 0), learner_device=args.device)
    record = s.RunRecord("rxrl-ppo", 0, 10**9, attrs.asdict(m), budget_s=args.seconds)
    run_plan(record, ppo.plan(config), "ray", lambda r: not r.running())
    frames = m.frame_skip
    return {"workers": args.workers, "device": args.device, "train_s": record.train_s,
            "setup_s": record.setup_s, "learner_s": record.learner_s,
            "env_steps": record.env_steps_sampled,
            "frames_per_s_sampled": frames * record.env_steps_sampled / record.train_s,
            "frames_per_s_trained": frames * record.env_steps_trained / record.train_s,
            "curve": [(round(p.time_s, 1), p.env_steps_sampled, p.return_mean) for p in record.curve]}


# ------------------------------------------------------------------------------ all


def part(name: str, argv: list[str], out: Path, limit_s: float) -> dict[str, Any]:
    """Run ``bench/gpu.py name argv`` in a process of its own for at most ``limit_s``."""
    start = time.perf_counter()
    command = [sys.executable, str(Path(__file__)), name, "--out", str(out), *argv]
    try:
        done = subprocess.run(command, timeout=limit_s, capture_output=True, text=True)
        rc: int | str = done.returncode
        tail = (done.stdout + done.stderr)[-3000:]
    except subprocess.TimeoutExpired as e:
        rc, tail = "timeout", str(e.stdout or "")[-2000:] + str(e.stderr or "")[-2000:]
    print(f"--- {name} {' '.join(argv)}: rc {rc} in {time.perf_counter() - start:.0f} s\n{tail}", flush=True)
    return {"rc": rc, "seconds": time.perf_counter() - start}


def everything(args: argparse.Namespace) -> dict[str, Any]:
    """The three parts in turn, then the summary."""
    out: Path = args.out
    quick = ["--quick"] if args.quick else []
    device = ["--device", args.device]
    runs = {"tests": part("tests", [], out, 120)}
    runs["learners"] = part("learners", [*device, *quick], out, 120)
    small, large = (2, args.workers)
    runs["pong-2"] = part("pong", [*device, "--workers", str(small), "--seconds", str(args.seconds)],
                          out, args.seconds + 70)
    runs[f"pong-{large}"] = part("pong", [*device, "--workers", str(large), "--seconds",
                                                   str(args.seconds * 2)], out, 2 * args.seconds + 80)
    summary: dict[str, Any] = {"machine": machine(), "runs": runs}
    results = {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("*.json")) if p.stem != "gpu"}
    summary.update(results)
    two, many = results.get("pong-2"), results.get(f"pong-{large}")
    if two and many:
        summary["scaling_efficiency"] = (many["frames_per_s_sampled"]
                                         / (large / small * two["frames_per_s_sampled"]))
    return summary


def tests(args: argparse.Namespace) -> dict[str, Any]:
    """The CUDA tests (with the rest of their modules)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                           "tests/rl/test_learner_device.py", "tests/rl/test_learner_group.py"],
                          cwd=ROOT, capture_output=True, text=True, timeout=110)
    return {"rc": done.returncode, "tail": done.stdout[-2500:]}


def main(argv: list[str]) -> None:
    """Parse, run one part (or all), write its JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("part", choices=["all", "tests", "learners", "pong"])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--quick", action="store_true", help="small batches (a CPU dry run)")
    p.add_argument("--batch", type=int, default=8192, help="learners: rows of the global batch")
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--workers", type=int, default=12, help="pong: workers (all: of the larger run)")
    p.add_argument("--seconds", type=float, default=50.0, help="pong: seconds of training")
    args = p.parse_args(argv)
    if args.quick:
        args.batch, args.rounds, args.epochs = min(args.batch, 512), min(args.rounds, 2), 1
    if args.part == "all":
        summary = everything(args)
        write(args.out, "gpu", summary)
        print(json.dumps({k: v for k, v in summary.items() if k != "pong-2" and not k.startswith("pong-")},
                         indent=1, default=str))
        return
    result = {"tests": tests, "learners": learners, "pong": pong}[args.part](args)
    name = args.part if args.part != "pong" else f"pong-{args.workers}"
    result["machine"] = machine()
    write(args.out, name, result)
    print(json.dumps({k: v for k, v in result.items() if k != "curve"}, default=str)[:2000], flush=True)
    if result.get("rc"):  # the tests part failed
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
