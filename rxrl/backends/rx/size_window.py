"""``size_window``: a custom Rx operator that buffers items until their summed size is large enough."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from reactivex import Observable, abc

T = TypeVar("T")
U = TypeVar("U")


def size_window(
    min_size: int, size: Callable[[T], int], combine: Callable[[list[T]], U]
) -> Callable[[Observable[T]], Observable[U]]:
    """Emits ``combine(buffer)`` as soon as the summed ``size`` of the buffered items reaches
    ``min_size``; the leftover items form a final window at completion. Items are never split.

    Rx has no such operator: ``buffer_with_count`` counts items, not their sizes, and
    ``buffer_with_time_or_count`` is about time. Marble diagram (``min_size=3``, ``size=len``,
    ``combine="".join``)::

        --"ab"--"c"--"defg"--"h"--|
        size_window(3, len, "".join)
        --------"abc"-"defg"------"h"|

    An exception of ``size`` or ``combine`` ends the stream with ``on_error``.

    >>> import reactivex as rx
    >>> out: list[str] = []
    >>> _ = rx.of("ab", "c", "defg", "h").pipe(size_window(3, len, "".join)).subscribe(out.append)
    >>> out
    ['abc', 'defg', 'h']
    """

    def operator(source: Observable[T]) -> Observable[U]:
        def subscribe(observer: abc.ObserverBase[U], scheduler: abc.SchedulerBase | None = None
                      ) -> abc.DisposableBase:
            buffer: list[T] = []
            total = 0

            def emit() -> bool:
                nonlocal buffer, total
                batch, buffer, total = buffer, [], 0
                try:
                    combined = combine(batch)
                except Exception as e:
                    observer.on_error(e)
                    return False
                observer.on_next(combined)
                return True

            def on_next(x: T) -> None:
                nonlocal total
                buffer.append(x)
                try:
                    total += size(x)
                except Exception as e:
                    observer.on_error(e)
                    return
                if total >= min_size:
                    emit()

            def on_completed() -> None:
                if not buffer or emit():
                    observer.on_completed()

            return source.subscribe(on_next, observer.on_error, on_completed, scheduler=scheduler)

        return Observable(subscribe)

    return operator


