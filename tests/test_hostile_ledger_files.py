"""Hostile ledger files given to every command that opens a ledger, and to the library.

Session 34's sweep: another program's SQLite database (with tables, in WAL mode, with
no table but its own application id or a view), a file that is no database, a cut
ledger, a ledger of a newer ctxledger, a directory, an empty file, and a ledger whose
events table holds a row that cannot be read (a payload that is no event or NULL, a
NULL schema) or one that reads but does not verify (a wrong hash or kind, NULL
columns). Each gives one error line (``error: ...`` or verify's ``FAILED ...``) and a
non-zero exit, never a traceback, and leaves the folder byte-identical: the file, its
``-wal``/``-shm`` and no new side file. What was found and mended is in
``docs/notes/s34-hostile.md``; files are made here, in code.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.ledger_helpers import compact_now, deterministic_ledger

from ctxledger import Ledger
from ctxledger.cli.main import cli
from ctxledger.errors import CtxLedgerError, DuplicateEventError, InvalidEvent
from ctxledger.eventstore.sqlite import SQLiteEventStore
from ctxledger.projections import Projector
from ctxledger.runtime.service import ContextService
from ctxledger.testing.eventstore import message

SID = "ses_hostile"


_TEMPLATES: dict[bool, dict[str, bytes]] = {}


def _ledger(path: Path, switched: bool = False) -> None:
    """A sound ledger of one session, with its side files (written once, then copied);
    `switched`: compacted once (its last row a ``SessionSwitched``)."""
    if switched not in _TEMPLATES:
        with deterministic_ledger(path) as ledger:
            ledger.start_session(model="m", context_length=8192, session_id=SID)
            said = [{"role": "user", "content": "hi " * 50}, {"role": "assistant", "content": "ok"}]
            ledger.append_messages(SID, said)
            for turn in range(6 if switched else 0):
                ledger.append_messages(SID, [{"role": "user", "content": f"step {turn} " * 400}])
            if switched:
                assert compact_now(ledger, SID).action == "compressed"
        _TEMPLATES[switched] = {s: Path(f"{path}{s}").read_bytes() for s in ("", ".head", ".lock")}
    for side, data in _TEMPLATES[switched].items():
        Path(f"{path}{side}").write_bytes(data)


def _sql(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


def _damaged_row(*statements: str) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        _ledger(path)
        _sql(path, *statements)

    return make


def _null(column: str, where: str = "seq = 2") -> Callable[[Path], None]:
    """A NULL where the table says NOT NULL (the schema rewritten, as a tool could)."""

    def make(path: Path) -> None:
        _ledger(path, switched="SessionSwitched" in where)
        _sql(
            path,
            "PRAGMA writable_schema = ON",
            "UPDATE sqlite_master SET sql = replace(sql, 'NOT NULL', '') WHERE name = 'events'",
        )
        _sql(path, f"UPDATE events SET {column} = NULL WHERE {where}")  # (the schema read again)

    return make


def _truncated(path: Path) -> None:
    _ledger(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


#: files no command may read as a ledger, nor change
FILES: dict[str, Callable[[Path], None]] = {
    "text": lambda p: p.write_text("threshold = 0.5\n"),
    "truncated": _truncated,
    "theirs": lambda p: _sql(p, "CREATE TABLE notes (body)", "INSERT INTO notes VALUES ('x')"),
    "theirs-wal": lambda p: _sql(p, "PRAGMA journal_mode = WAL", "CREATE TABLE notes (body)"),
    "theirs-marked": lambda p: _sql(p, "PRAGMA application_id = 1234", "PRAGMA user_version = 7"),
    "theirs-view": lambda p: _sql(p, "CREATE VIEW answer AS SELECT 42"),
    "newer": _damaged_row("INSERT INTO _migrations VALUES ('9999_future', 'x')"),
    "directory": lambda p: p.mkdir(),
}
#: a row no read can decode: every command reading it fails, nothing written
UNREADABLE: dict[str, Callable[[Path], None]] = {
    "payload": _damaged_row("UPDATE events SET payload = x'c1ff00' WHERE seq = 2"),
    "payload-cut": _damaged_row(
        """UPDATE events SET payload = CAST('{"kind":"MessageAppended",' AS BLOB) WHERE seq = 2"""
    ),
    "null-payload": _null("payload"),
    "null-schema": _null("schema"),
    # not a message: a NULL payload there once meant "the head is in the columns"
    "null-payload-started": _null("payload", "seq = 1"),
    "null-payload-switched": _null("payload", "kind = 'SessionSwitched'"),
    "number-payload-started": _damaged_row("UPDATE events SET payload = 42 WHERE seq = 1"),
    # a message row no stream owns: the fold skipped it, losing the message (session 35)
    "null-stream": _null("stream_id"),
    "stream-text": _damaged_row("UPDATE events SET stream_id = 'x' WHERE seq = 2"),
    # (its stream row gone: what a deleted streams row leaves)
    "stream-unknown": _damaged_row("UPDATE events SET stream_id = 99 WHERE seq = 2"),
    # a version of no integer: a ValueError traceback in every read (session 35)
    "version-text": _damaged_row("UPDATE events SET version = 'x' WHERE seq = 2"),
}
#: of those, the rows only the head-column fold reads by their stream or version (a fold of
#: payloads reads the session from the payload; PostgreSQL's version is a bigint NOT NULL)
_STREAMLESS = ("null-stream", "stream-text", "stream-unknown", "version-text")
#: a row that decodes but does not verify: verify and migrate name it
UNVERIFIED: dict[str, Callable[[Path], None]] = {
    "hash": _damaged_row("UPDATE events SET hash = '1:' || substr(hash, 3) WHERE seq = 2"),
    "kind": _damaged_row("UPDATE events SET kind = 'Bogus' WHERE seq = 2"),
    "null-kind": _null("kind"),
    "null-hash": _null("hash"),
    "null-version": _null("version"),
    "null-event-id": _null("event_id"),
}

#: every command that opens a ledger; DB is the hostile path, GOOD a sound ledger
COMMANDS: dict[str, list[str]] = {
    "sessions": ["--db", "DB", "sessions"],
    "show": ["--db", "DB", "show", SID],
    "usage": ["--db", "DB", "usage", SID],
    "chain": ["--db", "DB", "chain", SID],
    "replay": ["--db", "DB", "replay", SID],
    "audit": ["--db", "DB", "audit", SID],
    "diff": ["--db", "DB", "diff", SID, SID],
    "diff-b-db": ["--db", "GOOD", "diff", SID, SID, "--b-db", "DB"],
    "trace": ["--db", "DB", "trace", SID, "fact"],
    "recall": ["--db", "DB", "recall", SID, "hi"],
    "expand": ["--db", "DB", "expand", "cmp_x"],
    "export": ["--db", "DB", "export", SID],
    "undo": ["--db", "DB", "undo", "cmp_x"],
    "pin": ["--db", "DB", "pin", SID, "1"],
    "compress": ["--db", "DB", "compress", SID],
    "verify": ["--db", "DB", "verify"],
    "upgrade": ["--db", "DB", "upgrade"],
    "import": ["--db", "DB", "import", "IN", "--format", "openai"],
    "migrate-from": ["migrate", "--from", "DB", "--to", "OUT"],
    "migrate-to": ["migrate", "--from", "GOOD", "--to", "DB"],
    "trajectories": ["--db", "DB", "trajectories", "compress", "TIN", "TOUT"],
}
#: what the commands write besides the ledger they are given (left out of the comparison)
_THEIRS = ("good.db", "out.db", "tout", "in.json", "tin.jsonl")


def _snapshot(folder: Path) -> dict[str, str]:
    seen: dict[str, str] = {}
    for root, dirs, files in os.walk(folder):
        for name in [*files, *dirs]:
            path = Path(root, name)
            rel = str(path.relative_to(folder))
            if not rel.startswith(_THEIRS):
                seen[rel] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
    return seen


def _run(tmp_path: Path, make: Callable[[Path], None], command: str) -> tuple[int, str, dict]:
    """Run `command` on the file `make` writes; (exit code, output, what changed)."""
    db = tmp_path / "l.db"
    make(db)
    args = COMMANDS[command]
    if "GOOD" in args:
        _ledger(tmp_path / "good.db")
    (tmp_path / "in.json").write_text(json.dumps([{"role": "user", "content": "hi"}]))
    turns = [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "ok"}]
    (tmp_path / "tin.jsonl").write_text(json.dumps({"id": "a", "conversations": turns}) + "\n")
    names = {"DB": db, "GOOD": tmp_path / "good.db", "OUT": tmp_path / "out.db"}
    names |= {"IN": tmp_path / "in.json", "TIN": tmp_path / "tin.jsonl"}
    names |= {"TOUT": tmp_path / "tout.jsonl"}
    before = _snapshot(tmp_path)
    result = CliRunner().invoke(cli, [str(names.get(a, a)) for a in args])
    after = _snapshot(tmp_path)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        command,
        repr(result.exception),
    )
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert "Traceback" not in result.output
    return result.exit_code, result.output, {"changed": sorted(changed)}


def _one_error_line(output: str) -> None:
    said = [line for line in output.splitlines() if line.startswith(("error:", "FAILED"))]
    assert len(said) == 1, output[-2000:]


#: every command for the files the sweep found written to; the ways of opening (a read,
#: a write, migrate's two ends, trajectories' --db) for the others (each is tested
#: elsewhere too: test_db_path_not_a_ledger, test_upgrade_command, test_read_only_*)
_SWEEP = [
    (kind, command)
    for kind in FILES
    for command in COMMANDS
    if kind in ("theirs-wal", "theirs-marked", "newer")
    or command in ("sessions", "pin", "import", "migrate-from", "migrate-to", "trajectories")
]


@pytest.mark.parametrize(("kind", "command"), _SWEEP)
def test_a_file_that_is_no_ledger_is_refused_and_left_as_it_was(
    tmp_path: Path, kind: str, command: str
) -> None:
    code, output, seen = _run(tmp_path, FILES[kind], command)
    assert code != 0, output[-2000:]
    _one_error_line(output)
    assert seen["changed"] == [], (output[-500:], seen)


#: commands that read the damaged row (sessions, usage and chain read none of it)
_READERS = ["show", "replay", "export", "pin", "compress", "verify", "migrate-from"]


@pytest.mark.parametrize("command", ["sessions", "verify"])
def test_another_programs_wal_database_behind_a_symlink_is_left_as_it_was(
    tmp_path: Path, command: str
) -> None:
    """(Its -wal and -shm are beside the file the link names, where SQLite made them.)"""
    (tmp_path / "real").mkdir()
    (tmp_path / "links").mkdir()
    FILES["theirs-wal"](tmp_path / "real" / "their.db")
    (tmp_path / "links" / "l.db").symlink_to(tmp_path / "real" / "their.db")
    before = _snapshot(tmp_path)
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "links" / "l.db"), command])
    assert result.exit_code != 0 and "is not a ctxledger ledger" in result.output, result.output
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("command", _READERS)
@pytest.mark.parametrize("kind", UNREADABLE)
def test_a_row_no_read_can_decode_is_one_error_line_and_nothing_written(
    tmp_path: Path, kind: str, command: str
) -> None:
    code, output, seen = _run(tmp_path, UNREADABLE[kind], command)
    assert code != 0, output[-2000:]
    _one_error_line(output)
    conn = sqlite3.connect(tmp_path / "l.db")
    (seq,) = conn.execute(
        "SELECT seq FROM events WHERE payload IS NULL OR schema IS NULL"
        " OR typeof(payload) != 'blob' OR seq = 2 ORDER BY (seq = 2) LIMIT 1"
    ).fetchone()
    conn.close()
    assert f"seq {seq}" in output, output[-500:]
    assert seen["changed"] == [], (output[-500:], seen)


@pytest.mark.parametrize("kind", [k for k in UNREADABLE if k not in ("null-schema", *_STREAMLESS)])
def test_a_fold_of_payload_rows_names_the_row_no_read_can_decode(tmp_path: Path, kind: str) -> None:
    """``read_rows``, every store's fold (PostgreSQL's; SQLite reads its head columns)."""
    db = tmp_path / "l.db"
    UNREADABLE[kind](db)
    with SQLiteEventStore(str(db)) as store:
        projector = Projector()
        with pytest.raises(InvalidEvent, match=r"the event at seq \d+ cannot be decoded"):
            projector.apply_rows(store.read_rows(), projector._bodies_in(store))


@pytest.mark.parametrize("command", ["verify", "migrate-from", "show"])
@pytest.mark.parametrize("kind", UNVERIFIED)
def test_a_row_that_reads_but_does_not_verify_is_named_by_verify_and_migrate(
    tmp_path: Path, kind: str, command: str
) -> None:
    code, output, seen = _run(tmp_path, UNVERIFIED[kind], command)
    if command in ("verify", "migrate-from"):
        assert code == 1, output[-2000:]
        _one_error_line(output)
        assert "seq 2" in output
    assert seen["changed"] == [], (output[-500:], seen)


#: commands that append: an empty file becomes a new ledger (session 28's choice)
_APPENDERS = ("import", "migrate-to", "trajectories")  # (upgrade refuses one: session 39)


@pytest.mark.parametrize("command", [c for c in COMMANDS if c not in _APPENDERS])
def test_an_empty_file_is_read_as_an_empty_ledger_and_stays_empty(
    tmp_path: Path, command: str
) -> None:
    code, output, seen = _run(tmp_path, lambda p: p.write_bytes(b""), command)
    if command not in ("sessions", "verify", "migrate-from"):
        assert code != 0 and output.count("error:") == 1, output[-500:]
    assert seen["changed"] == [], (output[-500:], seen)


@pytest.mark.parametrize("command", _APPENDERS)
def test_a_command_that_appends_makes_an_empty_file_a_ledger(tmp_path: Path, command: str) -> None:
    code, output, _ = _run(tmp_path, lambda p: p.write_bytes(b""), command)
    assert code == 0, output[-2000:]
    conn = sqlite3.connect(tmp_path / "l.db")
    assert conn.execute("SELECT count(*) FROM _migrations").fetchone()[0] > 0
    conn.close()


@pytest.mark.parametrize("read_only", [False, True])
@pytest.mark.parametrize(
    "kind", [*FILES, "null-schema", "null-payload-started", "null-payload-switched", *_STREAMLESS]
)
def test_the_library_refuses_each_file_with_its_error_and_changes_nothing(
    tmp_path: Path, kind: str, read_only: bool
) -> None:
    db = tmp_path / "l.db"
    (FILES | UNREADABLE)[kind](db)
    before = _snapshot(tmp_path)
    with pytest.raises(CtxLedgerError):
        Ledger.open(db, read_only=read_only).close()
    if not read_only:
        with pytest.raises(CtxLedgerError):
            ContextService.open(db).ledger.close()
    # (a read-only open removes the -wal/-shm it made in one's own folder: session 35)
    assert _snapshot(tmp_path) == before


def test_a_close_that_fails_after_the_fold_failed_does_not_hide_the_folds_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "l.db"
    UNREADABLE["null-schema"](db)
    real = SQLiteEventStore.close

    def close(store: SQLiteEventStore) -> None:
        real(store)
        raise OSError("injected: the close failed")

    monkeypatch.setattr(SQLiteEventStore, "close", close)
    with pytest.raises(InvalidEvent, match="seq 2 cannot be decoded"):
        Ledger.open(db)


@pytest.mark.parametrize("kind", ["null-schema"])
def test_serve_refuses_a_hostile_ledger_on_one_line(tmp_path: Path, kind: str) -> None:
    db = tmp_path / "l.db"
    (FILES | UNREADABLE)[kind](db)
    before = _snapshot(tmp_path)
    code = "import sys; from ctxledger.cli.main import main; sys.argv[0] = 'ctxledger'; main()"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXLEDGER_")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parent.parent), *sys.path])
    proc = subprocess.run(
        [sys.executable, "-c", code, "serve", "--db", str(db), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode in (1, 2), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    _one_error_line(proc.stdout + proc.stderr)
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("kind", ["null-payload-started", "null-payload-switched"])
def test_a_null_payload_is_named_not_called_truncated(tmp_path: Path, kind: str) -> None:
    # review 2: the head-column read gives it as no bytes, which msgspec calls truncated
    UNREADABLE[kind](tmp_path / "l.db")
    with pytest.raises(InvalidEvent, match=r"payload is empty \(NULL or no bytes\)"):
        Ledger.open(tmp_path / "l.db")


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("null-stream", "is NULL"),
        ("stream-text", "'x' names no stream"),
        ("stream-unknown", "99 names no stream"),
    ],
)
def test_a_message_row_no_stream_owns_is_named_not_dropped(
    tmp_path: Path, kind: str, said: str
) -> None:
    """The fold skipped it: ``show`` printed the session without that message."""
    UNREADABLE[kind](tmp_path / "l.db")
    line = f"the event at seq 2 cannot be decoded (the row's stream_id {said}); run verify() on the log"
    with pytest.raises(InvalidEvent) as caught:
        Ledger.open(tmp_path / "l.db", read_only=True)
    assert str(caught.value) == line
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "l.db"), "show", SID])
    assert (result.exit_code, result.output) == (2, f"error: {line}\n")  # (as a NULL payload)


#: a streams row edited: every message row of it would have been skipped
_STREAM_ROWS = {
    "whose name is NULL": "UPDATE streams SET stream = NULL",
    "'T' is not its event's session": "UPDATE streams SET stream = 'T'",
}


@pytest.mark.parametrize("command", ["show", "export", "recall", "pin"])
@pytest.mark.parametrize("said", _STREAM_ROWS)
def test_a_streams_row_edited_is_named_by_every_read_not_an_empty_session(
    tmp_path: Path, said: str, command: str
) -> None:
    make = _damaged_row(
        "PRAGMA writable_schema = ON",
        "UPDATE sqlite_master SET sql = replace(sql, 'NOT NULL', '') WHERE name = 'streams'",
    )
    code, output, seen = _run(tmp_path, lambda p: (make(p), _sql(p, _STREAM_ROWS[said])), command)
    assert code == 2 and "error: the event at seq 2 cannot be decoded" in output, output
    assert said in output
    _one_error_line(output)
    assert seen["changed"] == [], (output[-500:], seen)


@pytest.mark.parametrize(
    ("version", "said"), [("NULL", "seq 3 has version 3"), ("2.5", "seq 2 has version 2.5")]
)
def test_a_version_out_of_place_is_named_by_a_read_by_stream_not_skipped(
    tmp_path: Path, version: str, said: str
) -> None:
    """A read by version left a NULL version's row out (a read of the log has it)."""
    db = tmp_path / "l.db"
    _null("version")(db)
    _sql(db, f"UPDATE events SET version = {version} WHERE seq = 2")
    with SQLiteEventStore(str(db), read_only=True) as store:
        assert [r.seq for r in store.read_all()] == [1, 2, 3]
        with pytest.raises(InvalidEvent, match=rf"no event at version 2 \(the event at {said}\)"):
            list(store.read_stream(SID))
    result = CliRunner().invoke(cli, ["--db", str(db), "audit", SID])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    _one_error_line(result.output)


