"""What providers say when a request fails: the wordings, error codes and stated
figures the overflow classifier (:mod:`ctxledger.runtime.overflow`) reads.

Each rule reads like the message it matches ("{limit}" is a named number group), so a
new server's wording is one line here. Rules are ordered: the first rule to state a
fact wins it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

#: characters a token, counted low, for a prompt a server states in characters
CHARS_PER_TOKEN_LOW = 3

NUMBER = r"(\d{1,3}(?:,\d{3})+|\d+)"
SIGNED_NUMBER = r"(-?\d{1,3}(?:,\d{3})+|-?\d+)"


def rx(pattern: str) -> re.Pattern[str]:
    # "{limit}" becomes a named number group (thousands separators allowed), "{available:S}"
    # a signed one, so every rule reads like the message it matches
    expanded = re.sub(
        r"\{(\w+)(:S)?\}",
        lambda m: f"(?P<{m[1]}>{(SIGNED_NUMBER if m[2] else NUMBER)[1:]}",
        pattern,
    )
    return re.compile(expanded, re.IGNORECASE)


#: how a figure follows its name: "max_model_len 32768", ": 32768", "=32768", "(32768)",
#: "is 32768", "of 32768", "is: 32768"
DELIM = r"(?:\s*[:=]\s*|\s*\(\s*|\s+(?:is|of)(?:\s*[:=])?\s*\(?\s*|\s+)"


@dataclass(frozen=True)
class Rule:
    signal: Literal["output", "prompt", "fact"]
    pattern: re.Pattern[str]
    #: the figure it states is the model's own output ceiling, not what the window has left
    ceiling: bool = False


#: Ordered: the first rule to state a fact wins it. "output" rules are evidence that
#: the requested output cap is what overflowed; "prompt" rules that the input did;
#: "fact" rules only supply numbers.
RULES: Final[tuple[Rule, ...]] = (
    # Anthropic: input + max_tokens > window
    Rule(
        "output",
        rx(
            r"input length and `?max_tokens`? exceed context limit:\s*{prompt}\s*\+\s*{requested}\s*>\s*{limit}"
        ),
    ),
    Rule(
        "output",
        rx(
            r"max_tokens\s*:?\s*{requested}\s*>\s*context_window\s*:?\s*{limit}\s*-\s*input_tokens\s*:?\s*{prompt}\s*=\s*available_tokens\s*:?\s*{available:S}"
        ),
    ),
    Rule("output", rx(r"available_tokens\s*[:=]?\s*{available:S}")),
    # OpenAI: the model's own output ceiling
    Rule(
        "output",
        rx(
            r"max_(?:completion_|new_)?tokens\W*(?:or\W+max_completion_tokens\W*)?is too large:\s*{requested}"
        ),
    ),
    Rule("output", rx(r"supports at most {available} completion tokens"), ceiling=True),
    # vLLM / older OpenAI: "(31000 in the messages, 2000 in the completion)"
    # (OpenRouter says "(140000 of text input, 10000 in the output)")
    Rule(
        "output",
        rx(
            r"\({prompt} (?:in the messages|of text input)(?:,\s*[\d,]+ of [a-z ]+input)*,\s*{requested} in the (?:completion|output)\)"
        ),
    ),
    Rule(
        "output",
        rx(
            r"requested {requested} output tokens and your prompt contains (?:at least )?{prompt} input tokens"
        ),
    ),
    Rule("output", rx(r"prompt contains (?:at least )?{prompt} input tokens")),
    # LM Studio / llama.cpp: the window in tokens, the prompt in characters
    Rule(
        "output",
        rx(
            r"requested {requested} output tokens and your prompt contains {prompt_chars} characters"
        ),
    ),
    # HF text-generation-inference
    Rule(
        "output",
        rx(
            r"inputs`? tokens \+ `?max_new_tokens`? must be <=\s*{limit}\.?\s*Given:\s*{prompt} `?inputs`? tokens and {requested} `?max_new_tokens"
        ),
    ),
    # DashScope / Qwen, Groq and friends: a plain output range
    Rule(
        "output", rx(r"range of max_tokens should be \[\s*1\s*,\s*{available}\s*\]"), ceiling=True
    ),
    Rule(
        "output",
        rx(r"max_tokens`? must be (?:less than or equal to|<=|at most)\s*`?{available}"),
        ceiling=True,
    ),
    # input overflow, with numbers
    Rule("prompt", rx(r"prompt is too long:\s*{prompt} tokens\s*>\s*{limit}(?: tokens)? maximum")),
    Rule(
        "prompt",
        rx(r"request \({prompt} tokens\) exceeds the available context size \({limit} tokens\)"),
    ),
    Rule(
        "prompt",
        rx(
            r"input token count \(?{prompt}\)? exceeds the maximum number of tokens allowed \(?{limit}\)?"
        ),
    ),
    Rule(
        "prompt",
        rx(
            r"prompt contains {prompt} tokens(?: and \d+ draft tokens)?,? too large for model with {limit} maximum context length"
        ),
    ),
    Rule("prompt", rx(r"maximum context length" + DELIM + r"{limit}(?: tokens)?")),
    # llama.cpp / Ollama / LM Studio / vLLM wordings that state the window
    Rule("prompt", rx(r"maximum context size" + DELIM + r"{limit}")),
    Rule("prompt", rx(r"context window of {limit} tokens")),
    Rule("prompt", rx(r"max_model_len" + DELIM + r"{limit}")),
    Rule("prompt", rx(r"maximum model length" + DELIM + r"{limit}")),
    Rule("prompt", rx(r"最大(?:上下文)?长度(?:为|是|:|：)?\s*{limit}")),
    Rule("prompt", rx(r"loaded with (?:a )?context length of (?:only )?{limit}")),
    Rule("prompt", rx(r"range of input length should be \[\s*1\s*,\s*{limit}\s*\]")),
    # numbers only
    Rule(
        "fact",
        rx(r"(?:messages?|request|prompt) (?:has|have|resulted in) {prompt} (?:input )?tokens"),
    ),
    Rule("fact", rx(r"context (?:window|length|size) (?:is|of) {limit} tokens")),
    Rule("fact", rx(r"n_ctx: {limit}")),
    Rule("fact", rx(r"n_prompt_tokens: {prompt}")),
    Rule("fact", rx(r"prompt \(length {prompt}\)")),
)

GENERIC_PROMPT = re.compile(
    r"context_length_exceeded|context length exceeded|prompt is too long|input is too long"
    r"|exceeds? (?:the )?(?:model'?s? )?(?:maximum |available )?context (?:window|length|size|limit)"
    r"|too many (?:input )?tokens|reduce the length of the (?:messages|input|prompt)"
    r"|context window (?:is )?(?:full|exceeded)|maximum context length"
    # llama.cpp server / Ollama / LM Studio / vLLM
    r"|context (?:size|window|length) (?:has been |was |is )?exceeded|maximum context size"
    r"|context window of [\d,]+ tokens|context length\b[^.\n]{0,80}?\bexceeded"
    r"|max_model_len|maximum model length|\bslot\b[^\n]{0,120}?\bcontext\b[^\n]{0,120}?not enough space"
    r"|not enough space in (?:the )?(?:context|kv cache)"
    # Chinese "exceeds the maximum (context) length" wordings
    r"|超过最大长度限制|超(?:过|出)了?[^，。,.\n]{0,16}?(?:最大|上下文)[^，。,.\n]{0,8}?(?:长度|限制|token|令牌|窗口)"
    r"|(?:上下文|输入)(?:长度|窗口)[^，。,.\n]{0,6}?(?:超过|超出|超限)",
    re.IGNORECASE,
)
RATE_TEXT = re.compile(
    r"rate.?limit|too many requests|tokens per min|requests per min|\b[RT]PM\b", re.IGNORECASE
)
PAYLOAD_TEXT = re.compile(
    r"payload too large|request entity too large|entity too large|body too large"
    r"|request_too_large|request too large|maximum allowed number of bytes",
    re.IGNORECASE,
)
AUTH_TEXT = re.compile(
    r"invalid.?api.?key|incorrect api key|unauthori[sz]ed|authentication|permission denied",
    re.IGNORECASE,
)
SERVER_TEXT = re.compile(
    r"overloaded|internal server error|service unavailable|bad gateway", re.IGNORECASE
)

RATE_CODES = frozenset(
    {"rate_limit_exceeded", "rate_limit_error", "rate_limited", "too_many_requests"}
)
AUTH_CODES = frozenset(
    {"authentication_error", "invalid_api_key", "permission_error", "unauthorized"}
)
PAYLOAD_CODES = frozenset({"request_too_large", "payload_too_large"})
SERVER_CODES = frozenset({"overloaded_error", "api_error", "server_error", "internal_error"})
OVERFLOW_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})
