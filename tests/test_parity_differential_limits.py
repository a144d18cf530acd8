"""Differential parity with the real hermes-agent 0.19.0 (issue 10, session 3): the
error classifier, the budgets and the pruning one-liners.

As in ``test_parity_differential.py``, the same inputs go through Hermes's own
functions and through ctxledger:

* 10-13: the classifier on llama.cpp / Ollama / vLLM / LM Studio / Chinese / OpenAI /
  Anthropic wordings, raised exactly as the openai SDK raises them
  (``classify_api_error``, ``parse_context_limit_from_error``,
  ``is_output_cap_error``, ``parse_available_output_tokens_from_error``);
* HERMES_SPEC §1: threshold, floor, tail budget and summary budget arithmetic;
* 14: pruning one-liners of string, None, list-of-parts and number results
  (``_summarize_tool_result``).

Differences kept on purpose are named rules or tests here and README decisions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.hermes_differential import Hermes, mismatches, oracle
from hypothesis import given
from hypothesis import strategies as st

from ctxledger import CompressionConfig
from ctxledger.compressor.prune import describe_tool_result
from ctxledger.runtime.overflow import classify_provider_error


@pytest.fixture(scope="module")
def hermes() -> Iterator[Hermes]:
    yield from oracle()


# --- 10-13: the error classifier on real servers' wordings ----------------------------------

#: (wording, what the status/shape may be): every wording of the issue, plus OpenAI,
#: Anthropic, DashScope and the usual rate-limit / auth texts
OVERFLOW_WORDINGS = [
    "Context size has been exceeded.",  # llama.cpp server / Ollama
    "超过最大长度限制",
    "输入长度超过最大长度限制",
    "请求的输入超出了模型的最大上下文长度",
    "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens "
    "(39000 in the messages, 1000 in the completion). Please reduce the length of the messages.",
    "The prompt (40000 tokens) exceeds the max_model_len of this model",
    "Input of 40000 tokens exceeds maximum model length",
    "the request exceeds the available context size, try increasing it",
    "The context length of the model (8192 tokens) was exceeded",
    "Context length exceeded.",
    "Maximum context size 65536 exceeded",
    "Maximum context size is 32768",
    "context window of 4096 tokens exceeded",
    *(f"max_model_len{d}32768" for d in (" ", ": ", "=", " (", " is ")),
    *(f"maximum model length{d}131072" for d in (" ", ": ", "=", " (", " is ")),
    "prompt is too long: 210000 tokens > 200000 maximum",
    "request (70000 tokens) exceeds the available context size (65536 tokens), try increasing it",
    "Maximum context size 512 exceeded",  # outside 1,024-10,000,000: no window learned
    "Maximum context size 99999999 exceeded",
]
OUTPUT_CAP_WORDINGS = [
    "max_tokens: 32768 > context_window: 200000 - input_tokens: 190000 = available_tokens: 10000",
    "max_tokens: 32768 > context_window: 200000 - input_tokens: 195000 = available_tokens : 5000",
    "This model's maximum context length is 65536 tokens. However, you requested 65536 output "
    "tokens and your prompt contains 77409 characters",  # LM Studio
    "This model's maximum context length is 131072 tokens. However, you requested 65536 output "
    "tokens and your prompt contains at least 65537 input tokens, for a total of at least 131073 "
    "tokens. Please reduce the length of the input prompt or the number of requested output tokens.",
    "Range of max_tokens should be [1, 65536]",  # DashScope / Qwen
]
OTHER_WORDINGS = ["Rate limit exceeded", "Too Many Requests", "Invalid API key", "Unauthorized"]


def _bodies(text: str) -> list[str]:
    """The body shapes servers answer with: OpenAI's error object, a bare string, an
    untyped object, a list."""
    return [
        json.dumps({"error": {"message": text, "type": "invalid_request_error", "code": None}}),
        text,
        json.dumps({"error": text}),
        json.dumps([{"error": {"message": text}}]),
    ]


def _hermes_decision(answer: dict[str, Any]) -> str:
    """What Hermes's loop does: lower the output cap, compress and retry, or give up."""
    if answer["output_cap_error"] or answer["available_output"] is not None:
        return "lower_max_tokens"
    return "compress" if answer["should_compress"] else "fail"


