"""An OpenAI refusal (``content`` null or empty beside a ``refusal`` string) is something
the model said (session 37): ``show`` prints it, recall finds it, the summarizer reads
it, and the Anthropic face sends it as a text block the Messages API accepts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxledger.analysis.recall import recall
from ctxledger.cli.main import cli
from ctxledger.compressor.serialize import serialize_turns
from ctxledger.importers.responses import messages_to_items
from ctxledger.ledger.facade import Ledger
from ctxledger.server.formats import anthropic_upstream
from ctxledger.tokens import message_text

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
        assert hits[0].snippet.startswith("I can't")  # no empty line for the null content


def test_an_index_folded_before_refusals_were_indexed_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index folded by an older version (schema 1: text only) is built again, so
    recall finds an old refusal whether or not an index existed before the upgrade."""
    recall_module = sys.modules[recall.__module__]  # the package exports the function
    with monkeypatch.context() as old:
        old.setattr(recall_module, "INDEX_SCHEMA", 1)
        old.setattr(recall_module, "_indexed_text", lambda m: message_text(m, text_only=True))
        ledger, sid = _ledger(tmp_path / "l.db")
        with ledger:
            assert recall(ledger, sid, "picking lock").hits == []
    with Ledger.open(tmp_path / "l.db") as ledger:
        assert [h.role for h in recall(ledger, sid, "picking lock").hits] == ["assistant"]


def test_show_and_the_summarizer_say_an_audio_reply_and_a_refusal_once(tmp_path: Path) -> None:
    said_twice = {"role": "assistant", "content": "No.", "refusal": "No."}
    audio = {"role": "assistant", "content": None, "audio": {"id": "audio_1"}}
    text = serialize_turns([ASK, said_twice, {"role": "user", "content": "ok"}, audio])
    assert "[REFUSAL]" not in text and "[ASSISTANT]\n[AUDIO REPLY audio_1]" in text
    with Ledger.open(tmp_path / "l.db") as ledger:
        sid = ledger.start_session(model="gpt-4o-audio-preview", context_length=16_000)
        ledger.append_messages(sid, [ASK, said_twice, {"role": "user", "content": "ok"}, audio])
    out = CliRunner().invoke(cli, ["--db", str(tmp_path / "l.db"), "show", sid]).output
    assert "refusal:" not in out and "audio reply: audio_1" in out


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


def test_the_anthropic_face_sends_openai_only_shapes_as_the_messages_api_takes_them() -> None:
    """An audio reply, a ``refusal`` content part, ``name``, an empty assistant turn and a
    refusal its content already says (recorded through the OpenAI faces) and a leading
    developer message (state API)."""
    refusal_part = {"type": "refusal", "refusal": "No."}
    view = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "a", "name": "ann"},
        {"role": "assistant", "content": None, "audio": {"id": "audio_1"}},
        {"role": "user", "content": "b"},
        {"role": "assistant", "content": [refusal_part]},
        {"role": "user", "content": "c"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "d"},
        {"role": "assistant", "content": "No.", "refusal": "No."},  # said once
    ]
    out = anthropic_upstream({"model": "claude-sonnet-4", "max_tokens": 9}, view, None)
    assert out["system"] == "Be brief."
    assert out["messages"] == [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": [{"type": "text", "text": "[audio reply audio_1]"}]},
        {"role": "user", "content": "b"},
        {"role": "assistant", "content": [{"type": "text", "text": "No."}]},
        {"role": "user", "content": "c"},
        {"role": "user", "content": "d"},
        {"role": "assistant", "content": [{"type": "text", "text": "No."}]},
    ]


def test_the_responses_face_sends_a_recorded_refusal_as_a_refusal_part() -> None:
    """A refusal recorded through a chat face, continued on the Responses face: an
    output message with a refusal part (it gave no input item at all)."""
    items = messages_to_items([ASK, REFUSAL])
    assert items[1] == {"role": "assistant", "content": [{"type": "refusal", "refusal": SAID}]}
