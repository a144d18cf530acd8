"""`ctxledger import` of bytes the ledger already imported is refused (session 40).

It made a second copy of every session without a word. The input's SHA-256 is
recorded on each imported session's start (``SessionStarted.config``,
``importing.IMPORT_DIGEST``); a second import of the same bytes names the earlier
session and appends nothing; ``--again`` imports it once more. Also: the warnings an
import logs (repaired tool-call ids) carry ``warning:`` as the CLI's own do.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import click.testing
import pytest
from click.testing import CliRunner

from ctxledger.cli.main import cli
from ctxledger.events import SessionStarted
from ctxledger.importers import detect
from ctxledger.importers.detect import load_file
from ctxledger.importers.model import ImportedSession
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.importing import IMPORT_DIGEST, earlier_import, import_sessions

_LINES = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello"},
]


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run(db: Path, *args: str, input: str | bytes | None = None) -> click.testing.Result:
    return CliRunner().invoke(cli, ["--db", str(db), *args], input=input)


def _seq(db: Path) -> int:
    with Ledger.open(db) as ledger:
        return ledger.store.last_seq()


def test_a_second_import_of_the_same_file_is_refused_naming_the_first(tmp_path: Path) -> None:
    src, db = _write(tmp_path / "a.jsonl", _LINES), tmp_path / "l.db"
    first = run(db, "import", str(src))
    assert first.exit_code == 0, first.output
    sid = first.stdout.strip().splitlines()[-1]
    before = _seq(db)
    again = run(db, "import", str(src))
    assert again.exit_code == 2, again.output
    err = again.output.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1, err
    assert "imported before" in err and sid in err and "--again" in err, err
    assert _seq(db) == before  # nothing appended
    # the same bytes from stdin, or under another name, are the same input
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(src.read_bytes())
    assert run(db, "import", str(copy)).exit_code == 2
    assert run(db, "import", "-", input=src.read_text()).exit_code == 2
    assert _seq(db) == before


def test_again_imports_it_once_more_and_other_bytes_are_imported(tmp_path: Path) -> None:
    src, db = _write(tmp_path / "a.jsonl", _LINES), tmp_path / "l.db"
    assert run(db, "import", str(src)).exit_code == 0
    result = run(db, "import", "--again", str(src))
    assert result.exit_code == 0, result.output
    other = _write(tmp_path / "a2.jsonl", [*_LINES, {"role": "user", "content": "more"}])
    assert run(db, "import", str(other)).exit_code == 0
    with Ledger.open(db) as ledger:
        assert len(ledger.sessions()) == 3


def test_the_digest_of_the_bytes_is_recorded_on_each_imported_session(tmp_path: Path) -> None:
    src = _write(tmp_path / "a.jsonl", _LINES)
    sessions, digest = load_file(src)
    assert digest == hashlib.sha256(src.read_bytes()).hexdigest()
    with Ledger.open(tmp_path / "l.db") as ledger:
        assert earlier_import(ledger, digest) is None
        (sid,) = import_sessions(ledger, sessions, digest=digest)
        starts = [
            r.event for r in ledger.store.read_stream(sid) if isinstance(r.event, SessionStarted)
        ]
        assert starts[0].config[IMPORT_DIGEST] == digest
        found = earlier_import(ledger, digest)
        assert found is not None and found.session_id == sid


def test_repaired_tool_call_ids_are_printed_as_warnings(tmp_path: Path) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    rows: list[dict[str, object]] = [{"role": "user", "content": "hi"}]
    for n in range(2):
        rows.append({"role": "assistant", "content": None, "tool_calls": [call]})
        rows.append({"role": "tool", "tool_call_id": "c1", "content": f"r{n}"})
    src = _write(tmp_path / "reuse.jsonl", rows)
    result = run(tmp_path / "l.db", "import", str(src))
    assert result.exit_code == 0, result.output
    lines = result.stderr.strip().splitlines()
    repaired = [line for line in lines if "became" in line]
    assert len(repaired) == 2, lines  # the call and its result
    assert all(line.startswith("warning: session ") for line in repaired), lines
    assert lines[-1].startswith("imported ")


def test_a_live_hermes_database_with_new_sessions_in_its_wal_is_imported(
    tmp_path: Path,
) -> None:
    """Hermes keeps its state.db in WAL mode: a session added since the first import may
    sit in ``state.db-wal`` only, the main file's bytes unchanged. It was refused as "the
    same bytes" (s40 review, MEDIUM-4); the digest covers the -wal file too."""
    import sqlite3

    db, state = tmp_path / "l.db", tmp_path / "state.db"
    hermes = sqlite3.connect(state, isolation_level=None)
    try:
        hermes.execute("PRAGMA journal_mode=WAL")
        hermes.execute("PRAGMA wal_autocheckpoint=0")
        hermes.executescript(
            "CREATE TABLE sessions (id TEXT);"
            "CREATE TABLE messages (session_id TEXT, role TEXT, content TEXT);"
            "INSERT INTO sessions VALUES ('x'); INSERT INTO messages VALUES ('x', 'user', 'hi');"
        )
        hermes.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert run(db, "import", "--format", "hermes_db", str(state)).exit_code == 0
        main_file = state.read_bytes()
        hermes.execute("INSERT INTO sessions VALUES ('y')")
        hermes.execute("INSERT INTO messages VALUES ('y', 'user', 'a new session')")
        assert state.read_bytes() == main_file  # the new session is in the -wal only
        second = run(db, "import", "--format", "hermes_db", str(state))
        assert second.exit_code == 0, second.output
        # the same database again (its -wal unchanged) is refused
        assert run(db, "import", "--format", "hermes_db", str(state)).exit_code == 2
    finally:
        hermes.close()


