"""An Agents SDK agent's system prompt (static, a dynamic ``instructions`` callable, a
handoff's agent's) recorded as sent through ``CtxLedgerRunHooks`` (and the start prompt
``CtxLedgerSession(agent=)`` gives), with the real Runner and a scripted model, offline."""

from __future__ import annotations

import os
from typing import Any

import anyio
import pytest
from helpers.frameworks import require

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
require("agents", "agents")
from agents import Agent, RunHooks, Runner  # noqa: E402
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call  # noqa: E402

from ctxledger import CompressionConfig, ContextService, InvalidInput, Ledger  # noqa: E402
from ctxledger.analysis.compactions import chain_signature  # noqa: E402
from ctxledger.analysis.history import SystemStep, history  # noqa: E402
from ctxledger.analysis.whatif import replay_history, whatif  # noqa: E402
from ctxledger.compressor.markers import add_system_note, strip_system_note  # noqa: E402
from ctxledger.events import SessionSwitched, SystemPromptSet  # noqa: E402
from ctxledger.integrations.openai_agents import CtxLedgerSession  # noqa: E402
from ctxledger.integrations.openai_agents_hooks import CtxLedgerRunHooks  # noqa: E402

CONFIG = CompressionConfig(threshold_floor_tokens=0, context_length=16_000)
RUNS = 13
PADDING = "Keep every answer short and cite the file you read. "


@pytest.fixture
def service(tmp_path):
    svc = ContextService(Ledger.open(tmp_path / "agents.db", config=CONFIG), config=CONFIG)
    yield svc
    svc.ledger.close()


def _answers(n: int) -> ScriptedModel:
    return ScriptedModel([ModelStep(output=[assistant_message(f"answer {i}")]) for i in range(n)])


def _events(svc: ContextService, kind: type) -> list[Any]:
    return [r.event for r in svc.ledger.store.read_all() if isinstance(r.event, kind)]


def _prompt_texts(svc: ContextService) -> list[str]:
    """Every prompt recorded (starts and changes), in order, without the compaction note."""
    return [strip_system_note(e.text) for e in _events(svc, SystemPromptSet)]


async def _run(agent: Agent[Any], text: str, session: CtxLedgerSession, streamed: bool) -> None:
    hooks = CtxLedgerRunHooks(session)
    if streamed:
        result = Runner.run_streamed(agent, text, session=session, hooks=hooks)
        async for _ in result.stream_events():
            pass
    else:
        await Runner.run(agent, text, session=session, hooks=hooks)


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("given", [False, True])
def test_a_dynamic_prompt_changing_between_runs_is_recorded_once_per_change(
    service, streamed, given
):
    versions = ["v1", "v1", "v2", "v2", "v2", "v3"]
    run, called = [0], [0]
    model = _answers(len(versions))

    def instructions(ctx: Any, agent: Any) -> str:
        called[0] += 1
        return f"You are {versions[run[0]]}."

    agent = Agent(name="a", instructions=instructions, model=model)
    session = CtxLedgerSession(
        "chat", service, context_length=16_000, **({"agent": agent} if given else {})
    )

    async def runs() -> None:
        for n in range(len(versions)):
            run[0] = n
            await _run(agent, f"question {n}", session, streamed)
            # the ledger holds the prompt the call was sent
            view = service.ledger.transcript.session(session.ledger_session_id())
            assert view.system_prompt == model.calls[-1].system_instructions

    anyio.run(runs)
    assert _prompt_texts(service) == ["You are v1.", "You are v2.", "You are v3."]
    assert called[0] == len(model.calls)  # only the SDK calls it, agent= given or not
    if streamed:  # its first call's hook came before its items: the session starts with it
        assert list(service.ledger.store.read_stream("chat"))[1].event.text == "You are v1."


def test_a_prompt_changing_at_every_call_is_recorded_as_sent(service):
    """A callable whose text differs at each call (a counter, a clock, a registry fetch):
    with agent= the session never calls it, so the ledger records exactly what was sent."""
    tick = iter(range(100))
    model = _answers(3)
    agent = Agent(name="a", instructions=lambda c, a: f"Request #{next(tick)}.", model=model)
    session = CtxLedgerSession("chat", service, context_length=16_000, agent=agent)

    async def runs() -> None:
        for ask in ("q1", "q2", "q3"):
            await _run(agent, ask, session, False)

    anyio.run(runs)
    sent = [call.system_instructions for call in model.calls]
    assert sent == ["Request #0.", "Request #1.", "Request #2."]
    assert _prompt_texts(service) == sent
    assert whatif(service.ledger, "chat").reproduces_recorded


def _big(words: int) -> str:
    return "You are a careful reviewer. " + PADDING * words


