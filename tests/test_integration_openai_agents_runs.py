"""Agents SDK runs that end in an error after a model call (an output guardrail's trip),
on a ``CtxLedgerSession``: the usage of every request the model answered reaches the
ledger, once (real Runner, scripted model, offline)."""

from __future__ import annotations

import asyncio
import functools
import gc
import os
import types
import weakref
from typing import Any

import anyio
import msgspec
import pytest
from helpers.frameworks import require

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
require("agents", "agents")
from agents import (  # noqa: E402
    Agent,
    GuardrailFunctionOutput,
    Runner,
    RunState,
    function_tool,
    output_guardrail,
)
from agents.exceptions import OutputGuardrailTripwireTriggered  # noqa: E402
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call  # noqa: E402
from agents.usage import Usage  # noqa: E402

from ctxledger import CompressionConfig, ContextService, Ledger  # noqa: E402
from ctxledger.compressor.summarizers.offline import OfflineSummarizer  # noqa: E402
from ctxledger.events import (  # noqa: E402
    CompressionChecked,
    CompressionSkipped,
    PressureWarning,
    SessionSwitched,
    SummaryGenerated,
    UsageReported,
)
from ctxledger.integrations.openai_agents import CtxLedgerSession  # noqa: E402
from ctxledger.integrations.openai_agents_hooks import CtxLedgerRunHooks  # noqa: E402
from ctxledger.usage import CanonicalUsage  # noqa: E402

CONFIG = CompressionConfig(threshold_floor_tokens=0, context_length=16_000)


@function_tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"{key} = 42"