def test_stdin_is_told_by_its_bytes_a_crlf_file_and_a_bom(tmp_path: Path) -> None:
    """The digest of stdin was taken over the decoded text (CRLF made LF, a BOM dropped),
    so the same CRLF bytes were imported twice, and a BOM file through stdin made a
    different file without the BOM "the same bytes" (s40 review, LOW-5)."""
    db = tmp_path / "l.db"
    lines = "".join(json.dumps(r) + "\r\n" for r in _LINES).encode()
    crlf = tmp_path / "crlf.jsonl"
    crlf.write_bytes(lines)
    assert run(db, "import", str(crlf)).exit_code == 0
    assert run(db, "import", "-", input=crlf.read_bytes()).exit_code == 2  # the same bytes
    bom, plain = tmp_path / "bom.jsonl", tmp_path / "plain.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(_LINES[0]).encode() + b"\n")
    plain.write_bytes(bom.read_bytes()[3:])
    assert run(db, "import", "-", input=bom.read_bytes()).exit_code == 0
    assert run(db, "import", str(plain)).exit_code == 0  # other bytes: imported
    assert run(db, "import", str(bom)).exit_code == 2  # stdin's bytes, from a file


def test_a_session_hermes_writes_while_the_database_is_read_is_imported_next_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The digest was taken after the read: a session Hermes added in between was in the
    digest but not imported, and the next import was refused as "the same bytes" (s40
    final review, MEDIUM-2). Taken before the read, the next import brings it in."""
    import sqlite3

    db, state = tmp_path / "l.db", tmp_path / "state.db"
    with sqlite3.connect(state) as hermes:
        hermes.executescript(
            "CREATE TABLE sessions (id TEXT);"
            "CREATE TABLE messages (session_id TEXT, role TEXT, content TEXT);"
            "INSERT INTO sessions VALUES ('x'); INSERT INTO messages VALUES ('x', 'user', 'hi');"
        )
    hermes.close()
    real = detect.IMPORTERS["hermes_db"]

    def hermes_writes_meanwhile(name: str) -> list[ImportedSession]:
        read = real(name)
        with sqlite3.connect(name) as writer:
            writer.execute("INSERT INTO sessions VALUES ('y')")
            writer.execute("INSERT INTO messages VALUES ('y', 'user', 'new')")
        writer.close()
        return read

    monkeypatch.setitem(detect.IMPORTERS, "hermes_db", hermes_writes_meanwhile)
    assert run(db, "import", "--format", "hermes_db", str(state)).exit_code == 0
    monkeypatch.setitem(detect.IMPORTERS, "hermes_db", real)
    second = run(db, "import", "--format", "hermes_db", str(state))
    assert second.exit_code == 0, second.output
    assert "into 2 session(s)" in second.stderr, second.output  # ('x' again, and 'y')
    assert run(db, "import", "--format", "hermes_db", str(state)).exit_code == 2


def test_a_repeat_is_refused_before_its_bytes_are_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The digest is known once the bytes are read: a repeat was refused only after the
    whole input was parsed and validated (s40 final review, LOW-6: ~15 s for 256 MiB).
    Also: an input that fails to parse makes no ledger where there was none."""
    src, db = _write(tmp_path / "a.jsonl", _LINES), tmp_path / "l.db"
    real, parsed = detect.IMPORTERS["openai"], []

    def counted(text: str, path: str | None = None) -> list[ImportedSession]:
        parsed.append(path)
        return real(text, path=path)

    monkeypatch.setitem(detect.IMPORTERS, "openai", counted)
    assert run(db, "import", "--format", "openai", str(src)).exit_code == 0
    assert len(parsed) == 1
    assert run(db, "import", "--format", "openai", str(src)).exit_code == 2
    assert run(db, "import", "--format", "openai", "-", input=src.read_bytes()).exit_code == 2
    assert len(parsed) == 1  # (neither repeat was parsed)
    assert run(db, "import", "--again", "--format", "openai", str(src)).exit_code == 0
    assert len(parsed) == 2
    bad, fresh = _write(tmp_path / "bad.jsonl", [{"role": 7}]), tmp_path / "fresh.db"
    assert run(fresh, "import", "--format", "openai", str(bad)).exit_code != 0
    assert not fresh.exists()
