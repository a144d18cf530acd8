"""The tool output budget: what happens to a tool result before it enters the context.

Owns HERMES_SPEC §6. One huge result (a log dump, a search over a monorepo) can fill
the window in a single turn, so large outputs are stored out of the context (the
caller writes the blob and records ``ToolOutputPersisted``) and the live window gets
a short block instead: the size, where the output is kept, how to read slices of it
with the ``read_persisted`` tool, and a preview.

Two limits, both in characters because they apply before any tokenization:

* per result: anything above ``per_result_chars`` is persisted;
* per turn: when the results of one assistant turn together exceed
  ``per_turn_chars``, the largest remaining ones are persisted until the turn fits.

Reading tools are exempt: persisting a ``read_file`` (or ``read_persisted``) result
would make the model read the blob back, which would be persisted again, forever.

Pure module: no I/O, no clock; the caller owns the blob store.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any, Final, Literal

import msgspec

from ctxledger.errors import InvalidConfig, InvalidInput
from ctxledger.integers import shown

PersistReason = Literal["per_result", "per_turn"]

DEFAULT_PER_RESULT_CHARS: Final = 100_000
DEFAULT_PER_TURN_CHARS: Final = 200_000
DEFAULT_PREVIEW_CHARS: Final = 1_500
MIN_PER_RESULT_CHARS: Final = 8_000
MIN_PER_TURN_CHARS: Final = 16_000
#: the most one ``read_persisted`` call returns; its results are exempt from the budget,
#: so this is what keeps them small (about 5K tokens)
DEFAULT_MAX_SLICE_CHARS: Final = 20_000
#: the preview block's framing (header, read instructions, footer) stays under this
PREVIEW_OVERHEAD_CHARS: Final = 700
READ_PERSISTED_TOOL_NAME: Final = "read_persisted"

#: tools whose results are never persisted (compared case-insensitively)
DEFAULT_EXEMPT_TOOLS: Final = frozenset(
    {"read_file", "readfile", "file_read", "read", "view_file", READ_PERSISTED_TOOL_NAME}
)

#: how a preview block opens, and its line telling the model how to read the output
_BLOCK_HEAD = "[tool output stored outside the context: call "
_READ_LINE = f"To read part of it, call {READ_PERSISTED_TOOL_NAME} with "

_BLOB_STEM_CHARS = 64
_BLOB_HASH_CHARS = 16
_UNSAFE_BLOB_CHARS = re.compile(r"[^A-Za-z0-9_-]")


class ToolBudget(msgspec.Struct, frozen=True, kw_only=True):
    """Character budgets for tool results; :meth:`for_window` scales them to a model."""

    per_result_chars: int = DEFAULT_PER_RESULT_CHARS
    per_turn_chars: int = DEFAULT_PER_TURN_CHARS
    preview_chars: int = DEFAULT_PREVIEW_CHARS
    exempt_tools: frozenset[str] = DEFAULT_EXEMPT_TOOLS

    def __post_init__(self) -> None:
        for name in ("per_result_chars", "per_turn_chars", "preview_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InvalidConfig(
                    f"ToolBudget.{name} must be a positive integer, got {shown(value)}"
                )

    @classmethod
    def for_window(cls, context_length: int, **overrides: Any) -> ToolBudget:
        """Budgets for a ``context_length``-token window (4 chars per token).

        Per result: 15 % of the window, between 8,000 and 100,000 chars. Per turn:
        30 %, between 16,000 and 200,000. A 32,768-token window gives 19,660 / 39,321.
        """
        if (
            isinstance(context_length, bool)
            or not isinstance(context_length, int)
            or context_length <= 0
        ):
            raise InvalidConfig(
                f"context_length must be a positive integer, got {shown(context_length)}"
            )
        # integer arithmetic (15 % x 4 = 60/100) so the figures never drift by float rounding
        per_result = min(
            DEFAULT_PER_RESULT_CHARS, max(MIN_PER_RESULT_CHARS, context_length * 60 // 100)
        )
        per_turn = min(DEFAULT_PER_TURN_CHARS, max(MIN_PER_TURN_CHARS, context_length * 120 // 100))
        fields: dict[str, Any] = {"per_result_chars": per_result, "per_turn_chars": per_turn}
        fields.update(overrides)
        return cls(**fields)

    def is_exempt(self, tool_name: str) -> bool:
        lowered = tool_name.strip().lower()
        return any(lowered == exempt.lower() for exempt in self.exempt_tools)

    def replacement_chars(self, chars: int) -> int:
        """Roughly how long the preview block for a ``chars``-long output is."""
        return min(chars, self.preview_chars + PREVIEW_OVERHEAD_CHARS)


class ToolResult(msgspec.Struct, frozen=True, kw_only=True):
    """One tool result as the budget sees it.

    ``index`` is the message's position in the caller's list; results sharing an
    ``assistant_index`` (the assistant message that issued the calls) form one turn,
    and results without one are treated as a single turn together.
    ``already_persisted`` results hold their preview block in ``content``.
    """

    index: int
    tool_call_id: str
    tool_name: str
    content: str
    already_persisted: bool = False
    assistant_index: int | None = None


class PersistDecision(msgspec.Struct, frozen=True, kw_only=True):
    """Store this result's full output out of the context, for ``reason``."""

    index: int
    tool_call_id: str
    tool_name: str
    chars: int
    reason: PersistReason


