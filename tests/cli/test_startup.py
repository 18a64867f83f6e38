"""The local Ray that ``rxrl train`` starts (issue 14, item 10): lean, with a worker process
started in advance for every actor of the plan, each importing torch before it is given one
(unless most actors are torch-free rollout workers) and running at the driver's priority.

How long that takes is measured in bench/startup.py (docs/benchmarks.md, "Start-up"), not
asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from rxrl.backends.ray.connect import DRIVER_WARM, LEAN_SKIPS, is_lean
from rxrl.training.setup import RAY_INIT, TORCH_FREE_PRELOAD, WORKER_PRELOAD
from tests.cli.helpers import ROOT, environment

#: the scripts of the processes a lean local Ray goes without (`LEAN_SKIPS`)
SKIPPED_SCRIPTS = ("dashboard/dashboard.py", "_private/log_monitor.py", "autoscaler/_private/monitor.py")


def test_the_cli_s_ray_options_make_a_lean_ray_and_other_options_do_not() -> None:
    assert is_lean(RAY_INIT)
    assert not is_lean({**RAY_INIT, "include_dashboard": None})
    assert not is_lean({**RAY_INIT, "log_to_driver": True})
    assert len(LEAN_SKIPS) == len(SKIPPED_SCRIPTS)
    assert "torch" in WORKER_PRELOAD and "torch" not in TORCH_FREE_PRELOAD


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
