"""Transcripts in every supported format, generated in code for the importer tests."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from ctxledger.importers.model import ImportedSession
from ctxledger.messages import validate_messages
from ctxledger.usage import normalize_usage


def openai_conversation() -> dict[str, Any]:
    return {
        "id": "conv-1",
        "model": "gpt-4o",
        "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {}}}],
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Fix the test."},
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "Look at the file first.",
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                    },
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "b.py"}'},
                    },
                ],
                "usage": {
                    "prompt_tokens": 120,
                    "completion_tokens": 30,
                    "prompt_tokens_details": {"cached_tokens": 100},
                },
            },
            {"role": "tool", "tool_call_id": "call_a", "content": "print('a')"},
            {
                "role": "tool",
                "tool_call_id": "call_b",
                "content": "print('b')",
                "x_vendor": {"latency_ms": 12},
            },
            {"role": "assistant", "content": "Fixed.", "refusal": None},
        ],
    }


def anthropic_conversation() -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4",
        "system": [{"type": "text", "text": "Be careful.", "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "bash", "description": "run", "input_schema": {"type": "object"}}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "List files"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                    },
                ],
            },
            {
                "role": "assistant",
                "id": "msg_01",
                "stop_reason": "tool_use",
                "content": [
                    {"type": "thinking", "thinking": "I should run ls.", "signature": "sig=="},
                    {"type": "text", "text": "Running ls."},
                    {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "ls"}},
                ],
                "usage": {
                    "input_tokens": 50,
                    "output_tokens": 20,
                    "cache_read_input_tokens": 400,
                    "cache_creation_input_tokens": 30,
                },
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": "a.py\nb.py",
                        "is_error": False,
                    },
                    {"type": "text", "text": "Now count them."},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Two files.", "cache_control": {"type": "ephemeral"}}
                ],
            },
        ],
    }


def sharegpt_record() -> dict[str, Any]:
    call = json.dumps({"name": "terminal", "arguments": {"command": "pytest -q"}})
    call2 = json.dumps({"name": "read_file", "arguments": {"path": "x.py"}})
    resp = json.dumps({"tool_call_id": "call_real", "name": "terminal", "content": "3 passed"})
    return {
        "id": "traj-7",
        "source": "unit",
        "conversations": [
            {"from": "system", "value": "You are Hermes."},
            {"from": "human", "value": "Run the tests."},
            {
                "from": "gpt",
                "value": f"<think>\nTests first.\n</think>\nOK.\n<tool_call>\n{call}\n</tool_call>\n<tool_call>\n{call2}\n</tool_call>",
            },
            {
                "from": "tool",
                "value": f'<tool_response>\n{resp}\n</tool_response>\n<tool_response>\n{{"name": "read_file", "content": {{"lines": 3}}}}\n</tool_response>',
            },
            {"from": "gpt", "value": "All green.", "weight": 1},
        ],
    }


CC_USAGE = {
    "input_tokens": 10,
    "output_tokens": 5,
    "cache_read_input_tokens": 100,
    "cache_creation_input_tokens": 7,
}


def cc(
    kind: str, uuid: str, parent: str | None, message: Any = None, **extra: Any
) -> dict[str, Any]:
    """One Claude Code record of session ``sess-cc``."""
    rec = {
        "sessionId": "sess-cc",
        "cwd": "/repo",
        "version": "1.0.0",
        "gitBranch": "main",
        "isSidechain": False,
    }
    rec.update(type=kind, uuid=uuid, parentUuid=parent, **extra)
    if message is not None:
        rec["message"] = message
    return rec


def cc_assistant(
    uuid: str, parent: str, msg_id: str, blocks: list[Any], **usage: int
) -> dict[str, Any]:
    message = {
        "id": msg_id,
        "role": "assistant",
        "model": "claude-x",
        "content": blocks,
        "usage": {**CC_USAGE, **usage},
    }
    return cc("assistant", uuid, parent, message)


def claude_code_lines() -> list[dict[str, Any]]:
    """Root user -> assistant (thinking, then tool_use: one API message over two records) -> tool
    result -> answer; an abandoned fork; a compact boundary; the continuation; a sidechain."""
    result = [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_9",
            "content": [{"type": "text", "text": "a.py"}],
        }
    ]
    tool_use = {"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {"command": "ls"}}
    return [
        {"type": "summary", "summary": "Listing files", "leafUuid": "u9"},
        cc("user", "u1", None, {"role": "user", "content": "list files"}),
        cc_assistant(
            "u2", "u1", "m1", [{"type": "thinking", "thinking": "ls it", "signature": "s1"}]
        ),
        cc_assistant("u3", "u2", "m1", [tool_use], output_tokens=9),
        cc(
            "user",
            "u4",
            "u3",
            {"role": "user", "content": result},
            toolUseResult={"stdout": "a.py"},
        ),
        cc("user", "fork", "u3", {"role": "user", "content": "abandoned edit"}),
        cc_assistant("u5", "u4", "m2", [{"type": "text", "text": "One file."}]),
        cc(
            "system",
            "b1",
            None,
            subtype="compact_boundary",
            logicalParentUuid="u5",
            content="Conversation compacted",
        ),
        cc(
            "user",
            "u6",
            "b1",
            {"role": "user", "content": "Summary: listed files, found a.py."},
            isCompactSummary=True,
        ),
        {
            **cc("user", "side", "u6", {"role": "user", "content": "subagent work"}),
            "isSidechain": True,
        },
        cc_assistant("u9", "u6", "m3", [{"type": "text", "text": "Continuing."}]),
        {"type": "file-history-snapshot", "messageId": "x", "snapshot": {}},
    ]


def cx_item(payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2025-09-01T00:00:00Z", "type": "response_item", "payload": payload}


def cx_message(role: str, text: str) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def cx_tokens(total: int, **last: int) -> dict[str, Any]:
    usage = {
        "input_tokens": 900,
        "cached_input_tokens": 800,
        "output_tokens": 60,
        "reasoning_output_tokens": 40,
    }
    info = {
        "total_token_usage": {"total_tokens": total},
        "last_token_usage": {**usage, **last},
        "model_context_window": 272000,
    }
    return {"type": "event_msg", "payload": {"type": "token_count", "info": info}}


def codex_lines() -> list[dict[str, Any]]:
    """A rollout: meta, a tool call with reasoning and usage (reported twice), a compaction
    with replacement history, then a custom tool call."""
    meta = {
        "id": "rollout-1",
        "cwd": "/w",
        "cli_version": "0.40.0",
        "base_instructions": {"text": "You are Codex."},
    }
    reasoning = {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Run pytest."}],
        "encrypted_content": "gAAA",
    }
    history = [cx_message("user", "run tests"), cx_message("user", "Summary so far")]
    return [
        {"timestamp": "t0", "type": "session_meta", "payload": meta},
        {"type": "turn_context", "payload": {"model": "gpt-5-codex", "cwd": "/w"}},
        cx_item(cx_message("user", "run tests")),
        {"type": "event_msg", "payload": {"type": "user_message", "message": "run tests"}},
        cx_item(reasoning),
        cx_item(
            {
                "type": "function_call",
                "name": "shell",
                "arguments": '{"command":["pytest"]}',
                "call_id": "call_1",
            }
        ),
        cx_tokens(960),
        cx_tokens(960),
        cx_item({"type": "function_call_output", "call_id": "call_1", "output": "2 passed"}),
        cx_item(cx_message("assistant", "Tests pass.")),
        {
            "type": "compacted",
            "payload": {"message": "Summary so far", "replacement_history": history},
        },
        cx_item(cx_message("user", "thanks")),
        cx_item(
            {
                "type": "custom_tool_call",
                "name": "apply_patch",
                "input": "*** Begin Patch",
                "call_id": "call_2",
            }
        ),
        cx_item({"type": "custom_tool_call_output", "call_id": "call_2", "output": "Done!"}),
        cx_item(cx_message("assistant", "Patched.")),
        cx_tokens(2000, input_tokens=1000),
    ]


def jsonl(records: list[Any]) -> str:
    return "\n".join(json.dumps(r) for r in records) + "\n"


HERMES_SCHEMA = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, model TEXT, model_config TEXT, system_prompt TEXT,
    parent_session_id TEXT, started_at REAL NOT NULL, ended_at REAL, end_reason TEXT, title TEXT,
    input_tokens INTEGER DEFAULT 0, output_tokens INTEGER DEFAULT 0, cache_read_tokens INTEGER DEFAULT 0,
    cache_write_tokens INTEGER DEFAULT 0, reasoning_tokens INTEGER DEFAULT 0);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, role TEXT NOT NULL, content TEXT,
    tool_call_id TEXT, tool_calls TEXT, tool_name TEXT, timestamp REAL NOT NULL, token_count INTEGER,
    finish_reason TEXT, reasoning_content TEXT, active INTEGER NOT NULL DEFAULT 1, compacted INTEGER NOT NULL DEFAULT 0);
"""


