"""Replies a compaction carried into a continuation that the continuation withdrew.

A compaction carries its last messages into the continuation by id, and a provisional
reply among them may be withdrawn there (``ReplyWithdrawn``, session 44). The ended
session's own view is never changed after its switch, so it still holds the reply:
a reader that rebuilds a chain's history from ended sessions' views (the proxy's
recorded line, an undo's restored view) must leave such ids out.
:func:`withdrawn_carried` names them, and :class:`CarriedWithdrawals` keeps what it
read for a caller that asks on every request.

The rule is exact: a switch's carried ids start the continuation's view (its layout),
``ReplyWithdrawn`` is the only event that takes an id out of a session's view, and ids
are never reused; so a carried id missing from the first layout-many ids of the
continuation's view was withdrawn.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

from ctxledger.events import Recorded, SessionSwitched
from ctxledger.ledger.facade import Ledger


class CarriedWithdrawals:
    """:func:`withdrawn_carried` with what it read kept: each ended session's switch
    (read once from the log: it never changes) and each continuation's withdrawn
    carried ids by its view's length and last id (read again when those changed)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        #: an ended session -> the ids its switch carried, and how many entries its layout holds
        self._carried: dict[str, tuple[frozenset[str], int]] = {}
        #: a continuation -> (its view's length and last id, the carried ids not in it)
        self._gone: dict[str, tuple[tuple[int, str | None], frozenset[str]]] = {}

    def of(self, chain: Sequence[str]) -> set[str]:
        """The ids a switch of `chain` (a compression chain, oldest first: a compaction
        or a revert) carried into the next session that are no longer in its view."""
        gone: set[str] = set()
        for ended, continuation in itertools.pairwise(chain):
            live = self.ledger.transcript.session(continuation).live
            key = (len(live), live[-1] if live else None)
            known = self._gone.get(continuation)
            if known is None or known[0] != key:  # (its view changed since)
                carried, size = self.carried_by(ended)
                known = self._gone[continuation] = (key, carried.difference(live[:size]))
            gone |= known[1]
        return gone

    def carried_by(self, session_id: str) -> tuple[frozenset[str], int]:
        """The ids the switch ending `session_id` carried (none: it did not end by a
        switch, an imported chain's), and its layout's size."""
        found = self._carried.get(session_id)
        if found is not None:
            return found
        view = self.ledger.transcript.session(session_id)
        if view.continued_as is None:
            return frozenset(), 0
        store = self.ledger.store
        switch = _last_switch(store.read_stream(session_id, from_version=view.version))
        if switch is None:  # (something followed the switch in its stream)
            switch = _last_switch(store.read_session(session_id))
        layout = switch.layout if switch is not None else []
        carried = frozenset(e.message_id for e in layout if e.message is None)
        self._carried[session_id] = found = (carried, len(layout))
        return found


def withdrawn_carried(ledger: Ledger, chain: Sequence[str]) -> set[str]:
    """The ids a switch of `chain` carried into the next session and that session
    withdrew (nothing kept between calls: :class:`CarriedWithdrawals` keeps it)."""
    return CarriedWithdrawals(ledger).of(chain)


def _last_switch(records: Iterable[Recorded]) -> SessionSwitched | None:
    found = None
    for rec in records:
        if isinstance(rec.event, SessionSwitched):
            found = rec.event
    return found


__all__ = ["CarriedWithdrawals", "withdrawn_carried"]
