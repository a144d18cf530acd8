"""How ``ledger_pre_heads.db`` (and ``ledger_pre_heads.json``) were made: run with the
ctxledger of main before message heads became columns of the SQLite events table
(commit 1b2de39: migration ``0001_event_log`` only, every row folded from its payload).

The file holds two sessions (one compacted into a continuation), a 70 KB message kept
as a blob, a persisted tool output, a pin, usage, a branch and a ``projector/v3``
checkpoint followed by more events. The JSON beside it records what that main computed:
the sha256 of a full rebuild's fingerprint, ``verify``'s head, and each session's API
view hash. ``tests/test_head_columns.py`` checks today's code opens (migrating it),
verifies, rebuilds and replays it to the same values. Recipe (from a checkout of that
commit)::

    PYTHONPATH=<old checkout> python tests/golden/make_pre_heads_ledger.py out.db out.json
    python -c "import sqlite3; c = sqlite3.connect('out.db'); c.execute('VACUUM'); c.execute('PRAGMA journal_mode=DELETE')"
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys

from ctxledger import CompressionConfig, Ledger, OfflineSummarizer, compact
from ctxledger.clock import SequentialIds, StepClock
from ctxledger.demo.synth import SessionSynth
from ctxledger.events import ToolOutputPersisted
from ctxledger.eventstore import SQLiteEventStore
from ctxledger.projections import Projector


def persist_output(ledger: Ledger, sid: str, call_id: str, text: str) -> None:
    """A tool call and its result, the result's output moved to a blob."""
    ledger.append_messages(
        sid,
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                    }
                ],
            }
        ],
    )
    data = text.encode()
    ref = hashlib.sha256(data).hexdigest()
    mid = ledger.ids("msg")
    event = ToolOutputPersisted(
        **ledger.event_fields(sid),
        message_id=mid,
        tool_call_id=call_id,
        tool_name="read_file",
        blob_ref=ref,
        chars=len(text),
        replacement=f"[output stored: {ref}]",
        replacement_tokens=12,
    )
    ledger.append_messages(
        sid,
        [{"role": "tool", "tool_call_id": call_id, "content": text}],
        extra_events=[event],
        message_ids=[mid],
        blobs={ref: data},
    )


def digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


async def main(path: str, facts: str) -> None:
    for suffix in ("", "-wal", "-shm", ".lock"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    ledger = Ledger.open(path, clock=StepClock(), ids=SequentialIds(), config=CompressionConfig())
    synth = SessionSynth(17, big_outputs=False)
    sid = ledger.start_session(
        model="gpt-4o",
        context_length=16_000,
        system_prompt=synth.system_prompt(),
        tools=synth.tools(),
    )
    msgs = synth.messages(60)
    ledger.append_messages(sid, msgs[:30])
    ledger.append_messages(sid, [{"role": "user", "content": "a big paste: " + "q" * 70 * 1024}])
    persist_output(ledger, sid, "call_big", "line of output\n" * 400)
    ledger.pin(sid, ledger.transcript.live_ids(sid)[1])
    ledger.report_usage(sid, {"prompt_tokens": 3000, "completion_tokens": 40})
    for m in msgs[30:]:
        ledger.append_messages(sid, [m])
    await compact(ledger, sid, OfflineSummarizer())
    tip = ledger.tip(sid)
    ledger.append_messages(tip, [{"role": "user", "content": "after the compaction"}])
    branch = ledger.start_session(
        model="gpt-4o", context_length=16_000, parent_session_id=tip, reason="branch"
    )
    ledger.append_messages(branch, synth.messages(6))
    ledger.projector.save_checkpoint(ledger.store)
    ledger.append_messages(tip, [{"role": "assistant", "content": "after the checkpoint"}])
    ledger.report_usage(tip, {"prompt_tokens": 4000, "completion_tokens": 50})
    ledger.close()
    with SQLiteEventStore(path) as store:
        rebuilt = Projector.rebuild(store, use_checkpoint=False)
        report = store.verify()
        sessions = sorted(rebuilt.transcript.state.sessions)
        out = {
            "fingerprint_sha256": hashlib.sha256(rebuilt.fingerprint()).hexdigest(),
            "last_seq": rebuilt.last_seq,
            "head_seq": report.head_seq,
            "head_hash": report.head_hash,
            "api_views": {s: digest(rebuilt.transcript.api_messages(s)) for s in sessions},
        }
    with open(facts, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
