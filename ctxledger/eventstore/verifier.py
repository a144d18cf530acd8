"""The walk that checks a stored hash chain: :class:`ChainVerifier` fed rows in seq
order (pure: no I/O), its :class:`VerifyReport`, and the blob verdicts it reads
(:class:`BlobChecks`). Every backend's ``verify`` runs it, so a ledger copied between
stores verifies in both (moved out of :mod:`ctxledger.eventstore.rows` in session 45)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

import msgspec

from ctxledger.errors import InvalidEvent
from ctxledger.events import MessageAppended, SessionSwitched, ToolOutputPersisted
from ctxledger.eventstore.contents import layout_problem, layout_refs
from ctxledger.eventstore.rows import (
    GENESIS_HASH,
    NO_HEAD,
    HeadedRow,
    StoredRow,
    chain_hash,
    decode_stored,
    head_columns,
    link_hash,
    row_digest,
    shown,
    split_linked,
)

__all__ = ["BlobChecks", "ChainVerifier", "VerifyReport", "blob_problem"]


class VerifyReport(msgspec.Struct, frozen=True):
    ok: bool
    events_checked: int
    blobs_checked: int
    first_bad_seq: int | None = None
    first_bad_event_id: str | None = None
    problem: str | None = None
    #: the last event that verified and the hash that commits to the log up to it (the
    #: value to keep elsewhere and pass to ``verify --expect-head``); None for an empty log
    head_seq: int | None = None
    head_hash: str | None = None
    #: what was not checked, said beside an ok (a read-only verify with no anchor key)
    warning: str | None = None


def blob_problem(ref: str, size: int, data: bytes) -> str | None:
    """What is wrong with a stored blob (its row's size, its sha256 ref), or None (pure)."""
    if len(data) != size:
        return f"blob {ref} holds {len(data)} bytes, its row says {size}"
    if hashlib.sha256(data).hexdigest() != ref:
        return f"blob {ref} no longer hashes to its ref"
    return None


class BlobChecks(dict[str, "str | None"]):
    """A verify's blob verdicts: ref -> None when the bytes hash to the ref, else what is
    wrong (:func:`blob_problem`); and the intact blobs whose bytes are not UTF-8 text
    (``not_text``), which no message content may reference (a tool output may)."""

    def __init__(self) -> None:
        super().__init__()
        self.not_text: set[str] = set()

    def check(self, ref: str, size: int, data: bytes) -> None:
        """Check one stored blob (its row's size, its bytes)."""
        self[ref] = problem = blob_problem(ref, size, data)
        if problem is None and not data.isascii():
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                self.not_text.add(ref)


class ChainVerifier:
    """Checks stored rows, fed in seq order, and keeps the first problem found (pure: no I/O).

    Two row formats chain together, so a log written before the linked format still
    verifies after it: a *per-event* row holds ``chain_hash`` of the previous row
    (64 hex digits); a *linked* row holds its own digest (:func:`row_digest`), and the
    last row of its append also ``:`` and the append's :func:`link_hash`. A row whose
    payload no longer matches its digest is named; an append whose link does not match
    (a digest, an id, a position or a payload was rewritten to match) is named by its
    first row. `blobs` maps every stored blob ref to ``None`` when its bytes hash to
    the ref, or to what is wrong with it; an event that references a bad or missing
    blob is reported at that event.
    """

    def __init__(self, blobs: Mapping[str, str | None]) -> None:
        self.blobs = blobs
        self.not_text = blobs.not_text if isinstance(blobs, BlobChecks) else frozenset[str]()
        self.prev_hash = GENESIS_HASH
        self.next_seq = 1
        self.checked = 0
        self.versions: dict[str, int] = {}
        self.problem: tuple[int | None, str | None, str] | None = None
        # the rows of an append whose link row has not been fed yet
        self._open: list[StoredRow | HeadedRow] = []

    def feed(self, rows: Iterable[StoredRow] | Iterable[HeadedRow]) -> bool:
        """Check `rows` (the next ones in seq order); False once a problem was found."""
        if self.problem is not None:
            return False
        for row in rows:
            problem = self._check_row(row)
            if problem is not None:
                self.problem = problem
                return False
        return True

    def _check_row(self, row: StoredRow | HeadedRow) -> tuple[int | None, str | None, str] | None:
        seq, stream, version, event_id, kind, schema, payload, stored_hash = row[:8]
        head = row[8:]  # a HeadedRow's head columns (not hashed: checked against the payload)
        previous_version = self.versions.get(stream, 0)
        if seq != self.next_seq:
            return self._blame(row, f"gap in the log: seq {self.next_seq} is missing")
        if version != previous_version + 1:
            return self._blame(
                row,
                f"gap in stream {shown(stream, whole=True)}: version {version} follows {previous_version}",
            )
        linked = split_linked(stored_hash)
        if self._open and (linked is None or self._open[0][1] != stream):
            return self._blame(self._open[0], "an append ends without its chain link")
        if linked is not None:
            if linked[0] != row_digest(payload):
                return self._blame(row, "hash mismatch: this event (or its row) was altered")
        elif (
            chain_hash(self.prev_hash, seq, stream, version, event_id, kind, schema, payload)
            != stored_hash
        ):
            return self._blame(row, "hash mismatch: this event (or its row) was altered")
        problem = self._check_payload(payload, kind, schema, stream, event_id)
        if (
            problem is None
            and head
            and head != NO_HEAD
            and head != head_columns(stream, schema, payload)
        ):
            problem = "the row's message_id/tokens columns disagree with its payload"
        if problem is not None:
            return self._blame(row, problem)
        self.versions[stream] = version
        self.next_seq = seq + 1
        if linked is None:
            self.prev_hash = stored_hash
            self.checked += 1
            return None
        self._open.append(row)
        if not linked[1]:
            return None
        return self._close_append(seq, stream, linked[1])

    def _close_append(
        self, seq: int, stream: str, stored_link: str
    ) -> tuple[int | None, str | None, str] | None:
        """Check the link of the open append, whose last row (at `seq`) was just fed."""
        group, self._open = self._open, []
        first = group[0]
        link = link_hash(
            self.prev_hash,
            first[0],
            stream,
            first[2],
            [(r[3], r[4], r[5], r[6]) for r in group],
            [r[7].partition(":")[0] for r in group],
        )
        if link != stored_link:
            return self._blame(
                first,
                f"hash mismatch: the append of seq {first[0]}..{seq} was altered "
                "(a row's id, kind, position or payload, or its link)",
            )
        self.prev_hash = link
        self.checked += len(group)
        return None

    def _blame(
        self, row: StoredRow | HeadedRow, problem: str
    ) -> tuple[int | None, str | None, str]:
        # rows of the open append before the blamed one passed their own checks
        self.checked += sum(1 for r in self._open if r[0] < row[0])
        return (row[0], row[3], problem)

    def _check_payload(
        self, payload: bytes, kind: str, schema: int, stream: str, event_id: str
    ) -> str | None:
        try:
            event = decode_stored(payload, schema)
        except InvalidEvent as exc:
            return f"undecodable payload: {exc}"
        if (event.event_id, event.session_id, type(event).__name__) != (event_id, stream, kind):
            return "payload disagrees with the row's event id, stream or kind"
        if isinstance(event, MessageAppended) and event.content_ref is not None:
            ref = event.content_ref
            if ref not in self.blobs:
                return f"missing blob {ref}: the message content is gone"
            if ref in self.not_text:
                return f"blob {ref} is not UTF-8 text: the message content cannot be read"
        elif isinstance(event, SessionSwitched):
            return self._layout_blobs(event, schema)
        elif isinstance(event, ToolOutputPersisted) and event.blob_ref in self.blobs:
            ref = event.blob_ref  # a tool output's blob is stored by the caller; absent is allowed
        else:
            return None
        bad = self.blobs[ref]
        return None if bad is None else f"blob mismatch: {bad}"

    def _layout_blobs(self, event: SessionSwitched, schema: int) -> str | None:
        """What is wrong with a switch's stored layout or the blobs it references, or None."""
        problem = layout_problem(event, schema)
        if problem is not None:
            return problem
        for ref in layout_refs(event):
            if ref not in self.blobs:
                return f"missing blob {ref}: a layout message's content is gone"
            bad = self.blobs[ref]
            if bad is not None:
                return f"blob mismatch: {bad}"
            if ref in self.not_text:
                return f"blob {ref} is not UTF-8 text: a layout message's content cannot be read"
        return None

    def report(self) -> VerifyReport:
        """The verdict so far: the first problem found, else any bad blob no event referenced."""
        if self.problem is None and self._open:
            self.problem = self._blame(self._open[0], "the log ends inside an append")
        if self.problem is None:
            bad = next((why for why in self.blobs.values() if why is not None), None)
            if bad is not None:
                self.problem = (None, None, f"blob mismatch: {bad}")
        head = (
            (self.next_seq - 1, self.prev_hash) if self.prev_hash != GENESIS_HASH else (None, None)
        )
        if self.problem is None:
            return VerifyReport(
                ok=True,
                events_checked=self.checked,
                blobs_checked=len(self.blobs),
                head_seq=head[0],
                head_hash=head[1],
            )
        seq, event_id, problem = self.problem
        return VerifyReport(
            ok=False,
            events_checked=self.checked,
            blobs_checked=len(self.blobs),
            first_bad_seq=seq,
            first_bad_event_id=event_id,
            problem=problem,
            head_seq=head[0],
            head_hash=head[1],
        )
