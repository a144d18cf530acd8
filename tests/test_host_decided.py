"""A compaction a host decided on its own (Hermes's ``compress(force=False)``) is
recorded as what it is, re-plans exactly, and a what-if of its chain does not double it
(session 37; session 36 recorded every one as ``manual /compress``)."""

from __future__ import annotations

from pathlib import Path

import anyio
import msgspec
import pytest
from helpers.ledger_helpers import SMALL, deterministic_ledger

from ctxledger.analysis.history import CompressStep, history
from ctxledger.analysis.replay import verify_compactions
from ctxledger.analysis.whatif import whatif
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.errors import InvalidInput
from ctxledger.events import CompressionChecked, CompressionSkipped, SessionSwitched
from ctxledger.ledger.compaction import compact
from ctxledger.ledger.facade import Ledger
from ctxledger.runtime.engine import HOST_AGENTS_KEPT, RuntimeTracker
from ctxledger.runtime.service import ContextService


async def _host_decides(ledger: Ledger, extra: int) -> str:
    """A host that decides when to compact, as Hermes does: after each user message it
    measures the request (the ledger's estimate plus `extra`, its system prompt and
    tools schema the ledger does not hold) and asks, not forced, at the threshold; each
    answer comes with a usage report (Hermes passes them with its next hand-over)."""
    svc = ContextService(ledger, config=SMALL)
    sid = ledger.start_session(model="m", context_length=16_000)
    for turn in range(14):
        sid = (
            await svc.append(sid, [{"role": "user", "content": f"turn {turn} " + "word " * 900}])
        ).session_id
        status = svc.status(sid)
        measured = status["tokens"] + extra
        if measured >= status["threshold_tokens"]:
            source = f"host decided: ~{measured:,} tokens"
            sid = (await svc.host_compress(sid, source, tokens=measured)).session_id
        prompt = svc.status(sid)["tokens"] + extra
        usage = {"prompt_tokens": prompt, "completion_tokens": 5}
        ledger.report_usage(sid, usage, tool_calls=False)
        sid = (await svc.append(sid, [{"role": "assistant", "content": f"done {turn}"}])).session_id
    return svc.tip(sid)


def _switches(ledger: Ledger) -> list[SessionSwitched]:
    return [r.event for r in ledger.store.read_all() if isinstance(r.event, SessionSwitched)]


@pytest.mark.parametrize("extra", [0, 1_500])
def test_a_host_s_own_compaction_is_recorded_replans_and_is_not_doubled(
    tmp_path: Path, extra: int
) -> None:
    ledger = deterministic_ledger(tmp_path / "l.db")
    tip = anyio.run(_host_decides, ledger, extra)
    switches = _switches(ledger)
    assert len(switches) >= 2
    # recorded as the host's own decision: preflight, not forced, what it measured
    assert {s.trigger for s in switches} == {"preflight"}
    assert not any(s.plan["forced"] for s in switches)
    checks = [r.event for r in ledger.store.read_all() if isinstance(r.event, CompressionChecked)]
    assert len(checks) == len(switches)
    for check in checks:
        assert check.details["decided_by"] == "host" and check.details["force"] is False
        assert check.tokens - check.details["estimate"] == extra
    # replay --verify re-plans each exactly
    assert not verify_compactions(ledger, tip).drifted
    # the what-if replays the host's decisions (judged with what it counted beyond the view)
    steps = [s for s in history(ledger, tip).steps if isinstance(s, CompressStep)]
    assert [s.beyond for s in steps] == [extra] * len(switches)
    repro = whatif(ledger, tip).reproduction
    assert repro is not None
    assert repro.compactions == [len(switches)] * 2, repro.differences
    assert repro.matching_compactions == len(switches)
    assert not any("twice" in w for w in repro.warnings), repro.warnings


