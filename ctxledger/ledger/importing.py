"""Turning imported sessions (``importers.model.ImportedSession``) into ordinary events.

All sessions of one import are validated first and appended in one transaction, so
a bad file imports nothing. A parent/child pair whose parent ended with reason
``compression`` becomes a compression chain (the child starts with reason
``compression``), so chain, replay and audit commands work on imported history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxledger.errors import InvalidInput
from ctxledger.events import (
    Event,
    MessageAppended,
    SessionEnded,
    SessionReason,
    UsageReported,
)
from ctxledger.eventstore.base import AppendRequest
from ctxledger.importers.model import ImportedSession
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.spec import SessionSpec
from ctxledger.messages import validate_messages
from ctxledger.tokens import DEFAULT_ENCODING, count_messages
from ctxledger.usage import normalize_usage

#: used when neither the file, nor the command line, nor the config says
DEFAULT_CONTEXT_LENGTH = 128_000
DEFAULT_MODEL = "unknown"


def _ordered(sessions: Sequence[ImportedSession]) -> list[ImportedSession]:
    """Parents before children (a child may appear before its parent in a file)."""
    by_key = {s.key: s for s in sessions}
    out: list[ImportedSession] = []
    placed: set[str] = set()

    def place(s: ImportedSession, depth: int = 0) -> None:
        if s.key in placed:
            return
        if depth > len(sessions):
            raise InvalidInput(f"session {s.key!r}: parent links form a cycle")
        parent = by_key.get(s.parent_key or "")
        if parent is not None:
            place(parent, depth + 1)
        placed.add(s.key)
        out.append(s)

    for s in sessions:
        place(s)
    return out


def import_sessions(
    ledger: Ledger,
    sessions: Sequence[ImportedSession],
    *,
    model: str | None = None,
    context_length: int | None = None,
    encoding: str = DEFAULT_ENCODING,
) -> list[str]:
    """Append every session as events in one transaction. Returns the new session ids, in order."""
    if not sessions:
        raise InvalidInput("nothing to import: the file holds no messages")
    ordered = _ordered(sessions)
    keys = {s.key: ledger.ids("ses") for s in ordered}
    compressed = {s.key for s in ordered if s.end_reason == "compression"}
    requests: list[AppendRequest] = []
    for s in ordered:
        try:
            events = _events(ledger, s, keys, compressed, model, context_length, encoding)
        except InvalidInput as exc:  # say which conversation of the file is bad
            raise type(exc)(f"session {s.key!r}: {exc}") from exc
        requests.append(AppendRequest(keys[s.key], events, 0))
    ledger.append(requests)
    return [keys[s.key] for s in ordered]


def _events(
    ledger: Ledger,
    s: ImportedSession,
    keys: dict[str, str],
    compressed: set[str],
    model: str | None,
    context_length: int | None,
    encoding: str,
) -> list[Event]:
    sid = keys[s.key]
    messages = validate_messages(s.messages)
    ctx = (
        context_length or s.context_length or ledger.config.context_length or DEFAULT_CONTEXT_LENGTH
    )
    parent = keys.get(s.parent_key or "")

    def base() -> dict[str, Any]:
        return ledger.event_fields(sid)

    reason: SessionReason = (
        "compression"
        if parent and s.parent_key in compressed
        else ("branch" if parent else "import")
    )
    spec = SessionSpec(
        model=model or s.model or DEFAULT_MODEL,
        context_length=ctx,
        system_prompt=s.system_prompt,
        tools=s.tools,
        parent_session_id=parent,
        reason=reason,
        title=s.title,
        source=f"{s.source_format}:{s.key}",
        encoding=encoding,
    )
    events = ledger.start_events(sid, spec)
    usages: dict[int, list[UsageReported]] = {}
    for u in s.usages:
        shape, usage = normalize_usage(u.raw, u.shape)
        usages.setdefault(u.after_index, []).append(
            UsageReported(**base(), raw=u.raw, shape=shape, usage=usage, model=u.model)
        )
    message_ids: list[str] = []
    for i, (msg, tokens) in enumerate(
        zip(messages, count_messages(messages, encoding) if messages else [], strict=True)
    ):
        message_ids.append(ledger.ids("msg"))
        events.append(
            MessageAppended(
                **base(),
                message_id=message_ids[-1],
                message=msg,
                tokens=tokens,
                encoding=encoding,
            )
        )
        events.extend(usages.pop(i, []))
    for rest in usages.values():
        events.extend(rest)
    if s.repairs:  # the importer's repairs of re-used tool-call ids, as the ledger records them
        events.append(ledger.repair_event(sid, s.repairs, message_ids, source="import"))
    if s.end_reason is not None:
        events.append(SessionEnded(**base(), reason=s.end_reason))
    return events
