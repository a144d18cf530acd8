"""A compaction the user asked a host for without forcing it (Hermes's TUI and ACP
``/compress``: ``compress(force=False)``) is recorded as ``requested`` (session 40): the
guards apply, as Hermes's own do for it, and the size is not judged, neither when it is
recorded nor in a what-if. Recorded as ``preflight`` before, a what-if judged it against
the threshold and dropped it where the conversation was under it. The plugin tells it by
the module calling its ``_compress_context`` (its TUI's and ACP's), read off the stack."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers.ledger_helpers import SMALL, deterministic_ledger

from ctxledger.analysis.history import CompressStep, history
from ctxledger.analysis.replay import verify_compactions
from ctxledger.analysis.whatif import whatif
from ctxledger.errors import InvalidInput
from ctxledger.events import (
    CompressionChecked,
    CompressionSkipped,
    CooldownStarted,
    SessionSwitched,
)
from ctxledger.integrations import hermes_host
from ctxledger.integrations.hermes_host import Asked
from ctxledger.ledger.facade import Ledger
from ctxledger.runtime.service import ContextService


async def _talk(svc: ContextService, sid: str, turns: int) -> str:
    for turn in range(turns):
        exchange = [
            {"role": "user", "content": f"turn {turn} " + "word " * 300},
            {"role": "assistant", "content": f"done {turn}"},
        ]
        sid = (await svc.append(sid, exchange)).session_id
    return sid


async def _asked_under_the_threshold(ledger: Ledger) -> str:
    svc = ContextService(ledger, config=SMALL)
    sid = await _talk(svc, ledger.start_session(model="m", context_length=16_000), 17)
    measured = svc.status(sid)["tokens"]
    assert measured < SMALL.threshold_tokens(16_000)  # (no loop of its own would compact)
    result = await svc.host_compress(
        sid, "the user's /compress", tokens=measured, agent="tui", requested=True
    )
    assert result.compressed
    return await _talk(svc, result.session_id, 2)


def test_a_request_under_the_threshold_compacts_and_a_what_if_replays_it(tmp_path: Path) -> None:
    ledger = deterministic_ledger(tmp_path / "l.db", config=SMALL)
    tip = anyio.run(_asked_under_the_threshold, ledger)
    [check] = [r.event for r in ledger.store.read_all() if isinstance(r.event, CompressionChecked)]
    assert check.trigger == "requested" and check.details["force"] is False
    [switch] = [r.event for r in ledger.store.read_all() if isinstance(r.event, SessionSwitched)]
    assert switch.trigger == "requested" and switch.plan["forced"] is False
    [step] = [s for s in history(ledger, tip).steps if isinstance(s, CompressStep)]
    assert step.requested and not (step.refused or step.hygiene)
    assert not verify_compactions(ledger, tip).drifted  # (re-planned not forced)
    report = whatif(ledger, tip)
    assert report.reproduction is not None
    assert report.reproduction.compactions == [1, 1], report.reproduction.differences
    assert report.reproduction.matching_compactions == 1
    assert [c.trigger for c in report.whatif.compactions] == ["requested"]


def _strikes(ledger: Ledger, sid: str) -> None:
    """The anti-thrash guard's strikes: automatic compactions that changed nothing."""
    for _ in range(SMALL.anti_thrash_strikes):
        skip = CompressionSkipped(
            **ledger.event_fields(sid), trigger="preflight", reason="too_few_messages"
        )
        ledger.append_events(sid, [skip])


def _cooldown(ledger: Ledger, sid: str) -> None:
    """A summarizer failure's cooldown, ten minutes from now."""
    until = ledger.clock() + 600.0
    pause = CooldownStarted(
        **ledger.event_fields(sid), until=until, seconds=600.0, failure_class="network"
    )
    ledger.append_events(sid, [pause])


async def _held(ledger: Ledger, hold: Callable[[Ledger, str], None]) -> str:
    svc = ContextService(ledger, config=SMALL)
    sid = await _talk(svc, ledger.start_session(model="m", context_length=16_000), 8)
    svc.tracker.state(sid)  # (folded, then kept current)
    hold(ledger, sid)
    result = await svc.host_compress(sid, "the user's /compress", tokens=9_000, requested=True)
    assert result.session_id == sid and not result.compressed
    return sid