async def _guarded(ledger: Ledger) -> tuple[str, list[str]]:
    """A host asking (not forced) while the anti-thrash guard holds: nothing compacts, the
    skip says the host decided; a forced ask (``/compress``) still compacts."""
    svc = ContextService(ledger, config=SMALL)
    sid = ledger.start_session(model="m", context_length=16_000)
    for turn in range(8):
        await svc.append(sid, [{"role": "user", "content": f"turn {turn} " + "word " * 900}])
        await svc.append(sid, [{"role": "assistant", "content": f"done {turn}"}])
    svc.tracker.state(sid)  # (folded, then kept current)
    notices: list[str] = []
    blocked = SMALL.anti_thrash_strikes
    for _ in range(blocked):
        ledger.append_events(
            sid,
            [
                CompressionSkipped(
                    **ledger.event_fields(sid), trigger="preflight", reason="too_few_messages"
                )
            ],
        )
    result = await svc.host_compress(sid, "host decided", tokens=20_000)
    notices += result.notices
    assert result.session_id == sid and not result.compressed
    forced = await svc.compress(sid)
    assert forced.compressed
    return sid, notices


def test_a_host_s_own_ask_honours_the_guards_a_forced_one_does_not(tmp_path: Path) -> None:
    ledger = deterministic_ledger(tmp_path / "l.db")
    sid, notices = anyio.run(_guarded, ledger)
    assert notices and notices[0].startswith("automatic compression skipped")
    [skip] = [
        r.event
        for r in ledger.store.read_session(sid)
        if isinstance(r.event, CompressionSkipped) and r.event.details.get("decided_by")
    ]
    assert skip.trigger == "preflight" and skip.details["tokens"] == 20_000
    assert skip.details["force"] is False


@pytest.mark.parametrize("kw", [{"tokens": -1}, {"tokens": 1.5}, {"beyond": "12"}])
def test_a_host_s_figures_are_checked_before_anything_is_written(kw: dict) -> None:
    ledger = deterministic_ledger()
    svc = ContextService(ledger, config=SMALL)
    sid = ledger.start_session(model="m", context_length=16_000)
    version = ledger.version(sid)
    with pytest.raises(InvalidInput):
        anyio.run(lambda: svc.host_compress(sid, "host decided", **kw))
    assert ledger.version(sid) == version


async def _two_huge_exchanges(svc: ContextService) -> str:
    """A session of two huge exchanges: every compaction of it is a no-op (a strike)."""
    sid = svc.ledger.start_session(model="m", context_length=16_000)
    for turn in range(2):
        big = f"ask {turn} " + "word " * 4_000
        await svc.append(
            sid, [{"role": "user", "content": big}, {"role": "assistant", "content": "ok"}]
        )
    return sid


async def _two_agents(ledger: Ledger) -> tuple[str, list[bool]]:
    """A conversation of two huge messages: host agent "a" asks twice, each pass a no-op
    (too few messages: two strikes), then is blocked, even once the conversation has
    grown; agent "b" (a new process, ``--resume``, the gateway's hygiene agent) starts
    from no strikes, as a fresh Hermes agent's in-memory count does, and compacts."""
    svc = ContextService(ledger, config=SMALL)
    sid = await _two_huge_exchanges(svc)
    done = []
    for _ in range(3):
        done.append(
            (await svc.host_compress(sid, "a decided", tokens=30_000, agent="a")).compressed
        )
    svc = ContextService(ledger, config=SMALL)  # another process on the same ledger
    for turn in range(2, 14):
        small = f"ask {turn} " + "word " * 900
        await svc.append(
            sid, [{"role": "user", "content": small}, {"role": "assistant", "content": "ok"}]
        )
    done.append((await svc.host_compress(sid, "a decided", tokens=30_000, agent="a")).compressed)
    # a's strikes are a's (the chain's own guard, ``status``, holds none)
    assert not svc.tracker.guard(sid, ledger.clock(), "a")[0]
    result = await svc.host_compress(sid, "b decided", tokens=30_000, agent="b")
    done.append(result.compressed)
    return result.session_id, done


