"""A client that sends the recorded reply back normalised continues its line (session 41).

Found with the real hermes-agent 0.19.0 as a client of ``ctxledger serve``: before each
request Hermes trims every message's text and re-encodes each tool call's arguments
(compact, sorted keys; ``agent/conversation_loop.py``). The ledger had recorded the
model's arguments as the model wrote them, so every turn after a tool call was a new
branch. Now a text is compared trimmed and arguments by their JSON value; a call whose
value changed (or a text that did) is still another history.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import openai
import pytest
from helpers.fake_upstream import Raw, Say
from helpers.server_rig import Rig, rig
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.events import MessageAppended, SessionStarted
from ctxledger.server.history import same_message

pytestmark = pytest.mark.anyio

ARGS = '{ "path": "a.py",  "lines": [1, 2], "opts": {"z": true, "a": null} }'


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _reply(content: str | None, arguments: str) -> Raw:
    """A chat completion with the model's own spacing: text and one tool call."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read", "arguments": arguments},
    }
    message = {"role": "assistant", "content": content, "tool_calls": [call]}
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
    }
    return Raw((json.dumps(body).encode(),))


async def _two_turns(r: Rig, sent_back: dict[str, Any]) -> list[Any]:
    """Ask, get the call, send `sent_back` as the assistant message with the tool's
    result; the ledger's events."""
    client = r.openai(**{"X-Ctxledger-Session": "trim"})
    ask = {"role": "user", "content": "read a.py"}
    await client.chat.completions.create(model="m", messages=[ask])
    result = {"role": "tool", "tool_call_id": "call_1", "content": "text of a.py"}
    await client.chat.completions.create(model="m", messages=[ask, sent_back, result])
    r.service.ledger.refresh()
    return [x.event for x in r.service.ledger.store.read_all()]


def _as_hermes_sends(content: str, arguments: str) -> dict[str, Any]:
    canonical = json.dumps(json.loads(arguments), separators=(",", ":"), sort_keys=True)
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read", "arguments": canonical},
    }
    return {"role": "assistant", "content": content.strip(), "tool_calls": [call]}


async def test_a_trimmed_and_re_encoded_reply_continues_the_line(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        r.upstream.queue(_reply("  Let me look.\n", ARGS), Say("done"))
        events = await _two_turns(r, _as_hermes_sends("  Let me look.\n", ARGS))
        assert [type(e) for e in events].count(SessionStarted) == 1  # no branch
        assert {e.session_id for e in events} == {"trim"}
        recorded = [e.message for e in events if isinstance(e, MessageAppended)]
        assert len(recorded) == 4  # ask, call, result, answer: each once
        # the ledger keeps the reply as the model sent it
        assert recorded[1]["content"] == "  Let me look.\n"
        assert recorded[1]["tool_calls"][0]["function"]["arguments"] == ARGS


@pytest.mark.parametrize(
    ("content", "arguments"),
    [
        ("Let me look.", '{"path": "b.py", "lines": [1, 2], "opts": {"z": true, "a": null}}'),
        ("Let me look.", '{"path": "a.py", "lines": [2, 1], "opts": {"z": true, "a": null}}'),
        ("Let me look!", ARGS),
    ],
    ids=["other-value", "other-order-in-a-list", "other-text"],
)
async def test_a_reply_sent_back_changed_is_still_a_branch(
    tmp_path: Path, content: str, arguments: str
) -> None:
    async with rig(tmp_path) as r:
        r.upstream.queue(_reply("Let me look.", ARGS), Say("done"))
        events = await _two_turns(r, _as_hermes_sends(content, arguments))
        assert [type(e) for e in events].count(SessionStarted) == 2  # the root and a branch


def _call(arguments: str) -> dict[str, Any]:
    function = {"name": "f", "arguments": arguments}
    return {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": function}]}


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),  # non-ASCII included
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=8,
)


