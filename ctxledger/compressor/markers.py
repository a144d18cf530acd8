"""The fixed texts that frame a summary inside a transcript, and how to recognise them.

The wording lives in ``prompts/summary_prefix.md``, ``prompts/summary_end.md`` and
``prompts/system_note.md`` (our own words, written to HERMES_SPEC §3 phase 4). Older
prefixes are recognised and replaced, never stacked.

A summary merged into a message (both roles would collide) comes *after* the
message's own text: the original text, a lead line, the wrapped summary, and the end
marker last, so the model reads the turn itself before the reference block closes
(Hermes #56372). Older ledgers hold the previous order (summary, delimiter,
original); :func:`split_merged` and :func:`unwrap_summary` read both.
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

# Hermes Agent's own summaries (0.19 and the releases before it since #35344), read so a
# list Hermes already compacted is updated, never stacked (HERMES_SPEC §3 phase 4). Only
# their tags are matched, not their wording, which changes between releases.
#: a tag opening a one-line preamble; the summary body starts on the next line
FOREIGN_TAGS: tuple[str, ...] = ("[CONTEXT COMPACTION — REFERENCE ONLY]",)
#: how the closing marker's line starts (the last line of such a summary)
FOREIGN_END = "--- END OF CONTEXT SUMMARY"
#: a summary merged into a message: this header line, the message's own text, the
#: delimiter, then the summary with its preamble
FOREIGN_MERGE_HEADER = "[PRIOR CONTEXT — for reference only; not a new message]"
FOREIGN_MERGE_DELIMITER = "[END OF PRIOR CONTEXT — COMPACTION SUMMARY BELOW]"


def wrap_summary(text: str) -> str:
    """The summary message content: reference-only prefix, the body, the end marker."""
    body = unwrap_summary(text)
    if body is None:
        body = text.strip()
    return f"{summary_prefix()}\n\n{body}\n\n{summary_end_marker()}"


def unwrap_summary(content: str) -> str | None:
    """The body of a summary message's content, or None if it is not a summary.

    Reads a standalone summary, a summary merged after a message's text (today's
    order) and one merged before it (the order older ledgers hold).
    """
    text = content.strip()
    foreign = _foreign_body(text)
    if foreign is not None:
        return foreign
    current = summary_prefix()
    end = summary_end_marker()
    for prefix in (current, *LEGACY_PREFIXES):
        if text.startswith(prefix):
            body = text[len(prefix) :]
            if end and end in body:
                body = body[: body.rindex(end)]
            # old order: a merged summary is followed by the delimiter and the original message
            delim = merge_delimiter()
            if delim in body:
                body = body[: body.index(delim)]
            return body.strip()
    lead = _MERGE_LEAD_LINE + "\n\n" + current
    at = text.rfind(lead) if len(text) <= TAIL else last_at(text, lead)  # short: no extra call
    if at < 0:
        return None
    body = text[at + len(_MERGE_LEAD_LINE) + 2 + len(current) :]
    if end and end in body:
        body = body[: body.rindex(end)]
    return body.strip()


#: how far from its end a long text is looked at first for a merged summary (last_at)
TAIL = 1 << 16


def last_at(text: str, needle: str) -> int:
    """``text.rfind(needle)``. In a text longer than :data:`TAIL` the last
    :data:`TAIL` characters are looked at first: an occurrence found there is the last
    one (a summary is merged at a message's end). Else a forward search tells whether
    there is one at all, ~3x faster than CPython's backward one on 10 MB (its reverse
    search has no two-way shift); only a text that holds the needle earlier is then
    searched backward whole."""
    tail = len(text) - TAIL
    if tail <= 0:
        return text.rfind(needle)
    at = text.rfind(needle, tail)
    if at >= 0 or needle not in text:
        return at
    return text.rfind(needle)


def _foreign_body(text: str) -> str | None:
    """The body of a summary Hermes wrote (standalone or merged), else None."""
    if text.startswith(FOREIGN_MERGE_HEADER):
        at = text.find(FOREIGN_MERGE_DELIMITER)
        if at < 0:
            return None
        text = text[at + len(FOREIGN_MERGE_DELIMITER) :].lstrip()
    if not text.startswith(FOREIGN_TAGS):
        return None
    newline = text.find("\n")
    body = "" if newline < 0 else text[newline + 1 :]
    end = body.rfind(FOREIGN_END)
    if end >= 0 and "\n" not in body[end:].strip():
        body = body[:end]
    return body.strip()


#: the line between a message's own text and the summary merged after it
_MERGE_LEAD_LINE = (
    "--- a handoff summary of earlier turns is merged into this message below; "
    "the text above it is the message itself ---"
)


def merge_lead() -> str:
    """What separates a message's own text from the summary merged after it."""
    return f"\n\n{_MERGE_LEAD_LINE}\n\n"


