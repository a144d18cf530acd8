"""Pure folds of the event log: transcript, accounting, chains."""

from ctxledger.projections.accounting import AccountingProjection, SessionUsage
from ctxledger.projections.chains import ChainsProjection, Lineage
from ctxledger.projections.projector import Projector
from ctxledger.projections.source import EventSource
from ctxledger.projections.transcript import SessionView, StoredMessage, TranscriptProjection

__all__ = [
    "AccountingProjection",
    "ChainsProjection",
    "EventSource",
    "Lineage",
    "Projector",
    "SessionUsage",
    "SessionView",
    "StoredMessage",
    "TranscriptProjection",
]