def test_a_host_agent_s_strikes_last_as_long_as_the_agent(tmp_path: Path) -> None:
    ledger = deterministic_ledger(tmp_path / "l.db")
    tip, done = anyio.run(_two_agents, ledger)
    assert done == [False, False, False, False, True]
    svc = ContextService(ledger, config=SMALL)
    # the guard's state is folded from the events: a reopened ledger decides the same
    svc.tracker.forget(tip)
    assert svc.tracker.host_strikes(tip) == {"a": 2}  # b's compaction neither used nor cleared them
    assert not svc.status(tip)["blocked"]
    assert not verify_compactions(ledger, tip).drifted
    steps = [s for s in history(ledger, tip).steps if isinstance(s, CompressStep)]
    assert [s.agent for s in steps] == ["a", "a", "a", "a", "b"]
    repro = whatif(ledger, tip).reproduction
    assert repro is not None and repro.compactions == [1, 1], repro.differences


_FITS, _NEW_WINDOW = "<a fitting count>", "<a new window>"


async def _alternating(ledger: Ledger, agents: list[str | None]) -> tuple[str, list[bool]]:
    """Host agents asking in turn on a conversation of two huge messages (each pass a
    no-op: a strike): Hermes's gateway, its cached agent "a" and a fresh hygiene agent
    before each message (`_FITS`, `_NEW_WINDOW`: events between the asks). Whether each
    ask was held by the anti-thrash guard."""
    svc = ContextService(ledger, config=SMALL)
    sid = await _two_huge_exchanges(svc)
    held = []
    for agent in agents:
        if agent == _FITS:  # a real count below the threshold
            ledger.report_usage(sid, {"prompt_tokens": 2_000, "completion_tokens": 5})
            continue
        if agent == _NEW_WINDOW:
            ledger.switch_model(sid, "m2", 16_000)
            continue
        result = await svc.host_compress(sid, f"{agent} decided", tokens=30_000, agent=agent)
        held.append(any("paused after" in notice for notice in result.notices))
    return sid, held


def test_another_agent_s_ask_neither_uses_nor_clears_an_agent_s_strikes(tmp_path: Path) -> None:
    ledger = deterministic_ledger(tmp_path / "l.db")
    agents: list[str | None] = ["a", "h1", "a", "h2", "a", None, None, "h3", None]
    sid, held = anyio.run(_alternating, ledger, agents)
    # a is held at its third ask, as Hermes's cached agent is; the unnamed strikes are
    # the chain's: they hold unnamed asks, and a named ask neither uses nor clears them
    assert held == [False, False, False, False, True, False, False, False, True]
    live = ContextService(ledger, config=SMALL).tracker
    assert live.host_strikes(sid) == {"a": 2, "h1": 1, "h2": 1, "h3": 1}
    assert live.state(sid).anti.strikes == 2
    reopened = ContextService(Ledger.open(tmp_path / "l.db"), config=SMALL).tracker
    assert reopened.host_strikes(sid) == live.host_strikes(sid)
    now = ledger.clock()
    assert [reopened.guard(sid, now, a)[0] for a in ("a", "h4", None)] == [False, True, False]
    steps = [s for s in history(ledger, sid).steps if isinstance(s, CompressStep)]
    assert [s.agent for s in steps] == agents
    assert not verify_compactions(ledger, sid).drifted
    repro = whatif(ledger, sid).reproduction
    assert repro is not None and repro.exact, repro.differences


def test_a_chain_keeps_the_strikes_of_its_latest_host_agents_only(tmp_path: Path) -> None:
    """Memory is bounded: an agent copy asks once and is gone (the gateway's hygiene
    agent, a renamed agent after a session's end), so the least recently struck go."""
    ledger = deterministic_ledger(tmp_path / "l.db")
    agents: list[str | None] = [f"h{i}" for i in range(HOST_AGENTS_KEPT + 2)]
    sid, held = anyio.run(_alternating, ledger, agents)
    assert not any(held)
    kept = {f"h{i}": 1 for i in range(2, HOST_AGENTS_KEPT + 2)}
    assert ContextService(ledger, config=SMALL).tracker.host_strikes(sid) == kept
    reopened = ContextService(Ledger.open(tmp_path / "l.db"), config=SMALL).tracker
    assert reopened.host_strikes(sid) == kept


