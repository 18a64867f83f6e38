"""A run directory's claim (`rxrl.training.lock`): held by one live process, never stale.

The law: while a process holds a directory's claim no other claim on it succeeds (in the same
process or another), and once the holder is gone, however it went (released, or killed with
SIGKILL), the next claim succeeds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rxrl.training.lock import LOCK, InUse, RunDirClaim

HOLD = """
import sys, time
from pathlib import Path
from rxrl.training.lock import RunDirClaim
claim = RunDirClaim.take(Path(sys.argv[1]))  # held while referenced
print("held", flush=True)
time.sleep(600)
"""


@pytest.mark.timeout(60)
def test_a_claim_of_a_process_killed_with_sigkill_is_taken_over(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(InUse) as refused:
            RunDirClaim.take(tmp_path)
        assert refused.value.pid == holder.pid
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert (tmp_path / LOCK).read_text() == f"{holder.pid}\n"  # left behind by the kill
    claim = RunDirClaim.take(tmp_path)
    assert (tmp_path / LOCK).read_text() == f"{os.getpid()}\n"
    claim.release()
    assert not (tmp_path / LOCK).exists()


def test_a_released_claim_can_be_taken_again_and_removes_only_what_it_made(tmp_path: Path) -> None:
    run = tmp_path / "a" / "b" / "run"
    claim = RunDirClaim.take(run)
    assert claim.made == tmp_path / "a"
    with pytest.raises(InUse):
        RunDirClaim.take(run)  # the same process, another claim: refused too
    claim.release(remove=True)
    assert list(tmp_path.iterdir()) == []
    run.mkdir(parents=True)
    (run / "metrics.csv").write_text("")
    again = RunDirClaim.take(run)
    assert again.made is None
    again.release(remove=True)  # it made nothing: the run's files and directories stay
    assert [p.name for p in run.iterdir()] == ["metrics.csv"]


def test_new_directories_are_numbered_past_those_that_exist(tmp_path: Path) -> None:
    base = tmp_path / "runs" / "ppo-s0"
    claims = [RunDirClaim.take_new(base) for _ in range(3)]
    assert [c.path.name for c in claims] == ["ppo-s0", "ppo-s0-2", "ppo-s0-3"]
    assert claims[0].made == tmp_path / "runs" and claims[1].made == claims[1].path
    for c in reversed(claims):
        c.release(remove=True)
    assert list(tmp_path.iterdir()) == []
