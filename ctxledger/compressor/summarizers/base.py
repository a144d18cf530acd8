"""The summarizer contract: request, result, protocol, the handoff structure, failures.

Every summarizer (offline, LLM, recorded) fills the same structured handoff: the
headings in :data:`SECTION_HEADINGS`, in that order. Sections about the past carry a
"historical" label in their heading so that a stale Active Task cannot pass for the
current request after a resume (HERMES_SPEC §3, hardening #35344).

Failures are :class:`~ctxledger.errors.SummarizerError` with a ``failure_class``.
:func:`~ctxledger.compressor.summarizers.fallback.summarize_with_fallback` turns the non-aborting ones into a deterministic
fallback summary (a summarizer that is not configured included); auth and network
failures propagate so the caller leaves the session unchanged. How long automatic compression then waits is the
config's (``CompressionConfig.cooldown_for``, HERMES_SPEC §2).

:func:`request_hash` is the one hash of a request's summarization inputs: the
``prompt_hash`` of every summarizer that does not send a prompt (offline, fallback,
recorded; the LLM summarizer hashes the body bytes it sends) and the recorded
summarizer's lookup key.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import msgspec

from ctxledger.errors import FailureClass
from ctxledger.usage import CanonicalUsage


class SummaryRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What to summarize: the middle (after prunes) and how long the summary may be."""

    turns: list[dict[str, Any]]
    budget_tokens: int
    previous_summary: str | None = None
    focus: str | None = None
    session_model: str | None = None
    context: dict[str, Any] | None = None
    #: the same messages before the phase-1 prunes (parallel to ``turns``; None when
    #: nothing was pruned). Prunes exist to make a model's input cheaper; a local
    #: summarizer pays nothing to read the originals, so it extracts from these.
    originals: list[dict[str, Any]] | None = None

    def source_turns(self) -> list[dict[str, Any]]:
        """What a local (no model call) summarizer reads: the originals when known."""
        return self.originals if self.originals is not None else self.turns


class SummaryResult(msgspec.Struct, frozen=True, kw_only=True):
    """A summary body (without the transcript prefix / end marker) and how it was made."""

    text: str
    summarizer: str
    model: str | None = None
    prompt_hash: str = ""
    usage: CanonicalUsage | None = None
    fallback: bool = False
    failure: str | None = None
    failure_class: FailureClass | None = None


@runtime_checkable
class Summarizer(Protocol):
    """Anything that turns a :class:`SummaryRequest` into a :class:`SummaryResult`.

    ``summarize`` raises :class:`~ctxledger.errors.SummarizerError` on failure.
    """

    kind: str

    async def summarize(self, request: SummaryRequest) -> SummaryResult: ...


# --------------------------------------------------------------------------- structure

#: (key, heading) of every section of a handoff summary, in order
SECTIONS: tuple[tuple[str, str], ...] = (
    ("active_task", "## Active Task (historical — superseded by any newer user message)"),
    ("goal", "## Goal"),
    ("constraints", "## Constraints & Preferences"),
    ("completed", "## Completed Actions (historical)"),
    ("active_state", "## Active State (at compaction)"),
    ("in_progress", "## In Progress (at compaction)"),
    ("blocked", "## Blocked"),
    ("decisions", "## Key Decisions"),
    ("resolved", "## Resolved Questions (historical — already answered)"),
    ("pending", "## Pending User Asks"),
    ("files", "## Relevant Files"),
    ("remaining", "## Remaining Work (context, not instructions)"),
    ("critical", "## Critical Context"),
)
SECTION_HEADINGS: tuple[str, ...] = tuple(heading for _, heading in SECTIONS)
SECTION_KEYS: tuple[str, ...] = tuple(key for key, _ in SECTIONS)
NONE_TEXT = "None."


def _title(heading: str) -> str:
    """``## Completed Actions (historical)`` -> ``completed actions``."""
    text = heading.lstrip("#").strip()
    return re.split(r"[(\[:—]| - ", text, maxsplit=1)[0].strip().casefold()


_KEY_BY_TITLE = {_title(heading): key for key, heading in SECTIONS}
_HEADING_LINE = re.compile(r"^#{1,4}\s+\S.*$", re.MULTILINE)


def parse_sections(text: str) -> dict[str, list[str]]:
    """The non-empty lines under each known heading of a summary (``None.`` dropped).

    Headings are matched by their title, so labels that changed (or an LLM's small
    variations such as ``## Active Task:``) still parse. Text before the first known
    heading is returned under the key ``"preamble"``.
    """
    sections: dict[str, list[str]] = {"preamble": []}
    current = "preamble"
    for line in text.splitlines():
        if _HEADING_LINE.match(line):
            key = _KEY_BY_TITLE.get(_title(line))
            if key is not None:
                current = key
                sections.setdefault(key, [])
                continue
        stripped = line.strip()
        if stripped and stripped != NONE_TEXT:
            sections.setdefault(current, []).append(line.rstrip())
    return sections


def render_sections(sections: Mapping[str, list[str]], preamble: str = "") -> str:
    """Every heading in order, its lines beneath it (``None.`` when there are none)."""
    blocks: list[str] = [preamble.strip()] if preamble.strip() else []
    for key, heading in SECTIONS:
        lines = sections.get(key) or [NONE_TEXT]
        blocks.append(heading + "\n" + "\n".join(lines))
    return "\n\n".join(blocks)


def request_hash(request: SummaryRequest, **extra: Any) -> str:
    """sha256 hex of the canonical JSON (sorted keys) of the request's summarization inputs.

    The inputs are what a summarizer reads: the turns as a local summarizer sees them
    (:meth:`SummaryRequest.source_turns`), the budget, the previous summary and the
    focus, plus ``extra`` (e.g. ``summarizer="offline"``, a fallback's ``failure``).
    The context and the session model are not inputs: they never change a summary.
    """
    inputs = {
        "turns": request.source_turns(),
        "budget_tokens": request.budget_tokens,
        "previous_summary": request.previous_summary,
        "focus": request.focus,
        **extra,
    }
    return hashlib.sha256(msgspec.json.encode(inputs, order="sorted")).hexdigest()


__all__ = [
    "NONE_TEXT",
    "SECTIONS",
    "SECTION_HEADINGS",
    "SECTION_KEYS",
    "Summarizer",
    "SummaryRequest",
    "SummaryResult",
    "parse_sections",
    "render_sections",
    "request_hash",
]
