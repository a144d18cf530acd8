"""An import's events are made as the store takes them and appended chunk by chunk in
one transaction (session 40): the log it writes is byte for byte the log the whole
import wrote before (``tests/golden/import_streamed.db``, written by main at 59ebcf6
from the same input, ids and clock: :func:`import_into`); a bad message late in the
file appends nothing; the importer's messages are read as the store takes them."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from helpers.ledger_helpers import dump_log

from ctxledger.errors import InvalidInput
from ctxledger.eventstore.sqlite import SQLiteEventStore
from ctxledger.importers.detect import load_text
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.importing import import_sessions
from ctxledger.limits import MAX_MODEL_CHARS

GOLDEN = Path(__file__).parent / "golden" / "import_streamed.db"


def _conversation(n: int) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages: list[dict[str, Any]] = [{"role": "system", "content": f"prompt {n}"}]
    for i in range(40 + n * 7):
        if i % 9 == 3:  # a re-used call id: repaired, recorded
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": "c1", "content": f"out {i} é"})
        else:
            usage = {"prompt_tokens": 10 + i, "completion_tokens": 2, "total_tokens": 12 + i}
            messages.append({"role": "user", "content": f"q{n}.{i} \u2028"})
            messages.append({"role": "assistant", "content": f"a{n}.{i}", "usage": usage})
    if n == 1:  # a content the store keeps as a blob
        messages.append({"role": "user", "content": "long " + "x" * 70_000})
    return {"id": f"conv-{n}", "model": f"model-{n}", "messages": messages}


def input_text() -> str:
    """Three conversations, one a line (OpenAI JSONL)."""
    return "".join(json.dumps(_conversation(n)) + "\n" for n in range(3))


def import_into(db: Path) -> list[str]:
    """`input_text` imported into a new ledger at `db` with counted ids and clock (what
    main wrote the golden file with)."""
    ids, ticks = count(), count()
    store = SQLiteEventStore(db)
    ledger = Ledger(
        store, clock=lambda: 1_767_225_600.0 + next(ticks), ids=lambda p: f"{p}_{next(ids):06d}"
    )
    try:
        sessions = load_text(input_text(), "openai", path="conversations.jsonl")
        return import_sessions(ledger, sessions)
    finally:
        ledger.close()


@pytest.mark.parametrize("chunk", [None, 5])
def test_the_streamed_import_writes_the_log_the_whole_import_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int | None
) -> None:
    from ctxledger.eventstore import streamed

    if chunk is not None:  # chunk edges inside sessions, between a message and its usage
        monkeypatch.setattr(streamed, "CHUNK", chunk)
    ids = import_into(tmp_path / "l.db")
    assert len(ids) == 3
    assert dump_log(tmp_path / "l.db") == dump_log(GOLDEN)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_bad_message_late_in_the_file_appends_nothing(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str
) -> None:
    from ctxledger.eventstore import streamed

    # the parser takes it; the ledger refuses the usage's model name in the fourth
    # session's checks (made before the write transaction since the s40 review; the
    # store's rollback of a late error is tested in test_append_stream.py)
    text = input_text()
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    reply = {
        "role": "assistant",
        "content": "a",
        "usage": usage,
        "model": "m" * (MAX_MODEL_CHARS + 1),
    }
    bad = json.dumps({"id": "conv-bad", "messages": [{"role": "user", "content": "ok"}, reply]})
    if backend == "postgres":
        server = request.getfixturevalue("pg_server")
        target = f"{server.url}?schema=l_{hashlib.sha256(str(tmp_path).encode()).hexdigest()[:20]}"
    else:
        target = str(tmp_path / "l.db")
    with Ledger.open(target) as ledger:
        sessions = load_text(text + bad + "\n", "openai")
        old, streamed.CHUNK = streamed.CHUNK, 16
        try:
            with pytest.raises(InvalidInput, match="conv-bad"):
                import_sessions(ledger, sessions)
        finally:
            streamed.CHUNK = old
        assert ledger.store.last_seq() == 0
        ledger.refresh()
        assert ledger.sessions() == []


def test_the_store_takes_the_events_as_they_are_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxledger.eventstore import streamed

    made: list[str] = []
    seen: list[int] = []  # messages made when each chunk reached the store
    chunks = streamed.chunks

    def spying(items: Any, size: int | None = None) -> Any:
        assert not isinstance(items, list | tuple)  # a generator, not a built list
        for chunk in chunks(items, size):
            seen.append(len(made))
            yield chunk

    monkeypatch.setattr(streamed, "CHUNK", 10)
    monkeypatch.setattr(streamed, "chunks", spying)
    ids = count()
    with Ledger(
        SQLiteEventStore(tmp_path / "l.db"), ids=lambda p: made.append(p) or f"{p}_{next(ids)}"
    ) as ledger:
        rows = [{"role": "user", "content": f"m{i}"} for i in range(200)]
        import_sessions(ledger, load_text("\n".join(json.dumps(r) for r in rows), "openai"))
    # the first chunk reached the store before the later messages were made (each of
    # the three stages - validation, the ledger's checks, encoding - reads a chunk ahead)
    assert seen[0] <= 30 < 200 <= len(made) and seen == sorted(seen)


def test_the_write_lock_is_not_held_while_the_import_validates_and_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Validating and counting a large import took seconds inside ``BEGIN IMMEDIATE``
    (s40 review, MEDIUM-1): other writers waited or were refused. They are made first."""
    from ctxledger import messages
    from ctxledger.ledger import importing

    store = SQLiteEventStore(tmp_path / "l.db")
    inside: list[str] = []

    def spy(name: str, real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if store._conn.in_transaction:
                inside.append(name)
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(messages, "validate_message", spy("validate", messages.validate_message))
    monkeypatch.setattr(importing, "count_messages", spy("count", importing.count_messages))
    with Ledger(store) as ledger:
        sessions = load_text(input_text(), "openai")
        import_sessions(ledger, sessions)
        assert len(ledger.sessions()) == 3
    assert inside == []


def _derived_rows(db: Path, text: str) -> list[tuple[object, ...]]:
    ids = count()
    with Ledger(SQLiteEventStore(db), ids=lambda p: f"{p}_{next(ids)}") as ledger:
        import_sessions(ledger, load_text(text, "openai"))
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT * FROM derived ORDER BY 1, 2").fetchall()
    finally:
        conn.close()


def test_the_long_messages_derived_values_are_stored_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxledger.eventstore import streamed
    from ctxledger.ledger import importing

    long = "line of output " * 20_000  # over STORED_MIN_CHARS: facts and a count stored
    rows = [{"role": "user", "content": "go"}, {"role": "assistant", "content": long}]
    text = "\n".join(json.dumps(r) for r in [*rows, {"role": "user", "content": "ok"}])
    monkeypatch.setattr(streamed, "CHUNK", 2)
    streamed_rows = _derived_rows(tmp_path / "streamed.db", text)
    # the whole-import path (taken when a compaction is recorded) stores them from its events
    monkeypatch.setattr(importing, "_has_compaction", lambda ordered, compressed: True)
    whole_rows = _derived_rows(tmp_path / "whole.db", text)
    assert whole_rows and streamed_rows == whole_rows


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_an_import_leaves_no_derived_value_unstored_on_any_backend(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """PostgreSQL's store does not say which rows it wrote: the streamed import stored
    no derived value there (s40 review, MEDIUM-3); main's whole append did."""
    from ctxledger.eventstore import streamed
    from ctxledger.eventstore.base import AppendRequest
    from ctxledger.ledger import derived
    from ctxledger.ledger.derived import store_derived

    long = "line of output " * 20_000
    rows = [{"role": "user", "content": "go"}, {"role": "assistant", "content": long}]
    text = "\n".join(json.dumps(r) for r in [*rows, {"role": "user", "content": "ok"}])
    monkeypatch.setattr(streamed, "CHUNK", 2)
    if backend == "postgres":
        server = request.getfixturevalue("pg_server")
        target = f"{server.url}?schema=d_{hashlib.sha256(str(tmp_path).encode()).hexdigest()[:20]}"
    else:
        target = str(tmp_path / "l.db")
    hashed: list[int] = []
    real_hash = derived.sha256_hex
    monkeypatch.setattr(derived, "sha256_hex", lambda b: hashed.append(len(b)) or real_hash(b))
    with Ledger.open(target) as ledger:
        import_sessions(ledger, load_text(text, "openai"))
        # the ref the store hashed for the blob is taken (s40 final review, LOW-3), also
        # by a store that reads the long messages back by seq (SQLite, session 41: the
        # append's ref by event id, not the content hashed again)
        assert hashed == [], hashed
        events = [r.event for r in ledger.store.read_all()]
        again = [AppendRequest(events[0].session_id, events, None)]
        assert store_derived(ledger.store, again) == 0  # every value is there already


def test_a_failed_read_back_after_the_commit_does_not_fail_the_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The long messages are read back for their derived values after the commit: the
    import stands if that read fails (a cache; s40 review, LOW-7)."""
    from ctxledger.errors import StoreError

    def failing(self: SQLiteEventStore, seqs: Any) -> Any:
        raise StoreError("read failed")

    long = "line of output " * 20_000
    rows = [{"role": "user", "content": "go"}, {"role": "assistant", "content": long}]
    with Ledger(SQLiteEventStore(tmp_path / "l.db")) as ledger:
        monkeypatch.setattr(SQLiteEventStore, "read_at", failing)
        ids = import_sessions(ledger, load_text("\n".join(json.dumps(r) for r in rows), "openai"))
        monkeypatch.undo()
        ledger.refresh()
        assert [s.session_id for s in ledger.sessions()] == ids


def test_a_streamed_session_is_checked_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its usage reports are normalized and its end reason checked before the write
    (s41: they were done again as its events were made); the events take those."""
    from ctxledger.importers.model import ImportedSession, ImportedUsage
    from ctxledger.ledger import importing

    calls: list[str] = []
    normalize, check = importing.normalize_usage, importing.check_name

    def normalizing(raw: Any, shape: str | None = None) -> Any:
        calls.append("usage")
        return normalize(raw, shape)

    def checking(value: object, field: str, limit: int, **kw: Any) -> str:
        calls.append(field)
        return check(value, field, limit, **kw)

    monkeypatch.setattr(importing, "normalize_usage", normalizing)
    monkeypatch.setattr(importing, "check_name", checking)
    usage = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    session = ImportedSession(
        key="k",
        source_format="openai",
        messages=[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
        usages=[ImportedUsage(after_index=1, raw=usage), ImportedUsage(after_index=1, raw=usage)],
        end_reason="done",
    )
    with Ledger(SQLiteEventStore(tmp_path / "l.db")) as ledger:
        (sid,) = import_sessions(ledger, [session])
        events = [r.event for r in ledger.store.read_stream(sid)]
    assert calls == ["usage", "usage", "end reason"]
    kinds = [type(e).__name__ for e in events]
    assert kinds[-4:] == ["MessageAppended", "UsageReported", "UsageReported", "SessionEnded"]
    assert events[-1].reason == "done"  # type: ignore[attr-defined]
    assert events[-2].usage.input == 3  # type: ignore[attr-defined]


def test_the_long_messages_are_read_back_a_few_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each long message is 256 KiB or more: they are read back for their derived values
    ``READ_BACK`` at a time (s41: the default chunk of 2,048 held them all), every value
    stored."""
    from ctxledger.eventstore.base import AppendRequest
    from ctxledger.ledger import streamappend
    from ctxledger.ledger.derived import store_derived

    read: list[int] = []
    read_at = SQLiteEventStore.read_at

    def counting(self: SQLiteEventStore, seqs: Any) -> Any:
        read.append(len(seqs))
        return read_at(self, seqs)

    monkeypatch.setattr(streamappend, "READ_BACK", 2)
    monkeypatch.setattr(SQLiteEventStore, "read_at", counting)
    rows = [{"role": "user", "content": f"long {i} " + "word " * 60_000} for i in range(5)]
    with Ledger(SQLiteEventStore(tmp_path / "l.db")) as ledger:
        import_sessions(ledger, load_text("\n".join(json.dumps(r) for r in rows), "openai"))
        assert read == [2, 2, 1]
        read.clear()
        events = [r.event for r in ledger.store.read_all()]
        again = [AppendRequest(events[0].session_id, events, None)]
        assert store_derived(ledger.store, again) == 0  # every value is there already
