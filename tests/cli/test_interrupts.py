"""SIGINT and SIGTERM end ``rxrl train`` cleanly at any moment (issue 14, items 5 and 6).

During training the first signal checkpoints the next record and stops there (exit 130 or
143, nothing trained lost); during start-up it stops at once. On the Ray backend no
process is left behind either way: Ray's own SIGTERM handler (exit 15) does not replace
rxrl's, and a Ray interrupted while starting is shut down, not abandoned.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from rxrl.backends.ray.connect import CLOSE_TIMEOUT_S
from rxrl.training.checkpoint import load_checkpoint
from rxrl.training.interrupts import Interrupts, Terminated
from tests.cli.helpers import (
    QUICK,
    StderrLines,
    cmdline,
    marked,
    metrics_rows,
    processes_marked,
    start,
    wait_for,
)

#: a budget no test run reaches: it ends by the signal
ENDLESS = ["--steps", "100000000", "--checkpoint-every", "100000000"]
CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str]:
    """Wait for ``proc``; its exit status and stderr (killed, and failed, past ``timeout``)."""
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
        raise AssertionError(f"rxrl did not end within {timeout} s of the signal: {stderr}") from None
    return proc.returncode, stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.timeout(200)
def test_a_signal_while_training_checkpoints_the_next_record_and_exits_128_plus_signum(
        sig: signal.Signals, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = start(["train", "ppo", "--backend", "reference", "--out", out, *ENDLESS, *QUICK])
    try:
        wait_for(lambda: len(metrics_rows(out)) >= 3, 120, "three metrics rows", proc)
        proc.send_signal(sig)
        code, stderr = finish(proc)
    finally:
        proc.kill()
        proc.wait()
    assert code == CODES[sig], stderr
    assert "Traceback" not in stderr
    summary = json.loads((out / "summary.json").read_text())
    rows = metrics_rows(out)
    assert summary["status"] == "interrupted" and summary["signal"] == sig.name
    assert summary["checkpoint_is_latest"] is True
    # the only checkpoint is the one the signal asked for: of the last record logged
    counters = load_checkpoint(out).counters
    assert counters.iteration == int(rows[-1]["iteration"]) == summary["iterations"]
    assert counters.env_steps_sampled == int(rows[-1]["env_steps_sampled"])


@pytest.mark.parametrize(("sig", "moment"), [
    (signal.SIGTERM, "ray starting"),
    (signal.SIGINT, "ray starting"),
    (signal.SIGTERM, "actors starting"),
    (signal.SIGINT, "training"),
    (signal.SIGTERM, "training"),
], ids=["SIGTERM-ray-starting", "SIGINT-ray-starting", "SIGTERM-actors-starting", "SIGINT-training",
        "SIGTERM-training"])
@pytest.mark.timeout(300)
def test_a_ray_run_ends_cleanly_on_a_signal_and_leaves_no_process(
        sig: signal.Signals, moment: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    mark = marked()
    proc = start(["train", "ppo", "--out", out, *ENDLESS, *QUICK], env=mark)
    try:
        if moment == "ray starting":
            assert proc.stderr is not None
            assert "training for" in proc.stderr.readline()  # printed just before Ray starts
        elif moment == "actors starting":
            wait_for(lambda: any(cmdline(p).startswith("ray::")
                                 for p in processes_marked(mark["RXRL_TEST_MARK"])),
                     120, "a Ray worker process", proc)
        else:
            wait_for(lambda: len(metrics_rows(out)) >= 2, 180, "two metrics rows", proc)
        proc.send_signal(sig)
        code, stderr = finish(proc)
    finally:
        proc.kill()
        proc.wait()
    assert code == CODES[sig], stderr
    for sign in ("Traceback", "Aborted", "core dumped", "*** SIG", "Stack trace"):
        assert sign not in stderr, stderr
    wait_for(lambda: not processes_marked(mark["RXRL_TEST_MARK"]), 30,
             "end of every process the run started")
    if moment == "training":
        assert load_checkpoint(out).counters.iteration == int(metrics_rows(out)[-1]["iteration"])
    else:  # issue 27 item 5: a run that never started leaves no directory
        assert not out.exists()


def training_in_a_session(out: Path, mark: dict[str, str], budget: Sequence[str] = tuple(ENDLESS)
                          ) -> tuple[subprocess.Popen[str], list[int]]:
    """``rxrl train ppo`` on Ray in a session of its own (as a shell runs a job), once it has
    logged two records; the process and the pids of its Ray's GCS and raylet."""
    proc = start(["train", "ppo", "--out", out, *budget, *QUICK], env=mark, new_session=True)
    try:
        wait_for(lambda: len(metrics_rows(out)) >= 2, 180, "two metrics rows", proc)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    ray_core = [p for p in processes_marked(mark["RXRL_TEST_MARK"])
                if cmdline(p).split(" ")[0].endswith(("/raylet", "/gcs_server"))]
    return proc, ray_core


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.timeout(300)
def test_a_signal_to_the_whole_process_group_stops_a_ray_run_at_a_checkpoint(
        sig: signal.Signals, tmp_path: Path) -> None:
    """Ctrl-C in a terminal, ``timeout`` and ``kill -- -PGID`` signal the command's whole process
    group. Ray's GCS and raylet run in groups of their own, so the signal reaches the driver
    alone, which stops at the next record with its checkpoint as for a signal to it alone
    (before, a SIGTERM also reached the raylet, which exited and took the actors with it; the
    driver then waited a minute on Ray and was aborted without a summary)."""
    out = tmp_path / "run"
    mark = marked()
    proc, ray_core = training_in_a_session(out, mark)
    try:
        assert len(ray_core) == 2 and all(os.getpgid(p) != proc.pid for p in ray_core)
        os.killpg(proc.pid, sig)
        code, stderr = finish(proc)
    finally:
        proc.kill()
        proc.wait()
    assert code == CODES[sig], stderr
    assert "did not answer" not in stderr and "did not shut down" not in stderr, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["signal"] == sig.name, stderr
    assert summary["checkpoint_is_latest"] is True
    assert load_checkpoint(out).counters.iteration == int(metrics_rows(out)[-1]["iteration"])
    wait_for(lambda: not processes_marked(mark["RXRL_TEST_MARK"]), 30,
             "end of every process the run started")


