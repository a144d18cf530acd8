"""Hermes Agent's state.db, opened read-only."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from helpers.import_fixtures import HERMES_SCHEMA, assert_valid, make_hermes_db

from ctxledger.errors import ImportFormatError
from ctxledger.importers.common import synth_call_id
from ctxledger.importers.hermes_db import parse_hermes_db
from ctxledger.usage import normalize_usage


def test_hermes_db_imports_compression_chains_and_children(tmp_path: Path) -> None:
    path = make_hermes_db(tmp_path / "state.db")
    sessions = parse_hermes_db(path)
    assert_valid(sessions)
    s1, s2, s3 = sessions
    assert (s1.key, s2.key, s3.key) == ("s1", "s2", "s3")
    assert s1.end_reason == "compression" and s2.parent_key == "s1" and s3.parent_key == "s2"
    assert (
        s1.system_prompt == "You are Hermes."
        and s1.context_length == 64000
        and s1.title == "Fix CI"
    )
    assert (
        s1.messages[1]["reasoning_content"] == "check logs"
        and s1.messages[1]["finish_reason"] == "tool_calls"
    )
    assert s1.messages[2] == {
        "role": "tool",
        "content": "3 failed",
        "tool_call_id": "c1",
        "name": "terminal",
    }
    (usage,) = s1.usages
    assert usage.aggregate and usage.after_index == 3
    assert normalize_usage(usage.raw, usage.shape)[1].prompt == 1060
    assert "undo that" not in json.dumps(s2.messages)  # an inactive (rewound) row
    assert not s3.usages
    chain = parse_hermes_db(path, session="s2")
    assert [s.key for s in chain] == ["s1", "s2"]


def test_hermes_db_in_place_compaction_becomes_a_chain(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = sqlite3.connect(path)
    db.executescript(HERMES_SCHEMA)
    db.execute("INSERT INTO sessions (id, source, started_at) VALUES ('s', 'cli', 1)")
    rows = [
        ("user", "task", 1, 0),
        ("assistant", "step 1", 1, 0),
        ("assistant", "step 2", 1, 0),
        ("user", "task", 1, 1),
        ("user", "summary of steps", 1, 1),
        ("assistant", "step 3", 1, 1),
    ]
    db.executemany(
        "INSERT INTO messages (session_id, role, content, timestamp, compacted, active) VALUES ('s',?,?,?,?,?)",
        [(r, c, t, 0 if a else 1, a) for r, c, t, a in rows],
    )
    db.commit()
    db.close()
    old, new = parse_hermes_db(path)
    assert old.key == "s#1" and old.end_reason == "compression" and new.parent_key == "s#1"
    assert [m["content"] for m in old.messages] == ["task", "step 1", "step 2"]
    assert [m["content"] for m in new.messages] == ["task", "summary of steps", "step 3"]


def test_hermes_db_tolerates_missing_optional_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE sessions (id TEXT); CREATE TABLE messages (session_id TEXT, role TEXT, content TEXT);"
        "INSERT INTO sessions VALUES ('x'); INSERT INTO messages VALUES ('x', 'user', 'hi');"
    )
    db.commit()
    db.close()
    (s,) = parse_hermes_db(path)
    assert s.messages == [{"role": "user", "content": "hi"}]
    assert any("messages.tool_calls" in w for w in s.warnings)
    assert any("sessions.parent_session_id" in w for w in s.warnings)
    reported = {w.split()[3] for w in s.warnings if w.startswith("state.db has no ")}
    assert reported == {
        "messages.tool_call_id",
        "messages.tool_calls",
        "messages.tool_name",
        "messages.reasoning_content",
        "messages.active",
        "messages.compacted",
        "sessions.model",
        "sessions.system_prompt",
        "sessions.parent_session_id",
        "sessions.end_reason",
        "sessions.input_tokens",
        "sessions.output_tokens",
    }


def test_hermes_db_tool_calls_are_normalized_like_openai_ones(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = sqlite3.connect(path)
    db.executescript(HERMES_SCHEMA)
    db.execute("INSERT INTO sessions (id, source, started_at) VALUES ('s', 'cli', 1)")
    calls = [
        {"function": {"name": "f", "arguments": {"x": 1}}},
        {"id": "c2", "function": {"name": "g"}},
    ]
    rows = [
        ("user", "go", None, None),
        ("assistant", None, json.dumps(calls), None),
        ("tool", "1", None, synth_call_id("s", 1, 0)),
        ("tool", "2", None, "c2"),
    ]
    db.executemany(
        "INSERT INTO messages (session_id, role, content, tool_calls, tool_call_id, timestamp)"
        " VALUES ('s',?,?,?,?,1)",
        rows,
    )
    db.commit()
    db.close()
    (s,) = parse_hermes_db(path)
    first, second = s.messages[1]["tool_calls"]
    assert first == {
        "function": {"name": "f", "arguments": '{"x":1}'},
        "id": synth_call_id("s", 1, 0),
        "type": "function",
    }
    assert second["function"]["arguments"] == "{}" and second["type"] == "function"
    assert {
        "tool calls without an id got a synthesized id",
        "tool-call arguments given as JSON values were encoded as strings",
        "tool calls without arguments got empty arguments ('{}')",
    } <= set(s.warnings)


def test_hermes_db_is_opened_read_only(tmp_path: Path) -> None:
    path = make_hermes_db(tmp_path / "state.db")
    before = path.read_bytes()
    parse_hermes_db(path)
    assert path.read_bytes() == before
    assert not (tmp_path / "state.db-wal").exists()


@pytest.mark.parametrize(
    ("calls", "says"),
    [
        (
            '[{"id": "c", "function": {"name": "f", "arguments": "{}"}, "score": NaN}]',
            "tool_calls is not valid JSON: tool_calls[0].score is nan: JSON has no NaN",
        ),
        (
            '[{"id": "c", "function": {"name": "f", "arguments": {"x": 1e999}}}]',
            "tool_calls[0].function.arguments.x is inf",
        ),
        (
            '[{"id": "c", "function": {"name": "f", "arguments": {"x": -Infinity}}}]',
            "tool_calls[0].function.arguments.x is -inf",
        ),
    ],
)
def test_hermes_db_json_with_nan_is_refused_where_it_is(
    tmp_path: Path, calls: str, says: str
) -> None:
    # json.loads reads NaN, Infinity and 1e999 (as inf): the call was imported with null
    # in their place (the arguments as the string '{"x":null}'), silently
    path = tmp_path / "state.db"
    db = sqlite3.connect(path)
    db.executescript(HERMES_SCHEMA)
    db.execute(
        "INSERT INTO sessions (id, source, started_at, model_config) VALUES "
        """('s', 'cli', 1, '{"context_length": 64000, "temperature": NaN}')"""
    )
    db.executemany(
        "INSERT INTO messages (id, session_id, role, content, tool_calls, tool_call_id, timestamp)"
        " VALUES (?, 's', ?, ?, ?, ?, 1)",
        [(1, "user", "go", None, None), (2, "assistant", None, calls, None)],
    )
    db.commit()
    db.close()
    with pytest.raises(ImportFormatError) as info:
        parse_hermes_db(path)
    assert "session 's', messages row 2: " in str(info.value) and says in str(info.value)
    # a NaN in model_config, of which only the window is read, is no reason to refuse
    db = sqlite3.connect(path)
    db.execute("UPDATE messages SET tool_calls = NULL, content = 'ok' WHERE id = 2")
    db.commit()
    db.close()
    (session,) = parse_hermes_db(path)
    assert session.context_length == 64000


def _branched_and_rotated(path: Path) -> Path:
    """A -> B by rotation; B branched to C (/branch), resumed and rotated to D (so B
    ends ``compression`` though C is its child); D starts a sub-agent E, then rotates to
    F."""
    db = sqlite3.connect(path)
    db.executescript(HERMES_SCHEMA)
    sessions = [  # id, source, model_config, parent, started_at, end_reason
        ("A", "cli", None, None, 1.0, "compression"),
        ("B", "cli", None, "A", 2.0, "compression"),
        ("C", "cli", '{"_branched_from": "B"}', "B", 3.0, None),
        ("D", "cli", None, "B", 4.0, "compression"),
        ("E", "cli", '{"_delegate_from": "D"}', "D", 5.0, None),
        ("F", "cli", None, "D", 6.0, None),
    ]
    db.executemany(
        "INSERT INTO sessions (id, source, model_config, parent_session_id, started_at,"
        " end_reason) VALUES (?,?,?,?,?,?)",
        sessions,
    )
    db.executemany(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?,?,?,?)",
        [(s[0], "user", f"in {s[0]}", s[4] + 0.1) for s in sessions],
    )
    db.commit()
    db.close()
    return path


def test_hermes_db_chain_skips_branches_and_sub_agents_of_a_compacted_session(
    tmp_path: Path,
) -> None:
    """The chain holding each session is Hermes's: A, B, D, F (found by
    tests/test_parity_lineage.py: the branch C was taken for B's continuation, D and F
    left out)."""
    path = _branched_and_rotated(tmp_path / "state.db")
    chains = {sid: [s.key for s in parse_hermes_db(path, session=sid)] for sid in "ABCDEF"}
    assert chains == {
        **{sid: ["A", "B", "D", "F"] for sid in "ABDF"},
        "C": ["C"],
        "E": ["E"],
    }


def test_hermes_db_import_keeps_a_branch_of_a_compacted_session_a_branch(tmp_path: Path) -> None:
    """The whole store imported: C (a branch of B) and E (a sub-agent of D) are
    branches in the ledger, not continuations (their parents ended `compression`
    later); D and F continue B and D."""
    from ctxledger import Ledger
    from ctxledger.events import SessionStarted
    from ctxledger.ledger import import_sessions

    path = _branched_and_rotated(tmp_path / "state.db")
    ledger = Ledger.open(tmp_path / "ledger.db")
    try:
        import_sessions(ledger, parse_hermes_db(path))
        started = {
            r.event.source.split(":")[-1]: r.event.reason
            for r in ledger.store.read_all()
            if isinstance(r.event, SessionStarted)
        }
    finally:
        ledger.close()
    assert started == {
        "A": "import",
        "B": "compression",
        "C": "branch",
        "D": "compression",
        "E": "branch",
        "F": "compression",
    }


def test_hermes_db_a_branch_compacted_in_place_continues_its_own_first_segment(
    tmp_path: Path,
) -> None:
    """C is a marked branch of P (P ended `compression` later, P2 its continuation) and
    was compacted in place: its first segment is a branch of P, its later one continues
    that segment (before, without ``bool(out)``: both recorded as branches)."""
    from ctxledger import Ledger
    from ctxledger.events import SessionStarted
    from ctxledger.ledger import import_sessions

    path = tmp_path / "state.db"
    db = sqlite3.connect(path)
    db.executescript(HERMES_SCHEMA)
    db.executemany(
        "INSERT INTO sessions (id, source, model_config, parent_session_id, started_at, "
        "end_reason) VALUES (?, ?, ?, ?, ?, ?)",
        [
            ("P", "cli", None, None, 1.0, "compression"),
            ("C", "cli", '{"_branched_from": "P"}', "P", 2.0, None),
            ("P2", "cli", None, "P", 3.0, None),
        ],
    )
    db.executemany(
        "INSERT INTO messages (session_id, role, content, timestamp, compacted, active) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [
            ("P", "user", "p", 1.1, 0, 1),
            ("P2", "user", "[CONTEXT COMPACTION] s", 3.1, 0, 1),
            ("C", "user", "task", 2.1, 1, 0),
            ("C", "assistant", "step 1", 2.2, 1, 0),
            ("C", "user", "task", 2.3, 0, 1),
            ("C", "user", "[CONTEXT COMPACTION] summary", 2.4, 0, 1),
            ("C", "assistant", "step 2", 2.5, 0, 1),
        ],
    )
    db.commit()
    db.close()
    sessions = parse_hermes_db(path)
    assert [(s.key, s.continues) for s in sessions if s.key.startswith("C")] == [
        ("C#1", False),
        ("C", True),
    ]
    ledger = Ledger.open(tmp_path / "ledger.db")
    try:
        import_sessions(ledger, sessions)
        started = {
            r.event.source.split(":")[-1]: r.event.reason
            for r in ledger.store.read_all()
            if isinstance(r.event, SessionStarted)
        }
    finally:
        ledger.close()
    assert started == {"P": "import", "C#1": "branch", "C": "compression", "P2": "compression"}
