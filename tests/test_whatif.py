"""What-if replay: a recorded chain's history re-run under another configuration."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import anyio
import msgspec
import pytest
from click.testing import CliRunner
from helpers.ledger_helpers import SMALL, deterministic_ledger
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.analysis.compactions import chain_signature
from ctxledger.analysis.diff import diff
from ctxledger.analysis.whatif import (
    AppendStep,
    StartInfo,
    Step,
    UsageStep,
    history,
    replay_history,
    scripted_steps,
    start_and_drive,
    whatif,
    whatif_report,
)
from ctxledger.cli.main import cli
from ctxledger.demo.record import record_generated
from ctxledger.demo.synth import SessionSynth
from ctxledger.errors import InvalidInput
from ctxledger.events import MessageAppended, UsageReported
from ctxledger.ledger.facade import Ledger
from ctxledger.runtime.service import ContextService

#: the module's recorded chain (the ``chain`` fixture in conftest.py)
CHAIN_SEED = 21
CHAIN_FOCUS_AT = {6: "tests"}


@settings(max_examples=5)
@given(seed=st.integers(0, 10_000), turns=st.integers(4, 12), manual=st.integers(0, 11))
def test_what_if_with_the_recorded_config_reproduces_the_recorded_chain(
    tmp_path_factory: pytest.TempPathFactory, seed: int, turns: int, manual: int
) -> None:
    ledger = deterministic_ledger(tmp_path_factory.mktemp("repro") / "l.db")
    tip = record_generated(ledger, seed=seed, turns=turns, focus_at={manual: None})
    report = whatif(ledger, tip)
    assert report.reproduces_recorded
    assert report.config_changes == {}
    assert len(report.whatif.compactions) == len(report.recorded.compactions)
    assert report.whatif.tokens_sent == report.recorded.tokens_sent
    assert [(t.recorded, t.whatif) for t in report.turns] == [
        (t.recorded, t.recorded) for t in report.turns
    ]
    ledger.close()


def test_the_original_ledger_is_only_read(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    before = list(ledger.store.read_all())
    whatif(ledger, tip, config=SMALL.replace(target_ratio=0.5))
    assert list(ledger.store.read_all()) == before


def test_another_config_gives_another_chain_and_says_what_changed(
    chain: tuple[Ledger, str],
) -> None:
    ledger, tip = chain
    report = whatif(ledger, tip, config=SMALL.replace(target_ratio=0.5))
    assert report.config_changes == {"target_ratio": [0.2, 0.5]}
    assert not report.reproduces_recorded
    assert report.whatif.compactions != report.recorded.compactions
    assert len(report.turns) == 12 and report.whatif.model_calls == report.recorded.model_calls
    assert 0.0 <= report.whatif.retention <= 1.0 and report.whatif.facts > 0
    manual = [c for c in report.whatif.compactions if c.trigger == "manual"]
    assert len(manual) == 1  # the recorded /compress is replayed, automatic ones are re-decided


def test_history_keeps_message_ids_batches_and_user_turns(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    hist = history(ledger, tip)
    appends = [s for s in hist.steps if isinstance(s, AppendStep)]
    ids = [mid for s in appends for mid in s.message_ids or []]
    assert len(ids) == len(set(ids)) == len(hist.message_ids)
    assert sum(s.user_turn for s in appends) == 12
    assert all(
        isinstance(s, UsageStep) and s.offset == 0 for s in hist.steps if isinstance(s, UsageStep)
    )
    assert hist.config == SMALL


def test_history_lists_the_message_ids_in_log_order(chain: tuple[Ledger, str]) -> None:
    """A frozenset before: its encoding's order changed from run to run (string hashing)."""
    ledger, tip = chain
    chain_ids = set(ledger.chains.chain(tip))
    logged = [
        rec.event.message_id
        for rec in ledger.store.read_all()
        if isinstance(rec.event, MessageAppended) and rec.event.session_id in chain_ids
    ]
    hist = history(ledger, tip)
    assert hist.message_ids == tuple(logged)


