"""``rxrl train``'s checks of a run against the machine and its budget, and Ray import errors
explained: said in one line before anything starts, instead of found out by running."""

from __future__ import annotations

import math
import os
import re

from rxrl.algos.common import RolloutSettings
from rxrl.errors import ActorError
from rxrl.training.spelling import Placeholder, given, option, settings

#: resident memory of one actor process (a rollout worker or the learner: Python, torch,
#: gymnasium, Ray's core worker), measured on CartPole with `ps` while ``rxrl train ppo`` ran
PROCESS_MB = 330
#: rollout workers per core beyond which a local run is refused (each is a busy process)
WORKERS_PER_CORE = 8


def available_mb() -> float:
    """Memory available to new processes, in MiB (``MemAvailable``; inf where unknown)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return math.inf


def worker_limit(cores: int | None = None, memory_mb: float | None = None) -> tuple[int, str]:
    """The most rollout workers a local run may start here, and why: the lower of what the
    memory holds (each worker and the learner ~`PROCESS_MB`) and `WORKERS_PER_CORE` per core."""
    cores = cores or os.cpu_count() or 1
    memory_mb = available_mb() if memory_mb is None else memory_mb
    by_cores = WORKERS_PER_CORE * cores
    by_memory = max(1, int(memory_mb // PROCESS_MB) - 1) if math.isfinite(memory_mb) else by_cores
    if by_memory < by_cores:
        return by_memory, (f"{memory_mb / 1024:.1f} GiB of memory is available, ~{PROCESS_MB} MiB "
                           "for each rollout worker and the learner")
    return by_cores, (f"{cores} cores, at most {WORKERS_PER_CORE} busy rollout workers per core")


def check_machine(config: RolloutSettings, cores: int | None = None,
                  memory_mb: float | None = None) -> None:
    """Refuse, in one line, a local Ray run whose workers this machine cannot hold: more
    memory than is available, or far more workers than cores — stating the one limit that
    holds (`worker_limit`), so that a run with that many workers is accepted."""
    n = config.num_workers
    fit, why = worker_limit(cores, memory_mb)
    if n > fit:
        raise ValueError(f"{given('--workers', 'workers', n)}: use at most {fit} workers here "
                         f"({why}), or train on a Ray cluster ({given('--address', 'address', ADDRESS)})")


def check_overshoot(config: RolloutSettings, steps_left: int) -> None:
    """Refuse a budget smaller than one iteration: the run would overshoot it many times."""
    sample = config.iteration_sample()
    steps = option("--steps", "steps")
    if sample.steps > steps_left:
        raise ValueError(
            f"{steps}: one training iteration samples {sample.steps:,} env steps ({sample.shape}), "
            f"more than the {steps_left:,} left to train: raise {steps}, or lower "
            f"{to_lower(sample.lower)}")


def to_lower(paths: tuple[str, ...]) -> str:
    """The config paths that make an iteration smaller, as the caller sets them: ``num_workers``
    by ``--workers`` (``workers``), the others by ``--set`` (``settings``)."""
    rest = [p for p in paths if p != "num_workers"]
    parts = [option("--workers", "workers")] if "num_workers" in paths else []
    if rest:
        parts.append(settings(*rest))
    return " or ".join(parts)


#: placeholders in a message's example of an option (``--address ADDRESS``, ``address=ADDRESS``)
ADDRESS, N = Placeholder("ADDRESS"), Placeholder("N")

_NO_MODULE = re.compile(r"No module named '([^']+)'")


def explain_actor_error(e: ActorError, address: str | None) -> Exception:
    """An actor error in the command's terms: a module the Ray workers cannot import, in one
    line with how to ship it; a dead actor of a group without restarts, with the flag that
    restarts rollout workers; any other error as it is."""
    found = _NO_MODULE.search(str(e))
    if found is None:
        if "its group has no restart policy" in str(e):
            return ActorError(str(e).replace(
                "its group has no restart policy (group.with_restarts(n) restarts dead actors)",
                f"no restarts were allowed ({given('--worker-restarts', 'worker_restarts', N)} "
                "restarts rollout workers)"))
        return e
    module = found.group(1)
    where = re.match(r"creating actor (\S+)", str(e))
    actor = f" (actor {where.group(1)})" if where else ""
    if address:
        how = ("ship it to the cluster (Ray's runtime_env: {'working_dir': DIR} or "
               "{'py_modules': [DIR]}), or install it on every node")
    else:
        how = ("it is importable here but not from the directories the workers search: "
               "install it (pip install -e), or run from the directory that holds it")
    return ValueError(f"the Ray workers cannot import module {module!r}{actor}: {how}")


__all__ = ["PROCESS_MB", "WORKERS_PER_CORE", "available_mb", "check_machine", "check_overshoot",
           "explain_actor_error", "worker_limit"]
