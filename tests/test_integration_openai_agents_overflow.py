"""CtxLedgerModel: an Agents SDK model call recovered from the provider's overflow error
on a CtxLedgerSession, as the proxy does. The wrapped model raises the real ``openai`` /
``anthropic`` SDK's exception; the Runner is the real one."""

# ruff: noqa: E402  (the framework imports follow the require() that fails or skips without it)
from __future__ import annotations

import copy
import json
import os
from typing import Any

import anyio
import pytest
from helpers.frameworks import require

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
require("agents", "agents")
require("openai", "openai")
require("anthropic", "anthropic")
import anthropic
import openai
from agents import Agent, ModelSettings, RunConfig, Runner, function_tool
from agents.memory import SessionSettings
from agents.models.interface import Model
from agents.run_config import ModelInputData
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.usage import Usage
from helpers.provider_errors import ANTHROPIC_TOO_LONG, OPENAI_TOO_LONG, OUTPUT_CAP, raise_from_sdk

from ctxledger import CompressionConfig, ContextService, Ledger
from ctxledger.errors import ContextOverflowError
from ctxledger.events import CompressionChecked, CompressionSkipped, ContextLimitLearned
from ctxledger.integrations.common import live_messages
from ctxledger.integrations.openai_agents import CtxLedgerSession
from ctxledger.integrations.openai_agents_model import CtxLedgerModel, replace_compacted
from ctxledger.integrations.responses import messages_to_items

CONFIG = CompressionConfig(
    threshold_floor_tokens=0, context_length=8_000, protect_last_n=4, tail_min_messages=4
)


@function_tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return f"contents of {path}: " + "lorem ipsum dolor " * 150


def _script(turns: int, usage: Usage | None = None) -> ScriptedModel:
    if usage is None:
        usage = Usage(requests=1, input_tokens=2_000, output_tokens=12, total_tokens=2_012)
    steps = []
    for t in range(turns):
        call = function_call("read_file", {"path": f"src/m{t}.py"}, call_id=f"call_{t}")
        steps.append(ModelStep(output=[call], usage=usage))
        steps.append(ModelStep(output=[assistant_message(f"m{t} reviewed")], usage=usage))
    return ScriptedModel(steps)


class FlakyModel(Model):
    """The scripted model, except the calls numbered in `failures`: those raise the
    provider SDK's error (the script's step is kept for the next call)."""

    def __init__(self, turns: int, failures: dict[int, Any], session: CtxLedgerSession) -> None:
        self.inner = _script(turns)
        self.failures = failures
        self.session = session
        self.sent: list[Any] = []
        self.views: list[Any] = []
        self.caps: list[Any] = []

    def _call(self, input: Any, settings: ModelSettings) -> None:
        self.sent.append(copy.deepcopy(input))
        self.caps.append(settings.max_tokens)
        sid = self.session.ledger_session_id()
        self.views.append(live_messages(self.session.service, sid) if sid else [])
        if len(self.sent) in self.failures:
            raise_from_sdk(*self.failures[len(self.sent)])

    async def get_response(self, system_instructions, input, model_settings, *args, **kw):
        self._call(input, model_settings)
        return await self.inner.get_response(
            system_instructions, input, model_settings, *args, **kw
        )

    async def stream_response(self, system_instructions, input, model_settings, *args, **kw):
        self._call(input, model_settings)
        async for event in self.inner.stream_response(
            system_instructions, input, model_settings, *args, **kw
        ):
            yield event


@pytest.fixture
def service(tmp_path):
    svc = ContextService(Ledger.open(tmp_path / "agents.ledger.db", config=CONFIG), config=CONFIG)
    yield svc
    svc.ledger.close()


def _events(svc: ContextService, kind: type) -> list[Any]:
    return [r.event for r in svc.ledger.store.read_all() if isinstance(r.event, kind)]


def _ask(t: int) -> str:
    return f"turn {t}: review src/m{t}.py " + "now " * 60


