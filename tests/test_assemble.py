"""Phase 4: building the continuation from a plan, merged summaries, manual feedback."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from ctxledger.compressor import markers
from ctxledger.compressor.assemble import (
    STUB_RESULT_TEXT,
    apply,
    feedback,
    merge_summary,
    split_merged,
)
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.planner import CompactionPlan, OrphanAction, plan
from ctxledger.compressor.recording import CompactionInput, summary_request
from ctxledger.errors import CompressionError
from ctxledger.messages import validate_messages

Message = dict[str, Any]


def _call(call_id: str, name: str = "bash") -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": '{"command": "ls"}'},
    }


def _chat(turns: int, *, system: bool = True) -> list[Message]:
    messages: list[Message] = [{"role": "system", "content": "You are helpful."}] if system else []
    for t in range(turns):
        messages.append({"role": "user", "content": f"question {t} " + "q " * 200})
        messages.append({"role": "assistant", "content": f"answer {t} " + "a " * 200})
    return messages


CONFIG = CompressionConfig(
    threshold_floor_tokens=0,
    summary_min_tokens=100,
    protect_first_n=2,
    tail_min_messages=3,
    protect_last_n=3,
)


def _plan(messages: list[Message], **kwargs: Any) -> CompactionPlan:
    counts = [120] * len(messages)
    p = plan(
        messages,
        kwargs.pop("config", CONFIG),
        counts,
        context_length=kwargs.pop("context_length", 3_000),
        **kwargs,
    )
    assert p.action == "compress", p
    return p


def test_output_is_head_summary_tail_with_entries() -> None:
    messages = _chat(8)
    p = _plan(messages)
    result = apply(p, messages, "Goal: answer questions.")
    out, entries = result.messages, result.entries
    validate_messages(out)
    assert entries[0].origin == "system" and entries[0].source_index == 0
    assert [e.source_index for e in entries[1 : p.head_end]] == list(range(1, p.head_end))
    summary_at = p.head_end
    assert entries[summary_at].origin == "summary" and entries[summary_at].source_index is None
    assert out[summary_at] == {
        "role": p.summary_role,
        "content": markers.wrap_summary("Goal: answer questions."),
    }
    assert out[summary_at + 1 :] == messages[p.tail_start :]
    assert all(e.origin == "carried" for e in entries[summary_at + 1 :])


def test_first_compaction_appends_the_system_note_once() -> None:
    messages = _chat(8)
    out = apply(_plan(messages), messages, "s").messages
    assert out[0]["content"] == markers.add_system_note("You are helpful.")
    again = _plan(out, compaction_count=1)
    assert not again.system_note
    assert apply(again, out, "s2").messages[0]["content"].count(markers.system_note()) == 1


def test_system_note_on_list_content_is_an_extra_part() -> None:
    messages = _chat(8)
    messages[0] = {"role": "system", "content": [{"type": "text", "text": "You are helpful."}]}
    out = apply(_plan(messages), messages, "s").messages
    assert out[0]["content"][-1] == {"type": "text", "text": markers.system_note()}


def test_apply_never_mutates_and_returns_copies() -> None:
    messages = _chat(8)
    before = copy.deepcopy(messages)
    out = apply(_plan(messages), messages, "s").messages
    assert messages == before
    out[-1]["content"] = "changed"
    assert messages == before


@pytest.mark.parametrize("text", ["", "   \n "])
def test_empty_summary_is_refused(text: str) -> None:
    messages = _chat(8)
    with pytest.raises(CompressionError, match="empty"):
        apply(_plan(messages), messages, text)


def test_a_skip_plan_cannot_be_applied() -> None:
    with pytest.raises(CompressionError, match="skipped"):
        apply(CompactionPlan(action="skip", skip_reason="no_progress"), _chat(2), "s")


def test_a_plan_for_another_list_is_refused() -> None:
    messages = _chat(8)
    p = _plan(messages)
    with pytest.raises(CompressionError, match="re-plan"):
        apply(p, [*messages, {"role": "user", "content": "more"}], "s")


def test_summary_merged_into_the_first_tail_message() -> None:
    # head ends with an assistant reply and the tail starts with a user message:
    # user collides with the tail, assistant with the head, so the summary is merged
    messages = _chat(8)
    p = _plan(messages, config=CONFIG.replace(tail_min_messages=4, protect_last_n=4))
    assert (
        messages[p.head_end - 1]["role"] == "assistant" and messages[p.tail_start]["role"] == "user"
    )
    assert p.merged_into_tail and p.merge_index == p.tail_start
    result = apply(p, messages, "merged body")
    merged = result.messages[p.head_end]
    assert result.entries[p.head_end].origin == "merged"
    original = messages[p.tail_start]["content"]
    # the message's own text first, the summary after it, the end marker last (Hermes #56372)
    assert merged["content"] == original + markers.merge_lead() + markers.wrap_summary(
        "merged body"
    )
    assert markers.unwrap_summary(merged["content"]) == "merged body"


def test_merge_and_split_round_trip_for_every_content_shape() -> None:
    shapes: list[Message] = [
        {"role": "user", "content": "plain"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "part"},
                {"type": "image_url", "image_url": {"url": "x"}},
            ],
        },
        {"role": "assistant", "content": None, "tool_calls": [_call("c1")]},
        {"role": "assistant", "content": "", "tool_calls": [_call("c2")]},
        {"role": "user", "content": ""},
        {"role": "assistant", "content": None, "refusal": "I can't help."},
        {"role": "assistant", "content": "", "refusal": "I can't help."},
    ]
    for message in shapes:
        merged = merge_summary(message, "the body")
        split = split_merged(merged)
        assert split is not None
        body, original = split
        assert body == "the body"
        # today's merge order keeps "" and null apart (the older order could not)
        assert original == dict(message)


def test_split_merged_on_plain_and_standalone_summary_messages() -> None:
    assert split_merged({"role": "user", "content": "hello"}) is None
    assert (
        split_merged({"role": "tool", "tool_call_id": "x", "content": markers.wrap_summary("b")})
        is None
    )
    assert split_merged({"role": "assistant", "content": markers.wrap_summary("body")}) == (
        "body",
        None,
    )


def test_stub_results_follow_the_calls_own_results() -> None:
    messages: list[Message] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [_call("a"), _call("b")]},
        {"role": "tool", "tool_call_id": "a", "content": "ok"},
        {"role": "user", "content": "next"},
    ]
    p = CompactionPlan(
        action="compress",
        n_messages=4,
        head_end=1,
        tail_start=1,
        compress_start=1,
        compress_end=1,
        summary_role="assistant",
        orphans=[OrphanAction(index=1, tool_call_id="b", action="stub_result")],
    )
    result = apply(p, messages, "s")
    roles = [(m["role"], m.get("tool_call_id")) for m in result.messages]
    assert roles == [
        ("user", None),
        ("assistant", None),
        ("assistant", None),
        ("tool", "a"),
        ("tool", "b"),
        ("user", None),
    ]
    assert result.messages[4]["content"] == STUB_RESULT_TEXT
    assert result.entries[4].origin == "stub" and result.entries[4].source_index == 1


def test_strip_call_and_drop_result() -> None:
    messages: list[Message] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "two calls", "tool_calls": [_call("a"), _call("b")]},
        {"role": "tool", "tool_call_id": "a", "content": "ok"},
        {"role": "tool", "tool_call_id": "ghost", "content": "orphan"},
    ]
    p = CompactionPlan(
        action="compress",
        n_messages=4,
        head_end=1,
        tail_start=1,
        compress_start=1,
        compress_end=1,
        summary_role="assistant",
        orphans=[
            OrphanAction(index=1, tool_call_id="b", action="strip_call"),
            OrphanAction(index=3, tool_call_id="ghost", action="drop_result"),
        ],
    )
    result = apply(p, messages, "s")
    assert [m.get("tool_call_id") for m in result.messages] == [None, None, None, "a"]
    stripped = result.messages[2]
    assert [c["id"] for c in stripped["tool_calls"]] == ["a"]
    assert result.entries[2].origin == "stripped"
    validate_messages(result.messages)


# --- feedback -----------------------------------------------------------------------------


def test_feedback_for_a_noop() -> None:
    messages = _chat(2)
    text = feedback(messages, copy.deepcopy(messages), 900, 900)
    # the system prompt is not one of the conversation's messages (as Hermes counts)
    assert text.splitlines()[0] == "No changes from compression: 4 messages"
    assert "rough estimate" in text and "~900" in text and "unchanged" in text


def test_feedback_for_a_compaction() -> None:
    text = feedback(_chat(8), _chat(2), 4_000, 1_200)
    lines = text.splitlines()
    assert lines[0] == "Compressed: 16 → 4 messages"
    assert "~4,000 → ~1,200" in lines[1] and "rough estimate" in lines[1]
    assert len(lines) == 2


def test_feedback_notes_when_fewer_messages_cost_more_tokens() -> None:
    text = feedback(_chat(8), _chat(2), 1_000, 1_300)
    assert len(text.splitlines()) == 3
    assert "fewer messages" in text


def test_feedback_of_a_fallback_says_so_with_what_it_replaced() -> None:
    text = feedback(
        _chat(8), _chat(2), 4_000, 1_300, failure="fallback", reason="HTTP 500", removed=12
    )
    lines = text.splitlines()
    assert lines[0] == "Compressed with fallback: 16 → 4 messages"
    assert "replaced 12 message(s)" in lines[2] and lines[2].endswith("Reason: HTTP 500")


def test_feedback_of_an_abort_preserves_every_message_and_redacts_the_reason() -> None:
    messages = _chat(3)
    text = feedback(
        messages,
        messages,
        900,
        900,
        failure="aborted",
        reason="401: key sk-abcdefghij0123456789xyz",
    )
    lines = text.splitlines()
    assert lines[0] == "Compression aborted: 6 messages preserved"
    assert "unchanged" in lines[1] and "no messages were removed" in lines[2]
    assert "sk-abcdefghij" not in text and "[REDACTED]" in text


def _turns(n: int, refusal_at: int | None = None) -> list[Message]:
    """n alternating user/assistant turns; the one at `refusal_at` is a refusal (content null)."""
    messages: list[Message] = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        if i == refusal_at:
            messages.append({"role": "assistant", "content": None, "refusal": "I can't help."})
        else:
            messages.append({"role": role, "content": f"m{i} " + "word " * 200})
    return messages


def _forced(messages: list[Message]) -> CompactionPlan:
    counts = [5 if m.get("content") is None else 210 for m in messages]
    return plan(messages, CompressionConfig(), counts, context_length=4_000, force=True)


def test_a_refusal_that_took_a_merged_summary_survives_the_next_compaction() -> None:
    refusal = {"role": "assistant", "content": None, "refusal": "I can't help."}
    messages = validate_messages([{"role": "system", "content": "sys"}, *_turns(8, 5)])
    first = _forced(messages)
    assert first.merge_index is not None and messages[first.merge_index] == refusal
    once = apply(first, messages, "first body").messages
    assert [split_merged(m) for m in once if m.get("refusal")] == [("first body", refusal)]
    again = validate_messages([*once, *_turns(6)])
    second = _forced(again)
    inp = CompactionInput(
        session_id="s", model="m", context_length=4_000, encoding="cl100k_base",
        messages=again, message_ids=[None, *(f"m{i}" for i in range(1, len(again)))],
        exact_tokens=[210] * len(again),
    )  # fmt: skip
    request = summary_request(inp, second, None)
    kept = apply(second, again, "second body").messages
    assert refusal in request.turns or any(
        split_merged(m) == ("second body", refusal) for m in kept
    )
    assert request.previous_summary == "first body"


def test_a_summary_beside_a_refusal_reads_as_before_unless_a_refusal_took_it() -> None:
    """Review 2 of s36-anylang: the merged-refusal reading looked at no role or content,
    so a user message, list content or Hermes's legacy prefix beside a refusal string
    read as merged (a user message with null content came back: invalid)."""
    from ctxledger.compressor.markers import wrap_summary

    wrapped = wrap_summary("BODY")
    assert split_merged({"role": "user", "content": wrapped, "refusal": ""}) == ("BODY", None)
    listed = {"role": "assistant", "content": [{"type": "text", "text": wrapped}], "refusal": ""}
    assert split_merged(listed) == ("BODY", None)
    legacy = {"role": "assistant", "content": "[CONTEXT COMPACTION] old summary", "refusal": ""}
    assert split_merged(legacy) == ("old summary", None)
    # what merge_summary makes of a refusal with null content reads back as merged
    refusal = {"role": "assistant", "content": None, "refusal": "no"}
    assert split_merged(merge_summary(refusal, "BODY")) == ("BODY", refusal)


DEV = {"role": "developer", "content": "You are helpful."}


def test_a_leading_developer_message_is_the_head_kept_as_sent_with_no_note() -> None:
    """A session with no system prompt whose first message is a developer message
    (session 37): it is the head, carried as sent (no system note on it, and the plan
    records none), and a later compaction's summary opens the transcript as a user turn."""
    messages = [DEV, *_chat(8, system=False)]
    first = _plan(messages)
    assert not first.system_note
    out = apply(first, messages, "s").messages
    assert out[0] == DEV
    later = [*out, *_chat(6, system=False)][:-1]  # the tail opens with a user turn
    again = _plan(later, compaction_count=1)
    assert again.head_end == 1 and later[again.tail_start]["role"] == "user"
    assert again.summary_role == "user" and again.merge_index == again.tail_start


