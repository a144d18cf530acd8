"""Phase 2 and the whole plan: HERMES_SPEC §3 rules and the §9 defects, by example."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from ctxledger.compressor import markers
from ctxledger.compressor.assemble import apply
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.planner import CompactionPlan, plan, rough_counts
from ctxledger.compressor.prune import prune_messages
from ctxledger.errors import InvalidInput, InvalidMessage
from ctxledger.messages import validate_messages
from ctxledger.tokens import rough_message_tokens

Message = dict[str, Any]

# small budgets so that hand-built transcripts of a dozen messages get compacted
CONFIG = CompressionConfig(
    threshold_floor_tokens=0, summary_min_tokens=50, tail_min_messages=3, protect_last_n=3
)
WINDOW = 3_000  # threshold 1,500 -> tail budget 300 -> soft ceiling 450


def system(text: str = "You are a coding agent.") -> Message:
    return {"role": "system", "content": text}


def user(text: str = "please continue") -> Message:
    return {"role": "user", "content": text}


def reply(text: str = "done") -> Message:
    return {"role": "assistant", "content": text}


def calls(*ids: str, content: str | None = None, name: str = "bash") -> Message:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {
                "id": i,
                "type": "function",
                "function": {"name": name, "arguments": '{"command": "ls"}'},
            }
            for i in ids
        ],
    }


def result(call_id: str, content: str = "ok") -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def counts_of(messages: list[Message], default: int = 100, **overrides: int) -> list[int]:
    out = [default] * len(messages)
    for key, value in overrides.items():
        out[int(key.lstrip("i"))] = value
    return out


def make_plan(
    messages: list[Message], counts: list[int] | None = None, **kwargs: Any
) -> CompactionPlan:
    config = kwargs.pop("config", CONFIG)
    window = kwargs.pop("context_length", WINDOW)
    return plan(
        messages,
        config,
        counts if counts is not None else counts_of(messages),
        context_length=window,
        **kwargs,
    )


def chat(turns: int) -> list[Message]:
    out = [system()]
    for t in range(turns):
        out += [user(f"question {t}"), reply(f"answer {t}")]
    return out


def summary_positions(messages: list[Message]) -> list[int]:
    return [
        i for i, m in enumerate(messages) if m["role"] != "system" and markers.is_summary_message(m)
    ]


# --- when nothing happens ----------------------------------------------------------------


def test_too_few_messages_is_a_skip() -> None:
    messages = [*chat(3), user("last")]  # 8 messages: system + 3 + 3 + 1 is the limit
    assert make_plan(messages).skip_reason == "too_few_messages"
    assert make_plan([*messages, reply()]).skip_reason != "too_few_messages"


def test_disabled_config_skips_unless_forced() -> None:
    messages = chat(10)
    off = CONFIG.replace(enabled=False)
    assert make_plan(messages, config=off).skip_reason == "disabled"
    assert make_plan(messages, config=off, force=True).action == "compress"


def test_token_counts_must_match_the_messages() -> None:
    with pytest.raises(InvalidInput, match="entries"):
        make_plan(chat(5), counts=[1, 2, 3])
    with pytest.raises(InvalidInput, match="non-negative"):
        make_plan(chat(5), counts=[-1] * 11)


def test_malformed_messages_are_reported_not_crashed_on() -> None:
    messages = chat(5)
    messages[4] = {"role": "assistant", "content": None, "tool_calls": [{"function": {}}]}
    with pytest.raises(InvalidMessage, match="validated"):
        make_plan(messages)


# --- head --------------------------------------------------------------------------------


def _agentic_session() -> list[Message]:
    return [
        system(),
        user("set up the project"),
        calls("c1", "c2"),
        result("c1"),
        result("c2"),
        reply("set up"),
        user("now add tests"),
        calls("c3"),
        result("c3", "x" * 400),
        reply("tests added"),
        user("run them"),
        calls("c4"),
        result("c4"),
        reply("all green"),
        user("ship it"),
        reply("shipped"),
    ]


def test_head_is_system_plus_first_n_pushed_forward_past_tool_results() -> None:
    p = make_plan(_agentic_session(), config=CONFIG.replace(protect_first_n=2))
    assert p.action == "compress"
    assert p.head_end == 5  # index 3 is a tool result: the head takes the whole call group


def test_head_is_not_reprotected_after_the_first_compaction() -> None:
    messages = _agentic_session()
    assert make_plan(messages).head_end == 5
    assert make_plan(messages, compaction_count=1).head_end == 1


def test_a_summary_already_in_the_transcript_decays_the_head_too() -> None:
    messages = _agentic_session()
    messages[3] = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    messages.insert(1, user(markers.wrap_summary("earlier work")))
    p = make_plan(messages)
    assert p.head_end == 1 and p.previous_summary_index == 1


def test_a_legacy_hermes_summary_is_recognised_as_the_previous_summary() -> None:
    messages = [system(), user("[CONTEXT SUMMARY]: we set up the project"), *_agentic_session()[6:]]
    p = make_plan(messages)
    assert p.head_end == 1 and p.previous_summary_index == 1
    assert summary_positions(apply(p, messages, "updated").messages) == [1]


# --- the latest ask and reply --------------------------------------------------------------


def _single_task(steps: int) -> list[Message]:
    out = [system(), user("fix the failing test")]
    for s in range(steps):
        out += [calls(f"c{s}", content=f"step {s}"), result(f"c{s}", f"output {s} " + "o" * 300)]
    return out


def test_latest_user_ask_in_the_head_is_carried_after_the_summary() -> None:
    messages = _single_task(12)
    p = make_plan(messages)
    assert p.action == "compress"
    assert p.head_end == 1 and p.carried == [1]
    out = apply(p, messages, "worked on it").messages
    assert out[0]["role"] == "system"
    # only the system prompt precedes the summary, so it is a user turn; the carried ask
    # is a user turn too, so the summary is merged in front of it
    assert p.merged_into_tail and p.merge_index == 1
    assert out[1]["content"].startswith(
        "fix the failing test" + markers.merge_lead() + markers.summary_prefix()
    )
    assert out[1]["content"].endswith(markers.summary_end_marker())
    assert out[2:] == messages[p.tail_start :]


def test_latest_user_far_before_the_tail_is_carried_not_the_tail_extended() -> None:
    messages = [*chat(3), user("the real ask"), *_single_task(10)[2:]]
    counts = rough_counts(messages)
    p = make_plan(messages, counts)
    ask = messages.index(user("the real ask"))
    assert ask in p.carried and p.tail_start > ask + 1
    ceiling = int(CONFIG.tail_token_budget(WINDOW) * CONFIG.tail_soft_ceiling)
    assert sum(counts[p.tail_start :]) <= ceiling
    out = apply(p, messages, "s").messages
    where = next(
        i
        for i, m in enumerate(out)
        if m.get("content") == "the real ask" or str(m.get("content")).endswith("the real ask")
    )
    assert where > summary_positions(out)[0] or where == summary_positions(out)[0] == p.head_end


def test_latest_visible_reply_is_kept_when_later_turns_are_silent_calls() -> None:
    messages = [*chat(4), reply("here is the plan"), user("go")]
    for s in range(8):
        messages += [calls(f"c{s}"), result(f"c{s}", "r" * 400)]
    p = make_plan(messages, rough_counts(messages))
    visible = messages.index(reply("here is the plan"))
    assert visible in p.carried
    out = apply(p, messages, "s").messages
    after = out[summary_positions(out)[0] :]
    if p.merge_index == visible:  # the summary may be merged in front of it
        assert after[0]["content"].startswith("here is the plan" + markers.merge_lead())
    else:
        assert reply("here is the plan") in after


# --- §9 defects -----------------------------------------------------------------------------


def test_no_clamp_ever_splits_a_tool_group() -> None:
    # Hermes: the tail cut fell between the two results (index 4), alignment moved it back
    # to the assistant at the head boundary (2), a "one message after the head" clamp moved
    # it to 3, and the orphan clean-up deleted result A. Here the group is summarized whole.
    messages = [
        system(),
        user("start"),
        calls("A", "B"),
        result("A", "a" * 1600),
        result("B", "b" * 400),
        user("next"),
        reply("ok"),
        user("last"),
        reply("fine"),
    ]
    counts = counts_of(messages, i3=400, i4=100)
    p = make_plan(messages, counts, config=CONFIG.replace(protect_first_n=1))
    assert p.head_end == 2 and p.tail_start == 5
    assert {2, 3, 4} <= set(p.summarized_indices())
    out = apply(p, messages, "s").messages
    validate_messages(out)
    assert not any(m["role"] == "tool" for m in out)


def test_no_valid_cut_is_a_skip_with_a_reason() -> None:
    messages = [
        system(),
        user("do four things"),
        calls("A", "B", "C", "D"),
        result("A"),
        result("B"),
        result("C"),
        result("D"),
    ]
    p = make_plan(messages, compaction_count=1)
    assert p.action == "skip" and p.skip_reason == "no_valid_cut"


def test_tail_budget_larger_than_the_session_is_no_progress() -> None:
    messages = chat(6)
    p = make_plan(
        messages, rough_counts(messages), config=CompressionConfig(), context_length=200_000
    )
    assert p.action == "skip" and p.skip_reason == "no_progress"
    assert p.estimated_tokens_after >= p.tokens_before
    forced = make_plan(
        messages,
        rough_counts(messages),
        config=CompressionConfig(),
        context_length=200_000,
        force=True,
    )
    assert forced.action == "compress"
    validate_messages(apply(forced, messages, "s").messages)


def test_head_and_tail_tool_results_are_never_pruned() -> None:
    long = "L" * 2_000
    messages = [
        system(),
        user("go"),
        calls("h"),
        result("h", long),
        reply("head done"),
        *[m for s in range(6) for m in (calls(f"m{s}"), result(f"m{s}", long))],
        user("last"),
        calls("t"),
        result("t", long),
        reply("end"),
    ]
    p = make_plan(messages, config=CONFIG.replace(protect_first_n=3))
    assert p.prunes and {pr.index for pr in p.prunes} <= set(p.summarized_indices())
    out = apply(p, messages, "s").messages
    assert out[2:4] == messages[2:4]
    assert out[-3:] == messages[-3:]


def test_dangling_final_call_is_in_flight_and_kept() -> None:
    messages = [*chat(6), calls("pending")]
    p = make_plan(messages)
    assert p.action == "compress" and p.orphans == []
    out = apply(p, messages, "s").messages
    assert out[-1] == messages[-1]


def test_partially_answered_final_group_keeps_its_pending_call() -> None:
    messages = [*chat(6), calls("x", "y"), result("x")]
    p = make_plan(messages)
    assert p.orphans == []
    assert apply(p, messages, "s").messages[-2:] == messages[-2:]


# --- odd inputs: orphans ----------------------------------------------------------------------


@pytest.mark.parametrize(("policy", "action"), [("strip", "strip_call"), ("stub", "stub_result")])
def test_an_unanswered_call_before_the_end_is_repaired(policy: str, action: str) -> None:
    messages = [
        *chat(6),
        calls("lost", "kept", content="two calls"),
        result("kept"),
        user("and?"),
        reply("so"),
    ]
    p = make_plan(
        messages, config=CONFIG.replace(orphan_policy=policy, tail_min_messages=5, protect_last_n=5)
    )
    assert [(o.tool_call_id, o.action) for o in p.orphans] == [("lost", action)]
    out = apply(p, messages, "s").messages
    validate_messages(out)
    ids = {c["id"] for m in out for c in m.get("tool_calls") or ()}
    answered = {m["tool_call_id"] for m in out if m["role"] == "tool"}
    assert ids == answered


def test_stripping_that_would_empty_a_message_stubs_instead() -> None:
    messages = [*chat(6), calls("lost"), user("hello?"), reply("yes")]
    p = make_plan(messages)
    assert [o.action for o in p.orphans] == ["stub_result"]
    assert any("stubbing instead" in note for note in p.notes)


def test_a_result_without_its_call_is_dropped() -> None:
    messages = [*chat(6), result("ghost"), user("hm"), reply("ok")]
    p = make_plan(messages)
    assert [(o.index, o.action) for o in p.orphans] == [(13, "drop_result")]
    out = apply(p, messages, "s").messages
    assert all(m["role"] != "tool" for m in out)


# --- pinned -------------------------------------------------------------------------------------


def test_pinned_result_is_kept_with_its_call_group_before_the_summary() -> None:
    messages = _agentic_session()
    p = make_plan(messages, pinned=[8])
    assert p.head_end == 5 and p.pinned == [7, 8]
    assert any("partners [7]" in note for note in p.notes)
    out = apply(p, messages, "s")
    assert [e.source_index for e in out.entries[5:7]] == [7, 8]
    assert out.messages[5:7] == messages[7:9]
    assert summary_positions(out.messages)[0] >= 7


def test_pins_outside_the_transcript_are_ignored_with_a_note() -> None:
    p = make_plan(_agentic_session(), pinned=[99])
    assert p.action == "compress" and p.pinned == []
    assert any("99" in note for note in p.notes)


# --- summary role ----------------------------------------------------------------------------


def test_role_user_after_a_tool_result_flips_when_the_tail_starts_with_user() -> None:
    messages = [system(), user("a"), calls("h"), result("h"), *chat(5)[1:]]
    p = make_plan(
        messages, config=CONFIG.replace(protect_first_n=3, tail_min_messages=4, protect_last_n=4)
    )
    assert messages[p.head_end - 1]["role"] == "tool" and messages[p.tail_start]["role"] == "user"
    assert (p.summary_role, p.merged_into_tail) == ("assistant", False)


def test_role_user_after_an_assistant_head() -> None:
    messages = chat(7)
    p = make_plan(messages, counts_of(messages, i11=300), config=CONFIG.replace(protect_first_n=2))
    assert (
        messages[p.head_end - 1]["role"] == "assistant"
        and messages[p.tail_start]["role"] == "assistant"
    )
    assert (p.summary_role, p.merged_into_tail) == ("user", False)


def test_both_roles_colliding_merges_into_the_first_tail_message() -> None:
    messages = chat(7)
    p = make_plan(
        messages, config=CONFIG.replace(protect_first_n=2, tail_min_messages=4, protect_last_n=4)
    )
    assert (
        messages[p.head_end - 1]["role"] == "assistant" and messages[p.tail_start]["role"] == "user"
    )
    assert p.merged_into_tail and p.merge_index == p.tail_start


def test_only_the_system_prompt_in_the_head_forces_a_user_summary() -> None:
    messages = chat(7)
    p = make_plan(messages, counts_of(messages, i11=300), compaction_count=1)
    assert p.head_end == 1 and messages[p.tail_start]["role"] == "assistant"
    assert (p.summary_role, p.merged_into_tail) == ("user", False)


def test_no_user_message_left_forces_a_user_summary() -> None:
    messages = [system()]
    for s in range(8):
        messages += [calls(f"c{s}", content=f"thinking {s}"), result(f"c{s}", "r" * 300)]
    messages.append(reply("finished"))
    p = make_plan(messages, config=CONFIG.replace(protect_first_n=3))
    assert messages[p.head_end - 1]["role"] == "tool"
    assert p.summary_role == "user"


# --- iterative compaction ------------------------------------------------------------------------


def test_second_compaction_updates_the_merged_summary_instead_of_stacking() -> None:
    messages = _single_task(10)
    first = make_plan(messages)
    out = apply(first, messages, "first summary").messages
    assert first.merged_into_tail
    for s in range(10, 20):  # the agent keeps working on the same ask
        out += [calls(f"c{s}", content=f"step {s}"), result(f"c{s}", f"output {s} " + "o" * 300)]
    second = make_plan(out, compaction_count=1)
    assert second.action == "compress"
    assert second.carried == [1] and second.unmerged == [1] and second.previous_summary_index == 1
    final = apply(second, out, "second summary")
    assert summary_positions(final.messages) == [1]
    body = markers.unwrap_summary(final.messages[1]["content"])
    assert body == "second summary"
    assert final.messages[1]["content"].startswith("fix the failing test" + markers.merge_lead())
    assert final.messages[0]["content"].count(markers.system_note()) == 1


def test_a_large_merged_summary_counts_as_summarized_so_recompaction_progresses() -> None:
    messages = _single_task(10)
    out = apply(make_plan(messages), messages, "long summary " + "s" * 12_000).messages
    for s in range(10, 14):
        out += [calls(f"c{s}", content=f"step {s}"), result(f"c{s}", "short")]
    counts = rough_counts(out)
    p = make_plan(out, counts, compaction_count=1)
    assert p.action == "compress" and p.unmerged == [1]
    assert p.middle_tokens > 3_000  # the old summary's ~3,000 tokens are being rewritten
    after = apply(p, out, "new summary").messages
    assert sum(rough_counts(after)) < sum(counts)


def test_previous_standalone_summary_is_summarized_again() -> None:
    messages = [system(), user(markers.wrap_summary("old")), *chat(6)[1:]]
    p = make_plan(messages, compaction_count=1)
    assert p.previous_summary_index == 1 and 1 in p.summarized_indices()


# --- the plan as data ------------------------------------------------------------------------------


def test_plan_is_json_serializable_and_round_trips() -> None:
    p = make_plan(_agentic_session(), focus="the tests")
    data = p.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert msgspec.convert(data, CompactionPlan) == p
    assert p.focus == "the tests"


def test_summary_budget_follows_the_config_clamp() -> None:
    messages = _single_task(12)
    p = make_plan(messages, rough_counts(messages))
    assert p.summary_budget_tokens == CONFIG.summary_budget(p.middle_tokens, WINDOW)
    assert p.tail_token_budget == CONFIG.tail_token_budget(WINDOW)
    assert p.head_count == p.head_end and p.tail_count == len(messages) - p.tail_start


def test_middle_tokens_count_pruned_messages_at_their_stand_in_size() -> None:
    messages = _single_task(12)
    counts = rough_counts(messages)
    p = make_plan(messages, counts)
    raw = sum(counts[i] for i in p.summarized_indices())
    assert p.prunes and p.middle_tokens < raw


def test_prunes_are_phase_one_over_the_summarized_messages() -> None:
    # the plan's rewrites are exactly prune.prune_messages over what is summarized: the
    # planner only hands it the layout's maps and the candidates, it has no copy of the loop
    messages = _single_task(12)
    messages[5]["content"] = messages[3]["content"]  # a duplicate, newest copy in the middle
    messages[6]["tool_calls"][0]["function"]["arguments"] = json.dumps({"command": "x" * 900})
    counts = rough_counts(messages)
    p = make_plan(messages, counts)
    expected = prune_messages(
        messages,
        p.summarized_indices(),
        min_chars=CONFIG.prune_min_chars,
        args_over=CONFIG.args_truncate_over,
        args_leaf_keep=CONFIG.args_leaf_keep,
    )
    assert p.prunes == expected
    assert {pr.kind for pr in p.prunes} == {"tool_result", "duplicate", "args_truncated"}
    saved = sum(max(0, counts[pr.index] - rough_message_tokens(pr.replacement)) for pr in p.prunes)
    raw = sum(counts[i] for i in p.summarized_indices())
    assert p.middle_tokens == raw - saved


def test_system_note_is_not_added_twice() -> None:
    messages = chat(8)
    messages[0] = system(markers.add_system_note("You are a coding agent."))
    assert not make_plan(messages).system_note
    assert make_plan(chat(8)).system_note


def test_without_a_system_prompt_the_head_starts_at_zero() -> None:
    messages = chat(8)[1:]
    p = make_plan(messages)
    assert p.action == "compress" and not p.system_note
    out = apply(p, messages, "s").messages
    validate_messages(out)
    assert out[: p.head_end] == messages[: p.head_end]