def test_a_blocked_agent_outlives_the_cap(tmp_path: Path) -> None:
    """A blocked agent asks no more (Hermes's ``should_compress`` says no) while a fresh
    hygiene agent asks once per message: the cap drops the agents with the fewest strikes
    first, so the blocked one stays held (review 3; it was dropped after 16 messages)."""
    ledger = deterministic_ledger(tmp_path / "l.db")
    agents: list[str | None] = ["a", "a", *(f"h{i}" for i in range(HOST_AGENTS_KEPT + 1)), "a"]
    sid, held = anyio.run(_alternating, ledger, agents)
    assert held == [False] * (HOST_AGENTS_KEPT + 3) + [True]
    strikes = ContextService(ledger, config=SMALL).tracker.host_strikes(sid)
    assert len(strikes) == HOST_AGENTS_KEPT and strikes["a"] == 2
    reopened = ContextService(Ledger.open(tmp_path / "l.db"), config=SMALL).tracker
    assert reopened.host_strikes(sid) == strikes


class _CliDuringTheSummary:
    """The summarizer of agent a's ask: while it runs, ``ctxledger compress`` (another
    process: ``compact()``, no check of its own) compacts the same session."""

    kind, model = "offline", None

    def __init__(self, path: Path, sid: str) -> None:
        self.path, self.sid, self.calls = path, sid, 0

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.calls += 1
        if self.calls == 1:
            other = Ledger.open(self.path, config=SMALL)
            await compact(other, other.tip(self.sid), OfflineSummarizer(), trigger="manual")
        return await OfflineSummarizer().summarize(request)


async def _cli_compacts_during_an_ask(path: Path) -> tuple[str, RuntimeTracker]:
    ledger = deterministic_ledger(path)
    sid = ledger.start_session(model="m", context_length=16_000)
    svc = ContextService(ledger, config=SMALL, summarizer=_CliDuringTheSummary(path, sid))
    for turn in range(12):
        exchange = [{"role": "user", "content": f"q{turn} " + "word " * 900}]
        await svc.append(sid, [*exchange, {"role": "assistant", "content": f"a{turn}"}])
    result = await svc.host_compress(sid, "a decided", tokens=30_000, agent="a")
    assert not result.compressed  # the CLI compacted first: a continues on its continuation
    tip = svc.tip(sid)
    ledger.report_usage(tip, {"prompt_tokens": 15_000, "completion_tokens": 5}, tool_calls=False)
    return tip, svc.tracker


def test_another_writer_s_compaction_is_not_charged_to_the_agent_that_checked(
    tmp_path: Path,
) -> None:
    """Review 3: the CLI's compaction landed between a's check and a's outcome and was
    charged to a (its verdict a strike of a's, where a compacted nothing)."""
    tip, live = anyio.run(_cli_compacts_during_an_ask, tmp_path / "l.db")
    reopened = ContextService(Ledger.open(tmp_path / "l.db"), config=SMALL).tracker
    for tracker in (live, reopened):
        assert tracker.host_strikes(tip) == {}
        assert tracker.state(tip).anti.strikes == 1  # the CLI's verdict: shared, as on main


@pytest.mark.parametrize(
    ("between", "held_after"),
    [((_FITS,), [False, False, True]), ((_NEW_WINDOW,), [False, False, True]), ((), [True] * 3)],
)
def test_a_fitting_count_or_a_new_window_clears_every_agent_s_strikes(
    tmp_path: Path, between: tuple[str, ...], held_after: list[bool]
) -> None:
    ledger = deterministic_ledger(tmp_path / "l.db")
    agents: list[str | None] = ["a", "a", "a", *between, "a", "a", "a"]
    sid, held = anyio.run(_alternating, ledger, agents)
    assert held == [False, False, True, *held_after]
    reopened = ContextService(Ledger.open(tmp_path / "l.db"), config=SMALL).tracker
    assert reopened.host_strikes(sid) == ContextService(ledger, config=SMALL).tracker.host_strikes(
        sid
    )


