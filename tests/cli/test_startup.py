"""The local Ray that ``rxrl train`` starts (issue 14, item 10): lean, with a worker process
started in advance for every actor of the plan and none besides, each importing torch before
it is given one (unless most actors are torch-free rollout workers) and running at the
driver's priority; its processes skip Ray's serializer add-ons for packages they have not
imported, and it records no task events (issue 23, item 4: memory).

How long that takes is measured in bench/startup.py (docs/benchmarks.md, "Start-up"), and
how much memory in bench/memory.py ("Memory (issue 23)"), not asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

import rxrl
from rxrl import ops
from rxrl.algos.on_policy import ppo
from rxrl.algos.qlearning import dqn
from rxrl.backends.ray.connect import DRIVER_WARM, LEAN_SKIPS, is_lean
from rxrl.training.setup import RAY_INIT, TORCH_FREE_PRELOAD, WORKER_PRELOAD, ray_init_options
from tests.cli.helpers import ROOT, environment

#: the scripts of the processes a lean local Ray goes without (`LEAN_SKIPS`)
SKIPPED_SCRIPTS = ("dashboard/dashboard.py", "_private/log_monitor.py", "autoscaler/_private/monitor.py")


def test_the_cli_s_ray_options_make_a_lean_ray_and_other_options_do_not() -> None:
    assert is_lean(RAY_INIT)
    assert not is_lean({**RAY_INIT, "include_dashboard": None})
    assert not is_lean({**RAY_INIT, "log_to_driver": True})
    assert len(LEAN_SKIPS) == len(SKIPPED_SCRIPTS)
    assert "torch" in WORKER_PRELOAD and "torch" not in TORCH_FREE_PRELOAD


class Ticker:
    """A toy actor."""

    def tick(self) -> int:
        """One."""
        return 1


def test_the_local_ray_gets_a_cpu_per_actor_and_no_more() -> None:
    """A CPU of the local Ray is a worker process started in advance and kept: one per actor
    (PPO's learner on the driver is none), whatever the machine's cores, unless the plan's
    groups ask for more CPUs than that."""
    assert ray_init_options(ppo.plan(ppo.PPO(num_workers=1)))["num_cpus"] == 1
    assert ray_init_options(dqn.plan(dqn.DQN(num_workers=2)))["num_cpus"] == 2  # learner, replay: driver
    assert ray_init_options(dqn.plan(dqn.DQN(num_workers=2, learner_placement="actor")))["num_cpus"] == 3
    assert ray_init_options(dqn.plan(dqn.DQN(num_workers=2, replay_placement="actor")))["num_cpus"] == 4
    asking = rxrl.actors(Ticker, 2).with_options(num_cpus=1.5)
    plan = rxrl.from_actors(asking, Ticker.tick) | ops.barrier() | ops.take(1)
    assert ray_init_options(plan)["num_cpus"] == 3


def test_the_local_ray_records_no_task_events_and_preloads_the_add_on_filter_first() -> None:
    for plan in (ppo.plan(ppo.PPO()), dqn.plan(dqn.DQN())):
        system = ray_init_options(plan)["_system_config"]
        assert system["task_events_report_interval_ms"] == 0
        assert system["preload_python_modules"][0] == "rxrl.backends.ray.preload"


def test_every_module_named_for_early_import_exists() -> None:
    """Ray skips a preload module it cannot import without a word (and `connect` ignores a
    failed `DRIVER_WARM` import): a misspelt or moved name would silently cost the time it
    was meant to save. So each must import, in a fresh process (this one has them all)."""
    names = sorted({*WORKER_PRELOAD, *TORCH_FREE_PRELOAD, *DRIVER_WARM})
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    done = subprocess.run([sys.executable, "-c", code, *names], cwd=ROOT, env=environment(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


def _probe(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "tests.cli.startup_probe", *args], cwd=ROOT,
                          env=environment(), capture_output=True, text=True, timeout=240,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(doc["reports"]) == doc["actors"]
    return doc


@pytest.mark.timeout(300)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the probe reads processes from /proc")
def test_the_cli_s_local_ray_has_a_preloaded_worker_per_actor_in_advance_and_skips_processes() -> None:
    doc = _probe()
    assert doc["num_cpus"] >= doc["actors"]
    reports = doc["reports"]
    assert all(r["torch_imported"] for r in reports), reports
    assert all(r["process_started"] < doc["requested"] for r in reports), (doc["requested"], reports)
    # the actors are the training job: they run at the driver's priority, not at Ray's nice 15
    assert all(r["niceness"] == doc["driver_niceness"] for r in reports), reports
    assert any("raylet" in c for c in doc["commands"]), doc["commands"]  # the listing works
    for script in SKIPPED_SCRIPTS:
        assert not any(script in c for c in doc["commands"]), (script, doc["commands"])


@pytest.mark.timeout(300)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the probe reads processes from /proc")
def test_actors_of_torch_free_factories_get_worker_processes_without_torch() -> None:
    reports = _probe("--torch-free")["reports"]
    assert not any(r["torch_imported"] for r in reports), reports


@pytest.mark.timeout(300)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the probe reads processes from /proc")
def test_one_actor_gets_one_worker_process_and_no_process_imports_serializer_add_ons() -> None:
    """Ray's serializer add-ons would import pyarrow and pydantic (where installed) in every
    process at its first serialization; here neither the driver nor the actor's process has
    imported them after a call. No idle worker process is kept beside the actor's."""
    doc = _probe("--torch-free", "--actors", "1")
    assert doc["num_cpus"] == 1
    assert doc["driver_addons"] == [] and doc["reports"][0]["addons"] == [], doc
    idle = [c for c in doc["commands"] if c.startswith("ray::IDLE")]
    assert idle == [], doc["commands"]
