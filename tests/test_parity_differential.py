"""Differential parity with the real hermes-agent 0.19.0 (issue 10, session 3): tokens,
usage, summary replies and reasoning.

The same inputs go through Hermes's own functions (``tests/hermes_oracle.py``, one
process of ``.venv-hermes``'s python per module, inputs sent in batches) and through
ctxledger, and the answers are compared behaviour by behaviour:

* 1: the rough token estimate of messages with reasoning / replay fields and tool
  calls (Hermes's tail-budget estimate, ``_estimate_msg_budget_tokens``);
* 2: usage normalization, missing usage included (``usage_pricing.normalize_usage``);
* 4 and 7: what a summarizer reply of each shape is stored as
  (``ContextCompressor._generate_summary`` with its model call answered), and
  reasoning stripping (``strip_think_blocks``).

``test_parity_differential_limits.py`` covers the classifier, the budgets and the
one-liners. Where ctxledger differs on purpose the comparison applies the documented
rule (README "Decisions worth knowing", "Differences from hermes-agent 0.19.0") and
says which; anything else is a failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.hermes_differential import Hermes, mismatches, oracle
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.compressor.serialize import strip_reasoning
from ctxledger.compressor.summarizers.llm import _text_of
from ctxledger.errors import InvalidInput
from ctxledger.tokens import count_message, rough_message_tokens
from ctxledger.usage import normalize_usage


@pytest.fixture(scope="module")
def hermes() -> Iterator[Hermes]:
    yield from oracle()


# --- 1: the rough estimate counts what is sent --------------------------------------------

REASONING = "Let me think about the failing test first. " * 580  # ~25,000 characters


def _call(n: int, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"call_{n:04d}",
        "type": "function",
        "function": {"name": "terminal", "arguments": json.dumps(args)},
    }


ESTIMATE_FIELD_INPUTS: list[dict[str, Any]] = [
    {"role": "assistant", "content": "Done.", "reasoning_content": REASONING},
    {"role": "assistant", "content": "", "reasoning": REASONING[:4000]},
    {
        "role": "assistant",
        "content": "Checking.",
        "reasoning_details": [
            {"type": "reasoning.text", "text": REASONING[:3000], "format": "anthropic-claude-v1"},
            {"type": "reasoning.encrypted", "data": "Zm9v" * 300},
        ],
    },
    {
        "role": "assistant",
        "content": "",
        "codex_reasoning_items": [
            {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAAB" * 900}
        ],
        "codex_message_items": [{"type": "message", "id": "msg_1", "status": "completed"}],
    },
    {"role": "assistant", "content": None, "tool_calls": [_call(1, {"command": "pytest -x"})]},
    {
        "role": "assistant",
        "content": "Running four checks in parallel.",
        "tool_calls": [_call(i, {"command": f"make check-{i}", "timeout": 600}) for i in range(4)],
    },
    {"role": "user", "content": [{"type": "text", "text": "Why does the build fail?"}]},
    {
        "role": "tool",
        "tool_call_id": "call_0001",
        "content": "FAILED tests/test_x.py::t - 1\n" * 40,
    },
    {"role": "system", "content": "You are a coding agent."},
]

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=600)
_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=12,
)
_REPLAY_KEYS = (
    "reasoning",
    "reasoning_content",
    "reasoning_details",
    "codex_reasoning_items",
    "codex_message_items",
)


@st.composite
def _estimate_messages(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "assistant", "tool"]))
    content = draw(
        _TEXT
        | st.none()
        | st.lists(st.builds(lambda t: {"type": "text", "text": t}, _TEXT), max_size=3)
    )
    message: dict[str, Any] = {"role": role, "content": content}
    for key in draw(st.lists(st.sampled_from(_REPLAY_KEYS), unique=True, max_size=3)):
        message[key] = draw(_TEXT | st.lists(_JSONISH, max_size=3))
    if role == "assistant":
        calls = draw(st.lists(st.dictionaries(_TEXT, _JSONISH, max_size=3), max_size=4))
        if calls:
            message["tool_calls"] = [_call(i, args) for i, args in enumerate(calls)]
    return message


def _estimate_pairs(hermes: Hermes, messages: list[dict[str, Any]]) -> list[tuple[Any, Any, Any]]:
    """Hermes's tail-budget estimate beside ctxledger's rough estimate, per message.

    Equal up to the serialization of structured fields: ctxledger measures JSON
    (compact, with the arguments' quotes escaped, as on the wire), Hermes a Python repr
    or spaced JSON, and Hermes rounds each field down on its own. Within 2 tokens + 5 %
    (+ one per replay field, + the JSON spacing) is the same count; the bug class this
    guards against is 2-15x.
    """
    answers = hermes.ask("estimate", messages)
    pairs = []
    for message, answer in zip(messages, answers, strict=True):
        ours = rough_message_tokens(message)
        theirs = answer["budget"] - _envelope_surplus(message)
        # each field Hermes rounds down on its own can be up to one token under ours
        fields = sum(1 for key in _REPLAY_KEYS if message.get(key) not in (None, ""))
        slack = 2 + fields + theirs // 20 + _spacing_tokens(message)
        pairs.append((message, theirs, theirs if abs(ours - theirs) <= slack else ours))
    return pairs


def _envelope_surplus(message: dict[str, Any]) -> int:
    """Kept on purpose for now (README decisions): Hermes 0.19 counts each tool call's
    whole envelope (``len(str(call)) // 4``, #28053); ctxledger its arguments. Counting
    the envelope was tried and reverted: on tiny windows it made the planner's
    iterated compaction of merged summaries take more than six passes to settle
    (tests/test_planner_properties.py), which needs its own fix first."""
    calls = [c for c in message.get("tool_calls") or () if isinstance(c, dict)]
    envelope = sum(len(str(call)) // 4 for call in calls)
    return envelope - sum(len(str(c["function"].get("arguments", ""))) for c in calls) // 4


def _spacing_tokens(message: dict[str, Any]) -> int:
    """What Hermes's spaced JSON adds over the compact JSON ctxledger measures replay
    structures in (httpx sends request bodies compact), in tokens."""
    spaces = 0
    for key in _REPLAY_KEYS:
        value = message.get(key)
        if value is not None and not isinstance(value, str):
            spaced = json.dumps(value, ensure_ascii=False)
            spaces += len(spaced) - len(
                json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            )
    return spaces // 4 + (1 if spaces else 0)


def test_estimate_matches_on_field_messages(hermes: Hermes) -> None:
    assert mismatches(_estimate_pairs(hermes, ESTIMATE_FIELD_INPUTS)) == []


@given(st.lists(_estimate_messages(), min_size=1, max_size=8))
def test_estimate_matches_on_generated_messages(
    hermes: Hermes, messages: list[dict[str, Any]]
) -> None:
    assert mismatches(_estimate_pairs(hermes, messages)) == []


def _payload_message(part: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": "see the attachment"}, part]}


PAYLOAD_DATA = "JVBERi0xLjcK" * 8_000  # 96,000 base64 characters
PAYLOAD_PARTS: list[dict[str, Any]] = [
    {"type": "file", "file": {"filename": "a.pdf", "file_data": f"data:;base64,{PAYLOAD_DATA}"}},
    {"type": "input_file", "filename": "a.pdf", "file_data": f"data:;base64,{PAYLOAD_DATA}"},
    {"type": "input_audio", "input_audio": {"data": PAYLOAD_DATA, "format": "wav"}},
    {"type": "document", "source": {"type": "base64", "data": PAYLOAD_DATA}},
]


def test_a_file_or_audio_part_counts_what_hermes_preflight_counts(hermes: Hermes) -> None:
    """Session 29: a file or audio part counts its JSON's characters / 4, exactly and
    roughly, as Hermes's preflight estimate counts it (its repr's characters / 4: the
    same within the repr's spacing). Hermes's tail walk counts it as nothing, a
    documented difference: a 50-page PDF is not free."""
    messages = [_payload_message(part) for part in PAYLOAD_PARTS]
    answers = hermes.ask("estimate", messages)
    for message, answer in zip(messages, answers, strict=True):
        for ours in (rough_message_tokens(message), count_message(message)):
            assert abs(ours - answer["rough"]) <= 25, (message["content"][1]["type"], ours, answer)
        assert answer["budget"] < 100 < answer["rough"]


# --- 2: usage normalization, no usage included --------------------------------------------

#: ctxledger tells the shape from the field names; Hermes from the API mode it called
_API_MODE = {
    "openai_chat": "chat_completions",
    "anthropic": "anthropic_messages",
    "openai_responses": "codex_responses",
}

USAGE_FIELD_INPUTS: list[dict[str, Any]] = [
    {"raw": None, "api_mode": "chat_completions"},  # a server that sends no usage
    {"raw": {}, "api_mode": "chat_completions"},
    {"raw": {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None}},
    # llama.cpp / Ollama / LM Studio OpenAI-compatible
    {"raw": {"prompt_tokens": 8123, "completion_tokens": 412, "total_tokens": 8535}},
    # vLLM: details present but null
    {"raw": {"prompt_tokens": 900, "completion_tokens": 7, "prompt_tokens_details": None}},
    # OpenAI with cache and reasoning
    {
        "raw": {
            "prompt_tokens": 12000,
            "completion_tokens": 900,
            "prompt_tokens_details": {"cached_tokens": 8000},
            "completion_tokens_details": {"reasoning_tokens": 700},
        }
    },
    # OpenRouter routing Claude: Anthropic's cache names at the top level
    {
        "raw": {
            "prompt_tokens": 5000,
            "completion_tokens": 100,
            "cache_read_input_tokens": 3000,
            "cache_creation_input_tokens": 1500,
        }
    },
    # ... and a zero in the nested place does not hide them
    {
        "raw": {
            "prompt_tokens": 5000,
            "completion_tokens": 100,
            "prompt_tokens_details": {"cached_tokens": 0},
            "cache_read_input_tokens": 3000,
        }
    },
    # DeepSeek's own API
    {
        "raw": {
            "prompt_tokens": 1000,
            "completion_tokens": 50,
            "prompt_cache_hit_tokens": 600,
            "prompt_cache_miss_tokens": 400,
        }
    },
    {
        "raw": {
            "input_tokens": 40,
            "output_tokens": 300,
            "cache_read_input_tokens": 20000,
            "cache_creation_input_tokens": 1200,
        },
        "api_mode": "anthropic_messages",
    },
    {
        "raw": {
            "type": "response",
            "input_tokens": 7000,
            "output_tokens": 500,
            "total_tokens": 7500,
            "input_tokens_details": {"cached_tokens": 6000},
            "output_tokens_details": {"reasoning_tokens": 320},
        },
        "api_mode": "codex_responses",
    },
]


def _ours_usage(raw: Any) -> dict[str, int]:
    _, usage = normalize_usage(raw)
    return {k: v for k, v in usage.as_dict().items() if k not in ("prompt", "total")}


def _usage_pairs(hermes: Hermes, items: list[dict[str, Any]]) -> list[tuple[Any, Any, Any]]:
    for item in items:
        item.setdefault("api_mode", "chat_completions")
    answers = hermes.ask("usage", items)
    return [(i["raw"], h, _ours_usage(i["raw"])) for i, h in zip(items, answers, strict=True)]


def test_usage_matches_on_field_blocks(hermes: Hermes) -> None:
    assert mismatches(_usage_pairs(hermes, USAGE_FIELD_INPUTS)) == []


_COUNT = st.integers(0, 2_000_000)


@st.composite
def _usage_blocks(draw: st.DrawFn) -> dict[str, Any]:
    """A valid block of one shape (cache within the prompt, reasoning within the output)."""
    shape = draw(st.sampled_from([*_API_MODE, "none"]))
    prompt, output = draw(_COUNT), draw(_COUNT)
    read = draw(st.integers(0, prompt))
    write = draw(st.integers(0, prompt - read))
    reasoning = draw(st.integers(0, output))
    maybe = st.booleans()
    raw: dict[str, Any]
    if shape == "none":
        raw = draw(st.sampled_from([{}, {"prompt_tokens": None, "completion_tokens": None}]))
        return {"raw": draw(st.sampled_from([raw, None])), "api_mode": "chat_completions"}
    if shape == "anthropic":
        raw = {"input_tokens": prompt, "output_tokens": output}
        if draw(maybe):
            raw |= {"cache_read_input_tokens": read, "cache_creation_input_tokens": write}
    elif shape == "openai_responses":
        raw = {"type": "response", "input_tokens": prompt, "output_tokens": output}
        raw["input_tokens_details"] = {"cached_tokens": read} if draw(maybe) else None
        if draw(maybe):
            raw["output_tokens_details"] = {"reasoning_tokens": reasoning}
    else:
        raw = {"prompt_tokens": prompt, "completion_tokens": output}
        where = draw(st.sampled_from(["nested", "top", "deepseek", "none"]))
        if where == "nested":
            raw["prompt_tokens_details"] = {"cached_tokens": read, "cache_write_tokens": write}
        elif where == "top":
            raw |= {"cache_read_input_tokens": read, "cache_creation_input_tokens": write}
        elif where == "deepseek":
            raw |= {"prompt_cache_hit_tokens": read, "prompt_cache_miss_tokens": prompt - read}
        if draw(maybe):
            raw["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        if draw(maybe):
            raw["total_tokens"] = prompt + output
    return {"raw": raw, "api_mode": _API_MODE[shape]}


@given(st.lists(_usage_blocks(), min_size=1, max_size=12))
def test_usage_matches_on_generated_blocks(hermes: Hermes, items: list[dict[str, Any]]) -> None:
    assert mismatches(_usage_pairs(hermes, items)) == []


@pytest.mark.parametrize(
    "raw",
    [
        {
            "prompt_tokens": 100,
            "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 150},
        },
        {"prompt_tokens": -3, "completion_tokens": 5},
        {"prompt_tokens": "100", "completion_tokens": 5},
        {
            "prompt_tokens": 10,
            "completion_tokens": 5,
            "completion_tokens_details": {"reasoning_tokens": 9},
        },
    ],
)
def test_usage_hermes_coerces_what_ctxledger_rejects(hermes: Hermes, raw: dict[str, Any]) -> None:
    """Kept on purpose (README decisions): Hermes clamps or coerces an impossible block
    (cache above the prompt, a negative or quoted count, more reasoning than output)
    without a word; ctxledger rejects it with a clear error and records nothing."""
    (answer,) = hermes.ask("usage", [{"raw": raw, "api_mode": "chat_completions"}])
    assert "raised" not in answer
    with pytest.raises(InvalidInput):
        normalize_usage(raw)


# --- 4 and 7: what a summarizer reply is stored as; reasoning stripping -------------------


def _ours_reply(item: dict[str, Any]) -> str | None:
    """ctxledger's reply path: the text of the choice, reasoning stripped; empty fails."""
    if item["kind"] == "object":
        message: Any = {"content": item["value"]}
    else:
        message = item["value"]
    text = strip_reasoning(_text_of("openai", {"choices": [{"message": message}]}), dangling=True)
    return text.strip() or None


GOOD = "## Goal\nMake `make test` green.\n## Progress\nFixed tests/test_x.py (exit 1 -> 0)."

#: (reply, rule): "same" = stored alike; "text" = Hermes stores str() of a non-string
#: content (a Python repr), ctxledger its text parts; "reasoning only" = Hermes keeps a
#: reply that is nothing but reasoning, ctxledger treats it as empty (retry / fallback)
REPLY_FIELD_INPUTS: list[tuple[dict[str, Any], str]] = [
    ({"kind": "object", "value": GOOD}, "same"),
    ({"kind": "object", "value": "  " + GOOD + "\n\n"}, "same"),
    ({"kind": "dict", "value": {"role": "assistant", "content": GOOD}}, "same"),
    ({"kind": "string", "value": GOOD}, "same"),  # the message itself is a bare string
    ({"kind": "object", "value": "<think>The user wants a summary.</think>\n" + GOOD}, "same"),
    ({"kind": "object", "value": "<thinking>plan</thinking>" + GOOD}, "same"),
    ({"kind": "object", "value": "<thought>gemma plans</thought>" + GOOD}, "same"),
    ({"kind": "object", "value": GOOD + "\n<think>and then I ran out of tokens"}, "same"),
    ({"kind": "object", "value": ""}, "same"),  # both: a failure, never an empty summary
    ({"kind": "object", "value": "   \n"}, "same"),
    ({"kind": "object", "value": None}, "same"),
    ({"kind": "object", "value": {"text": GOOD}}, "text"),  # llama.cpp-style object
    ({"kind": "object", "value": [{"type": "text", "text": GOOD}]}, "text"),
    (
        {
            "kind": "object",
            "value": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": GOOD}],
        },
        "text",
    ),
    ({"kind": "object", "value": "<think>only reasoning, no summary</think>"}, "reasoning only"),
]


def test_reply_shapes_match_or_differ_as_documented(hermes: Hermes) -> None:
    items = [item for item, _ in REPLY_FIELD_INPUTS]
    answers = hermes.ask("reply", items)
    wrong = []
    for (item, rule), theirs in zip(REPLY_FIELD_INPUTS, answers, strict=True):
        ours = _ours_reply(item)
        if rule == "same":
            ok = ours == theirs
        elif rule == "text":
            # both accept the reply (no malformed failure); Hermes stores the repr
            ok = theirs == str(item["value"]) and ours == GOOD
        else:
            ok = theirs is not None and "<think>" in theirs and ours is None
        if not ok:
            wrong.append((item, rule, theirs, ours))
    assert wrong == []


_PROSE = st.text(st.characters(exclude_characters="<>", exclude_categories=("Cs",)), max_size=40)
_TAG = st.sampled_from(
    ["think", "thinking", "reasoning", "thought", "REASONING_SCRATCHPAD"]
).flatmap(lambda tag: st.sampled_from([tag, tag.upper(), tag.capitalize()]))


@st.composite
def _replies(draw: st.DrawFn) -> str:
    """Prose, line breaks, whole reasoning blocks in any case, maybe an unclosed block
    opening a last line (a model that ran out while reasoning)."""
    pieces = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["prose", "newline", "block"]))
        if kind == "prose":
            pieces.append(draw(_PROSE))
        elif kind == "newline":
            pieces.append("\n")
        else:
            tag = draw(_TAG)
            pieces.append(f"<{tag}>{draw(_PROSE)}</{tag}>")
    if draw(st.booleans()):
        pieces.append(f"\n<{draw(_TAG)}>{draw(_PROSE)}")
    return "".join(pieces)


