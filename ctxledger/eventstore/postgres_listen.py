"""The wake-up signal of a PostgreSQL ``follow()``: a thread holding a ``LISTEN`` connection.

A notification is only a wake-up; the follower re-reads by seq (a notify is not the
data), so one lost while reconnecting costs nothing but a re-read.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg import sql

from ctxledger.eventstore.backoff import Backoff

__all__ = ["Listener"]


class Listener:
    """A thread holding a LISTEN connection; sets `wake` on every notification.

    It reconnects (with backoff) when the connection is lost, and sets `wake` once
    listening again: notifications sent meanwhile are gone, so the follower re-reads.
    """

    def __init__(self, conninfo: str, kwargs: Mapping[str, Any], channel: str) -> None:
        self.wake = threading.Event()
        self._stopping = threading.Event()
        self._conninfo = conninfo
        self._kwargs = {**kwargs, "application_name": "ctxledger-follow"}
        self._listen = sql.SQL("LISTEN {}").format(sql.Identifier(channel))
        self._thread = threading.Thread(target=self._run, name="ctxledger-follow", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        backoff = Backoff()
        while not self._stopping.is_set():
            try:
                with psycopg.connect(self._conninfo, **self._kwargs) as conn:
                    conn.execute(self._listen)
                    self.wake.set()
                    backoff.reset()
                    while not self._stopping.is_set():
                        for _ in conn.notifies(timeout=0.2, stop_after=1):
                            self.wake.set()
            except psycopg.Error:
                self._stopping.wait(backoff.next())

    def stop(self) -> None:
        """Ask the thread to close its connection and end (within ~0.2 s); never blocks."""
        self._stopping.set()
        self.wake.set()
