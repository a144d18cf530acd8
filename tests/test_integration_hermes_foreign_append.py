"""A Python caller's ``append`` into the session a real Hermes Agent's engine holds, with
``withdraw=`` (Hermes's last reply taken out, a note added) and without (the note
added): Hermes takes the ledger's view before its next model call, as after a shell's
``ctxledger compress``; the ledger keeps one root, and its view holds what Hermes went on
with (``tests/hermes_foreign_append.py`` under ``.venv-hermes``; session 45). Before,
Hermes went on sending its own list (the withdrawn reply, no note) while the engine
appended it after the caller's messages. In mode ``race`` the note lands between the
engine's check of the view and its own append (session 45's review): the engine must
not take it into the view it remembers as Hermes's (it did, and Hermes never sent the
note). In mode ``end`` Hermes ends right after the write with two messages more: its
list goes on as a branch of the view it held, recorded again there (session 39's rule,
written down after the review). Session 46: modes ``assistant`` (an assistant note after
Hermes's reply, which Hermes's repair merges with it), ``parted`` (a user note between
Hermes's tool call and its result) and ``unasked`` (the call withdrawn, a note in its
place): Hermes's repair drops the result, the engine hands Hermes that form; before,
the next hand-over started a new root (``unasked``: the result was refused and the
note never went up). The ``parted`` result is recorded (the review: nothing is lost),
the ``unasked`` one is not (its call is gone from the view)."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.hermes_run import script_ledger

from ctxledger import Ledger
from ctxledger.events import MessageAppended, ReplyWithdrawn, SessionStarted

NOTE = "A note from a script: the last answer was withdrawn, review part 1 again."
SIDECAR = NOTE + " [as sent with memory]"  # (the note's api_content)
WITHDRAWN = "Done with step 2: the alpha module is reviewed."
ASIDE = "An aside from a script: part 1 needs no more review."
PARTED = "A note from a script, written while the recall ran."


@pytest.fixture(
    scope="module",
    params=["withdraw", "append", "race", "end", "assistant", "parted", "unasked"],
)
def run(tmp_path_factory: Any, request: Any) -> Any:
    name, mode = "hermes_foreign_append.py", request.param
    for result, ledger in script_ledger(tmp_path_factory, name, "foreign.json", mode, timeout=600):
        yield mode, result, ledger


def _said(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(m["role"], m.get("content") or "") for m in messages]


def _sent_in(result: dict[str, Any]) -> list[tuple[int, str]]:
    """Each chat request's turn and contents, joined."""
    return [
        (turn, " ".join(str(m.get("content")) for m in request["messages"]))
        for request, turn in zip(result["requests"], result["turns"], strict=True)
    ]


def test_hermes_goes_on_from_the_callers_view(run: tuple[str, dict[str, Any], Ledger]) -> None:
    mode, result, ledger = run
    records = list(ledger.store.read_all())
    events = [r.event for r in records]
    starts = [(r.stream, r.event) for r in records if isinstance(r.event, SessionStarted)]
    if mode == "end":  # (the list goes on as a branch of the view Hermes held)
        (root, _), (_, branch) = starts
        assert (branch.parent_session_id, branch.reason) == (root, "branch")
        assert ledger.transcript.session(root).ended
        assert NOTE in str(ledger.api_messages(root))
    else:
        assert len(starts) == 1  # one root, no copy
    later = [sent for turn, sent in _sent_in(result) if turn >= 2]
    assert not any(SIDECAR in sent for sent in later)
    # the ledger's view, repaired by Hermes's own repair_message_sequence (in the
    # script), is the list Hermes held
    held = [m for m in result["history"] if m["role"] != "system"]
    assert _said(result["repaired"]) == _said(held)
    if mode == "end":  # the whole list recorded again on the branch, without the note
        assert held[-1]["content"] == "Stopped." and NOTE not in str(held)
        return
    if mode == "race":  # (the note went up from Hermes's next model call on)
        assert result["wrote"]["note"] and NOTE in later[-1]
        return
    if mode in {"assistant", "parted", "unasked"}:
        _repaired_shape(mode, result, ledger, later)
        return
    assert result["wrote"]["last_content"] == WITHDRAWN  # Hermes's last reply, handed over
    withdrawals = [e for e in events if isinstance(e, ReplyWithdrawn)]
    assert later and all(NOTE in sent for sent in later)  # the caller's note went upstream
    if mode == "withdraw":
        assert [e.message_ids for e in withdrawals] == [[result["wrote"]["last"]]]
        assert not any(WITHDRAWN in sent for sent in later)
    else:
        assert withdrawals == [] and all(WITHDRAWN in sent for sent in later)
    # the note and Hermes's next ask went up merged, the note's sidecar dropped with it
    turn2 = [sent for turn, sent in _sent_in(result) if turn == 2]
    assert turn2 and all("Turn 2: review part 2" in sent for sent in turn2)


def _repaired_shape(mode: str, result: dict[str, Any], ledger: Ledger, later: list[str]) -> None:
    """Session 46: the view held a shape Hermes's repair changes; the engine handed
    Hermes its repaired form, so the conversation went on in one root (checked above)."""
    events = [r.event for r in ledger.store.read_all()]
    if mode == "assistant":  # merged with Hermes's reply upstream, two in the ledger
        assert later and all(ASIDE in sent for sent in later)
        said = [(m["role"], m.get("content")) for m in ledger.api_messages(result["root"])]
        assert ("assistant", ASIDE) in said
        return
    # the note went up from the request after the tool call on; the call's result, which
    # Hermes's repair dropped, is recorded after the note (nothing is lost: it may be the
    # user's answer) unless the call was withdrawn (the ledger would refuse it)
    sent = [PARTED in text for _, text in _sent_in(result)]
    assert sent.index(True) > 0 and all(sent[sent.index(True) :])
    (call,) = ledger.transcript.messages_of([result["wrote"]["call"]])
    call_id = call["tool_calls"][0]["id"]
    results = [
        e.message
        for e in events
        if isinstance(e, MessageAppended) and e.message.get("tool_call_id") == call_id
    ]
    assert len(results) == (0 if mode == "unasked" else 1)
    if mode == "parted":  # (recorded after the note; Hermes's repair drops it)
        said = [e.message.get("content") for e in events if isinstance(e, MessageAppended)]
        assert said.index(results[0]["content"]) > said.index(PARTED)
    withdrawals = [e.message_ids for e in events if isinstance(e, ReplyWithdrawn)]
    assert withdrawals == ([[result["wrote"]["call"]]] if mode == "unasked" else [])
