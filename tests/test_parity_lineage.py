"""Differential parity with hermes-agent 0.19.0's session lineage (session 33): which
sessions of a Hermes ``state.db`` are one compression chain (HERMES_SPEC §4), as
``parse_hermes_db(path, session=ID)`` selects them (and ``ctxledger import`` of the
whole store links them).

Hypothesis draws what a Hermes user does to a conversation: compactions with rotation
(``compression.in_place: false``: the session ends with reason ``compression``, a
child continues), the CLI's ``/branch`` (the session ends ``branched``, a child marked
``_branched_from``), a ``/resume`` of a branched session (reopened, so its next
rotation ends it ``compression`` too), a sub-agent started from the live session (a
child marked ``_delegate_from``, its parent left open and maybe rotated later). Hermes's
own ``SessionDB`` writes them (``tests/hermes_compaction.py`` op ``lineage``) and
answers, for each session, its compression lineage (``get_compression_lineage``: what
Hermes exports) and its compression tip (``get_compression_tip``: where a resume lands).
ctxledger's importer reads the same file.

Compared: the chain holding each session holds it, and a resume of any of its sessions
lands on its last (Hermes's tip); and the chain is Hermes's lineage, except where that
lineage contradicts Hermes's own tip: once a sub-agent's parent rotated, the lineage
steps into the sub-agent (it skips branch rows only; the tip skips sub-agents and
tools' sessions too) and leaves the real continuation out, and a branch that was then
compacted is its own lineage alone (an early return) while its continuation's lineage
starts at it. Found and fixed here: a branched session's parent that ended
``compression`` later made the importer climb from the branch into that chain and walk
down into the branch, leaving the real continuation out (the chain selected for a
rotated session was another conversation's), and a whole-store import recorded such
branches and sub-agents as compaction continuations.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.hermes_differential import Hermes, drawn, mismatches, oracle
from hypothesis import strategies as st

from ctxledger.importers.hermes_db import parse_hermes_db

ACTIONS = ("rotate", "branch", "back", "delegate")


@pytest.fixture(scope="module")
def hermes() -> Iterator[Hermes]:
    yield from oracle()


def _steps(draw: int, actions: list[str]) -> list[list[Any]]:
    """The store's steps for a user's actions, on the live session each time (ids
    ``d<draw>s<n>``: every draw's conversation in one store)."""
    ids = [f"d{draw}s{n}" for n in range(len(actions) + 1)]
    steps: list[list[Any]] = [["start", None, ids[0]]]
    live, branched = ids[0], []
    for new, action in zip(ids[1:], actions, strict=True):
        if action == "rotate":
            steps.append(["rotate", live, new])
            live = new
        elif action == "branch":
            steps.append(["branch", live, new])
            branched.append(live)
            live = new
        elif action == "back" and branched:  # /resume of the session a branch left
            live = branched.pop()
            steps.append(["reopen", live, None])
        elif action == "delegate":
            steps.append(["delegate", live, new])
    return steps


def _lineage_is_hermes_s_rule(steps: list[list[Any]], sid: str) -> bool:
    """Whether Hermes's lineage of `sid` agrees with its own tip: `sid` is no branch, and
    no sub-agent's parent in its draw ended by a compaction."""
    rotated = {at for kind, at, _ in steps if kind == "rotate"}
    kinds = {new: kind for kind, _, new in steps if new}
    return kinds[sid] != "branch" and not any(
        kind == "delegate" and at in rotated for kind, at, _ in steps
    )


def test_the_chain_of_each_session_is_hermes_s_lineage(hermes: Hermes) -> None:
    draws = drawn(st.lists(st.sampled_from(ACTIONS), min_size=1, max_size=8), 40)
    conversations = [_steps(i, actions) for i, actions in enumerate(draws)]
    with tempfile.TemporaryDirectory(prefix="ctxledger-lineage-") as tmp:
        path = Path(tmp) / "state.db"
        steps = [step for conversation in conversations for step in conversation]
        (answer,) = hermes.ask("lineage", [{"path": str(path), "steps": steps}])
        assert "raised" not in answer, answer
        tips: list[tuple[Any, Any, Any]] = []
        lineages: list[tuple[Any, Any, Any]] = []
        for conversation in conversations:
            for _, _, sid in conversation:
                if sid is None:
                    continue
                chain = [s.key for s in parse_hermes_db(path, session=sid)]
                assert sid in chain
                # where a resume of any session of the chain lands: its last session
                said = [answer["tip"][member] for member in chain]
                tips.append(((conversation, sid), said, [chain[-1]] * len(chain)))
                if _lineage_is_hermes_s_rule(conversation, sid):
                    lineages.append(((conversation, sid), answer["lineage"][sid], chain))
    assert not mismatches(tips), "\n".join(mismatches(tips)[:5])
    assert not mismatches(lineages), "\n".join(mismatches(lineages)[:5])
    assert len(lineages) >= 30 and len(tips) >= 100, (len(lineages), len(tips))
