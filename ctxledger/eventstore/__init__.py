"""The append-only event log: the interface (:mod:`.base`), the SQLite backend, and
:func:`open_store`, which picks SQLite or PostgreSQL (:mod:`.postgres`) from a path or URL."""

from ctxledger.events import Recorded
from ctxledger.eventstore.base import AppendRequest, Durability, EventStore
from ctxledger.eventstore.opening import is_url, open_for_reading, open_store, opens_read_only
from ctxledger.eventstore.rows import (
    GENESIS_HASH,
    ChainFormat,
    StoredRow,
    chain_hash,
    chain_rows,
    chain_tip,
    link_hash,
    row_digest,
    split_linked,
)
from ctxledger.eventstore.sqlite import SQLiteEventStore
from ctxledger.eventstore.verifier import ChainVerifier, VerifyReport

__all__ = [
    "GENESIS_HASH",
    "AppendRequest",
    "ChainFormat",
    "ChainVerifier",
    "Durability",
    "EventStore",
    "Recorded",
    "SQLiteEventStore",
    "StoredRow",
    "VerifyReport",
    "chain_hash",
    "chain_rows",
    "chain_tip",
    "is_url",
    "link_hash",
    "open_for_reading",
    "open_store",
    "opens_read_only",
    "row_digest",
    "split_linked",
]