def _record_growth(service: ContextService, *, hooks: bool) -> list[Any]:
    """Thirteen runs of ~450-token asks (6K tokens in all, under the 8K threshold); the
    prompt grows to ~3.3K tokens at the twelfth run. Returns each model call's input."""
    size = [1]
    model = _answers(RUNS)
    agent = Agent(name="a", instructions=lambda ctx, agent: _big(size[0]), model=model)
    session = CtxLedgerSession("chat", service, context_length=16_000, system_prompt=_big(1))

    async def runs() -> None:
        for n in range(RUNS):
            size[0] = 1 if n < RUNS - 2 else 300
            ask = f"run {n}: " + "please review this paragraph carefully " * 80
            run_hooks = CtxLedgerRunHooks(session) if hooks else None
            await Runner.run(agent, ask, session=session, hooks=run_hooks)

    anyio.run(runs)
    return [call.input for call in model.calls]


def test_a_grown_prompt_compacts_at_its_call_and_the_next_run_is_sent_the_view(service, tmp_path):
    inputs = _record_growth(service, hooks=True)
    assert _prompt_texts(service) == [_big(1), _big(300)]
    assert len(_events(service, SessionSwitched)) == 1
    # recorded at its call (after that run's read): compacted then, that call was sent the
    # history as read; the next run reads the compacted view
    assert len(inputs[-2]) > len(inputs[-3])
    assert len(inputs[-1]) < len(inputs[-2])
    plain = ContextService(Ledger.open(tmp_path / "plain.db", config=CONFIG), config=CONFIG)
    plain_inputs = _record_growth(plain, hooks=False)
    assert not _events(plain, SessionSwitched)  # the prompt alone made the difference
    assert len(plain_inputs[-1]) > len(inputs[-1])
    plain.ledger.close()


def test_the_recorded_ledger_replays_and_what_ifs_the_same(service):
    _record_growth(service, hooks=True)
    ledger = service.ledger
    hist = history(ledger, "chat")
    assert [strip_system_note(s.text) for s in hist.steps if isinstance(s, SystemStep)] == [
        _big(300)
    ]
    _replays_the_same(ledger, hist)


def _replays_the_same(ledger: Ledger, hist: Any) -> None:
    report = whatif(ledger, "chat")
    assert report.reproduces_recorded, report.reproduction.differences
    tip = ledger.chains.tip("chat")
    with replay_history(hist) as (scratch, result):
        assert chain_signature(scratch, result.session_id) == chain_signature(ledger, tip)
        assert scratch.api_messages(result.session_id) == ledger.api_messages(tip)


@pytest.mark.parametrize("bad", [42, ["You are v1."], "You are \ud800."])
def test_a_prompt_that_is_no_text_is_refused_and_appends_nothing(service, bad):
    agent = Agent(name="a", instructions=lambda ctx, agent: bad, model=_answers(2))
    session = CtxLedgerSession("chat", service, context_length=16_000, agent=agent)
    with pytest.raises(InvalidInput, match="system_prompt"):  # (streamed: hook, then items)
        anyio.run(lambda: _run(agent, "question", session, True))
    assert list(service.ledger.store.read_all()) == []
    # through the hooks alone, on a session holding a run: the prompt writes nothing
    good = CtxLedgerSession("other", service, context_length=16_000, system_prompt="ok")
    anyio.run(lambda: _run(Agent(name="g", instructions="ok", model=_answers(1)), "q", good, False))
    before = len(list(service.ledger.store.read_all()))
    with pytest.raises(InvalidInput, match="system_prompt"):
        anyio.run(lambda: CtxLedgerRunHooks(good).on_llm_start(None, None, bad, []))
    assert len(list(service.ledger.store.read_all())) == before


def _triage_and_billing(model: ScriptedModel) -> tuple[Agent[Any], Agent[Any]]:
    """A triage agent handing off to billing (two static prompts), both on `model`."""
    billing = Agent(name="billing", instructions="You handle refunds.", model=model)
    return Agent(name="triage", instructions="You route.", model=model, handoffs=[billing]), billing


class _Seen(RunHooks[Any]):
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def on_llm_start(self, context, agent, system_prompt, input_items) -> None:
        self.calls.append(f"llm {agent.name}")

    async def on_handoff(self, context, from_agent, to_agent) -> None:
        self.calls.append(f"handoff {from_agent.name}>{to_agent.name}")


