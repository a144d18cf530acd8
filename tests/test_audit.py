"""Audit and trace: which facts each compaction kept, lost, and lost again at re-compression."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from helpers.ledger_helpers import deterministic_ledger, recorded_chain
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.analysis.audit import AuditedFact, audit_chain, audit_compaction, split_kept, trace
from ctxledger.analysis.compactions import chain_compactions, compactions_by_id, find_compaction
from ctxledger.cli.main import cli
from ctxledger.compressor.facts import find_paths, normalize
from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult
from ctxledger.errors import InvalidInput, UnknownCompaction
from ctxledger.ledger.compaction import compact
from ctxledger.ledger.facade import Ledger
from ctxledger.messages import content_text


def generated(path: Path, seed: int = 3, turns: int = 12) -> tuple[Ledger, str]:
    return recorded_chain(path, seed, turns)


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> tuple[Ledger, str]:
    ledger, tip = generated(tmp_path_factory.mktemp("audit") / "l.db")
    assert len(chain_compactions(ledger, tip)) >= 2
    return ledger, tip


class StubSummarizer:
    """Scripted summaries: each call gets the request's paths and returns the text to record."""

    kind = "stub"

    def __init__(self, *scripts: Callable[[list[str]], str]) -> None:
        self.scripts = list(scripts)
        self.seen: list[list[str]] = []

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        texts = [content_text(t) for t in request.turns] + [request.previous_summary or ""]
        paths = sorted({p for text in texts for p in find_paths(text)})
        self.seen.append(paths)
        return SummaryResult(text=self.scripts.pop(0)(paths), summarizer=self.kind)


def _turns(ledger: Ledger, sid: str, first: int, n: int) -> None:
    for i in range(first, first + n):
        ledger.append_messages(
            sid,
            [
                {
                    "role": "user",
                    "content": f"Please look at src/mod{i}/core.py and fix the bug number {i}.",
                },
                {
                    "role": "assistant",
                    "content": f"Fixed src/mod{i}/core.py: the loop now stops at line {i + 10}. "
                    + "The rest of the module was read and left as it was. " * 40,
                },
            ],
        )


def test_kept_plus_lost_is_extracted_and_kept_facts_are_in_the_summary(
    chain: tuple[Ledger, str],
) -> None:
    ledger, tip = chain
    report = audit_chain(ledger, tip)
    for a in report.compactions:
        assert {f.normalized for f in a.kept} | {f.normalized for f in a.lost} == {
            f.normalized for f in a.extracted
        }
        assert len(a.kept) + len(a.lost) == len(a.extracted)
        summary = normalize(
            next(
                r.summary.text
                for r in chain_compactions(ledger, tip)
                if r.compaction_id == a.compaction_id
            )
        )
        verbatim = {f.normalized for f in a.kept_verbatim}
        assert verbatim <= {f.normalized for f in a.kept}
        assert all(
            f.normalized in verbatim or f.normalized in summary or f.kind == "identifier"
            for f in a.kept
        )
        assert a.retention == round(len(a.kept) / len(a.extracted), 4)


def test_every_lost_fact_names_the_message_and_event_it_came_from(
    chain: tuple[Ledger, str],
) -> None:
    ledger, tip = chain
    messages = ledger.transcript.state.messages
    for a in audit_chain(ledger, tip).compactions:
        for fact in a.lost:
            assert fact.message_id is not None
            stored = messages[fact.message_id]
            assert (stored.session_id, stored.seq) == (fact.session_id, fact.seq)
            seq_event = next(r for r in ledger.store.read_all(fact.seq, fact.seq))
            assert getattr(seq_event.event, "message_id", None) == fact.message_id


def test_audit_of_one_compaction_equals_its_entry_in_the_chain_audit(
    chain: tuple[Ledger, str],
) -> None:
    ledger, tip = chain
    report = audit_chain(ledger, tip)
    second = report.compactions[1]
    assert audit_compaction(ledger, second.compaction_id) == second
    assert audit_compaction(ledger, second.compaction_id[:-2]) == second  # a unique prefix