def test_a_stream_read_under_a_renamed_streams_row_is_named(tmp_path: Path) -> None:
    """``read_stream('T')`` returned session SID's events as stream T's (session 36)."""
    db = tmp_path / "l.db"
    _ledger(db)
    _sql(db, "UPDATE streams SET stream = 'T'")
    with SQLiteEventStore(str(db), read_only=True) as store:
        for start in (1, 2):
            with pytest.raises(
                InvalidEvent, match=f"its event at seq {start} is of session '{SID}'"
            ):
                list(store.read_stream("T", start))


def test_an_event_row_moved_into_another_stream_is_named_where_it_reads(
    tmp_path: Path,
) -> None:
    """Only a page's first event was compared with the stream read (session 36): a row
    moved to the end of another stream read as that session's, without a word."""
    db = tmp_path / "l.db"
    with SQLiteEventStore(str(db)) as store:
        for sid in ("ses_a", "ses_b"):
            store.append(sid, [message(sid, f"m{i}") for i in range(3)], expected_version=None)
    _sql(db, "UPDATE events SET stream_id = 1, version = 4 WHERE seq = 6")
    with SQLiteEventStore(str(db), read_only=True) as store:
        for start in (1, 4):
            with pytest.raises(InvalidEvent, match="its event at seq 6 is of session 'ses_b'"):
                list(store.read_stream("ses_a", start))


