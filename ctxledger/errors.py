"""Every error a ctxledger user can see, as a named class.

CtxLedgerError
├── InvalidInput (ValueError)          bad input from a user; nothing was appended
│   ├── InvalidMessage                 a message breaks the OpenAI chat shape
│   ├── InvalidEvent                   an event payload cannot be decoded / upcast
│   ├── InvalidConfig                  a compression setting is out of range
│   ├── ImportFormatError              an import file is malformed (carries a line number)
│   └── OneReference                   a diff of one reference that is not a compaction
├── StoreError                         the event store refused or failed an operation
│   ├── ConcurrencyError               stale expected version; nothing was written
│   ├── DuplicateEventError            an event id was re-sent with a different batch
│   ├── StorageFullError               the disk (or max_page_count) is full; nothing was written
│   ├── StoreBusy                      other sessions held it up (a lock); retry
│   │   └── ServerCancelled            PostgreSQL cancelled and rolled it back
│   ├── ConnectionLost                 the PostgreSQL server was out of reach
│   ├── LedgerChanged                  a lock-free read saw the ledger change
│   └── IntegrityError                 the hash chain does not verify
├── NotFound (KeyError)                no such id in the log
│   ├── UnknownSession                 no such session
│   ├── UnknownMessage                 no such message (or not live in that session)
│   ├── UnknownCompaction              no such compaction
│   └── UnknownBlob                    no such content-addressed blob
├── SessionEndedError                  appending to a session that ended (e.g. by compression)
├── CompressionError                   a compaction could not be carried out
│   └── SummarizerError                the summarizer failed (see .failure_class)
└── ContextOverflowError               the provider rejected the prompt and recovery gave up
"""

from __future__ import annotations

from typing import Literal

#: Why a summarizer failed; shared by :class:`SummarizerError` and the events that record it.
FailureClass = Literal[
    "auth",
    "network",
    "timeout",
    "rate_limit",
    "server",
    "malformed",
    "empty",
    "not_configured",
    "other",
]


class CtxLedgerError(Exception):
    """Base class of every ctxledger error."""


def described(exc: BaseException) -> str:
    """`exc`'s text and the notes added to it on the way up (``add_note``: a failed
    append's re-read that failed too), as one text: what a user is shown."""
    notes = [str(note) for note in getattr(exc, "__notes__", ())]
    return "; ".join([str(exc), *notes]) if notes else str(exc)


class InvalidInput(CtxLedgerError, ValueError):
    """Input from a user was rejected before anything was appended."""


class InvalidMessage(InvalidInput):
    """A chat message does not follow the OpenAI message shape."""

    def __init__(self, message: str, *, index: int | None = None) -> None:
        self.index = index
        where = f"message {index}: " if index is not None else ""
        super().__init__(where + message)


class InvalidEvent(InvalidInput):
    """An event payload could not be decoded or upcast."""


class InvalidConfig(InvalidInput):
    """A configuration value is out of range or of the wrong type."""


class ImportFormatError(InvalidInput):
    """An import file is malformed; `line` says where (1-based) when known."""

    def __init__(self, message: str, *, line: int | None = None, path: str | None = None) -> None:
        self.line = line
        self.path = path
        where = ""
        if path is not None:
            where = f"{path}:"
        if line is not None:
            where += f"{line}:"
        super().__init__(f"{where} {message}".strip() if where else message)


class OneReference(InvalidInput):
    """A diff was given one reference that is not a compaction: nothing to compare it
    with (each face names what it offers: two references, or the CLI's what-if)."""


class StoreError(CtxLedgerError):
    """The event store refused or failed an operation."""


