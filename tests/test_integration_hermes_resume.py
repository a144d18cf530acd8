"""The Hermes engine when Hermes keeps its session store (the CLI and the gateway do):
compactions inside one process and a resume in a new one stay one ledger chain.

Hermes calls ``on_session_end`` right after every compaction with the list it compacted
(its memory flush), stamps ``_db_persisted`` on the dicts it saved, and a resumed
session comes back from ``state.db`` with ``timestamp`` keys and without ``reasoning``.
Each once started a new ledger root holding the whole history again. So did a resume of
a conversation Hermes compacted with rotation (``compression.in_place: false``): it goes
on under a new Hermes id, which no ledger chain is titled with.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.hermes_run import run_hermes_script

from ctxledger import Ledger
from ctxledger.events import MessageAppended, SessionStarted

CLI = str(Path(sys.executable).with_name("ctxledger"))


def _said(message: dict) -> tuple:
    calls = [c["id"] for c in message.get("tool_calls") or []]
    return (message["role"], message.get("content") or None, calls, message.get("tool_call_id"))


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("hermes-resume")
    for phase in ("1", "2"):  # two processes: the second resumes the first's session
        run_hermes_script("hermes_resume.py", workdir, phase, timeout=600)
    phases = [json.loads((workdir / f"phase{p}.json").read_text()) for p in ("1", "2")]
    db = workdir / "home" / "ctxledger.ledger.db"
    ledger = Ledger.open(db)
    yield phases, ledger, str(db)
    ledger.close()


def _roots(ledger: Ledger) -> list[tuple[str, str]]:
    return [
        (r.event.title or "", r.event.session_id)
        for r in ledger.store.read_all()
        if isinstance(r.event, SessionStarted) and r.event.parent_session_id is None
    ]


def _one_chain(phases: list[dict], ledger: Ledger, name: str, turns: int) -> None:
    """One root for conversation `name`, every turn on it once, the resumed host's
    history the chain tip's view."""
    roots = [sid for title, sid in _roots(ledger) if title == f"hermes session {name}"]
    assert len(roots) == 1, roots  # no second root at a compaction, nor at the resume
    tip = ledger.tip(roots[0])
    assert ledger.chains.compression_count(tip) >= 1
    events = [
        r.event
        for r in ledger.store.read_all()
        if isinstance(r.event, MessageAppended)
        and ledger.chains.root(r.event.session_id) == roots[0]
    ]
    asks = [
        e.message["content"].split(":")[0]
        for e in events
        if e.message["role"] == "user" and str(e.message.get("content", "")).startswith("Turn ")
    ]
    assert asks == [f"Turn {t}" for t in range(turns)]
    # Hermes's session-store mark is its own bookkeeping, not the conversation
    assert not any("_db_persisted" in e.message for e in events)
    # what the resumed host holds is the chain tip's view, message for message
    view = [m for m in ledger.api_messages(tip) if m["role"] != "system"]
    assert [_said(m) for m in view] == [_said(m) for m in phases[1][name]["history"]]


def test_one_chain_for_the_conversation_each_turn_recorded_once(resumed):
    phases, ledger, _ = resumed
    _one_chain(phases, ledger, "conv-1", 9)
    assert phases[0]["conv-1"]["ended"] == "conv-1"  # in place: the id is kept


def test_a_resume_of_the_id_hermes_rotated_to_continues_the_same_chain(resumed):
    phases, ledger, _ = resumed
    # Hermes moved the conversation to a new id at a compaction; the resume (as
    # `hermes --resume conv-rot` does) lands on that id, which titles no chain
    rotated = phases[1]["conv-rot"]["started"]
    assert phases[0]["conv-rot"]["ended"] == rotated != "conv-rot"
    _one_chain(phases, ledger, "conv-rot", 7)  # before: a second root, titled with the new id
    assert sorted(title for title, _ in _roots(ledger)) == [
        "hermes session conv-1",
        "hermes session conv-rot",
    ]


def test_the_cli_verifies_and_replays_the_chains(resumed):
    _, ledger, db = resumed
    proc = subprocess.run([CLI, "--db", db, "verify"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for _, root in _roots(ledger):
        args = ["replay", root, "--verify"]
        proc = subprocess.run([CLI, "--db", db, *args], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