def _ours(status: int, body: str) -> tuple[str, Any]:
    verdict = classify_provider_error(status, body)
    if verdict.kind == "max_tokens_too_large":
        decision = "lower_max_tokens"
    else:
        decision = "compress" if verdict.is_context_overflow else "fail"
    return decision, verdict


def _classifier_pairs(hermes: Hermes, items: list[dict[str, Any]]) -> list[tuple[Any, Any, Any]]:
    """Same decision; the same window and output budget wherever Hermes reads one.

    Where Hermes reads no number, ctxledger may read one more (llama.cpp's
    "(65536 tokens)" after "context size", a model's stated output maximum): that is
    not a difference in behaviour Hermes has. Labels are compared where the status
    fixes them (429: rate limit, 401: auth).
    """
    answers = hermes.ask("classify", items)
    pairs = []
    for item, answer in zip(items, answers, strict=True):
        decision, verdict = _ours(item["status"], item["body"])
        theirs: dict[str, Any] = {"decision": _hermes_decision(answer)}
        ours: dict[str, Any] = {"decision": decision}
        if answer["stated_window"] is not None and theirs["decision"] == "compress":
            theirs["window"], ours["window"] = answer["stated_window"], verdict.context_limit
        if answer["available_output"] is not None:
            theirs["available"] = answer["available_output"]
            ours["available"] = verdict.available_output_tokens
        if item["status"] in (429, 401):
            theirs["label"] = {"rate_limit": "rate_limit", "auth": "auth"}.get(
                answer["reason"], answer["reason"]
            )
            ours["label"] = verdict.kind
        pairs.append((item, theirs, ours))
    return pairs


def test_classifier_matches_on_field_wordings(hermes: Hermes) -> None:
    items = [
        {"status": status, "body": body}
        for text in OVERFLOW_WORDINGS + OUTPUT_CAP_WORDINGS
        for status in (400, 413)
        for body in _bodies(text)
    ]
    items += [
        {"status": status, "body": body}
        for text in OVERFLOW_WORDINGS + OUTPUT_CAP_WORDINGS
        for status in (500, 502, 503, 529)
        for body in _bodies(text)[1:]  # untyped: see the test below for typed 5xx bodies
    ]
    items += [
        {"status": status, "body": json.dumps({"error": {"message": text}})}
        for text in OTHER_WORDINGS
        for status in (429, 401)
    ]
    # a JSON body that is a list, a number or null never crashes either side
    items += [{"status": 400, "body": body} for body in ("[]", "42", "null", "[1, 2]", "")]
    assert mismatches(_classifier_pairs(hermes, items)) == []


_WINDOW_WORDINGS = [
    "Maximum context size {n} exceeded",
    "Maximum context size is {n}",
    "context window of {n} tokens exceeded",
    "The prompt (900000 tokens) exceeds the max_model_len{d}{n}",
    "Input of 900000 tokens exceeds maximum model length{d}{n}",
    "This model's maximum context length is {n} tokens. However, you requested 99000000 tokens "
    "(98000000 in the messages, 1000000 in the completion).",
]
_PLAIN_WORDINGS = [
    "Context size has been exceeded.",
    "超过最大长度限制",
    "the request exceeds the available context size, try increasing it",
    "Context length exceeded.",
]


@st.composite
def _error_items(draw: st.DrawFn) -> dict[str, Any]:
    template = draw(st.sampled_from(_WINDOW_WORDINGS + _PLAIN_WORDINGS))
    text = template.format(
        n=draw(st.integers(100, 20_000_000)),
        d=draw(st.sampled_from([" ", ":", ": ", " : ", "=", " = ", "(", " (", " is ", " is: "])),
    )
    text = draw(st.sampled_from(["", "Error: ", "Bad Request: ", "llama_server: "])) + text
    status = draw(st.sampled_from([400, 413, 500, 502, 503, 529]))
    bodies = _bodies(text)
    return {"status": status, "body": draw(st.sampled_from(bodies if status < 500 else bodies[1:]))}


