"""A training run's plan and files, shared by ``rxrl train``, ``eval`` and ``replay``.

A run directory holds ``config.json`` (the algorithm and its config), ``metrics.csv``,
``tb/`` (TensorBoard event files), ``checkpoint.pt`` (the latest checkpoint) and
``summary.json``. A checkpoint holds the learner's ``state_dict`` (policy, optimizer,
minibatch RNG, update count), the config, and the run's counters.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import attrs
import numpy as np

import rxrl
from rxrl import ops
from rxrl.algos import Algorithm, Snapshot, get
from rxrl.algos.common import RolloutSettings, Start, map_leaves
from rxrl.algos.configs import from_dict, to_dict
from rxrl.plan import Op
from rxrl.rl import EnvSpaces, Metrics
from rxrl.rl.data.metrics import EpisodeWindow
from rxrl.training.evaluation import EvalResult, Evaluation, check_supported, with_evaluation
from rxrl.training.lock import numbered

if TYPE_CHECKING:
    from rxrl.rl.learners.actor_critic import Learner

CHECKPOINT = "checkpoint.pt"
CHECKPOINT_FORMAT = "rxrl-checkpoint/1"
TRACE_FORMAT = "rxrl-run-trace/1"


@attrs.frozen
class Counters:
    """Where a run stands: added to a resumed run's per-run counts."""

    iteration: int = 0
    env_steps_sampled: int = 0
    env_steps_trained: int = 0
    episodes: int = 0
    time_s: float = 0.0

    def offset(self, m: Metrics) -> Metrics:
        """``m`` (counted from this run's start) counted from the first run's start."""
        return attrs.evolve(
            m, iteration=m.iteration + self.iteration,
            env_steps_sampled=m.env_steps_sampled + self.env_steps_sampled,
            env_steps_trained=m.env_steps_trained + self.env_steps_trained,
            episodes=m.episodes + self.episodes, time_s=m.time_s + self.time_s)

    @staticmethod
    def of(m: Metrics) -> Counters:
        """The counters after the iteration ``m`` reports."""
        return Counters(m.iteration, m.env_steps_sampled, m.env_steps_trained, m.episodes, m.time_s)


class CheckpointClock:
    """Driver side: marks a record due every ``every`` env steps, and at the run's end.

    The end is ``final`` env steps, or the first record whose mean return reaches ``target``.
    `request` marks the next record due whatever its steps (a run asked to stop).
    """

    def __init__(self, every: int, final: int, target: float | None = None) -> None:
        self.every, self.final, self.target, self.last = every, final, target, 0
        self.requested = False

    def request(self) -> None:
        """Mark the next record due (thread-safe: a flag the driver reads at its next record)."""
        self.requested = True

    def mark(self, m: Metrics) -> Snapshot:
        """Wrap ``m``; due when ``every`` steps passed since the last checkpoint, at the end,
        or when requested."""
        due = (self.requested or m.env_steps_sampled - self.last >= self.every
               or m.env_steps_sampled >= self.final
               or (self.target is not None and m.episode_return_mean >= self.target))
        if due:
            self.last, self.requested = m.env_steps_sampled, False
        return Snapshot(m, due)


def snapshot_if_due(learner: Learner, snapshot: Snapshot) -> Snapshot:
    """On the learner: attach its ``state_dict`` to a due snapshot."""
    return attrs.evolve(snapshot, state=learner.state_dict()) if snapshot.due else snapshot


@overload
def training_plan(algo: Algorithm, config: RolloutSettings, start: Start | None,
                  clock: CheckpointClock, worker_restarts: int = 0, *,
                  evaluation: None = None) -> rxrl.Plan[Snapshot]: ...


@overload
def training_plan(algo: Algorithm, config: RolloutSettings, start: Start | None,
                  clock: CheckpointClock, worker_restarts: int = 0, *,
                  evaluation: Evaluation) -> rxrl.Plan[Snapshot | EvalResult]: ...


