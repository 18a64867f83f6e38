"""Running the installed ``rxrl`` console script in a subprocess."""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).parents[2]
#: settings that make a CartPole run small and quick (a few seconds per few thousand steps)
QUICK = ["--set", "num_envs_per_worker=2", "--set", "fragment_length=64", "--set", "train_batch_size=256",
         "--set", "num_epochs=2", "--set", "minibatch_size=128"]


def console_script() -> str:
    """The ``rxrl`` script installed next to this interpreter."""
    path = shutil.which("rxrl", path=str(Path(sys.executable).parent))
    assert path is not None, "the rxrl console script is not installed (pip install -e .)"
    return path


def environment() -> dict[str, str]:
    """This environment, with the repository on PYTHONPATH (for ``tests.algos.fake_envs:...`` ids)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("RXRL_DEBUG", None)
    return env


def rxrl_cli(*args: str | Path, cwd: Path | None = None,
             timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """Run ``rxrl ARGS...``; its output is captured as text."""
    return subprocess.run([console_script(), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=environment(), stdin=subprocess.DEVNULL)


def start(args: Sequence[str | Path], cwd: Path | None = None,
          env: dict[str, str] | None = None, new_session: bool = False) -> subprocess.Popen[str]:
    """Start ``rxrl ARGS...`` without waiting for it (``env``: more environment variables;
    ``new_session``: in a session and process group of its own, as a shell runs a job)."""
    return subprocess.Popen([console_script(), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=cwd,
                            env={**environment(), **(env or {})}, stdin=subprocess.DEVNULL,
                            start_new_session=new_session)


def wait_for(condition: Callable[[], object], timeout: float, what: str,
             proc: subprocess.Popen[str] | None = None) -> None:
    """Return once ``condition()`` is true; fail after ``timeout`` s, or once ``proc`` ended."""
    deadline = time.monotonic() + timeout
    while not condition():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"rxrl exited ({proc.returncode}) before {what}: "
                                 f"{proc.stderr.read() if proc.stderr else ''}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout} s")
        time.sleep(0.05)


class StderrLines:
    """A process's stderr, read line by line in a thread as it is written: polling
    ``readline()`` reads one backlogged line per poll and so sees a line seconds late."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        self.lines: list[str] = []
        self._stream = proc.stderr
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._stream:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()

    def wait_for(self, text: str, timeout: float) -> None:
        """Return as soon as a line holding ``text`` has been written; fail after ``timeout`` s."""
        with self._changed:
            if not self._changed.wait_for(lambda: any(text in line for line in self.lines), timeout):
                raise AssertionError(f"no line {text!r} within {timeout} s: {''.join(self.lines)}")

    def text(self, timeout: float = 30) -> str:
        """All of stderr, once the process closed it."""
        self._thread.join(timeout)
        with self._changed:
            return "".join(self.lines)


def metrics_rows(run: Path) -> list[dict[str, str]]:
    """The complete rows of a run's metrics.csv so far (none while it has no file)."""
    path = run / "metrics.csv"
    if not path.is_file():
        return []
    text = path.read_text()
    with io.StringIO(text[:text.rfind("\n") + 1]) as f:
        return list(csv.DictReader(f))


def processes_marked(mark: str) -> list[int]:
    """Processes whose environment holds ``RXRL_TEST_MARK=mark`` (a command and every process
    it started, Ray's included, inherit it)."""
    needle = f"RXRL_TEST_MARK={mark}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:  # gone, or not ours to read
                continue
            if needle in environ.split(b"\0"):
                found.append(int(entry.name))
    return found


def cmdline(pid: int) -> str:
    """A process's command line (its title, for Ray's workers), or "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def marked() -> dict[str, str]:
    """A fresh ``RXRL_TEST_MARK`` to pass to `start`."""
    return {"RXRL_TEST_MARK": uuid.uuid4().hex}