def test_a_provider_count_offset_is_kept_when_the_view_changes(tmp_path: Path) -> None:
    """A provider that counts 300 tokens more than we do is replayed as counting 300 more."""
    ledger = deterministic_ledger(tmp_path / "o.db")
    synth = SessionSynth(2, big_outputs=False)
    steps = [
        s if not isinstance(s, UsageStep) else UsageStep(output_tokens=s.output_tokens, offset=300)
        for s in scripted_steps(synth.turns(8))
    ]
    start = StartInfo(
        session_id="ses_o", model="m", context_length=16_000, system_prompt=synth.system_prompt()
    )
    svc = ContextService(ledger, config=SMALL)
    anyio.run(lambda: start_and_drive(svc, start, steps))
    hist = history(ledger, "ses_o")
    assert {s.offset for s in hist.steps if isinstance(s, UsageStep)} == {300}
    assert whatif(ledger, "ses_o").reproduces_recorded
    other = whatif(
        ledger,
        "ses_o",
        config=SMALL.replace(protect_last_n=4, tail_min_messages=3, target_ratio=0.1),
    )
    sent = [t.whatif for t in other.turns]
    assert sent != [t.recorded for t in other.turns]


def test_out_keeps_the_scratch_ledger_for_a_diff(chain: tuple[Ledger, str], tmp_path: Path) -> None:
    ledger, tip = chain
    out = tmp_path / "kept.db"
    report = whatif(ledger, tip, out=out)
    assert out.exists() and report.out == str(out)
    with Ledger.open(out) as kept:
        assert chain_signature(kept, report.whatif.tip) == chain_signature(ledger, tip)
        assert diff(ledger, tip, report.whatif.tip, b_ledger=kept).changes == []
    with pytest.raises(InvalidInput, match="already exists"):
        whatif(ledger, tip, out=out)


def test_cli_replay_what_if(chain: tuple[Ledger, str], tmp_path: Path) -> None:
    ledger, tip = chain
    db = ledger.store.path
    toml = tmp_path / "other.toml"
    toml.write_text("context_length = 16000\nthreshold_floor_tokens = 0\ntarget_ratio = 0.5\n")
    runner = CliRunner()
    out = runner.invoke(cli, ["--db", db, "replay", tip, "--config", str(toml), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["config_changes"] == {"target_ratio": [0.2, 0.5]}
    assert {"compactions", "tokens_sent", "summarizer_tokens", "retention"} <= set(data["whatif"])
    text = runner.invoke(cli, ["--db", db, "replay", tip, "--summarizer", "offline"])
    assert text.exit_code == 0 and "reproduces the recorded chain" in text.output
    kept = tmp_path / "kept.db"
    assert runner.invoke(cli, ["--db", db, "replay", tip, "--out", str(kept)]).exit_code == 0
    root = ledger.chains.root(tip)  # the what-if chain starts from the recorded root id
    kept_tip = json.loads(runner.invoke(cli, ["--db", str(kept), "chain", root, "--json"]).output)[
        "tip"
    ]
    compared = runner.invoke(
        cli, ["--db", db, "diff", tip, kept_tip, "--b-db", str(kept), "--json"]
    )
    assert compared.exit_code == 0 and json.loads(compared.output)["changes"] == []


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--verify", "--summarizer", "offline"], "--verify checks the recorded chain"),
        (["--out", "EXISTING"], "already exists"),
        (["--config", "BADTOML"], "unknown setting"),
    ],
)
def test_cli_what_if_bad_input_exits_2(
    chain: tuple[Ledger, str], tmp_path: Path, extra: list[str], match: str
) -> None:
    ledger, tip = chain
    existing = tmp_path / "exists.db"
    existing.write_text("")
    bad = tmp_path / "bad.toml"
    bad.write_text("no_such_setting = 1\n")
    argv = [a.replace("EXISTING", str(existing)).replace("BADTOML", str(bad)) for a in extra]
    before = ledger.store.last_seq()
    out = CliRunner().invoke(cli, ["--db", ledger.store.path, "replay", tip, *argv])
    assert out.exit_code == 2 and match in out.output
    assert ledger.store.last_seq() == before