def training_plan(algo: Algorithm, config: RolloutSettings, start: Start | None,
                  clock: CheckpointClock, worker_restarts: int = 0, *,
                  evaluation: Evaluation | None = None) -> rxrl.Plan[Snapshot | EvalResult]:
    """The algorithm's plan plus checkpointing: the plan ``rxrl train`` runs (and replays).

    The clock's ``every`` and ``final`` count env steps of this run (not of the runs it
    resumes). With ``algo.records_in_flight > 1`` a snapshot is taken when the learner gets to
    it, after the batches queued before it: a checkpoint of an asynchronous run may hold a
    few updates more than its record counts. ``worker_restarts`` is the rollout workers' restart policy
    (``ActorGroup.with_restarts``; distributed backends only). With ``evaluation``, the
    snapshots are split and an evaluation branch runs beside them, its `EvalResult` items
    merged into the stream (`rxrl.training.evaluation.with_evaluation`; ValueError for an
    algorithm it does not support).
    """
    if evaluation is not None:
        check_supported(algo)
    actors = algo.groups(config, start)
    if worker_restarts:
        actors = attrs.evolve(actors, workers=actors.workers.with_restarts(worker_restarts))
    plan = algo.plan(config, actors)
    snapshots: rxrl.Plan[Snapshot]
    if algo.snapshot is not None:  # several learners: the algorithm's own checkpoint step
        snapshot: Op[Snapshot, Snapshot] = algo.snapshot(actors)
        snapshots = plan | ops.map(clock.mark) | snapshot
    else:
        # an asynchronous learner has batches queued: its snapshots are pipelined behind them
        snapshots = (plan | ops.map(clock.mark)
                     | ops.call(actors.learner, snapshot_if_due, max_in_flight=algo.records_in_flight))
    if evaluation is None:
        return snapshots
    return with_evaluation(snapshots, actors.learner, algo, config, evaluation)


# ----------------------------------------------------------------------------- checkpoints


def save_checkpoint(path: Path, algo: str, config: RolloutSettings, state: Mapping[str, Any],
                    counters: Counters, row: Mapping[str, float] | None = None,
                    episodes: EpisodeWindow | None = None, budget: int | None = None) -> None:
    """Write a checkpoint atomically (a reader never sees half a file); ``row`` is its
    iteration's metrics row, which a resume puts back if the run was killed before (or while)
    metrics.csv got it; ``episodes`` the episodes its record's statistics cover, from which a
    resumed run's records go on; ``budget`` the run's env-step budget (counted from the first
    run's start), which a resume without a budget of its own trains to."""
    doc: dict[str, Any] = {"format": CHECKPOINT_FORMAT, "algo": algo, "config": to_dict(config),
                           "learner": dict(state), "counters": attrs.asdict(counters)}
    if budget is not None:
        doc["budget"] = int(budget)
    if row is not None:
        doc["row"] = {str(k): float(v) for k, v in row.items()}
    if episodes is not None:
        doc["episodes"] = episodes.as_dict()
    import torch  # checkpoints are torch files; a driver imports torch once it writes one

    tmp = path.with_name(path.name + ".tmp")
    torch.save(tensors_of(doc), tmp)
    os.replace(tmp, path)


def tensors_of(value: Any) -> Any:
    """``value`` with every numpy array in it (in dicts, lists and tuples, nested) as a CPU
    tensor: what a checkpoint file holds, so that ``torch.load(..., weights_only=True)``
    reads it (it refuses numpy arrays). A replay shard's state is arrays (its process has
    no torch: `rxrl.rl.replay.buffers.ReplayBuffer.state_dict`)."""
    import torch

    def tensor(x: Any) -> Any:
        if not isinstance(x, np.ndarray):
            return x
        with warnings.catch_warnings():  # an array from Ray's object store is read-only: only read here
            warnings.filterwarnings("ignore", "The given NumPy array is not writable")
            return torch.from_numpy(np.ascontiguousarray(x))

    return map_leaves(value, tensor)


