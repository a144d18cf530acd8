"""Turning imported sessions (``importers.model.ImportedSession``) into ordinary events.

All sessions of one import are validated first and appended in one transaction, so
a bad file imports nothing. A parent/child pair whose parent ended with reason
``compression`` becomes a compression chain (the child starts with reason
``compression``), so chain, replay and audit commands work on imported history.

When the child holds the source agent's own summary (the format marks it, or its
wording gives it away), the compaction is recorded as one: the parent ends with a
``SummaryGenerated(imported=True)`` (the summary text and the parent messages it
replaced) and a ``SessionSwitched(trigger="import")`` whose layout carries the
parent messages the source kept verbatim by id. ``audit`` then measures what the
*source agent* lost; ``replay --verify`` does not re-plan it (ctxledger did not plan it).
"""

from __future__ import annotations

import contextlib
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgspec

from ctxledger.compressor.markers import split_merged
from ctxledger.errors import InvalidInput
from ctxledger.events import (
    Event,
    LayoutEntry,
    MessageAppended,
    SessionEnded,
    SessionReason,
    SessionStarted,
    SessionSwitched,
    SummaryGenerated,
    UsageReported,
)
from ctxledger.eventstore.base import AppendRequest, StreamedRequest
from ctxledger.eventstore.streamed import chunks
from ctxledger.importers.model import ImportedSession, ImportedUsage
from ctxledger.integers import shown
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.spec import IMPORT_DIGEST, SessionSpec
from ctxledger.limits import MAX_MODEL_CHARS, MAX_REASON_CHARS, check_name
from ctxledger.messages import (
    JSON,
    check_system_role,
    checked_in_order,
    content_text,
    stored_copy,
    stored_role,
    validate_messages,
)
from ctxledger.projections.chains import Lineage
from ctxledger.tokens import DEFAULT_ENCODING, count_message, count_messages
from ctxledger.usage import CanonicalUsage, normalize_usage

#: used when neither the file, nor the command line, nor the config says
DEFAULT_CONTEXT_LENGTH = 128_000
DEFAULT_MODEL = "unknown"
#: how source agents open the message that holds their summary (our own prefixes aside)
SOURCE_SUMMARY_OPENERS: tuple[str, ...] = (
    "This session is being continued from a previous conversation",
    "[CONTEXT COMPACTION]",
    "[CONTEXT SUMMARY]:",
    "Another language model started to solve this problem",
)


@dataclass
class _Imported:
    """One session as it is being turned into events."""

    sid: str
    session: ImportedSession
    events: list[Event]
    messages: list[JSON] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    message_ids: list[str] = field(default_factory=list)
    system_tokens: int = 0
    #: messages, tokens and ids kept in the lists above (a compaction looks across
    #: them); else the messages are streamed and only the ids a repair names are kept
    whole: bool = True
    repaired_ids: dict[int, str] = field(default_factory=dict)


def _ordered(sessions: Sequence[ImportedSession]) -> list[ImportedSession]:
    """Parents before children (a child may appear before its parent in a file)."""
    by_key = {s.key: s for s in sessions}
    out: list[ImportedSession] = []
    placed: set[str] = set()

    def place(s: ImportedSession, depth: int = 0) -> None:
        if s.key in placed:
            return
        if depth > len(sessions):
            raise InvalidInput(f"session {shown(s.key)}: parent links form a cycle")
        parent = by_key.get(s.parent_key or "")
        if parent is not None:
            place(parent, depth + 1)
        placed.add(s.key)
        out.append(s)

    for s in sessions:
        place(s)
    return out


def _check_unique_keys(sessions: Sequence[ImportedSession]) -> None:
    """Two sessions under one key would merge their parent links and drop one of them."""
    seen: set[str] = set()
    for s in sessions:
        if s.key in seen:
            raise InvalidInput(
                f"two imported sessions have the key {shown(s.key)}: the importer must name each "
                "session once (nothing was imported)"
            )
        seen.add(s.key)


