"""``collector_paused``: the cyclic collector off while any pause runs, restored after.

Two threads pausing at once must never leave it off (a naive ``isenabled`` /
``disable`` / ``enable`` per pause can: one thread reads "disabled" while the other's
pause runs, and never turns it back on); nested pauses are one pause; a collector the
caller had switched off stays off.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

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


def test_overlapping_pauses_in_threads_leave_the_collector_on() -> None:
    # the interleaving that breaks per-pause toggling: B enters while A's pause runs,
    # A leaves, then B leaves
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def a() -> None:
        with collector_paused():
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def b() -> None:
        a_in.wait(5)
        with collector_paused():
            b_in.set()
            a_out.wait(5)
            assert not gc.isenabled()  # still paused: B's pause is running

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert gc.isenabled()

    def churn() -> None:
        for _ in range(2000):
            with collector_paused():
                pass

    many = [threading.Thread(target=churn) for _ in range(8)]
    for t in many:
        t.start()
    for t in many:
        t.join(30)
    assert gc.isenabled()