@attrs.frozen(eq=False)
class Checkpoint:
    """A loaded checkpoint: algorithm, config, learner state and counters."""

    path: Path
    algo: Algorithm
    config: RolloutSettings
    learner_state: Mapping[str, Any]
    counters: Counters
    #: the checkpoint's iteration's metrics row (None in checkpoints written before it was kept)
    row: Mapping[str, float] | None = None
    #: the episodes its record's statistics cover (None: not kept, as before 2026-12-06, or a
    #: plan without one window, e.g. multi-agent)
    episodes: EpisodeWindow | None = None
    #: the run's env-step budget, from the first run's start (None in checkpoints written
    #: before it was kept, 2026-12-07)
    budget: int | None = None


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read a checkpoint file, or the ``checkpoint.pt`` of a run directory.

    Raises ValueError ("corrupt checkpoint ...") for anything that is not a complete
    rxrl checkpoint.
    """
    file = Path(path)
    if file.is_dir():
        file = file / CHECKPOINT
    if not file.is_file():
        raise ValueError(f"no checkpoint at {path} (expected a {CHECKPOINT} file or a run directory)")
    import torch

    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols before failing
            warnings.simplefilter("ignore")
            doc: Any = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as e:
        raise ValueError(f"corrupt checkpoint {file}: not a readable torch file "
                         f"({type(e).__name__})") from e
    try:
        if not isinstance(doc, dict) or doc.get("format") != CHECKPOINT_FORMAT:
            raise ValueError("not an rxrl checkpoint")
        algo = get(doc["algo"])
        config = from_dict(algo.config, doc["config"])
        counters = counters_of(doc["counters"])
        state = doc["learner"]
        if not isinstance(state, dict) or not {"policy", "optimizer"} <= set(state):
            raise ValueError("the learner state is incomplete")
        row = doc.get("row")
        if row is not None and not (isinstance(row, dict) and all(
                isinstance(k, str) and isinstance(v, float) for k, v in row.items())):
            raise ValueError("its metrics row is not a mapping of names to numbers")
        episodes = episodes_of(doc.get("episodes"))
        budget = doc.get("budget")
        if budget is not None and (type(budget) is not int or budget < 1):
            raise ValueError(f"its budget is not a positive number of env steps: {budget!r}")
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"corrupt checkpoint {file}: {_one_line(e)}") from e
    return Checkpoint(file, algo, config, state, counters, row, episodes, budget)


def episodes_of(data: Any) -> EpisodeWindow | None:
    """A checkpoint's episode window (None if it has none); ValueError unless it is two
    lists of numbers of one length."""
    if data is None:
        return None
    if not (isinstance(data, dict) and set(data) == {"returns", "lengths"}
            and all(isinstance(data[k], list) for k in data)
            and all(isinstance(x, float | int) and not isinstance(x, bool) for x in data["returns"])
            and all(isinstance(x, int) and not isinstance(x, bool) for x in data["lengths"])):
        raise ValueError("its episode window is not two lists of numbers (returns, lengths)")
    return EpisodeWindow(data["returns"], data["lengths"])


def counters_of(data: Any) -> Counters:
    """`Counters` from a checkpoint's dict; ValueError naming the field if one is missing or
    of the wrong type."""
    if not isinstance(data, dict):
        raise ValueError(f"counters must be a mapping, got {data!r}")
    names = [f.name for f in attrs.fields(Counters)]
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ValueError(f"unknown counter {unknown[0]!r}")
    for name in names:
        value = data.get(name)
        if (isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0
                or (name != "time_s" and not isinstance(value, int))):
            kind = "a number" if name == "time_s" else "an integer"
            raise ValueError(f"counters.{name} must be {kind} >= 0, got {value!r}")
    return Counters(**{name: data[name] for name in names})


def check_fits(ckpt: Checkpoint, config: RolloutSettings, spaces: EnvSpaces) -> None:
    """Raise ValueError (one line) unless the checkpoint's policy loads into a policy built
    for ``config`` (e.g. ``--set policy.hidden_sizes`` changed the layers)."""
    from rxrl.rl.models.policy import make_policy

    policy = make_policy(spaces.observation, spaces.action, config.policy, config.seed)
    own = {k: tuple(v.shape) for k, v in policy.state_dict().items()}
    saved = ckpt.learner_state["policy"]
    theirs = {k: tuple(getattr(v, "shape", ())) for k, v in saved.items()}
    missing, extra = sorted(set(own) - set(theirs)), sorted(set(theirs) - set(own))
    wrong = [k for k in own if k in theirs and own[k] != theirs[k]]  # first layer first
    if wrong:
        k = wrong[0]
        raise ValueError(f"{ckpt.path}: its policy does not fit the config (policy "
                         f"{to_dict(config.policy)}): {k} is {list(theirs[k])} in the "
                         f"checkpoint, {list(own[k])} in the config; {len(wrong)} tensor(s) "
                         "differ — resume with the policy settings it was trained with")
    if missing or extra:
        raise ValueError(f"{ckpt.path}: its policy does not fit the config (policy "
                         f"{to_dict(config.policy)}): missing {missing[:3]}, unexpected "
                         f"{extra[:3]} — resume with the policy settings it was trained with")


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) < 300 else text[:297] + "..."


# ---------------------------------------------------------------------------------- metrics


def read_metrics(path: Path) -> tuple[list[str], list[dict[str, str]], bool]:
    """A metrics.csv's header, its complete rows, and whether a torn last row was left out.

    A row is torn when the run was killed while writing it: the file then does not end
    with a newline, or the last row has fewer fields than the header.
    """
    text = path.read_text()
    torn = bool(text) and not text.endswith("\n")
    if torn:
        text = text[:text.rfind("\n") + 1]
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return [], [], torn
    header, body = rows[0], rows[1:]
    if body and len(body[-1]) != len(header):
        body, torn = body[:-1], True
    return header, [dict(zip(header, r, strict=True)) for r in body if len(r) == len(header)], torn


@attrs.frozen
class MetricsRepair:
    """What `repair_metrics` did: the header kept, rows kept (the restored one included) and
    dropped, a torn row removed, the checkpoint's own row put back."""

    header: list[str]
    kept: int
    dropped: int
    torn: bool
    restored: bool = False


