"""What a walk over the log's long contents may skip (session 40).

``verify`` checks the derived value of each long message of the log, ``upgrade`` stores
the missing ones (:mod:`ctxledger.ledger.derived`); before session 40's verifywalk both
decoded every message row, a second decode of the log on each verify even when it held
no long content. A store now tells what it holds without reading it
(:class:`LongContentScan`: the lengths of its blobs and payloads, whether any value is
stored), and the walk decodes only the rows :func:`may_hold_long` keeps: a content of N
characters is at least N bytes, in its blob or inline in its payload.

Kept out of :mod:`ctxledger.eventstore.derived`: that module is in the import graph the
stored facts' version digests (:mod:`ctxledger.compressor.factstore`), so an edit there
would set aside every value stored before.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Set
from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

from ctxledger.events import MessageAppended
from ctxledger.eventstore.derived import STORED_MIN_CHARS

__all__ = ["LongContentScan", "SQLiteLongScan", "may_hold_long"]


@runtime_checkable
class LongContentScan(Protocol):
    """What a store tells of its long contents without reading them (both stores)."""

    def long_blob_refs(self, min_size: int) -> set[str]:
        """The refs of the blobs holding at least `min_size` bytes (read-only)."""
        ...

    def has_long_payload(self, min_size: int) -> bool:
        """Whether any row's payload holds at least `min_size` bytes (read-only)."""
        ...

    def has_derived(self) -> bool:
        """Whether any derived value is stored (read-only; no table yet: False)."""
        ...


#: how a ``MessageAppended`` payload ends as ctxledger writes it: with its content inline
#: (or none), or kept as a blob whose ref (64 hex digits) stands between the two parts
_INLINE_END = b',"content_ref":null}'
_REF_START, _REF_END = b',"content_ref":"', b'"}'
_REF_AT = -(len(_REF_END) + 64)


def may_hold_long(payload: bytes, schema: object, refs: Set[bytes]) -> bool:
    """Whether the stored row `payload` may decode to a message whose content is at least
    :data:`STORED_MIN_CHARS` long, given `refs`, every blob ref of that many bytes (pure).

    False only when it cannot: a payload shorter than that holds no such content inline,
    and one at today's schema whose last member (the one a decode keeps when a key is
    repeated) is a ``content_ref`` that is null, or plainly written and not in `refs`,
    references no such blob. Any other payload (a key order, spacing or escape that
    ctxledger does not write, an older schema) may: it is decoded, as before."""
    if len(payload) >= STORED_MIN_CHARS or schema != MessageAppended.SCHEMA:
        return True
    if payload.endswith(_INLINE_END):
        return False
    if not payload.endswith(_REF_END) or payload[_REF_AT - len(_REF_START) : _REF_AT] != _REF_START:
        return True
    ref = payload[_REF_AT : -len(_REF_END)]
    return b"\\" in ref or b'"' in ref or ref in refs


_ANY_DERIVED = "SELECT EXISTS (SELECT 1 FROM derived)"
# the lengths of the bytes a read gets, not the size column (a hand edit may change it);
# length() of a column reads its record header, never a blob's overflow pages: 0.04 ms
# for 667 blobs, 6 ms for the payloads of a 23k-event log. No kind test: the walk also
# decodes a row whose kind column is empty.
_LONG_BLOBS = "SELECT ref FROM blobs WHERE length(data) >= ?"
_LONG_PAYLOAD = "SELECT EXISTS (SELECT 1 FROM events WHERE length(payload) >= ?)"


class SQLiteLongScan:
    """The :class:`LongContentScan` of the SQLite store (its ``_conn``, ``_lock``,
    ``_errors``), a base of its :class:`~ctxledger.eventstore.sqlite_heads.HeadColumns`;
    the PostgreSQL one is in :mod:`ctxledger.eventstore.postgres_derived`."""

    _conn: sqlite3.Connection
    _lock: threading.RLock
    _errors: Callable[[str], AbstractContextManager[None]]

    def long_blob_refs(self, min_size: int) -> set[str]:
        """The refs of the blobs holding at least `min_size` bytes (read-only)."""
        with self._lock, self._errors("list the long blobs"):
            return {str(row[0]) for row in self._conn.execute(_LONG_BLOBS, (min_size,))}

    def has_long_payload(self, min_size: int) -> bool:
        """Whether any row's payload holds at least `min_size` bytes (read-only)."""
        with self._lock, self._errors("look for long payloads"):
            return bool(self._conn.execute(_LONG_PAYLOAD, (min_size,)).fetchone()[0])

    def has_derived(self) -> bool:
        """Whether any derived value is stored (read-only; no table yet: False)."""
        with self._lock, self._errors("look for derived values"):
            try:
                return bool(self._conn.execute(_ANY_DERIVED).fetchone()[0])
            except sqlite3.OperationalError as exc:
                if "no such table" not in str(exc):
                    raise
                return False