def test_a_fact_a_later_summary_drops_is_lost_at_re_compression() -> None:
    ledger = deterministic_ledger()
    sid = ledger.start_session(model="m", context_length=16_000, system_prompt="You fix bugs.")
    _turns(ledger, sid, 0, 8)
    # the first summary keeps every path it saw; the second drops the first of those
    stub = StubSummarizer(
        lambda paths: "Fixed " + ", ".join(paths),
        lambda paths: "Fixed " + ", ".join(p for p in paths if p != stub.seen[0][0]),
    )
    first = anyio.run(lambda: compact(ledger, sid, stub))
    assert first.new_session_id is not None
    _turns(ledger, first.new_session_id, 8, 8)
    second = anyio.run(lambda: compact(ledger, first.new_session_id or "", stub))
    dropped = stub.seen[0][0]
    assert dropped in stub.seen[1]
    report = audit_chain(ledger, sid)
    losses = [x for x in report.lost_at_recompression if x.fact.value == dropped]
    assert len(losses) == 1
    loss = losses[0]
    assert (loss.kept_by, loss.lost_at, loss.recompression) == (
        first.compaction_id,
        second.compaction_id,
        2,
    )
    # still attributed to the original message, not to the summary that carried it
    assert ledger.transcript.state.messages[loss.fact.message_id or ""].origin == "appended"
    assert dropped in [f.value for f in report.compactions[1].lost_at_recompression]
    carried = {f.value for f in report.compactions[1].kept if f.source == "summary"}
    assert carried == {f.value for f in report.compactions[0].kept if f.kind == "path"} - {dropped}


@settings(max_examples=5)
@given(seed=st.integers(0, 10_000), turns=st.integers(6, 12))
def test_kept_plus_lost_equals_extracted_for_generated_chains(
    tmp_path_factory: pytest.TempPathFactory, seed: int, turns: int
) -> None:
    ledger, tip = generated(tmp_path_factory.mktemp("prop") / "l.db", seed, turns)
    report = audit_chain(ledger, tip)
    for a in report.compactions:
        assert sorted(map(str, [*a.kept, *a.lost])) == sorted(map(str, a.extracted))
    assert report.known_now + len(report.lost_now) == report.facts
    ledger.close()