def test_feedback_counts_no_leading_developer_message() -> None:
    text = feedback([DEV, *_chat(8, system=False)], [DEV, *_chat(2, system=False)], 900, 300)
    assert text.splitlines()[0] == "Compressed: 16 → 4 messages"


def test_a_stub_follows_the_last_result_the_output_keeps() -> None:
    """A stub went after the last result with one of its message's ids, even one never
    copied: here a second result for ``a`` in the summarized middle (the head ends
    between the two results), so the stub was lost and ``b`` left without a result."""
    messages: list[Message] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [_call("b"), _call("a")]},
        {"role": "tool", "tool_call_id": "a", "content": "x"},
        {"role": "tool", "tool_call_id": "a", "content": "out " * 300},
        *[
            {"role": role, "content": text * 40}
            for _ in range(2)
            for role, text in (("user", "more "), ("assistant", "ok "))
        ],
    ]
    config = CompressionConfig(protect_first_n=3, protect_last_n=3, orphan_policy="stub")
    counts = [len(json.dumps(m)) // 4 for m in messages]
    p = plan(messages, config, counts, context_length=2_000, force=True)
    assert (p.head_end, p.tail_start) == (4, 6)
    assert [(o.index, o.action) for o in p.orphans] == [(2, "stub_result")]
    out = apply(p, messages, "s").messages
    assert [(m["role"], m.get("tool_call_id")) for m in out[2:5]] == [
        ("assistant", None),
        ("tool", "a"),
        ("tool", "b"),
    ]
    assert out[4]["content"] == STUB_RESULT_TEXT
