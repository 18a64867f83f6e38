"""Running the installed ``rxrl`` console script in a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
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


def start(args: Sequence[str | Path], cwd: Path | None = None) -> subprocess.Popen[str]:
    """Start ``rxrl ARGS...`` without waiting for it."""
    return subprocess.Popen([console_script(), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=cwd, env=environment(),
                            stdin=subprocess.DEVNULL)
