"""What the service returns, and the checks it runs on input before anything is appended.

Kept apart from ``service.py`` so the service module stays about behaviour; both
result types are re-exported there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ctxledger.errors import InvalidInput
from ctxledger.events import Trigger
from ctxledger.eventstore.contents import shared_contents
from ctxledger.integers import shown
from ctxledger.ledger.compaction import CompactionOutcome
from ctxledger.limits import (
    MAX_FOCUS_CHARS,
    MAX_SESSION_ID_CHARS,
    check_name,
    check_token_count,
    replaying,
)
from ctxledger.messages import CallIdRepair, check_new_messages


class TurnResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a service call did: the session to use from now on, and what to tell the user."""

    session_id: str
    compactions: list[CompactionOutcome] = msgspec.field(default_factory=list)
    notices: list[str] = msgspec.field(default_factory=list)
    message_ids: list[str] = msgspec.field(default_factory=list)
    #: why a compaction was abandoned (an aborting summarizer failure: nothing changed),
    #: redacted; None when none was
    aborted: str | None = None

    @property
    def compressed(self) -> bool:
        return any(c.action == "compressed" for c in self.compactions)


class Recovery(msgspec.Struct, frozen=True, kw_only=True):
    """How to retry after a provider error: with a lower output cap, or on a compacted session."""

    action: str  # "retry" | "fail"
    session_id: str
    max_tokens: int | None = None
    kind: str = ""
    reason: str = ""
    compaction: CompactionOutcome | None = None


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def host_size(
    agent: str | None,
    tokens: int | None,
    beyond: int | None,
    hard_limit: int | None = None,
    *,
    refused: bool,
    hygiene: bool,
    requested: bool,
) -> tuple[Trigger, int | None]:
    """``ContextService.host_compress``'s arguments checked (its reasons, at most one:
    `refused` records ``overflow``, `hygiene` and `requested` their own; without one it
    is ``preflight``); the trigger they record, and the size the host measured
    (`tokens`) as the ledger takes it."""
    named: tuple[tuple[Trigger, bool], ...] = (
        ("overflow", refused),
        ("hygiene", hygiene),
        ("requested", requested),
    )
    reasons: list[Trigger] = [t for t, v in named if v]
    if len(reasons) > 1:
        raise InvalidInput(f"a host's compaction has one reason, not {' and '.join(reasons)}")
    if hard_limit is not None and not (hygiene and is_int(hard_limit) and hard_limit > 0):
        raise InvalidInput(
            f"hard_limit is a hygiene's positive message count, got {shown(hard_limit)}"
        )
    if agent is not None and (not isinstance(agent, str) or not agent):
        raise InvalidInput(f"agent must be a non-empty string, got {shown(agent)}")
    if agent is not None:  # (recorded and shown: no control characters, an id's length)
        check_name(agent, "agent", MAX_SESSION_ID_CHARS)
    if tokens is not None:
        tokens = check_token_count(tokens, "tokens")
    if beyond is not None and not is_int(beyond):
        raise InvalidInput(f"beyond must be an integer, got {shown(beyond)}")
    return reasons[0] if reasons else "preflight", tokens


def host_details(estimate: int, agent: str | None, hard_limit: int | None) -> dict[str, Any]:
    """What a host's decision adds to its check's (or skip's) ``details``."""
    host = {"decided_by": "host", "force": False, "estimate": estimate}
    return host | {k: v for k, v in (("agent", agent), ("hard_limit", hard_limit)) if v is not None}


def check_new_batch(messages: list[Any]) -> None:
    """What appending `messages` to a new (empty) session checks, run before the session
    is started, so a refused list leaves nothing behind: the one message policy (re-used
    tool-call ids are repairs, not errors) and the log's encoding. Raises InvalidInput."""
    check_new_messages(messages)
    json_safe(messages, "messages")


def json_safe(value: object, what: str) -> None:
    """Reject values the log cannot store, before anything is appended.

    A message content this run read from a checked blob (a what-if replaying a 10 MB
    message) was decoded from UTF-8, so it encodes: it is not encoded again to check.
    """
    shared = shared_contents()
    if shared is not None and isinstance(value, list):
        value = [
            {**item, "content": ""}
            if isinstance(item, dict) and shared.checked(item.get("content"))
            else item
            for item in value
        ]
    try:
        msgspec.json.encode(value)
    except (TypeError, ValueError, msgspec.EncodeError, UnicodeError, RecursionError) as exc:
        raise InvalidInput(f"{what} must be JSON-serializable: {exc}") from None


def check_error_report(status: object, requested_max_tokens: object) -> None:
    """The arguments of ``handle_provider_error``."""
    if status is not None and not (
        isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599
    ):
        raise InvalidInput(f"status must be an HTTP status code or None, got {shown(status)}")
    cap = requested_max_tokens
    if cap is not None and not (isinstance(cap, int) and not isinstance(cap, bool) and cap >= 1):
        raise InvalidInput(
            f"requested_max_tokens must be a positive integer or None, got {shown(cap)}"
        )


def focus_topic(focus: Any) -> str | None:
    """A manual compression's focus: None, or a non-blank string (stripped) that was,
    as given, within the bounds of :func:`ctxledger.limits.check_name` for free text (the
    string every face checks, before anything is recorded). A what-if replays a recorded
    focus as it was recorded (not stripped, not checked)."""
    if focus is not None and not isinstance(focus, str):
        raise InvalidInput("focus must be a string or None")
    if focus is None or replaying():
        return focus
    return check_name(focus, "focus", MAX_FOCUS_CHARS, lines=True).strip() or None


def append_notices(
    outputs: Sequence[tuple[str, int, str]], repairs: Sequence[CallIdRepair]
) -> list[str]:
    """What an append tells the user: each tool output stored outside the context (its
    call id, chars and blob ref), then each repaired tool-call id. The service's append
    says it, and the state API's answer again to a keyed append's re-send
    (``server/idempotency``), from the events the append stored."""
    notices = [
        f"tool output of call {call_id!r} ({chars:,} chars) stored outside the context as {ref}"
        for call_id, chars, ref in outputs
    ]
    return notices + [f"repaired {r.describe()}" for r in repairs]


__all__ = [
    "Recovery",
    "TurnResult",
    "append_notices",
    "check_error_report",
    "focus_topic",
    "host_details",
    "host_size",
    "is_int",
    "json_safe",
]