def _plan_turn(turn: Sequence[ToolResult], budget: ToolBudget) -> list[PersistDecision]:
    decided: dict[int, PersistDecision] = {}
    candidates: list[ToolResult] = []
    total = 0
    for result in turn:
        size = len(result.content)
        eligible = not result.already_persisted and not budget.is_exempt(result.tool_name)
        if eligible and size > budget.per_result_chars:
            decided[result.index] = _decision(result, "per_result")
            total += budget.replacement_chars(size)
            continue
        total += size
        # persisting something no longer than its own preview block would not save anything
        if eligible and size > budget.preview_chars + PREVIEW_OVERHEAD_CHARS:
            candidates.append(result)
    if total > budget.per_turn_chars:
        # largest first; ties broken by position so the plan is deterministic
        for result in sorted(candidates, key=lambda r: (-len(r.content), r.index)):
            if total <= budget.per_turn_chars:
                break
            size = len(result.content)
            decided[result.index] = _decision(result, "per_turn")
            total -= size - budget.replacement_chars(size)
    return list(decided.values())


def _decision(result: ToolResult, reason: PersistReason) -> PersistDecision:
    return PersistDecision(
        index=result.index,
        tool_call_id=result.tool_call_id,
        tool_name=result.tool_name,
        chars=len(result.content),
        reason=reason,
    )


def plan_persistence(
    results: Sequence[ToolResult], budget: ToolBudget | None = None
) -> list[PersistDecision]:
    """Which results to store out of the context, ordered by message index.

    Per result first (above ``per_result_chars``), then per turn: while a turn's
    results (persisted ones counted at their preview size) exceed ``per_turn_chars``,
    the largest remaining eligible result is persisted. Exempt tools and results
    already persisted are never chosen; a turn of exempt results may stay over budget.
    """
    budget = budget or ToolBudget()
    turns: dict[int | None, list[ToolResult]] = {}
    for result in results:
        turns.setdefault(result.assistant_index, []).append(result)
    decisions: list[PersistDecision] = []
    for turn in turns.values():
        decisions.extend(_plan_turn(turn, budget))
    return sorted(decisions, key=lambda d: d.index)


