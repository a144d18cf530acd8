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
from agents import Agent, ModelSettings, Runner, function_tool
from agents.models.interface import Model
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.usage import Usage
from helpers.provider_errors import ANTHROPIC_TOO_LONG, OPENAI_TOO_LONG, OUTPUT_CAP, raise_from_sdk

from ctxledger import CompressionConfig, ContextService, Ledger
from ctxledger.errors import ContextOverflowError
from ctxledger.events import CompressionChecked, CompressionSkipped, ContextLimitLearned
from ctxledger.integrations.common import live_messages
from ctxledger.integrations.openai_agents import CtxLedgerSession
from ctxledger.integrations.openai_agents_model import CtxLedgerModel
from ctxledger.integrations.responses import messages_to_items

CONFIG = CompressionConfig(
    threshold_floor_tokens=0, context_length=8_000, protect_last_n=4, tail_min_messages=4
)


@function_tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return f"contents of {path}: " + "lorem ipsum dolor " * 150


def _script(turns: int) -> ScriptedModel:
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
    **agent: Any,
) -> None:
    wrapped = CtxLedgerModel(model, session)
    reviewer = Agent(
        name="reviewer", instructions="Review.", model=wrapped, tools=[read_file], **agent
    )

    async def go() -> None:
        for t in turns:
            if streamed:
                result = Runner.run_streamed(reviewer, _ask(t), session=session)
                async for _ in result.stream_events():
                    pass
            else:
                result = await Runner.run(reviewer, _ask(t), session=session)
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


def test_what_the_ledger_does_not_hold_yet_is_found_after_its_last_message():
    from ctxledger.integrations.openai_agents_model import _unsaved

    held = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    later = [{"role": "user", "content": "c"}]
    assert _unsaved([*held, *later], held) == later
    assert _unsaved(held, held) == []
    assert _unsaved(later, []) == later
    assert _unsaved(later, held) is None  # no place to cut: the error is raised as it was


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
