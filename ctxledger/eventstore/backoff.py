"""The pauses of ``follow()`` between retries of a read another session held up (SQLite's
``StoreBusy``, PostgreSQL's ``ServerCancelled`` and ``ConnectionLost``), shared by both
stores, and of PostgreSQL's LISTEN thread between reconnects: 50 ms doubling up to 2 s,
back to 50 ms after a read (or a connection) that worked."""

from __future__ import annotations

__all__ = ["Backoff"]

#: the first pause and the longest (seconds)
BACKOFF_FIRST, BACKOFF_MAX = 0.05, 2.0


class Backoff:
    """``next()`` is the pause before the next retry (each twice the last, at most
    :data:`BACKOFF_MAX`); ``reset()`` after a success starts again from the first."""

    def __init__(self) -> None:
        self._pause = BACKOFF_FIRST

    def next(self) -> float:
        pause, self._pause = self._pause, min(self._pause * 2, BACKOFF_MAX)
        return pause

    def reset(self) -> None:
        self._pause = BACKOFF_FIRST