@given(st.lists(_error_items(), min_size=1, max_size=16))
def test_classifier_matches_on_generated_wordings(
    hermes: Hermes, items: list[dict[str, Any]]
) -> None:
    assert mismatches(_classifier_pairs(hermes, items)) == []


@pytest.mark.parametrize(
    ("status", "text"),
    [
        # llama.cpp's slot wording: Hermes 0.19 calls it a format error (issue 10 point 10)
        (400, "slot 0: context shift is disabled and there is not enough space in the context"),
        (500, "slot context full, not enough space to process the prompt"),
        # a proxy turned the server's 400 into a 5xx but kept OpenAI's typed error object:
        # Hermes reads the type, not the wording
        (500, "Context size has been exceeded."),
        (502, "This model's maximum context length is 32768 tokens."),
        (500, "超过最大长度限制"),
    ],
)
def test_overflow_recognised_where_hermes_is_not(hermes: Hermes, status: int, text: str) -> None:
    """Kept on purpose (issue 10 point 10, README decisions): an overflow wording is
    overflow whatever the status and body shape; Hermes 0.19 gives up on these."""
    body = _bodies(text)[0]
    (answer,) = hermes.ask("classify", [{"status": status, "body": body}])
    assert _hermes_decision(answer) == "fail"
    assert _ours(status, body)[0] == "compress"


# --- HERMES_SPEC §1: threshold, floor, tail and summary budgets ------------------------------

WINDOWS = [4_096, 8_192, 16_384, 32_000, 32_768, 40_000, 64_000, 65_536, 100_000, 128_000]
WINDOWS += [131_072, 200_000, 256_000, 400_000, 511_999, 512_000, 1_000_000, 2_000_000]
#: hermes-agent 0.19 raises the threshold to 75 % on windows under 512K (raise-only)
_SMALL_WINDOW, _SMALL_WINDOW_THRESHOLD = 512_000, 0.75
#: where a floor reaching the window puts Hermes's trigger
_FLOOR_SHARE = 0.85


def _budget_pairs(hermes: Hermes, items: list[dict[str, Any]]) -> list[tuple[Any, Any, Any]]:
    """Hermes's budgets beside ctxledger's, for the same window and settings.

    ctxledger's default threshold stays the spec's 50 % (README decisions); with the
    threshold Hermes 0.19 uses on a small window set explicitly, every figure matches,
    except that a configured threshold above 85 % is honoured where Hermes falls back
    to 85 % (windows at or under its 64K floor, or a threshold of the whole window).
    The summary budget differs on purpose only where 5 % of the window is under the
    2,000-token minimum (ctxledger keeps the maximum there: see the test below).
    """
    answers = hermes.ask("budgets", items)
    pairs = []
    for item, answer in zip(items, answers, strict=True):
        window, threshold = item["window"], item["threshold"]
        raised = threshold
        if window < _SMALL_WINDOW:
            raised = max(threshold, _SMALL_WINDOW_THRESHOLD)
        plain = CompressionConfig(threshold=threshold, target_ratio=item["target_ratio"])
        config = CompressionConfig(threshold=raised, target_ratio=item["target_ratio"])
        theirs = {"max summary": answer["max_summary_tokens"]}
        ours = {"max summary": config.max_summary_tokens(window)}
        degenerate = max(1, min(int(window * _FLOOR_SHARE), window - 1))
        if _honoured_above_floor(window, threshold, plain):
            # kept on purpose: Hermes triggers at 85 % whenever its 64K floor (or the
            # threshold itself) reaches the window; ctxledger honours the configured share
            assert answer["threshold_tokens_without_small_window_raise"] == degenerate
            theirs["threshold at the configured share"] = int(window * threshold)
        else:
            theirs["threshold at the configured share"] = answer[
                "threshold_tokens_without_small_window_raise"
            ]
        ours["threshold at the configured share"] = plain.threshold_tokens(window)
        if not _honoured_above_floor(window, raised, config):
            theirs |= {"threshold": answer["threshold_tokens"], "tail": answer["tail_budget"]}
            ours |= {
                "threshold": config.threshold_tokens(window),
                "tail": config.tail_token_budget(window),
            }
        if config.max_summary_tokens(window) >= config.summary_min_tokens:
            theirs["summary budgets"] = [budget for _, budget in answer["summary_budget"]]
            ours["summary budgets"] = [
                config.summary_budget(tokens, window) for tokens, _ in answer["summary_budget"]
            ]
        pairs.append((item, theirs, ours))
    return pairs


