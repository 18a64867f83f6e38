"""Shard-local operators as plain generators: the reference's, and what actors run in a shard.

Each takes the node and an iterator of its input and yields its output. An input may yield
``NOT_READY`` (an actor source with nothing to give yet): it passes straight through, without
touching the operator's state or calling user code, so a window half full stays half full.
The reference interpreter runs these; the Ray backend runs them inside its actors.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from types import GeneratorType
from typing import Any

from rxrl import graph as g
from rxrl.backends.common import operator_error
from rxrl.ready import NOT_READY

Local = Callable[[Any, Iterator[Any]], Iterator[Any]]


def run_map(node: g.Map, src: Iterator[Any]) -> Iterator[Any]:
    fn = node.fn
    for x in src:
        if x is NOT_READY:
            yield x
            continue
        try:
            y = fn(x)
        except Exception as e:
            raise operator_error(node, e) from e
        yield y


def run_filter(node: g.Filter, src: Iterator[Any]) -> Iterator[Any]:
    pred = node.pred
    for x in src:
        if x is NOT_READY:
            yield x
            continue
        try:
            keep = pred(x)
        except Exception as e:
            raise operator_error(node, e) from e
        if keep:
            yield x


def run_flat_map(node: g.FlatMap, src: Iterator[Any]) -> Iterator[Any]:
    for x in src:
        if x is NOT_READY:
            yield x
            continue
        try:
            ys = list(node.fn(x))
        except Exception as e:
            raise operator_error(node, e) from e
        yield from ys


def run_window(node: g.Window, src: Iterator[Any]) -> Iterator[Any]:
    buf: list[Any] = []
    for x in src:
        if x is NOT_READY:
            yield x
            continue
        buf.append(x)
        if len(buf) == node.count:
            yield buf
            buf = []
    if buf:
        yield buf


def run_size_window(node: g.SizeWindow, src: Iterator[Any]) -> Iterator[Any]:
    buf: list[Any] = []
    total = 0
    for x in src:
        if x is NOT_READY:
            yield x
            continue
        buf.append(x)
        try:
            total += node.size(x)
        except Exception as e:
            raise operator_error(node, e) from e
        if total >= node.min_size:
            yield _combine(node, buf)
            buf, total = [], 0
    if buf:
        yield _combine(node, buf)


def _combine(node: g.SizeWindow, buf: list[Any]) -> Any:
    try:
        return node.combine(buf)
    except Exception as e:
        raise operator_error(node, e) from e


def run_take(node: g.Take, src: Iterator[Any]) -> Iterator[Any]:
    taken = 0
    try:
        if node.count == 0:
            return
        for x in src:
            yield x
            if x is not NOT_READY:
                taken += 1
                if taken == node.count:
                    return
    finally:
        close(src)  # done with the input: a split branch stops holding its siblings back


def run_scan(node: g.Scan, src: Iterator[Any]) -> Iterator[Any]:
    acc = node.init
    for x in src:
        if x is NOT_READY:
            yield x
            continue
        try:
            acc = node.fn(acc, x)
        except Exception as e:
            raise operator_error(node, e) from e
        yield acc


def run_tap(node: g.Tap, src: Iterator[Any]) -> Iterator[Any]:
    for x in src:
        if x is not NOT_READY:
            try:
                node.fn(x)
            except Exception as e:
                raise operator_error(node, e) from e
        yield x


#: the inputs of each generator stream, so that closing it reaches them even if it never ran
_FEEDS: weakref.WeakKeyDictionary[Any, tuple[Iterator[Any], ...]] = weakref.WeakKeyDictionary()


def fed(it: Iterator[Any], *sources: Iterator[Any]) -> Iterator[Any]:
    """``it``, noted as reading ``sources`` (see ``close``)."""
    _FEEDS[it] = sources
    return it


def close(it: Iterator[Any]) -> None:
    """Tell a stream, and the streams it reads, that it will not be pulled again.

    A split branch whose consumer is done stops holding its siblings back. Generators cannot
    run code when closed before they start, so the inputs are reached through ``fed``.
    """
    closer = getattr(it, "close", None)
    if closer is not None:
        closer()
    if type(it) is GeneratorType:
        for source in _FEEDS.pop(it, ()):
            close(source)


#: node type -> generator over one stream
LOCAL: dict[type[g.Node], Local] = {
    g.Map: run_map, g.Filter: run_filter, g.FlatMap: run_flat_map, g.Window: run_window,
    g.SizeWindow: run_size_window, g.Take: run_take, g.Scan: run_scan, g.Tap: run_tap,
}


def actor_stream(node: g.FromActors, actor: Any) -> Iterator[Any]:
    """Shard stream of ``from_actors``: ``fn(actor)`` per pull, forever (``NOT_READY`` included)."""
    fn = node.fn
    while True:
        try:
            y = fn(actor)
        except Exception as e:
            raise operator_error(node, e) from e
        yield y


def chain(chain_node: g.ShardChain, source: Iterator[Any]) -> Iterator[Any]:
    """A shard chain's local steps over ``source`` (its shard's items)."""
    it = source
    for _, step in chain_node.steps:
        it = fed(LOCAL[type(step)](step, it), it)
    return it
