"""mypy sees the installed rxrl from a user's own project, outside the checkout (issue 14, item 1).

The editable install must be a plain path entry, not an import-hook finder, which mypy does
not run: there, ``import rxrl`` was ``import-not-found`` and every plan went unchecked.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

PLAN = '''\
import rxrl
from rxrl import ops


class Worker:
    def sample(self) -> list[int]:
        return [1, 2]


workers = rxrl.actors(Worker, 2)
plan = rxrl.from_actors(workers, Worker.sample) | ops.barrier() | ops.take(3)
rounds: list[list[list[int]]] = list(rxrl.run(plan))
bad = rxrl.from_actors(workers, Worker.sample) | ops.take(3) | ops.map(lambda x: x + 1)
'''


def mypy_outside(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m mypy ARGS`` run in ``tmp_path``, with nothing pointing at the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)


@pytest.mark.timeout(300)
def test_mypy_strict_checks_a_plan_in_a_project_outside_the_checkout(tmp_path: Path) -> None:
    assert ROOT not in tmp_path.parents
    (tmp_path / "my_plan.py").write_text(PLAN)
    done = mypy_outside(tmp_path, "--strict", "--no-error-summary", "my_plan.py")
    assert "import-not-found" not in done.stdout, done.stdout
    # rxrl's types reached the user's file: only the ill-typed last line is an error
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1, done.stdout + done.stderr
    assert errors[0].startswith('my_plan.py:13: error: No overload variant of "__add__" of "list" '
                                'matches argument type "int"'), errors[0]
