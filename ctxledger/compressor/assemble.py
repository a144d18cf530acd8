"""Phase 4 of a compaction: build the continuation transcript from a plan and a summary.

`apply` is pure: it reads the original API message list and the plan, and returns a
new list plus one `OutputEntry` per output message saying where it came from, so the
engine can reference carried messages by id and record new ones in full. Head,
pinned, carried and tail messages are deep copies of the originals; the only edits
are the ones the plan names (the system note, the merge of the summary into the
first message after it, removing an older merged summary, orphan repairs).

`merge_summary` / `split_merged` define how a summary is merged into a message and
how it is recognised and taken out again, so summaries are replaced, never stacked.
`feedback` renders the manual ``/compress`` report (HERMES_SPEC §7).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from ctxledger.compressor import markers
from ctxledger.compressor.markers import merge_summary, split_merged
from ctxledger.compressor.planargs import check_apply_args, check_messages
from ctxledger.compressor.redact import redact
from ctxledger.errors import CompressionError
from ctxledger.messages import INSTRUCTION_ROLES, Message, content_text

if TYPE_CHECKING:
    from ctxledger.compressor.planner import CompactionPlan

__all__ = [
    "STUB_RESULT_TEXT",
    "AssembledTranscript",
    "Failure",
    "Origin",
    "OutputEntry",
    "apply",
    "feedback",
    "reason_line",
]

Origin = Literal["system", "carried", "summary", "merged", "stub", "stripped"]

#: content of a stub answering a call whose result was lost (orphan policy "stub")
STUB_RESULT_TEXT = "[no result was recorded for this tool call; it was lost before compaction]"


class OutputEntry(msgspec.Struct, frozen=True, kw_only=True):
    """Where one output message came from; `source_index` indexes the original list.

    ``system`` / ``carried``: the original message (the system prompt may carry the
    compaction note). ``summary``: new. ``merged``: the original with the summary
    merged in. ``stripped``: the original minus orphaned calls or minus an older merged
    summary. ``stub``: a new tool result for the call in message `source_index`.
    """

    origin: Origin
    source_index: int | None = None


class AssembledTranscript(msgspec.Struct, frozen=True, kw_only=True):
    messages: list[dict[str, Any]]
    entries: list[OutputEntry]


# --- apply -----------------------------------------------------------------------------


def _with_system_note(message: Mapping[str, Any]) -> Message:
    content = message.get("content")
    if isinstance(content, list):
        if markers.has_system_note(content_text(message)):
            return dict(message)
        return {**message, "content": [*content, {"type": "text", "text": markers.system_note()}]}
    return {
        **message,
        "content": markers.add_system_note(content if isinstance(content, str) else ""),
    }


def _strip_calls(message: Mapping[str, Any], call_ids: set[str]) -> Message:
    calls = [
        c
        for c in message.get("tool_calls") or ()
        if not (isinstance(c, Mapping) and c.get("id") in call_ids)
    ]
    stripped = {**message, "tool_calls": calls}
    if not calls:
        del stripped["tool_calls"]
        if stripped.get("content") is None:
            stripped["content"] = ""
    return stripped


class _Builder:
    """Collects output messages and their entries; applies per-message plan edits."""

    def __init__(
        self,
        plan: CompactionPlan,
        messages: Sequence[Mapping[str, Any]],
        body: str,
        copy_carried: bool = True,
    ) -> None:
        self.plan = plan
        self.copy_carried = copy_carried
        self.source = messages
        self.body = body
        self.messages: list[Message] = []
        self.entries: list[OutputEntry] = []
        self.dropped = {o.index for o in plan.orphans if o.action == "drop_result"}
        self.stripped: dict[int, set[str]] = {}
        for o in plan.orphans:
            if o.action == "strip_call":
                self.stripped.setdefault(o.index, set()).add(o.tool_call_id)
        self.unmerged = set(plan.unmerged)
        self.stubs_after = _stub_positions(plan, messages)

    def add(self, message: Message, origin: Origin, source: int | None) -> None:
        self.messages.append(message)
        self.entries.append(OutputEntry(origin=origin, source_index=source))

    def carry(self, i: int) -> None:
        if i not in self.dropped:
            original = self.source[i]
            if type(original) is not dict and not isinstance(original, Mapping):
                check_messages(self.source)  # (kept as it is, it would be given back)
            plan = self.plan
            changed = i == 0 or i in self.unmerged or i in self.stripped or i == plan.merge_index
            # a message carried as it is may stay the caller's object (see apply)
            msg: Message = (
                copy.deepcopy(dict(original)) if changed or self.copy_carried else original  # type: ignore[assignment]
            )
            origin: Origin = "carried"
            if i == 0 and msg.get("role") == "system":
                origin = "system"
                if self.plan.system_note:
                    msg = _with_system_note(msg)
            if i in self.unmerged:
                split = split_merged(msg)
                if split is not None and split[1] is not None:
                    msg, origin = split[1], "stripped"
            if i in self.stripped:
                msg, origin = _strip_calls(msg, self.stripped[i]), "stripped"
            if i == self.plan.merge_index:
                msg, origin = merge_summary(msg, self.body), "merged"
            self.add(msg, origin, i)
        for owner, call_id in self.stubs_after.get(i, ()):
            stub = {"role": "tool", "tool_call_id": call_id, "content": STUB_RESULT_TEXT}
            self.add(stub, "stub", owner)


def _stub_positions(
    plan: CompactionPlan, messages: Sequence[Mapping[str, Any]]
) -> dict[int, list[tuple[int, str]]]:
    """Stub results go right after the last carried result of their call's message.

    Only a result the output keeps counts: a second result for a call, or one the
    summarized middle holds, is never copied, and a stub placed after it would be lost."""
    positions: dict[int, list[tuple[int, str]]] = {}
    stubs = [o for o in plan.orphans if o.action == "stub_result"]
    if not stubs:
        return positions
    dropped = {o.index for o in plan.orphans if o.action == "drop_result"}
    kept_middle = {*plan.pinned, *plan.carried}
    for o in stubs:
        owner = messages[o.index]
        ids = {c.get("id") for c in owner.get("tool_calls") or () if isinstance(c, Mapping)}
        after = o.index
        for j in range(o.index + 1, len(messages)):
            msg = messages[j]
            if msg.get("role") != "tool":
                break
            carried = j < plan.head_end or j >= plan.tail_start or j in kept_middle
            if carried and j not in dropped and msg.get("tool_call_id") in ids:
                after = j
        positions.setdefault(after, []).append((o.index, o.tool_call_id))
    return positions


def apply(
    plan: CompactionPlan,
    messages: Sequence[Mapping[str, Any]],
    summary_text: str,
    *,
    copy_carried: bool = True,
) -> AssembledTranscript:
    """The continuation: head, pinned, summary (or merged), carried anchors, tail.

    Every message is a new object unless `copy_carried` is false: then a message
    carried unchanged is the very object of `messages` (for a caller that only reads
    the result, like ``recording.build_layout``, which records such messages by id).

    Raises CompressionError for a skip plan, a plan made for another message list, or
    an empty summary (an empty summarizer answer is a failure, Hermes #11978);
    InvalidInput for an argument of the wrong type (``planargs``), a summary included;
    InvalidMessage naming an item that is no message object.
    """
    copy_carried = check_apply_args(plan, messages, summary_text, copy_carried)
    if plan.action != "compress":
        raise CompressionError(f"cannot apply a skipped plan (reason: {plan.skip_reason})")
    if len(messages) != plan.n_messages:
        raise CompressionError(
            f"the plan was made for {plan.n_messages} messages, got {len(messages)}: re-plan first"
        )
    body = summary_text.strip()
    if not body:
        raise CompressionError(
            "the summary text is empty; a compaction needs a summary (or a fallback)"
        )
    try:
        return _assembled(plan, messages, body, copy_carried)
    except (AttributeError, TypeError, ValueError):  # (``dict("ab")``): an item that
        check_messages(messages)  # is no message object is named
        raise


def _assembled(
    plan: CompactionPlan, messages: Sequence[Mapping[str, Any]], body: str, copy_carried: bool
) -> AssembledTranscript:
    builder = _Builder(plan, messages, body, copy_carried)
    for i in range(plan.head_end):
        builder.carry(i)
    for i in plan.pinned:
        builder.carry(i)
    if not plan.merged_into_tail:
        builder.add(
            {"role": plan.summary_role, "content": markers.wrap_summary(body)}, "summary", None
        )
    for i in plan.carried:
        builder.carry(i)
    for i in range(plan.tail_start, len(messages)):
        builder.carry(i)
    return AssembledTranscript(messages=builder.messages, entries=builder.entries)


# --- manual feedback ---------------------------------------------------------------------


#: what went wrong with a manual compaction's summary, for :func:`feedback`
Failure = Literal["fallback", "aborted"]


def _conversation(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The messages a user counts: the list without its leading system prompt."""
    skip = 1 if messages and messages[0].get("role") in INSTRUCTION_ROLES else 0
    return list(messages[skip:])


def feedback(
    before_messages: Sequence[Mapping[str, Any]],
    after_messages: Sequence[Mapping[str, Any]],
    before_tokens_rough: int,
    after_tokens_rough: int,
    *,
    failure: Failure | None = None,
    reason: str | None = None,
    removed: int = 0,
) -> str:
    """The report shown after a manual ``/compress`` (HERMES_SPEC §7), as hermes-agent
    0.19's ``/compress`` reports it (``tests/test_parity_manual_feedback.py``): counts of
    the conversation's messages (a system prompt is not one), the rough size of the whole
    request (system prompt + messages + tools schema) before and after, "unchanged" only
    when nothing changed; a summary that failed says so in the headline, with what was
    removed (`removed` messages replaced by the fallback summary, none when `aborted`) and
    the failure's `reason`, redacted. The wording is ctxledger's own."""
    before, after = _conversation(before_messages), _conversation(after_messages)
    noop = before == after
    if failure == "aborted":
        headline = f"Compression aborted: {len(before)} messages preserved"
    elif failure == "fallback":
        headline = f"Compressed with fallback: {len(before)} → {len(after)} messages"
    elif noop:
        headline = f"No changes from compression: {len(before)} messages"
    else:
        headline = f"Compressed: {len(before)} → {len(after)} messages"
    size = "Request size (rough estimate, chars/4: system prompt + messages + tools)"
    if noop and before_tokens_rough == after_tokens_rough:
        tokens = f"{size}: ~{before_tokens_rough:,} tokens, unchanged"
    else:
        tokens = f"{size}: ~{before_tokens_rough:,} → ~{after_tokens_rough:,} tokens"
    lines = [headline, tokens]
    if failure == "aborted":
        lines.append("The summarizer failed; no messages were removed.")
    elif failure == "fallback":
        lines.append(
            f"The summarizer failed; a fallback summary built from the turns replaced {removed} message(s)."
        )
    elif not noop and len(after) < len(before) and after_tokens_rough > before_tokens_rough:
        lines.append(
            "Note: the estimate went up although there are fewer messages: the handoff summary "
            "is denser text than the short tool results it replaced."
        )
    said = reason_line(reason or "")
    if failure and said:  # one line, whatever the error held (an HTTP body)
        lines[-1] += f" Reason: {said}"
    return "\n".join(lines)


def reason_line(text: str, *, redacted: bool = False) -> str:
    """A failure's reason as every output shows it: redacted (an HTTP error can quote the
    key it refused; `redacted`: the text already was, as stored failures are) and on one
    line (an error's body can span several). Empty for a blank reason."""
    return " ".join((text if redacted else redact(text)).split())