def test_a_stored_id_under_a_null_stream_name_is_not_a_resend_to_stream_none(
    tmp_path: Path,
) -> None:
    """A NULL stream name was compared as its str() (session 36's shared re-send rule):
    an id stored there, appended to a stream named "None", was taken for a re-send and
    nothing was written. Raw values compare; NULL is shown ``NULL``."""
    db = tmp_path / "l.db"
    with SQLiteEventStore(str(db)) as store:
        store.append("s1", [message("s1", "a")], expected_version=None)
        stored = next(iter(store.read_all())).event.event_id
    _sql(
        db,
        "PRAGMA writable_schema = ON",
        "UPDATE sqlite_master SET sql = replace(sql, 'NOT NULL', '') WHERE name = 'streams'",
    )
    _sql(db, "UPDATE streams SET stream = NULL")
    again = message("None", "a", event_id=stored)
    with (
        SQLiteEventStore(str(db)) as store,
        pytest.raises(DuplicateEventError, match="stored in stream NULL, not 'None'"),
    ):
        store.append("None", [again], expected_version=None)


@pytest.mark.parametrize("version", ["0", "-1", "NULL", "'x'"])
def test_a_streams_last_version_edited_is_named_by_a_read_by_stream(
    tmp_path: Path, version: str
) -> None:
    """The stream's *last* row edited (session 36): below 1 or NULL it sorts first, text
    sorts last, where a read by version never looks, and no later version showed a gap:
    ``read_stream`` returned the stream without its last event, without a word."""
    db = tmp_path / "l.db"
    _null("version", where="seq = 0")(db)  # (the NOT NULL dropped, no row changed)
    _sql(db, f"UPDATE events SET version = {version} WHERE seq = 3")
    shown = {"NULL": "NULL", "'x'": "'x'"}.get(version, version)
    refused = f"the event at seq 3 has version {shown}, not one from 1 up"
    with SQLiteEventStore(str(db), read_only=True) as store:
        assert [r.seq for r in store.read_all()] == [1, 2, 3]
        for start, end in [(1, None), (2, None), (4, None), (1, 2)]:
            with pytest.raises(InvalidEvent, match=re.escape(refused)):
                list(store.read_stream(SID, start, end))
    result = CliRunner().invoke(cli, ["--db", str(db), "audit", SID])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    _one_error_line(result.output)


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ("99 WHERE seq = 2", "seq 2 .* version 99 is out of place: .* version 3 at seq 3"),
        ("NULL WHERE seq = 2", "seq 3 .* version 3 is out of place: .* version 1 at seq 1"),
        ("2.5 WHERE seq = 2", "seq 3 .* version 3 is out of place: .* version 2.5 at seq 2"),
    ],
)
def test_an_append_is_not_built_on_a_version_moved_out_of_place(
    tmp_path: Path, edit: str, said: str
) -> None:
    """A version moved (99 above the stream's top, NULL, 2.5): the next append wrote
    version 100 on top of the edit, or 3 again after a NULL, without a word. Now the
    fold names the row, through the library and the CLI; nothing written. (A stream's
    last version lowered is not seen: see the note.)"""
    db = tmp_path / "l.db"
    _null("version", where="seq = 0")(db)  # (the NOT NULL dropped, no row changed)
    _sql(db, f"UPDATE events SET version = {edit}")
    before = db.read_bytes()
    refused = rf"^the event at {said}\); run verify\(\) on the log$"
    with pytest.raises(InvalidEvent, match=refused), Ledger.open(str(db)) as ledger:
        ledger.append_messages(SID, [{"role": "user", "content": "after the edit"}])
    result = CliRunner().invoke(cli, ["--db", str(db), "pin", SID, "1"])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    _one_error_line(result.output)
    assert re.search(f"^error: the event at {said}", result.output, re.M), result.output
    assert db.read_bytes() == before


def test_the_langchain_ids_of_a_session_whose_stream_reads_empty_are_damage_not_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The final read of session 36: the LangChain middleware's read of a generation's
    recorded ids was the one chain read left on ``read_stream``; a session the ledger
    knows whose stream reads empty (PostgreSQL's renamed streams row) gave no ids, so the
    whole history would have been recorded again. It is named, as by every other read."""
    from ctxledger.integrations.langchain_keys import recorded_ids

    service = ContextService(deterministic_ledger(tmp_path / "l.db"))
    sid = service.ledger.start_session(model="m", context_length=16_000)
    monkeypatch.setattr(service.ledger.store, "read_stream", lambda *a, **k: iter(()))
    with pytest.raises(InvalidEvent, match=f"the session '{sid}' has events but no stream"):
        recorded_ids(service, sid)
