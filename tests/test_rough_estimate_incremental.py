"""``estimator = "rough"``: the estimate summed as the view grows equals the whole walk.

The transcript projection keeps Hermes's rough estimate of each cached API view
(``TranscriptProjection.rough_tokens``) and adds only the messages appended since the
last read; the service's preflight and its figure for a response without usage read it.
A hypothesis state machine drives a session chain through random appends (turns, tool
results stored out of the context, which edit the cached view in place), usage-less
responses, preflight and manual compactions, model switches, appends by a second
writer folded on refresh, and reopening the ledger; after every step the incremental
figure must equal the walk of system + live messages (read by id, not through the
cached view) + tools schema.
"""

from __future__ import annotations

import gc
import tempfile
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from helpers import strategies as S
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import ctxledger.projections.roughsum as roughsum
from ctxledger.clock import SequentialIds, StepClock
from ctxledger.compressor.config import CompressionConfig
from ctxledger.events import SystemPromptSet, ToolOutputPersisted
from ctxledger.ledger.facade import Ledger
from ctxledger.projections.transcript import TranscriptProjection
from ctxledger.runtime.service import ContextService
from ctxledger.tokens import rough_message_tokens, rough_tools_tokens

CONFIG = CompressionConfig(threshold_floor_tokens=0, summary_min_tokens=300, estimator="rough")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "terminal",
            "description": "Run a shell command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]


def whole_walk(ledger: Ledger, sid: str) -> int:
    """The estimate as a walk of the session read by id (never the cached view)."""
    transcript = ledger.transcript
    view = transcript.session(sid)
    messages = transcript.live_messages(sid)
    if view.system_prompt is not None:
        messages = [{"role": "system", "content": view.system_prompt}, *messages]
    return sum(rough_message_tokens(m) for m in messages) + rough_tools_tokens(view.tools)


class RoughMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._dir = tempfile.TemporaryDirectory()
        self.db = Path(self._dir.name) / "ledger.db"
        self._portal_cm = start_blocking_portal()
        self.portal: BlockingPortal = self._portal_cm.__enter__()
        self.opened = 0
        self.svc = self._open()
        self.root = ""
        self.batches = 0
        self.writers = 0

    def _open(self) -> ContextService:
        self.opened += 1
        ledger = Ledger.open(
            self.db,
            clock=StepClock(),
            ids=SequentialIds(f"o{self.opened}x"),
            config=CONFIG,
            durability="normal",
        )
        return ContextService(ledger, config=CONFIG)

    def teardown(self) -> None:
        if self.root:  # shown by --hypothesis-show-statistics: the runs must reach compactions
            event(f"compactions: {min(self.svc.ledger.chains.compression_count(self.tip), 2)}")
        self.svc.ledger.close()
        self._portal_cm.__exit__(None, None, None)
        self._dir.cleanup()

    @property
    def tip(self) -> str:
        return self.svc.tip(self.root)

    @initialize(
        window=st.sampled_from([4_096, 8_192]),
        system=st.booleans(),
        tools=st.booleans(),
        history=S.turns(id_prefix="h", min_turns=1, max_turns=6),
    )
    def start(self, window: int, system: bool, tools: bool, history: list[Any]) -> None:
        self.root = self.portal.call(
            lambda: self.svc.start_session(
                model="test-model",
                context_length=window,
                system_prompt="You are a coding agent." if system else None,
                tools=TOOLS if tools else None,
            )
        )
        self.portal.call(self.svc.append, self.root, history)

    @rule(data=st.data())
    def append_turns(self, data: st.DataObject) -> None:
        self.batches += 1
        turns = data.draw(S.turns(id_prefix=f"b{self.batches}", max_turns=2))
        self.portal.call(self.svc.append, self.root, turns)

    @rule(chars=st.sampled_from([300, 9_000, 40_000]))
    def tool_result(self, chars: int) -> None:
        """A result over the tool-output budget (8,000 characters at these windows) is
        stored out of the context: the cached view shows its replacement in place."""
        self.batches += 1
        cid = f"t{self.batches}"
        call = {"id": cid, "type": "function"}
        call["function"] = {"name": "terminal", "arguments": '{"command": "cat big.log"}'}
        batch = [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": cid, "content": "log line\n" * (chars // 9)},
        ]
        self.portal.call(self.svc.append, self.root, batch)

    @rule()
    def response_without_usage(self) -> None:
        self.portal.call(self.svc.report_usage, self.root, {})

    @rule()
    def preflight(self) -> None:
        self.portal.call(self.svc.preflight, self.root)

    @rule()
    def manual_compress(self) -> None:
        self.portal.call(self.svc.compress, self.root, None)

    @rule(window=st.sampled_from([4_096, 16_384]))
    def switch_model(self, window: int) -> None:
        self.portal.call(self.svc.switch_model, self.root, "other-model", window)

    @rule()
    def another_writer_appends(self) -> None:
        """A message appended through a second ledger, folded by this one's refresh."""
        self.writers += 1
        ids = SequentialIds(f"w{self.writers}x")
        other = Ledger.open(self.db, clock=StepClock(), ids=ids, config=CONFIG)
        try:
            other.append_messages(self.tip, [{"role": "user", "content": "and the docs?"}])
        finally:
            other.close()
        self.svc.ledger.refresh()

    @rule()
    def reopen(self) -> None:
        self.svc.ledger.close()
        self.svc = self._open()

    @invariant()
    def incremental_equals_the_walk(self) -> None:
        if not self.root:
            return
        tip = self.tip
        expected = whole_walk(self.svc.ledger, tip)
        assert self.svc.ledger.transcript.rough_tokens(tip) == expected
        assert self.svc._estimate(tip) == expected


