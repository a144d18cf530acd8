"""Hermes's gateway ``/compress`` and ``/compress here 2`` themselves
(``GatewayRunner._handle_compress_command``), on its built-in compressor and on the
ctxledger engine; the gateway runs under ``.venv-hermes``
(``tests/hermes_gateway_compress.py``) and its ledger is read back here."""

from __future__ import annotations

import json

import pytest
from helpers.hermes_run import run_hermes_script

from ctxledger import Ledger
from ctxledger.events import MessageAppended, SessionEnded, SessionStarted


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("hermes-gateway")
    run_hermes_script("hermes_gateway_compress.py", workdir)
    return workdir, json.loads((workdir / "gateway.json").read_text())


def test_compress_on_a_chat_with_nothing_to_compact_answers_as_the_built_in(gateway):
    """Hermes 0.19's built-in ``has_content_to_compress`` answers yes to every list (its
    tail cut is at least one past the head it starts from), so its gateway never says
    "nothing to compress yet": it compacts, nothing changes, and it says so. The engine
    inherits the same yes; the chat reads the same answer and keeps the same transcript."""
    _, out = gateway
    said = {engine: (answer.split("\n"), kept) for engine, (answer, kept) in out["short"].items()}
    # the size line holds the system prompt's rough size, and that prompt holds the time
    for lines, _ in said.values():
        assert len(lines) == 2, lines  # (before: an IndexError on a one-line answer)
        assert lines[1].startswith("Approx request size: ~") and lines[1].endswith("(unchanged)")
        del lines[1]
    assert said["ctxledger"] == said["compressor"]
    assert said["compressor"][0] == ["🗜️ No changes from compression: 6 messages"]


def test_the_gateway_s_compress_here_goes_on_as_one_conversation(gateway):
    """The real handler: ``/compress`` then ``/compress here 2`` after the chat's agent
    handed its list over (a recall call), then the next turn's agent on what the
    session store holds: the head went on as a branch of the chain, the next turn
    continues that branch, and no message went to a second root."""
    workdir, out = gateway
    assert out["full"]["answer"].startswith("🗜️ Compressed: 24 → 12 messages")
    assert out["here"]["answer"].startswith("🗜️ Compressed: 18 → 12 messages")
    ledger = Ledger.open(workdir / "gateway.db")
    try:
        events = [r.event for r in ledger.store.read_all()]
        starts = [
            e for e in events if isinstance(e, SessionStarted) and e.title == "hermes session chat"
        ]
        assert [e.reason for e in starts] == ["new", "branch"]
        root, branch = (e.session_id for e in starts)
        assert out["chains"] == {"live": root, "next turn": branch}
        ended = {e.session_id: e.reason for e in events if isinstance(e, SessionEnded)}
        assert ended == {starts[1].parent_session_id: "branched"}
        on_root = [
            e.message["content"]
            for e in events
            if isinstance(e, MessageAppended) and ledger.chains.root(e.session_id) == root
        ]
        assert on_root == [f"{w} {i}" for i in range(15) for w in ("ask", "answer")]
    finally:
        ledger.close()


def test_hermes_s_gateway_keeps_only_the_compacted_head_of_compress_here(gateway):
    """Hermes 0.19.0's own defect, the same on either engine (its gateway's code, not
    the engine's): with ``compression.in_place`` (its default) ``_compress_context``
    archives the session and stores the compacted *head*; the gateway rejoins the
    tail in memory only, and skips its transcript rewrite for an in-place compaction,
    so the two re-appended exchanges are gone from ``state.db`` and from the next turn.
    Pinned so an upgrade that fixes it is noticed (the engine takes either list)."""
    _, out = gateway
    kept = out["here"]["kept"]
    assert kept[-2:] == ["ask 12", "answer 12"]
    assert not {"ask 13", "ask 14"} & set(kept)


def test_a_new_agent_counts_the_conversation_s_compactions(gateway):
    """The chosen difference (README "Differences", *Compression count of a new
    agent*; docs/notes/s34-parity.md): Hermes's built-in starts every agent at 0, and
    the gateway builds a new one for each ``/compress`` (and after each eviction, each
    resume), so its "compressed N times" warning never fires there. The engine's
    agent counts the conversation's compactions (its chain and the chains it branched
    from), so Hermes's own warning fires at the second compaction of the
    conversation, whichever agent made it."""
    _, out = gateway
    assert (out["full"]["count"], out["full"]["warning"]) == (1, None)
    assert out["here"]["count"] == 2
    assert "Session compressed 2 times" in out["here"]["warning"]
