"""How ``ledger_merged_inline.db`` (and ``ledger_merged_inline.json``) were made: run with
the ctxledger of main before layout contents could be stored by reference (commit
cea491c: every ``SessionSwitched`` at schema 1, its layout messages inline).

The file is the scratch ledger of a what-if (``whatif(..., out=)``) of the pathological
bench's session holding one 66 KB user message: its last compaction merges the summary
after that message, so one ``SessionSwitched`` holds the 66 KB message again, inline,
beside the blob its ``MessageAppended`` stored. The JSON records what that main
computed: a full rebuild's fingerprint, ``verify``'s head, each session's API view
hash and the sha256 of the what-if report of the file's live tip. Today's code must
open, verify, rebuild and replay it to the same values, and its own what-if of it
(whose scratch stores that message by reference) must report the same bytes
(``tests/test_layout_refs.py``). Recipe (from a checkout of that commit)::

    PYTHONPATH=<old checkout> python tests/golden/make_merged_inline_ledger.py out.db out.json
    python -c "import sqlite3; c = sqlite3.connect('out.db'); c.execute('VACUUM'); c.execute('PRAGMA journal_mode=DELETE')"
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile

import anyio
import msgspec

from ctxledger import Ledger, OfflineSummarizer, compact
from ctxledger.analysis.whatif import whatif
from ctxledger.eventstore import SQLiteEventStore
from ctxledger.projections import Projector

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import pathological_bench as bench


def digest(value: object) -> str:
    return hashlib.sha256(msgspec.json.encode(value)).hexdigest()


def facts_of(path: str) -> dict[str, object]:
    """What the JSON records of the ledger at `path` (read only)."""
    with SQLiteEventStore(path) as store:
        rebuilt = Projector.rebuild(store, use_checkpoint=False)
        report = store.verify()
        sessions = sorted(rebuilt.transcript.state.sessions)
        views = {s: digest(rebuilt.transcript.api_messages(s)) for s in sessions}
    ledger = Ledger.open(path)
    try:
        tip = [lin.session_id for lin in ledger.sessions() if not lin.ended][-1]
        report_hash = digest(whatif(ledger, tip, summarizer=OfflineSummarizer()))
    finally:
        ledger.close()
    return {
        "fingerprint_sha256": hashlib.sha256(rebuilt.fingerprint()).hexdigest(),
        "head_seq": report.head_seq,
        "head_hash": report.head_hash,
        "api_views": views,
        "whatif_tip": tip,
        "whatif_sha256": report_hash,
    }


def main(path: str, facts: str) -> None:
    for suffix in ("", "-wal", "-shm", ".lock", ".head", ".leases"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    with tempfile.TemporaryDirectory() as tmp:
        ledger, sid = bench._ledger(tmp, "a.db", bench.session("user", 66_000))
        anyio.run(compact, ledger, sid, OfflineSummarizer())
        whatif(ledger, sid, summarizer=OfflineSummarizer(), out=path)
        ledger.close()
    with open(facts, "w", encoding="utf-8") as f:
        json.dump(facts_of(path), f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
