"""Message validation: every bad message a user can send is a clear InvalidMessage."""

from __future__ import annotations

import collections
import enum
import math
import re
import types

import pytest

from ctxledger import Ledger
from ctxledger.errors import InvalidEvent, InvalidMessage
from ctxledger.messages import (
    CallLedger,
    content_text,
    stored_copy,
    validate_message,
    validate_messages,
)


def call(cid: str, name: str = "terminal", args: object = '{"command": "ls"}') -> dict[str, object]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


GOOD = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c2")]},
    {"role": "tool", "tool_call_id": "c1", "content": "a"},
    {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "b"}]},
    {"role": "assistant", "content": "done", "reasoning_content": "kept as an extra"},
]


def test_a_valid_conversation_passes_unchanged() -> None:
    assert validate_messages(GOOD) == GOOD


@pytest.mark.parametrize(
    ("message", "fragment"),
    [
        ({"role": "robot", "content": "x"}, "unknown role 'robot'"),
        ({"content": "x"}, "unknown role None"),
        ({"role": "tool", "content": "x"}, "without a string 'tool_call_id'"),
        ({"role": "user", "content": 5}, "content must be a string"),
        ({"role": "user"}, "no 'content' field"),
        ({"role": "user", "content": [{"text": "x"}]}, "no string 'type'"),
        ({"role": "assistant", "content": None}, "neither content nor tool_calls"),
        (
            {"role": "assistant", "content": None, "tool_calls": [call("c", args={"a": 1})]},
            "'arguments' must be a JSON string",
        ),
        (
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}],
            },
            "no function name",
        ),
        ({"role": "user", "content": "x", "tool_calls": [call("c")]}, "only allowed on assistant"),
        ("not a dict", "must be a JSON object"),
        # a role that cannot be looked up (unhashable) was a TypeError, a 500 over HTTP
        ({"role": ["user"], "content": "x"}, "unknown role ['user']"),
        ({"role": {"a": 1}, "content": "x"}, "unknown role {'a': 1}"),
    ],
)
def test_bad_message_shapes_are_rejected_with_a_clear_error(message: object, fragment: str) -> None:
    with pytest.raises(InvalidMessage, match=None) as info:
        validate_message(message, 3)
    assert fragment in str(info.value)
    assert str(info.value).startswith("message 3: ")


def test_tool_result_without_an_earlier_call_is_an_orphan() -> None:
    with pytest.raises(InvalidMessage, match="no earlier assistant message issued"):
        validate_messages(
            [
                {"role": "user", "content": "x"},
                {"role": "tool", "tool_call_id": "zz", "content": "r"},
            ]
        )


def test_duplicate_tool_call_ids_are_rejected() -> None:
    dup_in_one = {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c1")]}
    with pytest.raises(InvalidMessage, match="duplicate tool_call id 'c1'"):
        validate_messages([dup_in_one])
    with pytest.raises(InvalidMessage, match="already issued earlier"):
        validate_messages(
            [*GOOD[:3], {"role": "assistant", "content": None, "tool_calls": [call("c1")]}]
        )


def test_second_result_for_one_call_is_rejected() -> None:
    with pytest.raises(InvalidMessage, match="second tool result"):
        validate_messages([*GOOD[:3], {"role": "tool", "tool_call_id": "c1", "content": "again"}])


def test_validation_uses_but_does_not_change_the_session_ledger() -> None:
    ledger = CallLedger(issued={"old"})
    validate_messages([{"role": "tool", "tool_call_id": "old", "content": "r"}], ledger)
    assert ledger.answered == set()


def test_content_text_joins_text_parts() -> None:
    assert (
        content_text(
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "a"},
                    {"type": "image_url"},
                    {"type": "text", "text": "b"},
                ],
            }
        )
        == "a\nb"
    )


class _Opaque:
    """A Python object no JSON encoder knows."""


