"""The tool output budget (HERMES_SPEC §6)."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from ctxledger.errors import InvalidConfig, InvalidInput
from ctxledger.runtime.toolbudget import (
    PREVIEW_OVERHEAD_CHARS,
    READ_PERSISTED_TOOL,
    ToolBudget,
    ToolResult,
    plan_persistence,
    preview_block,
    preview_text,
    read_persisted_tool,
    read_slice,
    safe_blob_name,
)


def result(
    index: int, chars: int, name: str = "terminal", turn: int | None = 0, persisted: bool = False
) -> ToolResult:
    return ToolResult(
        index=index,
        tool_call_id=f"call_{index}",
        tool_name=name,
        content="x" * chars,
        already_persisted=persisted,
        assistant_index=turn,
    )


# --- budgets -----------------------------------------------------------------------------


def test_defaults_match_the_spec() -> None:
    budget = ToolBudget()
    assert (budget.per_result_chars, budget.per_turn_chars, budget.preview_chars) == (
        100_000,
        200_000,
        1_500,
    )
    assert (
        budget.is_exempt("read_file")
        and budget.is_exempt("Read_File")
        and budget.is_exempt("read_persisted")
    )
    assert not budget.is_exempt("terminal")


@pytest.mark.parametrize(
    ("window", "per_result", "per_turn"),
    [
        (1_000_000, 100_000, 200_000),  # capped at the defaults
        (200_000, 100_000, 200_000),
        (131_072, 78_643, 157_286),  # 15 % x 4 chars, 30 % x 4 chars
        (32_768, 19_660, 39_321),
        (16_384, 9_830, 19_660),
        (8_192, 8_000, 16_000),  # floors
        (1_024, 8_000, 16_000),
    ],
)
def test_for_window_scales_for_small_windows(window: int, per_result: int, per_turn: int) -> None:
    budget = ToolBudget.for_window(window)
    assert (budget.per_result_chars, budget.per_turn_chars) == (per_result, per_turn)


def test_for_window_accepts_overrides_and_rejects_bad_values() -> None:
    assert ToolBudget.for_window(32_768, preview_chars=500).preview_chars == 500
    for bad in (0, -5, True):
        with pytest.raises(InvalidConfig):
            ToolBudget.for_window(bad)
    with pytest.raises(InvalidConfig):
        ToolBudget(per_result_chars=0)


# --- plan_persistence ----------------------------------------------------------------------


def test_result_above_per_result_budget_is_persisted() -> None:
    decisions = plan_persistence([result(1, 100_001), result(2, 100_000, turn=1)])
    assert [(d.index, d.reason, d.chars) for d in decisions] == [(1, "per_result", 100_001)]


def test_read_file_is_never_persisted() -> None:
    results = [
        result(1, 500_000, name="read_file"),
        result(2, 300_000, name="read_persisted", turn=1),
    ]
    assert plan_persistence(results) == []


def test_already_persisted_results_are_not_chosen_again() -> None:
    assert plan_persistence([result(1, 150_000, persisted=True)]) == []


def test_turn_over_budget_persists_largest_first_until_under() -> None:
    results = [result(1, 85_000), result(2, 95_000), result(3, 90_000)]
    decisions = plan_persistence(results)
    # 270,000 > 200,000; persisting the 95,000 one leaves 175,000 + its preview block
    assert [(d.index, d.reason) for d in decisions] == [(2, "per_turn")]


def test_turn_budget_counts_per_result_replacements_at_preview_size() -> None:
    results = [result(1, 150_000), result(2, 120_000), result(3, 90_000)]
    decisions = plan_persistence(results)
    assert [(d.index, d.reason) for d in decisions] == [(1, "per_result"), (2, "per_result")]


def test_turns_are_budgeted_separately() -> None:
    results = [
        result(1, 90_000, turn=0),
        result(2, 90_000, turn=0),
        result(3, 90_000, turn=5),
        result(4, 90_000, turn=5),
    ]
    assert plan_persistence(results) == []


def test_exempt_results_count_toward_turn_but_others_are_persisted() -> None:
    results = [
        result(1, 99_000, name="read_file"),
        result(2, 99_000, name="read_file"),
        result(3, 30_000),
    ]
    decisions = plan_persistence(results)
    assert [(d.index, d.tool_name, d.reason) for d in decisions] == [(3, "terminal", "per_turn")]


def test_turn_of_only_exempt_results_may_stay_over_budget() -> None:
    results = [
        result(1, 99_000, name="read_file"),
        result(2, 99_000, name="READ_FILE"),
        result(3, 99_000, name="read_file"),
    ]
    assert plan_persistence(results) == []


def test_results_no_longer_than_a_preview_block_are_never_spilled() -> None:
    budget = ToolBudget(per_result_chars=8_000, per_turn_chars=16_000)
    small = [result(i, budget.preview_chars + PREVIEW_OVERHEAD_CHARS) for i in range(12)]
    assert plan_persistence(small, budget) == []


@given(
    st.lists(
        st.tuples(
            st.integers(0, 260_000),
            st.sampled_from(["terminal", "web_extract", "read_file", "search_files"]),
            st.integers(0, 2),
            st.booleans(),
        ),
        max_size=10,
    )
)
def test_plan_properties(specs: list[tuple[int, str, int, bool]]) -> None:
    budget = ToolBudget()
    results = [
        result(i, chars, name, turn, persisted)
        for i, (chars, name, turn, persisted) in enumerate(specs)
    ]
    decisions = plan_persistence(results, budget)
    chosen = {d.index: d for d in decisions}
    assert [d.index for d in decisions] == sorted(chosen), "sorted, no duplicates"
    for r in results:
        decision = chosen.get(r.index)
        if budget.is_exempt(r.tool_name) or r.already_persisted:
            assert decision is None
        elif len(r.content) > budget.per_result_chars:
            assert decision is not None and decision.reason == "per_result"
    for turn in {r.assistant_index for r in results}:
        members = [r for r in results if r.assistant_index == turn]
        live = sum(
            budget.replacement_chars(len(r.content)) if r.index in chosen else len(r.content)
            for r in members
        )
        spillable = [
            r
            for r in members
            if r.index not in chosen
            and not r.already_persisted
            and not budget.is_exempt(r.tool_name)
            and len(r.content) > budget.preview_chars + PREVIEW_OVERHEAD_CHARS
        ]
        assert live <= budget.per_turn_chars or not spillable, (
            "over budget only when nothing is left to spill"
        )


# --- preview --------------------------------------------------------------------------------


def test_preview_is_cut_at_the_last_newline_past_half() -> None:
    content = ("y" * 119 + "\n") * 3_000  # lines of 120 chars
    assert preview_text(content) == content[:1_440]


def test_preview_is_a_hard_cut_when_the_only_newline_is_early() -> None:
    content = "a" * 100 + "\n" + "b" * 5_000
    assert preview_text(content) == content[:1_500]


def test_short_output_preview_is_the_whole_output() -> None:
    assert preview_text("short\noutput") == "short\noutput"
    with pytest.raises(InvalidInput):
        preview_text("x", 0)


def test_preview_block_says_size_place_how_to_read_and_shows_preview() -> None:
    content = "line of output\n" * 20_000
    ref = "sha256:" + "ab" * 32
    block = preview_block(content, ref=ref, tool_call_id="call_9f", preview_chars=1_500)
    assert "300,000 characters" in block
    assert ref in block and "call_9f" in block
    assert "read_persisted" in block and '"offset"' in block and '"limit"' in block
    assert preview_text(content) in block
    assert block.rstrip().endswith("more characters not shown]")
    overhead = len(block) - len(preview_text(content))
    assert overhead <= PREVIEW_OVERHEAD_CHARS, "the planner's size estimate must be an upper bound"


def test_preview_block_uses_stated_size_when_given() -> None:
    block = preview_block("head only", ref="r1", tool_call_id="c", chars=2_000_000)
    assert "2,000,000 characters" in block


# --- blob names -----------------------------------------------------------------------------

SAFE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")


@given(st.text(max_size=300))
def test_blob_names_are_always_safe(tool_call_id: str) -> None:
    name = safe_blob_name(tool_call_id)
    assert name and SAFE.match(name)
    assert "/" not in name and "\\" not in name and ".." not in name
    assert len(name) <= 81


@given(st.text(max_size=80), st.text(max_size=80))
def test_different_ids_give_different_names(a: str, b: str) -> None:
    assume(a != b)
    assert safe_blob_name(a) != safe_blob_name(b)
    assert safe_blob_name(a) == safe_blob_name(a)


@pytest.mark.parametrize(
    "hostile", ["../../etc/passwd", "..", "/", "\\\\server\\share", "a\x00b", "-rf", "", "\n"]
)
def test_hostile_ids_are_neutralised(hostile: str) -> None:
    name = safe_blob_name(hostile)
    assert SAFE.match(name) and not name.startswith("-")


def test_ids_that_sanitize_alike_or_differ_only_in_case_stay_apart() -> None:
    assert safe_blob_name("a/b") != safe_blob_name("a_b")
    assert safe_blob_name("CALL_X").lower() != safe_blob_name("call_x").lower()
    with pytest.raises(InvalidInput):
        safe_blob_name(42)  # type: ignore[arg-type]


# --- slices ---------------------------------------------------------------------------------


def test_read_slice_pages_through_the_output() -> None:
    first = read_slice("abcdefghij", 0, 4)
    assert (first.text, first.offset, first.next_offset, first.total_chars) == ("abcd", 0, 4, 10)
    last = read_slice("abcdefghij", 8, 4)
    assert (last.text, last.next_offset) == ("ij", None)
    end = read_slice("abcdefghij", 10, 4)
    assert (end.text, end.next_offset) == ("", None)


@pytest.mark.parametrize(
    ("offset", "limit", "message"),
    [
        (-1, 10, "offset must be 0 or more"),
        (11, 10, "past the end"),
        (0, 0, "limit must be between"),
        (0, 20_001, "limit must be between"),
        (True, 10, "integer"),
        (0, 2.5, "integer"),
    ],
)
def test_read_slice_rejects_bad_ranges(offset: int, limit: int, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        read_slice("abcdefghij", offset, limit)


@given(st.text(max_size=500), st.integers(1, 60))
def test_slices_reassemble_the_output(data: str, limit: int) -> None:
    pieces, offset = [], 0
    while True:
        piece = read_slice(data, offset, limit)
        pieces.append(piece.text)
        if piece.next_offset is None:
            break
        assert piece.next_offset > offset
        offset = piece.next_offset
    assert "".join(pieces) == data


def test_read_persisted_tool_schema() -> None:
    fn = READ_PERSISTED_TOOL["function"]
    assert READ_PERSISTED_TOOL["type"] == "function" and fn["name"] == "read_persisted"
    assert set(fn["parameters"]["properties"]) == {"ref", "offset", "limit"}
    assert fn["parameters"]["required"] == ["ref"]
    fresh = read_persisted_tool()
    fresh["function"]["name"] = "changed"
    assert READ_PERSISTED_TOOL["function"]["name"] == "read_persisted"
