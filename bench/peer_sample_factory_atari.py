"""Sample Factory 2.1's APPO on Atari with its own Atari wrappers and the matched IMPALA settings.

Runs in a venv of its own (Sample Factory pins ``gymnasium<1`` and ``numpy<2``; bench/atari.py
starts it with ``$RXRL_SF_PYTHON``, default ``.sfvenv/bin/python`` in the checkout), which
needs ``torch==2.13.0`` (the CPU wheel), ``sample-factory==2.1.1``, ``ale-py==0.10.2`` (it ships
the ROMs and works with gymnasium 0.29) and ``attrs`` (bench/requirements-sample-factory.txt);
it imports ``ppo_settings`` and
``atari_settings`` from bench/, never rxrl.

SF's parallel runner, CPU only, asynchronous (``serial_mode`` off, ``async_rl`` on), one policy:
the learner process (one torch thread), one inference process that acts for all envs, and 2
rollout-worker processes × 4 envs (one split, no double buffering, as SF's Atari defaults).
The env is SF's Atari wrapper stack (`sf_examples.atari.atari_utils.make_atari_env`'s) on a
``frameskip=1`` ``ALE/Pong-v5`` with sticky actions 0.25: up to 30 no-ops at a reset, frame skip 4
with the max of the last two frames, one episode per life, FIRE pressed at a reset, rewards
clipped to their sign, 84×84 grayscale, a stack of 4; returns are the games' raw scores
(gymnasium's `RecordEpisodeStatistics` below all the wrappers, mean of SF's last 100 games).
The model is SF's ``convnet_atari`` encoder: the Nature CNN (32-64-64 convolutions, 512 units)
shared by a policy and a value head. Learning: SF's APPO, fragments (``rollout``) of 32, batches
of 512 in one minibatch, one epoch, lr 5e-4 constant, gamma 0.99, entropy 0.01,
``value_loss_coeff = vf_coef / 2`` (SF weights the plain MSE), no value clipping, policy-ratio
clip 0.4 (rxrl's and RLlib's APPO clip), gradient norm 0.5, no input or return normalization
(SF's Atari defaults normalize both); SF's Atari defaults otherwise (``obs_scale`` 255, Adam eps
1e-5). Advantages are GAE (lambda 0.95 over each fragment), SF's Atari default, not V-trace:
SF 2.1.1's learner crashes with ``with_vtrace`` as soon as it records its summaries
(``var.mb.advantages``; fixed on SF's main branch after 2.1.1, PR 332, not released).

Counting: SF's ``train_for_env_steps`` and its learner's ``env_steps`` are env *frames* here
(``summaries_use_frameskip``, SF's Atari default): agent steps trained = frames / 4. Agent steps
sampled are SF's ``samples_collected`` (observations its inference worker acted on), which the
inference worker reports every 3 s: each report adds one point to the record (time since
training started, steps sampled, steps trained, mean score), and the run stops at the first report
with ``--budget-steps`` agent steps sampled (``train_for_env_steps`` = 10× that in frames is only a
backstop). Training starts when SF's sampler says its inference worker is ready, which is when the
rollout workers create their envs and ask for their first actions (``setup_s`` is until then).
``learner_s`` is the learner's "train" timer over the whole run.

Not matched (SF's design and wrappers): actions come from a separate inference process, not from
the rollout workers; frames are resized in colour, then turned gray; `FireResetEnv` presses FIRE
then action 2 at every reset (game or life), agent steps not counted; the learner may hold up to
2 batches (``num_batches_to_accumulate``) and trains on experience up to 1,000 policy versions old
(``max_policy_lag``; rxrl keeps one fragment in flight per worker); SF pins each rollout worker to
a core (``set_workers_cpu_affinity``) and nices its workers (rollout workers to 10), which this
runner resets to 0 at start and at every report (as ``ppo_settings.RAY_INIT`` does for Ray's
workers); observations stay uint8 in shared memory and are scaled by 1/255 before the model; SF
also writes TensorBoard summaries and a checkpoint at the end (into a temporary directory).

Run alone: ``/work/sfvenv/bin/python bench/peer_sample_factory_atari.py --budget-steps 20000 --algo appo``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import statistics
import sys
import tempfile
import time
from typing import Any

import atari_settings as a
import attrs
import ppo_settings as s

#: SF's registered name of `make_env`, and SF's episodic stat that holds a game's raw score
ENV_NAME, SCORE_KEY = "bench_atari", "RecordEpisodeStatistics_reward"


def make_env(settings: dict[str, Any], full_env_name: str, cfg: Any, env_config: Any,
             render_mode: str | None = None) -> Any:
    """One game wrapped as SF's ``make_atari_env`` wraps it, on ``settings["env"]`` (`MatchedAtari`'s
    fields) with its sticky actions, instead of SF's ``NoFrameskip-v4`` ids (no sticky actions)."""
    s.optional("ale_py")  # registers the ALE/ ids
    gym = s.optional("gymnasium")
    w = s.optional("sample_factory.envs.env_wrappers")
    env = gym.make(settings["env"], frameskip=1, render_mode=render_mode,
                   repeat_action_probability=settings["repeat_action_probability"])
    env = gym.wrappers.RecordEpisodeStatistics(env)
    env = w.NoopResetEnv(env, noop_max=settings["noop_max"])
    env = w.MaxAndSkipEnv(env, skip=cfg.env_frameskip)
    env = w.EpisodicLifeEnv(env)
    if "FIRE" in env.unwrapped.get_action_meanings():
        env = w.FireResetEnv(env)
    env = w.ClipRewardEnv(env)
    env = gym.wrappers.ResizeObservation(env, (settings["screen_size"], settings["screen_size"]))
    env = gym.wrappers.GrayScaleObservation(env)
    env = gym.wrappers.FrameStack(env, cfg.env_framestack)
    return w.NumpyObsWrapper(env)