async def _compacting_agents(ledger: Ledger, agents: list[tuple[str, bool]]) -> str:
    """Each agent in turn compacts the grown conversation (a good saving: no strike);
    when `judged`, the first count after it is still over the threshold (its strike)."""
    svc = ContextService(ledger, config=SMALL)
    sid = ledger.start_session(model="m", context_length=16_000)
    for agent, judged in agents:
        for turn in range(6):
            exchange = [{"role": "user", "content": f"{agent} {turn} " + "word " * 1_800}]
            exchange.append({"role": "assistant", "content": "ok"})
            sid = (await svc.append(sid, exchange)).session_id
        result = await svc.host_compress(sid, f"{agent} decided", tokens=30_000, agent=agent)
        assert result.compressed, (agent, result.notices)
        sid = result.session_id
        if judged:
            ledger.report_usage(sid, {"prompt_tokens": 15_000, "completion_tokens": 5})
    return sid


def test_an_agent_charged_again_outlives_the_cap_among_equal_strikes(tmp_path: Path) -> None:
    """Among agents with as many strikes, the least recently charged goes first: x, struck
    first, compacts again (no strike) and outlives h0 (a FIFO cap drops x)."""
    ledger = deterministic_ledger(tmp_path / "l.db")
    hygiene = [(f"h{i}", True) for i in range(HOST_AGENTS_KEPT - 1)]
    agents = [("x", True), *hygiene, ("x", False), ("n", True)]
    sid = anyio.run(_compacting_agents, ledger, agents)
    kept = {agent: 1 for agent, _ in agents if agent != "h0"}
    assert ContextService(ledger, config=SMALL).tracker.host_strikes(sid) == kept
    reopened = ContextService(Ledger.open(tmp_path / "l.db"), config=SMALL).tracker
    assert reopened.host_strikes(sid) == kept


async def _refused(ledger: Ledger) -> tuple[str, int, int]:
    """A host whose provider refused a request the host measured under its threshold (a
    context-length error: Hermes's overflow retry) compacts anyway; a usage report of
    the compacted request follows."""
    svc = ContextService(ledger, config=SMALL)
    sid = ledger.start_session(model="m", context_length=16_000)
    for turn in range(12):
        exchange = [{"role": "user", "content": f"turn {turn} " + "word " * 600}]
        exchange.append({"role": "assistant", "content": f"done {turn}"})
        sid = (await svc.append(sid, exchange)).session_id
    status = svc.status(sid)
    measured = status["tokens"] + 500
    source = f"host decided after a refusal: ~{measured:,} tokens"
    result = await svc.host_compress(sid, source, tokens=measured, agent="a", refused=True)
    assert result.compressed, result.notices
    sid = result.session_id
    ledger.report_usage(sid, {"prompt_tokens": svc.status(sid)["tokens"], "completion_tokens": 5})
    return sid, measured, status["threshold_tokens"]


def test_a_host_s_compaction_after_a_refusal_is_overflow_and_replays(tmp_path: Path) -> None:
    """Session 38: Hermes compacts after its provider refused the request (under its own
    threshold); recorded as ``overflow`` (the host's decision, guards applying), and a
    what-if replays it whatever the size (judged against the threshold it was dropped)."""
    ledger = deterministic_ledger(tmp_path / "l.db")
    tip, measured, threshold = anyio.run(_refused, ledger)
    assert measured < threshold
    [switch] = _switches(ledger)
    assert switch.trigger == "overflow" and not switch.plan["forced"]
    [check] = [r.event for r in ledger.store.read_all() if isinstance(r.event, CompressionChecked)]
    assert check.trigger == "overflow" and check.details["decided_by"] == "host"
    assert check.tokens == measured and check.details["agent"] == "a"
    assert not verify_compactions(ledger, tip).drifted
    [step] = [s for s in history(ledger, tip).steps if isinstance(s, CompressStep)]
    assert step.refused and step.beyond == 500 and step.agent == "a"
    report = whatif(ledger, tip)
    assert report.reproduction is not None
    assert report.reproduction.compactions == [1, 1], report.reproduction.differences
    assert report.reproduction.matching_compactions == 1
    assert not any("overflow" in note for note in report.notes), report.notes