def _words(text: str | None) -> str | None:
    return None if text is None else " ".join(text.split())


@given(st.lists(_replies(), min_size=1, max_size=10))
def test_reasoning_stripping_matches_on_generated_replies(hermes: Hermes, texts: list[str]) -> None:
    answers = hermes.ask("strip", texts)
    pairs = [
        (text, _words(theirs), _words(strip_reasoning(text, dangling=True)))
        for text, theirs in zip(texts, answers, strict=True)
    ]
    assert mismatches(pairs) == []


@given(st.lists(_replies(), min_size=1, max_size=6))
def test_generated_replies_are_stored_alike(hermes: Hermes, texts: list[str]) -> None:
    """The whole reply path, for replies that keep some text once reasoning is gone."""
    items = [
        {"kind": "object", "value": text}
        for text in texts
        if strip_reasoning(text, dangling=True).strip()
    ]
    answers = hermes.ask("reply", items)
    pairs = [(i["value"], theirs, _ours_reply(i)) for i, theirs in zip(items, answers, strict=True)]
    assert mismatches(pairs) == []


@pytest.mark.parametrize(
    ("reply", "hermes_keeps", "ours"),
    [
        # the server dropped the opening tag: Hermes keeps the reasoning, ctxledger drops it
        ("the user wants X</think>" + GOOD, "the user wants X" + GOOD, GOOD),
        # a tag with attributes is still a closed block (Hermes takes it for an unclosed
        # one and strips the whole reply, then stores the reply with its reasoning)
        ("<think effort='high'>plan</think>" + GOOD, "", GOOD),
        # tool-call XML is not reasoning: ctxledger keeps what the model wrote
        (
            '<tool_call>{"name": "ls"}</tool_call>' + GOOD,
            GOOD,
            '<tool_call>{"name": "ls"}</tool_call>' + GOOD,
        ),
    ],
)
def test_reasoning_stripping_differences_kept_on_purpose(
    hermes: Hermes, reply: str, hermes_keeps: str, ours: str
) -> None:
    """README decisions: these three differ from Hermes on purpose."""
    assert hermes.ask("strip", [reply]) == [hermes_keeps]
    assert strip_reasoning(reply, dangling=True) == ours