@pytest.mark.timeout(300)
def test_a_run_whose_ray_is_stopped_with_it_still_ends_with_a_summary(tmp_path: Path) -> None:
    """A batch scheduler's stop (Slurm's ``scancel``) signals every process of the job: the
    driver, and Ray's GCS and raylet, which then answer no call. The run still ends within
    its bounds — Ray is waited for at most ``CLOSE_TIMEOUT_S`` while the run closes and again
    while it shuts down — with its summary and exit status 143 (before: a minute's wait on
    Ray, then Ray aborted the driver, and no summary.json was written)."""
    out = tmp_path / "run"  # a checkpoint every 2 iterations: one exists before the signal
    budget = ["--steps", "100000000", "--checkpoint-every", "512"]
    proc, ray_core = training_in_a_session(out, marked(), budget)
    try:
        assert len(ray_core) == 2
        for pid in [proc.pid, *ray_core]:
            os.kill(pid, signal.SIGTERM)
        code, stderr = finish(proc, timeout=2 * CLOSE_TIMEOUT_S + 30)
    finally:
        proc.kill()
        proc.wait()
    assert code == 143, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["signal"] == "SIGTERM", stderr
    # the stop's record, or, when Ray stopped before it came, the last periodic one
    assert load_checkpoint(out).counters.iteration == summary["checkpoint_iteration"] >= 2


