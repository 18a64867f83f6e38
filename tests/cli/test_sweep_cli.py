"""``rxrl sweep`` end to end, in-process on the session's Ray: the table, the best line, the
files, and a second sweep into the same directory refused in one line (the bad-input cases are
in tests/training/test_sweep.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rxrl.cli import main
from tests.cli.helpers import QUICK, rxrl_cli


@pytest.mark.timeout(120)
@pytest.mark.usefixtures("ray_session")
def test_a_grid_sweep_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweep"
    argv = ["sweep", "ppo", "--env", "CartPole-v1", "--steps", "1024", "--out", str(out),
            "--search", "grid", "--space", "lr=choice(0.003, 0.0003)", "--set", "num_workers=1", *QUICK]
    assert main(argv) == 0
    captured = capsys.readouterr()
    table = captured.out.splitlines()
    assert table[0].split() == ["trial", "status", "env", "steps", "return", "best", "lr"]
    assert len(table) == 4 and all(" completed " in line for line in table[1:3])
    assert table[3].startswith("best: ") and table[3].endswith(f"its settings in {out}/best.json")
    assert "rxrl sweep: 2 trials of ppo on CartPole-v1, 1,024 env steps each (grid search" in captured.err
    best = json.loads((out / "best.json").read_text())
    assert best["settings"]["learner.lr"] in (0.003, 0.0003)
    assert sorted(p.name for p in out.iterdir()) == ["best.json", "results.csv", "runs", "sweep.json", "tune"]
    assert main(argv) == 1  # the same again, without --resume
    err = capsys.readouterr().err.strip()
    assert err == (f"rxrl sweep: error: --out {out} already holds a sweep (sweep.json, tune, runs): "
                   "continue it with --resume, or choose a new --out")


@pytest.mark.timeout(150)
def test_a_wrong_address_is_one_line_and_leaves_no_sweep(tmp_path: Path) -> None:
    # in its own process: this test process may hold the session's Ray, which a sweep reuses
    out = tmp_path / "sweep"
    done = rxrl_cli("sweep", "ppo", "--env", "CartPole-v1", "--steps", "1024", "--trials", "2",
                    "--space", "lr=loguniform(1e-4,1e-2)", "--address", "127.0.0.1:1", "--out", out,
                    timeout=120)
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert errors == [errors[0]] and errors[0].startswith(
        "rxrl sweep: error: --address 127.0.0.1:1: no Ray cluster at address '127.0.0.1:1'"), done.stderr
    assert not out.exists()
