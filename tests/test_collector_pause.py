"""``collector_paused``: the cyclic collector off while any pause runs, restored after.

Two threads pausing at once must never leave it off (a naive ``isenabled`` /
``disable`` / ``enable`` per pause can: one thread reads "disabled" while the other's
pause runs, and never turns it back on); nested pauses are one pause; a collector the
caller had switched off stays off.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator

import pytest

from ctxledger.collector import collector_paused


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def test_a_pause_switches_the_collector_off_and_back_on_also_when_the_block_raises() -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("boom")
    assert gc.isenabled()


def test_nested_pauses_restore_only_when_the_outermost_ends() -> None:
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_the_caller_switched_off_stays_off() -> None:
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def _run(*targets: Callable[[], None]) -> None:
    """Run `targets` in threads; re-raise here what any of them raised (a failed assert in
    a thread would otherwise only be printed) and fail if one does not finish."""
    errors: list[BaseException] = []

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:
                errors.append(exc)

        return run

    threads = [threading.Thread(target=guarded(fn), name=fn.__name__) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    if errors:
        raise errors[0]


def test_overlapping_pauses_in_threads_leave_the_collector_on() -> None:
    # B enters while A's pause runs, A leaves, then B leaves
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def a() -> None:
        with collector_paused():
            a_in.set()
            assert b_in.wait(5)
        a_out.set()

    def b() -> None:
        assert a_in.wait(5)
        with collector_paused():
            b_in.set()
            assert a_out.wait(5)
            assert not gc.isenabled()  # still paused: B's pause is running

    _run(a, b)
    assert gc.isenabled()

    def churn() -> None:
        for _ in range(2000):
            with collector_paused():
                pass

    _run(*[churn] * 8)
    assert gc.isenabled()


class _HookedGc:
    """``gc`` as :mod:`ctxledger.collector` sees it: when thread ``x`` asks whether the
    collector is on, it waits (briefly) for thread ``a``'s pause to end before answering."""

    def __init__(self, x_asked: threading.Event, a_out: threading.Event) -> None:
        self.x_asked, self.a_out = x_asked, a_out

    def __getattr__(self, name: str) -> object:
        return getattr(gc, name)

    def isenabled(self) -> bool:
        enabled = gc.isenabled()
        if threading.current_thread().name == "x":
            self.x_asked.set()
            self.a_out.wait(0.5)  # a toggle outside a lock lets A's pause end right here
        return enabled


def test_a_pause_starting_as_another_ends_never_leaves_the_collector_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the race that leaves a per-pause toggle off for good: X reads "off" while A's pause
    # runs, A's pause ends (on), then X switches it off and, having read "off", never
    # back on; counted pauses read and switch under one lock, so A cannot end in between
    import ctxledger.collector as collector

    a_in, x_progress, a_out = threading.Event(), threading.Event(), threading.Event()
    monkeypatch.setattr(collector, "gc", _HookedGc(x_progress, a_out))

    def a() -> None:
        with collector_paused():
            a_in.set()
            assert x_progress.wait(5)
        a_out.set()

    def x() -> None:
        assert a_in.wait(5)
        with collector_paused():
            x_progress.set()  # counted: X joined A's pause without asking
        assert a_out.wait(5)

    _run(a, x)
    assert gc.isenabled()
