"""The psycopg exceptions of a PostgreSQL ledger turned into the ctxledger error a user
can act on: a full disk, tables broken by another writer, a server out of reach, an
operation the server cancelled (a deadlock, a timeout), a role without the grants the
ledger needs (README: PostgreSQL for fleets)."""

from __future__ import annotations

import psycopg
import psycopg.errors

from ctxledger.errors import (
    ConnectionLost,
    CtxLedgerError,
    IntegrityError,
    StorageFullError,
    StoreError,
)

__all__ = ["ConnectionLost", "translated"]

_RESEND = "; an append cut off may or may not be stored: re-send the same events (ids make it safe)"
#: what a role needs on a ledger's schema (the README's PostgreSQL section says the same)
GRANTS = (
    "USAGE on the schema and SELECT on its tables to read; INSERT and UPDATE on its "
    "tables and USAGE on its sequences to write; CREATE on the database (or on the "
    "empty schema) to create a ledger or apply a newer ctxledger's migrations"
)
#: what the server cancels and rolls back while it still answers: a deadlock (psycopg's
#: DeadlockDetected and SerializationFailure are not TransactionRollback subclasses, so
#: all three are named), a statement timeout or cancel, a lock timeout. All are
#: OperationalErrors, which read as a server out of reach before (session 43)
_CANCELLED = (
    psycopg.errors.DeadlockDetected,
    psycopg.errors.SerializationFailure,
    psycopg.errors.TransactionRollback,
    psycopg.errors.QueryCanceled,
    psycopg.errors.LockNotAvailable,
)


def translated(exc: psycopg.Error, action: str, where: str) -> CtxLedgerError:
    """The error to raise for `exc` met while trying to `action` in the ledger `where`."""
    said = f"could not {action} in {where}"
    detail = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, psycopg.errors.DiskFull):
        return StorageFullError(
            f"{said}: the server's disk is full; nothing from this operation was written: "
            "free space on the server and retry"
        )
    if isinstance(exc, psycopg.errors.IntegrityError):
        return IntegrityError(
            f"{said}: the tables broke a ctxledger rule ({detail}); was the log written "
            "by something else? run verify()"
        )
    if isinstance(exc, _CANCELLED):
        written = ", nothing of the append was written" if action == "append" else ""
        return StoreError(
            f"{said}: the server cancelled it ({detail}): a deadlock with another writer, "
            "or the role's statement_timeout or lock_timeout ran out; its transaction was "
            f"rolled back{written}: retry (or raise the timeout)"
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
