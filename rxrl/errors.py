"""Errors rxrl raises, and the call-site capture that lets them say where a plan was built."""

from __future__ import annotations

import os
import sys

# Frames in these modules are rxrl's own plan-building machinery; a call site is the first
# frame outside them, i.e. the line of user code (or algorithm module) that built the operator.
_FRONT_MODULES = frozenset(
    {"rxrl.errors", "rxrl.graph", "rxrl.plan", "rxrl.ops", "rxrl.sources", "rxrl.actors", "rxrl.run",
     "rxrl.interop"}
)


def call_site() -> str:
    """Return ``file:line`` of the innermost caller outside rxrl's plan-building modules."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_globals.get("__name__") in _FRONT_MODULES:
        frame = frame.f_back
    path = frame.f_code.co_filename
    try:
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            path = rel
    except ValueError:  # a different drive on Windows
        pass
    return f"{path}:{frame.f_lineno}"


class RxrlError(Exception):
    """Base class of every error rxrl raises on purpose."""


class PlanError(RxrlError, ValueError):
    """A plan that cannot run. The message names the operator, where it was built, and a fix."""

    def __init__(self, operator: str, site: str, problem: str, fix: str = "") -> None:
        self.operator = operator
        self.site = site
        message = f"{operator} (built at {site}): {problem}"
        if fix:
            message += f" — {fix}"
        super().__init__(message)


class OperatorError(RxrlError, RuntimeError):
    """A user function raised inside an operator; the original exception is ``__cause__``."""

    def __init__(self, operator: str, site: str, cause: BaseException) -> None:
        self.operator = operator
        self.site = site
        super().__init__(
            f"{operator} (built at {site}) raised {type(cause).__name__}: {cause}"
        )


class ActorError(RxrlError, RuntimeError):
    """An actor could not be created, or died; the message names the group and the index."""


class BackendStoppedError(ActorError):
    """The backend's own processes ended under the run: the local Ray it started stopped (its
    raylet or GCS exited, say on a SIGTERM sent to the whole process group), and every actor
    with it. No request can be answered or resent; the message says which process ended how."""


class RestartWarning(RuntimeWarning):
    """An actor of a run died and the run goes on with it restarted (or an aggregator made
    again): the warning names it, what it was running, why it died, where it runs now and how
    many restarts of its allowance it has used."""


class WaitTimeoutError(RxrlError, TimeoutError):
    """A concurrent run waited longer than its ``timeout_s`` for an actor, a shard or an input;
    the message names the operator and what it waited for."""


class DeadlockError(RxrlError, RuntimeError):
    """No input of a running plan can make progress: every one is *not ready* (a split branch
    at ``max_lag``, an actor source that answered ``NOT_READY``) and nothing is in flight
    that could change it. The message names each blocked operator and why it is blocked."""

    def __init__(self, blocked: list[str]) -> None:
        self.blocked = blocked
        why = "; ".join(blocked) if blocked else "no operator reported why"
        super().__init__(f"the plan cannot make progress, and nothing is running that could "
                         f"change that: {why}")


class ScheduleError(RxrlError, ValueError):
    """A schedule made a choice that the run cannot follow (e.g. a trace of another plan)."""
