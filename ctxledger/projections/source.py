"""What the projections need from a log: the ``EventSource`` protocol.

Projections are pure folds; they depend on this small protocol rather than on
:class:`~ctxledger.eventstore.base.EventStore`, so the layer below them is named by
what it must do (read records in log order, keep a checkpoint), not by a class. Every
event store satisfies it; so can a list of records in a test.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from ctxledger.events import Recorded

__all__ = ["EventSource"]


class EventSource(Protocol):
    """A log the projector can fold: records in seq order, and checkpoint storage."""

    def read_all(self, from_seq: int = 1, to_seq: int | None = None) -> Iterable[Recorded]:
        """Every record with ``from_seq <= seq`` (``<= to_seq``), in log order."""
        ...

    def save_checkpoint(self, name: str, seq: int, state: bytes) -> None:
        """Keep a projection's serialized state as of ``seq``."""
        ...

    def load_checkpoint(self, name: str) -> tuple[int, bytes] | None:
        """The last checkpoint saved under ``name``, as ``(seq, state)``."""
        ...
