"""The suite's timeouts end a hypothesis test that spins (tests/conftest.py).

A property test whose body never returns must fail by its timeout, not hang the suite: with
pytest-timeout's default signal method, hypothesis takes the timeout for a failing example
and runs the body again to shrink it, with no alarm left.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: the suite's hook, in the conftest of a directory of its own
CONFTEST = "from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n"

SPINNING = textwrap.dedent("""
    import time

    import pytest
    from hypothesis import given, settings, strategies as st


    @pytest.mark.timeout(2)
    @settings(deadline=None, max_examples=5)
    @given(st.integers())
    def test_spins(x: int) -> None:
        while True:
            time.sleep(0.05)
""")


@pytest.mark.timeout(120)
def test_a_spinning_hypothesis_test_fails_by_its_timeout_instead_of_hanging(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_spinning.py").write_text(SPINNING)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_spinning.py")],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=100, check=False)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "Timeout" in output and "test_spins" in output, output[-2000:]
