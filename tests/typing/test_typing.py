"""mypy --strict accepts well-typed plans and rejects ill-typed ones with the stated errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mypy import api

CASES = Path(__file__).parent / "cases"
ROOT = Path(__file__).parents[2]


def mypy(path: Path) -> list[tuple[int, str]]:
    """(line, message) of every error mypy --strict reports for ``path``."""
    stdout, _, _ = api.run(["--config-file", str(ROOT / "mypy.ini"), "--no-error-summary",
                            "--hide-error-context", "--show-absolute-path", str(path)])
    errors = []
    for line in stdout.splitlines():
        m = re.match(rf"{re.escape(str(path))}:(\d+): error: (.*)", line)
        if m:
            errors.append((int(m.group(1)), m.group(2)))
    return errors


@pytest.mark.timeout(300)
def test_well_typed_plans_pass_mypy_strict() -> None:
    assert mypy(CASES / "ok_plans.py") == []


@pytest.mark.timeout(300)
def test_ill_typed_plans_fail_with_the_stated_errors() -> None:
    path = CASES / "bad_plans.py"
    expected = {
        n: line.split("# E: ", 1)[1].strip()
        for n, line in enumerate(path.read_text().splitlines(), 1) if "# E: " in line
    }
    errors = mypy(path)
    found = {n: [msg for line, msg in errors if line == n] for n in expected}
    for n, want in expected.items():
        assert any(want in msg for msg in found[n]), f"line {n}: expected {want!r}, got {found[n]}"
    unexpected = [(n, msg) for n, msg in errors if n not in expected]
    assert unexpected == [], f"errors on lines without an `# E:` expectation: {unexpected}"
