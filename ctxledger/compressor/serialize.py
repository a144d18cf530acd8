"""The middle of a transcript serialized as text for a summarizer (HERMES_SPEC §3 phase 3).

One block per message, separated by blank lines::

    [USER]
    please fix the failing test

    [ASSISTANT]
    Running the tests first.
    [TOOL CALL call_1] terminal({"command": "pytest -x"})

    [TOOL RESULT call_1 · terminal]
    1 failed, 12 passed

An assistant's refusal (OpenAI's ``refusal`` field, beside null or empty content) is a
``[REFUSAL] text`` line of its block (unless its content says the same): the model said
it, so a summary may say so. An audio reply (kept by its id) is an ``[AUDIO REPLY id]``
line.

A content longer than 6,000 characters keeps its first 4,000 and last 1,500 around a
cut mark that says how many characters were left out; tool-call arguments longer than
1,500 characters keep their first 1,200. Shorter ones are sent whole (the lengths
hermes-agent 0.19 uses: a cut only where it saves something). Everything is redacted
(``ctxledger.compressor.redact``) *before* it is cut, so a secret split by a cut cannot
leak half-visible.

Reasoning never reaches a summary: ``<think>``, ``<thinking>`` and ``<reasoning>``
blocks are taken out of every text before it is sent (:func:`strip_reasoning`, which
the summarizers also apply to what comes back).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ctxledger.compressor.markers import unwrap_summary
from ctxledger.compressor.redact import redact
from ctxledger.messages import audio_reference, content_text, refusal_text

#: a content up to this long is sent whole; a longer one keeps its head and tail
CONTENT_MAX_CHARS = 6000
CONTENT_HEAD_CHARS = 4000
CONTENT_TAIL_CHARS = 1500
#: tool-call arguments up to this long are sent whole; longer ones keep their first
#: ARGS_HEAD_CHARS
ARGS_MAX_CHARS = 1500
ARGS_HEAD_CHARS = 1200

#: the reasoning tags models emit inline: <think> (DeepSeek, Qwen, MiniMax), <thinking>,
#: <reasoning>, <thought> (Gemma) and <REASONING_SCRATCHPAD>, in any case
_REASONING_TAGS = "think|thinking|reasoning|thought|reasoning_scratchpad"
#: a whole block, however its tag is spelled (case, attributes)
_REASONING_BLOCK = re.compile(
    rf"<(?P<tag>{_REASONING_TAGS})\b[^>]*>.*?</(?P=tag)\s*>", re.IGNORECASE | re.DOTALL
)
#: an opening tag never closed, at the start of a line (the model ran out while still
#: reasoning): to the end. Elsewhere in a line it is a mention, and only the tag goes.
_REASONING_OPEN = re.compile(
    rf"(?:\A|\n)[ \t]*<(?:{_REASONING_TAGS})\b[^>]*>.*\Z", re.IGNORECASE | re.DOTALL
)
#: a closing tag whose opening was left out (some servers drop it): the text before it
_REASONING_CLOSE = re.compile(rf"\A.*?</(?:{_REASONING_TAGS})\s*>", re.IGNORECASE | re.DOTALL)
#: a tag left over once the blocks are gone
_REASONING_STRAY = re.compile(rf"</?(?:{_REASONING_TAGS})\b[^>]*>", re.IGNORECASE)


def strip_reasoning(text: str, *, dangling: bool = False) -> str:
    """`text` without reasoning blocks (``<think>``, ``<thinking>``, ``<reasoning>``,
    ``<thought>``, ``<REASONING_SCRATCHPAD>``; HERMES_SPEC §3).

    Whole blocks go. With ``dangling=True`` (a model's reply) so does everything
    before a closing tag that has no opening one (some servers drop the opening tag),
    everything after an opening tag that starts a line and is never closed (the model
    ran out while still reasoning), and any tag left over. Text without such a tag is
    returned as it is.
    """
    if "<" not in text or not re.search(rf"</?(?:{_REASONING_TAGS})\b", text, re.IGNORECASE):
        return text
    text = _REASONING_BLOCK.sub("", text)
    if dangling:
        text = _REASONING_CLOSE.sub("", text)
        text = _REASONING_OPEN.sub("", text)
        text = _REASONING_STRAY.sub("", text)
    return text.strip()


def cut_middle(
    text: str,
    head: int = CONTENT_HEAD_CHARS,
    tail: int = CONTENT_TAIL_CHARS,
    over: int = CONTENT_MAX_CHARS,
) -> str:
    """`text` reduced to its first `head` and last `tail` chars when longer than `over`."""
    omitted = len(text) - head - tail
    if len(text) <= over or omitted <= 0:
        return text
    return f"{text[:head]}\n[… {omitted:,} chars omitted …]\n{text[len(text) - tail :]}"


def cut_end(text: str, limit: int = ARGS_HEAD_CHARS, over: int = ARGS_MAX_CHARS) -> str:
    """`text` reduced to its first `limit` chars when longer than `over`."""
    omitted = len(text) - limit
    if len(text) <= over or omitted <= 0:
        return text
    return f"{text[:limit]}[… {omitted:,} chars omitted]"


def _content(message: Mapping[str, Any]) -> str:
    text = strip_reasoning(content_text(message))
    content = message.get("content")
    if isinstance(content, list):
        others = sum(
            1 for p in content if not (isinstance(p, Mapping) and isinstance(p.get("text"), str))
        )
        if others:
            text = f"{text}\n[{others} non-text part(s)]".lstrip("\n")
    return text


def _call_line(call: Mapping[str, Any]) -> str:
    fn = call.get("function") if isinstance(call.get("function"), Mapping) else {}
    assert isinstance(fn, Mapping)
    name = str(fn.get("name") or "?")
    args = fn.get("arguments")
    args_text = args if isinstance(args, str) else "" if args is None else str(args)
    return f"[TOOL CALL {call.get('id', '?')}] {name}({cut_end(redact(args_text))})"


def serialize_message(
    message: Mapping[str, Any], tool_names: Mapping[str, str] | None = None
) -> str:
    """One message as a labelled block (see the module docstring)."""
    role = str(message.get("role") or "unknown")
    text = _content(message)
    if role == "tool":
        call_id = str(message.get("tool_call_id") or "?")
        name = (tool_names or {}).get(call_id) or message.get("name")
        label = f"[TOOL RESULT {call_id} · {name}]" if name else f"[TOOL RESULT {call_id}]"
    elif unwrap_summary(text) is not None:
        # An earlier handoff summary inside the middle: give the summarizer its body only.
        label, text = "[EARLIER SUMMARY]", unwrap_summary(text) or ""
    else:
        label = f"[{role.upper()}]"
    lines = [label]
    if text.strip():
        lines.append(cut_middle(redact(text)))
    refusal = refusal_text(message) or ""
    if refusal.strip() and refusal.strip() != text.strip():  # what it said instead (once)
        lines.append(f"[REFUSAL] {cut_middle(redact(refusal))}")
    if audio := audio_reference(message.get("audio")):  # a spoken reply, kept by its id
        lines.append(f"[AUDIO REPLY {audio}]")
    for call in message.get("tool_calls") or ():
        if isinstance(call, Mapping):
            lines.append(_call_line(call))
    return "\n".join(lines)


def serialize_turns(messages: Sequence[Mapping[str, Any]]) -> str:
    """The messages as labelled, cut and redacted text for a summarizer."""
    names: dict[str, str] = {}  # call id -> tool name, as of the latest call with that id
    blocks: list[str] = []
    for message in messages:
        for call in message.get("tool_calls") or ():
            fn = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
                names[str(call.get("id"))] = fn["name"]
        blocks.append(serialize_message(message, names))
    return "\n\n".join(blocks)


__all__ = [
    "ARGS_HEAD_CHARS",
    "ARGS_MAX_CHARS",
    "CONTENT_HEAD_CHARS",
    "CONTENT_MAX_CHARS",
    "CONTENT_TAIL_CHARS",
    "cut_end",
    "cut_middle",
    "serialize_message",
    "serialize_turns",
    "strip_reasoning",
]