def repair_metrics(path: Path, through: int,
                   row: Mapping[str, object] | None = None) -> MetricsRepair | None:
    """Cut metrics.csv back to the rows of iterations ``<= through`` (a resumed run's
    checkpoint), without a torn last row, and end it with ``row`` (the checkpoint's own row,
    as the CSV writes it) when its iteration's row is missing (the run was killed after the
    checkpoint and before, or while, the row was written); rewritten atomically, only if
    anything changes. None when there is no file or no header."""
    if not path.is_file():
        return None
    header, rows, torn = read_metrics(path)
    if not header:
        return None
    kept: list[Mapping[str, object]] = [
        r for r in rows if 0 <= _int(r.get("iteration"), -1) <= through]
    restored = (row is not None and through > 0
                and (not kept or _int(str(kept[-1].get("iteration")), -1) < through))
    if restored:
        assert row is not None
        kept.append(row)
    if torn or restored or len(kept) < len(rows):
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=header, extrasaction="ignore", restval="")
            writer.writeheader()
            writer.writerows(kept)
        os.replace(tmp, path)
    return MetricsRepair(header, len(kept), len(rows) - len(kept) + restored, torn, restored)


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


# ---------------------------------------------------------------------------------- traces


def deterministic_fields(m: Metrics) -> dict[str, float]:
    """The fields of a record that a replay must reproduce exactly (no wall-clock times)."""
    row = m.as_row()
    return {k: v for k, v in row.items()  # (multi-agent rows: train/<policy>/learner_time_s)
            if k not in ("steps_per_s", "time_s") and not k.endswith("learner_time_s")}


def save_trace(path: Path, algo: str, config: RolloutSettings, trace: rxrl.Trace,
               records: list[dict[str, float]], every: int, final: int,
               resumed_from: Path | None, evaluation: Evaluation | None = None) -> Path:
    """Write a run's trace with what ``rxrl replay`` needs to rebuild and check the run (its
    evaluation settings too: the evaluation branch is part of the plan that ran); the file
    written: ``path``, or where another run wrote it meanwhile ``NAME-2.SUFFIXES`` (``-3``,
    ...): a trace never replaces another."""
    doc = {"format": TRACE_FORMAT, "algo": algo, "config": to_dict(config),
           "checkpoint_every": every, "final_steps": final,
           "resumed_from": None if resumed_from is None else str(resumed_from.resolve()),
           "evaluation": None if evaluation is None else attrs.asdict(evaluation),
           "records": records, "trace": json.loads(trace.to_json())}
    text = json.dumps(doc)
    for target in numbered(path):
        try:
            with open(target, "x") as f:
                f.write(text)
        except FileExistsError:
            continue
        return target
    raise AssertionError("numbered() never ends")


def same(a: float, b: float) -> bool:
    """Equal, NaN equal to NaN."""
    return a == b or (math.isnan(a) and math.isnan(b))


__all__ = [
    "CHECKPOINT", "Checkpoint", "CheckpointClock", "Counters", "MetricsRepair", "Snapshot",
    "check_fits", "counters_of", "deterministic_fields", "episodes_of", "load_checkpoint", "read_metrics",
    "repair_metrics", "same", "save_checkpoint", "save_trace", "snapshot_if_due", "tensors_of",
    "training_plan",
]
