"""Pausing Python's cyclic garbage collector over a long synchronous fold, safely.

A rebuild or a compaction allocates many acyclic objects it keeps; collector passes
over them cost more than the work itself. ``gc.disable()`` is process-wide, so two
threads toggling it naively can leave it off for good (one reads "disabled" while the
other's pause is running, then never turns it back on). Here pauses are counted under
a lock: the first one in switches the collector off, the last one out restores what the
first one found (so a host that switches the collector off while a pause runs gets it
back on when the last pause ends: switch it off before, or after).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]

_lock = threading.Lock()
_active = 0
_restore = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """The collector off while the block runs (re-entrant, thread-safe); never hold it
    across an ``await``: other tasks would run without collection."""
    global _active, _restore
    with _lock:
        if _active == 0:
            _restore = gc.isenabled()
            gc.disable()
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _restore:
                gc.enable()
