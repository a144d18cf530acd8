"""A withdrawal in the same append as new messages (the proxy's path), as a stateful
property: every cache keyed on a session's view — the call ledger, the API view, the
rough and exact token sums, the proxy's history index — equals what a fresh process
reads from the log. A cache that assumed a live list only grows (a withdrawal followed by
as many appends keeps its length) fails this (found by session 43's review of reach8)."""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule
from test_projections import LedgerMachine

from ctxledger.events import ReplyWithdrawn
from ctxledger.messages import CallLedger
from ctxledger.projections import Projector
from ctxledger.server.history import HistoryIndex


class WithdrawingMachine(LedgerMachine):
    index: HistoryIndex | None = None

    def _caches(self, sid: str) -> tuple[Any, ...]:
        if self.index is None:
            self.index = HistoryIndex(self.ledger)
        transcript = self.ledger.transcript
        calls = self.ledger.call_ledger(sid)
        return (
            sorted(calls.issued),
            sorted(calls.answered),
            transcript.api_messages(sid),
            transcript.rough_tokens(sid),
            transcript.total_tokens(sid),
            [dict(m) for m in self.index.session_messages(sid)],
        )

    @precondition(lambda self: bool(self._live()))
    @rule(pick=st.integers(0, 10), last=st.integers(1, 3))
    def withdraw_and_append(self, pick: int, last: int) -> None:
        live = self._live()
        sid = live[pick % len(live)]
        ids = self.ledger.transcript.live_ids(sid)[-last:]
        if not ids:
            return
        self._caches(sid)  # warm every cache on the view before the withdrawal
        event = ReplyWithdrawn(**self.ledger.event_fields(sid), message_ids=ids)
        instead = [{"role": "user", "content": f"instead {self.turn} {i}"} for i in range(len(ids))]
        self.turn += 1
        self.ledger.append_messages(sid, instead, extra_events=[event])

    @invariant()
    def caches_equal_a_fresh_read(self) -> None:
        fresh = Projector.rebuild(self.ledger.store, use_checkpoint=False).transcript
        for sid in self.sessions:
            calls = CallLedger()
            calls.fold(fresh.messages_of(fresh.session(sid).live), fresh.state.call_renames)
            expected = (
                sorted(calls.issued),
                sorted(calls.answered),
                fresh.api_messages(sid),
                fresh.rough_tokens(sid),
                fresh.total_tokens(sid),
                [dict(m) for m in HistoryIndex(self.ledger).session_messages(sid)],
            )
            assert self._caches(sid) == expected, sid


TestWithdrawingMachine = WithdrawingMachine.TestCase
TestWithdrawingMachine.settings = settings(max_examples=40, stateful_step_count=15, deadline=None)
