"""A what-if's loop warnings speak only of what it did not reproduce (session 38, review 1):
a recorded compaction the what-if matched is no reason to doubt it, and hygiene the
what-if ran under changed hygiene settings is the point of the what-if."""

from __future__ import annotations

from pathlib import Path

import anyio
import msgspec
from helpers.ledger_helpers import SMALL, deterministic_ledger

from ctxledger.analysis.whatif import whatif
from ctxledger.ledger.facade import Ledger
from ctxledger.runtime.service import ContextService


def _user(turn: int, words: int) -> dict[str, str]:
    return {"role": "user", "content": f"turn {turn} " + "word " * words}


async def _switched_after_an_answer(ledger: Ledger) -> str:
    """The what-if's own loop (hygiene, preflight after the user message), with a model
    switch after turn 4's final answer: it re-runs preflight, which compacts after a
    final answer, and the what-if replays it."""
    svc = ContextService(ledger, config=SMALL)
    sid = ledger.start_session(model="m", context_length=16_000, system_prompt="You help.")
    for turn in range(8):
        sid = (await svc.hygiene(sid)).session_id
        sid = (await svc.append(sid, [_user(turn, 700)])).session_id
        sid = (await svc.preflight(sid)).session_id
        live = ledger.transcript.total_tokens(svc.tip(sid))
        usage = {"prompt_tokens": live + 40, "completion_tokens": 5}
        sid = (await svc.report_usage(sid, usage, tool_calls=False)).session_id
        sid = (await svc.append(sid, [{"role": "assistant", "content": f"done {turn}"}])).session_id
        if turn == 4:
            sid = (await svc.switch_model(sid, "small", 6_000)).session_id
    return svc.tip(sid)


def test_a_reproduced_compaction_after_an_answer_is_no_warning(tmp_path: Path) -> None:
    ledger = deterministic_ledger(tmp_path / "l.db")
    repro = whatif(ledger, anyio.run(_switched_after_an_answer, ledger)).reproduction
    assert repro is not None and repro.exact and repro.matching_compactions >= 1
    assert not any("ran preflight" in w for w in repro.warnings), repro.warnings


async def _prompt_grows_in_the_run(ledger: Ledger) -> str:
    """An Agents SDK-like run (``per_run``: preflight at the run's read and after its final
    answer) whose dynamic instructions grow after tool results: the recorded prompt change
    re-runs preflight there, and the what-if replays it."""
    svc = ContextService(ledger, config=SMALL)
    sid = await svc.start_session(
        model="m", context_length=16_000, system_prompt="You help.", loop="per_run"
    )
    for turn in range(8):
        sid = (await svc.preflight(sid)).session_id
        sid = (await svc.append(sid, [_user(turn, 200)])).session_id
        usage = {"prompt_tokens": 1_000, "completion_tokens": 5}
        sid = (await svc.report_usage(sid, usage, tool_calls=True)).session_id
        call = {"id": f"c{turn}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        asked = {"role": "assistant", "content": None, "tool_calls": [call]}
        result = {"role": "tool", "tool_call_id": f"c{turn}", "content": "result " * 600}
        sid = (await svc.append(sid, [asked, result])).session_id
        prompt = "You help. " + "rule " * (400 * (turn + 1))
        sid = (await svc.set_system_prompt(sid, prompt)).session_id
        sid = (await svc.report_usage(sid, usage, tool_calls=False)).session_id
        sid = (await svc.append(sid, [{"role": "assistant", "content": f"done {turn}"}])).session_id
        sid = (await svc.preflight(sid)).session_id
    return svc.tip(sid)


def test_a_reproduced_compaction_after_tool_results_is_no_per_run_warning(
    tmp_path: Path,
) -> None:
    ledger = deterministic_ledger(tmp_path / "l.db")
    tip = anyio.run(_prompt_grows_in_the_run, ledger)
    report = whatif(ledger, tip)
    repro = report.reproduction
    assert repro is not None and repro.exact and repro.matching_compactions >= 1
    last_roles = [
        ledger.transcript.messages_of(ledger.transcript.live_ids(c.session_id)[-1:])[0]["role"]
        for c in report.recorded.compactions
    ]
    assert "tool" in last_roles  # (a compaction after tool results, reproduced)
    assert not any("ran preflight" in w for w in repro.warnings), repro.warnings


async def _hygiene_loop(ledger: Ledger) -> str:
    svc = ContextService(ledger, config=SMALL)
    sid = ledger.start_session(model="m", context_length=16_000, system_prompt="You help.")
    for turn in range(14):
        sid = (await svc.hygiene(sid)).session_id
        sid = (await svc.append(sid, [_user(turn, 500)])).session_id
        sid = (await svc.preflight(sid)).session_id
        live = ledger.transcript.total_tokens(svc.tip(sid))
        usage = {"prompt_tokens": live + 40, "completion_tokens": 5}
        sid = (await svc.report_usage(sid, usage, tool_calls=False)).session_id
        sid = (await svc.append(sid, [{"role": "assistant", "content": f"done {turn}"}])).session_id
    return svc.tip(sid)


def test_hygiene_under_changed_hygiene_settings_is_no_warning(tmp_path: Path) -> None:
    ledger = deterministic_ledger(tmp_path / "l.db")
    tip = anyio.run(_hygiene_loop, ledger)
    lower = msgspec.structs.replace(SMALL, hygiene_threshold=0.3)
    report = whatif(ledger, tip, config=lower)
    assert report.reproduction is not None and "hygiene_threshold" in report.config_changes
    assert not [c for c in report.recorded.compactions if c.trigger == "hygiene"]
    assert [c for c in report.whatif.compactions if c.trigger == "hygiene"]
    assert not any("hygiene compaction" in w for w in report.reproduction.warnings)
