"""How ``ledger_v2_checkpoint.db`` was made: run with the ctxledger of main before the
rebuild kept message bodies in the log (commit c2756f6, checkpoint ``projector/v2``).

The file holds a ``projector/v2`` checkpoint (every message body in the saved state)
followed by events appended after it; ``tests/test_lazy_bodies.py`` checks that
today's code loads that checkpoint, catches up and folds the same state as a rebuild.
Recipe (from a checkout of that commit)::

    PYTHONPATH=<old checkout> python tests/golden/make_v2_checkpoint_ledger.py out.db
    python -c "import sqlite3; c = sqlite3.connect('out.db'); c.execute('VACUUM'); c.execute('PRAGMA journal_mode=DELETE')"
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys

from ctxledger import CompressionConfig, Ledger, OfflineSummarizer, compact
from ctxledger.clock import SequentialIds, StepClock
from ctxledger.demo.synth import SessionSynth
from ctxledger.events import ToolOutputPersisted


def persist_output(ledger: Ledger, sid: str, call_id: str, text: str) -> None:
    """A tool result appended with its output moved to a blob (as the runtime does)."""
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


async def main(path: str) -> None:
    for suffix in ("", "-wal", "-shm", ".lock"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    ledger = Ledger.open(path, clock=StepClock(), ids=SequentialIds(), config=CompressionConfig())
    synth = SessionSynth(13, big_outputs=False)
    sid = ledger.start_session(
        model="gpt-4o",
        context_length=16_000,
        system_prompt=synth.system_prompt(),
        tools=synth.tools(),
    )
    msgs = synth.messages(50)
    ledger.append_messages(sid, msgs[:25])
    ledger.append_messages(sid, [{"role": "user", "content": "a big paste: " + "y" * 70 * 1024}])
    ledger.append_messages(
        sid,
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_big",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                    }
                ],
            }
        ],
    )
    persist_output(ledger, sid, "call_big", "line of output\n" * 400)
    ledger.pin(sid, ledger.transcript.live_ids(sid)[1])
    for m in msgs[25:]:
        ledger.append_messages(sid, [m])
    await compact(ledger, sid, OfflineSummarizer())
    tip = ledger.tip(sid)
    ledger.append_messages(tip, [{"role": "user", "content": "after the compaction"}])
    ledger.projector.save_checkpoint(ledger.store)
    # events after the checkpoint: a rebuild from it must catch up on them
    ledger.append_messages(tip, [{"role": "assistant", "content": "after the checkpoint"}])
    ledger.report_usage(tip, {"prompt_tokens": 4000, "completion_tokens": 50})
    ledger.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
