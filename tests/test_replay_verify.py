"""replay --verify: re-plan every recorded compaction, report drift per compaction and its cause."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from helpers.ledger_helpers import recorded_chain
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.analysis.compactions import chain_compactions
from ctxledger.analysis.replay import verify_compactions
from ctxledger.cli.main import cli
from ctxledger.events import Event, SessionSwitched
from ctxledger.eventstore.sqlite import SQLiteEventStore
from ctxledger.ledger.facade import Ledger


def generated(path: Path, seed: int = 8, turns: int = 12) -> tuple[Ledger, str]:
    return recorded_chain(path, seed, turns)


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> tuple[Ledger, str]:
    ledger, tip = generated(tmp_path_factory.mktemp("verify") / "l.db")
    assert len(chain_compactions(ledger, tip)) >= 2
    return ledger, tip


def copy_log(source: Ledger, target: Path, alter: Callable[[Event], Event]) -> Ledger:
    """A fresh log with every event of `source`, in order, each passed through `alter`."""
    store = SQLiteEventStore(target, durability="normal")
    for rec in source.store.read_all():
        store.append(rec.stream, [alter(rec.event)], None)
    return Ledger(store)


def alter_compaction(compaction_id: str, **changes: object) -> Callable[[Event], Event]:
    def alter(event: Event) -> Event:
        if isinstance(event, SessionSwitched) and event.compaction_id == compaction_id:
            return msgspec.structs.replace(event, **changes)
        return event

    return alter


@settings(max_examples=5)
@given(seed=st.integers(0, 10_000), turns=st.integers(6, 12))
def test_an_untouched_log_never_reports_drift(
    tmp_path_factory: pytest.TempPathFactory, seed: int, turns: int
) -> None:
    ledger, tip = generated(tmp_path_factory.mktemp("untouched") / "l.db", seed, turns)
    report = verify_compactions(ledger, tip)
    assert len(report.compactions) == len(chain_compactions(ledger, tip))
    assert not report.drifted and all(c.cause is None for c in report.compactions)
    ledger.close()


def test_a_changed_config_in_one_recorded_plan_is_reported_on_exactly_that_compaction(
    chain: tuple[Ledger, str], tmp_path: Path
) -> None:
    ledger, tip = chain
    target = chain_compactions(ledger, tip)[0]
    config = {**target.switch.config, "protect_first_n": 6}
    copy = copy_log(
        ledger, tmp_path / "copy.db", alter_compaction(target.compaction_id, config=config)
    )
    before = list(copy.store.read_all())
    report = verify_compactions(copy, tip)
    drifted = [c for c in report.compactions if c.drift]
    assert [c.compaction_id for c in drifted] == [target.compaction_id]
    check = drifted[0]
    assert check.cause == "config"
    assert check.config_changes == {"protect_first_n": [6, 3]}
    assert any(
        d.field == "plan.compress_start" and "head boundary moved" in d.explanation
        for d in check.drift
    )
    assert list(copy.store.read_all()) == before  # recorded events are never rewritten
    copy.close()


def test_an_imported_sessions_input_digest_is_not_a_config_change(
    chain: tuple[Ledger, str], tmp_path: Path
) -> None:
    """``import_sha256`` on an imported session's start is no setting: it showed among
    the config changes of a drifted compaction (s40 review, LOW-6), as ``agent_loop``
    would without its strip."""
    from ctxledger.events import SessionStarted
    from ctxledger.ledger.spec import IMPORT_DIGEST

    ledger, tip = chain
    target = chain_compactions(ledger, tip)[0]
    config = {**target.switch.config, "protect_first_n": 6}
    altered = alter_compaction(target.compaction_id, config=config)

    def alter(event: Event) -> Event:
        if isinstance(event, SessionStarted) and event.session_id == target.switch.session_id:
            return msgspec.structs.replace(event, config={**event.config, IMPORT_DIGEST: "ab"})
        if isinstance(event, SessionStarted) and event.session_id == target.switch.new_session_id:
            return msgspec.structs.replace(event, config=dict(config))
        return altered(event)

    copy = copy_log(ledger, tmp_path / "copy.db", alter)
    check = next(c for c in verify_compactions(copy, tip).compactions if c.drift)
    assert check.cause == "config" and check.config_changes == {"protect_first_n": [6, 3]}
    copy.close()


def test_a_plan_no_config_explains_is_blamed_on_the_algorithm(
    chain: tuple[Ledger, str], tmp_path: Path
) -> None:
    ledger, tip = chain
    target = chain_compactions(ledger, tip)[1]
    plan = {**target.switch.plan, "compress_end": target.switch.plan["compress_end"] - 2}
    copy = copy_log(ledger, tmp_path / "copy.db", alter_compaction(target.compaction_id, plan=plan))
    check = next(
        c
        for c in verify_compactions(copy, tip).compactions
        if c.compaction_id == target.compaction_id
    )
    assert check.cause == "algorithm" and check.config_changes == {}
    moved = next(d for d in check.drift if d.field == "plan.compress_end")
    assert moved.explanation.startswith("tail boundary moved from index")
    copy.close()


def test_cli_verify_reports_drift_and_exits_1(chain: tuple[Ledger, str], tmp_path: Path) -> None:
    ledger, tip = chain
    target = chain_compactions(ledger, tip)[0]
    config = {**target.switch.config, "protect_first_n": 6}
    copy_log(
        ledger, tmp_path / "copy.db", alter_compaction(target.compaction_id, config=config)
    ).close()
    runner = CliRunner()
    out = runner.invoke(
        cli, ["--db", str(tmp_path / "copy.db"), "replay", tip, "--verify", "--json"]
    )
    assert out.exit_code == 1
    data = json.loads(out.output)
    causes = {c["compaction_id"]: c["cause"] for c in data["compactions"]}
    assert (
        causes[target.compaction_id] == "config"
        and list(causes.values()).count(None) == len(causes) - 1
    )
    text = runner.invoke(cli, ["--db", str(tmp_path / "copy.db"), "replay", tip, "--verify"])
    assert (
        text.exit_code == 1 and "drift (config)" in text.output and "protect_first_n" in text.output
    )
    clean = runner.invoke(cli, ["--db", ledger.store.path, "replay", tip, "--verify"])
    assert clean.exit_code == 0 and "no drift" in clean.output
