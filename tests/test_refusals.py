"""An OpenAI refusal (``content`` null or empty beside a ``refusal`` string) is something
the model said (session 37): ``show`` prints it, recall finds it, the summarizer reads
it, and the Anthropic face sends it as a text block the Messages API accepts."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from ctxledger.analysis.recall import recall
from ctxledger.cli.main import cli
from ctxledger.compressor.serialize import serialize_turns
from ctxledger.ledger.facade import Ledger
from ctxledger.server.formats import anthropic_upstream

SAID = "I can't help with picking that lock."
REFUSAL = {"role": "assistant", "content": None, "refusal": SAID}
ASK = {"role": "user", "content": "how do I open the neighbour's door?"}


def _ledger(path: Path) -> tuple[Ledger, str]:
    ledger = Ledger.open(path)
    sid = ledger.start_session(model="gpt-4.1", context_length=16_000)
    ledger.append_messages(sid, [ASK, REFUSAL, {"role": "user", "content": "fine"}])
    return ledger, sid


def test_show_prints_a_refusal(tmp_path: Path) -> None:
    ledger, sid = _ledger(tmp_path / "l.db")
    ledger.close()
    out = CliRunner().invoke(cli, ["--db", str(tmp_path / "l.db"), "show", sid]).output
    assert f"refusal: {SAID}" in out


def test_recall_finds_a_refusal(tmp_path: Path) -> None:
    ledger, sid = _ledger(tmp_path / "l.db")
    with ledger:
        hits = recall(ledger, sid, "picking lock").hits
        assert [h.role for h in hits] == ["assistant"]


def test_the_summarizer_reads_a_refusal() -> None:
    text = serialize_turns([ASK, REFUSAL, {**REFUSAL, "content": "", "refusal": " "}])
    assert f"[ASSISTANT]\n[REFUSAL] {SAID}" in text
    assert text.count("[REFUSAL]") == 1  # a blank one says nothing


def test_the_anthropic_face_sends_a_refusal_as_a_text_block() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    view = [
        {"role": "system", "content": "S"},
        ASK,
        REFUSAL,
        {"role": "user", "content": "ok"},
        {**REFUSAL, "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
        {"role": "developer", "content": "D"},
    ]
    out = anthropic_upstream({"model": "claude-sonnet-4", "max_tokens": 9}, view, None)
    text = {"type": "text", "text": SAID}
    assert out["messages"][1] == {"role": "assistant", "content": [text]}
    assert out["messages"][3] == {
        "role": "assistant",
        "content": [text, {"type": "tool_use", "id": "c1", "name": "f", "input": {}}],
    }
    assert out["messages"][4]["content"][0]["type"] == "tool_result"
    assert all("refusal" not in m and "ctxledger_role" not in m for m in out["messages"])
