"""The audit tells the truth on multi-compaction chains (issue 17, points 1 and the "done when").

Every fact the audit knows that is absent from the live view is attributed to exactly
the compaction that last dropped it (checked against an independent view-by-view
ground truth), no compaction says "0 lost" while dropping facts, and ``trace`` names
the same compaction as ``audit``.
"""

from __future__ import annotations

import pytest
from helpers.debug_sessions import ForgetfulSummarizer, drive, ground_truth
from helpers.ledger_helpers import deterministic_ledger

from ctxledger.analysis.audit import audit_chain, trace
from ctxledger.analysis.compactions import chain_compactions
from ctxledger.analysis.factviews import split_summary
from ctxledger.compressor.markers import merge_delimiter, summary_end_marker, wrap_summary
from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.errors import SummarizerError
from ctxledger.ledger.facade import Ledger


def _chain(seed: int, forgetful: bool) -> tuple[Ledger, str]:
    ledger = deterministic_ledger()
    summarizer = ForgetfulSummarizer(seed) if forgetful else None
    return ledger, drive(ledger, seed, turns=40, summarizer=summarizer)


CASES = [(seed, forgetful) for seed in (1, 2, 3) for forgetful in (False, True)]


@pytest.fixture(
    scope="module",
    params=CASES,
    ids=[f"seed{s}-{'forgetful' if f else 'offline'}" for s, f in CASES],
)
def chain(request: pytest.FixtureRequest) -> tuple[Ledger, str]:
    ledger, tip = _chain(*request.param)
    assert len(chain_compactions(ledger, tip)) >= 3
    return ledger, tip


def test_the_task_is_the_only_user_message_and_holds_or_neighbours_every_summary(
    chain: tuple[Ledger, str],
) -> None:
    ledger, tip = chain
    records = chain_compactions(ledger, tip)
    # every re-summarizing compaction read the previous summary from the task's message
    assert all(r.summary.previous_summary_id for r in records[1:])
    merged = [e for r in records for e in r.switch.layout if e.origin == "merged"]
    assert merged, "the summaries merge into the task (the only user message)"


def test_every_lost_fact_is_attributed_to_the_compaction_that_dropped_it(
    chain: tuple[Ledger, str],
) -> None:
    ledger, tip = chain
    report = audit_chain(ledger, tip)
    known = {f.normalized: f.kind for a in report.compactions for f in a.extracted}
    truth = ground_truth(ledger, tip, known)
    attributed = {x.fact.normalized: x.lost_at for x in report.lost_now_at}
    assert set(attributed) == set(truth)
    assert truth, "the chain loses something"
    assert attributed == truth  # 100 %
    assert all(cid is not None for cid in attributed.values())


def test_no_compaction_reports_zero_lost_while_dropping_facts(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    report = audit_chain(ledger, tip)
    known = {f.normalized: f.kind for a in report.compactions for f in a.extracted}
    for a in report.compactions:
        record = next(
            r for r in chain_compactions(ledger, tip) if r.compaction_id == a.compaction_id
        )
        # the compaction's own ground truth: facts its view held and the next view lacks
        # (every fact the chain's audit knows, even one first extracted at a later compaction)
        dropped = _dropped_by(ledger, record, known)
        assert {f.normalized for f in a.lost} == dropped
        if dropped:
            assert a.retention < 1.0


def _dropped_by(ledger: Ledger, record: object, known: dict[str, str]) -> set[str]:
    from helpers.debug_sessions import _present

    stored = ledger.transcript.stored
    view = ledger.transcript.session(record.session_id)  # type: ignore[attr-defined]
    switch = record.switch  # type: ignore[attr-defined]
    before = _present([stored(m).message for m in view.live], view.system_prompt)
    after = _present([stored(e.message_id).message for e in switch.layout], switch.system_prompt)
    return {
        n
        for n, kind in known.items()
        if (n in before[1] or before[0].holds(kind, n))
        and not (n in after[1] or after[0].holds(kind, n))
    }


def test_trace_agrees_with_audit(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    report = audit_chain(ledger, tip)
    values: dict[str, int] = {}
    for x in report.lost_now_at:
        values[x.fact.value] = values.get(x.fact.value, 0) + 1
    checked = 0
    for x in report.lost_now_at[:10]:
        if values[x.fact.value] > 1:
            continue  # two kinds of one value: the trace picks one of them
        result = trace(ledger, tip, x.fact.value)
        assert result.normalized == x.fact.normalized
        assert result.status == f"lost at compaction {x.compaction_index} ({x.lost_at})"
        dropped = [s.compaction_id for s in result.compactions if s.status == "dropped"]
        lost_in = [
            a.compaction_id
            for a in report.compactions
            if x.fact in a.lost or any(f.normalized == x.fact.normalized for f in a.lost)
        ]
        assert dropped == lost_in
        checked += 1
    assert checked >= 4


def test_a_kept_fact_traces_as_live(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    report = audit_chain(ledger, tip)
    lost = {x.fact.normalized for x in report.lost_now_at}
    still = [f for a in report.compactions for f in a.kept if f.normalized not in lost]
    assert still
    assert trace(ledger, tip, still[-1].value).status == "in the live view"


@pytest.mark.parametrize("order", ["summary_first", "original_first"])
def test_a_summary_is_found_in_a_merged_message_in_either_order(order: str) -> None:
    original = "Fix pydicom/config.py: use_DS_decimal must default to False."
    block = wrap_summary("## Active Task\nfix the date parser in pydicom/valuerep.py")
    if order == "summary_first":
        text = block + merge_delimiter() + original
    else:
        text = original + "\n\n" + block
    split = split_summary(text)
    assert split is not None
    body, rest = split
    assert "pydicom/valuerep.py" in body and "pydicom/config.py" not in body
    assert rest == original and summary_end_marker() not in rest
    assert split_summary(original) is None


class _FailsEveryOtherTime:
    """The offline summary, except that every second call times out (a fallback summary)."""

    kind = "flaky"

    def __init__(self) -> None:
        self.calls = 0
        self.inner = OfflineSummarizer()

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.calls += 1
        if self.calls % 2 == 0:
            raise SummarizerError("model timed out", failure_class="timeout")
        return await self.inner.summarize(request)


def test_a_chain_with_fallback_summaries_is_attributed_the_same_way() -> None:
    ledger = deterministic_ledger()
    tip = drive(ledger, 4, turns=40, summarizer=_FailsEveryOtherTime())
    records = chain_compactions(ledger, tip)
    assert [r.summary.fallback for r in records][:4] == [False, True, False, True]
    report = audit_chain(ledger, tip)
    known = {f.normalized: f.kind for a in report.compactions for f in a.extracted}
    truth = ground_truth(ledger, tip, known)
    assert truth and {x.fact.normalized: x.lost_at for x in report.lost_now_at} == truth
    values = [x.fact.value for x in report.lost_now_at]
    unique = [x for x in report.lost_now_at if values.count(x.fact.value) == 1][:6]
    assert len(unique) >= 4
    for x in unique:
        status = trace(ledger, tip, x.fact.value).status
        assert status == f"lost at compaction {x.compaction_index} ({x.lost_at})"
