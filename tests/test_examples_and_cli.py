"""The examples run, and the ``rxrl`` console script works as installed."""

from __future__ import annotations

import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def test_quickstart_trains_three_steps_and_syncs_weights(capsys: pytest.CaptureFixture[str]) -> None:
    module = runpy.run_path(str(ROOT / "examples" / "quickstart.py"))
    assert module["main"]("reference") == [1, 2, 3]
    out = capsys.readouterr().out
    assert "| broadcast(Worker×2, Worker.set_weights)" in out


def test_quickstart_workers_sample_with_the_weights_broadcast_after_each_step() -> None:
    import rxrl
    from rxrl import ops

    module = runpy.run_path(str(ROOT / "examples" / "quickstart.py"))
    # the quickstart plan with a tap after the barrier: fragments encode the worker's
    # weights, and two rounds of 6 steps fill one 12-step batch, so round r has weights r // 2
    workers = rxrl.indexed_actors(module["Worker"], 2, name="Worker")
    learner = rxrl.actors(module["Learner"], 1)
    rounds: list[list[list[int]]] = []
    tapped = (rxrl.from_actors(workers, module["Worker"].sample) | ops.barrier() | ops.tap(rounds.append)
              | ops.map(module["concat"]) | ops.window(min_size=12, combine=module["concat"])
              | ops.call(learner, module["Learner"].train)
              | ops.broadcast(workers, module["Worker"].set_weights) | ops.take(3))
    assert list(rxrl.run(tapped)) == [1, 2, 3]
    assert [r[0][0] // 10 for r in rounds] == [0, 0, 1, 1, 2, 2]


def console_script() -> str:
    path = shutil.which("rxrl", path=str(Path(sys.executable).parent))
    assert path is not None, "the rxrl console script is not installed (pip install -e .)"
    return path


def test_rxrl_demo_prints_the_plan_and_its_rounds() -> None:
    done = subprocess.run([console_script(), "demo"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "| barrier()" in done.stdout
    assert "round 2: [[16, 25], [10816, 11025]]" in done.stdout


def test_rxrl_reports_bad_input_in_one_line() -> None:
    done = subprocess.run([console_script(), "demo", "--backend", "spark"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip() == ("rxrl demo: error: unknown backend 'spark'; "
                                   "choose one of ['ray', 'reference', 'rx']")