def _run(
    session: CtxLedgerSession,
    model: FlakyModel,
    turns: range,
    *,
    streamed: bool = False,
    wrap: bool = True,
    run_config: RunConfig | None = None,
    **agent: Any,
) -> None:
    wrapped = CtxLedgerModel(model, session) if wrap else model
    reviewer = Agent(
        name="reviewer", instructions="Review.", model=wrapped, tools=[read_file], **agent
    )

    async def go() -> None:
        for t in turns:
            if streamed:
                result = Runner.run_streamed(
                    reviewer, _ask(t), session=session, run_config=run_config
                )
                async for _ in result.stream_events():
                    pass
            else:
                result = await Runner.run(reviewer, _ask(t), session=session, run_config=run_config)
            assert result.final_output == f"m{t} reviewed"

    anyio.run(go)


def _plain(items: Any) -> str:
    return json.dumps(items, sort_keys=True, default=str)


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("failure", [OPENAI_TOO_LONG, ANTHROPIC_TOO_LONG])
def test_a_prompt_too_long_compacts_and_the_call_is_retried_on_the_compacted_view(
    service, failure, streamed
):
    session = CtxLedgerSession("chat", service, model="scripted", context_length=8_000)
    model = FlakyModel(4, {7: failure}, session)
    _run(session, model, range(4), streamed=streamed)
    assert len(model.sent) == 9
    assert [e.trigger for e in _events(service, CompressionChecked)].count("overflow") == 1
    learned = [e.context_length for e in _events(service, ContextLimitLearned)]
    assert learned == ([4096] if failure is OPENAI_TOO_LONG else [])
    failed, retried = model.sent[6], model.sent[7]
    assert len(retried) < len(failed)
    # the retry was sent the compacted view the ledger holds at that moment, whole
    assert _plain(retried) == _plain(messages_to_items(model.views[7]))
    assert _plain(failed) == _plain(messages_to_items(model.views[6]))  # (before: the whole)
    # the run's next call (after the tool) is sent the compacted view and the tool's
    # items, not the Runner's whole history again
    assert _plain(model.sent[8]) == _plain(messages_to_items(model.views[8]))
    assert len(model.sent[8]) < len(failed)
    view = live_messages(service, session.ledger_session_id())
    assert [m.get("content") for m in view].count("m3 reviewed") == 1
    assert service.ledger.verify().ok


def test_an_output_cap_error_lowers_max_tokens_and_compacts_nothing(service):
    session = CtxLedgerSession("chat", service, model="scripted", context_length=8_000)
    model = FlakyModel(1, {1: OUTPUT_CAP}, session)
    _run(session, model, range(1), model_settings=ModelSettings(max_tokens=4096))
    assert model.caps[:3] == [4096, 1000, 4096]  # lowered for the refused call only
    assert _plain(model.sent[0]) == _plain(model.sent[1])
    assert _events(service, CompressionChecked) == []
    assert [e.details["max_tokens"] for e in _events(service, CompressionSkipped)] == [1000]


def test_a_never_clearing_overflow_ends_with_a_clear_error_and_nothing_half_appended(service):
    session = CtxLedgerSession("chat", service, model="scripted", context_length=8_000)
    model = FlakyModel(4, {n: ANTHROPIC_TOO_LONG for n in range(7, 40)}, session)
    _run(session, model, range(3))
    with pytest.raises(ContextOverflowError) as raised:
        _run(session, model, range(3, 4))
    assert isinstance(raised.value.__cause__, anthropic.BadRequestError)
    assert "Start a new session" in str(raised.value)
    assert 7 < len(model.sent) <= 6 + CONFIG.max_compression_attempts
    view = live_messages(service, session.ledger_session_id())
    assert view[-1]["role"] == "user" and view[-1]["content"].startswith("turn 3")
    assert service.ledger.verify().ok


