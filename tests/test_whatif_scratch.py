"""A what-if without ``--out`` replays into SQLite's private temporary database.

Nothing is written beside the recorded ledger or in the working directory (no file,
no WAL, no head anchor), the scratch log reads and verifies like a file ledger while
open, and the report equals one replayed into a file (``out``).
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest
from helpers.ledger_helpers import compact_now, deterministic_ledger

from ctxledger.analysis.whatif import history, replay_history, whatif
from ctxledger.compressor.config import CompressionConfig
from ctxledger.eventstore.space import TEMPORARY
from ctxledger.eventstore.sqlite import SQLiteEventStore
from ctxledger.ledger.facade import Ledger

WINDOW = CompressionConfig(context_length=4_000, threshold_floor_tokens=0)


def _recorded(path: Path) -> tuple[Ledger, str]:
    ledger = deterministic_ledger(path, config=WINDOW)
    sid = ledger.start_session(model="m", context_length=4_000, system_prompt="You code.")
    messages = []
    for n in range(40):
        messages.append({"role": "user", "content": f"step {n}: fix src/m{n}.py " + "x " * 80})
        messages.append({"role": "assistant", "content": f"done {n}"})
    messages[11] = {"role": "user", "content": "big " * 20_000}  # a blob (>= 64 KB)
    ledger.append_messages(sid, messages)
    compact_now(ledger, sid)
    return ledger, sid


def test_the_scratch_is_a_private_temporary_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, sid = _recorded(tmp_path / "rec.db")
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    before = sorted(os.listdir(tmp_path))
    hist = history(ledger, sid)
    with replay_history(hist) as (scratch, result):
        assert isinstance(scratch.store, SQLiteEventStore) and scratch.store.path == TEMPORARY
        assert scratch.store.verify().ok
        assert scratch.transcript.session(result.session_id).live
    assert not scratch.seal_head()  # closed, and never an anchor file for it
    assert sorted(os.listdir(tmp_path)) == before and os.listdir(work) == []
    in_memory = whatif(ledger, sid)
    to_file = whatif(ledger, sid, out=tmp_path / "out.db")
    assert msgspec.structs.replace(to_file, out=None) == in_memory
    assert os.listdir(work) == []
