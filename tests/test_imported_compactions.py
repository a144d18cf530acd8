"""Imported chains that contain the source agent's own compactions (issue 17, point 2).

Hermes ``state.db``, Claude Code and Codex logs are generated here from the same
debugging session, each with two compactions made by the "source agent" (a summary
that keeps only some facts). Imported, each compaction is recorded as a compaction
(``SummaryGenerated(imported=True)`` + a switch carrying the kept messages by id),
so the audit measures what the source agent lost, attributes every loss to the
compaction that made it, and ``trace`` agrees.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers.debug_sessions import DebugSession, ground_truth
from helpers.ledger_helpers import deterministic_ledger

from ctxledger.analysis.audit import audit_chain, trace
from ctxledger.analysis.compactions import chain_compactions
from ctxledger.analysis.replay import verify_compactions
from ctxledger.cli.main import cli
from ctxledger.importers.detect import load
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.importing import import_sessions
from ctxledger.messages import JSON, content_text

SEGMENTS = 3  # two compactions
TURNS = 6  # debugging turns per segment


def _segments(seed: int) -> tuple[JSON, list[list[JSON]]]:
    synth = DebugSession(seed)
    task = synth.task()
    return task, [[m for _ in range(TURNS) for m in synth.turn()] for _ in range(SEGMENTS)]


def _summary(turns: list[JSON], k: int) -> str:
    """The source agent's summary: the commands of every other turn (the rest is lost)."""
    commands = [
        json.loads(m["tool_calls"][0]["function"]["arguments"])["command"]
        for m in turns
        if m.get("tool_calls")
    ]
    kept = "\n".join(f"- ran `{c}`" for c in commands[::2])
    return f"Summary {k}: working on the bug.\n{kept}"


# --------------------------------------------------------------------------- Claude Code


def _cc_message(m: JSON) -> JSON:
    if m["role"] == "assistant":
        call = m["tool_calls"][0]
        return {
            "role": "assistant",
            "model": "claude-x",
            "content": [
                {"type": "text", "text": m["content"]},
                {
                    "type": "tool_use",
                    "id": call["id"],
                    "name": "Bash",
                    "input": json.loads(call["function"]["arguments"]),
                },
            ],
        }
    if m["role"] == "tool":
        return {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}
            ],
        }
    return {"role": m["role"], "content": m["content"]}


def claude_code_log(seed: int, path: Path) -> Path:
    task, segments = _segments(seed)
    lines: list[JSON] = []
    parent: str | None = None
    n = 0

    def add(kind: str, message: JSON | None = None, **extra: Any) -> None:
        nonlocal parent, n
        n += 1
        uuid = f"u{seed}-{n}"
        rec: JSON = {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": f"cc{seed}"}
        if message is not None:
            rec["message"] = message
        if kind == "assistant":
            rec["message"]["id"] = f"m{n}"
        lines.append({**rec, **extra})
        parent = uuid

    add("user", {"role": "user", "content": task["content"]})
    for k, turns in enumerate(segments):
        if k:
            last = parent
            parent = None
            add("system", subtype="compact_boundary", logicalParentUuid=last, content="compacted")
            summary = _summary(segments[k - 1], k)
            add("user", {"role": "user", "content": summary}, isCompactSummary=True)
        for m in turns:
            add("assistant" if m["role"] == "assistant" else "user", _cc_message(m))
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


# --------------------------------------------------------------------------- Codex


def _cx_items(m: JSON) -> list[JSON]:
    if m["role"] == "assistant":
        call = m["tool_calls"][0]
        return [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": m["content"]}],
            },
            {
                "type": "function_call",
                "name": "shell",
                "arguments": call["function"]["arguments"],
                "call_id": call["id"],
            },
        ]
    if m["role"] == "tool":
        return [
            {"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]}
        ]
    return [
        {
            "type": "message",
            "role": m["role"],
            "content": [{"type": "input_text", "text": m["content"]}],
        }
    ]


def codex_log(seed: int, path: Path) -> Path:
    task, segments = _segments(seed)
    lines: list[JSON] = [
        {"type": "session_meta", "payload": {"id": f"cx{seed}", "cwd": "/w"}},
        {"type": "turn_context", "payload": {"model": "gpt-5-codex"}},
    ]
    lines += [{"type": "response_item", "payload": p} for p in _cx_items(task)]
    for k, turns in enumerate(segments):
        if k:
            summary = _summary(segments[k - 1], k)
            history = [
                _cx_items(task)[0],
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": summary}],
                },
            ]
            lines.append(
                {
                    "type": "compacted",
                    "payload": {"message": summary, "replacement_history": history},
                }
            )
        for m in turns:
            lines += [{"type": "response_item", "payload": p} for p in _cx_items(m)]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


# --------------------------------------------------------------------------- Hermes state.db

HERMES_SCHEMA = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, model TEXT, system_prompt TEXT,
    parent_session_id TEXT, started_at REAL NOT NULL, ended_at REAL, end_reason TEXT, title TEXT);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, role TEXT NOT NULL,
    content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT, timestamp REAL NOT NULL);
