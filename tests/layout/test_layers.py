"""The house stays as drawn: no upward import, no import cycle, no torch where a rollout
worker runs without it (tests/layout/layers.py holds the rule)."""

from __future__ import annotations

import shutil
from pathlib import Path

import rxrl
from tests.layout.layers import LAYERS, layer_of, modules, violations

ROOT = Path(rxrl.__file__).parent


def test_every_module_is_in_a_layer_and_no_import_breaks_the_layering() -> None:
    for module in modules(ROOT):
        layer_of(module)  # raises for a module in no layer
    assert violations(ROOT) == []


def test_an_upward_import_added_to_a_lower_layer_is_reported(tmp_path: Path) -> None:
    """Mutation: the checker must fail on a copy of the package with one upward import."""
    copy = tmp_path / "rxrl"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    batch = copy / "rl" / "data" / "batch.py"
    batch.write_text(batch.read_text() + "\nfrom rxrl.training.checkpoint import Counters\n")
    found = violations(copy)
    assert "rxrl.rl.data.batch (rl.data) imports rxrl.training.checkpoint (training)" in found[0]
    # the rest: the cycles it makes (training imports the batch back, through algos)
    assert found[1:] and all(v.startswith("import cycle:") and "rxrl.rl.data.batch" in v
                             for v in found[1:])


def test_an_rl_module_importing_the_plan_core_is_reported(tmp_path: Path) -> None:
    copy = tmp_path / "rxrl"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    worker = copy / "rl" / "workers" / "rollout.py"
    worker.write_text(worker.read_text() + "\nfrom rxrl.plan import Plan\n")
    assert [v for v in violations(copy)
            if "rxrl.rl.workers.rollout (rl.workers) imports rxrl.plan (core), an upper layer" in v]


def test_torch_at_module_level_in_a_torch_free_module_and_a_cycle_are_reported(tmp_path: Path) -> None:
    copy = tmp_path / "rxrl"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    forward = copy / "rl" / "models" / "forward.py"
    forward.write_text(forward.read_text() + "\nimport torch\n")
    running = copy / "rl" / "data" / "running_stats.py"  # batch imports it: a cycle
    running.write_text(running.read_text() + "\nfrom rxrl.rl.data.batch import SampleBatch\n")
    found = violations(copy)
    assert any("rxrl.rl.models.forward imports torch at module level" in v for v in found)
    assert any(v.startswith("import cycle:") and "rxrl.rl.data.batch" in v for v in found)


def test_the_layers_name_each_prefix_once() -> None:
    prefixes = [p for _, ps in LAYERS for p in ps]
    assert len(prefixes) == len(set(prefixes))