@pytest.mark.parametrize(
    ("message", "says"),
    [
        ({"role": "user", "content": "x", None: 1}, "the message has a key that is not text: None"),
        (
            {"role": "user", "content": "x", "extra": {("a",): 1}},
            "extra has a key that is not text",
        ),
        (
            {"role": "user", "content": [{"type": "blob", "data": {None: 1}}]},
            "content[0].data has a key that is not text",
        ),
        ({"role": "user", "content": "x", "extra": _Opaque()}, "extra is a Python _Opaque"),
    ],
)
def test_a_message_json_cannot_hold_is_refused_and_nothing_is_appended(
    ledger: Ledger, message: dict[object, object], says: str
) -> None:
    # a key that is not text or an object JSON cannot encode was a TypeError traceback
    # (later an InvalidEvent from the store); now refused with the message, named
    sid = ledger.start_session(model="m", context_length=16_000)
    before = ledger.store.last_seq()
    with pytest.raises(InvalidMessage) as info:
        ledger.append_messages(sid, [{"role": "user", "content": "ok"}, message])
    assert f"message 1: {says}" in str(info.value)
    assert ledger.store.last_seq() == before


def test_a_lone_surrogate_is_refused_when_stored_and_nothing_is_appended(ledger: Ledger) -> None:
    # a lone surrogate in a part of unknown type was a UnicodeEncodeError from the library
    sid = ledger.start_session(model="m", context_length=16_000)
    before = ledger.store.last_seq()
    message = {"role": "user", "content": [{"type": "blob", "data": "\ud800"}]}
    with pytest.raises(InvalidEvent, match="not valid Unicode"):
        ledger.append_messages(sid, [{"role": "user", "content": "ok"}, message])
    assert ledger.store.last_seq() == before


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"score": math.nan}, "score is nan: JSON has no NaN or infinity"),
        ({"meta": {"w": [1.5, math.inf]}}, "meta.w[1] is inf: JSON has no NaN or infinity"),
        ({"meta": {"w": -math.inf}}, "meta.w is -inf"),
        ({"tags": {"a", "b"}}, "tags is a Python set, which JSON cannot hold"),
        ({"tags": frozenset({"a"})}, "tags is a Python frozenset"),
        ({"blob": b"\x00\x01"}, "blob is a Python bytes"),
        ({"meta": {1: "one"}}, "meta has a key that is not text: 1"),
        ({"meta": {"x-y z": [{2.5: 1}]}}, "meta['x-y z'][0] has a key that is not text: 2.5"),
        # more digits than Python writes as text: a ValueError traceback from the counter;
        # 4,300 with a sign: stored, then the event could not be read back (msgspec)
        ({"n": [1, 10**5000]}, "n[1] is an integer of 5,001 digits: at most 4,300"),
        (
            {"n": -(10**4299)},
            "n is an integer of 4,300 digits: at most 4,300 are stored and read back (4,299 with a minus sign)",
        ),
    ],
)
def test_a_value_msgspec_would_store_changed_is_refused(
    ledger: Ledger, extra: dict[str, object], says: str
) -> None:
    # msgspec stores NaN and the infinities as null, a set as a list, bytes as base64 and
    # an int key as text, without a word: the message read back was not the one sent
    sid = ledger.start_session(model="m", context_length=16_000)
    before = ledger.store.last_seq()
    message = {"role": "assistant", "content": [{"type": "text", "text": "a"}], **extra}
    with pytest.raises(InvalidMessage) as info:
        ledger.append_messages(sid, [{"role": "user", "content": "ok"}, message])
    assert f"message 1: {says}" in str(info.value)
    assert ledger.store.last_seq() == before


class _Level(enum.IntEnum):
    LOW = 1


class _Color(enum.StrEnum):
    RED = "red"


class _Seq(list):  # as ruamel's CommentedSeq
    pass


_Point = collections.namedtuple("_Point", "x y")


