"""The SQLite backend runs the event-store contract every backend must pass."""

from __future__ import annotations

from pathlib import Path

from ctxledger.eventstore import SQLiteEventStore
from ctxledger.testing.eventstore import EventStoreContract


class TestSQLiteStore(EventStoreContract):
    def make_store(self, path: Path) -> SQLiteEventStore:
        return SQLiteEventStore(path)
