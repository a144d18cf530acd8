"""The compaction engine: what the summarizer is given and what gets recorded."""

from __future__ import annotations

from pathlib import Path

import anyio
from helpers.ledger_helpers import compact_now, make_ledger

from ctxledger.compressor.recording import prepare, record
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.events import SessionSwitched, SummaryGenerated, ToolResultsPruned
from ctxledger.ledger.compaction import append_recorded, compaction_input

ERROR = "sqlite3.OperationalError: database is locked (while migrating table invoices)"


def _session_with_a_buried_error(tmp_path: Path) -> tuple[object, str]:
    ledger = make_ledger(tmp_path / "l.db")
    sid = ledger.start_session(model="m", system_prompt="You are a coding agent.")
    msgs = []
    for i in range(14):
        cid = f"c{i}"
        log = "\n".join(f"line {n}: step ok" for n in range(120))
        if i == 3:
            log += f'\nTraceback (most recent call last):\n  File "migrate.py", line 88\n{ERROR}\n[exit code 1]'
        msgs += [
            {"role": "user", "content": f"run the migration, attempt {i}"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {
                            "name": "terminal",
                            "arguments": '{"command": "python migrate.py"}',
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": cid, "content": log},
            {"role": "assistant", "content": f"attempt {i} done"},
        ]
    ledger.append_messages(sid, msgs)
    return ledger, sid


def test_summarizer_gets_pruned_turns_and_the_originals(tmp_path: Path) -> None:
    ledger, sid = _session_with_a_buried_error(tmp_path)
    prepared = prepare(compaction_input(ledger, sid), ledger.config, force=True)  # type: ignore[arg-type]
    request = prepared.request
    assert request is not None and request.originals is not None
    assert len(request.originals) == len(request.turns)
    assert any(ERROR in str(m.get("content")) for m in request.originals)
    assert not any(
        ERROR in str(m.get("content")) for m in request.turns
    )  # the one-liner replaced it


def test_offline_summary_keeps_an_error_only_the_original_output_had(tmp_path: Path) -> None:
    ledger, sid = _session_with_a_buried_error(tmp_path)
    outcome = compact_now(ledger, sid)  # type: ignore[arg-type]
    assert outcome.action == "compressed"
    assert outcome.summary_text is not None and "database is locked" in outcome.summary_text


def test_one_compaction_is_one_atomic_append_in_order(tmp_path: Path) -> None:
    ledger, sid = _session_with_a_buried_error(tmp_path)
    before = ledger.store.last_seq()  # type: ignore[attr-defined]
    outcome = compact_now(ledger, sid)  # type: ignore[arg-type]
    kinds = [type(r.event).__name__ for r in ledger.store.read_all(before + 1)]  # type: ignore[attr-defined]
    assert kinds == ["ToolResultsPruned", "SummaryGenerated", "SessionSwitched", "SessionStarted"]
    recs = list(ledger.store.read_all(before + 1))  # type: ignore[attr-defined]
    pruned, summary, switch = (r.event for r in recs[:3])
    assert (
        isinstance(pruned, ToolResultsPruned)
        and isinstance(summary, SummaryGenerated)
        and isinstance(switch, SessionSwitched)
    )
    assert switch.new_session_id == outcome.new_session_id
    carried = [e.message_id for e in switch.layout if e.origin == "carried"]
    assert set(carried) <= set(ledger.transcript.session(sid).live)  # type: ignore[attr-defined]
    assert set(summary.input_message_ids).isdisjoint(carried)


def test_record_returns_the_continuations_api_view(tmp_path: Path) -> None:
    ledger, sid = _session_with_a_buried_error(tmp_path)
    prepared = prepare(compaction_input(ledger, sid), ledger.config, force=True)  # type: ignore[arg-type]
    assert prepared.request is not None
    result = anyio.run(OfflineSummarizer().summarize, prepared.request)
    recorded = record(prepared, result, trigger="manual", clock=ledger.clock, ids=ledger.ids)  # type: ignore[attr-defined]
    append_recorded(ledger, recorded)
    assert len(recorded.messages) == recorded.switch.messages_after
    assert recorded.messages == ledger.api_messages(recorded.new_session_id)  # type: ignore[attr-defined]
