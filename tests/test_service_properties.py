"""The service's transcript keeps the compressor's invariants across random event sequences.

A hypothesis state machine drives one session chain through random appends (whole
turns, a call left in flight and answered later), usage reports, preflight, hygiene,
manual compression with and without a focus, model switches, provider errors and
reopening the ledger, with summarizer failures (aborting and falling back) and the
clock moving through cooldowns. After every step:

* the tip's API view has no orphan tool result and no call without a result, except
  the calls of a final in-flight assistant message;
* the latest user message comes after any summary;
* exactly one session of the chain is live, the tip;
* the projection rebuilt from scratch equals the live one (and the service's cached
  view equals the rebuilt view); the runtime state folded from scratch equals the
  incrementally folded one;
* every appended message is still retrievable by id, exactly as appended.
"""

from __future__ import annotations

import contextlib
import copy
import tempfile
from pathlib import Path
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal
from helpers import strategies as S
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from ctxledger.clock import SequentialIds
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.errors import ContextOverflowError, SummarizerError
from ctxledger.ledger.facade import Ledger
from ctxledger.projections import Projector
from ctxledger.runtime.engine import RuntimeTracker
from ctxledger.runtime.service import ContextService

CONFIG = CompressionConfig(threshold_floor_tokens=0, summary_min_tokens=300)
WINDOWS = st.sampled_from([4_096, 8_192, 16_384])

#: provider error bodies in the shapes real providers use
ERRORS: dict[str, tuple[int, Any]] = {
    "prompt_too_long": (
        400,
        {
            "error": {
                "message": "This model's maximum context length is 3000 tokens. However, your messages resulted in 9000 tokens.",
                "code": "context_length_exceeded",
            }
        },
    ),
    "payload_too_large": (
        413,
        {
            "error": {
                "type": "request_too_large",
                "message": "request exceeds the maximum allowed size",
            }
        },
    ),
    "max_tokens": (
        400,
        {
            "error": {
                "message": "max_tokens is too large: input length plus max_tokens exceeds the context window; available_tokens: 900"
            }
        },
    ),
    "server": (500, {"error": {"type": "api_error", "message": "internal server error"}}),
}


