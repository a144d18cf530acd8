"""Hermes state.db session ids are taken as they are: a NULL parent is no parent (not the
session named ``'None'``), and ids that would merge two sessions are refused.

Before, ``str(NULL)`` made every root session a child of a session whose id is the
string ``None`` (and the import failed with a 'cycle'); two rows with one id, or ``5``
and ``'5'``, were imported as one session with the other's messages silently merged or
dropped; an in-place compaction's segment key ``s#1`` could be another session's id.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ctxledger import Ledger
from ctxledger.errors import ImportFormatError, InvalidInput
from ctxledger.importers.hermes_db import parse_hermes_db
from ctxledger.importers.model import ImportedSession
from ctxledger.ledger.importing import import_sessions

SCHEMA = (
    "CREATE TABLE sessions (id, parent_session_id TEXT, end_reason TEXT);"
    "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id, role TEXT, content TEXT,"
    " active INTEGER NOT NULL DEFAULT 1, compacted INTEGER NOT NULL DEFAULT 0);"
)


def make_db(path: Path, sessions: list[tuple[Any, ...]], messages: list[tuple[Any, ...]]) -> Path:
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    db.executemany("INSERT INTO sessions VALUES (?,?,?)", sessions)
    db.executemany(
        "INSERT INTO messages (session_id, role, content, active, compacted) VALUES (?,?,?,?,?)",
        [m if len(m) == 5 else (*m, 1, 0) for m in messages],
    )
    db.commit()
    db.close()
    return path


def contents(s: ImportedSession) -> list[str]:
    return [str(m["content"]) for m in s.messages]


def test_a_session_named_none_is_an_ordinary_session(tmp_path: Path) -> None:
    path = make_db(
        tmp_path / "state.db",
        [("None", None, "compression"), ("a", None, None), ("b", "None", None)],
        [("None", "user", "n"), ("a", "user", "hi"), ("b", "user", "continued")],
    )
    by_key = {s.key: s for s in parse_hermes_db(path)}
    assert by_key["None"].parent_key is None and by_key["a"].parent_key is None
    assert by_key["b"].parent_key == "None"  # a real link to the session named 'None'
    ledger = Ledger.open(":memory:")
    assert len(import_sessions(ledger, list(by_key.values()), context_length=16_000)) == 3
    assert [s.key for s in parse_hermes_db(path, session="a")] == ["a"]


@pytest.mark.parametrize(
    ("sessions", "fragment"),
    [
        ([("x", None, None), ("x", None, None)], "two rows of the sessions table have the id 'x'"),
        ([(5, None, None), ("5", None, None)], "have the id '5'"),
        ([(None, None, None), ("None", None, None)], "a row of the sessions table has no id"),
        ([("", None, None)], "has no id"),
    ],
)
def test_ids_that_would_merge_sessions_are_refused(
    tmp_path: Path, sessions: list[tuple[Any, ...]], fragment: str
) -> None:
    path = make_db(tmp_path / "state.db", sessions, [("x", "user", "hi"), ("5", "user", "hi")])
    with pytest.raises(ImportFormatError, match=fragment):
        parse_hermes_db(path)
    with pytest.raises(ImportFormatError, match=fragment):
        parse_hermes_db(path, session=str(sessions[-1][0]))


def test_a_segment_key_never_takes_another_sessions_id(tmp_path: Path) -> None:
    rows = [("s", "user", "task", 0, 1), ("s", "assistant", "old", 0, 1)]
    rows += [("s", "user", "task", 1, 0), ("s", "user", "summary", 1, 0)]
    rows += [("s#1", "user", "a real session named s#1")]
    path = make_db(tmp_path / "state.db", [("s", None, None), ("s#1", None, None)], rows)
    sessions = parse_hermes_db(path)
    assert len({s.key for s in sessions}) == 3
    by_key = {s.key: s for s in sessions}
    assert contents(by_key["s#1"]) == ["a real session named s#1"]
    assert contents(by_key["s#1'"]) == ["task", "old"] and by_key["s"].parent_key == "s#1'"
    ledger = Ledger.open(":memory:")
    assert len(import_sessions(ledger, sessions, context_length=16_000)) == 3


def test_import_refuses_two_sessions_under_one_key_and_appends_nothing() -> None:
    one = ImportedSession(
        key="k", source_format="openai", messages=[{"role": "user", "content": "a"}]
    )
    two = ImportedSession(
        key="k", source_format="openai", messages=[{"role": "user", "content": "b"}]
    )
    ledger = Ledger.open(":memory:")
    with pytest.raises(InvalidInput, match="two imported sessions have the key 'k'"):
        import_sessions(ledger, [one, two], context_length=16_000)
    assert ledger.store.last_seq() == 0
