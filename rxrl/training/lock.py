"""A run directory's claim: one live run writes to a directory at a time.

A run's directory is checked when its trainer is made, and written when its first record
arrives, seconds later; two runs started together (a shell loop with ``&``, a second terminal
resuming a run that is still going) would both pass the check and then write the same files.
So a run claims its directory when it starts, before its backend: it takes an exclusive
``flock`` on ``DIR/.lock`` and holds it until it closes (then the file goes); the operating
system lets go of it when the process dies, however it dies, so a claim is never stale (a
``.lock`` left by a killed run is taken over). A new run's directory is
then checked again under the lock (a run that finished meanwhile is found). A default-named
directory (``runs/ALGO-ENV-sSEED-TIME``) is made with ``mkdir``, which only one process can do,
and another name is taken (``-2``, ``-3``, ...) when it exists. Where ``fcntl`` is missing
(Windows), the directory is checked but not locked.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

if sys.platform != "win32":
    import fcntl

#: the lock file in a run directory
LOCK = ".lock"


class InUse(Exception):
    """The directory is claimed by a live run (``pid``: its process, where it wrote it)."""

    def __init__(self, path: Path, pid: int | None) -> None:
        super().__init__(f"{path} is in use by another run"
                         + (f" (process {pid})" if pid is not None else ""))
        self.path, self.pid = path, pid


class RunDirClaim:
    """An exclusive claim on a run directory, held until `release`."""

    def __init__(self, path: Path, file: IO[str] | None, made: Path | None) -> None:
        #: the directory claimed
        self.path = path
        self._file = file
        #: the outermost directory this claim made (``path`` or one of its parents; None: it
        #: existed), which a run that never wrote anything removes
        self.made = made

    @classmethod
    def take(cls, path: Path) -> RunDirClaim:
        """Claim ``path`` (made if missing); `InUse` if a live run holds it."""
        made = _outermost_missing(path)
        path.mkdir(parents=True, exist_ok=True)
        return cls._lock(path, made)

    @classmethod
    def take_new(cls, base: Path) -> RunDirClaim:
        """Make and claim a directory that did not exist: ``base``, else ``base-2``, ``-3``, ..."""
        made = _outermost_missing(base.parent)
        base.parent.mkdir(parents=True, exist_ok=True)
        for path in numbered(base):
            try:
                path.mkdir()
            except FileExistsError:
                continue
            return cls._lock(path, made or path)
        raise AssertionError("numbered() never ends")

    @classmethod
    def _lock(cls, path: Path, made: Path | None) -> RunDirClaim:
        if sys.platform == "win32":  # pragma: no cover - no flock: checked, not locked
            return cls(path, None, made)
        while True:
            file = open(path / LOCK, "a+")  # noqa: SIM115 - held until release
            try:
                fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                file.seek(0)
                text = file.read().strip()
                file.close()
                raise InUse(path, int(text) if text.isdigit() else None) from None
            try:  # the file locked is still the one at the path (a releasing claim unlinks it)
                same = os.stat(path / LOCK).st_ino == os.fstat(file.fileno()).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            file.close()
        file.seek(0)
        file.truncate()
        file.write(f"{os.getpid()}\n")
        file.flush()
        return cls(path, file, made)

    def release(self, *, remove: bool = False) -> None:
        """Let go of the claim (its lock file goes, while still held); ``remove``: also remove
        the directories this claim made while they are empty (a run that never wrote anything
        leaves nothing)."""
        file, self._file = self._file, None
        if file is not None:
            with contextlib.suppress(OSError):
                (self.path / LOCK).unlink()
            file.close()
        if remove and self.made is not None:  # the directories it made, inside out, while empty
            for path in (self.path, *self.path.parents):
                try:
                    path.rmdir()
                except OSError:
                    break
                if path == self.made:
                    break


def numbered(path: Path) -> Iterator[Path]:
    """``path``, then ``NAME-2.SUFFIXES``, ``NAME-3.SUFFIXES``, ...: the names a run takes, in
    turn, for a file or directory that must not replace another's (the first that does not
    exist, taken atomically by the caller: ``mkdir``, ``open(..., "x")``).

    >>> [p.name for p in itertools.islice(numbered(Path("runs/ppo.trace.json")), 3)]
    ['ppo.trace.json', 'ppo-2.trace.json', 'ppo-3.trace.json']
    """
    stem, dot, suffixes = path.name.partition(".")
    yield path
    for n in itertools.count(2):
        yield path.with_name(f"{stem}-{n}{dot}{suffixes}")


def _outermost_missing(path: Path) -> Path | None:
    """The outermost of ``path`` and its parents that does not exist (None: ``path`` exists)."""
    missing = None
    for p in (path, *path.parents):
        if p.exists():
            break
        missing = p
    return missing


__all__ = ["LOCK", "InUse", "RunDirClaim", "numbered"]
