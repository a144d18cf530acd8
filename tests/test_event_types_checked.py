"""An event a caller hands in is refused before any I/O unless it reads back as written.

Review (session 26): ``switch_model(sid, 123, 8192)`` stored an event that did not
decode, and from then on the ledger could not be opened (the log is append-only, so
nothing could repair it); ``append_messages(message_ids=[an existing id])`` replaced
another session's message. Every such call is now ``InvalidInput``, with nothing
appended, and the ledger opens as before.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxledger import Ledger
from ctxledger.errors import InvalidInput

Call = Callable[[Ledger, str, str], object]


def _message_request(ledger: Ledger, sid: str, **bad: Any) -> Any:
    from ctxledger.events import MessageAppended
    from ctxledger.eventstore.base import AppendRequest

    fields: dict[str, Any] = {
        **ledger.event_fields(sid),
        "message_id": "mX",
        "message": {"role": "user", "content": "hi"},
        "tokens": 3,
        "encoding": "o200k_base",
        **bad,
    }
    return AppendRequest(sid, [MessageAppended(**fields)], ledger.version(sid))


BAD: dict[str, Call] = {
    "model int": lambda lg, sid, mid: lg.switch_model(sid, 123, 8192),  # type: ignore[arg-type]
    "model None": lambda lg, sid, mid: lg.switch_model(sid, None, 8192),  # type: ignore[arg-type]
    "guard rule text": lambda lg, sid, mid: lg.switch_model(sid, "m2", 8192, scoped_guards="no"),  # type: ignore[arg-type]
    "learned rule int": lambda lg, sid, mid: lg.learn_context_limit(
        sid,
        4096,
        "maximum context length is 4096",
        scoped_guards=0,  # type: ignore[arg-type]
    ),
    "pinned text": lambda lg, sid, mid: lg.pin(sid, lg.transcript.live_ids(sid)[0], "no"),  # type: ignore[arg-type]
    "end reason int": lambda lg, sid, mid: lg.end_session(sid, 123),  # type: ignore[arg-type]
    "title int": lambda lg, sid, mid: lg.start_session(model="m", title=5),  # type: ignore[arg-type]
    "reason unknown": lambda lg, sid, mid: lg.start_session(model="m", reason="bogus"),  # type: ignore[arg-type]
    "message id int": lambda lg, sid, mid: lg.append_messages(
        sid,
        [{"role": "user", "content": "x"}],
        message_ids=[5],  # type: ignore[list-item]
    ),
    "message id empty": lambda lg, sid, mid: lg.append_messages(
        sid, [{"role": "user", "content": "x"}], message_ids=[""]
    ),
    "message id twice": lambda lg, sid, mid: lg.append_messages(
        sid, [{"role": "user", "content": "x"}] * 2, message_ids=["m1", "m1"]
    ),
    "message tokens text": lambda lg, sid, mid: lg.append([_message_request(lg, sid, tokens="12")]),
    "message tokens float": lambda lg, sid, mid: lg.append([_message_request(lg, sid, tokens=1.5)]),
    "message not an object": lambda lg, sid, mid: lg.append(
        [_message_request(lg, sid, message="hi")]
    ),
    "message id taken": lambda lg, sid, mid: lg.append_messages(
        sid, [{"role": "user", "content": "x"}], message_ids=[mid]
    ),
}


@pytest.mark.parametrize("call", BAD.values(), ids=BAD.keys())
def test_a_badly_typed_event_is_refused_and_the_ledger_still_opens(
    tmp_path: Path, call: Call
) -> None:
    path = tmp_path / "l.db"
    with Ledger.open(path) as ledger:
        sid = ledger.start_session(model="m", context_length=8192)
        ledger.append_messages(sid, [{"role": "user", "content": "mine"}])
        other = ledger.start_session(model="m", context_length=8192)
        (mid,) = ledger.append_messages(other, [{"role": "user", "content": "A's text"}])
        before = ledger.store.last_seq()
        with pytest.raises(InvalidInput):
            call(ledger, sid, mid)
        assert ledger.store.last_seq() == before
    with Ledger.open(path) as reopened:
        assert reopened.store.verify().ok
        assert reopened.api_messages(other) == [{"role": "user", "content": "A's text"}]


def test_well_typed_calls_still_append(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db") as ledger:
        sid = ledger.start_session(model="m", context_length=8192, title="t")
        ids = ledger.append_messages(sid, [{"role": "user", "content": "x"}], message_ids=["m1"])
        ledger.pin(sid, ids[0])
        ledger.switch_model(sid, "m2", 16_384)
        ledger.end_session(sid, "done")
        state: Any = ledger.transcript.state.sessions[sid]
        assert ids == ["m1"] and state.model == "m2" and state.ended


def test_a_resent_append_is_a_no_op_and_a_new_event_with_a_taken_id_is_not(
    tmp_path: Path,
) -> None:
    """Event ids are idempotency keys: re-sending the batch that stored a message (after
    an error that left it stored, and a read that folded it) changes nothing; another
    event naming the same message id is still refused."""
    with Ledger.open(tmp_path / "l.db") as ledger:
        sid = ledger.start_session(model="m", context_length=8192)
        request = _message_request(ledger, sid)
        ledger.append([request])
        before = ledger.store.last_seq()
        ledger.refresh()
        ledger.append([request])  # the same events, the same ids
        assert ledger.store.last_seq() == before
        assert ledger.api_messages(sid) == [{"role": "user", "content": "hi"}]
        with pytest.raises(InvalidInput, match="already taken"):
            ledger.append([_message_request(ledger, sid, message={"role": "user", "content": "B"})])
        assert ledger.store.last_seq() == before
    with Ledger.open(tmp_path / "l.db") as reopened:
        assert reopened.api_messages(sid) == [{"role": "user", "content": "hi"}]
