"""Hermes field parity (issue 10): merge-into-tail order, and one-liners that never say "None".

8. When the summary is merged into the first tail message, the message's own text
   comes first, then the summary, and the end-of-summary marker last (Hermes #56372).
   Ledgers written with the older order (summary, delimiter, text) still read back.
14. ``describe_tool_result`` and the prune one-liners describe a result that is None,
    a list of parts or a number by its real size and type.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.analysis.factviews import split_summary
from ctxledger.compressor import markers
from ctxledger.compressor.assemble import apply
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.markers import merge_summary, split_merged
from ctxledger.compressor.planner import plan
from ctxledger.compressor.prune import describe_tool_result, prune_tool_result
from ctxledger.messages import content_text

CALL = {
    "id": "c1",
    "type": "function",
    "function": {"name": "terminal", "arguments": '{"command": "ls"}'},
}
SHAPES: list[dict[str, Any]] = [
    {"role": "user", "content": "fix the failing test"},
    {"role": "user", "content": ""},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "look at this"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ],
    },
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "assistant", "content": "calling", "tool_calls": [CALL]},
]


def _old_order_merge(message: dict[str, Any], body: str) -> dict[str, Any]:
    """What ledgers written before issue 10 hold: summary, delimiter, then the message."""
    lead = markers.wrap_summary(body) + markers.merge_delimiter()
    content = message.get("content")
    if isinstance(content, list):
        return {**message, "content": [{"type": "text", "text": lead}, *content]}
    if isinstance(content, str):
        return {**message, "content": lead + content}
    return {**message, "content": lead}


def test_merged_text_is_original_then_summary_then_end_marker() -> None:
    merged = merge_summary({"role": "user", "content": "fix the failing test"}, "the body")
    text = merged["content"]
    assert text.startswith("fix the failing test")
    assert text.index("fix the failing test") < text.index(markers.summary_prefix())
    assert text.index(markers.summary_prefix()) < text.index("the body")
    assert text.endswith(markers.summary_end_marker())


def test_list_content_keeps_its_parts_first_and_the_summary_last() -> None:
    merged = merge_summary(SHAPES[2], "the body")
    assert merged["content"][:2] == SHAPES[2]["content"]
    assert merged["content"][-1]["text"].endswith(markers.summary_end_marker())
    assert content_text(merged).endswith(markers.summary_end_marker())


@pytest.mark.parametrize("message", SHAPES, ids=range(len(SHAPES)))
def test_both_orders_split_back_to_the_original(message: dict[str, Any]) -> None:
    assert split_merged(merge_summary(message, "the body")) == ("the body", message)
    body, original = split_merged(_old_order_merge(message, "old body")) or ("", None)
    assert body == "old body" and original is not None
    expected = message["content"]
    if message.get("tool_calls") and expected == "":
        expected = None  # the older order could not tell "" from null on a call message
    assert original["content"] == expected


_PREFIXED = st.sampled_from(markers.LEGACY_PREFIXES).flatmap(
    lambda prefix: st.text(max_size=40).map(lambda rest: prefix + rest)
)


@given(st.text(min_size=0, max_size=300), st.text(min_size=1, max_size=200) | _PREFIXED)
def test_merge_round_trip_for_any_text(text: str, body: str) -> None:
    body = body.strip() or "b"
    message = {"role": "user", "content": text}
    merged = merge_summary(message, body)
    assert merged["content"].startswith(text)
    assert merged["content"].endswith(markers.summary_end_marker())
    # a summary text that already opens with a summary prefix is unwrapped, not stacked
    # (``wrap_summary``): its body comes back without that prefix
    expected = markers.unwrap_summary(body)
    assert split_merged(merged) == (body.strip() if expected is None else expected, message)
    assert markers.is_summary_message(merged)


@pytest.mark.parametrize(
    ("summary", "body"),
    [
        ("[CONTEXT COMPACTION] the work so far", "the work so far"),
        ("[CONTEXT SUMMARY]: fixed the parser\nnext: tests", "fixed the parser\nnext: tests"),
        ("[ctxledger handoff summary]\n\nstep 3 of 5", "step 3 of 5"),
        (
            "a summary that names [CONTEXT COMPACTION] later",
            "a summary that names [CONTEXT COMPACTION] later",
        ),
    ],
)
def test_a_summary_text_with_an_older_prefix_is_merged_without_it(summary: str, body: str) -> None:
    message = {"role": "user", "content": "the ask"}
    merged = merge_summary(message, summary)
    assert split_merged(merged) == (body, message)


def _chat(n: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "agent"}]
    for i in range(n):
        messages.append({"role": "user", "content": f"question {i} " + "q " * 200})
        messages.append({"role": "assistant", "content": f"answer {i} " + "a " * 200})
    return messages


CONFIG = CompressionConfig(
    threshold_floor_tokens=0,
    summary_min_tokens=100,
    protect_first_n=2,
    tail_min_messages=4,
    protect_last_n=4,
)


def test_a_compaction_merges_after_the_tail_message_and_the_next_one_reads_it() -> None:
    # head ends with an assistant reply, the tail starts with a user ask: both roles collide
    config = CONFIG
    messages = _chat(8)
    first = plan(messages, config, [120] * len(messages), context_length=3_000)
    assert first.merged_into_tail and first.merge_index is not None
    original = messages[first.merge_index]["content"]
    out = apply(first, messages, "first body").messages
    merged = out[first.head_end]
    assert merged["content"].startswith(original)
    assert merged["content"].endswith(markers.summary_end_marker())
    # the planner finds the merged summary again (iterative update, no stacking)
    out += _chat(6)[1:]
    second = plan(out, config, [120] * len(out), context_length=3_000, compaction_count=1)
    assert second.action == "compress"
    assert second.previous_summary_index == first.head_end


def test_an_old_order_merged_summary_in_a_ledger_is_still_found() -> None:
    messages = _chat(8)
    messages[1] = _old_order_merge(messages[1], "old summary")
    p = plan(messages, CONFIG, [120] * len(messages), context_length=3_000, compaction_count=1)
    assert p.previous_summary_index == 1


def test_the_audit_reads_the_message_and_the_summary_of_a_merge_apart() -> None:
    for text in ("fix the failing test in src/app.py", "line one\n\nline two"):
        merged = merge_summary({"role": "user", "content": text}, "the body names src/b.py")
        assert split_summary(merged["content"]) == ("the body names src/b.py", text)


# --- 14. one-liners never print "None" --------------------------------------------------------


TOOLS = [
    ("terminal", '{"command": "make test"}'),
    ("read_file", '{"path": "src/app.py"}'),
    ("search_files", '{"pattern": "auth"}'),
    ("write_file", '{"path": "x.py"}'),
    ("patch", '{"path": "api.py"}'),
    ("web_search", '{"query": "retry"}'),
    ("custom_tool", '{"a": null, "b": 2}'),
    ("custom_tool", "null"),
]


@pytest.mark.parametrize(("name", "args"), TOOLS)
def test_a_none_result_is_described_as_empty(name: str, args: str) -> None:
    line = describe_tool_result(name, args, None)
    assert "None" not in line and "null" not in line
    assert "no content" in line


@pytest.mark.parametrize(("name", "args"), TOOLS)
def test_a_list_of_parts_is_described_by_its_text_size_and_parts(name: str, args: str) -> None:
    parts = [
        {"type": "text", "text": "x" * 300},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 50}},
    ]
    line = describe_tool_result(name, args, parts)
    assert "None" not in line and "{" not in line
    assert "300" in line and "1 text part" in line and "1 non-text part" in line


@pytest.mark.parametrize(("name", "args"), TOOLS)
@pytest.mark.parametrize("number", [12345, 2.5, 0])
def test_a_number_is_described_as_a_number(name: str, args: str, number: float) -> None:
    line = describe_tool_result(name, args, number)
    assert "None" not in line and "number" in line
    assert f"{len(str(number))}-char" in line


@given(
    st.one_of(
        st.none(),
        st.integers(),
        st.floats(allow_nan=False),
        st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=50)})),
    ),
    st.sampled_from(TOOLS),
)
def test_no_result_shape_prints_none(content: Any, tool: tuple[str, str]) -> None:
    assert "None" not in describe_tool_result(tool[0], tool[1], content)


def test_a_missing_tool_name_is_described_as_tool() -> None:
    assert describe_tool_result(None, None, None) == "[tool] (no content)"  # type: ignore[arg-type]


def test_prune_one_liner_for_a_list_result_states_the_real_size() -> None:
    message = {
        "role": "tool",
        "tool_call_id": "c1",
        "content": [{"type": "text", "text": "line\n" * 200}],
    }
    prune = prune_tool_result(3, message, ("terminal", '{"command": "make"}'))
    assert prune is not None
    text = prune.replacement["content"]
    assert "None" not in text and "1,000 chars in 1 text part" in text
    assert "200 lines of output" in text
