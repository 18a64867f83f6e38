"""rxrl: typed functional-reactive dataflow plans for distributed reinforcement learning.

Build a plan with sources and ``|``; run it with ``rxrl.run(plan, backend=...)``::

    import rxrl
    from rxrl import ops
    plan = rxrl.from_iterable(range(10)) | ops.map(lambda x: x * x) | ops.window(3)
    for batch in rxrl.run(plan):
        print(batch)
"""

from typing import TYPE_CHECKING, Any

from rxrl import _aliases, ops
from rxrl.actors import ActorGroup, Placement, Tagged, actors, indexed_actors
from rxrl.errors import (
    ActorError,
    BackendStoppedError,
    DeadlockError,
    OperatorError,
    PlanError,
    RestartWarning,
    RxrlError,
    ScheduleError,
    WaitTimeoutError,
)
from rxrl.events import Event, log_events
from rxrl.interop import from_observable, to_observable
from rxrl.plan import Collect, LocalOp, Op, Plan, Shards
from rxrl.ready import NOT_READY, NotReady
from rxrl.run import Backend, Run, register_backend, run
from rxrl.schedule import Schedule, Trace
from rxrl.show import show
from rxrl.sources import from_actors, from_iterable, from_iterables

if TYPE_CHECKING:
    from rxrl.training import Callback, Trainer, TrainResult, train

__version__ = "0.1.0"

_aliases.install()  # old module paths (`rxrl._aliases.MOVED`) keep importing

__all__ = [
    "NOT_READY", "ActorError", "ActorGroup", "Backend", "BackendStoppedError", "Callback", "Collect",
    "DeadlockError", "Event",
    "LocalOp", "NotReady", "Op", "OperatorError", "Placement", "Plan", "PlanError", "RestartWarning",
    "Run", "RxrlError",
    "Schedule", "ScheduleError", "Shards", "Tagged", "Trace", "TrainResult", "Trainer",
    "WaitTimeoutError", "actors",
    "from_actors", "from_iterable", "from_iterables", "from_observable", "indexed_actors",
    "log_events", "ops", "register_backend", "run", "show", "to_observable", "train",
]

#: the training library's names, loaded on first use (PEP 562): ``import rxrl`` stays light
_TRAINING = frozenset({"Callback", "TrainResult", "Trainer", "train"})


def __getattr__(name: str) -> Any:
    """``rxrl.train``, ``rxrl.Trainer``, ``rxrl.TrainResult``, ``rxrl.Callback``: from
    `rxrl.training`, imported when first named."""
    if name in _TRAINING:
        import rxrl.training

        return getattr(rxrl.training, name)
    raise AttributeError(f"module 'rxrl' has no attribute {name!r}")
