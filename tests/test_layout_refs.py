"""A compaction's layout message that begins with a long text already kept as a blob (a
summary merged after a big user message) is stored by reference inside a what-if:
``SessionSwitched`` schema 2, ``LayoutEntry.content_ref`` + ``content_suffix``.

Written by reference, it reads back as the very event given; ``verify`` names a
missing or altered referenced blob at the switch; a switch without references stays
schema 1, byte for byte what main wrote; a what-if of a ledger holding references
reports exactly what it reports of the same events stored inline.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import sys
from pathlib import Path

import anyio
import msgspec
import psycopg
import pytest
from click.testing import CliRunner
from helpers.pg_server import PgServer

from ctxledger import Ledger, OfflineSummarizer, compact
from ctxledger.analysis.whatif import whatif
from ctxledger.cli.main import cli
from ctxledger.errors import IntegrityError
from ctxledger.events import (
    SWITCH_INLINE_SCHEMA,
    LayoutEntry,
    SessionSwitched,
    encode_event,
)
from ctxledger.eventstore import AppendRequest, EventStore, SQLiteEventStore
from ctxledger.eventstore.contents import sharing_contents
from ctxledger.eventstore.postgres import PostgresEventStore
from ctxledger.eventstore.rows import GENESIS_HASH, chain_hash
from ctxledger.eventstore.transfer import copy_ledger
from ctxledger.eventstore.verifier import ChainVerifier
from ctxledger.projections import Projector
from ctxledger.testing.eventstore import message, started
from ctxledger.testing.hostile_rows import NOT_TEXT, forge

sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))
import pathological_bench as bench

#: a 100 KB text (not ASCII): over the 64 KB blob threshold
BIG = "déjà vu in src/app.py, line 12\n" * 3_300
SUFFIX = "\n\n[CONTEXT SUMMARY] the earlier turns, summarized\n[END OF SUMMARY]"


def switch(session: str, content: str, event_id: str = "evt_switch") -> SessionSwitched:
    entry = LayoutEntry(
        message_id="msg_merged",
        origin="merged",
        message={"role": "user", "content": content, "name": "me"},
        tokens=25_000,
        source_id="msg_source",
    )
    carried = LayoutEntry(message_id="msg_tail", tokens=3)
    return SessionSwitched(
        event_id=event_id,
        session_id=session,
        at=1_767_225_700.0,
        compaction_id="cmp_1",
        new_session_id="ses_next",
        layout=[entry, carried],
        plan={"action": "compress"},
        config={},
        tokens_before=30_000,
        tokens_after=25_010,
        messages_before=4,
        messages_after=2,
    )


def read_big(source: SQLiteEventStore) -> str:
    """The big message's content as the run reads it (a checked text of the run)."""
    content = list(source.read_stream("ses_src"))[-1].event.message["content"]  # type: ignore[attr-defined]
    assert content == BIG
    return str(content)


@pytest.fixture
def stores(tmp_path: Path) -> tuple[Path, SessionSwitched]:
    """A source ledger holding BIG as a blob, and a destination whose one switch merges a
    summary after BIG, appended inside a what-if's block: the blob is in the destination
    only because the switch references it."""
    with SQLiteEventStore(tmp_path / "source.db") as source:
        source.append("ses_src", [started("ses_src"), message("ses_src", BIG)], 0)
        dest_path = tmp_path / "dest.db"
        with SQLiteEventStore(dest_path) as dest, sharing_contents():
            dest.append("ses_d", [started("ses_d")], 0)
            event = switch("ses_d", read_big(source) + SUFFIX)
            dest.append("ses_d", [event], 1)
    return dest_path, event


def stored_switches(store: SQLiteEventStore) -> list[tuple[int, int, bytes]]:
    return [(r[0], r[5], r[6]) for r in store.read_stored() if r[4] == "SessionSwitched"]


