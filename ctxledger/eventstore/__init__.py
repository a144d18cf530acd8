"""The append-only event log: the interface (:mod:`.base`) and the SQLite backend."""

from ctxledger.events import Recorded
from ctxledger.eventstore.base import (
    GENESIS_HASH,
    AppendRequest,
    ChainVerifier,
    Durability,
    EventStore,
    VerifyReport,
    chain_hash,
)
from ctxledger.eventstore.sqlite import SQLiteEventStore

__all__ = [
    "GENESIS_HASH",
    "AppendRequest",
    "ChainVerifier",
    "Durability",
    "EventStore",
    "Recorded",
    "SQLiteEventStore",
    "VerifyReport",
    "chain_hash",
]
