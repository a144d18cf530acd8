"""A real Hermes Agent as a client of ``ctxledger serve`` (``tests/hermes_proxy_client.py``
under ``.venv-hermes``): a streamed reply with two parallel tool calls, the results,
the answer, and a second ask on the returned history all continue one session.

Hermes trims every text and re-encodes each call's arguments (compact, sorted keys)
before it sends its history back, so the recorded reply came back in another spelling
and every turn after a tool call branched the conversation (session 41).

An interrupted ask: Hermes's abort shuts no socket down, so its worker reads the reply
the agent has given up on and the proxy records it (nothing on the wire says otherwise).
The agent's next request, whose history lacks that reply, lands on a line holding
exactly what the agent has: a branch, or a new conversation when the interrupted ask
was the first (Hermes merges it with the next ask into one first message)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from helpers.hermes_run import script_ledger

from ctxledger import Ledger
from ctxledger.events import MessageAppended, SessionStarted
from ctxledger.server.history import HistoryIndex


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    yield from script_ledger(tmp_path_factory, "hermes_proxy_client.py", "result.json")


def _events(ledger: Ledger) -> list[Any]:
    return [r.event for r in ledger.store.read_all()]


def test_hermes_through_the_proxy_keeps_one_session_across_tool_calls(run):
    result, ledger = run
    assert result["finals"] == ["Planned: two items.", "Next: read the spec."]
    first = next(e for e in _events(ledger) if isinstance(e, SessionStarted)).session_id
    events = [e for e in _events(ledger) if e.session_id == first]  # (the other asks follow)
    assert [type(e) for e in events].count(SessionStarted) == 1  # no branch
    roles = [e.message["role"] for e in events if isinstance(e, MessageAppended)]
    assert roles == ["user", "assistant", "tool", "tool", "assistant", "user", "assistant"]
    assert ledger.verify().ok
    # Hermes's first call lists the models through the proxy (passed on unchanged)
    assert result["paths"].count("/v1/models") >= 1  # (how often is hermes-agent's choice)


def _said(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    return [message["role"], content.strip() if isinstance(content, str) else content]


def _line_holding(ledger: Ledger, text: str) -> tuple[str, list[list[Any]]]:
    """The session that recorded `text` and its line's messages (role, trimmed text)."""
    sid = next(
        e.session_id
        for e in _events(ledger)
        if isinstance(e, MessageAppended) and e.message.get("content") == text
    )
    root = ledger.chains.root(sid)
    return sid, [_said(m) for m in HistoryIndex(ledger).line_messages(root)]


@pytest.mark.parametrize(
    ("case", "answer", "unseen"),
    [
        ("later", "Did the other thing.", "An answer the agent never saw."),
        ("first", "Both asks answered.", "A first answer the agent never saw."),
    ],
)
def test_an_interrupted_reply_is_not_on_the_line_the_agent_goes_on_with(run, case, answer, unseen):
    result, ledger = run
    seen = result[case]
    assert seen["interrupted"] is True
    sid, line = _line_holding(ledger, answer)
    assert line == [_said({"role": r, "content": t}) for r, t in seen["after"]]  # all it has
    assert ["assistant", unseen] not in line
    cut_sid, cut_line = _line_holding(ledger, unseen)  # kept where the model said it
    assert cut_line[-1] == ["assistant", unseen] and cut_sid != sid
    parent = ledger.chains.lineage(sid).parent_session_id
    if case == "later":  # the agent's line branched from the one holding the reply
        assert parent == cut_sid and ledger.chains.lineage(sid).reason == "branch"
    else:  # Hermes's first message is the two asks: another conversation
        assert parent is None and cut_line == [["user", "Think about the first ask."], cut_line[-1]]
    assert ledger.verify().ok


@pytest.mark.parametrize(
    ("case", "answer", "dropped", "roles"),
    [
        ("cut", "Planned once.", "call_cut", ["user", "assistant", "tool", "assistant"]),
        ("empty", "Said at last.", "''", ["user", "assistant"]),
    ],
)
def test_a_reply_hermes_drops_and_asks_again_is_not_on_its_line(run, case, answer, dropped, roles):
    """A reply cut inside a tool call by the output limit, an empty reply: Hermes drops
    it and asks again. One session, holding the answer Hermes kept (the dropped reply was
    recorded, the retry was a repeat, and the next turn branched: session 41)."""
    result, ledger = run
    sid, line = _line_holding(ledger, answer)
    assert line == [_said({"role": r, "content": t}) for r, t in result[case]]
    assert [r for r, _ in line] == roles
    assert ledger.chains.lineage(sid).parent_session_id is None  # no branch
    said = [
        e.message for e in _events(ledger) if isinstance(e, MessageAppended) and e.session_id == sid
    ]
    assert dropped not in str(said)


def test_parallel_calls_streamed_interleaved_keep_one_session(run):
    """Two parallel calls streamed interleaved by index (both heads, then each call's
    arguments in halves by turns; session 46): the proxy records one assistant turn with
    both calls whole, Hermes's results and answer follow on the same line, and its next
    ask goes on there."""
    result, ledger = run
    assert result["interleaved"] == ["Both planned.", "Going on."]
    sid, line = _line_holding(ledger, "Both planned.")
    assert [r for r, _ in line] == [
        "user", "assistant", "tool", "tool", "assistant", "user", "assistant",
    ]  # fmt: skip
    assert ledger.chains.lineage(sid).parent_session_id is None  # no branch
    said = [
        e.message for e in _events(ledger) if isinstance(e, MessageAppended) and e.session_id == sid
    ]
    calls = said[1]["tool_calls"]
    assert [c["id"] for c in calls] == ["call_1", "call_2"]
    assert [json.loads(c["function"]["arguments"])["todos"][0]["id"] for c in calls] == ["1", "2"]
    assert [m.get("tool_call_id") for m in said[2:4]] == ["call_1", "call_2"]
    assert ledger.verify().ok
