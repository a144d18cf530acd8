"""The segment-layout prototype (``bench/segment_store.py``, issue 14) runs the
event-store contract every backend must pass: one row per append keeps the contract,
except the streamed append, which it refuses (not built)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from segment_store import SegmentStore

from ctxledger.eventstore.base import StreamedRequest
from ctxledger.testing.eventstore import EventStoreContract, message


class TestSegmentStore(EventStoreContract):
    def make_store(self, path: Path) -> SegmentStore:
        return SegmentStore(path)

    def test_a_streamed_append_after_ordinary_ones_continues_the_log(
        self, store: SegmentStore
    ) -> None:
        """Refused, with nothing appended: the inherited streamed append looks for the
        log's end in the events table only, which here is not the end."""
        store.append("ses_a", [message("ses_a")], 0)
        with pytest.raises(NotImplementedError, match="no streamed append"):
            store.append_stream([StreamedRequest("ses_a", [message("ses_a")], 1)])
        assert store.last_seq() == 1 and store.stream_version("ses_a") == 1
