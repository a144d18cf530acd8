"""Hostile import files through ``ctxledger import``: a plain one-line error, never a
traceback, and nothing appended when the file is refused (session 45's sweep).

A valid file of each text format (OpenAI, Anthropic, ShareGPT as a list and as lines,
Claude Code, Codex) has one to three places set to a hostile JSON value, dropped, or
given a field beside, and sometimes one byte swapped for a byte that is not UTF-8, a
NUL or a CR. What it found: a ShareGPT human turn holding a ``tool_calls`` field of
text was a ``TypeError`` traceback (the importer read every earlier message's calls to
pair a tool response; now only the well-formed calls of assistant turns, and the
message check names the stray field).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from helpers.import_fixtures import (
    anthropic_conversation,
    claude_code_lines,
    codex_lines,
    openai_conversation,
    sharegpt_record,
)
from helpers.strategies import mutate_once
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger import Ledger
from ctxledger.cli.main import cli
from ctxledger.integers import NOT_PRINTED_IN_LINE


def _import(
    folder: Path, data: bytes, *args: str
) -> tuple[int, str, int, int, BaseException | None]:
    """`ctxledger import --again` of `data` into the ledger in `folder`: exit code,
    output, events before and after, the exception that ended it (``SystemExit`` on an
    error the CLI reports)."""
    db = folder / "l.db"
    source = folder / "in.json"
    source.write_bytes(data)
    with Ledger.open(db) as ledger:
        before = ledger.store.last_seq()
    result = CliRunner().invoke(cli, ["--db", str(db), "import", str(source), "--again", *args])
    with Ledger.open(db) as ledger:
        after = ledger.store.last_seq()
    return result.exit_code, result.output, before, after, result.exception


def test_a_sharegpt_human_turn_holding_tool_calls_of_text_is_a_located_error(
    tmp_path: Path,
) -> None:
    record = sharegpt_record()
    record["conversations"][1]["tool_calls"] = "\u202e"
    code, output, before, after, exc = _import(tmp_path, json.dumps([record]).encode())
    assert exc is None or isinstance(exc, SystemExit), repr(exc)
    assert code == 2, output
    assert "'tool_calls' is only allowed on assistant messages, not user" in output
    assert output.startswith("error: ") and output.count("\n") == 1, output
    assert after == before == 0


def test_a_sharegpt_tool_response_still_takes_the_id_a_synthesized_call_lacked(
    tmp_path: Path,
) -> None:
    # the guard on `_issued`: the id a response names replaces the synthesized one
    code, output, _, after, _ = _import(tmp_path, json.dumps([sharegpt_record()]).encode())
    assert code == 0, output
    with Ledger.open(tmp_path / "l.db") as ledger:
        (session,) = ledger.sessions()
        calls = [
            c["id"]
            for m in ledger.transcript.live_messages(session.session_id)
            for c in m.get("tool_calls") or ()
        ]
    assert calls[0] == "call_real" and after > 0


_HOSTILE = st.sampled_from(
    [
        None,
        True,
        -1,
        2**63,
        10**30,
        1.5,
        "",
        "\x00",
        "\x1b[31mX",
        "[bold]x[/]",
        "a\r\nFORGED",
        "\u202e",
        "x" * 5000,
        [],
        {},
        [None],
        {"": None},
        [[[[[]]]]],
        "user",
        "assistant",
        "tool",
        {"type": "text", "text": "\x1b]0;t\x07"},
    ]
)
#: (format, a valid document, whether it is written one record a line)
_FILES: list[tuple[str, Any, bool]] = [
    ("openai", openai_conversation(), False),
    ("anthropic", anthropic_conversation(), False),
    ("sharegpt", [sharegpt_record()], False),
    ("sharegpt", [sharegpt_record()], True),
    ("claude-code", claude_code_lines(), True),
    ("codex", codex_lines(), True),
]
_KEYS = st.sampled_from(["role", "content", "type", "id", "x", "tool_calls", "usage", "model"])


def _add_beside(draw: st.DrawFn, parent: Any, key: Any) -> None:
    if isinstance(parent, dict):
        parent[draw(_KEYS)] = draw(_HOSTILE)
    else:
        parent.insert(key, draw(_HOSTILE))


@st.composite
def hostile_files(draw: st.DrawFn) -> tuple[str, bytes]:
    fmt, doc, lines = draw(st.sampled_from(_FILES))
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        mutate_once(draw, doc, _HOSTILE, _add_beside)
    if lines:
        data = b"".join(json.dumps(r).encode() + b"\n" for r in doc)
    else:
        data = json.dumps(doc).encode()
    if draw(st.integers(0, 9)) == 0:
        at = draw(st.integers(0, len(data) - 1))
        swap = draw(st.sampled_from([b"\xff", b"\x00", b"\xc0\xaf", b"\xed\xa0\x80", b"\r"]))
        data = data[:at] + swap + data[at + 1 :]
    return fmt, data


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_files(), st.booleans())
def test_a_hostile_import_file_is_a_plain_error_or_an_import_never_a_traceback(
    tmp_path_factory: Any, case: tuple[str, bytes], named: bool
) -> None:
    fmt, data = case
    folder = tmp_path_factory.mktemp("hostile-import")
    code, output, before, after, exc = _import(folder, data, *(["--format", fmt] if named else []))
    assert exc is None or isinstance(exc, SystemExit), (repr(exc), data[:300])
    assert code in (0, 2), output
    for line in output.splitlines():
        assert not NOT_PRINTED_IN_LINE.search(line), line[:300]
    if code != 0:
        assert output.startswith("error: "), output
        assert after == before, output