def _calls(*ids: str) -> str:
    return json.dumps(
        [
            {
                "id": i,
                "type": "function",
                "function": {"name": "terminal", "arguments": '{"command": "ls"}'},
            }
            for i in ids
        ]
    )


def make_hermes_db(path: Path) -> Path:
    """Three sessions: s1 ended by compression -> s2 (its continuation) -> s3 (a sub-agent of s2)."""
    db = sqlite3.connect(path)
    db.executescript(HERMES_SCHEMA)
    db.executemany(
        "INSERT INTO sessions VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [
            (
                "s1",
                "cli",
                "hermes-4",
                '{"context_length": 64000}',
                "You are Hermes.",
                None,
                1.0,
                5.0,
                "compression",
                "Fix CI",
                1000,
                200,
                50,
                10,
                20,
            ),
            (
                "s2",
                "cli",
                "hermes-4",
                None,
                "You are Hermes.",
                "s1",
                6.0,
                None,
                None,
                None,
                300,
                40,
                0,
                0,
                0,
            ),
            ("s3", "tool", "hermes-4", None, None, "s2", 7.0, 8.0, "complete", None, 0, 0, 0, 0, 0),
        ],
    )
    rows = [
        ("s1", "user", "CI is red", None, None, None, 1.1, None, None, None),
        ("s1", "assistant", None, None, _calls("c1"), None, 1.2, "tool_calls", "check logs", None),
        ("s1", "tool", "3 failed", "c1", None, "terminal", 1.3, None, None, None),
        ("s1", "assistant", "Three tests fail.", None, None, None, 1.4, "stop", None, None),
        (
            "s2",
            "user",
            "[CONTEXT SUMMARY]: CI had 3 failures",
            None,
            None,
            None,
            6.1,
            None,
            None,
            None,
        ),
        ("s2", "assistant", None, None, _calls("c2"), None, 6.2, None, None, None),
        ("s2", "tool", "fixed", "c2", None, "terminal", 6.3, None, None, None),
        ("s2", "user", "undo that", None, None, None, 6.35, None, None, 0),
        ("s2", "assistant", "Done.", None, None, None, 6.4, None, None, None),
        ("s3", "user", "sub task", None, None, None, 7.1, None, None, None),
        ("s3", "assistant", "sub done", None, None, None, 7.2, None, None, None),
    ]
    db.executemany(
        "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp, finish_reason,"
        " reasoning_content, active) VALUES (?,?,?,?,?,?,?,?,?,COALESCE(?, 1))",
        rows,
    )
    db.commit()
    db.close()
    return path


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, "utf-8")
    return p


def assert_valid(sessions: list[ImportedSession]) -> None:
    assert sessions
    for s in sessions:
        validate_messages(s.messages)
        for u in s.usages:
            assert 0 <= u.after_index < len(s.messages)
            normalize_usage(u.raw, u.shape)
