"""How ``ledger_pre_sysrole.db`` (and ``ledger_pre_sysrole.json``) were made: run with the
ctxledger of main before the system prompt's role was stored (session 38; commit
d92b741), so every ``SystemPromptSet`` and ``SessionSwitched`` in it is as main wrote it.

The file holds a session started with a system prompt, compacted twice (the second
time after a mid-session prompt change, so the switch carries the changed prompt and
its compaction note), and a session without a prompt. The JSON beside it records each
session's API view as main gave it (the sha256 of its JSON). ``tests/test_system_role.py`` checks that today's
code opens it, verifies it, folds every row back to its stored bytes, replays its
compactions without drift and gives the same views. Recipe::

    PYTHONPATH=<main checkout> python tests/golden/make_pre_sysrole_ledger.py out.db out.json
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import sys

import msgspec

from ctxledger import CompressionConfig, Ledger, OfflineSummarizer, compact
from ctxledger.clock import SequentialIds, StepClock
from ctxledger.demo.synth import SessionSynth
from ctxledger.ledger.prompt import set_system_prompt


def main(db: str, out: str) -> None:
    config = CompressionConfig(context_length=16_000, threshold_floor_tokens=0)
    ledger = Ledger.open(db, clock=StepClock(), ids=SequentialIds("g"), config=config)
    synth = SessionSynth(7)
    sid = ledger.start_session(
        model="m", context_length=16_000, system_prompt=synth.system_prompt(), tools=synth.tools()
    )
    turns = list(synth.turns(8))
    for batch in turns[:4]:
        ledger.append_messages(sid, batch)
    asyncio.run(compact(ledger, sid, OfflineSummarizer()))
    tip = ledger.tip(sid)
    set_system_prompt(ledger, tip, "You are terse now. Answer in one line.")
    for batch in turns[4:]:
        ledger.append_messages(tip, batch)
    asyncio.run(compact(ledger, tip, OfflineSummarizer()))
    plain = ledger.start_session(model="m", context_length=16_000)
    ledger.append_messages(plain, [{"role": "user", "content": "no prompt here"}])
    views = {
        s: hashlib.sha256(msgspec.json.encode(ledger.api_messages(s))).hexdigest()
        for s in [*ledger.chains.chain(sid), plain]
    }
    ledger.close()
    with open(out, "w", encoding="utf-8") as f:
        json.dump(views, f, indent=1, sort_keys=True)
        f.write("\n")
    conn = sqlite3.connect(db)
    conn.execute("VACUUM")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