def _honoured_above_floor(window: int, threshold: float, config: CompressionConfig) -> bool:
    return threshold > _FLOOR_SHARE and (window <= config.threshold_floor_tokens or threshold >= 1)


def _budget_item(window: int, threshold: float, ratio: float) -> dict[str, Any]:
    return {
        "window": window,
        "threshold": threshold,
        "target_ratio": ratio,
        "summarized_chars": [0, 400, 40_000, 400_000],
    }


def test_budgets_match_on_field_windows(hermes: Hermes) -> None:
    items = [
        _budget_item(window, threshold, ratio)
        for window in WINDOWS
        for threshold, ratio in ((0.50, 0.20), (0.75, 0.20), (0.85, 0.10), (0.9, 0.5), (1.0, 0.80))
    ]
    assert mismatches(_budget_pairs(hermes, items)) == []


@given(
    st.lists(
        st.builds(
            _budget_item,
            st.integers(1_024, 10_000_000),
            st.sampled_from([0.3, 0.5, 0.6, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0]),
            st.floats(0.01, 0.99),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_budgets_match_on_generated_windows(hermes: Hermes, items: list[dict[str, Any]]) -> None:
    assert mismatches(_budget_pairs(hermes, items)) == []


def test_budget_differences_kept_on_purpose(hermes: Hermes) -> None:
    """README decisions: the default threshold stays 50 % on windows under 512K (Hermes
    0.19 raises it to 75 %), and on a window whose 5 % is under 2,000 tokens the summary
    target is that 5 % (Hermes asks for 2,000, more than its own maximum)."""
    (big, small) = hermes.ask(
        "budgets", [_budget_item(200_000, 0.5, 0.2), _budget_item(32_000, 0.5, 0.2)]
    )
    config = CompressionConfig()
    assert (big["threshold_tokens"], config.threshold_tokens(200_000)) == (150_000, 100_000)
    assert (big["tail_budget"], config.tail_token_budget(200_000)) == (30_000, 20_000)
    tokens, theirs = small["summary_budget"][2]
    assert small["max_summary_tokens"] == config.max_summary_tokens(32_000) == 1_600
    assert (theirs, config.summary_budget(tokens, 32_000)) == (2_000, 1_600)


# --- 14: pruning one-liners ---------------------------------------------------------------------

_LINES = "\n".join(f"collected item {i}" for i in range(47))


def _tool(name: str, args: dict[str, Any], content: Any) -> dict[str, Any]:
    return {"name": name, "arguments": json.dumps(args), "content": content}


ONELINER_FIELD_INPUTS = [
    _tool("terminal", {"command": "npm test"}, json.dumps({"output": _LINES, "exit_code": 0})),
    _tool("terminal", {"command": "pytest -x tests/"}, _LINES + "\nexit code 1"),
    _tool("terminal", {"command": "make " + "x" * 120}, json.dumps({"output": "", "exit_code": 2})),
    _tool("read_file", {"path": "src/app.py", "offset": 120}, "x" * 1200),
    _tool(
        "search_files", {"pattern": "compress", "path": "agent/"}, json.dumps({"total_count": 12})
    ),
    _tool("write_file", {"path": "a.py", "content": "a\nb\nc"}, "ok" * 150),
    _tool("patch", {"path": "a.py", "mode": "replace"}, "y" * 300),
    _tool("web_search", {"query": "vllm max_model_len"}, "z" * 2500),
    _tool("my_tool", {"alpha": "one", "beta": 2, "gamma": 3}, "w" * 5000),
    _tool("browser_navigate", {"url": "https://example.com/docs"}, "q" * 800),
]


def _facts(line: str) -> tuple[str, set[int]]:
    """The tool name a one-liner starts with and every number it states."""
    name = re.match(r"\[([^\]]*)\]", line)
    numbers = {int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*\d|\d", line)}
    return (name.group(1) if name else ""), numbers


def _oneliner_pairs(hermes: Hermes, items: list[dict[str, Any]]) -> list[tuple[Any, Any, Any]]:
    """ctxledger's one-liner names the same tool and states every number Hermes's does
    (size, exit code, match count, offset, arguments); the wording is its own.

    Two line counts differ on purpose: for a terminal result that is a JSON object with
    an ``output`` field ctxledger counts the lines of that output (Hermes counts the
    JSON text's, where they are escaped, and says 1); and a newline that ends (or
    starts) the output does not start another line (Hermes counts one more).
    """
    answers = hermes.ask("oneliner", items)
    pairs = []
    for item, theirs in zip(items, answers, strict=True):
        ours = describe_tool_result(item["name"], item["arguments"], item["content"])
        their_name, their_numbers = _facts(theirs)
        our_name, our_numbers = _facts(ours)
        content = str(item["content"])
        if item["name"] == "terminal" and (
            content.startswith(('{"output"', "\n")) or content.endswith("\n")
        ):
            their_numbers -= {int(n) for n in re.findall(r"(\d+) lines output", theirs)}
        missing_numbers = their_numbers - our_numbers
        pairs.append((item, (their_name, set()), (our_name, missing_numbers)))
    return pairs


def test_oneliners_state_hermes_facts_on_field_results(hermes: Hermes) -> None:
    assert mismatches(_oneliner_pairs(hermes, ONELINER_FIELD_INPUTS)) == []


_OUTPUT = st.lists(
    st.text(st.characters(codec="ascii", categories=("L", "N", "Zs")), max_size=30), max_size=60
).map("\n".join)


@st.composite
def _tool_results(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.sampled_from(["terminal", "read_file", "patch", "web_search", "some_tool"]))
    body = draw(_OUTPUT)
    if name == "terminal":
        code = draw(st.integers(-2, 255))
        content = draw(st.sampled_from([json.dumps({"output": body, "exit_code": code}), body]))
        return _tool(name, {"command": "make check"}, content)
    args = {"read_file": {"path": "src/x.py", "offset": draw(st.integers(1, 90_000))}}
    return _tool(name, args.get(name, {"path": "src/x.py"}), body)


@given(st.lists(_tool_results(), min_size=1, max_size=12))
def test_oneliners_state_hermes_facts_on_generated_results(
    hermes: Hermes, items: list[dict[str, Any]]
) -> None:
    assert mismatches(_oneliner_pairs(hermes, items)) == []


@pytest.mark.parametrize(
    ("content", "real_size"),
    [
        (None, "no content"),
        ([{"type": "text", "text": "abc" * 100}], "300 chars in 1 text part"),
        (
            [{"type": "text", "text": "ok"}, {"type": "image_url", "image_url": {"url": "x"}}],
            "1 non-text part",
        ),
        (12345, "5-char number"),
        (3.5, "3-char number"),
    ],
)
def test_non_string_results_are_described_by_their_real_size(
    hermes: Hermes, content: Any, real_size: str
) -> None:
    """Kept on purpose (README decisions): Hermes's prune pass skips a tool result that
    is not a string, and its one-liner for one says "0 chars"; ctxledger prunes it like
    any other and states its real size and type. Neither ever prints "None"."""
    item = _tool("read_file", {"path": "src/x.py"}, content)
    (theirs,) = hermes.ask("oneliner", [item])
    ours = describe_tool_result(item["name"], item["arguments"], content)
    assert "None" not in theirs and "None" not in ours
    assert "0 chars" in theirs
    assert real_size in ours
