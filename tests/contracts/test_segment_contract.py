"""The segment-layout prototype (``bench/segment_store.py``, issue 14) runs the
event-store contract every backend must pass: one row per append keeps the contract."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from segment_store import SegmentStore

from ctxledger.testing.eventstore import EventStoreContract


class TestSegmentStore(EventStoreContract):
    def make_store(self, path: Path) -> SegmentStore:
        return SegmentStore(path)