@pytest.mark.parametrize(
    ("hold", "said"), [(_strikes, "ineffective passes"), (_cooldown, "summarizer cooldown")]
)
def test_a_request_is_held_by_the_guards_it_does_not_force(
    tmp_path: Path, hold: Callable[[Ledger, str], None], said: str
) -> None:
    ledger = deterministic_ledger(tmp_path / "l.db", config=SMALL)
    sid = anyio.run(_held, ledger, hold)
    [skip] = [
        r.event
        for r in ledger.store.read_session(sid)
        if isinstance(r.event, CompressionSkipped) and r.event.details.get("decided_by")
    ]
    assert skip.trigger == "requested" and skip.details["tokens"] == 9_000
    assert said in skip.reason
    assert not [r for r in ledger.store.read_all() if isinstance(r.event, SessionSwitched)]


@pytest.mark.parametrize(
    ("kw", "said"),
    [
        ({"refused": True, "requested": True}, "overflow and requested"),
        ({"hygiene": True, "requested": True}, "hygiene and requested"),
        ({"refused": True, "hygiene": True}, "overflow and hygiene"),
    ],
)
def test_a_host_s_compaction_has_one_reason(kw: dict, said: str) -> None:
    ledger = deterministic_ledger()
    sid = ledger.start_session(model="m", context_length=16_000)
    before = ledger.store.last_seq()
    svc = ContextService(ledger, config=SMALL)
    with pytest.raises(InvalidInput, match=f"one reason, not {said}"):
        anyio.run(lambda: svc.host_compress(sid, "h", **kw))
    assert ledger.store.last_seq() == before


def _asked_from(module: str) -> tuple[str | None, Asked]:
    """What ``compress_caller()`` and ``Asked.reading`` say when a function of `module`
    calls ``run_agent``'s ``_compress_context`` (both built here with those module
    names in their globals, which is all the stack walk reads), which asks the engine
    (``force=False``, a refusal pending)."""
    hermes: dict[str, Any] = {"__name__": "run_agent", "host": hermes_host}
    exec(
        "def _compress_context(agent):\n"
        "    said = host.compress_caller()\n"
        "    return said, host.Asked.reading(None, False, 9_000, agent, 'context length')\n",
        hermes,
    )
    slash: dict[str, Any] = {"__name__": module, "compress": hermes["_compress_context"]}
    exec("def _cmd_compact():\n    return compress('a1')\n", slash)
    return slash["_cmd_compact"]()


@pytest.mark.parametrize("module", ["acp_adapter.server", "tui_gateway.server"])
def test_hermes_s_acp_and_tui_compress_are_read_as_requested(module: str) -> None:
    """Session 40, review 1: ACP's module cannot be imported here (``acp`` is missing from
    the Hermes test venv); its ``_cmd_compact`` is told by its module name alone."""
    caller, asked = _asked_from(module)
    assert caller == module
    assert asked == Asked(None, False, 9_000, "a1", requested=True)  # (no answer to a refusal)


def test_hermes_s_own_decision_keeps_its_pending_refusal() -> None:
    caller, asked = _asked_from("agent.conversation_loop")
    assert caller == "agent.conversation_loop"
    assert asked == Asked(None, False, 9_000, "a1", refused="context length")


async def _asked_through_the_plugin(ledger: Ledger) -> None:
    svc = ContextService(ledger, config=SMALL)
    sid = await _talk(svc, ledger.start_session(model="m", context_length=16_000), 17)
    asked = Asked(None, False, 9_000, "tui", requested=True)
    assert (await asked.run(svc, sid, None)).compressed


def test_a_request_s_stored_wording_says_the_user_asked(tmp_path: Path) -> None:
    """(Final review, F6.) The plugin's source of a ``requested`` compaction (stored in
    its check, shown by ``show`` and ``audit``) said "hermes decided": the user asked.
    Only new events say so; a ledger recorded before keeps (and replays) its words."""
    ledger = deterministic_ledger(tmp_path / "l.db", config=SMALL)
    anyio.run(_asked_through_the_plugin, ledger)
    [check] = [r.event for r in ledger.store.read_all() if isinstance(r.event, CompressionChecked)]
    assert check.trigger == "requested"
    assert check.source == (
        "hermes's user asked (compress, force=False, its TUI's or ACP's /compress): "
        "~9,000 tokens by its estimate"
    )
