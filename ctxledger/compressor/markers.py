"""The fixed texts that frame a summary inside a transcript, and how to recognise them.

The wording lives in ``prompts/summary_prefix.md``, ``prompts/summary_end.md`` and
``prompts/system_note.md`` (our own words, written to HERMES_SPEC §3 phase 4). Older
prefixes are recognised and replaced, never stacked.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from importlib import resources
from typing import Any

from ctxledger.messages import Message, content_text


@functools.cache
def prompt_text(name: str) -> str:
    """A prompt file from ``ctxledger/compressor/prompts`` (trailing newline stripped)."""
    return (
        resources.files("ctxledger.compressor")
        .joinpath("prompts", name)
        .read_text("utf-8")
        .rstrip("\n")
    )


def summary_prefix() -> str:
    return prompt_text("summary_prefix.md")


def summary_end_marker() -> str:
    return prompt_text("summary_end.md")


def system_note() -> str:
    return prompt_text("system_note.md")


#: prefixes written by older versions (ours and Hermes-style ones seen in imported logs)
LEGACY_PREFIXES: tuple[str, ...] = (
    "[CONTEXT COMPACTION]",
    "[CONTEXT SUMMARY]:",
    "[ctxledger handoff summary]",
)


def wrap_summary(text: str) -> str:
    """The summary message content: reference-only prefix, the body, the end marker."""
    body = unwrap_summary(text)
    if body is None:
        body = text.strip()
    return f"{summary_prefix()}\n\n{body}\n\n{summary_end_marker()}"


def unwrap_summary(content: str) -> str | None:
    """The body of a summary message's content, or None if it is not a summary."""
    text = content.strip()
    current = summary_prefix()
    end = summary_end_marker()
    for prefix in (current, *LEGACY_PREFIXES):
        if text.startswith(prefix):
            body = text[len(prefix) :]
            if end and end in body:
                body = body[: body.rindex(end)]
            # a merged summary is followed by the delimiter and the original tail message
            delim = merge_delimiter()
            if delim in body:
                body = body[: body.index(delim)]
            return body.strip()
    return None


def merge_delimiter() -> str:
    return "\n\n--- end of handoff summary; the message below follows it ---\n\n"


def is_summary_message(message: Mapping[str, Any]) -> bool:
    return unwrap_summary(content_text(message)) is not None


def has_system_note(system_prompt: str) -> bool:
    return system_note() in system_prompt


def add_system_note(system_prompt: str) -> str:
    if has_system_note(system_prompt):
        return system_prompt
    return (
        f"{system_prompt.rstrip()}\n\n{system_note()}" if system_prompt.strip() else system_note()
    )


# --- merged summaries ------------------------------------------------------------------


def merge_summary(message: Mapping[str, Any], summary_text: str) -> Message:
    """`message` with the wrapped summary and the merge delimiter in front of its content."""
    lead = wrap_summary(summary_text) + merge_delimiter()
    content = message.get("content")
    merged = copy.deepcopy(dict(message))
    if isinstance(content, list):
        merged["content"] = [{"type": "text", "text": lead}, *merged["content"]]
    elif isinstance(content, str):
        merged["content"] = lead + content
    else:
        merged["content"] = lead
    return merged


def split_merged(message: Mapping[str, Any]) -> tuple[str, Message | None] | None:
    """For a message carrying a summary: (summary body, original message or None).

    None when the message carries no summary. The original is None for a standalone
    summary message; for a merged one it is the message as it was before the merge
    (content that was null before merging comes back as null).
    """
    if message.get("role") not in ("user", "assistant"):
        return None
    body = unwrap_summary(content_text(message))
    if body is None:
        return None
    merged, original_content = _original_content(message)
    if not merged:
        return body, None
    return body, {**message, "content": original_content}


def _original_content(message: Mapping[str, Any]) -> tuple[bool, Any]:
    """(True, content before the merge) for a merged message; (False, None) otherwise."""
    delimiter = merge_delimiter()
    content = message.get("content")
    if isinstance(content, list) and content:
        first = content[0]
        if isinstance(first, Mapping) and str(first.get("text", "")).endswith(delimiter):
            return True, list(content[1:])
    elif isinstance(content, str):
        end = content.find(summary_end_marker())
        cut = content.find(delimiter, max(end, 0))
        if cut >= 0:
            rest = content[cut + len(delimiter) :]
            return True, None if rest == "" and message.get("tool_calls") else rest
    if message.get("tool_calls"):
        return True, None  # merged into a call message that had no content of its own
    return False, None