def import_sessions(
    ledger: Ledger,
    sessions: Sequence[ImportedSession],
    *,
    model: str | None = None,
    context_length: int | None = None,
    encoding: str = DEFAULT_ENCODING,
    digest: str | None = None,
    fold: bool = True,
) -> list[str]:
    """Append every session as events in one transaction. Returns the new session ids, in order.

    `model` is recorded for a session whose file names none (the file's own wins);
    `context_length` overrides the file's window for every session; `digest` (the
    input's SHA-256) is recorded on each session's start (:data:`IMPORT_DIGEST`);
    `fold` False leaves a streamed import unfolded (``Ledger._append_stream``).
    """
    if not sessions:
        raise InvalidInput("nothing to import: the file holds no messages")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        # "" fell back to the default model without a word; start_session refuses it
        raise InvalidInput(f"the model to record must be a non-empty string, got {shown(model)}")
    _check_unique_keys(sessions)
    ordered = _ordered(sessions)
    keys = {s.key: ledger.ids("ses") for s in ordered}
    compressed = {s.key for s in ordered if s.end_reason == "compression"}
    overrides = (model, context_length, encoding)
    if _has_compaction(ordered, compressed):
        # a continuation ends its parent with the compaction: built whole, then appended
        done: dict[str, _Imported] = {}
        for s in ordered:
            with _naming(s):
                continued = s.parent_key in compressed and s.continues
                parent = done.get(s.parent_key or "") if continued else None
                done[s.key] = _events(ledger, s, keys, compressed, parent, overrides, digest)
        ledger.append([AppendRequest(done[s.key].sid, done[s.key].events, 0) for s in ordered])
    else:  # each session's events made as the store takes them (s40: the import's memory)
        checked = {s.key: _prechecked(s, encoding) for s in ordered}  # before the write lock
        streamed = (
            StreamedRequest(
                keys[s.key], _streamed(ledger, s, keys, overrides, digest, checked.pop(s.key)), 0
            )
            for s in ordered
        )
        ledger._append_stream(streamed, fold=fold)
    return [keys[s.key] for s in ordered]


def _has_compaction(ordered: Sequence[ImportedSession], compressed: set[str]) -> bool:
    """Whether a continuation in the file records its parent's compaction."""
    return any(s.parent_key in compressed and s.continues for s in ordered)


@contextlib.contextmanager
def _naming(s: ImportedSession) -> Iterator[None]:
    """Say which conversation of the file is bad."""
    try:
        yield
    except InvalidInput as exc:
        raise type(exc)(f"session {shown(s.key)}: {exc}") from exc


def _record_digest(events: list[Event], digest: str) -> None:
    start = events[0]
    assert isinstance(start, SessionStarted)
    events[0] = msgspec.structs.replace(start, config={**start.config, IMPORT_DIGEST: digest})


def earlier_import(ledger: Ledger, digest: str) -> Lineage | None:
    """The first session imported from an input of this `digest` (:data:`IMPORT_DIGEST`),
    or None (sessions imported before the digest was recorded are not found)."""
    views = ledger.transcript.state.sessions
    for lineage in ledger.sessions():
        view = views.get(lineage.session_id)
        if view is not None and view.config.get(IMPORT_DIGEST) == digest:
            return lineage
    return None


Overrides = tuple[str | None, int | None, str]


def _streamed(
    ledger: Ledger,
    s: ImportedSession,
    keys: dict[str, str],
    overrides: Overrides,
    digest: str | None,
    checked: _Prechecked,
) -> Iterator[Event]:
    """A session with no compaction to record (checked and counted by
    :func:`_prechecked`), its events made as the store takes them, in the write
    transaction: no list of its events or ids kept (the ids are made in the order
    :func:`_events` makes them: the same log)."""
    with _naming(s):
        out = _begin(ledger, s, keys, set(), None, overrides, digest)[0]
        yield from out.events
        out.events = []
        yield from _message_events(ledger, out, [], overrides[2], checked)
        yield from _tail(ledger, out, 0, checked)


class _Prechecked(NamedTuple):
    """What :func:`_prechecked` found, kept for the session's events so that nothing is
    checked twice: a token count per message (8 bytes each), each usage report's
    (shape, usage), the end reason as checked."""

    counts: array[int]
    usages: list[tuple[str, CanonicalUsage]]
    end_reason: str | None