class ConcurrencyError(StoreError):
    """The stream moved on since the caller read it; nothing was written.

    Re-read the stream (or the compression tip) and retry.
    """

    def __init__(
        self,
        stream: str,
        expected: int,
        actual: int,
        *,
        superseded: str | None = None,
        interleaved: bool = False,
    ) -> None:
        self.stream = stream
        self.expected = expected
        self.actual = actual
        if interleaved:
            # the caller named no version (None): `expected` is the version found, not given
            text = (
                f"another appender wrote to stream {stream!r} while the streamed append "
                "held it (PostgreSQL's append_stream cannot take expected_version None "
                "against a concurrent writer)"
            )
            super().__init__(f"{text}; nothing was appended: retry")
            return
        if superseded is None:
            text = f"stream {stream!r} is at version {actual}, not the expected {expected}"
        else:
            # the caller named a session that was continued (compacted): its version is moot
            text = (
                f"session {superseded!r} continues as {stream!r}, at version {actual}; "
                f"append to {stream!r}"
            )
        super().__init__(f"{text}; nothing was written: re-read the session and retry")


class DuplicateEventError(StoreError):
    """An event id already in the log was sent again as part of a different batch."""


class StorageFullError(StoreError):
    """The database is full (disk or max_page_count); nothing from this append was written."""


class IntegrityError(StoreError):
    """The log's hash chain does not verify."""


class StoreBusy(StoreError):
    """Other sessions kept the store from finishing the operation: a SQLite ledger's
    lock held past ``busy_timeout_ms`` (nothing was written), or
    :class:`ServerCancelled`. Retry (the HTTP server answers 503 ``store_busy``)."""


class ServerCancelled(StoreBusy):
    """The PostgreSQL server cancelled the operation and rolled back its transaction
    while it still answered: a deadlock, the role's ``statement_timeout``,
    ``lock_timeout``, ``idle_in_transaction_session_timeout`` or ``transaction_timeout``
    running out, a cancel request, a standby's conflict with recovery. The message says
    which, what to raise if it keeps happening, and for an append whether it may be
    stored all the same (a small append commits its rows before it waits for another
    writer's seal): then re-send the same events (ids make it safe)."""


class ConnectionLost(StoreError):
    """The PostgreSQL server could not be reached (down, restarting, or the network);
    retry later (an append cut off may or may not be stored: re-send the same events)."""


class LedgerChanged(StoreError):
    """A ledger read without locks (SQLite ``immutable=1``) changed during the read:
    what was read may be torn; run the command again."""


class NotFound(CtxLedgerError, KeyError):
    """No session, compaction, message or blob with that id exists."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want a sentence.
        return str(self.args[0]) if self.args else "unknown id"


class UnknownSession(NotFound):
    """No session with that id (or id prefix) exists."""


class UnknownMessage(NotFound):
    """No message with that id exists, or it is not live where it was asked for."""


class UnknownCompaction(NotFound):
    """No compaction with that id (or id prefix) exists in the log or the chain."""


class UnknownBlob(NotFound):
    """No content-addressed blob is stored under that reference."""


class SessionEndedError(CtxLedgerError):
    """The session has ended; append to its compression tip instead.

    Named apart from the ``SessionEnded`` event; ``ctxledger.SessionEnded`` is kept as a
    deprecated alias of this class for one release.
    """


class CompressionError(CtxLedgerError):
    """A compaction could not be carried out; the session is unchanged."""


class SummarizerError(CompressionError):
    """The summarizer failed.

    `failure_class` is one of: ``auth``, ``network``, ``timeout``, ``rate_limit``,
    ``server``, ``malformed``, ``empty``, ``not_configured``, ``other``.
    Only auth and network failures abort a compaction (HERMES_SPEC §3 phase 4); a
    connection closed in the middle of the reply is a network failure. The others,
    ``not_configured`` included, fall back to the deterministic fallback summary (and
    a cooldown: 600 s when no summarizer is configured).
    """

    ABORTING = frozenset({"auth", "network"})

    def __init__(
        self, message: str, *, failure_class: FailureClass, status: int | None = None
    ) -> None:
        self.failure_class: FailureClass = failure_class
        self.status = status
        super().__init__(message)

    @property
    def aborts(self) -> bool:
        return self.failure_class in self.ABORTING


class ContextOverflowError(CtxLedgerError):
    """The provider kept rejecting the prompt as too long and recovery gave up."""
