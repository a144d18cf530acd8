"""The transcript projection's state types: a session's view, a stored message (its body
in memory or read from the log by seq), and the batched body readers scans use.

Split from :mod:`ctxledger.projections.transcript` (which re-exports every name) so the
row folds (:mod:`ctxledger.projections.rowfold`) can build them without an import cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import msgspec

from ctxledger.errors import IntegrityError
from ctxledger.events import SessionSwitched
from ctxledger.messages import JSON, StoredRole, SystemRole, role_of
from ctxledger.projections.bodies import Bodies

__all__ = [
    "SessionView",
    "StoredMessage",
    "TranscriptState",
    "grew_from",
    "load_bodies",
    "read_bodies",
    "with_bodies",
]


class SessionView(msgspec.Struct, kw_only=True):
    """Mutable per-session state of the fold (owned by the projection; treat as read-only)."""

    session_id: str
    model: str
    context_length: int
    encoding: str
    reason: str
    parent_session_id: str | None = None
    compaction_id: str | None = None
    system_prompt: str | None = None
    system_tokens: int = 0
    #: the role the system prompt is given back in, as its event stores it (unset for
    #: ``system``: a state without roles encodes, checkpoints and fingerprints as before)
    prompt_role: StoredRole = msgspec.UNSET
    tools: list[JSON] = msgspec.field(default_factory=list)
    tools_tokens: int = 0
    live: list[str] = msgspec.field(default_factory=list)
    live_tokens: int = 0
    pinned: list[str] = msgspec.field(default_factory=list)
    ended: bool = False
    end_reason: str | None = None
    continued_as: str | None = None
    config: JSON = msgspec.field(default_factory=dict)
    #: the stream version as of the last folded event (the expected version of the next append)
    version: int = 0

    @property
    def system_role(self) -> SystemRole:
        """The role the system prompt is given back in: ``system`` or ``developer``."""
        return role_of(self.prompt_role)


def grew_from(live: Sequence[str], seen: int, last: str | None) -> bool:
    """Whether `live` still starts with the `seen` ids a cache folded, `last` the final one.

    A live list grows by appends, but a :class:`~ctxledger.events.ReplyWithdrawn` takes
    ids off its end, after which appends may bring it back to the same length: a cache
    keyed on (length, last id) catches up on ``live[seen:]`` only when this holds and
    reads the view again otherwise. Exact while withdrawals take only the view's last ids
    (:func:`ctxledger.ledger.eventcheck.check_references`) and ids are never reused.
    """
    return seen <= len(live) and (seen == 0 or live[seen - 1] == last)


class StoredMessage(msgspec.Struct, kw_only=True, gc=False):
    """A message as the live view shows it, with its origin and token count.

    Its :attr:`message` is `body` when held in memory, else read once from the log at
    `seq` through `bodies` (a message a rebuild folded from its head).
    """

    tokens: int
    session_id: str
    origin: str = "appended"
    source_id: str | None = None
    seq: int = 0
    #: the message, or None while it is only in the log (at `seq`)
    body: JSON | None = None
    #: where to read a body that is only in the log
    bodies: Bodies | None = None

    @property
    def message(self) -> JSON:
        """The message (as appended, or as recorded by a compaction); do not mutate it."""
        body = self.body
        if body is None:
            if self.bodies is None:
                raise IntegrityError(
                    f"the message at seq {self.seq} was folded without its log; "
                    "rebuild the projections from the store"
                )
            body = self.body = self.bodies.load(self.seq)
        return body


def with_bodies(stored: Iterable[StoredMessage], batch: int = 512) -> Iterator[StoredMessage]:
    """`stored`, each with its body read (a batch at a time): for scans over many messages."""
    chunk: list[StoredMessage] = []
    for m in stored:
        chunk.append(m)
        if len(chunk) >= batch:
            load_bodies(chunk)
            yield from chunk
            chunk = []
    load_bodies(chunk)
    yield from chunk


def load_bodies(stored: list[StoredMessage]) -> None:
    """Read every body of `stored` still only in the log, one batch per log (then kept)."""
    lazy = [m for m in stored if m.body is None and m.bodies is not None]
    while lazy:
        bodies = lazy[0].bodies
        assert bodies is not None
        batch = [m for m in lazy if m.bodies is bodies]
        found = bodies.load_many(m.seq for m in batch)
        for m in batch:
            m.body = found[m.seq]
        lazy = [m for m in lazy if m.bodies is not bodies] if len(batch) < len(lazy) else []


def read_bodies(stored: list[StoredMessage]) -> list[JSON]:
    """The bodies of `stored`, in order; those only in the log are read (one batch per
    log) and not kept on their messages (a one-off scan keeps the memory a rebuild saved)."""
    out: list[JSON | None] = [m.body for m in stored]
    lazy = [i for i, m in enumerate(stored) if m.body is None and m.bodies is not None]
    while lazy:
        bodies = stored[lazy[0]].bodies
        assert bodies is not None
        batch = [i for i in lazy if stored[i].bodies is bodies]
        found = bodies.load_many(stored[i].seq for i in batch)
        for i in batch:
            out[i] = found[stored[i].seq]
        lazy = [i for i in lazy if stored[i].bodies is not bodies]
    return [body if body is not None else m.message for body, m in zip(out, stored, strict=True)]


class TranscriptState(msgspec.Struct, kw_only=True):
    sessions: dict[str, SessionView] = msgspec.field(default_factory=dict)
    messages: dict[str, StoredMessage] = msgspec.field(default_factory=dict)
    #: live replacements (persisted tool outputs): message id -> shown message
    shown: dict[str, StoredMessage] = msgspec.field(default_factory=dict)
    #: continuation layouts waiting for their SessionStarted (same atomic append)
    pending: dict[str, SessionSwitched] = msgspec.field(default_factory=dict)
    #: repaired re-used tool-call ids: replacement -> the id the source had sent
    call_renames: dict[str, str] = msgspec.field(default_factory=dict)
    last_seq: int = 0
