"""The projector: every projection, folded together, incrementally or from scratch.

``Projector.rebuild(store)`` folds the whole log (or up to a sequence number);
``catch_up(store)`` folds only what was appended since the last event it saw. A
checkpoint stores the serialized state at a sequence so a rebuild can start late.
Rebuilding and folding incrementally must give the same state (a property test
checks it).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable

import msgspec

from ctxledger.events import MessageAppended, Recorded
from ctxledger.projections.accounting import AccountingProjection
from ctxledger.projections.chains import ChainsProjection
from ctxledger.projections.source import EventSource
from ctxledger.projections.transcript import TranscriptProjection

#: bump whenever a projection's state gains or changes a field: a checkpoint saved under
#: another name is ignored (the rebuild starts from the log), never decoded into the wrong
#: shape with defaults filling what an older fold never computed
CHECKPOINT_NAME = "projector/v2"


class Projector:
    def __init__(
        self,
        transcript: TranscriptProjection | None = None,
        accounting: AccountingProjection | None = None,
        chains: ChainsProjection | None = None,
    ) -> None:
        self.transcript = transcript or TranscriptProjection()
        self.accounting = accounting or AccountingProjection()
        self.chains = chains or ChainsProjection()
        self.last_seq = max(
            self.transcript.state.last_seq,
            self.accounting.state.last_seq,
            self.chains.state.last_seq,
        )
        #: called with every record folded, in log order, after the projections saw it
        #: (other folds, e.g. the runtime's, ride along instead of re-reading the store)
        self.listeners: list[Callable[[Recorded], None]] = []

    def apply(self, rec: Recorded) -> None:
        self.apply_all((rec,))

    def apply_all(self, records: Iterable[Recorded]) -> int:
        """Fold records in log order (already-folded ones are skipped); returns how many."""
        transcript, accounting, chains = (
            self.transcript.apply,
            self.accounting.apply,
            self.chains.apply,
        )
        listeners = self.listeners
        last = self.last_seq
        n = 0
        try:
            for rec in records:
                seq = rec.seq
                if seq <= last:
                    continue
                event = rec.event
                transcript(seq, event, rec.version)
                if type(event) is not MessageAppended:
                    accounting(seq, event)
                    chains(seq, event)
                if listeners:
                    for listener in listeners:
                        listener(rec)
                last = seq
                n += 1
        finally:
            self.last_seq = last
        return n

    def catch_up(self, store: EventSource, to_seq: int | None = None) -> int:
        """Fold events appended since the last one seen; returns how many were folded.

        Long folds run with the cyclic garbage collector paused: they allocate only
        acyclic, long-lived objects, and collector passes over them cost more than the
        fold itself (measured: about 2x on a 1M-event rebuild).
        """
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self.apply_all(store.read_all(self.last_seq + 1, to_seq))
        finally:
            if was_enabled:
                gc.enable()

    @classmethod
    def rebuild(
        cls, store: EventSource, to_seq: int | None = None, *, use_checkpoint: bool = True
    ) -> Projector:
        """A fresh projector folded from the log (from the latest usable checkpoint)."""
        projector = cls()
        if use_checkpoint:
            saved = store.load_checkpoint(CHECKPOINT_NAME)
            if saved is not None and (to_seq is None or saved[0] <= to_seq):
                projector = cls.decode(saved[1])
        projector.catch_up(store, to_seq)
        return projector

    def save_checkpoint(self, store: EventSource) -> None:
        store.save_checkpoint(CHECKPOINT_NAME, self.last_seq, self.encode())

    def _sync_last_seq(self) -> None:
        """Every projection has seen the log up to ``last_seq`` (some skip irrelevant events)."""
        self.accounting.state.last_seq = self.chains.state.last_seq = self.last_seq

    def encode(self) -> bytes:
        self._sync_last_seq()
        return msgspec.msgpack.encode(
            [
                self.transcript.encode_state(),
                self.accounting.encode_state(),
                self.chains.encode_state(),
            ]
        )

    @classmethod
    def decode(cls, data: bytes) -> Projector:
        t, a, c = msgspec.msgpack.decode(data, type=tuple[bytes, bytes, bytes])
        return cls(
            TranscriptProjection.decode_state(t),
            AccountingProjection.decode_state(a),
            ChainsProjection.decode_state(c),
        )

    def fingerprint(self) -> bytes:
        """A canonical encoding of the whole state, for equality checks (rebuild == live)."""
        self._sync_last_seq()
        return msgspec.json.encode(
            [
                msgspec.to_builtins(self.transcript.state),
                msgspec.to_builtins(self.accounting.state),
                msgspec.to_builtins(self.chains.state),
            ],
            order="sorted",
        )