"""


def hermes_db(seed: int, path: Path) -> Path:
    """Hermes's rotation: each continuation starts with the task, the summary and the last turn."""
    task, segments = _segments(seed)
    db = sqlite3.connect(path)
    db.executescript(HERMES_SCHEMA)
    clock = iter(range(1, 10_000))
    for k, turns in enumerate(segments):
        sid = f"h{k + 1}"
        ended = "compression" if k < SEGMENTS - 1 else None
        db.execute(
            "INSERT INTO sessions VALUES (?,?,?,?,?,?,?,?,?)",
            (sid, "cli", "hermes-4", "You fix bugs.", f"h{k}" if k else None, k, None, ended, None),
        )
        rows = [task]
        if k:
            rows.append(
                {"role": "user", "content": "[CONTEXT COMPACTION] " + _summary(segments[k - 1], k)}
            )
            rows += segments[k - 1][-2:]  # the last turn is kept verbatim
        rows += turns
        for m in rows:
            db.execute(
                "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name,"
                " timestamp) VALUES (?,?,?,?,?,?,?)",
                (
                    sid,
                    m["role"],
                    m.get("content"),
                    m.get("tool_call_id"),
                    json.dumps(m["tool_calls"]) if m.get("tool_calls") else None,
                    "terminal" if m["role"] == "tool" else None,
                    next(clock),
                ),
            )
    db.commit()
    db.close()
    return path


FORMATS: dict[str, Callable[[int, Path], Path]] = {
    "claude_code": lambda seed, tmp: claude_code_log(seed, tmp / "cc.jsonl"),
    "codex": lambda seed, tmp: codex_log(seed, tmp / "rollout.jsonl"),
    "hermes_db": lambda seed, tmp: hermes_db(seed, tmp / "state.db"),
}


@pytest.fixture(scope="module", params=sorted(FORMATS))
def imported(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Ledger, str, str]:
    tmp = tmp_path_factory.mktemp(request.param)
    path = FORMATS[request.param](5, tmp)
    ledger = deterministic_ledger(tmp / "l.db")
    sessions = load(path)
    ids = import_sessions(ledger, sessions)
    return ledger, ledger.tip(ids[-1]), request.param


def test_each_source_compaction_is_recorded_as_a_compaction(
    imported: tuple[Ledger, str, str],
) -> None:
    ledger, tip, fmt = imported
    records = chain_compactions(ledger, tip)
    assert len(records) == SEGMENTS - 1
    for r in records:
        assert r.summary.imported and r.summary.summarizer == f"imported:{fmt}"
        assert r.switch.trigger == "import"
        assert "working on the bug" in r.summary.text
        assert r.summary.input_message_ids, "the span the summary replaced"
        carried = [e for e in r.switch.layout if e.origin == "carried"]
        assert all(e.message_id not in r.summary.input_message_ids for e in carried)
    # the live view is the source's: the last segment's messages after its layout
    live = [content_text(m) for m in ledger.api_messages(tip)]
    assert any("Summary 2" in t for t in live) and not any("Summary 1" in t for t in live)


def test_the_audit_measures_what_the_source_agent_lost(imported: tuple[Ledger, str, str]) -> None:
    ledger, tip, _ = imported
    report = audit_chain(ledger, tip)
    assert all(a.imported for a in report.compactions)
    assert all(a.lost and a.retention < 1.0 for a in report.compactions)
    assert report.retention < 1.0
    known = {f.normalized: f.kind for a in report.compactions for f in a.extracted}
    truth = ground_truth(ledger, tip, known)
    assert truth and {x.fact.normalized: x.lost_at for x in report.lost_now_at} == truth


def test_trace_agrees_with_the_audit_on_imported_chains(imported: tuple[Ledger, str, str]) -> None:
    ledger, tip, _ = imported
    report = audit_chain(ledger, tip)
    edits = [x for x in report.lost_now_at if x.fact.kind in ("edit", "error", "command")][:4]
    assert edits
    for x in edits:
        assert trace(ledger, tip, x.fact.value).status == (
            f"lost at compaction {x.compaction_index} ({x.lost_at})"
        )


def test_verify_does_not_replan_an_imported_compaction(imported: tuple[Ledger, str, str]) -> None:
    ledger, tip, _ = imported
    report = verify_compactions(ledger, tip)
    assert report.compactions == []


def test_cli_audit_says_the_compactions_are_imported(imported: tuple[Ledger, str, str]) -> None:
    ledger, tip, fmt = imported
    out = CliRunner().invoke(cli, ["--db", ledger.store.path, "audit", tip])
    assert out.exit_code == 0, out.output
    assert f"imported:{fmt}" in out.output and "lost at compaction" in out.output


def test_a_summary_generated_v1_payload_reads_as_not_imported() -> None:
    from ctxledger.events import SummaryGenerated, decode_event, schema_of

    payload = {
        "kind": "SummaryGenerated",
        "event_id": "e1",
        "session_id": "s1",
        "at": 1.0,
        "compaction_id": "c1",
        "summarizer": "offline",
        "model": None,
        "prompt_hash": "h",
        "input_message_ids": ["m1"],
        "budget_tokens": 10,
        "text": "summary",
    }
    assert schema_of("SummaryGenerated") == 2
    event = decode_event(json.dumps(payload), "SummaryGenerated", 1)
    assert isinstance(event, SummaryGenerated) and event.imported is False