def _prechecked(s: ImportedSession, encoding: str) -> _Prechecked:
    """A streamed session's checks, made before the write transaction (s40 review: the
    lock is not held while an import validates and counts): its messages validated in
    order as ``validate_messages`` does and counted a chunk at a time, its usage reports
    normalized and its end reason checked."""
    with _naming(s):
        counts = _counted(s, encoding)
        usages = [_usage_fields(u) for u in s.usages]
        ended = _checked_end(s)
    return _Prechecked(counts, usages, ended)


def _counted(s: ImportedSession, encoding: str) -> array[int]:
    """The session's messages validated in order and counted a chunk at a time (only
    the counts kept)."""
    counts = array("q")
    for chunk in chunks(checked_in_order(s.messages)):
        counts.extend(count_messages(chunk, encoding))
    return counts


def _checked_end(s: ImportedSession) -> str | None:
    """The session's end reason, checked as every face checks a name (see
    ``limits.check_name``), or None."""
    if s.end_reason is None:
        return None
    return check_name(s.end_reason, "end reason", MAX_REASON_CHARS)


def _built(messages: Sequence[JSON], counts: array[int]) -> Iterator[tuple[list[JSON], array[int]]]:
    """A checked session's messages in their stored form (``messages.stored_copy``, as
    ``validate_message`` returns them) beside their counts, a chunk at a time."""
    start = 0
    for chunk in chunks(messages):
        end = start + len(chunk)
        yield [stored_copy(raw) for raw in chunk], counts[start:end]
        start = end


def _usage_fields(u: ImportedUsage) -> tuple[str, CanonicalUsage]:
    """A usage report's (shape, usage), its model's name checked."""
    if u.model is not None:
        check_name(u.model, "a usage report's model", MAX_MODEL_CHARS)
    return normalize_usage(u.raw, u.shape)


def _begin(
    ledger: Ledger,
    s: ImportedSession,
    keys: dict[str, str],
    compressed: set[str],
    parent: _Imported | None,
    overrides: Overrides,
    digest: str | None,
) -> tuple[_Imported, list[LayoutEntry]]:
    """A session's opening events (and, for a continuation, its parent's compaction)."""
    model, context_length, encoding = overrides
    sid = keys[s.key]
    ctx = (
        context_length or s.context_length or ledger.config.context_length or DEFAULT_CONTEXT_LENGTH
    )
    parent_sid = keys.get(s.parent_key or "")
    reason: SessionReason = (
        "compression"
        if parent_sid and s.parent_key in compressed and s.continues
        else ("branch" if parent_sid else "import")
    )
    whole = parent is not None or s.key in compressed  # messages and ids kept in lists
    messages = validate_messages(s.messages) if whole else []
    tokens = count_messages(messages, encoding) if messages else []
    compaction = _compaction(ledger, s, parent, messages, tokens, sid) if parent else None
    spec = SessionSpec(
        model=s.model or model or DEFAULT_MODEL,  # `model` fills in for a file without one
        context_length=ctx,
        system_prompt=s.system_prompt,
        system_role=s.system_role,
        tools=s.tools,
        parent_session_id=parent_sid,
        reason=reason,
        title=s.title,
        source=_storable(f"{s.source_format}:{s.key}"),
        encoding=encoding,
    )
    events = ledger.start_events(sid, spec)
    if compaction is not None:
        events[0] = msgspec.structs.replace(events[0], compaction_id=compaction[0])
    if digest is not None:
        _record_digest(events, digest)
    out = _Imported(sid, s, events, messages, tokens, whole=whole)
    out.system_tokens = (
        count_message({"role": "system", "content": s.system_prompt}, encoding)
        if s.system_prompt
        else 0
    )
    return out, compaction[1] if compaction is not None else []


def _events(
    ledger: Ledger,
    s: ImportedSession,
    keys: dict[str, str],
    compressed: set[str],
    parent: _Imported | None,
    overrides: Overrides,
    digest: str | None,
) -> _Imported:
    """A session's events, built whole (an import that records a compaction)."""
    out, layout = _begin(ledger, s, keys, compressed, parent, overrides, digest)
    out.events.extend(_message_events(ledger, out, [e.message_id for e in layout], overrides[2]))
    out.events.extend(_tail(ledger, out, len(layout)))
    return out


