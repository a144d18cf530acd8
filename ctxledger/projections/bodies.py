"""Message bodies a fold left in the log, read back by seq when someone asks for them.

A rebuild folds message *heads* (id, session, token count: see
``EventStore.read_heads``) and keeps each message's seq, not its body: a million
parsed bodies were most of a rebuild's time and memory. :class:`Bodies` reads bodies
back from the log (``read_bodies`` where the store has it — SQLite: the payloads
alone, decoded past their envelope — else ``read_at``), a batch at a time where the
caller knows what it will need (a session's live messages), and hands out exactly
the message that was appended (blob re-inflation and upcasting included, as any
other read).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from ctxledger.collector import collector_paused
from ctxledger.errors import IntegrityError, StoreError
from ctxledger.events import Event, MessageAppended, Recorded
from ctxledger.messages import JSON

__all__ = ["Bodies", "BodySource"]


class BodySource(Protocol):
    """A log that can hand out the records at given seqs (every event store can)."""

    def read_at(self, seqs: Sequence[int]) -> list[Recorded]:
        """The records at `seqs`, in seq order (missing ones left out)."""
        ...


@runtime_checkable
class BodyColumns(Protocol):
    """A log that can hand out message bodies alone (``SQLiteEventStore.read_bodies``)."""

    def read_bodies(self, seqs: Sequence[int]) -> dict[int, JSON]:
        """seq -> the message appended there, for the message rows among `seqs`."""
        ...


class Bodies:
    """Reads appended message bodies from `source` by seq (thread-safe as the source is)."""

    __slots__ = ("source",)

    def __init__(self, source: BodySource) -> None:
        self.source = source

    def load(self, seq: int) -> JSON:
        """The message appended at `seq`."""
        return self.load_many((seq,))[seq]

    def event_at(self, seq: int) -> Event:
        """The whole event stored at `seq`, as any read hands it out (contents re-inflated)."""
        found = [rec.event for rec in self.source.read_at((seq,)) if rec.seq == seq]
        if not found:
            raise IntegrityError(
                f"the event at seq {seq} is no longer in the log (the projection was folded "
                "from a different log); run verify() on it"
            )
        return found[0]

    def load_many(self, seqs: Iterable[int]) -> dict[int, JSON]:
        """seq -> the message appended there, for every seq in `seqs` (one batch).

        A store with ``read_bodies`` (SQLite) decodes just the messages; any other goes
        through ``read_at``. The cyclic collector is paused meanwhile, as for a fold
        (``Projector.catch_up``): the read allocates only acyclic bodies that are kept.
        """
        wanted = set(seqs)
        try:
            with collector_paused():
                found = self._read(sorted(wanted))
        except StoreError as exc:
            raise StoreError(
                f"{exc} (a ledger opened from its log reads message bodies from the log "
                "when first asked for them: read what you need before close())"
            ) from exc
        missing = wanted.difference(found)
        if missing:
            raise IntegrityError(
                f"the message appended at seq {min(missing)} is no longer in the log "
                "(the projection was folded from a different log); run verify() on it"
            )
        return found

    def _read(self, seqs: list[int]) -> dict[int, JSON]:
        source = self.source
        if isinstance(source, BodyColumns):
            return source.read_bodies(seqs)
        return {
            rec.seq: rec.event.message
            for rec in source.read_at(seqs)
            if type(rec.event) is MessageAppended
        }