def sf_argv(m: a.MatchedAtari, seed: int, budget_steps: int, train_dir: str) -> list[str]:
    """The matched settings as SF's command line (on top of SF's Atari defaults)."""
    settings: dict[str, object] = {
        "env": ENV_NAME, "experiment": "sf-appo", "train_dir": train_dir, "restart_behavior": "overwrite",
        "device": "cpu", "seed": seed, "serial_mode": False, "async_rl": True, "num_policies": 1,
        "num_workers": m.num_workers, "num_envs_per_worker": m.envs_per_worker, "worker_num_splits": 1,
        "rollout": m.impala_fragment_length, "batch_size": m.impala_minibatch_size,
        "num_batches_per_epoch": m.impala_train_batch // m.impala_minibatch_size,
        "num_epochs": m.impala_num_epochs, "learning_rate": m.impala_lr, "lr_schedule": "constant",
        "gamma": m.gamma, "exploration_loss_coeff": m.ent_coef, "value_loss_coeff": m.vf_coef / 2,
        "max_grad_norm": m.max_grad_norm, "with_vtrace": False, "gae_lambda": m.lam,
        "ppo_clip_ratio": 0.4, "ppo_clip_value": math.inf, "normalize_input": False,
        "normalize_returns": False, "encoder_conv_architecture": "convnet_atari",
        "env_frameskip": m.frame_skip, "env_framestack": m.frame_stack, "summaries_use_frameskip": True,
        "train_for_env_steps": 10 * m.frame_skip * budget_steps, "with_wandb": False,
    }
    return [f"--{k}={v}" for k, v in settings.items()]


def renice_children() -> None:
    """Put this process's descendants (SF's workers) back at nice 0."""
    psutil = s.optional("psutil")
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            child.nice(0)


@attrs.define
class Progress:
    """Turns SF's reports in the runner process into the record's points, and stops at the budget."""

    record: s.RunRecord
    frame_skip: int
    start: float | None = None

    def sampler_ready(self, *_: Any) -> None:
        """SF's sampler is ready: the rollout workers start sampling, training time starts."""
        if self.start is None:
            self.start = time.perf_counter()
            self.record.setup_s = s.since_start()
            renice_children()

    def samples_reported(self, runner: Any, msg: dict[str, Any], policy_id: int) -> None:
        """An inference worker's report (after SF's own handler added it to ``samples_collected``)."""
        if self.start is None or runner.stopped:
            return
        scores = runner.policy_avg_stats.get(SCORE_KEY, [[]])[policy_id]
        self.record.add(time.perf_counter() - self.start, int(runner.samples_collected[policy_id]),
                        int(runner.env_steps.get(policy_id, 0)) // self.frame_skip,
                        statistics.fmean(scores) if scores else math.nan)
        renice_children()
        if not self.record.running():
            runner._stop_training()


def run(m: a.MatchedAtari, seed: int, budget_steps: int, algo: str) -> s.RunRecord:
    """Train until ``budget_steps`` agent steps were sampled; return the record of the run."""
    if algo != "appo":
        raise SystemExit(f"peer_sample_factory_atari.py: --algo {algo} is not run here; use --algo appo")
    arguments = s.optional("sample_factory.cfg.arguments")
    misc = s.optional("sample_factory.algo.utils.misc")
    record = s.RunRecord("sf-appo", seed, budget_steps, attrs.asdict(m), versions=s.versions(
        ["sample-factory", "torch", "gymnasium", "ale-py", "numpy"]))
    env_utils = s.optional("sample_factory.envs.env_utils")
    env_utils.register_env(ENV_NAME, functools.partial(make_env, attrs.asdict(m)))
    progress = Progress(record, m.frame_skip)
    with tempfile.TemporaryDirectory(prefix="rxrl-sf-appo-") as train_dir:
        argv = sf_argv(m, seed, budget_steps, train_dir)
        parser, partial = arguments.parse_sf_args(argv=argv)
        s.optional("sf_examples.atari.atari_params").atari_override_defaults(partial.env, parser)
        cfg, runner = s.optional("sample_factory.train").make_runner(arguments.parse_full_cfg(parser, argv))
        if runner.init() != misc.ExperimentStatus.SUCCESS:
            raise SystemExit("sample factory: runner.init() failed (see its log above)")
        # a slot on SF's event loop for the sampler's "ready" signal (slots are EventLoopObjects' attributes)
        clock = s.optional("signal_slot.signal_slot").EventLoopObject(runner.event_loop, "bench_clock")
        clock.sampler_ready = progress.sampler_ready
        runner.sampler.initialized.connect(clock, "sampler_ready")
        runner.policy_msg_handlers[misc.SAMPLES_COLLECTED].append(progress.samples_reported)
        status = runner.run()
    if status != misc.ExperimentStatus.SUCCESS or not record.curve:
        raise SystemExit(f"sample factory: the run ended with status {status} after "
                         f"{len(record.curve)} reports")
    timings = dict(runner.component_profiles)
    record.learner_s = float(next((t.get("train", 0.0) for k, t in timings.items() if "Learner" in k), 0.0))
    record.notes.append(f"SF's train_for_env_steps {cfg.train_for_env_steps} frames (a backstop); "
                        "points are the inference worker's 3 s reports")
    return record


def main(argv: list[str]) -> None:
    """Run once and print the summary line (and write JSON with ``--out``)."""
    a.runner_main(argv, __doc__ or "", lambda args, m: run(m, args.seed, args.budget_steps, args.algo))


if __name__ == "__main__":
    main(sys.argv[1:])