class ManualClock:
    def __init__(self, now: float = 1_767_225_600.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class ArmedSummarizer:
    """The offline summarizer, failing once with a chosen class when armed."""

    kind = "armed"

    def __init__(self) -> None:
        self.failure: str | None = None
        self.inner = OfflineSummarizer()

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        failure, self.failure = self.failure, None
        if failure is not None:
            raise SummarizerError(f"armed {failure} failure", failure_class=failure)
        return await self.inner.summarize(request)


class ServiceMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.summarizer = ArmedSummarizer()
        self._dir = tempfile.TemporaryDirectory()
        self.db = Path(self._dir.name) / "ledger.db"
        self._portal_cm = start_blocking_portal()
        self.portal: BlockingPortal = self._portal_cm.__enter__()
        self.opened = 0
        self.svc = self._open()
        self.root = ""
        self.appended: dict[str, dict[str, Any]] = {}
        self.in_flight: list[str] = []
        self.batches = 0

    def _open(self) -> ContextService:
        self.opened += 1
        ledger = Ledger.open(
            self.db,
            clock=self.clock,
            ids=SequentialIds(f"o{self.opened}x"),
            config=CONFIG,
            durability="normal",
        )
        return ContextService(ledger, config=CONFIG, summarizer=self.summarizer)

    def teardown(self) -> None:
        if self.root:  # shown by --hypothesis-show-statistics: the runs must reach compactions
            compactions = self.svc.ledger.chains.compression_count(self.tip)
            event(f"compactions: {min(compactions, 3)}{'+' if compactions >= 3 else ''}")
        self.svc.ledger.close()
        self._portal_cm.__exit__(None, None, None)
        self._dir.cleanup()

    @property
    def tip(self) -> str:
        return self.svc.tip(self.root)

    def _append(self, messages: list[dict[str, Any]]) -> None:
        result = self.portal.call(self.svc.append, self.root, messages)
        for mid, message in zip(result.message_ids, messages, strict=True):
            self.appended[mid] = copy.deepcopy(message)

    # --- rules ------------------------------------------------------------------------------

    @initialize(
        window=WINDOWS,
        system=st.booleans(),
        history=S.turns(id_prefix="h", min_turns=2, max_turns=8),
    )
    def start(self, window: int, system: bool, history: list[dict[str, Any]]) -> None:
        prompt = (
            "You are a coding agent. Run the tests before you say something is fixed."
            if system
            else None
        )
        self.root = self.portal.call(
            lambda: self.svc.start_session(
                model="test-model", context_length=window, system_prompt=prompt
            )
        )
        self._append(history)  # a session with some history, so that compactions come early

    @precondition(lambda self: not self.in_flight)
    @rule(data=st.data())
    def append_turns(self, data: st.DataObject) -> None:
        self.batches += 1
        self._append(data.draw(S.turns(id_prefix=f"b{self.batches}", max_turns=3)))

    @precondition(lambda self: not self.in_flight)
    @rule(n_calls=st.integers(1, 2))
    def call_in_flight(self, n_calls: int) -> None:
        self.batches += 1
        ids = [f"f{self.batches}_{i}" for i in range(n_calls)]
        calls = [
            {
                "id": cid,
                "type": "function",
                "function": {"name": "terminal", "arguments": '{"command": "make test"}'},
            }
            for cid in ids
        ]
        self._append(
            [
                {"role": "user", "content": "run the tests once more"},
                {"role": "assistant", "content": None, "tool_calls": calls},
            ]
        )
        self.in_flight = ids

    @precondition(lambda self: bool(self.in_flight))
    @rule(reply=st.booleans())
    def answer_in_flight(self, reply: bool) -> None:
        results: list[dict[str, Any]] = [
            {"role": "tool", "tool_call_id": cid, "content": "12 passed, 0 failed"}
            for cid in self.in_flight
        ]
        if reply:
            results.append({"role": "assistant", "content": "All tests pass."})
        self._append(results)
        self.in_flight = []

    @rule(share=st.floats(0.0, 1.6))
    def report_usage(self, share: float) -> None:
        threshold = self.svc.status(self.root)["threshold_tokens"]
        prompt = int(threshold * share)
        raw = {
            "prompt_tokens": prompt,
            "completion_tokens": 30,
            "prompt_tokens_details": {"cached_tokens": prompt // 2},
        }
        self.portal.call(self.svc.report_usage, self.root, raw)

    @rule()
    def preflight(self) -> None:
        self.portal.call(self.svc.preflight, self.root)

    @rule()
    def hygiene(self) -> None:
        self.portal.call(self.svc.hygiene, self.root)

    @rule(focus=st.sampled_from([None, "tests", "the deploy"]))
    def manual_compress(self, focus: str | None) -> None:
        self.portal.call(self.svc.compress, self.root, focus)

    @rule(window=WINDOWS)
    def switch_model(self, window: int) -> None:
        self.portal.call(self.svc.switch_model, self.root, "other-model", window)

    @rule(kind=st.sampled_from(sorted(ERRORS)))
    def provider_error(self, kind: str) -> None:
        status, body = ERRORS[kind]
        with contextlib.suppress(
            ContextOverflowError
        ):  # recovery gave up: legitimate, and recorded
            self.portal.call(
                lambda: self.svc.handle_provider_error(
                    self.root, status, body, requested_max_tokens=4_000
                )
            )

    @rule(failure=st.sampled_from(["auth", "network", "server", "timeout", "malformed"]))
    def summarizer_fails_next(self, failure: str) -> None:
        self.summarizer.failure = failure  # auth/network abort; the others fall back

    @rule(seconds=st.sampled_from([10, 45, 700]))
    def time_passes(self, seconds: int) -> None:
        self.clock.now += seconds

    @rule()
    def reopen(self) -> None:
        before = self.svc.tracker.state(self.tip)
        self.svc.ledger.close()
        self.svc = self._open()
        assert self.svc.tracker.state(self.tip) == before

    # --- invariants ----------------------------------------------------------------------------

    @invariant()
    def no_orphans_and_no_unanswered_calls(self) -> None:
        if not self.root:
            return
        messages = self.svc.api_messages(self.root, cache=False)
        issued: set[str] = set()
        answered: set[str] = set()
        for message in messages:
            if message["role"] == "assistant":
                issued.update(c["id"] for c in message.get("tool_calls") or ())
            elif message["role"] == "tool":
                assert message["tool_call_id"] in issued, f"orphan result {message['tool_call_id']}"
                answered.add(message["tool_call_id"])
        last = messages[-1] if messages else {}
        final_calls = (
            {c["id"] for c in last.get("tool_calls") or ()}
            if last.get("role") == "assistant"
            else set()
        )
        assert issued - answered <= final_calls, (
            f"calls without a result: {issued - answered - final_calls}"
        )
        assert issued - answered <= set(self.in_flight)

    @invariant()
    def latest_user_message_after_any_summary(self) -> None:
        if not self.root:
            return
        transcript = self.svc.ledger.transcript
        stored = [transcript.stored(mid) for mid in transcript.session(self.tip).live]
        summaries = [i for i, m in enumerate(stored) if m.origin in ("summary", "merged")]
        users = [
            i for i, m in enumerate(stored) if m.message["role"] == "user" and m.origin != "summary"
        ]
        if summaries and users:
            assert max(users) >= max(summaries)

    @invariant()
    def one_live_session_the_tip(self) -> None:
        if not self.root:
            return
        chain = self.svc.ledger.chains.chain(self.root)
        live = [sid for sid in chain if not self.svc.ledger.transcript.session(sid).ended]
        assert live == [chain[-1]] == [self.tip]

    @invariant()
    def rebuilt_projection_equals_the_live_one(self) -> None:
        if not self.root:
            return
        ledger = self.svc.ledger
        fresh = Projector.rebuild(ledger.store, use_checkpoint=False)
        assert fresh.fingerprint() == ledger.projector.fingerprint()
        assert fresh.transcript.api_messages(self.tip) == self.svc.api_messages(
            self.root, cache=False
        )
        assert RuntimeTracker(ledger, CONFIG).state(self.tip) == self.svc.tracker.state(self.tip)

    @invariant()
    def every_appended_message_is_retrievable(self) -> None:
        for mid, message in self.appended.items():
            assert self.svc.ledger.transcript.original(mid) == message


ServiceMachine.TestCase.settings = settings(
    settings.default,
    max_examples=max(8, settings.default.max_examples // 3),
    stateful_step_count=25,
)
TestServiceMachine = ServiceMachine.TestCase