def _equal(a: Any, b: Any) -> bool:
    """JSON values equal by (type, value), written without the code under test: ``1``,
    ``1.0`` and ``true`` are three values; ``-0.0`` is not ``0.0`` (JSON spells them apart)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return bool(a == b)


@given(JSON, JSON)
def test_arguments_are_the_same_call_exactly_when_their_values_are(a: Any, b: Any) -> None:
    """Two encodings of JSON values (one spaced with ASCII escapes, one compact with sorted
    keys and raw non-ASCII text) are one call's arguments iff the values are equal."""
    spaced = json.dumps(a, indent=1)
    compact = json.dumps(b, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    assert same_message(_call(spaced), _call(compact)) == _equal(a, b)
    assert same_message(_call(spaced), _call(json.dumps(a, ensure_ascii=False)))


@pytest.mark.parametrize(
    ("recorded", "client", "same"),
    [
        ('{"n": 1}', '{"n":1.0}', False),  # an integer and a float are two values
        ('{"n": 1.0}', '{"n":1.00}', True),  # one float, two spellings
        ('{"t": "\\u00e9"}', '{"t":"é"}', True),  # an escape and the character
        ('{"n": 1e400}', '{"n":2e400}', False),  # beyond a float: compared as written
        ('{"n": 1e400}', '{"n": 1e400}', True),
        ('{"n": 1e400}', '{"n":Infinity}', False),
        ('{"n": NaN}', '{"n":NaN}', False),  # not JSON's: as written, and spelled apart
        ('{"n": NaN}', '{"n": NaN}', True),
    ],
)
def test_numbers_and_escapes_compare_by_value_where_json_holds_one(
    recorded: str, client: str, same: bool
) -> None:
    assert same_message(_call(recorded), _call(client)) == same


def test_arguments_that_are_no_json_are_compared_as_written() -> None:
    assert same_message(_call("{oops"), _call("{oops"))
    assert not same_message(_call("{oops"), _call("{oops "))


async def test_arguments_nesting_too_deep_are_refused_and_nothing_is_appended(
    tmp_path: Path,
) -> None:
    """Arguments nesting 5,000 levels sent back in place of the recorded call: parsing
    them to compare raised RecursionError (a 500); now the resend is refused as any
    too-deep message is, and the ledger is as it was."""
    async with rig(tmp_path) as r:
        r.upstream.queue(_reply("x", ARGS))
        client = r.openai(**{"X-Ctxledger-Session": "deep"})
        ask = {"role": "user", "content": "read a.py"}
        await client.chat.completions.create(model="m", messages=[ask])
        r.service.ledger.refresh()
        before = len(list(r.service.ledger.store.read_all()))
        back = _as_hermes_sends("x", ARGS)
        back["tool_calls"][0]["function"]["arguments"] = "[" * 5000 + "]" * 5000
        result = {"role": "tool", "tool_call_id": "call_1", "content": "r"}
        with pytest.raises(openai.UnprocessableEntityError, match="nest deeper than 100"):
            await client.chat.completions.create(model="m", messages=[ask, back, result])
        r.service.ledger.refresh()
        assert len(list(r.service.ledger.store.read_all())) == before
        assert r.upstream.turn == 1  # never sent on


def test_only_small_recorded_arguments_are_kept_in_the_digest_cache() -> None:
    """Review of session 41: the cache kept up to 16,384 recorded argument texts alive as
    keys, MB-sized ones too; a text over the cap is hashed each time, never kept."""
    from ctxledger.server import history

    history._cached_digest.cache_clear()
    big = json.dumps({"blob": "x" * (history._CACHED_TEXT_CAP + 1)})
    small = json.dumps({"b": 1, "a": 2})
    assert history._recorded_digest(big) == history._recorded_digest(big) is not None
    assert history._cached_digest.cache_info().currsize == 0
    assert history._recorded_digest(small) == history._recorded_digest('{"a":2,"b":1}')
    assert history._cached_digest.cache_info().currsize == 2
