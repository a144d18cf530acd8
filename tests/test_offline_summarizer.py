"""The offline summarizer (and the fallback body built on it): template, budget, facts."""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.compressor.factkinds import SENTENCE_KINDS
from ctxledger.compressor.facts import extract_facts, retention
from ctxledger.compressor.summarizers import (
    SECTION_HEADINGS,
    OfflineSummarizer,
    SummaryRequest,
    fallback_summary,
    offline,
    parse_sections,
    request_hash,
)
from ctxledger.compressor.summarizers.fallback import fallback_result
from ctxledger.compressor.summarizers.offline import MIN_BUDGET_TOKENS, build_summary
from ctxledger.tokens import count_messages, count_text

MODULES = ["auth/login", "auth/tokens", "api/routes", "db/session", "cache/redis_store", "cli/main"]
ERRORS = [
    "KeyError: 'session_id'",
    "AssertionError: assert 401 == 200",
    "ModuleNotFoundError: No module named 'jwt'",
    "TypeError: expected str, got NoneType",
    "sqlite3.OperationalError: no such table: users",
]


def _call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def _action(rng: random.Random, n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    module = rng.choice(MODULES)
    path = f"src/{module}.py"
    kind = rng.randrange(4)
    call_id = f"call_{n}"
    if kind == 0:
        test = f"tests/test_{module.split('/')[-1]}.py"
        call = _call(call_id, "terminal", command=f"cd /repo && python -m pytest {test} -x -q")
        if rng.random() < 0.5:
            error = rng.choice(ERRORS)
            line = rng.randrange(10, 400)
            result = (
                f'Traceback (most recent call last):\n  File "/repo/{path}", line {line}, in handler_{n}\n'
                f"    return run()\n{error}\n=== {rng.randrange(1, 5)} failed, {rng.randrange(5, 90)} passed in 0.{n}s ===\n"
                "exit code 1"
            )
        else:
            result = f"=== {rng.randrange(5, 90)} passed in 1.{n}s ===\nexit code 0"
    elif kind == 1:
        call = _call(call_id, "read_file", path=path)
        body = "\n".join(
            f"def step_{n}_{i}(value):\n    return value + {i}" for i in range(rng.randrange(2, 6))
        )
        result = f"class Handler{n}(Base):\n    timeout = {rng.randrange(5, 120)}\n{body}"
    elif kind == 2:
        call = _call(
            call_id, "patch", path=path, old_str=f"timeout = {n}", new_str=f"timeout = {n + 30}"
        )
        result = f"patched {path} (1 hunk)"
    else:
        call = _call(call_id, "search_files", pattern=f"get_user_{n}", path="src")
        result = f"src/{module}.py:{rng.randrange(1, 300)}: def get_user_{n}(session_id):"
    thought = rng.choice(
        [
            f"I'll use the `TokenCache{n}` wrapper because the plain dict loses entries across workers.",
            f"Next I'll check {path} for the expiry handling.",
            f"The fix is to pass `session_id` explicitly instead of reading the global at port {8000 + n}.",
            "",
        ]
    )
    assistant = {"role": "assistant", "content": thought or None, "tool_calls": [call]}
    return assistant, {"role": "tool", "tool_call_id": call_id, "content": result}


def coding_session(seed: int, n_actions: int) -> list[dict[str, Any]]:
    """A generated middle of a coding session: asks, tool calls, results, answers."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": "Please fix the failing login test in src/auth/login.py; do not change the public API.",
        }
    ]
    for n in range(n_actions):
        assistant, result = _action(rng, n)
        messages += [assistant, result]
        if n % 9 == 4:
            messages.append(
                {
                    "role": "user",
                    "content": f"Why does test_login_{n} depend on the Redis cache at redis://cache:6379/{n}?",
                }
            )
            messages.append(
                {
                    "role": "assistant",
                    "content": f"Because the session store in src/cache/redis_store.py reads db {n}.",
                }
            )
    messages.append(
        {
            "role": "user",
            "content": "Now also add a regression test for the expired-token case, using freezegun.",
        }
    )
    messages.append(
        {
            "role": "assistant",
            "content": "Adding the test next.",
            "tool_calls": [
                _call(
                    "call_last",
                    "write_file",
                    path="tests/test_expiry.py",
                    content="def test_expired(): ...",
                )
            ],
        }
    )
    messages.append({"role": "tool", "tool_call_id": "call_last", "content": "wrote 1 file"})
    return messages


def summarize(turns: list[dict[str, Any]], budget: int, **kwargs: Any) -> str:
    return build_summary(SummaryRequest(turns=turns, budget_tokens=budget, **kwargs))


def middle_budget(turns: list[dict[str, Any]], ratio: float = 0.2) -> int:
    """HERMES_SPEC §1: clamp(ratio × tokens being summarized, 2,000, 10,000)."""
    return int(min(10_000, max(2_000, ratio * sum(count_messages(turns)))))


def assert_headings_in_order(text: str) -> None:
    positions = [text.find(heading) for heading in SECTION_HEADINGS]
    assert all(p >= 0 for p in positions), [
        h for h, p in zip(SECTION_HEADINGS, positions, strict=True) if p < 0
    ]
    assert positions == sorted(positions)


# --------------------------------------------------------------------------- budget


@given(
    seed=st.integers(0, 10_000),
    n_actions=st.integers(0, 40),
    budget=st.integers(MIN_BUDGET_TOKENS, 2_500),
    focus=st.sampled_from([None, "redis cache", "expiry"]),
    with_previous=st.booleans(),
)
def test_summary_never_exceeds_the_budget_and_keeps_every_heading(
    seed: int, n_actions: int, budget: int, focus: str | None, with_previous: bool
) -> None:
    turns = coding_session(seed, n_actions)
    previous = summarize(coding_session(seed + 1, 12), 800) if with_previous else None
    text = summarize(turns, budget, focus=focus, previous_summary=previous)
    assert count_text(text) <= budget
    assert_headings_in_order(text)


def test_budgets_below_the_floor_are_raised_to_it() -> None:
    text = summarize(coding_session(3, 30), 10)
    assert count_text(text) <= MIN_BUDGET_TOKENS
    assert_headings_in_order(text)


# --------------------------------------------------------------------------- template


def test_latest_ask_is_the_active_task_verbatim_exactly_once() -> None:
    turns = coding_session(7, 25)
    latest = "Now also add a regression test for the expired-token case, using freezegun."
    text = summarize(turns, middle_budget(turns))
    assert text.count(latest) == 1
    active = parse_sections(text)["active_task"]
    assert active == [f'User asked: "{latest}"']


def test_sections_carry_actions_errors_files_and_questions() -> None:
    turns = coding_session(11, 20)
    sections = parse_sections(summarize(turns, middle_budget(turns)))
    assert sections["goal"][0].startswith(
        '- First request in these turns: "Please fix the failing login test'
    )
    assert sections["constraints"] == ["- do not change the public API."]
    numbers = [
        int(m.group(1)) for line in sections["completed"] if (m := re.match(r"(\d+)\. ", line))
    ]
    assert numbers == sorted(numbers) and numbers[-1] == 21  # 20 actions + the final write
    assert any("[tool: terminal]" in line for line in sections["completed"])
    assert any("src/" in line for line in sections["files"])
    assert sections["resolved"] and "Because the session store" in sections["resolved"][0]
    assert all(line.startswith("- ") for line in sections["blocked"])


def test_unanswered_questions_are_pending_asks() -> None:
    turns = [
        {"role": "user", "content": "Set up the project."},
        {"role": "assistant", "content": "Done, the project is set up."},
        {"role": "user", "content": "Which Python version does CI use?"},
        {"role": "user", "content": "Then bump the version to 2.0."},
    ]
    sections = parse_sections(summarize(turns, 1_000))
    assert sections["pending"] == ['- "Which Python version does CI use?"']
    assert sections["active_task"] == ['User asked: "Then bump the version to 2.0."']


def test_secrets_in_the_turns_never_reach_the_summary() -> None:
    turns = [
        {
            "role": "user",
            "content": "Deploy with password=Sup3rS3cret! and key sk-proj-" + "Z" * 40,
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                _call("c1", "terminal", command="psql postgres://app:hunter2@db:5432/x")
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "connected"},
    ]
    text = summarize(turns, 1_000)
    assert "Sup3rS3cret" not in text and "ZZZZ" not in text and "hunter2" not in text
    assert "[REDACTED]" in text


def test_empty_middle_still_fills_the_template() -> None:
    text = summarize([], 500)
    assert_headings_in_order(text)
    assert parse_sections(text)["active_task"] == []


# --------------------------------------------------------------------------- update / focus


def test_update_mode_continues_numbering_and_keeps_previous_items() -> None:
    previous = summarize(coding_session(5, 7), 3_000)
    prev_sections = parse_sections(previous)
    assert re.match(r"8\. ", prev_sections["completed"][-1])  # 7 actions + the final write
    new_turns = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [_call("n1", "terminal", command="make lint")],
        },
        {"role": "tool", "tool_call_id": "n1", "content": "All checks passed\nexit code 0"},
        {"role": "user", "content": "Great, now open the pull request."},
    ]
    text = summarize(new_turns, 3_000, previous_summary=previous)
    completed = parse_sections(text)["completed"]
    assert completed[-1].startswith("9. RAN `make lint`")
    assert completed[: len(prev_sections["completed"])] == prev_sections["completed"]
    assert parse_sections(text)["active_task"] == [
        'User asked: "Great, now open the pull request."'
    ]
    assert any("Earlier task" in line for line in parse_sections(text)["goal"])


def test_update_mode_moves_answered_pending_asks_to_resolved() -> None:
    previous = '## Pending User Asks\n- "Which database engine does staging use?"\n'
    new_turns = [
        {"role": "assistant", "content": "Staging uses the Postgres database engine, version 15."}
    ]
    sections = parse_sections(summarize(new_turns, 1_000, previous_summary=previous))
    assert sections["pending"] == []
    assert sections["resolved"] == ['- "Which database engine does staging use?"']


def test_focus_topic_items_are_kept_first_and_in_full() -> None:
    turns = coding_session(21, 40)
    budget = 700
    plain = summarize(turns, budget)
    focused = summarize(turns, budget, focus="redis cache")
    assert count_text(focused) <= budget
    redis_lines = [ln for ln in focused.splitlines() if "redis" in ln.lower()]
    assert len(redis_lines) > len([ln for ln in plain.splitlines() if "redis" in ln.lower()])
    assert any("Because the session store in src/cache/redis_store.py" in ln for ln in redis_lines)


# --------------------------------------------------------------------------- quality


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_keeps_most_facts_of_a_coding_session_at_the_standard_budget(seed: int) -> None:
    turns = coding_session(seed, 60)
    facts = extract_facts(turns)
    kept, _ = retention(facts, summarize(turns, middle_budget(turns)))
    ratio = len(kept) / len(facts)
    assert ratio >= 0.9, f"kept {len(kept)}/{len(facts)} = {ratio:.0%}"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_keeps_a_high_share_of_facts_even_on_a_tight_budget(seed: int) -> None:
    turns = coding_session(seed, 60)
    # value facts: whole decision / constraint sentences are scored apart (see below)
    facts = [f for f in extract_facts(turns) if f.kind not in SENTENCE_KINDS]
    # 20 % of the middle without the 2,000-token floor: ~1,000 tokens for ~180 facts
    budget = int(0.2 * sum(count_messages(turns)))
    text = summarize(turns, budget)
    kept, _ = retention(facts, text)
    ratio = len(kept) / len(facts)
    assert count_text(text) <= budget
    assert ratio >= 0.6, f"kept {len(kept)}/{len(facts)} = {ratio:.0%} within {budget} tokens"


# --------------------------------------------------------------------------- summarizer / fallback


def test_offline_summarizer_result_is_deterministic() -> None:
    request = SummaryRequest(turns=coding_session(4, 10), budget_tokens=1_500)
    first = anyio.run(OfflineSummarizer().summarize, request)
    second = anyio.run(OfflineSummarizer().summarize, request)
    assert first == second
    assert first.summarizer == "offline" and not first.fallback and first.usage is None
    assert re.fullmatch(r"[0-9a-f]{64}", first.prompt_hash)


def test_offline_and_fallback_prompt_hashes_are_the_shared_request_hash() -> None:
    pruned = [{"role": "tool", "tool_call_id": "c1", "content": "[output pruned]"}]
    original = [{"role": "tool", "tool_call_id": "c1", "content": "the whole output"}]
    request = SummaryRequest(turns=pruned, budget_tokens=800, focus="tests", originals=original)
    result = anyio.run(OfflineSummarizer().summarize, request)
    assert result.prompt_hash == request_hash(request, summarizer="offline")
    # the same value as before the helper was shared (recorded prompt hashes stay valid)
    inputs = {
        "summarizer": "offline",
        "turns": original,
        "budget_tokens": 800,
        "previous_summary": None,
        "focus": "tests",
    }
    assert (
        result.prompt_hash
        == hashlib.sha256(msgspec.json.encode(inputs, order="sorted")).hexdigest()
    )
    failed = fallback_result(
        request, failure="timed out", failure_class="timeout", summarizer="llm"
    )
    assert failed.prompt_hash == request_hash(request, summarizer="fallback", failure="timed out")
    assert (
        failed.prompt_hash
        != fallback_result(
            request, failure="HTTP 500", failure_class="server", summarizer="llm"
        ).prompt_hash
    )


def test_previous_summary_is_parsed_once_and_facts_are_counted_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parsed: list[str] = []
    counted: Counter[str] = Counter()
    real_parse, real_count = offline.parse_sections, offline.count_text

    def parse(text: str) -> dict[str, list[str]]:
        parsed.append(text)
        return real_parse(text)

    def count(text: str) -> int:
        counted[text] += 1
        return real_count(text)

    monkeypatch.setattr(offline, "parse_sections", parse)
    monkeypatch.setattr(offline, "count_text", count)
    previous = '## Active Task\nUser asked: "ship the release"\n## Completed Actions (historical)\n1. RAN `make`'
    # no user ask: the Active Task comes from the previous summary
    turns = [m for m in coding_session(3, 12) if m.get("role") != "user"]
    text = summarize(turns, 1_500, previous_summary=previous)
    assert parse_sections(text)["active_task"] == ['User asked: "ship the release"']
    assert len(parsed) == 1
    facts = {f.value for f in extract_facts(turns)} | {f"`{f.value}`" for f in extract_facts(turns)}
    assert facts and max(counted[t] for t in facts) <= 1


def test_fallback_summary_says_so_fills_the_template_and_fits_the_budget() -> None:
    turns = coding_session(9, 30)
    request = SummaryRequest(turns=turns, budget_tokens=1_200)
    text = fallback_summary(request, "summary model timed out")
    assert text.startswith("[fallback summary] The summarizer failed (summary model timed out)")
    assert f"{len(turns)} compacted message(s)" in text
    assert_headings_in_order(text)
    assert count_text(text) <= 1_200
    latest = "Now also add a regression test for the expired-token case, using freezegun."
    assert text.count(latest) == 1
    assert "Last turn (tool): wrote 1 file" in text


def test_offline_and_llm_templates_share_the_same_headings() -> None:
    from ctxledger.compressor.markers import prompt_text

    template = prompt_text("summary_template.md")
    headings = [line for line in template.splitlines() if line.startswith("## ")]
    assert tuple(headings) == SECTION_HEADINGS
    offline = [
        line
        for line in summarize(coding_session(1, 3), 1_000).splitlines()
        if line.startswith("## ")
    ]
    assert tuple(offline) == SECTION_HEADINGS


def test_secrets_in_a_previous_summary_are_redacted_too() -> None:
    previous = (
        '## Active Task\nUser asked: "use password=OldSecret99 for staging"\n## Critical Context\n- token: ghp_'
        + "a" * 36
    )
    text = summarize(
        [{"role": "assistant", "content": "Looking at staging."}], 1_000, previous_summary=previous
    )
    assert "OldSecret99" not in text and "ghp_" not in text
    assert "password=[REDACTED]" in text


def test_a_previous_summary_line_numbered_with_thousands_of_digits_is_no_number() -> None:
    # a message that reads as an earlier summary (a user can send one) whose Completed
    # Actions line starts with 5,000 digits: int() raised ValueError out of the compaction
    previous = "## Completed Actions\n" + "9" * 5000 + ". did a thing\n2. did another\n"
    text = summarize(
        [{"role": "assistant", "content": "Looking at staging."}], 1_000, previous_summary=previous
    )
    assert "did another" in text
