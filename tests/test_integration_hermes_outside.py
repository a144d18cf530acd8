"""``ctxledger compress`` / ``undo`` from a shell on a conversation a real Hermes Agent is
running (``tests/hermes_outside_writer.py`` under ``.venv-hermes``): Hermes takes the
ledger's view before its next model call, so every request it sends after is the view
the ledger records (session 37; before, it went on sending its own list while its new
messages were appended onto the CLI's continuation, a view it never sent)."""

from __future__ import annotations

import json

import pytest
from helpers.hermes_run import run_hermes_script

from ctxledger import Ledger
from ctxledger.events import SessionSwitched


def _key(message: dict) -> tuple:
    calls = [c["id"] for c in message.get("tool_calls") or []]
    return (message["role"], message.get("content"), calls, message.get("tool_call_id"))


@pytest.fixture(scope="module", params=["no-store", "state"])
def run(tmp_path_factory, request):
    """Without Hermes's session store, and with it (its CLI's: Hermes treats the adopt as
    a full compaction, its memory flush, its store's rows set aside, one of the turn's
    compression attempts)."""
    workdir = tmp_path_factory.mktemp("outside")
    extra = ["state"] if request.param == "state" else []
    run_hermes_script("hermes_outside_writer.py", workdir, *extra, timeout=600)
    result = json.loads((workdir / "outside.json").read_text())
    ledger = Ledger.open(result["db"])
    yield result, ledger
    ledger.close()


def _switches(ledger: Ledger) -> list[SessionSwitched]:
    return [r.event for r in ledger.store.read_all() if isinstance(r.event, SessionSwitched)]


def _sent(result: dict, turn: int) -> list[list[tuple]]:
    """The non-system messages of each request of `turn`."""
    return [
        [_key(m) for m in request["messages"] if m["role"] != "system"]
        for request, t in zip(result["requests"], result["turns"], strict=True)
        if t == turn
    ]


def _views(ledger: Ledger, root: str) -> list[list[tuple]]:
    """The final view of every session of the chain, continuations and revert included."""
    chain = ledger.chains.chain(ledger.tip(root))
    return [[_key(m) for m in ledger.api_messages(s) if m["role"] != "system"] for s in chain]


def test_hermes_sends_the_ledger_s_view_after_a_cli_compress_and_undo(run):
    result, ledger = run
    switches = _switches(ledger)[:2]  # (the script's last step: the test below)
    assert [s.reason for s in switches] == ["compression", "revert"]
    assert [s.trigger for s in switches] == ["manual", "manual"]  # (the CLI's, the undo's)
    compacted, reverted = switches[0].new_session_id, switches[1].new_session_id
    views = dict(
        zip(
            ledger.chains.chain(ledger.tip(result["root"])),
            _views(ledger, result["root"]),
            strict=True,
        )
    )
    # every request of turns 3 and 4 starts with the view of the session it was made on:
    # the CLI's continuation (its summary first), then the revert's (a message the
    # ledger got at the next hand-over, after the undo, lies past the first's end)
    for turn, sid in ((3, compacted), (4, reverted)):
        for sent in _sent(result, turn):
            k = min(len(sent), len(views[sid]))
            assert k > 1 and sent[:k] == views[sid][:k], (turn, sid)
    assert len(_sent(result, 3)[0]) <= len(views[compacted])
    first = _sent(result, 3)[0]
    written = [_key(e.message) for e in switches[0].layout if e.message is not None]
    assert written and all(w in first for w in written)  # the CLI's summary was sent
    assert len(_sent(result, 4)[0]) > len(_sent(result, 3)[-1])  # the restored view
    # Hermes counted the CLI's compaction as one (and none once it was undone)
    assert result["counts"] == [0, 0, 0, 1, 0]
    # the final view holds Hermes's final list, message for message
    assert views[reverted] == [_key(m) for m in result["history"]]


def test_hermes_s_store_sets_its_list_aside_at_an_adopt_as_at_a_compaction(run):
    """The adopts (after the CLI's compress, after its undo) are compactions to Hermes:
    with its store it archives the list it held and keeps the ledger's view, in place
    (its default: one session id); without a store nothing is archived."""
    result, _ = run
    assert len(set(result["ids"])) == 1
    if result["archived"] is not None:
        assert result["archived"] > 0


def test_a_tui_compress_after_an_outside_writer_moved_the_tip_compacts_it(run):
    """Session 40, review 1: Hermes's TUI's ``/compress`` (``force=False``, recorded
    ``requested``) after the CLI moved the tip compacts the tip, as its user asked;
    before, the plugin took the tip's view as at Hermes's own check, nothing compacted."""
    result, ledger = run
    switches = _switches(ledger)
    assert [(s.reason, s.trigger) for s in switches[2:]] == [
        ("compression", "manual"),
        ("revert", "manual"),
        ("compression", "requested"),
    ]
    tip = ledger.tip(result["root"])
    assert tip == switches[-1].new_session_id
    assert len(result["tui"]) < len(result["history"])  # Hermes holds the compacted view
    assert [_key(m) for m in result["tui"]] == _views(ledger, result["root"])[-1]
