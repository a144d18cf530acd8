"""Importers and exporters: every format parses to validated OpenAI-shape sessions,
keeps provider extras and usage, round-trips through its exporter, and rejects
malformed input with the right line number (importing nothing)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ctxledger.errors import ImportFormatError, InvalidInput
from ctxledger.importers.anthropic import parse_anthropic
from ctxledger.importers.claude_code import parse_claude_code
from ctxledger.importers.codex import parse_codex
from ctxledger.importers.common import locate_line, synth_call_id
from ctxledger.importers.detect import IMPORTERS, detect_format, load, load_text
from ctxledger.importers.export import export_messages, export_session
from ctxledger.importers.hermes_db import parse_hermes_db
from ctxledger.importers.model import ImportedSession
from ctxledger.importers.openai import parse_openai
from ctxledger.importers.sharegpt import parse_sharegpt
from ctxledger.messages import validate_messages
from ctxledger.usage import normalize_usage

# --------------------------------------------------------------------------- fixtures


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


# --------------------------------------------------------------------------- OpenAI


@pytest.mark.parametrize(
    "shape", ["object", "list", "jsonl_messages", "jsonl_conversations", "list_of_conversations"]
)
def test_openai_shapes_give_the_same_session(shape: str) -> None:
    conv = openai_conversation()
    text = {
        "object": json.dumps(conv, indent=2),
        "list": json.dumps(conv["messages"]),
        "jsonl_messages": jsonl(conv["messages"]),
        "jsonl_conversations": jsonl([conv, {**conv, "id": "conv-2"}]),
        "list_of_conversations": json.dumps([conv], indent=1),
    }[shape]
    sessions = parse_openai(text, path="chat.json")
    assert_valid(sessions)
    s = sessions[0]
    assert s.system_prompt == "You are a coding agent."
    assert [m["role"] for m in s.messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert s.messages[1]["reasoning_content"] == "Look at the file first."
    assert s.messages[3]["x_vendor"] == {"latency_ms": 12}
    assert "usage" not in s.messages[1]
    assert [(u.after_index, u.shape) for u in s.usages] == [(1, "openai_chat")]
    if shape in ("object", "jsonl_conversations", "list_of_conversations"):
        assert (
            s.key == "conv-1"
            and s.model == "gpt-4o"
            and s.tools[0]["function"]["name"] == "read_file"
        )
    if shape == "jsonl_conversations":
        assert [x.key for x in sessions] == ["conv-1", "conv-2"]


def test_openai_chat_completion_lines_attach_usage_and_model() -> None:
    lines = [
        {"role": "user", "content": "hi"},
        {
            "object": "chat.completion",
            "model": "gpt-4o-mini",
            "choices": [{"message": {"role": "assistant", "content": "hello"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1},
        },
    ]
    (s,) = parse_openai(jsonl(lines))
    assert s.model == "gpt-4o-mini"
    assert s.messages[-1] == {"role": "assistant", "content": "hello"}
    assert s.usages[0].after_index == 1 and s.usages[0].model == "gpt-4o-mini"


def test_openai_legacy_function_call_and_missing_ids_get_deterministic_ids() -> None:
    msgs = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "weather", "arguments": "{}"},
        },
        {"role": "function", "name": "weather", "content": "sunny"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}],
        },
        {"role": "tool", "tool_call_id": synth_call_id("w.json", 3, 0), "content": "ok"},
    ]
    (s,) = parse_openai(json.dumps(msgs), path="w.json")
    assert s.messages[1]["tool_calls"][0]["id"] == synth_call_id("w.json", 1, 0)
    assert s.messages[2]["role"] == "tool" and s.messages[2]["tool_call_id"] == synth_call_id(
        "w.json", 1, 0
    )
    assert s.messages[3]["tool_calls"][0]["function"]["arguments"] == '{"x":1}'
    assert (
        synth_call_id("w.json", 1, 0).startswith("call_syn_")
        and len(synth_call_id("a", 1)) == 9 + 24
    )
    assert any("synthesized" in w for w in s.warnings)


def test_reused_tool_call_ids_are_renamed_with_their_results() -> None:
    def call(cid: str) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        }

    msgs = [
        {"role": "user", "content": "go"},
        call("c1"),
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        call("c1"),
        {"role": "tool", "tool_call_id": "c1", "content": "two"},
    ]
    (s,) = parse_openai(json.dumps(msgs), path="tau.json")
    renamed = synth_call_id("tau.json", 3, 0)
    assert (
        s.messages[3]["tool_calls"][0]["id"] == renamed and s.messages[4]["tool_call_id"] == renamed
    )
    assert s.messages[2]["tool_call_id"] == "c1"
    assert s.warnings == ["re-used tool-call ids were replaced by synthesized ids"]
    with pytest.raises(ImportFormatError, match="second tool result"):
        parse_openai(jsonl([*msgs, {"role": "tool", "tool_call_id": "c1", "content": "three"}]))


def test_openai_tool_calls_without_arguments_get_empty_arguments() -> None:
    msgs = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "function": {"name": "f"}},
                {"id": "b", "function": {"name": "g", "arguments": None}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
    ]
    (s,) = parse_openai(json.dumps(msgs))
    calls = s.messages[1]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == ["{}", "{}"]
    assert all(c["type"] == "function" for c in calls)
    assert s.warnings == ["tool calls without arguments got empty arguments ('{}') (x2)"]


# --------------------------------------------------------------------------- chat formats share one reader


@pytest.mark.parametrize("parse", [parse_openai, parse_anthropic], ids=["openai", "anthropic"])
def test_chat_formats_read_conversations_the_same_way(parse: Any) -> None:
    conv = {
        "id": "c-1",
        "model": "m-1",
        "title": "T",
        "context_length": 9000,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
        "usage": {"input_tokens": 3, "output_tokens": 1},
        "tools": [],
        "project": "p",
    }
    for text in (json.dumps(conv), jsonl([conv, {**conv, "id": "c-2"}])):
        s = parse(text, path="c.jsonl")[0]
        assert (s.key, s.model, s.title, s.context_length) == ("c-1", "m-1", "T", 9000)
        assert s.system_prompt == "Be brief." and s.extras == {"id": "c-1", "project": "p"}
        assert s.usages[0].after_index == 1 and s.usages[0].model == "m-1"
    messages = conv["messages"]
    assert isinstance(messages, list)
    with pytest.raises(
        ImportFormatError, match="expected a JSON object on this line, got int"
    ) as info:
        parse(jsonl([messages[0], 42]))
    assert info.value.line == 2
    with pytest.raises(ImportFormatError, match="expected a conversation") as info:
        parse(jsonl([conv, messages[0]]))
    assert info.value.line == 2
    with pytest.raises(ImportFormatError, match="whole conversation") as info:
        parse(jsonl([messages[0], conv]))
    assert info.value.line == 2
    with pytest.raises(ImportFormatError, match=r"expected a message \(with 'role'\)"):
        parse(json.dumps([messages[0], {"content": "no role"}]))


# --------------------------------------------------------------------------- Anthropic


def test_anthropic_blocks_map_to_openai_shape() -> None:
    (s,) = parse_anthropic(json.dumps(anthropic_conversation(), indent=2), path="a.json")
    assert_valid([s])
    assert s.system_prompt == "Be careful." and s.extras["system_blocks"][0]["cache_control"]
    assert s.tools == [
        {
            "type": "function",
            "function": {"name": "bash", "description": "run", "parameters": {"type": "object"}},
        }
    ]
    user, assistant, tool, user2, final = s.messages
    assert user["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,AAAA"},
    }
    assert (
        assistant["content"] == "Running ls."
        and assistant["reasoning_content"] == "I should run ls."
    )
    assert assistant["thinking_blocks"][0]["signature"] == "sig=="
    assert assistant["tool_calls"][0] == {
        "id": "toolu_1",
        "type": "function",
        "function": {"name": "bash", "arguments": '{"cmd":"ls"}'},
    }
    assert assistant["id"] == "msg_01" and assistant["stop_reason"] == "tool_use"
    assert tool == {"role": "tool", "tool_call_id": "toolu_1", "content": "a.py\nb.py"}
    assert user2 == {"role": "user", "content": "Now count them."}
    assert final["content"] == [
        {"type": "text", "text": "Two files.", "cache_control": {"type": "ephemeral"}}
    ]
    (usage,) = s.usages
    assert usage.after_index == 1 and usage.shape == "anthropic"
    assert normalize_usage(usage.raw, usage.shape)[1].prompt == 480


def test_anthropic_tool_results_come_before_the_remaining_user_text() -> None:
    conv = anthropic_conversation()
    conv["messages"][2]["content"].reverse()  # text block first in the source
    (s,) = parse_anthropic(json.dumps(conv))
    assert [m["role"] for m in s.messages[2:4]] == ["tool", "user"]


def test_anthropic_api_responses_as_jsonl() -> None:
    lines = [
        {"role": "user", "content": "hi"},
        {
            "type": "message",
            "role": "assistant",
            "model": "claude-3",
            "content": [{"type": "text", "text": "yo"}],
            "usage": {"input_tokens": 3, "output_tokens": 1},
        },
    ]
    (s,) = parse_anthropic(jsonl(lines))
    assert s.messages[1] == {"role": "assistant", "content": "yo", "model": "claude-3"}
    assert s.usages[0].model == "claude-3" and s.model == "claude-3"


# --------------------------------------------------------------------------- ShareGPT


def test_sharegpt_tool_calls_and_responses() -> None:
    (s,) = parse_sharegpt(json.dumps(sharegpt_record()), path="t.json")
    assert_valid([s])
    assert s.key == "traj-7" and s.extras == {"id": "traj-7", "source": "unit"}
    assert s.system_prompt == "You are Hermes."
    gpt = s.messages[1]
    assert gpt["content"] == "OK." and gpt["reasoning_content"] == "Tests first."
    first, second = gpt["tool_calls"]
    assert first["id"] == "call_real"  # learned from the response that answered it
    assert second["id"] == synth_call_id("traj-7", 2, 1)
    assert s.messages[2] == {
        "role": "tool",
        "tool_call_id": "call_real",
        "content": "3 passed",
        "name": "terminal",
    }
    assert (
        s.messages[3]["content"] == '{"lines":3}' and s.messages[3]["tool_call_id"] == second["id"]
    )
    assert s.messages[4] == {"role": "assistant", "content": "All green.", "weight": 1}


def test_sharegpt_plain_tool_turn_answers_the_pending_call() -> None:
    rec = {
        "conversations": [
            {"from": "human", "value": "go"},
            {"from": "gpt", "value": '<tool_call>{"name": "ls", "arguments": {}}</tool_call>'},
            {"from": "tool", "value": "a b c"},
        ]
    }
    (s,) = parse_sharegpt(jsonl([rec]), path="x.jsonl")
    assert s.messages[2]["content"] == "a b c" and s.messages[2]["name"] == "ls"
    assert s.messages[1]["content"] is None


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize(
    ("fmt", "parse", "text"),
    [
        ("openai", parse_openai, lambda: json.dumps(openai_conversation())),
        ("anthropic", parse_anthropic, lambda: json.dumps(anthropic_conversation())),
        ("sharegpt", parse_sharegpt, lambda: json.dumps(sharegpt_record())),
    ],
)
def test_import_export_import_gives_the_same_messages(fmt: str, parse: Any, text: Any) -> None:
    (first,) = parse(text(), path=f"in.{fmt}")
    exported = export_session(first, fmt)
    assert detect_format(exported) == fmt
    (second,) = parse(exported, path="elsewhere.json")
    assert second.messages == first.messages
    assert second.system_prompt == first.system_prompt
    (third,) = parse(export_messages(second.system_prompt, second.messages, fmt))
    assert third.messages == first.messages


@pytest.mark.parametrize("fmt", ["anthropic", "sharegpt"])
def test_openai_history_exports_to_other_formats_and_back(fmt: str) -> None:
    (s,) = parse_openai(json.dumps(openai_conversation()))
    back = IMPORTERS[fmt](export_session(s, fmt))[0]
    assert [m["role"] for m in back.messages] == [m["role"] for m in s.messages]
    assert [c["id"] for c in back.messages[1]["tool_calls"]] == ["call_a", "call_b"]
    assert back.messages[1]["reasoning_content"] == "Look at the file first."


def test_export_puts_the_system_message_first_and_rejects_unknown_formats() -> None:
    doc = json.loads(export_messages("sys", [{"role": "user", "content": "hi"}], "openai"))
    assert doc == {
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]
    }
    anth = json.loads(
        export_messages(
            "sys",
            [{"role": "user", "content": "hi"}, {"role": "system", "content": "note"}],
            "anthropic",
        )
    )
    assert anth["system"] == "sys" and anth["messages"][1]["ctxledger_role"] == "system"
    assert parse_anthropic(json.dumps(anth))[0].messages[1] == {"role": "system", "content": "note"}
    with pytest.raises(InvalidInput, match="unknown export format"):
        export_messages(None, [], "yaml")


def test_non_json_arguments_survive_an_anthropic_round_trip() -> None:
    msgs = [
        {"role": "user", "content": "x"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "not json"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "r"},
    ]
    (back,) = parse_anthropic(export_messages(None, msgs, "anthropic"))
    assert back.messages[1]["tool_calls"][0]["function"]["arguments"] == "not json"


# --------------------------------------------------------------------------- Claude Code


def test_claude_code_follows_the_chain_and_splits_at_the_compact_boundary() -> None:
    parent, child = parse_claude_code(jsonl(claude_code_lines()), path="cc.jsonl")
    assert_valid([parent, child])
    assert parent.key == "sess-cc#1" and parent.end_reason == "compression"
    assert child.key == "sess-cc" and child.parent_key == "sess-cc#1" and child.end_reason is None
    assert child.title == "Listing files"
    assert parent.extras == {
        "sessionId": "sess-cc",
        "cwd": "/repo",
        "version": "1.0.0",
        "gitBranch": "main",
    }
    _user, assistant, tool, _final = parent.messages
    assert (
        assistant["tool_calls"][0]["id"] == "toolu_9" and assistant["reasoning_content"] == "ls it"
    )
    assert assistant["id"] == "m1" and assistant["model"] == "claude-x"
    assert tool["content"] == [{"type": "text", "text": "a.py"}]
    assert [u.raw["output_tokens"] for u in parent.usages] == [
        9,
        5,
    ]  # merged message: its last usage, once
    assert [m["content"] for m in child.messages] == [
        "Summary: listed files, found a.py.",
        "Continuing.",
    ]
    assert "abandoned edit" not in json.dumps(parent.messages) and "subagent" not in json.dumps(
        child.messages
    )
    assert any("system prompt" in w for w in child.warnings)


def test_claude_code_summary_record_links_an_old_style_continuation() -> None:
    lines = [
        {
            "type": "user",
            "uuid": "a",
            "parentUuid": None,
            "sessionId": "s",
            "message": {"role": "user", "content": "one"},
        },
        {
            "type": "assistant",
            "uuid": "b",
            "parentUuid": "a",
            "message": {"id": "m", "role": "assistant", "content": "two"},
        },
        {"type": "summary", "summary": "earlier", "leafUuid": "b"},
        {
            "type": "user",
            "uuid": "c",
            "parentUuid": None,
            "message": {"role": "user", "content": "three"},
        },
    ]
    parent, child = parse_claude_code(jsonl(lines))
    assert [m["content"] for m in parent.messages] == ["one", "two"] and parent.title == "earlier"
    assert child.parent_key == parent.key and parent.end_reason == "compression"


# --------------------------------------------------------------------------- Codex


def test_codex_rollout_maps_items_usage_and_compaction() -> None:
    parent, child = parse_codex(jsonl(codex_lines()), path="rollout.jsonl")
    assert_valid([parent, child])
    assert (parent.key, child.key, child.parent_key) == ("rollout-1#1", "rollout-1", "rollout-1#1")
    assert parent.end_reason == "compression" and parent.system_prompt == "You are Codex."
    assert parent.model == "gpt-5-codex" and parent.context_length == 272000
    _user, call, out, _answer = parent.messages
    assert call["tool_calls"][0]["id"] == "call_1" and call["reasoning_content"] == "Run pytest."
    assert call["codex_reasoning_items"][0]["encrypted_content"] == "gAAA"
    assert out == {"role": "tool", "tool_call_id": "call_1", "content": "2 passed"}
    (usage,) = parent.usages  # the duplicated token_count is reported once
    assert usage.after_index == 1 and usage.shape == "openai_responses"
    canonical = normalize_usage(usage.raw, usage.shape)[1]
    assert (canonical.input, canonical.cache_read, canonical.output, canonical.reasoning) == (
        100,
        800,
        60,
        40,
    )
    assert [m["content"] for m in child.messages[:3]] == ["run tests", "Summary so far", "thanks"]
    patch = child.messages[3]["tool_calls"][0]
    assert patch["function"] == {"name": "apply_patch", "arguments": '{"input":"*** Begin Patch"}'}
    assert any("event_msg" in w for w in parent.warnings)


# --------------------------------------------------------------------------- Hermes state.db


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


# --------------------------------------------------------------------------- malformed input


def _lines_with(records: list[Any], at: int, bad: str) -> str:
    lines = [json.dumps(r) for r in records]
    lines.insert(at, bad)
    return "\n".join(lines) + "\n"


MALFORMED = [
    (
        "openai bad json",
        parse_openai,
        lambda: _lines_with(openai_conversation()["messages"], 3, '{"role": "user", '),
        4,
        "invalid JSON",
    ),
    (
        "openai wrong record",
        parse_openai,
        lambda: _lines_with(openai_conversation()["messages"], 2, "42"),
        3,
        "got int",
    ),
    (
        "openai orphan tool result",
        parse_openai,
        lambda: json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "x"},
                    {"role": "tool", "tool_call_id": "nope", "content": "r"},
                ]
            },
            indent=2,
        ),
        7,
        "no earlier assistant",
    ),
    (
        "openai mixed kinds",
        parse_openai,
        lambda: jsonl([{"role": "user", "content": "x"}, {"messages": []}]),
        2,
        "whole conversation",
    ),
    (
        "anthropic orphan tool_result",
        parse_anthropic,
        lambda: jsonl(
            [
                {"role": "user", "content": "a"},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "zz", "content": "r"}],
                },
            ]
        ),
        2,
        "no earlier assistant",
    ),
    (
        "anthropic system role",
        parse_anthropic,
        lambda: jsonl([{"role": "user", "content": "a"}, {"role": "system", "content": "b"}]),
        2,
        "unknown role",
    ),
    (
        "anthropic pretty bad json",
        parse_anthropic,
        lambda: '{\n  "messages": [\n    {"role": "user",, "content": "a"}\n  ]\n}',
        3,
        "invalid JSON",
    ),
    (
        "sharegpt unknown from",
        parse_sharegpt,
        lambda: jsonl([sharegpt_record(), {"conversations": [{"from": "narrator", "value": "x"}]}]),
        2,
        "unknown 'from'",
    ),
    (
        "sharegpt orphan tool turn",
        parse_sharegpt,
        lambda: json.dumps(
            {"conversations": [{"from": "human", "value": "x"}, {"from": "tool", "value": "r"}]},
            indent=2,
        ),
        7,
        "no pending",
    ),
    (
        "sharegpt bad tool_call",
        parse_sharegpt,
        lambda: jsonl(
            [{"conversations": [{"from": "gpt", "value": "<tool_call>{oops</tool_call>"}]}]
        ),
        1,
        "<tool_call>",
    ),
    (
        "claude code no type",
        parse_claude_code,
        lambda: _lines_with(claude_code_lines(), 4, '{"uuid": "q"}'),
        5,
        "string 'type'",
    ),
    (
        "claude code bad json",
        parse_claude_code,
        lambda: _lines_with(claude_code_lines(), 6, "{nope"),
        7,
        "invalid JSON",
    ),
    (
        "codex payload not object",
        parse_codex,
        lambda: _lines_with(codex_lines(), 5, '{"type": "response_item", "payload": 3}'),
        6,
        "payload must be an object",
    ),
    (
        "codex orphan output",
        parse_codex,
        lambda: jsonl(
            [
                *codex_lines()[:3],
                {
                    "type": "response_item",
                    "payload": {"type": "function_call_output", "call_id": "zz", "output": "x"},
                },
            ]
        ),
        4,
        "no earlier assistant",
    ),
]


@pytest.mark.parametrize(
    ("name", "parse", "text", "line", "message"), MALFORMED, ids=[m[0] for m in MALFORMED]
)
def test_malformed_input_names_its_line(
    name: str, parse: Any, text: Any, line: int, message: str
) -> None:
    with pytest.raises(ImportFormatError, match=message) as info:
        parse(text(), path="bad.file")
    assert info.value.line == line
    assert info.value.path == "bad.file"
    assert str(info.value).startswith(f"bad.file:{line}:")


def test_malformed_hermes_rows_are_rejected(tmp_path: Path) -> None:
    path = make_hermes_db(tmp_path / "state.db")
    db = sqlite3.connect(path)
    db.execute(
        "UPDATE messages SET tool_calls = '[{broken' WHERE tool_calls IS NOT NULL AND session_id = 's2'"
    )
    db.commit()
    db.close()
    with pytest.raises(
        ImportFormatError, match="'s2', messages row 6: tool_calls is not valid JSON"
    ):
        parse_hermes_db(path)
    (tmp_path / "junk.db").write_bytes(b"not a database at all" * 10)
    with pytest.raises(ImportFormatError, match="SQLite"):
        parse_hermes_db(tmp_path / "junk.db")


def test_detection_prefers_openai_markers_over_a_top_level_system_key() -> None:
    conv = {
        "system": "s",
        "messages": [
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
        ],
    }
    assert detect_format(json.dumps(conv)) == "openai"
    assert (
        detect_format(json.dumps({"system": "s", "messages": [{"role": "user", "content": "x"}]}))
        == "anthropic"
    )
    assert parse_openai(json.dumps(conv))[0].system_prompt == "s"


def test_empty_and_unrecognisable_inputs() -> None:
    with pytest.raises(ImportFormatError, match="empty"):
        parse_openai("  \n")
    with pytest.raises(ImportFormatError, match="cannot tell the format"):
        detect_format('{"hello": "world"}')


def test_locate_line_finds_nested_values() -> None:
    text = '{\n "a": [\n  1,\n  {"b":\n   "x"}\n ],\n "c": 2\n}'
    assert locate_line(text, ("a", 1)) == 4
    assert locate_line(text, ("a", 1, "b")) == 5
    assert locate_line(text, ("c",)) == 7
    assert locate_line(text, ("missing",)) is None


# --------------------------------------------------------------------------- detection and loading


def test_detect_and_load_every_format(tmp_path: Path) -> None:
    files = {
        "openai": write(tmp_path, "o.jsonl", jsonl(openai_conversation()["messages"])),
        "anthropic": write(tmp_path, "a.json", json.dumps(anthropic_conversation(), indent=2)),
        "sharegpt": write(tmp_path, "s.jsonl", jsonl([sharegpt_record()])),
        "claude_code": write(tmp_path, "c.jsonl", jsonl(claude_code_lines())),
        "codex": write(tmp_path, "r.jsonl", jsonl(codex_lines())),
        "hermes_db": make_hermes_db(tmp_path / "state.db"),
    }
    for fmt, path in files.items():
        assert detect_format(path) == fmt, fmt
        assert detect_format(str(path)) == fmt, fmt
        sessions = load(path)
        assert_valid(sessions)
        assert all(s.source_format == fmt for s in sessions)
    assert load_text(files["codex"].read_text(), path="-")[0].source_format == "codex"
    assert load(None, "claude-code", text=files["claude_code"].read_text())[-1].key == "sess-cc"
    assert load(files["hermes_db"], "hermes-db")[0].key == "s1"
    with pytest.raises(ImportFormatError, match="read from a file"):
        load_text("x", "hermes_db")
    with pytest.raises(ImportFormatError, match="unknown import format"):
        load(files["openai"], "xml")


def test_load_reads_the_file_once_and_parses_the_text_it_detected_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from ctxledger.importers import detect

    path = write(tmp_path, "o.jsonl", jsonl(openai_conversation()["messages"]))
    opened: list[str] = []
    os_open = os.open

    def counting_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(file))
        return os_open(file, *args, **kwargs)

    def no_second_read(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the file was read again")

    parsed: list[str] = []
    real = detect.IMPORTERS["openai"]

    def parse(text: str, *, path: str | None = None) -> list[ImportedSession]:
        parsed.append(text)
        return real(text, path=path)

    monkeypatch.setattr(detect.os, "open", counting_open)  # the file is opened by descriptor
    monkeypatch.setattr(Path, "read_text", no_second_read)
    monkeypatch.setattr(Path, "read_bytes", no_second_read)
    monkeypatch.setitem(detect.IMPORTERS, "openai", parse)
    (s,) = load(path)
    assert opened == [str(path)] and parsed == [jsonl(openai_conversation()["messages"])]
    assert s.messages and s.source_format == "openai"


def test_load_translates_crlf_newlines_like_text_mode(tmp_path: Path) -> None:
    lf = jsonl(openai_conversation()["messages"])
    path = tmp_path / "crlf.jsonl"
    path.write_bytes(lf.replace("\n", "\r\n").encode())
    assert detect_format(path) == "openai"
    assert load(path)[0].messages == parse_openai(lf)[0].messages
    (tmp_path / "bad.json").write_bytes(b'[{"role": "user", "content": "\xff"}]')
    with pytest.raises(ImportFormatError, match="not UTF-8 text"):
        load(tmp_path / "bad.json")
    with pytest.raises(ImportFormatError, match="not UTF-8 text"):
        load(tmp_path / "bad.json", "openai")
