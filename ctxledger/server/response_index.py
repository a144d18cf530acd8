"""Which recorded reply a Responses ``previous_response_id`` names, without a scan per request.

The proxy records a Responses reply with its response id on the reply's last message
(``formats.RESPONSE_ID``). :class:`ResponseIndex` maps those ids to message ids,
indexing each appended message once, oldest first, as the transcript grows. A ledger
folded by a rebuild keeps its message bodies in the log: the first lookup reads them
in batches *without keeping them* (the rebuild's memory saving stays), and a lookup
of an id nobody recorded costs a dict miss, not a read of the whole log.
"""

from __future__ import annotations

import itertools
import threading

from ctxledger.ledger import Ledger
from ctxledger.projections.transcript import StoredMessage, read_bodies
from ctxledger.server.formats import RESPONSE_ID

_BATCH = 512


class ResponseIndex:
    """response id -> the newest appended message ending that reply."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._lock = threading.Lock()
        self._of: dict[str, str] = {}
        self._messages: dict[str, StoredMessage] | None = None
        self._seen = 0

    def find(self, response_id: str) -> StoredMessage | None:
        """The message that ended reply `response_id` (None: no such reply recorded)."""
        with self._lock:
            messages = self.ledger.transcript.state.messages
            if messages is not self._messages:  # a new fold (rebuild): index it afresh
                self._messages, self._seen, self._of = messages, 0, {}
            new = len(messages) - self._seen
            if new > 0:
                fresh = list(itertools.islice(reversed(messages.items()), new))
                fresh.reverse()  # oldest first: a newer reply with the same id wins
                for start in range(0, len(fresh), _BATCH):
                    self._index(fresh[start : start + _BATCH])
                self._seen = len(messages)
            found = self._of.get(response_id)
            return messages.get(found) if found is not None else None

    def _index(self, chunk: list[tuple[str, StoredMessage]]) -> None:
        appended = [(mid, m) for mid, m in chunk if m.origin == "appended"]
        for (mid, _), body in zip(appended, read_bodies([m for _, m in appended]), strict=True):
            rid = body.get(RESPONSE_ID)
            if isinstance(rid, str):
                self._of[rid] = mid


__all__ = ["ResponseIndex"]
