"""Readiness: the third outcome of a pull, besides an item and the end — "nothing yet".

An actor source whose function returns ``rxrl.NOT_READY`` says it has nothing to give *now*
(a replay buffer below ``learning_starts``); the operators downstream never see the value:
``union`` and ``concurrently`` skip that input and come back to it, a ``gather`` or
``barrier`` asks that shard again only once its actor has been sent a call or a broadcast (no
polling), and a run in which nothing can move raises ``DeadlockError`` instead of hanging.
See docs/semantics.md, "Readiness".

>>> import rxrl
>>> from rxrl import ops
>>> class Buffer:
...     def __init__(self) -> None:
...         self.items: list[int] = []
...     def add(self, x: int) -> None:
...         self.items.append(x)
...     def sample(self) -> int | rxrl.NotReady:
...         return self.items.pop(0) if len(self.items) >= 2 else rxrl.NOT_READY
>>> buffer = rxrl.actors(Buffer, 1)
>>> store = rxrl.from_iterable(range(6)) | ops.call(buffer, Buffer.add)
>>> replay = rxrl.from_actors(buffer, Buffer.sample) | ops.gather()
>>> list(rxrl.run(ops.alongside(replay, store) | ops.take(4)))
[0, 1, 2, 3]
"""

from __future__ import annotations

from typing import Final, final


@final
class NotReady:
    """The type of ``NOT_READY`` (there is one instance): annotate an actor source that may
    have nothing to give as returning ``T | rxrl.NotReady``; ``from_actors`` types its shards
    as ``Shards[T]``."""

    __slots__ = ()
    _instance: NotReady | None = None

    def __new__(cls) -> NotReady:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "rxrl.NOT_READY"

    def __reduce__(self) -> str:
        return "NOT_READY"  # unpickles to this module's singleton, in every process

    def __bool__(self) -> bool:
        return False


#: what an actor source returns when it has nothing to give now (see the module docstring)
NOT_READY: Final = NotReady()


@final
class _End:
    """The type of ``END``."""

    __slots__ = ()
    _instance: _End | None = None

    def __new__(cls) -> _End:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<end of stream>"

    def __reduce__(self) -> str:
        return "END"


#: internal: what a pulled stream answers once it has ended (every backend's one marker)
END: Final = _End()
