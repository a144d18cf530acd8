"""Projections are pure folds: rebuilt from scratch == maintained incrementally."""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio
import pytest
from helpers.ledger_helpers import SMALL, compact_now, make_ledger, session_with_turns
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from ctxledger.compressor.markers import is_summary_message
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.demo.synth import SessionSynth
from ctxledger.errors import UnknownMessage
from ctxledger.events import MessageAppended, ReplyWithdrawn
from ctxledger.eventstore.base import AppendRequest
from ctxledger.projections import Projector


class LedgerMachine(RuleBasedStateMachine):
    """Random histories on a real SQLite ledger; every projection must equal a rebuild."""

    @initialize()
    def open(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.ledger = make_ledger(Path(self.dir.name) / "l.db")
        self.synth = SessionSynth(11, big_outputs=False)
        self.sessions: list[str] = []
        self.turn = 0

    def teardown(self) -> None:
        self.ledger.close()
        self.dir.cleanup()

    def _live(self) -> list[str]:
        return [s for s in self.sessions if not self.ledger.transcript.session(s).ended]

    @rule(with_system=st.booleans(), parent=st.booleans())
    def start(self, with_system: bool, parent: bool) -> None:
        live = self._live()
        sid = self.ledger.start_session(
            model="m",
            system_prompt=self.synth.system_prompt() if with_system else None,
            parent_session_id=live[-1] if parent and live else None,
            reason="branch" if parent and live else "new",
        )
        self.sessions.append(sid)

    @precondition(lambda self: bool(self._live()))
    @rule(pick=st.integers(0, 10), n=st.integers(1, 3))
    def append_turns(self, pick: int, n: int) -> None:
        live = self._live()
        sid = live[pick % len(live)]
        for _ in range(n):
            self.ledger.append_messages(sid, self.synth.turn(self.turn))
            self.turn += 1

    @precondition(lambda self: bool(self._live()))
    @rule(pick=st.integers(0, 10), prompt=st.integers(0, 20_000), cached=st.integers(0, 100))
    def usage(self, pick: int, prompt: int, cached: int) -> None:
        live = self._live()
        raw = {
            "prompt_tokens": prompt,
            "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": prompt * cached // 100},
        }
        self.ledger.report_usage(
            live[pick % len(live)], raw, purpose="agent" if cached % 3 else "summarizer"
        )

    @precondition(lambda self: bool(self._live()))
    @rule(pick=st.integers(0, 10), focus=st.sampled_from([None, "tests"]))
    def compress(self, pick: int, focus: str | None) -> None:
        live = self._live()
        sid = live[pick % len(live)]
        outcome = compact_now(self.ledger, sid, focus=focus)
        if outcome.new_session_id:
            self.sessions.append(outcome.new_session_id)

    @precondition(lambda self: bool(self._live()))
    @rule(pick=st.integers(0, 10))
    def pin_first(self, pick: int) -> None:
        live = self._live()
        sid = live[pick % len(live)]
        ids = self.ledger.transcript.live_ids(sid)
        if ids:
            self.ledger.pin(sid, ids[0])

    @precondition(lambda self: bool(self._live()))
    @rule(pick=st.integers(0, 10), last=st.integers(1, 2))
    def withdraw_last(self, pick: int, last: int) -> None:
        """The proxy's withdrawal of a reply the client went on without (its last messages),
        in the append of the message the client sent instead (a withdrawal alone is
        refused since session 44: a what-if replays it with its append's messages)."""
        live = self._live()
        sid = live[pick % len(live)]
        ids = self.ledger.transcript.live_ids(sid)[-last:]
        if ids:
            event = ReplyWithdrawn(**self.ledger.event_fields(sid), message_ids=ids)
            instead = [{"role": "user", "content": f"instead, turn {self.turn}"}]
            self.turn += 1
            self.ledger.append_messages(sid, instead, extra_events=[event])
            assert not set(ids) & set(self.ledger.transcript.live_ids(sid))

    @precondition(lambda self: bool(self._live()))
    @rule(pick=st.integers(0, 10), last=st.integers(1, 2))
    def withdraw_alone_as_before(self, pick: int, last: int) -> None:
        """A withdrawal alone, as ledgers written before session 44 hold them: written
        to the store past the append's check (an older writer), then read back."""
        live = self._live()
        sid = live[pick % len(live)]
        if not self.ledger.transcript.live_ids(sid):  # (a fresh session: a turn to withdraw)
            self.ledger.append_messages(sid, self.synth.turn(self.turn))
            self.turn += 1
        ids = self.ledger.transcript.live_ids(sid)[-last:]
        event = ReplyWithdrawn(**self.ledger.event_fields(sid), message_ids=ids)
        self.ledger.store.append_many([AppendRequest(sid, [event], self.ledger.version(sid))])
        self.ledger.refresh()
        assert not set(ids) & set(self.ledger.transcript.live_ids(sid))

    @precondition(lambda self: bool(self._live()))
    @rule(pick=st.integers(0, 10), back=st.integers(2, 6), twice=st.booleans())
    def withdraw_not_the_end(self, pick: int, back: int, twice: bool) -> None:
        """Only the view's last messages can be withdrawn: a middle one (or the last one
        named twice) is refused and nothing is appended."""
        live = self._live()
        sid = live[pick % len(live)]
        ids = self.ledger.transcript.live_ids(sid)
        if len(ids) < back and not (twice and ids):
            return
        named = [ids[-1], ids[-1]] if twice else [ids[-back]]
        event = ReplyWithdrawn(**self.ledger.event_fields(sid), message_ids=named)
        before = self.ledger.store.last_seq()
        with pytest.raises(UnknownMessage, match="last messages"):
            self.ledger.append([AppendRequest(sid, [event], self.ledger.version(sid))])
        assert self.ledger.store.last_seq() == before

    @precondition(lambda self: bool(self._live()))
    @rule(pick=st.integers(0, 10), window=st.integers(8_000, 64_000))
    def switch_model(self, pick: int, window: int) -> None:
        live = self._live()
        self.ledger.switch_model(live[pick % len(live)], "m2", window)

    @rule()
    def checkpoint(self) -> None:
        self.ledger.projector.save_checkpoint(self.ledger.store)

    @invariant()
    def rebuild_equals_incremental(self) -> None:
        fresh = Projector.rebuild(self.ledger.store, use_checkpoint=False)
        assert fresh.fingerprint() == self.ledger.projector.fingerprint()
        from_checkpoint = Projector.rebuild(self.ledger.store)
        assert from_checkpoint.fingerprint() == self.ledger.projector.fingerprint()

    @invariant()
    def every_original_message_is_retrievable(self) -> None:
        for rec in self.ledger.store.read_all():
            if isinstance(rec.event, MessageAppended):
                assert self.ledger.transcript.original(rec.event.message_id) == rec.event.message


TestLedgerMachine = LedgerMachine.TestCase
TestLedgerMachine.settings = settings(max_examples=12, stateful_step_count=12, deadline=None)


def test_continuation_view_is_head_summary_tail(tmp_path: Path) -> None:
    ledger = make_ledger(tmp_path / "l.db")
    sid = session_with_turns(ledger, 12)
    before = ledger.api_messages(sid)
    outcome = compact_now(ledger, sid)
    assert outcome.action == "compressed" and outcome.new_session_id
    after = ledger.api_messages(outcome.new_session_id)
    assert len(after) < len(before)
    assert sum(is_summary_message(m) for m in after) == 1
    # the old session is ended and still shows exactly what it had
    assert ledger.transcript.session(sid).ended
    assert ledger.api_messages(sid) == before
    assert ledger.tip(sid) == outcome.new_session_id
    assert ledger.chains.compression_count(outcome.new_session_id) == 1


def test_show_at_a_sequence_number_is_the_past_view(tmp_path: Path) -> None:
    ledger = make_ledger(tmp_path / "l.db")
    sid = session_with_turns(ledger, 2)
    seq = ledger.store.last_seq()
    view_then = ledger.api_messages(sid)
    ledger.append_messages(sid, SessionSynth(99, big_outputs=False, id_prefix="later").turn(0))
    assert ledger.projector_at(seq).transcript.api_messages(sid) == view_then
    assert ledger.api_messages(sid) != view_then


def test_accounting_separates_summarizer_and_sums_a_chain(tmp_path: Path) -> None:
    ledger = make_ledger(tmp_path / "l.db")
    sid = session_with_turns(ledger, 12)
    ledger.report_usage(
        sid, {"input_tokens": 100, "output_tokens": 10, "cache_read_input_tokens": 50}
    )
    ledger.report_usage(sid, {"prompt_tokens": 70, "completion_tokens": 7}, purpose="summarizer")
    new = compact_now(ledger, sid).new_session_id
    assert new is not None
    ledger.report_usage(new, {"input_tokens": 30, "output_tokens": 3})
    s = ledger.usage(sid)
    assert (s.agent.prompt, s.agent_calls, s.summarizer.prompt, s.summarizer_calls) == (
        150,
        1,
        70,
        1,
    )
    assert s.last_prompt_tokens == 150
    chain = ledger.chain_usage(new)
    assert chain.agent.prompt == 180 and chain.agent_calls == 2
    assert ledger.usage(new).last_prompt_tokens == 30


def test_reopening_a_ledger_folds_the_same_state(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    ledger = make_ledger(path)
    sid = session_with_turns(ledger, 12)
    compact_now(ledger, sid)
    fingerprint = ledger.projector.fingerprint()
    ledger.close()
    again = make_ledger(path, namespace="u")
    assert again.projector.fingerprint() == fingerprint
    again.close()


def test_summary_is_deterministic_for_a_replay(tmp_path: Path) -> None:
    texts = []
    for name in ("a", "b"):
        ledger = make_ledger(tmp_path / f"{name}.db", config=SMALL)
        sid = session_with_turns(ledger, 12)
        out = compact_now(ledger, sid)
        texts.append((out.summary_text, ledger.api_messages(out.new_session_id or "")))
        ledger.close()
    assert texts[0] == texts[1]
    assert anyio is not None and OfflineSummarizer is not None
