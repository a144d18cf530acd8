"""The proxy's withdrawals fuzzed: a client on the Responses face whose replies are left
``incomplete`` or whole, going on without them, keeping them, chaining from them (a
withdrawn one too), sending the same turn again, editing a reply, dropping its first ask.

Session 44. Property: no 5xx; after every turn the log verifies, a fresh rebuild reads
what the live projection holds, and every withdrawn message was recorded provisional.
(Nothing was found: this guards session 43's ``ReplyWithdrawn`` path.)
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import anyio
from helpers.incomplete_replies import as_answer
from helpers.server_rig import rig
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxledger.events import MessageAppended, ReplyWithdrawn
from ctxledger.projections import Projector
from ctxledger.server.history import PROVISIONAL

MOVES = ["without", "keep", "chain", "chain_first", "repeat", "edited", "drop_first"]


def _reply(n: int, incomplete: bool, call: bool) -> dict[str, Any]:
    """The upstream's response `n`: a text (cut short when `incomplete`), and a whole
    call after it when `call`."""
    text = {"type": "output_text", "text": f"reply {n} has", "annotations": []}
    output: list[dict[str, Any]] = [
        {"id": f"msg_{n}", "type": "message", "role": "assistant", "content": [text],
         "status": "incomplete" if incomplete and not call else "completed"}
    ]  # fmt: skip
    if call:
        output.append(
            {"id": f"fc_{n}", "type": "function_call", "name": "todo", "call_id": f"call_{n}",
             "arguments": '{"item": "milk"}', "status": "completed"}
        )  # fmt: skip
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}}
    usage |= {"output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}}
    return {
        "id": f"resp_{n}", "object": "response", "created_at": n,
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "error": None, "model": "gpt-4.1", "output": output, "parallel_tool_calls": True,
        "tool_choice": "auto", "tools": [], "usage": {**usage, "total_tokens": 15},
    }  # fmt: skip


def _ask(n: int) -> dict[str, Any]:
    return {"role": "user", "content": f"ask {n}"}


def _input(
    move: str, n: int, asks: list[dict[str, Any]], kept: list[Any], last: list[Any]
) -> tuple[list[Any], str | None]:
    """The client's input for turn `n` after its `move`, and a previous_response_id."""
    if move == "chain":
        return [_ask(n)], f"resp_{n - 1}"
    if move == "chain_first":
        return [_ask(n)], "resp_0"
    if move == "repeat":
        return [*kept], None
    if move == "drop_first":
        return [*kept[1:], _ask(n)], None
    if move == "keep":
        return [*kept, *last, _ask(n)], None
    if move == "edited":
        edited = json.loads(json.dumps(last).replace("has", "HAS"))
        return [*kept, *edited, _ask(n)], None
    return [*kept, _ask(n)], None  # without


def _check(r: Any) -> None:
    ledger = r.service.ledger
    ledger.refresh()
    assert ledger.verify().ok
    fresh = Projector.rebuild(ledger.store, use_checkpoint=False)
    assert fresh.fingerprint() == ledger.projector.fingerprint()
    events = [x.event for x in ledger.store.read_all()]
    provisional = {
        e.message_id
        for e in events
        if isinstance(e, MessageAppended) and e.message.get(PROVISIONAL)
    }
    for e in events:
        if isinstance(e, ReplyWithdrawn):
            assert set(e.message_ids) <= provisional, e


#: an incomplete reply (text, streamed text, text and a call) the client goes on without:
#: each writes a ReplyWithdrawn (so the round reaches the withdrawal it fuzzes)
WITHDRAWING = [
    [(True, call, streamed, "without"), (False, False, streamed, "without")]
    for call, streamed in ((False, False), (False, True), (True, False))
]


@settings(max_examples=25, deadline=None)
@example(turns=WITHDRAWING[0])
@example(turns=WITHDRAWING[1])
@example(turns=WITHDRAWING[2])
@given(
    st.lists(
        st.tuples(st.booleans(), st.booleans(), st.booleans(), st.sampled_from(MOVES)),
        min_size=1,
        max_size=5,
    )
)
def test_a_client_moving_around_its_provisional_replies_never_breaks_the_ledger(
    turns: list[tuple[bool, bool, bool, str]],
) -> None:
    async def main(place: Path) -> int:
        async with rig(place) as r:
            asks: list[dict[str, Any]] = [_ask(0)]
            kept: list[Any] = [_ask(0)]  # what the client sends back as its history
            last: list[Any] = []
            body: dict[str, Any] = {"model": "gpt-4.1", "input": kept}
            for n, (incomplete, call, streamed, move) in enumerate(turns):
                reply = _reply(n, incomplete, call)
                r.upstream.script.clear()  # (a turn refused before the upstream left its own)
                r.upstream.queue(as_answer(reply, streamed))
                if n:
                    items, previous = _input(move, n, asks, kept, last)
                    body = {"model": "gpt-4.1", "input": items}
                    if previous is not None:
                        body["previous_response_id"] = previous
                    if move not in ("chain", "chain_first", "repeat"):
                        kept = [i for i in items if i.get("role") == "user" or move != "without"]
                body["stream"] = streamed
                resp = await r.http.post(
                    "/v1/responses", json=body, headers={"X-Ctxledger-Session": "fz"}
                )
                assert resp.status_code < 500, (n, move, resp.text[:500])
                last = [
                    {k: v for k, v in item.items() if k != "status"} for item in reply["output"]
                ]
                _check(r)
            events = [x.event for x in r.service.ledger.store.read_all()]
            return sum(isinstance(e, ReplyWithdrawn) for e in events)

    with tempfile.TemporaryDirectory() as place:
        withdrawals = anyio.run(main, Path(place))
    if turns in WITHDRAWING:
        assert withdrawals == 1, turns
