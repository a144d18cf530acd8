"""The state API's ``Idempotency-Key`` header on ``POST /v1/sessions/{id}/messages``.

An append whose answer was lost (the connection dropped) may or may not be stored; a
client re-sending it with the same key gets the first answer again (status and body,
and ``Idempotent-Replayed: true``) and nothing is appended; the same key on another
request (another body or session) is a 422 ``idempotency_key_reused``, nothing appended.

Nothing is kept beside the log: the key lives in the ids of what the append stores, so
it holds across server restarts and between the worker processes of one ledger (SQLite
or PostgreSQL). Every event of a keyed append gets the id ``evt_k<K>_<n>`` (``K``: 24
hex digits of the key's sha256, the same for any request with that key), its messages
``msg_k<K>_<B>_<n>`` (``B``: 16 hex digits of the sha256 of the path's session and the
body) and repaired tool-call ids ``call_k<K>_<n>``. A re-send finds its first message
by id (``B`` says it is the same request) and answers from the stored events. Two
requests with one key racing (another process, or the re-send arriving while the
first is still running) are settled by the store: event ids are unique, and a stored
id holding another event is refused, so exactly one append is stored and the other
request answers from it, or is the 422.

A key names one request on the whole ledger (as an API key's account holds Stripe's),
not per session. Keys are kept no longer than the events (no expiry). An append of no
messages stores nothing, so its key is not remembered.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import msgspec
from starlette.requests import Request

from ctxledger.clock import IdGenerator
from ctxledger.events import MessageAppended, ToolCallIdsRepaired, ToolOutputPersisted
from ctxledger.integers import shown
from ctxledger.messages import CallIdRepair
from ctxledger.runtime.service_io import TurnResult, append_notices
from ctxledger.server.errors import HTTPError
from ctxledger.server.routing import Param

if TYPE_CHECKING:
    from ctxledger.events import Recorded
    from ctxledger.ledger import Ledger

HEADER = "Idempotency-Key"
#: as Stripe's keys; the IETF draft sets no bound
MAX_KEY_CHARS = 255
#: a key's characters: visible ASCII but the quote and the backslash (a structured-field
#: string without escapes, the draft's form, or the bare token most clients send)
_KEY_CHARS = frozenset(chr(c) for c in range(0x21, 0x7F)) - {'"', "\\"}
REPLAYED = {"Idempotent-Replayed": "true"}

__all__ = [
    "HEADER",
    "KEY_PARAM",
    "MAX_KEY_CHARS",
    "REPLAYED",
    "KeyedAppend",
    "refuse_idempotency_key",
    "request_key",
]

#: the header as the append endpoint documents it
KEY_PARAM = Param(
    HEADER,
    "string",
    False,
    "re-send a request whose answer was lost: the same key and body answer the first "
    "answer again, append nothing (1 to 255 visible ASCII characters, a UUID say)",
)


def refuse_idempotency_key(request: Request, headers: tuple[Param, ...]) -> None:
    """A 400 for a state-API write that does not take the key but was sent one: it would
    not make the write idempotent, and a client must not think it does."""
    if HEADER in request.headers and not any(h.name == HEADER for h in headers):
        raise HTTPError(
            400,
            "idempotency_key_unsupported",
            f"{HEADER} is taken by POST /v1/sessions/{{id}}/messages only, not by "
            f"{request.method} {request.scope['path']}: this write is not idempotent (a "
            "re-send may act twice), so send it without the header; nothing written",
        )


def _bad_key(message: str) -> HTTPError:
    return HTTPError(400, "invalid_idempotency_key", f"{HEADER} {message}; nothing appended")


def request_key(request: Request) -> str | None:
    """The request's key, None without the header; a 400 ``invalid_idempotency_key``
    when it is sent twice, empty, longer than :data:`MAX_KEY_CHARS` or holds another
    character than visible ASCII (a quote or backslash only as the draft's enclosing
    quotes)."""
    values = request.headers.getlist(HEADER)
    if not values:
        return None
    if len(values) > 1:
        raise _bad_key(f"was sent {len(values)} times; send it once")
    key = values[0].strip(" \t")
    if len(key) >= 2 and key[0] == key[-1] == '"':
        key = key[1:-1]  # the IETF draft's form: a structured-field string
    if not key:
        raise _bad_key("is empty; send 1 to 255 visible ASCII characters (a UUID, say)")
    if len(key) > MAX_KEY_CHARS:
        raise _bad_key(f"is {len(key):,} characters long; at most {MAX_KEY_CHARS}")
    for at, char in enumerate(key, 1):
        if char not in _KEY_CHARS:
            raise _bad_key(
                f"holds {char!r} at character {at}; a key is visible ASCII characters, "
                "without blanks, quotes or backslashes"
            )
    return key


class KeyedAppend:
    """One keyed append: the ids it stores under, and the answer it gave if stored."""

    def __init__(self, key: str, session_ref: str, body: dict[str, Any]) -> None:
        self.key = key
        self._k = hashlib.sha256(b"ctxledger Idempotency-Key\0" + key.encode()).hexdigest()[:24]
        request = [session_ref, body.get("messages"), body.get("expected_version")]
        encoded = msgspec.json.encode(request, order="sorted")
        self._b = hashlib.sha256(encoded).hexdigest()[:16]
        self._events = f"evt_k{self._k}_"

    def ids(self) -> IdGenerator:
        """A fresh id source for one try of the append (the service asks per try)."""
        counts: dict[str, int] = {}

        def new_id(prefix: str) -> str:
            n = counts[prefix] = counts.get(prefix, -1) + 1
            return (
                f"msg_k{self._k}_{self._b}_{n}" if prefix == "msg" else f"{prefix}_k{self._k}_{n}"
            )

        return new_id

    def stored(self, ledger: Ledger, messages: int) -> dict[str, Any] | None:
        """The first answer to this request when it is stored (after reading what other
        writers stored), else None. `messages`: how many the request sent."""
        ledger.refresh()
        first = ledger.transcript.state.messages.get(f"msg_k{self._k}_{self._b}_0")
        if first is None:
            return None
        (head,) = ledger.store.read_at([first.seq])
        # at most: the messages, a tool output stored out of the context each, one repair
        end = head.version + 2 * messages
        group = []
        for record in ledger.store.read_stream(head.stream, head.version, end):
            if not record.event.event_id.startswith(self._events):
                break
            group.append(record)
        return _answer(head.stream, group)

    def reused(self) -> HTTPError:
        return HTTPError(
            422,
            "idempotency_key_reused",
            f"{HEADER} {shown(self.key)} was already used for another request (another body, "
            "or another path: a re-send goes to the path of the first send, even once "
            "that session was compacted); nothing appended: send a new key for a new request",
        )


def _answer(session_id: str, group: list[Recorded]) -> dict[str, Any]:
    """The append's answer from the events it stored (as ``state_api.turn_json``)."""
    ids = [r.event.message_id for r in group if isinstance(r.event, MessageAppended)]
    outputs = [
        (e.tool_call_id, e.chars, e.blob_ref)
        for e in (r.event for r in group)
        if isinstance(e, ToolOutputPersisted)
    ]
    repairs = [
        CallIdRepair(
            index=ids.index(entry.message_id),
            call_index=entry.call_index,
            original=entry.original,
            replacement=entry.replacement,
        )
        for r in group
        if isinstance(r.event, ToolCallIdsRepaired)
        for entry in r.event.repairs
    ]
    result = TurnResult(
        session_id=session_id, message_ids=ids, notices=append_notices(outputs, repairs)
    )
    out: dict[str, Any] = msgspec.to_builtins(result)
    out["version"] = group[-1].version
    return out
