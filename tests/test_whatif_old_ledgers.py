"""What-if replay of ledgers written before today's checks: recorded values replay as
recorded. The old events are appended directly (as the code of the time wrote them):
a blank model name, a negative cost, settings past today's maxima."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner
from helpers.ledger_helpers import SMALL, deterministic_ledger

from ctxledger.analysis.history import UsageStep
from ctxledger.analysis.whatif import _usage_report, whatif
from ctxledger.cli.main import cli
from ctxledger.events import ModelSwitched, SessionStarted, UsageReported
from ctxledger.eventstore import AppendRequest
from ctxledger.ledger import Ledger
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
