"""Text that is not valid Unicode (a lone surrogate) is refused before anything is written.

JSON can carry one (``"\\ud83d"``: half of an escaped emoji pair), and Python's json
module decodes it into a ``str`` that UTF-8 cannot encode. Before session 28,
``Ledger.append_messages`` of such a message raised a raw ``UnicodeEncodeError`` from
the store's encoder; now every append path refuses it as ``InvalidEvent``, naming the
character, with nothing appended.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger import ContextService, Ledger
from ctxledger.cli.main import cli
from ctxledger.clock import SequentialIds, StepClock
from ctxledger.errors import InvalidEvent, InvalidInput
from ctxledger.limits import json_problem

HALF = json.loads('"\\ud83d"')


def _open(path: Path) -> tuple[Ledger, str]:
    ledger = Ledger.open(str(path), clock=StepClock(), ids=SequentialIds())
    return ledger, ledger.start_session(model="m", context_length=32_000)


def _call_message(arguments: str) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": arguments}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": f"half an emoji: {HALF} end"},
        {"role": "user", "content": "x" * 200_000 + HALF},  # large: kept as a blob
        {"role": "user", "content": [{"type": "text", "text": HALF}]},
        _call_message(json.dumps({"path": "a"}).replace("a", HALF)),
    ],
    ids=["content", "blob", "part", "arguments"],
)
def test_a_lone_surrogate_is_refused_and_nothing_is_appended(
    tmp_path: Path, message: dict[str, Any]
) -> None:
    ledger, sid = _open(tmp_path / "l.db")
    before = ledger.store.last_seq()
    with pytest.raises(InvalidEvent, match=r"not valid Unicode.*\\ud83d.*nothing was appended"):
        ledger.append_messages(sid, [{"role": "user", "content": "fine"}, message])
    assert ledger.store.last_seq() == before
    assert ledger.append_messages(sid, [{"role": "user", "content": "still works"}])
    ledger.close()


def test_the_service_refuses_it_too(tmp_path: Path) -> None:
    async def run() -> None:
        ledger, sid = _open(tmp_path / "l.db")
        svc = ContextService(ledger)
        before = ledger.store.last_seq()
        with pytest.raises(InvalidInput):
            await svc.append(sid, [{"role": "user", "content": HALF}])
        assert ledger.store.last_seq() == before
        await svc.aclose()

    anyio.run(run)


def test_an_import_holding_one_exits_2_with_nothing_imported(tmp_path: Path) -> None:
    source = tmp_path / "t.json"
    source.write_text('[{"role": "user", "content": "a \\ud83d b"}]')
    db = tmp_path / "l.db"
    result = CliRunner().invoke(cli, ["--db", str(db), "import", str(source), "--format", "openai"])
    assert result.exit_code == 2, result.output
    assert "invalid JSON" in result.output  # (msgspec refuses the escape as it decodes)
    assert not db.exists()  # refused while the file was read, before a ledger was opened


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=30), st.integers(0xD800, 0xDFFF), st.data())
def test_any_text_with_a_lone_surrogate_is_refused(
    tmp_path_factory: pytest.TempPathFactory, text: str, code: int, data: st.DataObject
) -> None:
    at = data.draw(st.integers(0, len(text)))
    bad = text[:at] + chr(code) + text[at:]
    ledger, sid = _open(tmp_path_factory.mktemp("s") / "l.db")
    with pytest.raises(InvalidEvent):
        ledger.append_messages(sid, [{"role": "user", "content": bad}])
    if all(not 0xD800 <= ord(c) <= 0xDFFF for c in text):
        assert ledger.append_messages(sid, [{"role": "user", "content": text or "-"}])
    ledger.close()


def test_a_tools_schema_holding_one_is_refused_before_the_session_starts(tmp_path: Path) -> None:
    ledger = Ledger.open(str(tmp_path / "l.db"), clock=StepClock(), ids=SequentialIds())
    tools = [{"type": "function", "function": {"name": "f" + HALF, "parameters": {}}}]
    with pytest.raises(InvalidInput, match="tools schema holds text that is not valid Unicode"):
        ledger.start_session(model="m", context_length=32_000, tools=tools)
    assert ledger.store.last_seq() == 0
    ledger.close()


def test_a_recall_query_holding_one_is_a_clear_error_for_the_model(tmp_path: Path) -> None:
    from ctxledger.analysis.agent_tools import handle_tool_call
    from ctxledger.analysis.recall import recall

    ledger, sid = _open(tmp_path / "l.db")
    ledger.append_messages(sid, [{"role": "user", "content": "find the cache bug"}])
    with pytest.raises(InvalidInput, match="the query holds text that is not valid Unicode"):
        recall(ledger, sid, "cache " + HALF)
    answer = json.loads(handle_tool_call(ledger, sid, "recall", json.dumps({"query": "a" + HALF})))
    assert "not valid Unicode" in answer["error"]
    ledger.close()


def test_an_escaped_backslash_before_u_is_text_not_a_lone_surrogate() -> None:
    # review of session 29: the JSON text \\ud800 (an escaped backslash, then "ud800")
    # is no escape, yet a truncated body holding it was reported as a lone surrogate
    truncated = Exception("Input data was truncated")
    for body in (r'{"content": "regex [\\ud800-\\udfff] ...', r'"C:\\udc00\\x"'):
        assert json_problem(truncated, body) == "Input data was truncated", body
    for body in (r'{"a": "\ud800"}', r'{"a": "x\\\ud800"}', r'"\\\\\\\ud800 \\ud800"'):
        assert "the escape \\ud800 is half" in json_problem(truncated, body), body
    assert "\\udc00 is half" in json_problem(truncated, r'"\ud83d\ude00 ok \udc00"')
