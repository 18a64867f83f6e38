"""How ``rxrl`` ends on SIGINT and SIGTERM: gracefully at a checkpoint, or at once.

While a training run is receiving records (`Interrupts.graceful`), the first SIGINT or
SIGTERM only asks it to stop: the run checkpoints at its next record and ends there, so
nothing trained is lost. A second signal, or one at any other moment (start-up, Ray
starting, evaluation), unwinds at once: SIGINT as ``KeyboardInterrupt``, SIGTERM as
`Terminated`; ``rxrl`` then exits with 130 or 143 (128 + the signal), as shells expect.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

#: the signals ``rxrl`` handles
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Terminated(BaseException):
    """SIGTERM, raised where the process was; ``rxrl`` exits with ``128 + signum``.

    A ``BaseException`` like ``KeyboardInterrupt``, so that ``except Exception`` blocks on
    the way do not swallow it.
    """

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(f"terminated by {signal.Signals(signum).name}")
        self.signum = signum


def exit_code(signum: int) -> int:
    """The exit status of a process that ended because of ``signum``: ``128 + signum``."""
    return 128 + signum


class Interrupts:
    """rxrl's SIGINT/SIGTERM handler (see the module docstring).

    ``requested`` is the first signal received while graceful, until `clear`;
    ``on_request`` runs (in the handler) when it is first set. ``unwinding`` is a signal the
    handler raised for: Python runs a handler between any two bytecodes, also inside a
    weakref callback or a ``__del__`` (an import's module-lock cleanup, say), where the
    exception is printed and dropped; `graceful` raises it again rather than let that run go on.
    """

    def __init__(self) -> None:
        self.requested: int | None = None
        self.unwinding: int | None = None
        self.on_request: Callable[[int], None] | None = None
        self._graceful = False
        self._previous: dict[int, Any] = {}

    @property
    def installed(self) -> bool:
        """Whether `install` put this handler in place (and `uninstall` has not removed it)."""
        return bool(self._previous)

    def install(self) -> None:
        """Handle SIGINT and SIGTERM here (main thread only; else a no-op)."""
        self.unwinding = None
        with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self.handle)

    def uninstall(self) -> None:
        """Put back the handlers `install` replaced."""
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()

    def exiting(self, code: int) -> None:
        """The process exits next with ``code``: from now on SIGINT and SIGTERM end it at once
        with that status (stdout and stderr flushed) rather than by the signal's default
        action, which reported the command as killed while it was only finalising; and once
        Python's own exit handlers run, they are ignored (the default action would be back for
        the rest of the interpreter's finalization)."""
        def exit_now(signum: int, frame: FrameType | None) -> None:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(code)

        with contextlib.suppress(ValueError):
            for sig in SIGNALS:
                signal.signal(sig, exit_now)
            # Python's finalization puts the default action back for every signal with a
            # Python handler (``_PySignal_Fini``), and a signal in its last moments then killed
            # the process (status -15, after a fast Ray shutdown). Ignored signals stay ignored
            # there, so the last exit handler ignores them: the process exits with ``code``.
            atexit.register(_ignore, SIGNALS)
        self._previous.clear()

    @contextlib.contextmanager
    def ignored(self) -> Iterator[None]:
        """Within the block, SIGINT and SIGTERM are ignored (main thread; else nothing
        changes): for a short last step that a signal must not cut in half — shutting down
        the Ray processes this one started, whose agents a half-done shutdown leaves orphaned."""
        previous: dict[int, Any] = {}
        with contextlib.suppress(ValueError):
            for sig in SIGNALS:
                previous[sig] = signal.signal(sig, signal.SIG_IGN)
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def reinstall(self) -> None:
        """Handle SIGINT and SIGTERM here again, if `install` did and someone replaced us
        (``ray.init`` sets its own SIGTERM handler, which exits with status 15)."""
        if self._previous:
            with contextlib.suppress(ValueError):
                for sig in SIGNALS:
                    signal.signal(sig, self.handle)

    @contextlib.contextmanager
    def graceful(self, on_request: Callable[[int], None]) -> Iterator[None]:
        """Within the block, the first signal calls ``on_request(signum)`` instead of raising.
        A signal raised for before, whose exception was dropped (``unwinding``), raises now."""
        if self.unwinding is not None:
            raise_for(self.unwinding)
        self.on_request, self._graceful = on_request, True
        try:
            yield
        finally:
            self.on_request, self._graceful = None, False

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """The signal handler: note a graceful stop, or raise."""
        if self._graceful and self.requested is None:
            self.requested = signum
            name = signal.Signals(signum).name
            # one write, newline included: a second signal (its handler runs between
            # bytecodes) cannot cut the line before its end, as print's two writes let it
            sys.stderr.write(f"rxrl: {name}: stopping after the next checkpoint (again to stop now)\n")
            sys.stderr.flush()
            if self.on_request is not None:
                self.on_request(signum)
            return
        self.unwinding = signum
        raise_for(signum)


def _ignore(signals: tuple[int, ...]) -> None:
    """Ignore ``signals`` from now on (main thread; else nothing changes)."""
    with contextlib.suppress(ValueError):
        for sig in signals:
            signal.signal(sig, signal.SIG_IGN)


def raise_for(signum: int) -> None:
    """Raise what ``signum`` means here: KeyboardInterrupt for SIGINT, else `Terminated`."""
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


#: the process's handler, installed by ``rxrl.cli.main``
INTERRUPTS = Interrupts()

__all__ = ["INTERRUPTS", "SIGNALS", "Interrupts", "Terminated", "exit_code", "raise_for"]
