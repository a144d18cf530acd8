"""The psycopg exceptions of a PostgreSQL ledger turned into the ctxledger error a user
can act on: a full disk, tables broken by another writer, a server out of reach, an
operation the server cancelled and rolled back (a deadlock, a timeout, a cancel), a role without the grants the
ledger needs (README: PostgreSQL for fleets)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Literal

import psycopg
import psycopg.errors

from ctxledger.errors import (
    ConnectionLost,
    CtxLedgerError,
    IntegrityError,
    ServerCancelled,
    StorageFullError,
    StoreError,
)

__all__ = [
    "ConnectionLost",
    "Left",
    "ServerCancelled",
    "cancelled",
    "leaving",
    "mark",
    "translated",
]

_RESEND = "; an append cut off may or may not be stored: re-send the same events (ids make it safe)"
#: what a role needs on a ledger's schema (the README's PostgreSQL section says the same)
GRANTS = (
    "USAGE on the schema and SELECT on its tables to read; INSERT and UPDATE on its "
    "tables and USAGE on its sequences to write; CREATE on the database (or on the "
    "empty schema) to create a ledger or apply a newer ctxledger's migrations"
)
#: sqlstate -> (what happened, what to raise if retries keep failing) for what the server
#: cancels and rolls back while it still answers. By sqlstate, not psycopg's classes:
#: its DeadlockDetected and SerializationFailure are no TransactionRollback subclasses,
#: and TransactionTimeout (25P04, PostgreSQL 17) may be missing from an older psycopg.
#: All read as a server out of reach (ConnectionLost) or a bare StoreError before
#: session 43.
_CANCELLED: dict[str, tuple[str, str]] = {
    "40P01": (
        "a deadlock with another session's transaction (the server aborts one of the two)",
        "",
    ),
    "40001": (
        "a conflict with another transaction, or on a standby with the changes it replays "
        "from the primary",
        "",
    ),
    "40000": ("the server rolled the transaction back", ""),
    "57014": (
        "the statement was cancelled: the role's statement_timeout ran out, or a cancel "
        "request (pg_cancel_backend) stopped it",
        "; raise statement_timeout if it keeps happening",
    ),
    "55P03": (
        "a lock wait ran past the role's lock_timeout: another session held the lock "
        "(another writer, a migration, a VACUUM FULL)",
        "; raise lock_timeout if it keeps happening",
    ),
    "25P03": (
        "the transaction sat idle past the role's idle_in_transaction_session_timeout and "
        "the server ended the session",
        "; raise idle_in_transaction_session_timeout if it keeps happening",
    ),
    "25P04": (
        "the transaction ran past the role's transaction_timeout and the server ended the session",
        "; raise transaction_timeout if it keeps happening",
    ),
}
#: what an append path had left in the ledger when the server cancelled it (:func:`leaving`)
Left = Literal["nothing", "committed", "maybe"]
_LEFT_ATTR = "ctxledger_left"
#: the end of a cancelled append's message, by what it left
_LEFT: dict[str, str] = {
    # one transaction (client-side, COPY, streamed; a small append's insert)
    "nothing": ", nothing of the append was written: retry",
    # a small append's wait for the seal, after its insert committed its rows unsealed
    # (with synchronous_commit off: only the seal's commit is flushed); a one-event call
    # whose look-up found its event stored as sent (by it, or by the append it re-sends)
    "committed": (
        ", but only its wait: its events were committed before it waited for another "
        "writer's seal (or by the earlier append this one re-sends), and are stored "
        "(readers see them once the next append or settle() seals them): do not retry "
        "them as new events; until that seal a server crash could still lose them (rows "
        "waiting for a seal are committed without a flush), so re-send the same events "
        "(ids make it a no-op)"
    ),
    # a one-event call whose stored row could not be looked up (its session ended, the
    # look-up failed or ran past its limits), or a path that said nothing
    "maybe": (
        ", but a small append commits its rows before it waits for another writer's seal, "
        "so they may be stored: re-send the same events (ids make it safe)"
    ),
}


@contextlib.contextmanager
def leaving(left: Left) -> Iterator[None]:
    """A psycopg error raised inside is marked with what the append path had left in
    the ledger (`left`) should the server cancel it, for :func:`translated`'s message.
    An inner mark stays (a path that falls back to another marks its own errors)."""
    try:
        yield
    except psycopg.Error as exc:
        mark(exc, left)
        raise


def mark(exc: psycopg.Error, left: Left) -> None:
    """Mark `exc` with what its append path had left (:func:`leaving`), unless an inner
    path marked it already."""
    if not hasattr(exc, _LEFT_ATTR):
        setattr(exc, _LEFT_ATTR, left)


def cancelled(exc: psycopg.Error) -> bool:
    """Whether the server cancelled the operation and rolled it back (a timeout, a
    cancel, a deadlock) while still answering: the session can ask it more."""
    return (exc.sqlstate or "") in _CANCELLED


#: a transaction the server could not say was committed or not (class 40's 40003)
_UNKNOWN_END = "40003"


def translated(exc: psycopg.Error, action: str, where: str) -> CtxLedgerError:
    """The error to raise for `exc` met while trying to `action` in the ledger `where`.

    A cancelled append says what the path that met `exc` had left (:func:`leaving`):
    nothing (one transaction: client-side, COPY, streamed, a small append's insert, a
    one-event call cut before its row committed), its rows committed (a small append
    cut while it waited for the seal: stored, the next writer's seal shows them), or
    maybe (a one-event call whose row could not be looked up, or a path that said
    nothing: re-send)."""
    said = f"could not {action} in {where}"
    detail = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, psycopg.errors.DiskFull):
        return StorageFullError(
            f"{said}: the server's disk is full; nothing from this operation was written: "
            "free space on the server and retry"
        )
    if isinstance(exc, psycopg.errors.IntegrityError) or exc.sqlstate == "40002":
        return IntegrityError(
            f"{said}: the tables broke a ctxledger rule ({detail}); was the log written "
            "by something else? run verify()"
        )
    cancelled = _CANCELLED.get(exc.sqlstate or "")
    if cancelled is not None:
        why, remedy = cancelled
        tail = ": retry"
        if action == "append":
            tail = _LEFT[getattr(exc, _LEFT_ATTR, "maybe")]
        return ServerCancelled(
            f"{said}: the server cancelled it ({detail}): {why}; its transaction was "
            f"rolled back{tail}{remedy}"
        )
    if exc.sqlstate == _UNKNOWN_END:
        return ConnectionLost(
            f"{said}: the server could not say whether the transaction completed "
            f"({detail}){_RESEND if action == 'append' else ''}"
        )
    if isinstance(exc, psycopg.OperationalError):
        return ConnectionLost(
            f"{said}: the server could not be reached ({detail}); check it is running and "
            f"the URL{_RESEND if action == 'append' else ''}"  # (an open, a read: no hint)
        )
    if isinstance(exc, psycopg.errors.InsufficientPrivilege | psycopg.errors.InvalidSchemaName):
        # (a schema the role may not use reads as "no schema has been selected to create in")
        return StoreError(f"{said}: {detail}; the role connecting needs {GRANTS}")
    return StoreError(f"{said}: {detail}")
