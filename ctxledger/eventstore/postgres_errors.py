"""The psycopg exceptions of a PostgreSQL ledger turned into the ctxledger error a user
can act on: a full disk, tables broken by another writer, a server out of reach, an
operation the server cancelled and rolled back (a deadlock, a timeout, a cancel), a role without the grants the
ledger needs (README: PostgreSQL for fleets)."""

from __future__ import annotations

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

__all__ = ["ConnectionLost", "ServerCancelled", "translated"]

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
#: a cancelled append that was not one transaction: rows committed to wait for the seal
_WAITED = (
    ", but a small append may have committed its rows to wait for another writer's seal, "
    "and those are stored: re-send the same events (ids make it safe)"
)
#: a transaction the server could not say was committed or not (class 40's 40003)
_UNKNOWN_END = "40003"


def translated(
    exc: psycopg.Error, action: str, where: str, *, one_transaction: bool = False
) -> CtxLedgerError:
    """The error to raise for `exc` met while trying to `action` in the ledger `where`.

    `one_transaction`: the append ran in one transaction (the streamed one), so a cancel
    wrote nothing of it. Otherwise a small append may have committed its rows unsealed
    before waiting for the append lock, and the next writer to seal stores them: a cancel
    of that wait leaves the append stored, so its error says to re-send."""
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
            tail = ", nothing of the append was written: retry" if one_transaction else _WAITED
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