def test_trace_follows_a_fact_through_the_chain(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    audit = audit_chain(ledger, tip).compactions[0]
    lost = next(f for f in audit.lost if f.kind != "ask")
    result = trace(ledger, tip, lost.value)
    assert lost.message_id in {a.message_id for a in result.appearances}
    assert result.compactions[0].status == "dropped"
    assert result.live == bool(result.live_message_ids) or result.live
    kept = next(f for f in audit.kept if f.kind != "ask")
    assert trace(ledger, tip, kept.value).compactions[0].status == "kept"
    assert trace(ledger, tip, "no-such-fact-anywhere-42").status == "never seen in this chain"


@pytest.mark.parametrize("bad", ["", "   "])
def test_trace_rejects_an_empty_fact(chain: tuple[Ledger, str], bad: str) -> None:
    ledger, tip = chain
    before = ledger.store.last_seq()
    with pytest.raises(InvalidInput, match="empty"):
        trace(ledger, tip, bad)
    assert ledger.store.last_seq() == before


def test_unknown_compaction_is_a_clear_error_and_appends_nothing(chain: tuple[Ledger, str]) -> None:
    ledger, _ = chain
    before = ledger.store.last_seq()
    with pytest.raises(UnknownCompaction, match="no compaction 'cmp_nope'"):
        audit_compaction(ledger, "cmp_nope")
    with pytest.raises(InvalidInput):
        audit_compaction(ledger, "")
    assert ledger.store.last_seq() == before


def test_cli_audit_json_has_extracted_kept_lost_per_compaction(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    db = ledger.store.path
    out = CliRunner().invoke(cli, ["--db", db, "audit", tip, "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert {"extracted", "kept", "lost", "retention"} <= set(data["compactions"][0])
    cid = data["compactions"][0]["compaction_id"]
    one = json.loads(CliRunner().invoke(cli, ["--db", db, "audit", cid, "--json"]).output)
    assert one["compaction_id"] == cid
    text = CliRunner().invoke(cli, ["--db", db, "audit", tip])
    assert text.exit_code == 0 and "retention" in text.output
    traced = CliRunner().invoke(cli, ["--db", db, "trace", tip, "src/", "--json"])
    assert traced.exit_code == 0 and json.loads(traced.output)["appearances"]


def test_cli_audit_unknown_reference_exits_2(chain: tuple[Ledger, str]) -> None:
    ledger, _ = chain
    db = ledger.store.path
    before = ledger.store.last_seq()
    out = CliRunner().invoke(cli, ["--db", db, "audit", "ses_nope"])
    assert out.exit_code == 2 and "error:" in out.output
    assert ledger.store.last_seq() == before


@pytest.mark.parametrize(
    "argv",
    [
        ["audit", ""],
        ["trace", "", "src/"],
        ["recall", "", "pytest"],
        ["diff", "", "ses_root"],
        ["pin", "", "msg_1"],
        ["undo", ""],
        ["expand", " "],
        ["replay", "", "--summarizer", "offline"],
    ],
)
def test_cli_empty_references_exit_2_and_append_nothing(
    chain: tuple[Ledger, str], argv: list[str]
) -> None:
    ledger, _ = chain
    before = ledger.store.last_seq()
    out = CliRunner().invoke(cli, ["--db", ledger.store.path, *argv])
    assert out.exit_code == 2 and out.output.startswith("error:") and "required" in out.output
    assert ledger.store.last_seq() == before


def test_trace_normalizes_a_path_or_quoted_query_like_the_facts() -> None:
    ledger = deterministic_ledger()
    sid = ledger.start_session(model="m", context_length=16_000)
    ledger.append_messages(
        sid,
        [
            {
                "role": "user",
                "content": "Run tests/test_x.py and keep the label 'blue moon' as it is.",
            },
            {"role": "assistant", "content": "Done."},
        ],
    )
    plain = trace(ledger, sid, "tests/test_x.py")
    assert plain.status == "in the live view" and plain.appearances
    for query in ("./tests/test_x.py", ".\\tests\\test_x.py", "tests/test_x.py/"):
        dotted = trace(ledger, sid, query)
        assert dotted.normalized == "tests/test_x.py" and dotted.status == plain.status
        assert dotted.appearances == plain.appearances
    quoted = trace(ledger, sid, '"blue moon"')
    assert quoted.normalized == "blue moon" and quoted.live and quoted.fact == '"blue moon"'
    with pytest.raises(InvalidInput, match="empty"):
        trace(ledger, sid, '""')


def test_audit_of_one_compaction_reads_its_chain_once(
    chain: tuple[Ledger, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctxledger.analysis.audit as audit_module

    ledger, tip = chain
    second = chain_compactions(ledger, tip)[1]
    expected = audit_compaction(ledger, second.compaction_id)
    reads: list[str] = []
    real = audit_module.chain_compactions
    monkeypatch.setattr(
        audit_module, "chain_compactions", lambda lg, sid: reads.append(sid) or real(lg, sid)
    )
    assert audit_compaction(ledger, second.compaction_id) == expected
    assert len(reads) == 1
    assert find_compaction(ledger, second.compaction_id[:-2]) == second
    assert compactions_by_id(ledger, tip)[second.compaction_id] == second


def test_split_kept_keeps_input_order_and_duplicates() -> None:
    def fact(value: str) -> AuditedFact:
        return AuditedFact(
            kind="path",
            value=value,
            normalized=normalize(value),
            message_id=None,
            session_id=None,
            seq=None,
            role="user",
            source="middle",
            first_compaction_id="cmp",
        )

    facts = [fact("b.py"), fact("a.py"), fact("c.py"), fact("a.py")]
    kept, lost = split_kept(facts, "Edited A.PY and b.py; a.pyc is something else")
    assert [f.value for f in kept] == ["b.py", "a.py", "a.py"] and [f.value for f in lost] == [
        "c.py"
    ]
    assert kept[1] is facts[1] and kept[2] is facts[3]


def test_cli_strips_references_once_at_the_boundary(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    db = ledger.store.path
    runner = CliRunner()
    cid = chain_compactions(ledger, tip)[0].compaction_id
    padded = json.loads(runner.invoke(cli, ["--db", db, "audit", f"  {tip}\n", "--json"]).output)
    assert padded == json.loads(runner.invoke(cli, ["--db", db, "audit", tip, "--json"]).output)
    assert (
        json.loads(runner.invoke(cli, ["--db", db, "audit", f" {cid} ", "--json"]).output)[
            "compaction_id"
        ]
        == cid
    )
    for argv in (
        ["trace", f" {tip} ", "src/"],
        ["recall", f" {tip} ", "pytest"],
        ["expand", f" {cid} "],
        ["chain", f" {tip} "],
        ["usage", f" {tip} "],
        ["show", f" {tip} "],
    ):
        out = runner.invoke(cli, ["--db", db, *argv, "--json"])
        assert out.exit_code == 0, (argv, out.output)


@pytest.mark.parametrize("args", [["audit", "cmp_nope"], ["diff", "cmp_nope", "cmp_nada"]])
def test_an_unknown_reference_is_neither_a_session_nor_a_compaction(
    tmp_path: Path, args: list[str]
) -> None:
    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        ledger.start_session(model="m", context_length=8000)
    result = CliRunner().invoke(cli, ["--db", str(db), *args])
    assert result.exit_code == 2, result.output
    assert "no session or compaction 'cmp_nope'" in result.output
