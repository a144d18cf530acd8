"""How ``ledger_per_event_chain.db`` was made: run with the ctxledger of main before issue 14.

The file is a ledger in the format where every event row holds its own sha256 chain
hash; ``tests/test_chain_format.py`` checks that today's code opens, verifies,
folds, replays and extends it. Recipe (from a checkout of that commit)::

    PYTHONPATH=<old checkout> python tests/golden/make_per_event_chain_ledger.py out.db
    python -c "import sqlite3; c = sqlite3.connect('out.db'); c.execute('VACUUM'); c.execute('PRAGMA journal_mode=DELETE')"
"""

from __future__ import annotations

import asyncio
import os
import sys

from ctxledger import CompressionConfig, Ledger, OfflineSummarizer, compact
from ctxledger.clock import SequentialIds, StepClock
from ctxledger.demo.synth import SessionSynth


async def main(path: str) -> None:
    for suffix in ("", "-wal", "-shm", ".lock"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    ledger = Ledger.open(path, clock=StepClock(), ids=SequentialIds(), config=CompressionConfig())
    synth = SessionSynth(11, big_outputs=False)
    sid = ledger.start_session(
        model="gpt-4o",
        context_length=16_000,
        system_prompt=synth.system_prompt(),
        tools=synth.tools(),
    )
    msgs = synth.messages(60)
    ledger.append_messages(sid, msgs[:30])
    ledger.append_messages(sid, [{"role": "user", "content": "a big paste: " + "x" * 70 * 1024}])
    ledger.report_usage(sid, {"prompt_tokens": 9000, "completion_tokens": 100})
    for m in msgs[30:]:
        ledger.append_messages(sid, [m])
    await compact(ledger, sid, OfflineSummarizer())
    ledger.append_messages(ledger.tip(sid), [{"role": "user", "content": "after the compaction"}])
    ledger.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