def _tail(
    ledger: Ledger, out: _Imported, skip: int, checked: _Prechecked | None = None
) -> Iterator[Event]:
    """The importer's repairs of re-used tool-call ids, as the ledger records them (those
    in messages carried from the parent were recorded with the parent), and the end
    (its reason as `checked` holds it, else checked here)."""
    s = out.session
    repairs = [r for r in s.repairs if r.index >= skip]
    if repairs:
        ids = out.message_ids if out.whole else out.repaired_ids
        yield ledger.repair_event(out.sid, repairs, ids, source="import")
    ended = checked.end_reason if checked is not None else _checked_end(s)
    if ended is not None:
        yield SessionEnded(**ledger.event_fields(out.sid), reason=ended)


def _message_events(
    ledger: Ledger,
    out: _Imported,
    carried: list[str],
    encoding: str,
    checked: _Prechecked | None = None,
) -> Iterator[Event]:
    """The session's messages and usage reports, in order, after the `carried` ones (the
    messages a continuation kept from its parent, by id): each usage report follows the
    message it was reported after. A `checked` session's usage reports and counts are
    those :func:`_prechecked` made."""

    def base() -> dict[str, Any]:  # a new event id per call, in the order events are made
        return ledger.event_fields(out.sid)

    skip = len(carried)
    usages: dict[int, list[UsageReported]] = {}
    fields = checked.usages if checked is not None else map(_usage_fields, out.session.usages)
    for u, (shape, usage) in zip(out.session.usages, fields, strict=True):
        usages.setdefault(max(u.after_index, skip - 1), []).append(
            UsageReported(**base(), raw=u.raw, shape=shape, usage=usage, model=u.model)
        )
    if skip:
        yield from usages.pop(skip - 1, [])
        out.message_ids = list(carried)
    wanted = {r.index for r in out.session.repairs}
    counts = checked.counts if checked is not None else None
    if not out.whole and counts is None:  # (a session built whole beside a compaction)
        counts = _counted(out.session, encoding)
    pairs: Iterable[tuple[Sequence[JSON], Sequence[int]]] = (
        [(out.messages, out.tokens)] if counts is None else _built(out.session.messages, counts)
    )
    i = 0
    for messages, tokens in pairs:
        for msg, count in zip(messages, tokens, strict=True):
            if i >= skip:
                mid = ledger.ids("msg")
                if out.whole:
                    out.message_ids.append(mid)
                elif i in wanted:
                    out.repaired_ids[i] = mid
                yield MessageAppended(
                    **base(), message_id=mid, message=msg, tokens=count, encoding=encoding
                )
                yield from usages.pop(i, [])
            i += 1
    for rest in usages.values():
        yield from rest


# --------------------------------------------------------------------------- imported compactions


def _key(message: JSON) -> bytes:
    fields = ("role", "content", "tool_calls", "tool_call_id")
    return msgspec.json.encode({k: message.get(k) for k in fields})


def _summary_index(s: ImportedSession, messages: list[JSON]) -> int | None:
    """The child message holding the source agent's summary: as the format says, else by wording."""
    if s.summary_index is not None and 0 <= s.summary_index < len(messages):
        return s.summary_index
    from ctxledger.compressor.markers import (
        FOREIGN_MERGE_HEADER,
        FOREIGN_TAGS,
        LEGACY_PREFIXES,
        summary_prefix,
    )

    openers = (
        *SOURCE_SUMMARY_OPENERS,
        summary_prefix(),
        *LEGACY_PREFIXES,
        *FOREIGN_TAGS,
        FOREIGN_MERGE_HEADER,
    )
    for i, message in enumerate(messages[:50]):
        if message.get("role") in ("user", "assistant") and content_text(
            message
        ).lstrip().startswith(openers):
            return i
    return None