def test_a_merged_long_message_is_stored_by_reference_and_reads_back_whole(
    stores: tuple[Path, SessionSwitched],
) -> None:
    path, event = stores
    with SQLiteEventStore(path) as store:
        [(seq, schema, payload)] = stored_switches(store)
        assert schema == SessionSwitched.SCHEMA == 2
        assert len(payload) < 2_000  # the suffix and the ref, not 100 KB again
        assert BIG[:200].encode() not in payload
        stored = msgspec.json.decode(payload)["layout"][0]
        assert stored["message"] == {"role": "user", "content": None, "name": "me"}
        assert stored["content_suffix"] == SUFFIX
        read = [r.event for r in store.read_all()][-1]
        assert read == event and encode_event(read) == encode_event(event)
        assert [r.event for r in store.read_at([seq])] == [event]
        report = store.verify()
        assert report.ok and report.blobs_checked == 1


def test_verify_names_the_switch_when_its_referenced_blob_is_missing(
    stores: tuple[Path, SessionSwitched],
) -> None:
    path, _ = stores
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM blobs")
    conn.close()
    with SQLiteEventStore(path) as store:
        report = store.verify()
    assert not report.ok
    assert (report.first_bad_seq, report.first_bad_event_id) == (2, "evt_switch")
    assert report.problem is not None and "missing blob" in report.problem
    assert "layout message" in report.problem


def test_verify_names_the_switch_when_its_referenced_blob_was_altered(
    stores: tuple[Path, SessionSwitched],
) -> None:
    path, _ = stores
    altered = BIG.replace("line 12", "line 13", 1).encode()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE blobs SET data = ?, size = ?", (altered, len(altered)))
    conn.close()
    with SQLiteEventStore(path) as store:
        report = store.verify()
    assert not report.ok and report.first_bad_seq == 2
    assert report.problem is not None and "no longer hashes to its ref" in report.problem


def test_a_switch_without_a_known_text_is_stored_inline_at_schema_1_as_main_wrote_it(
    tmp_path: Path,
) -> None:
    """Outside a what-if's block, and inside one for a text the run never read, a switch
    is stored exactly as before schema 2: its payload is the event's encoding."""
    with SQLiteEventStore(tmp_path / "l.db") as store:
        store.append("ses_a", [started("ses_a")], 0)
        outside = switch("ses_a", BIG + SUFFIX, "evt_outside")
        store.append("ses_a", [outside], 1)
        with sharing_contents():
            unknown = switch("ses_a", "x" * 70_000 + SUFFIX, "evt_unknown")
            store.append("ses_a", [unknown], 2)
        rows = stored_switches(store)
        assert [(schema, payload) for _, schema, payload in rows] == [
            (SWITCH_INLINE_SCHEMA, encode_event(outside)),
            (SWITCH_INLINE_SCHEMA, encode_event(unknown)),
        ]
        assert b"content_ref" not in rows[0][2]
        assert [r.event for r in store.read_all()][1:] == [outside, unknown]
        assert store.verify().ok


def test_a_schema_1_switch_holding_references_does_not_verify() -> None:
    """References are a schema 2 shape: an older row carrying them (forged, its chain
    hash recomputed) is reported. (Reads refuse it too: the forged rows of
    ``ctxledger.testing.hostile_rows``, run for every store.)"""
    entry = LayoutEntry(
        message_id="m", origin="merged", message={"content": None}, content_ref="0" * 64
    )
    event = msgspec.structs.replace(switch("ses_a", "x"), layout=[entry])
    payload = encode_event(event)
    digest = chain_hash(GENESIS_HASH, 1, "ses_a", 1, event.event_id, "SessionSwitched", 1, payload)
    verifier = ChainVerifier({"0" * 64: None})
    verifier.feed([(1, "ses_a", 1, event.event_id, "SessionSwitched", 1, payload, digest)])
    report = verifier.report()
    assert not report.ok and report.first_bad_seq == 1
    assert report.problem == "a schema 1 SessionSwitched holds referenced layout contents"


def test_a_caller_given_reference_is_stored_at_schema_2_and_checked(tmp_path: Path) -> None:
    """An event that already holds a reference (as a store hands out a stored one) is kept
    as given, at schema 2, and verify checks the blob it names."""
    data = BIG.encode()
    with SQLiteEventStore(tmp_path / "l.db") as store:
        store.append("ses_a", [started("ses_a")], 0)
        ref = store.put_blob(data)
        entry = LayoutEntry(
            message_id="m",
            origin="merged",
            message={"role": "user", "content": None},
            content_ref=ref,
            content_suffix=SUFFIX,
        )
        given = msgspec.structs.replace(switch("ses_a", "x"), layout=[entry])
        store.append_many([AppendRequest("ses_a", [given], 1)])
        [(_, schema, payload)] = stored_switches(store)
        assert schema == 2 and payload == encode_event(given)
        whole = [r.event for r in store.read_all()][-1]
        assert isinstance(whole, SessionSwitched)
        assert whole.layout[0].message == {"role": "user", "content": BIG + SUFFIX}
        assert store.verify().ok


