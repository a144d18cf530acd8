"""What-if replay of ledgers written before today's checks: recorded values replay as
recorded. The old events are appended directly (as the code of the time wrote them):
a blank model name, a negative cost, settings past today's maxima."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from helpers.failing import SECRET, SecretSummarizer
from helpers.ledger_helpers import SMALL, deterministic_ledger
from helpers.service_rig import FlakySummarizer

from ctxledger.analysis.compactions import chain_compactions, chain_signature
from ctxledger.analysis.history import StartInfo, UsageStep, history
from ctxledger.analysis.replay import rebuild_check, verify_compactions
from ctxledger.analysis.whatif import _usage_report, replay_history, start_and_drive, whatif
from ctxledger.cli.main import cli
from ctxledger.compressor.summarizers import fallback
from ctxledger.compressor.summarizers.base import Summarizer
from ctxledger.demo.record import scripted_steps
from ctxledger.demo.synth import SessionSynth
from ctxledger.errors import InvalidInput
from ctxledger.events import ModelSwitched, SessionStarted, ToolsDeclared, UsageReported
from ctxledger.eventstore import AppendRequest
from ctxledger.ledger import Ledger
from ctxledger.runtime.service import ContextService
from ctxledger.usage import normalize_usage

#: legal before the ranges of session 30 (a count of 10^10 messages, a 30-year cooldown)
OLD_SETTINGS = {"hygiene_hard_message_limit": 10**10, "cooldown_generic": 10.0**9}


def _turn_with_usage(ledger: Ledger, sid: str, turn: int, **recorded: Any) -> None:
    """One ask and answer, then a usage report written as an older ctxledger wrote it
    (`recorded`: the raw report and fields today's checks would refuse)."""
    ledger.append_messages(
        sid,
        [
            {"role": "user", "content": f"turn {turn} " + "word " * 60},
            {"role": "assistant", "content": f"answer {turn} " + "ok " * 40},
        ],
    )
    shape, usage = normalize_usage({"prompt_tokens": 100 * (turn + 1), "completion_tokens": 5})
    event = UsageReported(**ledger.event_fields(sid), shape=shape, usage=usage, **recorded)
    ledger.append([AppendRequest(sid, [event], ledger.version(sid))])


def _old_ledger(path: Path) -> tuple[Ledger, str]:
    """A chain started with a blank model and old settings, usage reported with model ""
    and a negative cost, and a switch to a model named by blanks."""
    ledger = deterministic_ledger(path)
    sid = "old"
    started = SessionStarted(
        **ledger.event_fields(sid),
        model="  ",
        context_length=16_000,
        config={**SMALL.to_snapshot(), **OLD_SETTINGS},
    )
    ledger.append([AppendRequest(sid, [started], 0)])
    for turn in range(4):
        _turn_with_usage(ledger, sid, turn, raw={}, model="", cost_usd=-1.0)
    switched = ModelSwitched(
        **ledger.event_fields(sid),
        model=" ",
        context_length=16_000,
        previous_model="  ",
        previous_context_length=16_000,
    )
    ledger.append([AppendRequest(sid, [switched], ledger.version(sid))])
    return ledger, sid


def test_an_old_chain_with_blank_models_and_a_negative_cost_replays(tmp_path: Path) -> None:
    """The what-if re-sent model="" (and "  " at the start and the switch, and the
    negative cost) through today's checks: `InvalidInput` before any comparison."""
    ledger, sid = _old_ledger(tmp_path / "old.db")
    report = whatif(ledger, ledger.tip(sid))
    assert report.reproduces_recorded


def test_replay_config_blames_only_what_the_file_sets(tmp_path: Path) -> None:
    """`replay SID --config FILE` read the file over the recorded settings and range-checked
    them all: a recorded 10^10 was reported as an error in the user's file."""
    ledger, sid = _old_ledger(tmp_path / "old.db")
    ledger.close()
    fine, bad = tmp_path / "fine.toml", tmp_path / "bad.toml"
    fine.write_text("threshold = 0.6\n")
    bad.write_text("protect_last_n = 10000000000\n")
    db = str(tmp_path / "old.db")
    args = ["--db", db, "replay", sid, "--summarizer", "offline", "--config"]
    ok = CliRunner().invoke(cli, [*args, str(fine)])
    assert ok.exit_code == 0, ok.output
    refused = CliRunner().invoke(cli, [*args, str(bad)])
    assert refused.exit_code != 0
    assert "bad.toml: protect_last_n is out of range" in refused.output
    assert "hygiene_hard_message_limit" not in refused.output


def test_an_old_usage_report_today_refuses_replays_from_its_recorded_figures(
    tmp_path: Path,
) -> None:
    """Before 2026-11-24 a fractional count was taken (``int(100.5)``): the what-if re-sent
    the recorded raw report through today's checks and raised InvalidInput."""
    ledger = deterministic_ledger(tmp_path / "frac.db")
    sid = "frac"
    started = SessionStarted(
        **ledger.event_fields(sid), model="m", context_length=16_000, config=SMALL.to_snapshot()
    )
    ledger.append([AppendRequest(sid, [started], 0)])
    for turn in range(3):
        raw = {"prompt_tokens": 100 * (turn + 1) + 0.5, "completion_tokens": 5}
        _turn_with_usage(ledger, sid, turn, raw=raw)
    report = whatif(ledger, ledger.tip(sid))
    assert report.reproduces_recorded


def test_a_reported_zero_stays_no_count_and_a_count_stays_a_count() -> None:
    """A reported ``prompt_tokens: 0`` is no count (as live): the what-if passes it on
    unchanged, not rescaled to the what-if view; a real count rescaled below 1 stays 1."""
    zero = UsageStep(
        output_tokens=5,
        raw={"prompt_tokens": 0, "completion_tokens": 5},
        offset=-1_000,
        recorded_live=1_000,
        recorded_prompt=0,
    )
    assert _usage_report(zero, 1_800) == {"prompt_tokens": 0, "completion_tokens": 5}
    small = UsageStep(
        output_tokens=5,
        raw={"prompt_tokens": 10, "completion_tokens": 5},
        offset=-990,
        recorded_live=1_000,
        recorded_prompt=10,
    )
    assert _usage_report(small, 500)["prompt_tokens"] == 1


def _recorded_with(ledger: Ledger, summarizer: Summarizer) -> str:
    """A generated session (seed 8, 5 turns: one compaction, its fallback body cut to the
    budget) recorded through the service with `summarizer`: the tip."""
    synth = SessionSynth(8)
    start = StartInfo(
        session_id="ses_root",
        model="synth-coder-1",
        context_length=ledger.config.context_length or 128_000,
        system_prompt=synth.system_prompt(),
        tools=synth.tools(),
    )
    svc = ContextService(ledger, config=ledger.config, summarizer=summarizer)
    steps = scripted_steps(synth.turns(5))
    return anyio.run(lambda: start_and_drive(svc, start, steps)).session_id


def test_an_old_fallback_holding_a_raw_key_replays_and_its_what_if_says_what_differs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before session 32 a fallback's failure was redacted only in the summary's text, after
    its body was fitted to the budget after an opening note holding the raw key (50
    characters where "[REDACTED]" is 10). Replay and `replay --verify` read the stored text
    and still match; a what-if with the same failing summarizer fits the body after the
    redacted note: one more identifier fits, so compaction 1 differs in its summary (and
    the tokens after it) only, and the report says so. A failure quoting no secret
    reproduces exactly."""
    with monkeypatch.context() as old:  # the fallback as written before session 32
        old.setattr(fallback, "redact", lambda text: text)
        ledger = deterministic_ledger(None)
        tip = _recorded_with(ledger, SecretSummarizer("server"))
    (summary,) = [r.summary for r in chain_compactions(ledger, tip)]
    assert summary.fallback and SECRET in (summary.failure or "")
    assert SECRET not in summary.text and "[REDACTED]" in summary.text
    assert rebuild_check(ledger, tip).equal
    assert not verify_compactions(ledger, tip).drifted
    report = whatif(ledger, tip, summarizer=SecretSummarizer("server"))
    assert report.reproduction is not None
    assert report.reproduction.compactions == [1, 1]
    assert report.reproduction.matching_compactions == 0
    assert report.reproduction.differences[0] == (
        "compaction 1 differs (the first 0 match: inputs, summary, layout and tokens)"
    )
    with replay_history(history(ledger, tip), summarizer=SecretSummarizer("server")) as (
        scratch,
        result,
    ):
        (recorded,), (again,) = (
            chain_signature(ledger, tip),
            chain_signature(scratch, result.session_id),
        )
    differing = sorted(k for k in recorded if recorded[k] != again[k])
    assert differing == ["summary", "tokens"] and recorded["tokens"][0] == again["tokens"][0]
    note = recorded["summary"].partition("\n")[0]
    assert again["summary"].startswith(note + "\n") and "[REDACTED]" in note
    # the same session failing without a secret: the what-if reproduces it
    plain = deterministic_ledger(None)
    tip = _recorded_with(plain, FlakySummarizer("server"))
    assert whatif(plain, tip, summarizer=FlakySummarizer("server")).reproduces_recorded


def test_an_old_chain_holding_names_today_refuses_replays(tmp_path: Path) -> None:
    """Session 33 bounded names and refused control characters in them: the what-if
    (which starts the recorded session again, same id, and re-sends its usage reports
    and switches) raised InvalidInput on such an old chain; they replay as recorded."""
    ledger = deterministic_ledger(tmp_path / "names.db")
    sid = "old\n\u202e" + "x" * 1100
    started = SessionStarted(
        **ledger.event_fields(sid),
        model="gpt\x1b[31m\n" + "m" * 3000,
        title="t\nitle\u2066",
        context_length=16_000,
        config=SMALL.to_snapshot(),
    )
    ledger.append([AppendRequest(sid, [started], 0)])
    for turn in range(4):
        _turn_with_usage(ledger, sid, turn, raw={}, model="usage\x00model")
    switched = ModelSwitched(
        **ledger.event_fields(sid),
        model="switched\u202e",
        context_length=16_000,
        previous_model="gpt",
        previous_context_length=16_000,
    )
    ledger.append([AppendRequest(sid, [switched], ledger.version(sid))])
    assert whatif(ledger, ledger.tip(sid)).reproduces_recorded
    with pytest.raises(InvalidInput):  # (new input is still refused after the replay)
        ledger.start_session(model="m\n", context_length=16_000)


def _nulls(levels: int) -> Any:
    """A usage block of only nulls nesting `levels` levels (itself level 1)."""
    value: Any = None
    for _ in range(levels):
        value = {"n": value}
    return value


def test_a_tool_and_an_empty_usage_block_past_today_s_depth_replay_as_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recorded under a raised CTXLEDGER_MAX_JSON_DEPTH (or before session 41 bounded tools
    and usage): a tool and an all-null usage block 150 levels deep. The what-if counted
    the block against today's limit and called it an unrecognised shape (review M3)."""
    monkeypatch.setenv("CTXLEDGER_MAX_JSON_DEPTH", "200")
    ledger = deterministic_ledger(tmp_path / "deep.db")
    tool = {"type": "function", "function": {"name": "a", "parameters": _nulls(148)}}
    sid = ledger.start_session(model="m", context_length=16_000, tools=[tool])
    for turn in range(3):
        ledger.append_messages(
            sid,
            [
                {"role": "user", "content": f"turn {turn} " + "word " * 60},
                {"role": "assistant", "content": f"answer {turn} " + "ok " * 40},
            ],
        )
        ledger.report_usage(sid, _nulls(150))
    monkeypatch.delenv("CTXLEDGER_MAX_JSON_DEPTH")
    out = tmp_path / "whatif.db"
    assert whatif(ledger, ledger.tip(sid), out=out).reproduces_recorded
    replayed = Ledger.open(str(out))
    try:
        for kind in (UsageReported, ToolsDeclared):
            recorded = [r.event for r in ledger.store.read_all() if type(r.event) is kind]
            again = [r.event for r in replayed.store.read_all() if type(r.event) is kind]
            assert [_recorded_part(e) for e in again] == [_recorded_part(e) for e in recorded]
    finally:
        replayed.close()


def _recorded_part(event: Any) -> Any:
    """What a replay re-sends as recorded: a usage report's raw block, declared tools."""
    return event.raw if isinstance(event, UsageReported) else event.tools