def _compaction(
    ledger: Ledger,
    s: ImportedSession,
    parent: _Imported,
    messages: list[JSON],
    tokens: list[int],
    sid: str,
) -> tuple[str, list[LayoutEntry]] | None:
    """Record the source agent's compaction on the parent (summary + switch): (id, layout), or None.

    The continuation's layout is its messages up to the summary and the run of parent
    messages right after it: a message equal to an unused parent message is carried by
    id, the summary message is new (``summary``), anything else the source rewrote is
    new as well (``stripped``: the parent's message in another form). The parent
    messages not carried are the span the summary replaced.
    """
    index = _summary_index(s, messages)
    if index is None:
        parent.session.warnings.append(
            "the continuation holds no recognisable summary: recorded as a plain continuation"
        )
        return None
    by_key: dict[bytes, list[int]] = {}
    for j, message in enumerate(parent.messages):
        by_key.setdefault(_key(message), []).append(j)
    end = index + 1
    while end < len(messages) and by_key.get(_key(messages[end])):
        end += 1
    used: set[int] = set()
    layout: list[LayoutEntry] = []
    for i in range(end):
        match = next((j for j in by_key.get(_key(messages[i]), []) if j not in used), None)
        if i != index and match is not None:
            used.add(match)
            layout.append(
                LayoutEntry(
                    message_id=parent.message_ids[match],
                    origin="carried",
                    tokens=parent.tokens[match],
                )
            )
        else:
            layout.append(
                LayoutEntry(
                    message_id=ledger.ids("msg"),
                    origin="summary" if i == index else "stripped",
                    message=messages[i],
                    tokens=tokens[i],
                )
            )
    cid = ledger.ids("cmp")
    # the summary's body (a summary merged into a message leaves that message out)
    split = split_merged(messages[index])
    text = s.summary_text or (split[0] if split is not None else content_text(messages[index]))
    replaced = [mid for j, mid in enumerate(parent.message_ids) if j not in used]
    _end_with_switch(ledger, parent, s, cid, sid, text, replaced, layout)
    return cid, layout


def _end_with_switch(
    ledger: Ledger,
    parent: _Imported,
    child: ImportedSession,
    cid: str,
    new_sid: str,
    text: str,
    replaced: list[str],
    layout: list[LayoutEntry],
) -> None:
    """Replace the parent's ``SessionEnded`` by the imported compaction's two events."""
    psid = parent.sid
    if parent.events and isinstance(parent.events[-1], SessionEnded):
        parent.events.pop()
    fmt = child.source_format
    parent.events.append(
        SummaryGenerated(
            **ledger.event_fields(psid),
            compaction_id=cid,
            summarizer=f"imported:{fmt}",
            model=child.model,
            prompt_hash="",
            input_message_ids=replaced,
            budget_tokens=0,
            text=text,
            imported=True,
        )
    )
    system_tokens = (
        count_message({"role": "system", "content": child.system_prompt}, DEFAULT_ENCODING)
        if child.system_prompt
        else 0
    )
    parent.events.append(
        SessionSwitched(
            **ledger.event_fields(psid),
            compaction_id=cid,
            new_session_id=new_sid,
            trigger="import",
            system_prompt=child.system_prompt,
            system_prompt_tokens=system_tokens,
            system_prompt_role=stored_role(check_system_role(child.system_role)),
            layout=layout,
            plan={
                "imported": fmt,
                "replaced": len(replaced),
                "carried": sum(1 for e in layout if e.origin == "carried"),
            },
            config={},
            tokens_before=parent.system_tokens + sum(parent.tokens),
            tokens_after=system_tokens + sum(e.tokens for e in layout),
            messages_before=len(parent.messages) + (1 if parent.session.system_prompt else 0),
            messages_after=len(layout) + (1 if child.system_prompt else 0),
        )
    )


def _storable(text: str) -> str:
    """`text` (a session's source, named after its file) as the log can store it: a
    byte of a file name that is not UTF-8 arrives as a lone surrogate (0xff as U+DCFF)
    and is written ``\\xff``, any other lone surrogate as its ``\\u`` escape (``import`` of
    such a file failed: "SessionStarted has a field of the wrong type", session 41)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join(
            (f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else f"\\u{ord(c):04x}")
            if 0xD800 <= ord(c) <= 0xDFFF
            else c
            for c in text
        )
    return text