def preview_text(content: str, preview_chars: int = DEFAULT_PREVIEW_CHARS) -> str:
    """The first ``preview_chars`` characters, cut back to a line end when one lies past half."""
    if preview_chars <= 0:
        raise InvalidInput(f"preview_chars must be positive, got {preview_chars}")
    if len(content) <= preview_chars:
        return content
    head = content[:preview_chars]
    newline = head.rfind("\n")
    # a cut mid-line is harder to read, but cutting at an early newline would waste
    # most of the preview, so only lines ending in the second half count
    return head[: newline + 1] if newline > preview_chars // 2 else head


def _json_text(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def preview_block(
    content: str,
    *,
    ref: str,
    tool_call_id: str,
    chars: int | None = None,
    preview_chars: int = DEFAULT_PREVIEW_CHARS,
) -> str:
    """The text the live window shows in place of a persisted output.

    ``content`` is the full output (``chars`` defaults to its length); ``ref`` is the
    blob reference the ``read_persisted`` tool accepts.
    """
    total = len(content) if chars is None else chars
    preview = preview_text(content, preview_chars)
    example = _json_text({"ref": ref, "offset": 0, "limit": DEFAULT_MAX_SLICE_CHARS})
    lines = [
        f"{_BLOCK_HEAD}{_json_text(tool_call_id)}]",
        f"The output was too large to include ({total:,} characters). "
        f"It is kept in full under ref {_json_text(ref)}.",
        f"{_READ_LINE}{example}: offset and limit "
        f"count characters (limit at most {DEFAULT_MAX_SLICE_CHARS:,}), and each reply says "
        "where the next slice starts.",
        f"Preview (first {len(preview):,} of {total:,} characters):",
        preview if preview.endswith("\n") else preview + "\n",
    ]
    shown = "\n".join(lines)
    remaining = total - len(preview)
    tail = f"[... {remaining:,} more characters not shown]" if remaining > 0 else "[end of output]"
    return shown + tail


def tool_name(tool: Any) -> Any:
    """A declared tool's name, in either shape: OpenAI's nested ``{"function": {"name"}}``
    or the flat ``{"name"}`` of Responses and Anthropic (None for anything else)."""
    if not isinstance(tool, dict):
        return None
    fn = tool.get("function")
    return (fn if isinstance(fn, dict) else tool).get("name")


def for_client_tools(messages: list[Any], tools: Sequence[Any], session_id: str) -> list[Any]:
    """`messages` for a client's own agent (a proxied request) with `tools`: unless it
    declares ``read_persisted`` (OpenAI nested, Responses / Anthropic flat), each
    preview block's line telling the model to call that tool says instead that no tool
    here reads the output, and where it is kept (`session_id`: the chain's root, named
    the same after a compaction). Messages left as they are (all, when the tool is
    declared) are the caller's own objects."""
    if any(tool_name(tool) == READ_PERSISTED_TOOL_NAME for tool in tools):
        return messages
    where = f"by ctxledger under that ref (state API: GET /v1/sessions/{session_id}/persisted/REF)"
    out = list(messages)
    for i, message in enumerate(out):
        content = message.get("content") if isinstance(message, dict) else None
        if not content or message.get("role") != "tool":
            continue
        if isinstance(content, str) and content.startswith(_BLOCK_HEAD):
            out[i] = {**message, "content": _honest_block(content, where)}
        elif isinstance(content, list) and isinstance(content[0], dict):
            text = content[0].get("text")
            if isinstance(text, str) and text.startswith(_BLOCK_HEAD):  # a cache marker's parts
                first = {**content[0], "text": _honest_block(text, where)}
                out[i] = {**message, "content": [first, *content[1:]]}
    return out


def _honest_block(block: str, where: str) -> str:
    lines = block.split("\n", 3)
    if len(lines) < 4 or not lines[2].startswith(_READ_LINE):
        return block
    lines[2] = (
        "No tool in this conversation reads it: work from the preview below, or run the "
        f"tool again for a smaller output. The full output is kept {where}."
    )
    return "\n".join(lines)


def safe_blob_name(tool_call_id: str) -> str:
    """A file-system-safe, collision-resistant name derived from a model-supplied call id.

    The stem keeps only ``[A-Za-z0-9_-]`` (so no separators, dots, ``..`` or control
    characters), at most 64 of them, never starting with ``-``; a hash of the
    original id is always appended, so two ids that sanitize alike (``a/b`` and
    ``a_b``, or ids differing only in case on a case-insensitive disk) still differ.
    """
    if not isinstance(tool_call_id, str):
        raise InvalidInput(f"tool_call_id must be a string, got {type(tool_call_id).__name__}")
    stem = _UNSAFE_BLOB_CHARS.sub("_", tool_call_id)[:_BLOB_STEM_CHARS].lstrip("-") or "call"
    digest = hashlib.sha256(tool_call_id.encode("utf-8", errors="surrogatepass")).hexdigest()
    return f"{stem}-{digest[:_BLOB_HASH_CHARS]}"


class SliceResult(msgspec.Struct, frozen=True, kw_only=True):
    """One slice of a persisted output; ``next_offset`` is None at the end."""

    text: str
    offset: int
    next_offset: int | None
    total_chars: int


def _check_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{name} must be an integer, got {shown(value)}")
    return value


def read_slice(
    data: str, offset: int, limit: int, *, max_limit: int = DEFAULT_MAX_SLICE_CHARS
) -> SliceResult:
    """Characters ``offset`` to ``offset + limit`` of a persisted output.

    Raises :class:`InvalidInput` with the valid range when ``offset`` is negative or
    past the end, or ``limit`` is not in 1..``max_limit``.
    """
    offset = _check_int("offset", offset)
    limit = _check_int("limit", limit)
    total = len(data)
    if offset < 0:
        raise InvalidInput(f"offset must be 0 or more, got {offset}")
    if offset > total:
        raise InvalidInput(
            f"offset {offset:,} is past the end: the output has {total:,} characters"
        )
    if not 1 <= limit <= max_limit:
        raise InvalidInput(f"limit must be between 1 and {max_limit:,}, got {limit:,}")
    end = min(total, offset + limit)
    return SliceResult(
        text=data[offset:end],
        offset=offset,
        next_offset=end if end < total else None,
        total_chars=total,
    )


#: the ``read_persisted`` tool in OpenAI function-tool shape; treat as read-only
#: (use :func:`read_persisted_tool` for a copy to edit)
READ_PERSISTED_TOOL: Final[dict[str, Any]] = {
    "type": "function",
    "function": {
        "name": READ_PERSISTED_TOOL_NAME,
        "description": (
            "Read part of a tool output that was too large for the conversation and was "
            "stored separately. Use the ref given in the stored-output notice; read in "
            "slices, continuing from the next offset each reply gives."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "ref": {"type": "string", "description": "The ref from the stored-output notice."},
                "offset": {
                    "type": "integer",
                    "minimum": 0,
                    "default": 0,
                    "description": "First character to return (0-based).",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": DEFAULT_MAX_SLICE_CHARS,
                    "default": DEFAULT_MAX_SLICE_CHARS,
                    "description": "How many characters to return.",
                },
            },
            "required": ["ref"],
            "additionalProperties": False,
        },
    },
}


def read_persisted_tool() -> dict[str, Any]:
    """A fresh copy of :data:`READ_PERSISTED_TOOL`, safe to modify."""
    copied: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(READ_PERSISTED_TOOL))
    return copied


__all__ = [
    "DEFAULT_EXEMPT_TOOLS",
    "DEFAULT_MAX_SLICE_CHARS",
    "READ_PERSISTED_TOOL",
    "READ_PERSISTED_TOOL_NAME",
    "PersistDecision",
    "PersistReason",
    "SliceResult",
    "ToolBudget",
    "ToolResult",
    "for_client_tools",
    "plan_persistence",
    "preview_block",
    "preview_text",
    "read_persisted_tool",
    "read_slice",
    "safe_blob_name",
    "tool_name",
]