def test_json_values_of_every_kind_are_stored_as_sent(ledger: Ledger) -> None:
    # finite floats, big ints, enums of str and int (stored as their values), tuples,
    # namedtuples and list subclasses (a JSON list) nested anywhere: the last two were
    # refused ("the message is not JSON", no path) by the review's base
    sid = ledger.start_session(model="m", context_length=16_000)
    extra = {
        "f": [0.1, -2.5e300, 5e-324],
        # a positive int of 4,300 digits is read back (review G2), a negative one of 4,299
        "big": [10**30, -(10**4299 - 1), 10**4300 - 1],
        "mixed": [1.5, 2, 10**400],  # past a float's range: the fast number check gives way
        "n": None,
        "b": [True],
        "e": {"level": _Level.LOW, "color": _Color.RED},
    }
    odd = {"t": (1, "a"), "meta": {"pt": _Point(1, 2), "seq": _Seq([_Seq([3]), 4.5])}}
    ledger.append_messages(sid, [{"role": "user", "content": "x", **extra, **odd}])
    plain = {"t": [1, "a"], "meta": {"pt": [1, 2], "seq": [[3], 4.5]}}
    expected = {"role": "user", "content": "x", **extra, **plain}
    assert ledger.api_messages(sid)[-1] == expected
    # as stored: read back from the log
    (stored,) = [r.event.message for r in ledger.store.read_all() if hasattr(r.event, "message")]
    assert stored == expected


class _Float(float):  # as numpy.float64
    pass


@pytest.mark.parametrize(
    ("meta", "says"),
    [
        ({"w": [0.5] * 5_000 + [math.nan]}, "meta.w[5000] is nan"),
        ({"w": [*range(5_000), 10**4300]}, "meta.w[5000] is an integer of 4,301 digits"),
        ({"w": {"a": 1.0, "b": -math.inf}}, "meta.w.b is -inf"),
        ({"w": [1.0, _Float(2.0)]}, "meta.w[1] is a Python _Float, which JSON cannot hold"),
        ({"w": types.MappingProxyType({})}, "meta.w is a Python mappingproxy, which JSON"),
    ],
)
def test_a_bad_number_among_many_is_named(ledger: Ledger, meta: dict, says: str) -> None:
    """Containers of numbers are judged at C speed (review R6); the odd one is still
    found and named, and a float subclass msgspec cannot write (numpy's float64) is
    named by its path, not as an event JSON cannot hold (review I3)."""
    sid = ledger.start_session(model="m", context_length=16_000)
    before = ledger.store.last_seq()
    with pytest.raises(InvalidMessage, match=re.escape(f"message 0: {says}")):
        ledger.append_messages(sid, [{"role": "user", "content": "x", "meta": meta}])
    assert ledger.store.last_seq() == before


@pytest.mark.parametrize("refusal", [5, {}, None, ["no"]])
def test_null_content_with_a_refusal_that_is_not_text_is_still_refused(refusal: object) -> None:
    message = {"role": "assistant", "content": None, "refusal": refusal}
    with pytest.raises(InvalidMessage, match="neither content nor tool_calls"):
        validate_message(message, 0)


@pytest.mark.parametrize("refusal", ["I can't help with that.", ""])
def test_a_refusal_with_null_content_is_stored_as_sent(ledger: Ledger, refusal: str) -> None:
    # "" too: the proxy records a streamed refusal whose pieces were all empty as sent
    sid = ledger.start_session(model="m", context_length=16_000)
    refused = {"role": "assistant", "content": None, "refusal": refusal}
    ledger.append_messages(sid, [{"role": "user", "content": "do it"}, refused])
    assert ledger.api_messages(sid)[-1] == refused


def test_a_checked_message_is_its_stored_copy() -> None:
    """validate_message returns stored_copy's form (an import that checked its messages
    ahead makes that form itself: s41), a plain dict, never the caller's mapping."""
    inner = {"x": 1}
    message = types.MappingProxyType({"role": "user", "content": "hi", "extra": inner})
    checked, stored = validate_message(message), stored_copy(message)
    assert type(checked) is type(stored) is dict
    assert checked == stored == dict(message)
    assert checked is not stored and checked["extra"] is stored["extra"] is inner