def test_a_layout_content_is_stored_after_the_longest_text_the_run_read_that_begins_it(
    tmp_path: Path,
) -> None:
    """Two texts the run read, one beginning the other: the content is stored after the
    longer (the suffix is only what follows it), whichever the run read first."""
    longer = BIG + "and then some more, " * 4_000
    with SQLiteEventStore(tmp_path / "l.db") as store, sharing_contents():
        store.append("ses_a", [started("ses_a"), message("ses_a", BIG)], 0)
        store.append("ses_a", [message("ses_a", longer)], 2)
        read = [r.event.message["content"] for r in list(store.read_all())[1:]]  # type: ignore[attr-defined]
        assert read == [BIG, longer]  # BIG read (and kept) first
        event = switch("ses_a", read[1] + SUFFIX)
        store.append("ses_a", [event], 3)
        [(_, schema, payload)] = stored_switches(store)
        stored = msgspec.json.decode(payload)["layout"][0]
        assert schema == 2 and stored["content_suffix"] == SUFFIX
        assert stored["content_ref"] == hashlib.sha256(longer.encode()).hexdigest()
    with SQLiteEventStore(tmp_path / "l.db") as store:
        assert [r.event for r in store.read_all()][-1] == event


# --- end to end: a what-if's scratch ledger written to a file -------------------------------