def test_each_agent_of_a_handoff_has_its_prompt_recorded(service):
    sent: list[tuple[str | None, str | None]] = []
    session = CtxLedgerSession("chat", service, context_length=16_000)

    def step(output: Any) -> ModelStep:
        def respond(call: Any) -> ModelStep:
            held = service.ledger.transcript.session(session.ledger_session_id()).system_prompt
            sent.append((call.system_instructions, held))
            return ModelStep(output=[output])

        return ModelStep.respond(respond)

    model = ScriptedModel(
        [
            step(function_call("transfer_to_billing", {}, call_id="h1")),
            step(assistant_message("refunded")),
            step(function_call("transfer_to_billing", {}, call_id="h2")),
            step(assistant_message("refunded again")),
        ]
    )
    triage, _ = _triage_and_billing(model)
    seen = _Seen()

    async def runs() -> None:
        for ask in ("refund me", "and again"):
            await Runner.run(triage, ask, session=session, hooks=CtxLedgerRunHooks(session, seen))

    anyio.run(runs)
    assert [s for s, _ in sent] == ["You route.", "You handle refunds."] * 2
    assert all(s == held for s, held in sent)  # the ledger held each call's prompt
    assert _prompt_texts(service) == ["You route.", "You handle refunds."] * 2
    assert seen.calls == ["llm triage", "handoff triage>billing", "llm billing"] * 2


def test_the_session_takes_an_agent_or_a_prompt_not_both(service):
    agent = Agent(name="a", instructions="You are v1.")
    with pytest.raises(InvalidInput, match="not both"):
        CtxLedgerSession("chat", service, agent=agent, system_prompt="You are v1.")
    with pytest.raises(InvalidInput, match="Agent"):
        CtxLedgerSession("chat", service, agent="You are v1.")
    assert CtxLedgerSession("chat", service, agent=agent).system_prompt == "You are v1."
    dynamic = Agent(name="d", instructions=lambda ctx, agent: "You are v2.")
    assert CtxLedgerSession("chat", service, agent=dynamic).system_prompt is None
    with pytest.raises(InvalidInput, match="RunHooks"):
        CtxLedgerRunHooks(CtxLedgerSession("chat", service), hooks=object())


def test_a_start_prompt_taken_from_the_agent_or_a_call_leaves_the_ledgers_note_out(service):
    """The compaction note is the ledger's (as for a change, s35 note): a host's prompt
    ending with it starts an uncompacted session without it, whichever path gave it."""
    agent = Agent(name="a", instructions=add_system_note("You are v1."))
    session = CtxLedgerSession("chat", service, context_length=16_000, agent=agent)
    assert session.system_prompt == "You are v1."
    other = CtxLedgerSession("other", service, context_length=16_000)

    async def steps() -> None:
        await session.add_items([{"role": "user", "content": "hi"}])  # (no Runner)
        await other.record_system_prompt(add_system_note("You are v2."))
        await other.add_items([{"role": "user", "content": "hi"}])
        await other.clear_session()
        await other.record_system_prompt(add_system_note("You are v3."))  # (a streamed run's)
        await other.add_items([{"role": "user", "content": "again"}])

    anyio.run(steps)
    texts = [e.text for e in _events(service, SystemPromptSet)]
    assert texts == ["You are v1.", "You are v2.", "You are v3."]


def test_a_run_going_on_with_the_last_agent_records_what_was_sent(service):
    """The SDK's own pattern: the next run starts with ``result.last_agent`` (a handoff's
    target), not the session's agent=; the ledger records the prompts sent, no other."""
    model = ScriptedModel(
        [ModelStep(output=[function_call("transfer_to_billing", {}, call_id="h1")])]
        + [ModelStep(output=[assistant_message(f"a{i}")]) for i in range(3)]
    )
    triage, _ = _triage_and_billing(model)
    session = CtxLedgerSession("chat", service, context_length=16_000, agent=triage)

    async def runs() -> None:
        result = await Runner.run(
            triage, "refund me", session=session, hooks=CtxLedgerRunHooks(session)
        )
        for ask in ("and then?", "thanks"):
            result = await Runner.run(
                result.last_agent, ask, session=session, hooks=CtxLedgerRunHooks(session)
            )

    anyio.run(runs)
    sent = [call.system_instructions for call in model.calls]
    assert sent == ["You route."] + ["You handle refunds."] * 3
    assert _prompt_texts(service) == ["You route.", "You handle refunds."]


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("then", ["triage", "billing"])
def test_after_clear_session_the_next_session_holds_only_prompts_it_was_sent(
    service, streamed, then
):
    """Triage hands off to billing; after ``clear_session`` a run of `then` starts the
    next session: it holds the prompt sent to `then`, no earlier agent's (the first run
    plain or streamed: a streamed run's first prompt is what its session starts with)."""
    model = ScriptedModel(
        [
            ModelStep(output=[function_call("transfer_to_billing", {}, call_id="h1")]),
            ModelStep(output=[assistant_message("refunded")]),
            ModelStep(output=[assistant_message("hello")]),
        ]
    )
    triage, billing = _triage_and_billing(model)
    session = CtxLedgerSession("chat", service, context_length=16_000)

    async def runs() -> None:
        await _run(triage, "refund me", session, streamed)
        await session.clear_session()
        await _run(triage if then == "triage" else billing, "new topic", session, False)

    anyio.run(runs)
    second = [r.event for r in service.ledger.store.read_stream("chat~2")]
    sent = model.calls[-1].system_instructions
    assert [e.text for e in second if isinstance(e, SystemPromptSet)] == [sent]