@function_tool(needs_approval=True)
def delete(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


@output_guardrail
async def no_numbers(context: Any, agent: Any, output: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered="42" in str(output))


@pytest.fixture
def service(tmp_path):
    svc = ContextService(Ledger.open(tmp_path / "agents.db", config=CONFIG), config=CONFIG)
    yield svc
    svc.ledger.close()


def _step(output: Any, tokens: int) -> ModelStep:
    usage = Usage(requests=1, input_tokens=tokens, output_tokens=5, total_tokens=tokens + 5)
    return ModelStep(output=[output], usage=usage)


def _reported(svc: ContextService, session_id: str | None = None) -> list[int]:
    events = [r.event for r in svc.ledger.store.read_all() if isinstance(r.event, UsageReported)]
    return [e.usage.prompt for e in events if session_id in (None, e.session_id)]


async def _run(agent: Agent[Any], text: Any, session: CtxLedgerSession, streamed: bool) -> Any:
    hooks = CtxLedgerRunHooks(session)
    if not streamed:
        return await Runner.run(agent, text, session=session, hooks=hooks)
    result = Runner.run_streamed(agent, text, session=session, hooks=hooks)
    async for _ in result.stream_events():
        pass
    return result


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
def test_a_tripped_output_guardrail_loses_no_usage(service, streamed):
    session = CtxLedgerSession("u", service, model="scripted", context_length=16_000)
    model = ScriptedModel(
        [
            _step(function_call("lookup", {"key": "k"}, call_id="c1"), 501),
            _step(assistant_message("k is 42"), 602),  # blocked by the guardrail
            _step(assistant_message("k is known"), 703),
        ]
    )
    agent = Agent(
        name="a",
        instructions="Answer.",
        model=model,
        tools=[lookup],
        output_guardrails=[no_numbers],
    )

    async def runs() -> None:
        with pytest.raises(OutputGuardrailTripwireTriggered):
            await _run(agent, "what is k?", session, streamed)
        await _run(agent, "what is k, in words?", session, streamed)

    anyio.run(runs)
    assert _reported(service) == [501, 602, 703]  # each request once, in order
    texts = [m.get("content") for m in service.api_messages(session.ledger_session_id() or "")]
    assert "k is 42" not in texts and texts[-1] == "k is known"  # the blocked answer is not kept
    assert service.ledger.verify().ok


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
def test_a_run_resumed_from_json_reports_only_its_own_requests(service, streamed):
    session = CtxLedgerSession("u", service, model="scripted", context_length=16_000)
    model = ScriptedModel(
        [
            _step(function_call("delete", {"path": "a.txt"}, call_id="c1"), 501),
            _step(assistant_message("deleted a.txt"), 602),
        ]
    )
    agent = Agent(name="a", instructions="Do.", model=model, tools=[delete])

    async def runs() -> None:
        first = await _run(agent, "delete a.txt", session, streamed)
        assert first.interruptions  # (the tool waits for an approval)
        state = await RunState.from_json(agent, first.to_state().to_json())
        state.approve(first.interruptions[0])
        assert (await _run(agent, state, session, streamed)).final_output == "deleted a.txt"

    anyio.run(runs)
    assert _reported(service) == [501, 602]  # (the resumed run reported 501 again)
    view = service.api_messages(session.ledger_session_id() or "")
    assert [m["role"] for m in view] == ["system", "user", "assistant", "tool", "assistant"]
    assert service.ledger.verify().ok


class _PaidSummarizer(OfflineSummarizer):
    """The offline summary with the usage of a model call, as an LLM summarizer reports."""

    async def summarize(self, request: Any) -> Any:
        result = await super().summarize(request)
        return msgspec.structs.replace(result, usage=CanonicalUsage(input=900, output=50))


def _purposes(svc: ContextService) -> list[tuple[str, int]]:
    events = [r.event for r in svc.ledger.store.read_all() if isinstance(r.event, UsageReported)]
    return [(e.purpose, e.usage.prompt) for e in events]


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
def test_a_resume_after_a_summarizer_reported_usage_reports_only_its_own_requests(
    tmp_path, streamed
):
    """The interrupted run's save compacts with a summarizer that reports usage, so the
    chain's last report is the summarizer's, not the run's last request."""
    config = CompressionConfig(threshold_floor_tokens=0, context_length=3_000)
    ledger = Ledger.open(tmp_path / "agents.db", config=config)
    service = ContextService(ledger, config=config, summarizer=_PaidSummarizer())
    session = CtxLedgerSession("u", service, model="scripted", context_length=3_000)
    model = ScriptedModel(
        [
            *(_step(assistant_message(f"ok {i} " + "filler " * 300), 400 + i) for i in range(3)),
            _step(function_call("delete", {"path": "a.txt"}, call_id="c1"), 501),
            _step(assistant_message("deleted"), 602),
        ]
    )
    agent = Agent(name="a", instructions="Do.", model=model, tools=[delete])

    async def runs() -> None:
        for i in range(3):
            await _run(agent, f"turn {i} " + "word " * 300, session, streamed)
        first = await _run(agent, "delete a.txt " + "word " * 300, session, streamed)
        assert first.interruptions and _purposes(service)[-1][0] == "summarizer"
        state = await RunState.from_json(agent, first.to_state().to_json())
        state.approve(first.interruptions[0])
        assert (await _run(agent, state, session, streamed)).final_output == "deleted"

    try:
        anyio.run(runs)
        agent_reports = [n for purpose, n in _purposes(service) if purpose == "agent"]
        assert agent_reports == [400, 401, 402, 501, 602]  # (the resumed run reported 501 again)
        assert service.ledger.verify().ok
    finally:
        ledger.close()


def test_requests_a_run_carries_count_as_reported_only_when_the_ledger_recorded_them(service):
    """A run's first read claims the requests its ``Usage`` already holds only as far as
    the chain's agent reports hold them (a resumed run's, reported by the run that made
    them); requests made elsewhere (another session, none) are reported here."""
    session = CtxLedgerSession("u", service, model="scripted", context_length=16_000)
    question = {"role": "user", "content": "q"}
    elsewhere = types.SimpleNamespace(usage=Usage())
    _one_request(elsewhere.usage, 301)  # (made before this session saw the run)

    async def steps() -> None:
        await session.get_items(wrapper=elsewhere)
        await session.add_items(
            [question, {"role": "assistant", "content": "a"}], wrapper=elsewhere
        )

    anyio.run(steps)
    assert _reported(service) == [301]  # (the first version claimed it and lost it)
    assert service.ledger.verify().ok


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
def test_a_resume_after_another_run_reported_reports_only_its_own_requests(service, streamed):
    """Another run on the session reports between the interruption and the resume (runs
    interleaved on one session): the carried request is found further back on the chain."""
    session = CtxLedgerSession("u", service, model="scripted", context_length=16_000)
    model = ScriptedModel(
        [
            _step(function_call("delete", {"path": "a.txt"}, call_id="c1"), 501),
            _step(assistant_message("deleted a.txt"), 602),
        ]
    )
    agent = Agent(name="a", instructions="Do.", model=model, tools=[delete])
    other_model = ScriptedModel([_step(assistant_message("done"), 700)])
    other = Agent(name="a", instructions="Do.", model=other_model)

    async def runs() -> None:
        first = await _run(agent, "delete a.txt", session, streamed)
        assert first.interruptions  # (the tool waits for an approval)
        saved = first.to_state().to_json()
        await _run(other, "something else", session, streamed)
        state = await RunState.from_json(agent, saved)
        state.approve(first.interruptions[0])
        assert (await _run(agent, state, session, streamed)).final_output == "deleted a.txt"

    anyio.run(runs)
    assert _reported(service) == [501, 700, 602]  # (the resumed run reported 501 again)
    assert service.ledger.verify().ok


@pytest.mark.parametrize(("after", "reported"), [(402, [301, 402]), (-5, [301])])
def test_a_carried_request_the_ledger_did_not_record_is_reported_after_those_it_did(
    service, caplog, after, reported
):
    """Of the requests a ``Usage`` carries, those the chain recorded in order from the
    first are claimed; the first one it did not record, and those after it, are reported
    (a resume in another process: a new session object). A request whose figures no
    ledger records (-5: its report is dropped with a warning) is claimed with them:
    reporting it again records nothing either, and it hides none before it."""
    question = {"role": "user", "content": "q"}
    interrupted = types.SimpleNamespace(usage=Usage())
    _one_request(interrupted.usage, 301)
    resumed = types.SimpleNamespace(usage=Usage())

    async def steps() -> None:
        first = CtxLedgerSession("u", service, model="scripted", context_length=16_000)
        await first.add_items([question], wrapper=interrupted)
        _one_request(interrupted.usage, after)  # (its write failed: never recorded)
        resumed.usage.add(interrupted.usage)  # (without our count: as from RunState JSON)
        session = CtxLedgerSession("u", service, model="scripted", context_length=16_000)
        await session.get_items(wrapper=resumed)
        await session.add_items([{"role": "assistant", "content": "a"}], wrapper=resumed)

    anyio.run(steps)
    assert _reported(service) == reported  # (301 was reported again, or 402 was lost)
    assert "not recorded" not in caplog.text  # (nor was the -5 reported again)
    assert service.ledger.verify().ok


def test_two_runs_at_once_on_one_session_interleave_as_the_readme_says(service):
    session = CtxLedgerSession("u", service, model="scripted", context_length=16_000)
    model = ScriptedModel([_step(assistant_message(f"a{i}", item_id=f"m{i}"), 100) for i in (1, 2)])
    agent = Agent(name="a", instructions="Answer.", model=model)

    async def runs() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(_run, agent, "q1", session, False)
            group.start_soon(_run, agent, "q2", session, False)

    anyio.run(runs)
    sent = [[item.get("content") for item in call.input] for call in model.calls]
    assert sent == [["q1"], ["q1", "q2"]]  # the second run was sent the first one's ask
    texts = [m.get("content") for m in service.api_messages(session.ledger_session_id() or "")]
    assert texts[1:] == ["q1", "q2", "a1", "a2"]  # (after the system prompt)
    assert _reported(service) == [100, 100]


@pytest.mark.parametrize("end", ["clear_session", "pop_item"])
def test_a_tripped_runs_usage_stays_in_the_session_clear_or_pop_ends(service, end):
    session = CtxLedgerSession("u", service, model="scripted", context_length=16_000)
    model = ScriptedModel(
        [_step(assistant_message("k is 42"), 14_000), _step(assistant_message("hello"), 30)]
    )
    agent = Agent(name="a", instructions="A.", model=model, output_guardrails=[no_numbers])

    async def runs() -> None:
        with pytest.raises(OutputGuardrailTripwireTriggered):
            await _run(agent, "old conversation", session, False)
        await getattr(session, end)()
        await _run(agent, "new conversation", session, False)

    anyio.run(runs)
    assert session.ledger_session_id() == "u~2"
    assert _reported(service, "u") == [14_000] and _reported(service, "u~2") == [30]
    events = [r.event for r in service.ledger.store.read_all()]
    warned = [e.session_id for e in events if isinstance(e, PressureWarning)]
    assert "u~2" not in warned  # (the fresh conversation was never under pressure)
    at = next(
        i for i, e in enumerate(events) if isinstance(e, UsageReported) and e.session_id == "u"
    )
    assert events[at].asked_for_tools is False  # the ending conversation: no check
    checks = (CompressionChecked, CompressionSkipped, SummaryGenerated, SessionSwitched)
    assert not [e for e in events[at:] if isinstance(e, checks) and e.session_id == "u"]
    assert service.ledger.verify().ok


def _one_request(usage: Usage, tokens: int) -> None:
    usage.add(Usage(requests=1, input_tokens=tokens, output_tokens=5, total_tokens=tokens + 5))


def test_a_run_that_pops_an_item_reports_its_own_requests_on_the_branch(service):
    # (as the SDK's rewind before a conversation retry: pop_item with the run's own wrapper)
    session = CtxLedgerSession("u", service, model="scripted", context_length=16_000)
    run = types.SimpleNamespace(usage=Usage())
    question = {"role": "user", "content": "q"}

    async def steps() -> None:
        _one_request(run.usage, 301)
        await session.add_items([question, {"role": "assistant", "content": "a"}], wrapper=run)
        _one_request(run.usage, 402)  # a request whose answer the run has not written
        await session.pop_item(wrapper=run)
        await session.add_items([{"role": "assistant", "content": "again"}], wrapper=run)

    anyio.run(steps)
    assert session.ledger_session_id() == "u~2"
    # (the ending u got the 402 of the run that goes on in u~2)
    assert _reported(service, "u") == [301] and _reported(service, "u~2") == [402]
    assert service.ledger.verify().ok


class _WaitingSummarizer(OfflineSummarizer):
    """Says it was called (`called`), then waits (up to 5 s) until the session was cleared,
    as a summarizer awaiting its provider would. `raced`: it was cleared meanwhile."""

    def __init__(self, called: asyncio.Event, cleared: asyncio.Event) -> None:
        self.called, self.cleared, self.raced = called, cleared, False

    async def summarize(self, request: Any) -> Any:
        self.called.set()
        if not self.cleared.is_set():
            with anyio.move_on_after(5):
                await self.cleared.wait()
            self.raced = self.cleared.is_set()
        return await super().summarize(request)


def test_a_request_is_reported_once_when_the_session_is_cleared_while_it_is_reported(tmp_path):
    called, cleared = asyncio.Event(), asyncio.Event()
    summarizer = _WaitingSummarizer(called, cleared)
    ledger = Ledger.open(tmp_path / "agents.db", config=CONFIG)
    service = ContextService(ledger, config=CONFIG, summarizer=summarizer)
    session = CtxLedgerSession("u", service, model="scripted", context_length=16_000)
    model = ScriptedModel(
        [
            _step(function_call("lookup", {"key": "k"}, call_id="c1"), 15_000),
            _step(assistant_message("a"), 602),
        ]
    )
    a = Agent(name="a", instructions="A.", model=model, tools=[lookup])

    async def clear() -> None:
        with anyio.fail_after(5):
            await called.wait()  # run a's write reports its 15,000 and awaits a compaction
        await session.clear_session()
        cleared.set()

    async def runs() -> None:
        history: list[Any] = []
        for i in range(12):
            history += [
                {"role": "user", "content": f"question {i} " + "word " * 200},
                {"role": "assistant", "content": f"answer {i} " + "word " * 200},
            ]
        await CtxLedgerSession.add_items(session, history)
        await asyncio.gather(_run(a, "qa", session, False), clear())

    asyncio.run(runs())
    assert summarizer.raced  # the session was cleared while a's report awaited
    assert sorted(_reported(service)) == [602, 15_000]  # (15,000 was counted twice)
    assert service.ledger.verify().ok
    ledger.close()


def test_a_run_in_flight_reports_its_own_requests_when_another_run_writes(service):
    session = CtxLedgerSession("u", service, model="scripted", context_length=16_000)
    started, release = asyncio.Event(), asyncio.Event()

    @function_tool
    async def slow(key: str) -> str:
        """Slow."""
        started.set()
        with anyio.fail_after(5):
            await release.wait()
        return "v"

    a = Agent(
        name="a",
        model=ScriptedModel(
            [
                _step(function_call("slow", {"key": "k"}, call_id="c1"), 301),
                _step(assistant_message("a"), 402),
            ]
        ),
        tools=[slow],
    )
    b = Agent(name="a", model=ScriptedModel([_step(assistant_message("b"), 503)]))

    async def run_b() -> None:
        with anyio.fail_after(5):
            await started.wait()  # run a is in its tool: its 301-token request is not written yet
        await _run(b, "qb", session, False)
        release.set()

    async def runs() -> None:
        await asyncio.gather(_run(a, "qa", session, False), run_b())

    asyncio.run(runs())
    events = [
        r.event for r in service.ledger.store.read_all() if isinstance(r.event, UsageReported)
    ]
    asked = {e.usage.prompt: e.asked_for_tools for e in events}
    # (run b reported a's tool call as a left-over, before a wrote it: None, checked)
    assert asked == {301: True, 402: False, 503: False}
    assert service.ledger.verify().ok


class _UserContext:
    """A user's context object (a database handle, say)."""


def test_the_session_keeps_no_runs_context_object_alive(service):
    session = CtxLedgerSession("u", service, model="scripted", context_length=16_000)
    agent = Agent(name="a", model=ScriptedModel([_step(assistant_message("a"), 100)]))
    context = _UserContext()
    held = weakref.ref(context)
    result = anyio.run(functools.partial(Runner.run, agent, "q", session=session, context=context))
    del result, context
    gc.collect()
    assert held() is None  # (the session held the run's wrapper, and so the context)
    assert _reported(service) == [100]
