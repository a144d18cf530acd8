"""Hermes's ``/compress here 7`` and ``6`` on a list holding another writer's note merged with
its next ask (``tests/hermes_compress_here_merge.py`` under ``.venv-hermes``; session
46): the engine's check of whether a head would compact plans the head Hermes handed.
Before, it counted the head in the ledger's messages (one more: the pair) and planned
a prefix one message short, the note and the ask apart: not what the branch would
hold. Seven messages are too few (Hermes keeps its list); nine compact on a branch,
the conversation's chain from then on."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.hermes_run import script_ledger

from ctxledger import Ledger
from ctxledger.events import SessionStarted

NOTE = "A note from a script: mind the beta module too."


@pytest.fixture(scope="module")
def run(tmp_path_factory: Any) -> Any:
    yield from script_ledger(tmp_path_factory, "hermes_compress_here_merge.py", "here.json")


def test_the_head_hermes_hands_is_the_head_planned_after_a_merged_note(
    run: tuple[dict[str, Any], Ledger],
) -> None:
    result, ledger = run
    assert result["moved"] is True  # the note moved the view Hermes held
    assert [m["content"] for m in result["view"]] == ["ask 0", "answer 0", f"{NOTE}\n\nask 1"]
    seven, nine = result["heads"]
    assert (len(seven), len(nine)) == (7, 9) and seven[-1] == "answer 1"
    # the planner was given each head as Hermes handed it (before: the note and the ask
    # apart, the head's last message missing)
    assert result["planned"][0] == seven and result["planned"][1] == nine
    (kept, kept_len), (made, made_len) = result["made"]
    assert (kept, kept_len) == (False, 7)  # too few: Hermes keeps its list, no branch
    assert made is True and made_len < 9
    started = [
        (r.stream, r.event) for r in ledger.store.read_all() if isinstance(r.event, SessionStarted)
    ]
    (root, _), *rest = started
    assert [e.reason for _, e in rest][:1] == ["branch"]  # one branch, for the nine
    assert rest[0][1].parent_session_id == root and ledger.transcript.session(root).ended
    assert result["root"] == rest[0][0]  # the conversation's chain from then on
    said = [m.get("content") for m in ledger.api_messages(ledger.tip(result["root"]))]
    assert said[-2:] == ["ask 9", "answer 9"]