@pytest.mark.timeout(300)
def test_two_sigterms_in_a_row_leave_no_ray_process(tmp_path: Path) -> None:
    """Issue 27 item 2: a second SIGTERM 0.2 s after the first (while the run finishes its
    checkpoint, or while Ray shuts down) still shuts Ray down: every process of the run is
    gone within seconds, not orphaned (the raylet's agents lived on for 30-60 s)."""
    out = tmp_path / "run"
    mark = marked()
    proc = start(["train", "ppo", "--out", out, *ENDLESS, *QUICK], env=mark)
    stderr = StderrLines(proc)
    try:
        wait_for(lambda: len(metrics_rows(out)) >= 2, 180, "two metrics rows", proc)
        proc.send_signal(signal.SIGTERM)
        stderr.wait_for("stopping after the next checkpoint", 30)
        time.sleep(0.2)  # the second signal's moment is the case under test, not a race
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(120)
    finally:
        proc.kill()
        proc.wait()
    assert code == 143, stderr.text()
    wait_for(lambda: not processes_marked(mark["RXRL_TEST_MARK"]), 10,
             "end of every process the run started (none orphaned)")
    assert load_checkpoint(out).counters.iteration >= 2


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_once_the_command_ended_exits_with_the_commands_status(sig: signal.Signals) -> None:
    """CI saw a second SIGTERM land after ``rxrl`` had shut Ray down and put the default
    handlers back: the process, only finalising, was reported killed (-15). Once the command
    has ended, a signal exits at once with the command's own status."""
    script = ("import os, signal, time\n"
              "from rxrl.training.interrupts import INTERRUPTS\n"
              "INTERRUPTS.install()\n"
              "INTERRUPTS.exiting(7)\n"
              f"os.kill(os.getpid(), {int(sig)})\n"
              "time.sleep(60)\n")
    done = subprocess.run([sys.executable, "-c", script], timeout=60, capture_output=True, text=True)
    assert done.returncode == 7, done.stderr


def test_once_pythons_exit_handlers_ran_signals_are_ignored_not_fatal() -> None:
    """Python's finalization puts the default action back for a signal with a Python handler,
    so a SIGTERM in a command's last moments killed it (status -15: the two-SIGTERMs test
    above, once Ray shut down within 0.2 s). After `exiting`, the exit handlers leave SIGINT
    and SIGTERM ignored, which finalization keeps: a signal then cannot change the status."""
    script = ("import atexit, os, signal, sys, time\n"
              "from rxrl.training.interrupts import INTERRUPTS\n"
              "INTERRUPTS.install()\n"
              "INTERRUPTS.exiting(7)\n"
              "atexit._run_exitfuncs()\n"
              "ignored = [signal.getsignal(s) is signal.SIG_IGN for s in (signal.SIGINT, signal.SIGTERM)]\n"
              "os.kill(os.getpid(), signal.SIGTERM)\n"
              "time.sleep(0.2)\n"
              "print(ignored)\n"
              "sys.exit(7)\n")
    done = subprocess.run([sys.executable, "-c", script], timeout=60, capture_output=True, text=True)
    assert done.returncode == 7 and done.stdout.strip() == "[True, True]", (done.stdout, done.stderr)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_whose_exception_python_dropped_still_stops_the_run(sig: signal.Signals) -> None:
    """A handler can run inside a weakref callback or ``__del__`` (an import's module-lock
    cleanup), where Python prints its exception and drops it; CI saw such a SIGTERM during Ray's
    start-up leave the run training. The run must stop at its first record instead."""
    interrupts = Interrupts()
    with pytest.raises(BaseException) as dropped:  # as Python's "Exception ignored in" does
        interrupts.handle(sig, None)
    assert isinstance(dropped.value, (KeyboardInterrupt, Terminated))
    with pytest.raises((KeyboardInterrupt, Terminated)), interrupts.graceful(lambda signum: None):
        pass
    interrupts.install()  # a new command starts afresh
    interrupts.uninstall()
    with interrupts.graceful(lambda signum: None):
        pass


def test_the_graceful_stop_line_is_written_whole_so_a_second_signal_cannot_cut_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two signals at once (``pkill`` hitting ``timeout`` and the run, which ``timeout``
    relays) ran the second handler inside the first one's ``print``, between its text and its
    newline: the next progress line was glued to it. The line is now one write."""
    writes: list[str] = []

    class Stream:
        def write(self, text: str) -> int:
            writes.append(text)
            return len(text)

        def flush(self) -> None:
            pass

    monkeypatch.setattr(sys, "stderr", Stream())
    requested: list[int] = []
    interrupts = Interrupts()
    with interrupts.graceful(requested.append):
        interrupts.handle(signal.SIGINT, None)
    assert requested == [signal.SIGINT]
    assert writes == ["rxrl: SIGINT: stopping after the next checkpoint (again to stop now)\n"]
