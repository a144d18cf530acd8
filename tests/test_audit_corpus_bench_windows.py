"""``bench/audit_corpus_bench.py``'s ground truth reads a Windows-written path as the audit
does (``split_kept`` passes :func:`~ctxledger.compressor.factmatch.written_windows`):
review s34 #5, the bench called ``holds`` without it."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import audit_corpus_bench  # noqa: E402

from ctxledger.compressor.factmatch import Haystack, retention  # noqa: E402
from ctxledger.compressor.facts import extract_facts  # noqa: E402


def test_a_windows_path_glued_to_a_letter_is_absent_for_the_bench_as_for_the_audit() -> None:
    fact = next(
        f
        for f in extract_facts([{"role": "user", "content": "edit src\\app.py"}])
        if f.kind == "path"
    )
    text = "the summary names src\\app.pyé only"
    kind = audit_corpus_bench._kind(fact)
    assert kind == ("path", True)
    held = audit_corpus_bench._holds((Haystack(text), set()), fact.normalized, kind)
    assert held is False
    assert retention([fact], text) == ([], [fact])  # as the audit (split_kept) reads it


def test_the_independent_facts_carry_the_shape_ground_truth_reads(tmp_path: Path) -> None:
    """``independent_facts`` hands ``ground_truth`` (kind, written with a ``\\``) pairs,
    not bare kinds (a bare ``"path"`` was read as kind ``"p"``, Windows ``"a"``)."""
    from ctxledger import Ledger
    from ctxledger.clock import SequentialIds, StepClock

    ledger = Ledger.open(str(tmp_path / "l.db"), clock=StepClock(), ids=SequentialIds())
    try:
        sid = ledger.start_session(model="m", context_length=16_000, system_prompt="s")
        texts = ["I ran cat src/app.py", "then edit C:\\work\\main.py", "ok"]
        ledger.append_messages(sid, [{"role": "user", "content": t} for t in texts])
        indep = audit_corpus_bench.independent_facts(ledger, sid, as_seen=True)
        expected = {
            f.normalized: audit_corpus_bench._kind(f)
            for t in texts
            for f in extract_facts([{"role": "user", "content": t}])
        }
        assert indep == expected
        assert ("path", True) in indep.values() and ("path", False) in indep.values()
        absent, _ = audit_corpus_bench.ground_truth(ledger, sid, indep)
        assert absent == {}  # every fact is still in the live view
    finally:
        ledger.close()