#: a threshold above the hygiene share (85 %): the window where a host's hygiene fires
#: under the agent's own threshold (Hermes's 64,000-token floor on a 70K window)
HIGH = msgspec.structs.replace(SMALL, threshold=0.95)


async def _gateway_hygiene(ledger: Ledger) -> str:
    """A host whose gateway checks before each user turn, as Hermes's does: its size (the
    ledger's estimate plus 2,000 tokens of its own) at 85 % of the window compacts, on a
    fresh agent, before the turn (trigger ``hygiene``). The ledger's own estimate stays
    under the hygiene share and the agent's threshold (95 %)."""
    svc = ContextService(ledger, config=HIGH)
    sid = ledger.start_session(model="m", context_length=16_000)
    limit = HIGH.hygiene_threshold_tokens(16_000)
    for turn in range(24):
        measured = svc.status(sid)["tokens"] + 2_000
        if measured >= limit:
            source = f"host hygiene: ~{measured:,} tokens"
            result = await svc.host_compress(
                sid, source, tokens=measured, agent=f"h{turn}", hygiene=True
            )
            assert result.compressed and svc.status(sid)["tokens"] < limit - 2_000
            sid = result.session_id
        exchange = [{"role": "user", "content": f"turn {turn} " + "word " * 700}]
        exchange.append({"role": "assistant", "content": f"done {turn}"})
        sid = (await svc.append(sid, exchange)).session_id
    return svc.tip(sid)


def test_a_host_s_hygiene_is_recorded_as_hygiene_and_replays_by_the_hygiene_rule(
    tmp_path: Path,
) -> None:
    """Session 39: Hermes's gateway hygiene (``host_compress(hygiene=True)``) is recorded
    as ``hygiene``, and a what-if judges it by the hygiene rule (85 % of the window), as
    the gateway judged it: judged against the agent's threshold (95 % here) it was
    dropped (what-if 0 where the recording made 1)."""
    ledger = deterministic_ledger(tmp_path / "l.db", config=HIGH)
    tip = anyio.run(_gateway_hygiene, ledger)
    switches = _switches(ledger)
    assert switches and {s.trigger for s in switches} == {"hygiene"}
    assert not any(s.plan["forced"] for s in switches)
    checks = [r.event for r in ledger.store.read_all() if isinstance(r.event, CompressionChecked)]
    assert [c.trigger for c in checks] == ["hygiene"] * len(switches)
    assert all(c.details["decided_by"] == "host" for c in checks)
    assert all(c.tokens < HIGH.threshold_tokens(16_000) for c in checks)
    assert not verify_compactions(ledger, tip).drifted
    steps = [s for s in history(ledger, tip).steps if isinstance(s, CompressStep)]
    assert [(s.hygiene, s.refused, s.beyond) for s in steps] == [(True, False, 2_000)] * len(
        switches
    )
    report = whatif(ledger, tip)
    assert report.reproduction is not None
    counts = [len(switches)] * 2
    assert report.reproduction.compactions == counts, report.reproduction.differences
    assert report.reproduction.matching_compactions == len(switches)
    # under a hygiene share above its size (and the agent's threshold) it does not fire
    higher = msgspec.structs.replace(HIGH, hygiene_threshold=0.97)
    replayed = whatif(ledger, tip, config=higher).whatif.compactions
    assert "hygiene" not in {c.trigger for c in replayed}, replayed