def test_what_the_compactions_removed_is_replaced_and_nothing_else():
    """The pure merge: the SDK's input keeps every message the compactions did not remove
    (one a filter changed, the run's own), gets the summary where the removed ones were,
    and gets back nothing the SDK's shaping left out."""

    def user(text: str) -> dict[str, Any]:
        return {"role": "user", "content": text}

    head, gone, tail, new = user("head"), [user("g1"), user("g2")], user("tail"), user("new")
    summary = user("[summary]")
    old = [[head, *gone, tail]]
    held = [head, summary, tail, new]
    assert replace_compacted([head, *gone, tail, new], old, held) == held
    redacted = user("[REDACTED]")  # a filter's: kept as it is, where it is
    assert replace_compacted([redacted, *gone, tail, new], old, held) == [
        redacted,
        summary,
        tail,
        new,
    ]
    # a limit left only the tail: nothing compacted in the input, nothing added back
    assert replace_compacted([tail, new], old, held) is None
    assert replace_compacted([gone[1], tail, new], old, held) == [summary, tail, new]


def test_the_wrapper_passes_on_the_models_retry_advice_and_cleanup(service):
    session = CtxLedgerSession("chat", service)
    inner = FlakyModel(1, {}, session)
    seen: list[Any] = []
    inner.get_retry_advice = lambda request: ("advice", request)  # type: ignore[method-assign]

    async def cleanup(owner: object) -> None:
        seen.append(owner)

    inner._cleanup_on_run_end = cleanup  # type: ignore[method-assign]
    wrapped = CtxLedgerModel(inner, session)
    assert wrapped.get_retry_advice("r") == ("advice", "r")
    anyio.run(wrapped._cleanup_on_run_end, "run")
    assert seen == ["run"]


def _redact_turn_0(data: Any) -> ModelInputData:
    """A ``call_model_input_filter``: the first ask is never sent as it was."""
    items = [
        dict(i, content="[REDACTED]") if str(i.get("content")).startswith("turn 0") else i
        for i in data.model_data.input
    ]
    return ModelInputData(input=items, instructions=data.model_data.instructions)


@pytest.mark.parametrize("shaping", ["filter", "limit"])
def test_with_nothing_compacted_every_call_is_sent_what_the_sdk_built(tmp_path, shaping):
    """A ``call_model_input_filter`` (a redaction) and ``SessionSettings(limit=)`` shape
    the input; with no overflow the wrapper sends exactly that, as the plain model is
    sent (before: any input that was not the ledger's view became the whole view, the
    secret and the history the limit left out included)."""
    sent = []
    for wrap in (False, True):
        svc = ContextService(Ledger.open(tmp_path / f"{wrap}.db", config=CONFIG), config=CONFIG)
        settings = SessionSettings(limit=3) if shaping == "limit" else None
        session = CtxLedgerSession("chat", svc, context_length=8_000, session_settings=settings)
        model = FlakyModel(3, {}, session)
        config = RunConfig(call_model_input_filter=_redact_turn_0) if shaping == "filter" else None
        _run(session, model, range(3), wrap=wrap, run_config=config)
        sent.append([_plain(i) for i in model.sent])
        svc.ledger.close()
    assert sent[1] == sent[0]
    assert len(sent[1]) == 6


def test_after_a_compaction_mid_run_a_filtered_message_stays_filtered(service):
    """A compaction mid-run (the provider refused call 7): that call's retry and the
    run's next call are sent the compacted view, but a message the compaction kept and
    the filter changed goes as the filter made it (before: the ledger's whole view,
    the first ask unredacted)."""
    session = CtxLedgerSession("chat", service, model="scripted", context_length=8_000)
    model = FlakyModel(4, {7: OPENAI_TOO_LONG}, session)
    _run(session, model, range(4), run_config=RunConfig(call_model_input_filter=_redact_turn_0))
    assert len(model.sent) == 9
    for items in model.sent:
        assert not any(str(i.get("content")).startswith("turn 0") for i in items)
    assert "[REDACTED]" in _plain(model.sent[8])
    assert "handoff summary" in _plain(model.sent[7]) and "handoff summary" in _plain(model.sent[8])
    assert len(model.sent[8]) < len(model.sent[6])