def merge_delimiter() -> str:
    """The delimiter of the older merge order (summary first, then the message); read only."""
    return "\n\n--- end of handoff summary; the message below follows it ---\n\n"


def is_summary_message(message: Mapping[str, Any]) -> bool:
    """Whether `message` carries a summary: only a user or assistant message can (where
    compaction writes one, as :func:`split_merged` reads); a tool output or a system
    message holding a summary's text (a stored output read back, say) is not one."""
    if message.get("role") not in ("user", "assistant"):
        return False
    return unwrap_summary(content_text(message)) is not None


def has_system_note(system_prompt: str) -> bool:
    return system_note() in system_prompt


def add_system_note(system_prompt: str) -> str:
    if has_system_note(system_prompt):
        return system_prompt
    return (
        f"{system_prompt.rstrip()}\n\n{system_note()}" if system_prompt.strip() else system_note()
    )


def strip_system_note(system_prompt: str) -> str:
    """`system_prompt` without the note :func:`add_system_note` put at its end."""
    note = system_note()
    if system_prompt == note:
        return ""
    return system_prompt.removesuffix(f"\n\n{note}")


# --- merged summaries ------------------------------------------------------------------


def merge_summary(message: Mapping[str, Any], summary_text: str) -> Message:
    """`message` with the wrapped summary merged in after its own content.

    The original text comes first, then :func:`merge_lead`, the summary with its
    prefix, and the end marker last. List content gets one more text part; a message
    without content (a call message) gets the wrapped summary as its content.
    """
    wrapped = wrap_summary(summary_text)
    content = message.get("content")
    merged = copy.deepcopy(dict(message))
    if isinstance(content, list):
        merged["content"] = [*merged["content"], {"type": "text", "text": merge_lead() + wrapped}]
    elif isinstance(content, str):
        merged["content"] = "".join((content, merge_lead(), wrapped))  # (one copy of content)
    else:
        merged["content"] = wrapped
    return merged


def split_merged(message: Mapping[str, Any]) -> tuple[str, Message | None] | None:
    """For a message carrying a summary: (summary body, original message or None).

    None when the message carries no summary. The original is None for a standalone
    summary message; for a merged one it is the message as it was before the merge
    (content that was null before merging comes back as null). Both merge orders are
    read: today's (text, summary, end marker) and the older (summary, delimiter, text).
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
    lead = merge_lead() + summary_prefix()
    delimiter = merge_delimiter()
    content = message.get("content")
    foreign = _foreign_original(content)
    if foreign is not None:
        original = foreign[0]
        return True, None if original == "" and message.get("tool_calls") else original
    if isinstance(content, list) and content:
        first, last = content[0], content[-1]
        if isinstance(last, Mapping) and str(last.get("text", "")).startswith(lead):
            return True, list(content[:-1])
        if isinstance(first, Mapping) and str(first.get("text", "")).endswith(delimiter):
            return True, list(content[1:])  # the older order
    elif isinstance(content, str):
        at = content.rfind(lead)
        if at >= 0:
            return True, content[:at]
        end = content.find(summary_end_marker())
        cut = content.find(delimiter, max(end, 0))
        if cut >= 0:  # the older order
            rest = content[cut + len(delimiter) :]
            return True, None if rest == "" and message.get("tool_calls") else rest
    if message.get("tool_calls") or _merged_refusal(message):
        return True, None  # merged into a call or refusal message that had no content
    return False, None


def _merged_refusal(message: Mapping[str, Any]) -> bool:
    """Whether `message` is what :func:`merge_summary` makes of a refusal with null
    content (an assistant message whose string content is the wrapped summary alone).
    Narrow on purpose (review of session 36): before refusals were valid, such content
    beside a ``refusal`` string could only be a client's copy of a standalone summary,
    read as one then; a user message or list content is never read as a refusal's."""
    content = message.get("content")
    return (
        message.get("role") == "assistant"
        and isinstance(message.get("refusal"), str)
        and isinstance(content, str)
        and content.startswith(summary_prefix())
    )


def _foreign_original(content: Any) -> tuple[Any] | None:
    """(content before the merge,) of a message Hermes merged a summary into, else None."""
    header = FOREIGN_MERGE_HEADER + "\n"
    if isinstance(content, str):
        at = content.find(FOREIGN_MERGE_DELIMITER)
        if not content.startswith(header) or at < 0:
            return None
        original = content[len(header) : at]
        return (original[:-2] if original.endswith("\n\n") else original,)
    if isinstance(content, list) and len(content) >= 2:
        first, last = content[0], content[-1]
        if (
            isinstance(first, Mapping)
            and first.get("text") == header
            and isinstance(last, Mapping)
            and str(last.get("text", "")).startswith("\n\n" + FOREIGN_MERGE_DELIMITER)
        ):
            return (list(content[1:-1]),)
    return None
