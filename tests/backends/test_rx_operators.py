"""The rx backend's custom Rx operator, ``size_window``, on a virtual-time ``TestScheduler``."""

from __future__ import annotations

from reactivex.testing import ReactiveTest, TestScheduler

from rxrl.backends.rx.size_window import size_window

on_next, on_error, on_completed = ReactiveTest.on_next, ReactiveTest.on_error, ReactiveTest.on_completed
subscribe = ReactiveTest.subscribe


def concat(words: list[str]) -> str:
    return "".join(words)


def test_windows_close_at_the_item_that_reaches_min_size() -> None:
    """--ab--c--defg--h--|  ->  -----abc--defg-----h|  (min_size=3, size=len)"""
    scheduler = TestScheduler()
    source = scheduler.create_hot_observable(
        on_next(210, "ab"), on_next(220, "c"), on_next(230, "defg"), on_next(240, "h"),
        on_completed(250))
    result = scheduler.start(lambda: source.pipe(size_window(3, len, concat)))
    assert result.messages == [on_next(220, "abc"), on_next(230, "defg"), on_next(250, "h"),
                               on_completed(250)]
    assert source.subscriptions == [subscribe(200, 250)]


def test_no_empty_final_window() -> None:
    scheduler = TestScheduler()
    source = scheduler.create_hot_observable(on_next(210, "abc"), on_completed(220))
    result = scheduler.start(lambda: source.pipe(size_window(3, len, concat)))
    assert result.messages == [on_next(210, "abc"), on_completed(220)]


def test_an_error_of_size_or_combine_ends_the_stream() -> None:
    boom = ValueError("no size")

    def size(word: str) -> int:
        if word == "bad":
            raise boom
        return len(word)

    scheduler = TestScheduler()
    source = scheduler.create_hot_observable(
        on_next(210, "abcd"), on_next(220, "bad"), on_next(230, "xyz"), on_completed(240))
    result = scheduler.start(lambda: source.pipe(size_window(3, size, concat)))
    assert result.messages == [on_next(210, "abcd"), on_error(220, boom)]

    def refuse(words: list[str]) -> str:
        raise boom

    scheduler = TestScheduler()
    source = scheduler.create_hot_observable(on_next(210, "a"), on_completed(220))
    result = scheduler.start(lambda: source.pipe(size_window(3, len, refuse)))
    assert result.messages == [on_error(220, boom)]


def test_upstream_errors_pass_through_and_drop_the_buffer() -> None:
    boom = RuntimeError("upstream")
    scheduler = TestScheduler()
    source = scheduler.create_hot_observable(on_next(210, "a"), on_error(220, boom))
    result = scheduler.start(lambda: source.pipe(size_window(3, len, concat)))
    assert result.messages == [on_error(220, boom)]