@pytest.mark.parametrize("given", [False, True])
def test_an_agent_without_instructions_records_no_prompt(service, given):
    model = _answers(2)
    agent = Agent(name="a", instructions=None, model=model)
    session = CtxLedgerSession(
        "chat", service, context_length=16_000, **({"agent": agent} if given else {})
    )

    async def runs() -> None:
        await _run(agent, "q1", session, False)
        await _run(agent, "q2", session, True)

    anyio.run(runs)
    assert [call.system_instructions for call in model.calls] == [None, None]
    assert not _events(service, SystemPromptSet)
    assert len(service.ledger.api_messages("chat")) == 4  # two asks, two answers


class _FailingHooks(RunHooks[Any]):
    async def on_llm_start(self, context: Any, agent: Any, system_prompt: Any, items: Any) -> None:
        raise RuntimeError("the caller's hook failed")


@pytest.mark.parametrize("clear", [False, True])
def test_a_prompt_pending_from_a_run_that_saved_nothing_starts_no_later_session(service, clear):
    """A streamed first run records its prompt as pending before the SDK saves its input;
    when the run fails in between (here the caller's own hook raises), the next run, of
    another agent, starts its session with the prompt it was sent, not the failed one's."""
    model = _answers(2)
    first = Agent(name="a", instructions="You are A.", model=model)
    second = Agent(name="b", instructions="You are B.", model=model)
    session = CtxLedgerSession("chat", service, context_length=16_000)

    async def runs() -> None:
        result = Runner.run_streamed(
            first, "q1", session=session, hooks=CtxLedgerRunHooks(session, _FailingHooks())
        )
        with pytest.raises(RuntimeError, match="caller's hook"):
            async for _ in result.stream_events():
                pass
        assert session.ledger_session_id() is None  # the failed run saved nothing
        if clear:
            await session.clear_session()
        await Runner.run(second, "q2", session=session, hooks=CtxLedgerRunHooks(session))

    anyio.run(runs)
    assert [call.system_instructions for call in model.calls][-1] == "You are B."
    assert _prompt_texts(service) == ["You are B."]


@pytest.mark.parametrize("streamed", [False, True])
def test_a_handoff_to_an_agent_without_instructions_stops_counting_the_last_prompt(
    service, streamed
):
    """Triage (a long prompt) hands off to an agent with no instructions: that call is
    sent no prompt, and the ledger held triage's, counted in full at every call until
    the next prompt (an overcount). It is recorded as an empty prompt: an empty system
    message's few tokens are counted, the what-if and a replay reproduce it."""
    session = CtxLedgerSession("chat", service, context_length=16_000)
    held: list[tuple[str | None, str | None, int]] = []

    def step(output: Any) -> ModelStep:
        def respond(call: Any) -> ModelStep:
            view = service.ledger.transcript.session(session.ledger_session_id())
            held.append((call.system_instructions, view.system_prompt, view.system_tokens))
            return ModelStep(output=[output])

        return ModelStep.respond(respond)

    model = ScriptedModel(
        [
            step(function_call("transfer_to_plain", {}, call_id=f"h{n}"))
            if n % 2 == 0
            else step(assistant_message(f"answer {n}"))
            for n in range(4)
        ]
    )
    plain = Agent(name="plain", instructions=None, model=model)
    triage = Agent(name="triage", instructions=_big(200), model=model, handoffs=[plain])

    async def runs() -> None:
        for ask in ("refund me", "and again"):
            await _run(triage, ask, session, streamed)

    anyio.run(runs)
    assert [sent for sent, _, _ in held] == [_big(200), None] * 2
    triage_tokens = held[0][2]
    for _, prompt, tokens in held[1::2]:  # the calls of the agent without instructions
        assert prompt == "" and tokens < 10 < triage_tokens
    assert _prompt_texts(service) == [_big(200), ""] * 2
    sid = session.ledger_session_id()  # the views show it, the Runner is not given it (README)
    assert service.api_messages(sid)[0] == {"role": "system", "content": ""}
    assert "system" not in [i.get("role") for i in anyio.run(session.get_items)]
    _replays_the_same(service.ledger, history(service.ledger, "chat"))