RoughMachine.TestCase.settings = settings(RoughMachine.TestCase.settings, stateful_step_count=25)
TestRoughEstimate = RoughMachine.TestCase


def test_a_read_after_an_append_sums_only_the_appended_messages(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The fix itself: after the first read, a read sums what was appended since (the
    whole view was walked on every preflight and every response without usage)."""
    counted: list[int] = []

    def counting(message: Any) -> int:
        counted.append(1)
        return rough_message_tokens(message)

    monkeypatch.setattr(roughsum, "rough_message_tokens", counting)
    ledger = Ledger.open(tmp_path / "l.db", clock=StepClock(), ids=SequentialIds(), config=CONFIG)
    try:
        sid = ledger.start_session(model="m", context_length=200_000, system_prompt="sys")
        ledger.append_messages(
            sid,
            [
                {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"}
                for i in range(400)
            ],
        )
        first = ledger.transcript.rough_tokens(sid)
        assert len(counted) == 401  # the system prompt and 400 messages, once
        ledger.append_messages(sid, [{"role": "user", "content": "one more " * 40}])
        second = ledger.transcript.rough_tokens(sid)
        assert len(counted) == 402
        assert second - first == rough_message_tokens({"role": "user", "content": "one more " * 40})
        assert second == whole_walk(ledger, sid)
    finally:
        ledger.close()


def test_an_output_shown_in_place_after_it_was_summed_is_counted_as_shown(tmp_path: Path) -> None:
    """A ``ToolOutputPersisted`` naming a message already summed (the ledger writes it in
    the message's own append, so only a fold of another tool's log meets this) replaces
    that message's figure in the running sum."""
    ledger = Ledger.open(tmp_path / "l.db", clock=StepClock(), ids=SequentialIds(), config=CONFIG)
    try:
        sid = ledger.start_session(model="m", context_length=200_000, system_prompt="sys")
        call = {"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}
        ids = ledger.append_messages(
            sid,
            [
                {"role": "user", "content": "show me the log"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "log line\n" * 2_000},
                {"role": "assistant", "content": "It is long."},
            ],
        )
        fold = TranscriptProjection()
        for r in ledger.store.read_all():
            fold.apply(r.seq, r.event, r.version)
        before = fold.rough_tokens(sid)
        assert before == whole_walk(ledger, sid)
        shown = ToolOutputPersisted(
            **ledger.event_fields(sid),
            message_id=ids[2],
            tool_call_id="c1",
            tool_name="terminal",
            blob_ref="blob:0",
            chars=18_000,
            replacement="[stored outside the context]",
            replacement_tokens=12,
        )
        fold.apply(ledger.store.last_seq() + 1, shown)
        stored = {"role": "tool", "tool_call_id": "c1", "content": "log line\n" * 2_000}
        replaced = {**stored, "content": "[stored outside the context]"}
        assert fold.rough_tokens(sid) == (
            before - rough_message_tokens(stored) + rough_message_tokens(replaced)
        )
        assert fold.rough_tokens(sid) == sum(
            rough_message_tokens(m) for m in fold.api_messages(sid)
        )
    finally:
        ledger.close()


def test_a_view_built_anew_is_summed_anew(tmp_path: Path) -> None:
    """A system prompt set again (only in a log written by another tool) drops the cached
    view; the sum of the old list is not carried over to the new one."""
    ledger = Ledger.open(tmp_path / "l.db", clock=StepClock(), ids=SequentialIds(), config=CONFIG)
    try:
        sid = ledger.start_session(model="m", context_length=200_000, system_prompt="short")
        ledger.append_messages(sid, [{"role": "user", "content": "hello there"}])
        fold = TranscriptProjection()
        for r in ledger.store.read_all():
            fold.apply(r.seq, r.event, r.version)
        before = fold.rough_tokens(sid)
        longer = "a much longer system prompt " * 50
        event = SystemPromptSet(**ledger.event_fields(sid), text=longer, tokens=300)
        fold.apply(ledger.store.last_seq() + 1, event)
        after = fold.rough_tokens(sid)
        assert after == sum(rough_message_tokens(m) for m in fold.api_messages(sid))
        assert after - before == len(longer) // 4 - len("short") // 4
    finally:
        ledger.close()


def test_a_view_the_projection_let_go_is_not_kept_alive_by_its_sum(tmp_path: Path) -> None:
    """Review of session 31: each running sum held the list it summed, so a view the
    projection dropped (evicted, or rebuilt after a change) stayed in memory. When a new
    list is summed, the sums of lists no longer cached go."""
    ledger = Ledger.open(tmp_path / "l.db", clock=StepClock(), ids=SequentialIds(), config=CONFIG)
    try:
        first = ledger.start_session(model="m", context_length=200_000, system_prompt="short")
        ledger.append_messages(first, [{"role": "user", "content": "hello there " * 40}])
        other = ledger.start_session(model="m", context_length=200_000, system_prompt="s")
        ledger.append_messages(other, [{"role": "user", "content": "hi"}])
        fold = TranscriptProjection()
        for r in ledger.store.read_all():
            fold.apply(r.seq, r.event, r.version)
        fold.rough_tokens(first)
        old = fold.api_view(first)
        event = SystemPromptSet(**ledger.event_fields(first), text="another prompt", tokens=3)
        fold.apply(ledger.store.last_seq() + 1, event)  # the projection drops that view
        total = fold.rough_tokens(other)  # a new list summed
        assert total == sum(rough_message_tokens(m) for m in fold.api_messages(other))
        holders = [r for r in gc.get_referrers(old) if isinstance(r, roughsum._Sum)]
        assert holders == []
        assert fold.rough_tokens(first) == sum(
            rough_message_tokens(m) for m in fold.api_messages(first)
        )
    finally:
        ledger.close()