class Canned(Model):
    """Answers "Hello! How can I help?" to "hello", "noted" to anything else."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.refuse: set[int] = set()

    async def get_response(self, system_instructions, input, model_settings, *args, **kw):
        self.sent.append(copy.deepcopy(input))
        if len(self.sent) in self.refuse:
            raise_from_sdk(*OPENAI_TOO_LONG)
        last = input[-1]["content"] if isinstance(input, list) else input
        text = "Hello! How can I help?" if last == "hello" else "noted"
        step = ModelStep(output=[assistant_message(text)], usage=Usage())
        return await ScriptedModel([step]).get_response(
            system_instructions, input, model_settings, *args, **kw
        )

    async def stream_response(self, *args: Any, **kw: Any) -> Any:
        raise NotImplementedError
        yield


def _contents(items: Any) -> list[str]:
    texts = []
    for item in items:
        content = item.get("content")
        texts.append(content if isinstance(content, str) else content[0]["text"])
    return texts


@pytest.mark.parametrize("bound", [True, False])
def test_one_agent_serving_two_sessions_sends_each_run_its_own_history(service, bound):
    """One agent (one wrapper) serves Alice's and Bob's sessions; their conversations
    share a message. Bob's calls are sent Bob's history only (before: a wrapper bound to
    Alice's session sent Bob Alice's whole view, her card number included)."""
    alice, bob = CtxLedgerSession("alice", service), CtxLedgerSession("bob", service)
    inner = Canned()
    agent = Agent(
        name="a", instructions="Hi.", model=CtxLedgerModel(inner, alice if bound else None)
    )

    async def go() -> None:
        for ask in ("my card number is 4111-1111-1111-1111", "hello"):
            await Runner.run(agent, ask, session=alice)
        for ask in ("hello", "what is my balance?"):
            await Runner.run(agent, ask, session=bob)

    anyio.run(go)
    assert _contents(inner.sent[-1]) == ["hello", "Hello! How can I help?", "what is my balance?"]
    assert not any("4111" in _plain(items) for items in inner.sent[2:])


def test_an_overflow_in_a_run_of_no_ledger_session_compacts_no_session(service):
    """A run with no session after a run of Alice's in the same task (her read is still in
    the task's context): its overflow is the provider's error, and Alice's session is not
    compacted for it."""
    alice = CtxLedgerSession("alice", service)
    inner = Canned()
    agent = Agent(name="a", instructions="Hi.", model=CtxLedgerModel(inner))
    inner.refuse = {3}

    async def go() -> None:
        await Runner.run(agent, "hello", session=alice)
        await Runner.run(agent, "hello", session=alice)
        await Runner.run(agent, "hello")

    with pytest.raises(openai.BadRequestError):
        anyio.run(go)
    assert _events(service, CompressionChecked) == []


def test_turns_each_recovering_once_all_go_through_when_no_usage_is_reported(service):
    """Every turn's first call from the fourth turn on is refused once; the SDK records
    no usage of these calls (``Usage()``). Each turn recovers and none counts against
    the next (before: the fourth recovery failed with ContextOverflowError)."""
    session = CtxLedgerSession("chat", service, model="scripted", context_length=8_000)
    turns = 7
    failures = {7 + 3 * (t - 3): OPENAI_TOO_LONG for t in range(3, turns)}
    model = FlakyModel(turns, failures, session)
    model.inner = _script(turns, Usage())  # the SDK's "no usage" (all zero)
    _run(session, model, range(turns))
    assert len(model.sent) == 2 * turns + len(failures)
    overflow = [e for e in _events(service, CompressionChecked) if e.trigger == "overflow"]
    assert len(overflow) == len(failures) > CONFIG.max_compression_attempts
