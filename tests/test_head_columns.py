"""Message heads as columns of the SQLite events table (issue 14, migration 0002).

* A ledger written by main before the columns existed (``tests/golden/ledger_pre_heads.db``,
  recipe beside it) opens (migrated in place, its rows keep NULL heads), verifies with
  the same head hash, rebuilds to the fingerprint and API views that main computed,
  replays without drift, and takes appends whose rows carry their heads.
* Property: on generated logs where some rows have their heads and others not (as after
  the migration), read in pages small enough that runs of one stream span pages, the
  rebuild over the columns equals the eager fold of whole events.
* ``verify`` reports a row whose head columns disagree with its payload, like a
  tampered payload; a row with both columns NULL is folded from its payload.
* Heads are written for messages only, and a copy (``ctxledger migrate``) writes the
  heads of the bytes it copies.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from helpers.ledger_helpers import deterministic_ledger, make_ledger
from hypothesis import given, settings
from hypothesis import strategies as st
from test_lazy_bodies import OPS, assert_same_fold, eager_fold, play

from ctxledger import Ledger
from ctxledger.analysis.replay import rebuild_check, verify_compactions
from ctxledger.clock import SequentialIds, StepClock
from ctxledger.errors import InvalidEvent
from ctxledger.events import MessageAppended
from ctxledger.eventstore import SQLiteEventStore, sqlite_heads
from ctxledger.eventstore.migrations import MIGRATIONS
from ctxledger.eventstore.rows import NO_HEAD, head_columns
from ctxledger.eventstore.sqlite_sql import READ_HEAD_COLUMNS
from ctxledger.eventstore.transfer import copy_ledger
from ctxledger.projections import Projector

GOLDEN = Path(__file__).parent / "golden" / "ledger_pre_heads.db"
FACTS = json.loads((Path(__file__).parent / "golden" / "ledger_pre_heads.json").read_text())


def heads(path: Path) -> list[tuple[int, str, str | None, int | None]]:
    with sqlite3.connect(path) as conn:
        return list(conn.execute("SELECT seq, kind, message_id, tokens FROM events ORDER BY seq"))


def sql(path: Path, statement: str, *args: object) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(statement, args)
    conn.close()


def digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


# --- a ledger written by main before the columns ----------------------------------------


def test_a_ledger_written_before_the_columns_opens_verifies_rebuilds_and_replays(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    shutil.copyfile(GOLDEN, path)
    with sqlite3.connect(path) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM _migrations")] == ["0001_event_log"]
    with SQLiteEventStore(str(path)) as store:
        assert MIGRATIONS.applied(store._conn) == MIGRATIONS.names
        report = store.verify()
        assert report.ok and (report.head_seq, report.head_hash) == (
            FACTS["head_seq"],
            FACTS["head_hash"],
        )
        rebuilt = Projector.rebuild(store, use_checkpoint=False)
        from_checkpoint = Projector.rebuild(store)  # main's projector/v3 checkpoint (no v4 saved)
        for projector in (rebuilt, from_checkpoint):
            assert projector.last_seq == FACTS["last_seq"]
            assert (
                hashlib.sha256(projector.fingerprint()).hexdigest() == (FACTS["fingerprint_sha256"])
            )
            views = {
                s: digest(projector.transcript.api_messages(s))
                for s in sorted(projector.transcript.state.sessions)
            }
            assert views == FACTS["api_views"]
    # the migration added the columns and left every old row without a head
    assert all(h[2:] == NO_HEAD for h in heads(path))
    ledger = Ledger.open(path, clock=StepClock(), ids=SequentialIds("n"))
    try:
        tip = ledger.tip(next(iter(ledger.transcript.state.sessions)))
        assert rebuild_check(ledger, tip).equal
        assert all(not c.drift for c in verify_compactions(ledger, tip).compactions)
        ledger.append_messages(tip, [{"role": "user", "content": "new after the upgrade"}])
        ledger.report_usage(tip, {"prompt_tokens": 10, "completion_tokens": 1})
        mixed = Projector.rebuild(ledger.store, use_checkpoint=False)
        eager = eager_fold(ledger.store)
        assert_same_fold(mixed, eager, list(eager.transcript.state.sessions))
        assert ledger.store.verify().ok
    finally:
        ledger.close()
    new_rows = [h for h in heads(path) if h[0] > FACTS["last_seq"]]
    assert [h[1] for h in new_rows] == ["MessageAppended", "UsageReported"]
    assert new_rows[0][2] is not None and new_rows[0][3] is not None
    assert new_rows[1][2:] == NO_HEAD


# --- the property ---------------------------------------------------------------------


@settings(max_examples=12, deadline=None)
@given(ops=OPS, strip=st.integers(0, 4), page=st.integers(1, 9))
def test_the_rebuild_over_head_columns_equals_the_eager_fold(
    ops: list[tuple[str, int]], strip: int, page: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "l.db"
        ledger = make_ledger(path)
        try:
            sessions = play(ledger, ops)
            if strip:  # some rows as written before the migration: no head
                sql(
                    path,
                    "UPDATE events SET message_id = NULL, tokens = NULL WHERE seq % ? = 0",
                    strip + 1,
                )
            store = ledger.store
            eager = eager_fold(store)
            with mock.patch.object(sqlite_heads, "ROWS_BATCH", page):
                lazy = Projector.rebuild(store, use_checkpoint=False)
            assert lazy.last_seq == store.last_seq()
            assert_same_fold(lazy, eager, sessions)
            assert ledger.projector.fingerprint() == eager.fingerprint()
            assert store.verify().ok
        finally:
            ledger.close()


# --- verify -----------------------------------------------------------------------------


@pytest.fixture
def small(tmp_path: Path) -> Path:
    path = tmp_path / "l.db"
    ledger = deterministic_ledger(path)
    try:
        sid = ledger.start_session(model="m", context_length=8000)
        for n in range(4):
            ledger.append_messages(
                sid,
                [{"role": "user", "content": f"q{n}"}, {"role": "assistant", "content": f"a{n}"}],
            )
    finally:
        ledger.close()
    return path


def message_seq(path: Path, index: int) -> int:
    return [h[0] for h in heads(path) if h[1] == "MessageAppended"][index]


@pytest.mark.parametrize(
    "change",
    [
        "message_id = 'msg_someone_else'",
        "tokens = tokens + 1",
        "tokens = NULL",
        "message_id = NULL",
        "tokens = 'many'",
        "message_id = CAST(message_id AS BLOB)",
    ],
)
def test_verify_names_a_row_whose_head_disagrees_with_its_payload(small: Path, change: str) -> None:
    seq = message_seq(small, 3)
    sql(small, f"UPDATE events SET {change} WHERE seq = ?", seq)
    with SQLiteEventStore(str(small)) as store:
        report = store.verify()
    assert not report.ok and report.first_bad_seq == seq
    assert "message_id/tokens columns disagree" in (report.problem or "")
    with SQLiteEventStore(str(small)) as store:  # still folded (from the payload if need be)
        assert Projector.rebuild(store, use_checkpoint=False).last_seq == store.last_seq()


def test_a_head_on_a_row_that_is_not_a_message_is_reported(small: Path) -> None:
    sql(small, "UPDATE events SET message_id = 'msg_x', tokens = 3 WHERE seq = 1")
    with SQLiteEventStore(str(small)) as store:
        report = store.verify()
    assert not report.ok and report.first_bad_seq == 1


def test_an_earlier_chain_break_is_reported_first(small: Path) -> None:
    first, later = message_seq(small, 0), message_seq(small, 5)
    sql(small, "UPDATE events SET tokens = 999 WHERE seq = ?", later)
    sql(small, "UPDATE events SET payload = replace(payload, 'q0', 'qX') WHERE seq = ?", first)
    with SQLiteEventStore(str(small)) as store:
        report = store.verify()
    assert not report.ok and report.first_bad_seq == first
    assert "hash mismatch" in (report.problem or "")


def test_a_row_without_its_head_is_folded_from_its_payload(small: Path) -> None:
    with SQLiteEventStore(str(small)) as store:
        before = Projector.rebuild(store, use_checkpoint=False).fingerprint()
    sql(small, "UPDATE events SET message_id = NULL, tokens = NULL WHERE kind = 'MessageAppended'")
    with SQLiteEventStore(str(small)) as store:
        assert store.verify().ok
        assert Projector.rebuild(store, use_checkpoint=False).fingerprint() == before


def test_the_head_columns_are_tied_to_the_message_schema_they_were_derived_at() -> None:
    """Tripwire: the columns hold a ``MessageAppended`` head at schema 1. A new message
    schema needs its own step: ``head_columns`` (verify) derives heads only at today's
    schema, and the rebuild trusts the columns only on rows at it (others fold from the
    payload through the upcaster) — so after a bump, rows of the old schema that carry
    heads must be verified against their upcast head (or the columns cleared by a
    migration)."""
    assert MessageAppended.SCHEMA == 1
    assert f"schema = {MessageAppended.SCHEMA}" in READ_HEAD_COLUMNS


def test_a_row_at_another_schema_is_folded_from_its_payload_whatever_its_columns(
    small: Path,
) -> None:
    """The read hands the payload of a row whose schema is not today's message schema,
    even with well-typed columns (a future upcaster may change what they would say)."""
    with SQLiteEventStore(str(small)) as store:
        rows = store._conn.execute(READ_HEAD_COLUMNS, (1, 10**9, 10**6)).fetchall()
        other = [r for r in rows if r[2] is not None and r[4] != MessageAppended.SCHEMA]
        assert other == [] and all(r[5] is None for r in rows if r[2] is not None)
        store._conn.execute("UPDATE events SET schema = 99 WHERE message_id IS NOT NULL")
        rows = store._conn.execute(READ_HEAD_COLUMNS, (1, 10**9, 10**6)).fetchall()
        assert rows and all(r[5] is not None for r in rows)


# --- writing heads ----------------------------------------------------------------------


def test_heads_are_written_for_messages_and_copied_from_the_bytes(
    small: Path, tmp_path: Path
) -> None:
    written = heads(small)
    assert {h[1] for h in written if h[2] is not None} == {"MessageAppended"}
    assert all(h[2:] != NO_HEAD for h in written if h[1] == "MessageAppended")
    copy = tmp_path / "copy.db"
    with SQLiteEventStore(str(small)) as source, SQLiteEventStore(str(copy)) as dest:
        copy_ledger(source, dest, batch_events=3)
        assert dest.verify().ok
        rows = dest._conn.execute("SELECT stream_id, schema, payload FROM events ORDER BY seq")
        names = dict(dest._conn.execute("SELECT stream_id, stream FROM streams"))
        expected = [head_columns(names[s], schema, payload) for s, schema, payload in rows]
    assert [h[2:] for h in heads(copy)] == expected == [h[2:] for h in written]


def test_rows_already_folded_are_skipped(small: Path) -> None:
    with SQLiteEventStore(str(small)) as store:
        projector = Projector.rebuild(store, use_checkpoint=False)
        before = projector.fingerprint()
        bodies = projector._bodies_in(store)
        assert projector.apply_column_rows(store.read_heads(1), bodies, store.versions_at) == 0
        assert (
            projector.apply_column_rows(
                store.read_heads(store.last_seq()), bodies, store.versions_at
            )
            == 0
        )
        assert projector.fingerprint() == before
        fresh = Projector()
        half = store.last_seq() // 2
        assert fresh.apply_column_rows(store.read_heads(1, half), bodies, store.versions_at) == half
        assert (
            fresh.apply_column_rows(store.read_heads(1), bodies, store.versions_at)
            == store.last_seq() - half
        )
        assert fresh.fingerprint() == before


def test_a_head_row_moved_to_a_missing_stream_is_reported_and_named_by_a_rebuild(
    small: Path,
) -> None:
    # (session 24 skipped the row rather than raise a KeyError: the message was lost
    # without a word; session 35 names it, as a row that cannot be decoded)
    seq = message_seq(small, 2)
    sql(small, "UPDATE events SET stream_id = 999 WHERE seq = ?", seq)
    with SQLiteEventStore(str(small)) as store:
        report = store.verify()
        assert not report.ok and report.first_bad_seq == seq
        said = rf"^the event at seq {seq} cannot be decoded \(the row's stream_id 999 names no stream\)"
        with pytest.raises(InvalidEvent, match=said):
            Projector.rebuild(store, use_checkpoint=False)


def test_backfill_gives_old_rows_their_heads_and_changes_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copyfile(GOLDEN, path)
    with SQLiteEventStore(str(path)) as store:
        messages = sum(1 for h in heads(path) if h[1] == "MessageAppended")
        assert store.backfill_heads(batch=7) == messages
        assert store.backfill_heads(batch=7) == 0  # nothing left: idempotent
        report = store.verify()
        assert report.ok and report.head_hash == FACTS["head_hash"]
        rebuilt = Projector.rebuild(store, use_checkpoint=False)
        assert hashlib.sha256(rebuilt.fingerprint()).hexdigest() == FACTS["fingerprint_sha256"]
        rows = store._conn.execute(
            "SELECT s.stream, e.schema, e.payload FROM events AS e JOIN streams AS s"
            " USING (stream_id) ORDER BY e.seq"
        ).fetchall()
    assert [h[2:] for h in heads(path)] == [head_columns(*row) for row in rows]