def test_cli_diff_config_reads_the_history_once_and_builds_no_report(
    chain: tuple[Ledger, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whatif_module = importlib.import_module(
        "ctxledger.analysis.whatif"
    )  # the package's `whatif` is the function

    ledger, tip = chain
    reads: list[str] = []
    real_history = whatif_module.history
    monkeypatch.setattr(
        whatif_module, "history", lambda lg, sid: reads.append(sid) or real_history(lg, sid)
    )

    def no_report(*args: object, **kwargs: object) -> None:
        raise AssertionError("diff --config must not build a what-if report")

    monkeypatch.setattr(whatif_module, "chain_report", no_report)
    toml = tmp_path / "other.toml"
    toml.write_text("context_length = 16000\nthreshold_floor_tokens = 0\ntarget_ratio = 0.5\n")
    out = CliRunner().invoke(
        cli, ["--db", ledger.store.path, "diff", tip, "--config", str(toml), "--json"]
    )
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["changes"] and len(reads) == 1
    same = CliRunner().invoke(
        cli, ["--db", ledger.store.path, "diff", tip, "--summarizer", "offline", "--json"]
    )
    assert same.exit_code == 0 and json.loads(same.output)["changes"] == [] and len(reads) == 2


def test_cli_replay_what_if_reads_the_history_once(
    chain: tuple[Ledger, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    whatif_module = importlib.import_module(
        "ctxledger.analysis.whatif"
    )  # the package's `whatif` is the function

    ledger, tip = chain
    reads: list[str] = []
    real_history = whatif_module.history
    monkeypatch.setattr(
        whatif_module, "history", lambda lg, sid: reads.append(sid) or real_history(lg, sid)
    )
    out = CliRunner().invoke(
        cli, ["--db", ledger.store.path, "replay", tip, "--summarizer", "offline", "--json"]
    )
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["reproduces_recorded"] and len(reads) == 1


def test_replay_history_and_whatif_report_make_the_whatif_report(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    hist = history(ledger, tip)
    assert hist.session_id == tip
    with replay_history(hist) as (scratch, result):
        report = whatif_report(ledger, hist, scratch, result)
        assert scratch.tip(result.session_id) == report.whatif.tip
    assert report == whatif(ledger, tip)


def _told(steps: list[Step], *, unreported_every: int = 0) -> list[Step]:
    """`steps` with each usage report saying whether its response asked for tools (the
    assistant message appended right after it); every `unreported_every`-th report
    carries no usage."""
    told: list[Step] = []
    reports = 0
    for step, after in zip(steps, [*steps[1:], None], strict=True):
        if isinstance(step, UsageStep) and isinstance(after, AppendStep):
            reports += 1
            unreported = unreported_every and reports % unreported_every == 0
            step = msgspec.structs.replace(
                step,
                tool_calls=bool(after.messages[0].get("tool_calls")),
                **({"raw": {}, "reported": False} if unreported else {}),
            )
        told.append(step)
    return told


def _recorded(tmp_path: Path, steps: list[Step], system_prompt: str) -> Ledger:
    ledger = deterministic_ledger(tmp_path / "t.db")
    start = StartInfo(
        session_id="ses_t", model="m", context_length=16_000, system_prompt=system_prompt
    )
    svc = ContextService(ledger, config=SMALL)
    anyio.run(lambda: start_and_drive(svc, start, steps))
    return ledger


def test_a_chain_whose_final_answers_were_said_is_reproduced(tmp_path: Path) -> None:
    """Review fix B: ``tool_calls=False`` is recorded and replayed, so the what-if does not
    check in the loop after final answers that the live run left alone."""
    synth = SessionSynth(3, big_outputs=False)
    ledger = _recorded(tmp_path, _told(scripted_steps(synth.turns(30))), synth.system_prompt())
    hist = history(ledger, "ses_t")
    said = {s.tool_calls for s in hist.steps if isinstance(s, UsageStep)}
    assert said == {True, False}
    report = whatif(ledger, "ses_t")
    assert report.recorded.compactions and report.reproduces_recorded
    ledger.close()


def test_a_response_without_usage_is_replayed_as_one(tmp_path: Path) -> None:
    """Under another config the what-if view differs; a recorded response without usage is
    replayed as one (never as a count of 0, which would be taken for a real count)."""
    synth = SessionSynth(3, big_outputs=False)
    steps = _told(scripted_steps(synth.turns(30)), unreported_every=3)
    ledger = _recorded(tmp_path, steps, synth.system_prompt())
    hist = history(ledger, "ses_t")
    assert False in {s.reported for s in hist.steps if isinstance(s, UsageStep)}
    config = SMALL.replace(protect_last_n=4, tail_min_messages=3, target_ratio=0.1)
    with replay_history(hist, config=config) as (scratch, _):
        shapes = [
            (rec.event.shape, rec.event.asked_for_tools)
            for rec in scratch.store.read_all()
            if isinstance(rec.event, UsageReported)
        ]
    recorded = [
        (rec.event.shape, rec.event.asked_for_tools)
        for rec in ledger.store.read_all()
        if isinstance(rec.event, UsageReported)
    ]
    assert [s for s, _ in shapes].count("none") == [s for s, _ in recorded].count("none") > 0
    assert [t for _, t in shapes] == [t for _, t in recorded]
    ledger.close()