@pytest.fixture(scope="module")
def whatif_ledgers(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """The what-if of a session holding a 100 KB user message, its scratch kept in a file
    (written by reference), the same events appended again inline to another file, and
    the user message."""
    tmp = tmp_path_factory.mktemp("layout_refs")
    messages = bench.session("user", 100_000)
    ledger, sid = bench._ledger(str(tmp), "a.db", messages)
    anyio.run(compact, ledger, sid, OfflineSummarizer())
    whatif(ledger, sid, summarizer=OfflineSummarizer(), out=tmp / "whatif.db")
    ledger.close()
    inline = tmp / "inline.db"
    with SQLiteEventStore(tmp / "whatif.db") as by_ref, SQLiteEventStore(inline) as copy:
        for record in by_ref.read_all():  # hydrated; appended outside a what-if: inline
            copy.append(record.stream, [record.event], record.version - 1)
    (big,) = [m["content"] for m in messages if len(str(m.get("content"))) >= 100_000]
    return tmp / "whatif.db", inline, str(big)


def test_a_whatif_scratch_stores_its_merged_big_message_by_reference(
    whatif_ledgers: tuple[Path, Path, str],
) -> None:
    by_ref, inline, _ = whatif_ledgers
    with SQLiteEventStore(by_ref) as store, SQLiteEventStore(inline) as copy:
        rows, inline_rows = stored_switches(store), stored_switches(copy)
        assert [schema for _, schema, _ in rows].count(2) == 1
        assert {schema for _, schema, _ in inline_rows} == {1}
        (small,) = [len(p) for _, schema, p in rows if schema == 2]
        (whole,) = [
            len(p) for (_, s, _), (_, _, p) in zip(rows, inline_rows, strict=True) if s == 2
        ]
        assert whole > 100_000 > 20_000 > small
        assert [r.event for r in store.read_all()] == [r.event for r in copy.read_all()]
        assert store.verify().ok and copy.verify().ok


def test_a_rebuild_from_the_log_heads_sees_the_merged_message_whole(
    whatif_ledgers: tuple[Path, Path, str],
) -> None:
    """The head fold (no checkpoint) re-reads a switch holding references whole: the
    projection is byte for byte the one folded from the same events stored inline."""
    by_ref, inline, big = whatif_ledgers
    states = []
    for path in (by_ref, inline):
        with SQLiteEventStore(path) as store:
            projector = Projector.rebuild(store, use_checkpoint=False)
            merged = [
                m.message
                for m in projector.transcript.state.messages.values()
                if m.origin == "merged"
            ]
            assert any(str(m["content"]).startswith(big) for m in merged)
            states.append(projector.encode())
    assert states[0] == states[1]


def test_a_ledger_holding_references_replays_as_the_inline_one(
    whatif_ledgers: tuple[Path, Path, str],
) -> None:
    """Opened as a ledger, each session's view and the what-if report are byte for byte
    those of the same events stored inline."""
    outputs = []
    for path in whatif_ledgers[:2]:
        ledger = Ledger.open(path)
        try:
            sessions = ledger.sessions()
            views = {lin.session_id: ledger.api_messages(lin.session_id) for lin in sessions}
            report = whatif(ledger, sessions[-1].session_id, summarizer=OfflineSummarizer())
            outputs.append((msgspec.json.encode(views), msgspec.json.encode(report)))
            assert ledger.verify().ok
        finally:
            ledger.close()
    assert outputs[0] == outputs[1]


# --- migrate both ways and PostgreSQL --------------------------------------------------------


@pytest.fixture
def pg_url(pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("CTXLEDGER_INDEX_DIR", str(tmp_path / "indexes"))
    schema = "lr_" + hashlib.sha256(str(tmp_path).encode()).hexdigest()[:20]
    return f"{pg_server.url}?schema={schema}"


def rows_of(store: EventStore) -> list[tuple[int, str, int, str, int, bytes]]:
    return [(r[0], r[1], r[2], r[7], r[5], r[6]) for r in store.read_stored()]


def test_migrate_to_postgresql_and_back_keeps_the_reference_and_the_hashes(
    stores: tuple[Path, SessionSwitched], pg_url: str, tmp_path: Path
) -> None:
    """The blob is referenced by the switch alone: the copy carries it, stores the switch's
    bytes as they were (schema 2, by reference) and verifies, both ways."""
    path, event = stores
    back = tmp_path / "back.db"
    with SQLiteEventStore(path) as source, PostgresEventStore(pg_url) as pg:
        want = rows_of(source)
        copy_ledger(source, pg)
        assert rows_of(pg) == want
        assert [r.event for r in pg.read_all()][-1] == event
        assert pg.verify().ok and pg.verify().blobs_checked == 1
        with SQLiteEventStore(back) as copy:
            copy_ledger(pg, copy)
            assert rows_of(copy) == want and copy.verify().ok


def test_postgresql_stores_by_reference_and_verify_names_an_altered_blob(pg_url: str) -> None:
    with SQLiteEventStore(":memory:") as source, PostgresEventStore(pg_url) as pg:
        source.append("ses_src", [started("ses_src"), message("ses_src", BIG)], 0)
        with sharing_contents():
            pg.append("ses_d", [started("ses_d")], 0)
            event = switch("ses_d", read_big(source) + SUFFIX)
            pg.append("ses_d", [event], 1)
        (row,) = [r for r in pg.read_stored() if r[4] == "SessionSwitched"]
        assert row[5] == 2 and len(row[6]) < 2_000
        assert [r.event for r in pg.read_all()][-1] == event and pg.verify().ok
        folded = Projector.rebuild(pg, use_checkpoint=False)  # from the heads (read_rows)
        merged = folded.transcript.state.messages["msg_merged"]
        assert merged.message["content"] == BIG + SUFFIX
        options = f"-c search_path={pg.schema}"
        with psycopg.connect(pg._conninfo, autocommit=True, options=options) as conn:
            conn.execute("UPDATE blobs SET data = %s", (b"y" * 1000,))
        report = pg.verify()
        assert not report.ok and report.first_bad_seq == 2 and "blob" in (report.problem or "")


@pytest.mark.parametrize("to_postgres", [False, True], ids=["sqlite", "postgresql"])
def test_migrate_says_drop_it_when_a_copied_row_cannot_be_read_back(
    to_postgres: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A destination whose copy of a blob turns out not to be text once the first
    transaction committed (a hostile writer there): reading the next transaction back
    stops the copy with the store's clear error and says the destination is to be
    dropped, instead of a UnicodeDecodeError from deep inside."""
    source = SQLiteEventStore(tmp_path / "source.db")
    source.append("ses_a", [started("ses_a"), message("ses_a", BIG)], 0)
    source.append("ses_a", [message("ses_a", BIG)], 2)  # the same blob again
    ref = hashlib.sha256(BIG.encode()).hexdigest()
    bad = b"\xff" * 10

    if to_postgres:
        dest: EventStore = PostgresEventStore(request.getfixturevalue("pg_url"))

        def tamper(copied: int) -> None:
            options = f"-c search_path={dest.schema}"  # type: ignore[attr-defined]
            with psycopg.connect(dest._conninfo, autocommit=True, options=options) as conn:  # type: ignore[attr-defined]
                conn.execute("UPDATE blobs SET data = %s WHERE ref = %s", (bad, ref))
    else:
        dest = SQLiteEventStore(tmp_path / "dest.db")

        def tamper(copied: int) -> None:
            with sqlite3.connect(tmp_path / "dest.db") as conn:
                conn.execute("UPDATE blobs SET data = ? WHERE ref = ?", (bad, ref))
            conn.close()

    with source, dest:
        with pytest.raises(IntegrityError) as raised:
            copy_ledger(source, dest, batch_events=1, progress=tamper)
        assert dest.last_seq() == 3  # both transactions committed
    text = str(raised.value)
    assert text.startswith("the events of seq 3..3 were copied but cannot be read back (")
    assert "not UTF-8 text" in text and text.endswith("the destination is incomplete: drop it")


def test_the_cli_names_a_blob_that_is_not_text_in_one_line(tmp_path: Path) -> None:
    """verify names the row; sessions and migrate print one error line, no traceback, and
    migrate writes nothing."""
    path = tmp_path / "l.db"
    ref = hashlib.sha256(NOT_TEXT).hexdigest()
    entry = LayoutEntry(message_id="m", origin="merged", message={"content": None}, content_ref=ref)
    with SQLiteEventStore(path) as store:
        forge(
            store, msgspec.structs.replace(switch("ses_h", "x"), layout=[entry]), 2, {ref: NOT_TEXT}
        )

    def run(*args: str) -> tuple[int, list[str]]:
        result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
        return result.exit_code, result.output.splitlines()

    assert run("--db", str(path), "verify") == (
        1,
        [f"FAILED at seq 3 (event evt_switch): blob {ref} is not UTF-8 text: a layout "
         "message's content cannot be read"],
    )  # fmt: skip
    assert run("--db", str(path), "sessions") == (
        1,
        ["error: the event at seq 3: its content blob is not UTF-8 text (invalid start byte "
         "at byte 0); run verify() on the log"],
    )  # fmt: skip
    code, lines = run("migrate", "--from", str(path), "--to", str(tmp_path / "copy.db"))
    assert code == 1 and len(lines) == 1 and lines[0].endswith("nothing was copied")
    with SQLiteEventStore(tmp_path / "copy.db") as copy:
        assert copy.last_seq() == 0


# --- a ledger main wrote: its long merged message inline, at schema 1 ----------------------

GOLDEN = Path(__file__).parent / "golden" / "ledger_merged_inline.db"
GOLDEN_FACTS = Path(__file__).parent / "golden" / "ledger_merged_inline.json"


def test_mains_inline_merged_ledger_opens_verifies_and_replays_to_mains_values(
    tmp_path: Path,
) -> None:
    """Main (before schema 2) wrote this what-if scratch with the 66 KB merged message
    inline. Today's code reads every switch of it as is, and its own what-if of the file
    (whose scratch now stores that message by reference) reports main's very bytes."""
    sys.path.insert(0, str(GOLDEN.parent))
    import make_merged_inline_ledger as golden  # the recipe's own reader of the facts

    path = tmp_path / "golden.db"
    shutil.copyfile(GOLDEN, path)
    with SQLiteEventStore(path) as store:
        rows = stored_switches(store)
        assert {schema for _, schema, _ in rows} == {SWITCH_INLINE_SCHEMA}
        assert max(len(payload) for _, _, payload in rows) > 66_000  # inline
    assert golden.facts_of(str(path)) == json.loads(GOLDEN_FACTS.read_text())
