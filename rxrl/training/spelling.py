"""How an error names a training option: the way its caller gave it.

`rxrl train` is a thin layer over `rxrl.Trainer` (and `rxrl export` over `export_policy`), so
both raise the same one-line errors. A command-line user typed ``--steps 100`` and ``--set
lr=0.001``; a Python caller passed ``steps=100`` and ``settings={"lr": 0.001}``. The commands
run inside `command_line()`; everywhere else a message names the Python parameter:

>>> given("--steps", "steps", 100)
'steps=100'
>>> with command_line():
...     given("--steps", "steps", 100)
'--steps 100'
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import PurePath

_COMMAND_LINE: ContextVar[bool] = ContextVar("rxrl_command_line", default=False)


@contextlib.contextmanager
def command_line() -> Iterator[None]:
    """Within the block, messages name options by their flags (the CLI's commands run in it)."""
    token = _COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _COMMAND_LINE.reset(token)


def on_command_line() -> bool:
    """Whether messages name flags now (inside `command_line`)."""
    return _COMMAND_LINE.get()


def option(flag: str, parameter: str) -> str:
    """The option's name: ``--steps`` on the command line, ``steps`` in Python."""
    return flag if _COMMAND_LINE.get() else parameter


class Placeholder(str):
    """A value that stands for any (``N``): `given` shows it bare, ``worker_restarts=N``."""

    __slots__ = ()


def given(flag: str, parameter: str, value: object) -> str:
    """The option with the value it was given: ``--steps 100``, or ``steps=100``."""
    if _COMMAND_LINE.get():
        return f"{flag} {value}"
    if isinstance(value, Placeholder):
        return f"{parameter}={value}"
    shown = str(value) if isinstance(value, PurePath) else value
    return f"{parameter}={shown!r}" if isinstance(shown, str) else f"{parameter}={shown}"


def settings(*paths: str) -> str:
    """Config paths to change: ``--set a / b`` on the command line, ``the settings a / b`` in
    Python (``settings={...}`` of `rxrl.Trainer`)."""
    joined = " / ".join(paths)
    return f"--set {joined}" if _COMMAND_LINE.get() else f"the settings {joined}"


__all__ = ["Placeholder", "command_line", "given", "on_command_line", "option", "settings"]
