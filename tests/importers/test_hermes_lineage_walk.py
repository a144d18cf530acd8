"""The up-walk through a Hermes store's compression parents (``compression_parents``),
shared by the importer and the Hermes engine's resume: which rows continue their
parent, and how a corrupt or deep store ends the walk. A dict stands for the store."""

from __future__ import annotations

import json
from typing import Any

from ctxledger.importers.hermes_db import CHAIN_CAP, compression_parents
from ctxledger.integrations.hermes_host import compression_ancestors


def _row(sid: str, parent: str | None, end: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"id": sid, "parent_session_id": parent, "end_reason": end, **extra}


def _walk(rows: list[dict[str, Any]], sid: str) -> list[str]:
    by_id = {r["id"]: r for r in rows}
    return compression_ancestors(by_id.get, sid)


ROOT = [_row("R", None, "compression"), _row("P", "R", "compression")]


def test_a_continuation_walks_up_to_the_root() -> None:
    assert _walk([*ROOT, _row("N", "P")], "N") == ["P", "R"]


def test_a_branch_a_sub_agent_and_a_tool_session_continue_nothing() -> None:
    rows = [
        *ROOT,
        _row("B", "P", model_config=json.dumps({"_branched_from": "P"})),
        _row("D", "P", model_config={"_delegate_from": "P"}),  # a dict, as a test store has it
        _row("T", "P", source="tool"),
    ]
    # before (the mark not read): each gave ['P', 'R'], as their parent ended "compression"
    assert {sid: _walk(rows, sid) for sid in "BDT"} == {"B": [], "D": [], "T": []}


def test_the_walk_stops_at_a_parent_that_did_not_end_by_compression() -> None:
    rows = [_row("R", None, "branched"), _row("P", "R", "compression"), _row("N", "P")]
    assert _walk(rows, "N") == ["P"]


def test_a_cycle_ends_the_walk() -> None:
    two = [_row("A", "B", "compression"), _row("B", "A", "compression")]
    assert _walk(two, "A") == ["B"]
    assert _walk([_row("S", "S", "compression")], "S") == []


def test_a_row_that_is_no_mapping_ends_the_walk() -> None:
    assert _walk([_row("N", "P"), {"id": "P"}], "N") == []  # P: no end reason
    by_id: dict[str, Any] = {"N": _row("N", "P"), "P": ["not", "a", "row"]}
    assert compression_ancestors(by_id.get, "N") == []
    assert compression_ancestors(by_id.get, "missing") == []


def test_a_chain_past_a_hundred_rotations_is_walked_to_its_root() -> None:
    """Before: the engine stopped at 100 and a resume of the 101st rotation started a
    second root; the importer went 10,000 deep on the same store."""
    deep = [_row("s0", None, "compression")]
    deep += [_row(f"s{i}", f"s{i - 1}", "compression") for i in range(1, 151)]
    assert _walk(deep, "s150")[-1] == "s0"


def test_the_walk_is_capped_and_reads_each_row_once() -> None:
    reads: list[str] = []

    def get_session(sid: str) -> dict[str, Any]:  # an endless chain
        reads.append(sid)
        return _row(sid, str(int(sid) + 1), "compression")

    assert len(compression_parents(get_session, "0")) == CHAIN_CAP
    assert len(reads) == len(set(reads)) == CHAIN_CAP + 1
