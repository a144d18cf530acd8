"""The walks over a log's long contents (``verify``'s check of the derived values,
``upgrade``'s backfill) read nothing when the store holds no long content, and decode
only the rows that may hold one otherwise, with the results of a walk decoding every
row (session 40, verifywalk)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from helpers.pg_server import PgServer
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.clock import SequentialIds, StepClock
from ctxledger.compressor import factstore, normalstore
from ctxledger.events import MessageAppended, sha256_hex
from ctxledger.eventstore.base import EventStore
from ctxledger.eventstore.derived import STORED_MIN_CHARS
from ctxledger.eventstore.fingerprints import imported_modules
from ctxledger.eventstore.longscan import LongContentScan, may_hold_long
from ctxledger.eventstore.postgres import PostgresEventStore
from ctxledger.eventstore.rows import decode_stored
from ctxledger.eventstore.sqlite import SQLiteEventStore
from ctxledger.ledger import Ledger
from ctxledger.ledger import derived as walk
from ctxledger.ledger.derived import Backfill, backfill_derived, differing_values

_WORDS = ["retry", "src/app.py", "Error:", "délta", "ok"]
#: above STORED_MIN_CHARS: kept inline (a writer with this blob threshold, or an older one)
_INLINE = 4 * STORED_MIN_CHARS


def _long(seed: int, sep: str = " ") -> str:
    words = (_WORDS[(i * seed) % len(_WORDS)] for i in range(STORED_MIN_CHARS // 4))
    return f"{seed}:" + sep.join(words)


Opener = Callable[[int], EventStore]


@pytest.fixture(params=["sqlite", "postgres"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    """Opens the same ledger again, with the given blob threshold, on either backend."""
    if request.param == "sqlite":
        path = tmp_path / "w.db"
        return lambda threshold: SQLiteEventStore(path, blob_threshold=threshold)
    server: PgServer = request.getfixturevalue("pg_server")
    name = hashlib.sha256(str(tmp_path).encode()).hexdigest()[:20]
    url = f"{server.url}?schema=w_{name}"
    return lambda threshold: PostgresEventStore(url, blob_threshold=threshold)


def _append(opener: Opener, contents: list[str], threshold: int = 64 * 1024) -> None:
    ids = SequentialIds(namespace=str(threshold))
    ledger = Ledger(opener(threshold), clock=StepClock(), ids=ids)
    try:
        sid = ledger.start_session(model="m", context_length=200_000, system_prompt="x")
        for content in contents:
            ledger.append_messages(sid, [{"role": "user", "content": content}])
            ledger.append_messages(sid, [{"role": "assistant", "content": "noted"}])
    finally:
        ledger.close()


class _Counts:
    """How many rows the walks decoded, and whether they read the log at all."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, store: EventStore) -> None:
        self.decoded = self.reads = 0
        decode, read = walk.decode_stored, store.read_stored

        def counted_decode(payload: bytes, schema: int) -> Any:
            self.decoded += 1
            return decode(payload, schema)

        def counted_read(*args: Any) -> Iterator[Any]:
            self.reads += 1
            return read(*args)

        monkeypatch.setattr(walk, "decode_stored", counted_decode)
        monkeypatch.setattr(store, "read_stored", counted_read)


def _every_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk as before: every message row decoded (the reference)."""
    monkeypatch.setattr(walk, "_long_refs", lambda store: (True, None))


def test_a_log_without_long_contents_is_not_read(
    opener: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Short messages, one kept as a blob (100K characters): no blob and no payload can
    hold a long content, so neither walk reads a row; nor does verify's while no derived
    value is stored, and with values stored (of contents not in this log) it reads none."""
    _append(opener, ["short", "x" * 100_000, "y" * (STORED_MIN_CHARS - 1)])
    with opener(64 * 1024) as store:
        assert isinstance(store, LongContentScan)
        assert not store.has_derived() and not store.long_blob_refs(STORED_MIN_CHARS)
        assert not store.has_long_payload(STORED_MIN_CHARS)
        counts = _Counts(monkeypatch, store)
        assert list(differing_values(store)) == []
        assert backfill_derived(store) == Backfill(0, 0, 0)
        store.put_derived("ab" * 32, normalstore.KIND, "v", b"\x03")
        assert store.has_derived()
        assert list(differing_values(store)) == []
        assert (counts.reads, counts.decoded) == (0, 0)