def test_a_host_s_hygiene_answers_no_refusal() -> None:
    ledger = deterministic_ledger()
    svc = ContextService(ledger, config=SMALL)
    sid = ledger.start_session(model="m", context_length=16_000)
    with pytest.raises(InvalidInput, match="hygiene"):
        anyio.run(lambda: svc.host_compress(sid, "h", refused=True, hygiene=True))


def test_a_host_s_hygiene_at_its_message_limit_replays_by_that_limit(tmp_path: Path) -> None:
    """Review 1 of session 39: the host's own hygiene message limit (Hermes's
    ``compression.hygiene_hard_message_limit``) is recorded with its compaction
    (``details["hard_limit"]``), and a what-if judges it by that limit: by this ledger's
    (5,000) a small conversation at the host's 30 messages was dropped (0 where 1)."""

    async def run(ledger: Ledger) -> str:
        svc = ContextService(ledger, config=HIGH)
        sid = ledger.start_session(model="m", context_length=16_000)
        for turn in range(17):
            if len(ledger.transcript.session(sid).live) >= 30:
                measured = svc.status(sid)["tokens"]
                result = await svc.host_compress(
                    sid, "host hygiene", tokens=measured, agent="h", hygiene=True, hard_limit=30
                )
                assert result.compressed
                sid = result.session_id
            exchange = [{"role": "user", "content": f"turn {turn} " + "word " * 500}]
            sid = (
                await svc.append(sid, [*exchange, {"role": "assistant", "content": "ok"}])
            ).session_id
        return svc.tip(sid)

    ledger = deterministic_ledger(tmp_path / "l.db", config=HIGH)
    tip = anyio.run(run, ledger)
    [check] = [r.event for r in ledger.store.read_all() if isinstance(r.event, CompressionChecked)]
    assert check.trigger == "hygiene" and check.details["hard_limit"] == 30
    assert check.tokens < HIGH.hygiene_threshold_tokens(16_000)
    [step] = [s for s in history(ledger, tip).steps if isinstance(s, CompressStep)]
    assert (step.hygiene, step.hard_limit) == (True, 30)
    report = whatif(ledger, tip)
    assert report.reproduction is not None
    assert report.reproduction.compactions == [1, 1], report.reproduction.differences
    assert report.reproduction.matching_compactions == 1
    with pytest.raises(InvalidInput, match="hard_limit"):
        anyio.run(
            lambda: ContextService(ledger, config=HIGH).host_compress(tip, "h", hard_limit=10)
        )


def test_a_host_s_replayed_hygiene_is_not_charged_to_the_what_if_s_loop(tmp_path: Path) -> None:
    """Final review of session 39: a what-if that replays a host's hygiene (Hermes's
    gateway) as a compaction the recording skipped must not warn that its own loop made
    a hygiene compaction (under `per_run`, a loop with no hygiene at all)."""

    async def run(ledger: Ledger) -> str:
        svc = ContextService(ledger)
        sid = await svc.start_session(model="m", context_length=32_000)
        for i in range(6):
            ask = {"role": "user", "content": f"ask {i} " + "word " * 300}
            reply = {"role": "assistant", "content": f"reply {i} " + "text " * 300}
            await svc.append(sid, [ask, reply])
        result = await svc.host_compress(
            sid, "host hygiene", tokens=30_000, hygiene=True, hard_limit=5_000
        )
        assert not result.compressed  # skipped (no progress) under the recorded settings
        return sid

    config = CompressionConfig(threshold_floor_tokens=0, context_length=32_000)
    ledger = deterministic_ledger(tmp_path / "l.db", config=config)
    sid = anyio.run(run, ledger)
    tighter = msgspec.structs.replace(config, protect_last_n=2, tail_min_messages=2)
    report = whatif(ledger, sid, config=tighter, loop="per_run")
    assert [c.trigger for c in report.whatif.compactions] == ["hygiene"]
    assert report.reproduction is not None
    assert not [w for w in report.reproduction.warnings if "hygiene compaction" in w]
