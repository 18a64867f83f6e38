"""Shard-local operators lowered to Rx operators (the one custom one is ``size_window``).

- ``map(f)`` -> ``ops.map``: one call per item, in order, synchronously on push.
- ``filter(p)`` -> ``ops.filter``: drops items; the chain's pull loop pulls until one passes.
- ``flat_map(f)`` -> ``ops.concat_map`` over ``rx.from_iterable`` on the immediate scheduler:
  ``f(x)`` materialized as a list, its items emitted in order before the next pull.
- ``window(n)`` -> ``ops.buffer_with_count(n)``: every n items, and a short non-empty final
  buffer on completion.
- ``window(min_size=...)`` -> custom ``size_window``: Rx buffers by count or time, never by
  summed item size.
- ``take(n)`` -> ``ops.take``: completes on the n-th item, so item n+1 is never pulled;
  ``take(0)`` completes on subscribe, before any pull.
- ``scan(f, init)`` -> ``ops.scan(f, init)``: emits each accumulation, not the seed.
- ``tap(f)`` -> ``ops.do_action(on_next=f)``: calls ``f`` before passing the item on.

User functions are wrapped so that their exceptions become ``OperatorError``s naming the
operator and where it was built, which Rx then carries as ``on_error``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import reactivex as rx
from reactivex import Observable
from reactivex import operators as rx_ops
from reactivex.scheduler import ImmediateScheduler

from rxrl import graph as g
from rxrl.backends.rx.chain import Operator
from rxrl.backends.rx.size_window import size_window
from rxrl.errors import OperatorError

_IMMEDIATE = ImmediateScheduler.singleton()


def guarded(node: g.Node, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with its exceptions re-raised as an ``OperatorError`` naming ``node``."""
    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as e:
            raise OperatorError(node.label, node.site, e) from e

    return call


def _map(node: g.Map) -> Operator:
    return rx_ops.map(guarded(node, node.fn))


def _filter(node: g.Filter) -> Operator:
    return rx_ops.filter(guarded(node, node.pred))


def _flat_map(node: g.FlatMap) -> Operator:
    materialize = guarded(node, lambda x: list(node.fn(x)))

    def inner(x: Any) -> Observable[Any]:
        items: Iterable[Any] = materialize(x)
        # immediate, not the default current-thread scheduler: inside a trampoline (a run
        # drained by to_observable on CurrentThreadScheduler) the items would be deferred
        return rx.from_iterable(items, scheduler=_IMMEDIATE)

    return rx_ops.concat_map(inner)


def _window(node: g.Window) -> Operator:
    return rx_ops.buffer_with_count(node.count)


def _size_window(node: g.SizeWindow) -> Operator:
    return size_window(node.min_size, guarded(node, node.size), guarded(node, node.combine))


def _take(node: g.Take) -> Operator:
    return rx_ops.take(node.count)


def _scan(node: g.Scan) -> Operator:
    return rx_ops.scan(guarded(node, node.fn), node.init)


def _tap(node: g.Tap) -> Operator:
    return rx_ops.do_action(on_next=guarded(node, node.fn))


#: node type -> its Rx operator; the lowering fuses consecutive ones into one ``Chain``
LOCAL: dict[type[g.Node], Callable[[Any], Operator]] = {
    g.Map: _map, g.Filter: _filter, g.FlatMap: _flat_map, g.Window: _window,
    g.SizeWindow: _size_window, g.Take: _take, g.Scan: _scan, g.Tap: _tap,
}