def test_only_rows_that_may_hold_a_long_content_are_decoded_with_the_same_results(
    opener: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One long content kept as a blob, one inline (a writer with a higher blob
    threshold), among short ones: the walks decode those two rows, and find and mend
    what a walk decoding every row finds and mends."""
    blob, inline = _long(1, "  "), _long(2, "  ")
    _append(opener, ["short", "x" * 100_000, blob, "again"])
    _append(opener, [inline, "last"], threshold=_INLINE)
    version = normalstore.normal_version()
    assert version is not None
    refs = [sha256_hex(text.encode("utf-8")) for text in (blob, inline)]
    with opener(64 * 1024) as store:
        assert isinstance(store, LongContentScan) and store.has_long_payload(STORED_MIN_CHARS)
        assert store.long_blob_refs(STORED_MIN_CHARS) == {refs[0]}
        values = [store.get_derived(ref, normalstore.KIND, version) for ref in refs]
        assert values == [b"\x00", b"\x00"]  # (double-spaced: not their own normal forms)

        def tamper() -> None:
            for ref in refs:
                store.put_derived(ref, normalstore.KIND, version, b"\x03")

        tamper()
        counts = _Counts(monkeypatch, store)
        found = list(differing_values(store))
        assert counts.decoded == 2
        assert [(d.ref, d.kind) for d in found] == [(ref, normalstore.KIND) for ref in refs]
        mended = backfill_derived(store)
        assert counts.decoded == 4 and mended == Backfill(0, 2, 0)
        assert [store.get_derived(ref, normalstore.KIND, version) for ref in refs] == values
        tamper()
        _every_row(monkeypatch)
        assert list(differing_values(store)) == found
        messages = sum(1 for row in store.read_stored() if row[4] == "MessageAppended")
        assert counts.decoded == 4 + messages  # (the reference walk decodes every message)
        assert backfill_derived(store) == mended
        assert counts.decoded == 4 + 2 * messages
        assert list(differing_values(store)) == []


# --- the row filter, against the decoder ------------------------------------------------

#: two refs as ctxledger writes them, and two a hand-made blob row may hold: their last
#: 64 bytes in a payload are a \\u escape (the first), or hold quotes (the second)
_LONG_REFS = [hashlib.sha256(bytes([i])).hexdigest() for i in range(2)] + ["z" * 59, "q" * 40]
_SHORT_REF = hashlib.sha256(b"short").hexdigest()
_LONG = frozenset(ref.encode() for ref in _LONG_REFS)


def _fields(ref: str | None, content: str) -> dict[str, Any]:
    event = MessageAppended(
        event_id="evt_1",
        session_id="ses_1",
        at=1.0,
        message_id="msg_1",
        message={"role": "user", "content": None if ref else content},
        tokens=3,
        encoding="cl100k_base",
        content_ref=ref,
    )
    fields: dict[str, Any] = msgspec.to_builtins(event)
    return fields


def _escaped(text: str) -> str:
    """`text`'s first character as a JSON \\u escape (a decoder reads the same string)."""
    return f"\\u{ord(text[0]):04x}{text[1:]}" if text else text


#: ways a payload may spell an event: ctxledger's, and others a decoder reads the same
_FORMS: dict[str, Callable[[dict[str, Any]], bytes]] = {
    "written": lambda f: msgspec.json.encode(f),
    "spaced": lambda f: json.dumps(f, indent=1).encode(),
    "sorted": lambda f: json.dumps(f, sort_keys=True, separators=(",", ":")).encode(),
    "ascii": lambda f: json.dumps(f, separators=(",", ":")).encode(),
    "escaped ref": lambda f: msgspec.json.encode(f).replace(
        f'"{f["content_ref"]}"'.encode(), f'"{_escaped(f["content_ref"] or "")}"'.encode()
    ),
    "repeated key, long first": lambda f: (
        msgspec.json.encode(f)[:-1]
        + f',"content_ref":"{_LONG_REFS[1]}","content_ref":{json.dumps(f["content_ref"])}}}'.encode()
    ),
    "repeated key, long last": lambda f: (
        msgspec.json.encode(f)[:-1]
        + f',"content_ref":null,"content_ref":"{_LONG_REFS[0]}"}}'.encode()
    ),
    "repeated key, tucked": lambda f: (
        msgspec.json.encode(f)[:-1]
        + f',"content_ref":"{"a" * 7}","content_ref":{json.dumps(f["content_ref"])}}}'.encode()
    ),
    "key in the message": lambda f: msgspec.json.encode(
        {**f, "message": {**f["message"], "content_ref": _LONG_REFS[0]}}
    ),
}


@pytest.mark.parametrize("form", sorted(_FORMS))
@given(content=st.text(max_size=30))
def test_a_row_is_skipped_only_when_its_decode_holds_no_long_content(
    form: str, content: str
) -> None:
    for ref in [None, _SHORT_REF, *_LONG_REFS]:
        payload = _FORMS[form](_fields(ref, content))
        decoded = decode_stored(payload, MessageAppended.SCHEMA)
        assert isinstance(decoded, MessageAppended)
        kept = may_hold_long(payload, MessageAppended.SCHEMA, _LONG)
        if decoded.content_ref in _LONG_REFS:
            assert kept, payload
        if form in ("written", "key in the message") and ref not in _LONG_REFS:
            assert not kept, payload  # (what ctxledger writes is told apart without a decode)
        assert may_hold_long(payload, MessageAppended.SCHEMA + 1, _LONG)  # (an older shape)


def test_a_payload_that_may_hold_a_long_content_inline_is_kept() -> None:
    payload = msgspec.json.encode(_fields(None, "é" * (STORED_MIN_CHARS // 2)))
    assert len(payload) >= STORED_MIN_CHARS and may_hold_long(payload, 1, _LONG)
    assert not may_hold_long(msgspec.json.encode(_fields(None, "é" * 10)), 1, _LONG)


def test_the_scan_is_outside_the_graphs_the_stored_values_are_versioned_by() -> None:
    """An edit of the scan sets aside no stored value (the facts' version digests every
    module its root imports, ``eventstore.derived`` among them)."""
    for root in (factstore.ROOT, normalstore.ROOT):
        assert "ctxledger.eventstore.longscan" not in imported_modules(root)
    assert "ctxledger.eventstore.derived" in imported_modules(factstore.ROOT)
