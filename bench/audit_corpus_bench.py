"""Audit truth on real agent transcripts: attribution, per-category retention, audit time.

Reads the real transcripts of ``/work/shared/corpus`` (``--corpus`` or
``CTXLEDGER_CORPUS``; OpenAI chat format, see its README). When the folder is absent
(CI has only the project) it prints one ``skipped`` line and exits 0.

Each transcript is driven turn by turn through ``ContextService`` into a scratch
ledger (``--window`` tokens, 16,000 by default, every other setting at its default:
compression at 85 % of the window since the 64K floor is above it, a tail of 20 % of
that, the offline summarizer), as an agent with that window would have run it, so a
long one becomes a chain of several compactions. Then ``audit_chain`` is timed and
checked against an independent ground truth recomputed view by view from whole
messages (the idea of ``tests/helpers/debug_sessions.py``, re-implemented here so the
bench imports no test code): which compaction last had each fact in the view it
compacted and not in the view it made.

One JSON line per transcript (or its ``error``: a crash is reported, not hidden), then
one ``total`` line:

* ``facts``: facts the audit extracted from everything the chain's compactions rewrote;
* ``lost_now``: of those, facts the live view no longer states; ``attributed_pct``: the
  share of them the audit charges to exactly the compaction the ground truth names
  (must be 100);
* ``gt_dropped`` / ``missed`` / ``spurious``: facts each compaction dropped according to
  the ground truth, and how many of them its ``lost`` list misses or adds;
  ``zero_lost_but_dropped``: compactions reporting 0 lost while the ground truth says
  they dropped facts (must be 0);
* ``independent``: facts extracted from every original message of the chain that the
  live view no longer states, and how many the audit attributes (the issue's 22 %
  measure); the rest never were in a compacted view as the model saw it (a tool
  output stored outside the context is seen as its preview);
* ``categories``: per fact category, facts and how many the live view still states;
* ``audit_ms`` and ``audit_ms_per_compaction``: one ``audit_chain`` of the tip with
  the fact cache emptied first (a fresh ``ctxledger audit``); ``audit_warm_ms``: a
  second one (a server, or ``trace`` after ``audit``).

``--recall`` adds the fact-model recall on the whole corpus, measured against the
independent line extractor of ``bench/corpus_lines.py`` (the issue's 21 %/21 %/27 %/69 %).

    python bench/audit_corpus_bench.py [--corpus DIR] [--window 16000] [--limit N] [--recall]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import anyio

from ctxledger import CompressionConfig, ContextService, Ledger, audit_chain
from ctxledger.analysis.compactions import chain_compactions
from ctxledger.clock import SequentialIds, StepClock
from ctxledger.compressor.facts import extract_facts
from ctxledger.messages import JSON

try:
    from ctxledger.compressor.factmatch import Haystack, fact_text, written_windows
except ImportError:  # a checkout from before issue 17 (``--corpus`` on an old tree): its matching
    from ctxledger.compressor.factmatch import contains, normalize
    from ctxledger.tokens import message_text

    class Haystack:  # type: ignore[no-redef]
        def __init__(self, text: str) -> None:
            self.folded = normalize(text)

        def holds(self, kind: str, normalized: str, windows: bool = False) -> bool:
            return contains(self.folded, normalized)

    def written_windows(value: str) -> bool:
        return False

    def fact_text(message: Any) -> str:  # type: ignore[misc]
        return message_text(message, text_only=True)


HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = HERE.parent.parent / "shared" / "corpus"


def corpus_dir(arg: str | None) -> Path:
    return Path(arg or os.environ.get("CTXLEDGER_CORPUS") or DEFAULT_CORPUS)


def transcripts(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.json") if p.is_file())


def emit(data: dict[str, Any]) -> None:
    print(json.dumps(data), flush=True)


# --------------------------------------------------------------------------- driving


def turns(messages: list[JSON]) -> Iterator[list[JSON]]:
    """An assistant message with the tool results answering it, or one other message."""
    batch: list[JSON] = []
    for message in messages:
        if message.get("role") == "tool" and batch:
            batch.append(message)
            continue
        if batch:
            yield batch
        batch = [message]
    if batch:
        yield batch


async def drive(ledger: Ledger, messages: list[JSON], window: int) -> str:
    """Every turn appended through the service, with its preflight compaction; returns the tip."""
    svc = ContextService(ledger, config=ledger.config)
    system = [m for m in messages if m.get("role") == "system"]
    rest = [m for m in messages if m.get("role") != "system"]
    sid = await svc.start_session(
        model="corpus-model",
        context_length=window,
        system_prompt=str(system[0].get("content") or "") if system else None,
    )
    for batch in turns(rest):
        sid = (await svc.append(sid, batch)).session_id
        sid = (await svc.preflight(sid)).session_id
    return ledger.tip(sid)


# --------------------------------------------------------------------------- ground truth


class Views:
    """Whole-message views of a chain, facts extracted once per message (the ground truth)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._facts: dict[str, set[str]] = {}

    def _message_facts(self, mid: str) -> set[str]:
        got = self._facts.get(mid)
        if got is None:
            message = self.ledger.transcript.stored(mid).message
            got = self._facts[mid] = {f.normalized for f in extract_facts([message])}
        return got

    def present(self, ids: list[str], system: str | None) -> tuple[Haystack, set[str]]:
        stored = self.ledger.transcript.stored
        texts = [system or ""] + [fact_text(stored(m).message) for m in ids]
        facts: set[str] = set()
        for mid in ids:
            facts |= self._message_facts(mid)
        sys_msg = {"role": "assistant", "content": system or ""}
        facts |= {f.normalized for f in extract_facts([sys_msg])}
        return Haystack("\x00".join(texts)), facts


def _holds(view: tuple[Haystack, set[str]], normalized: str, kind: tuple[str, bool]) -> bool:
    """`kind`: the fact's kind and whether its path was written with a ``\\`` (the audit's
    :func:`~ctxledger.analysis.audit.split_kept` reads it so: ``C:\\app.pyé`` is no fact)."""
    return normalized in view[1] or view[0].holds(kind[0], normalized, kind[1])


def ground_truth(
    ledger: Ledger, tip: str, known: dict[str, tuple[str, bool]]
) -> tuple[dict[str, str | None], dict[str, set[str]]]:
    """(fact absent from the tip's view -> last compaction that dropped it,
    compaction -> every fact it dropped), for the facts of `known` (normalized ->
    (kind, whether written with a ``\\``))."""
    views = Views(ledger)
    last: dict[str, str | None] = {}
    dropped: dict[str, set[str]] = {}
    for record in chain_compactions(ledger, tip):
        view = ledger.transcript.session(record.session_id)
        before = views.present(list(view.live), view.system_prompt)
        after = views.present(
            [e.message_id for e in record.switch.layout], record.switch.system_prompt
        )
        gone = dropped.setdefault(record.compaction_id, set())
        for normalized, kind in known.items():
            if _holds(before, normalized, kind) and not _holds(after, normalized, kind):
                last[normalized] = record.compaction_id
                gone.add(normalized)
    tip_view = ledger.transcript.session(tip)
    now = views.present(list(tip_view.live), tip_view.system_prompt)
    absent = {n: last.get(n) for n, kind in known.items() if not _holds(now, n, kind)}
    return absent, dropped


def independent_facts(ledger: Ledger, tip: str, *, as_seen: bool) -> dict[str, tuple[str, bool]]:
    """normalized -> (kind, whether written with a ``\\``) of the facts of every
    original message appended to the chain, as the model saw it (`as_seen`: a tool
    output stored outside the context is its preview) or as it was appended; the
    shape :func:`ground_truth` reads."""
    chain = set(ledger.chains.chain(tip))
    transcript = ledger.transcript
    out: dict[str, tuple[str, bool]] = {}
    for mid, stored in transcript.state.messages.items():
        if stored.session_id in chain and stored.origin == "appended":
            message = transcript.stored(mid).message if as_seen else stored.message
            for fact in extract_facts([message]):
                out.setdefault(fact.normalized, _kind(fact))
    return out


# --------------------------------------------------------------------------- one transcript


def clear_fact_cache() -> None:
    """Empty the audit's fact cache (a checkout from before it: nothing to clear)."""
    try:
        from ctxledger.analysis.factviews import FACTS
    except ImportError:
        return
    FACTS.clear()


def measure(path: Path, window: int, tmp: Path, number: int) -> dict[str, Any]:
    data = json.loads(path.read_text())
    messages: list[JSON] = data["messages"]
    config = CompressionConfig()
    ledger = Ledger.open(
        tmp / f"{number:03d}.db",
        config=config,
        clock=StepClock(),
        ids=SequentialIds(),
        durability="normal",
    )
    try:
        start = time.perf_counter()
        tip = anyio.run(drive, ledger, messages, window)
        drive_s = time.perf_counter() - start
        clear_fact_cache()  # cold, as a fresh ``ctxledger audit`` (a duplicate transcript too)
        start = time.perf_counter()
        audit = audit_chain(ledger, tip)
        audit_ms = (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        audit_chain(ledger, tip)
        warm_ms = (time.perf_counter() - start) * 1000
        row = _figures(ledger, tip, audit, path.name, len(messages), drive_s, audit_ms)
        row["audit_warm_ms"] = round(warm_ms, 1)
        return row
    finally:
        ledger.close()


def _kind(fact: Any) -> tuple[str, bool]:
    return fact.kind, written_windows(fact.value)


def _figures(
    ledger: Ledger,
    tip: str,
    audit: Any,
    name: str,
    n_messages: int,
    drive_s: float,
    audit_ms: float,
) -> dict[str, Any]:
    known = {f.normalized: _kind(f) for c in audit.compactions for f in c.extracted}
    known.update({f.normalized: _kind(f) for f in audit.lost_now})
    absent, dropped = ground_truth(ledger, tip, known)
    # the compaction whose ``lost`` lists a fact last (``lost_now_at`` where it exists)
    charged: dict[str, str | None] = {}
    for c in audit.compactions:
        for fact in c.lost:
            charged[fact.normalized] = c.compaction_id
    attributed = sum(1 for n, cid in absent.items() if cid is not None and charged.get(n) == cid)
    missed = spurious = zero_but = gt_total = 0
    for c in audit.compactions:
        lost = {f.normalized for f in c.lost}
        truth = dropped.get(c.compaction_id, set())
        gt_total += len(truth)
        missed += len(truth - lost)
        spurious += len(lost - truth)
        zero_but += int(not lost and bool(truth))
    indep = independent_facts(ledger, tip, as_seen=True)
    indep_absent, _ = ground_truth(ledger, tip, indep)
    indep_charged = sum(
        1 for n, cid in indep_absent.items() if cid is not None and charged.get(n) == cid
    )
    full = independent_facts(ledger, tip, as_seen=False)
    unseen = sum(1 for n in full if n not in indep and n not in known)
    n = len(audit.compactions)
    return {
        "bench": "audit_corpus",
        "transcript": name,
        "messages": n_messages,
        "compactions": n,
        "facts": audit.facts,
        "lost_now": len(audit.lost_now),
        "gt_lost_now": len(absent),
        "attributed": attributed,
        "attributed_pct": round(100 * attributed / len(absent), 1) if absent else 100.0,
        "gt_dropped": gt_total,
        "missed": missed,
        "spurious": spurious,
        "zero_lost_but_dropped": zero_but,
        "independent_facts": len(indep),
        "independent_lost_now": len(indep_absent),
        "independent_attributed": indep_charged,
        "independent_dropped_by_a_compaction": sum(1 for c in indep_absent.values() if c),
        "facts_only_in_stored_outputs": unseen,
        "categories": {
            k: [v.facts, v.known_now] for k, v in getattr(audit, "categories", {}).items()
        },
        "drive_s": round(drive_s, 2),
        "audit_ms": round(audit_ms, 1),
        "audit_ms_per_compaction": round(audit_ms / n, 1) if n else 0.0,
    }


SUMMED = (
    "messages",
    "compactions",
    "facts",
    "lost_now",
    "gt_lost_now",
    "attributed",
    "gt_dropped",
    "missed",
    "spurious",
    "zero_lost_but_dropped",
    "independent_facts",
    "independent_lost_now",
    "independent_attributed",
    "independent_dropped_by_a_compaction",
    "facts_only_in_stored_outputs",
    "audit_ms",
    "audit_warm_ms",
)


def total(rows: list[dict[str, Any]], window: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "bench": "audit_corpus_total",
        "window": window,
        "transcripts": len(rows),
    }
    for key in SUMMED:
        out[key] = round(sum(r[key] for r in rows), 1)
    out["attributed_pct"] = (
        round(100 * out["attributed"] / out["gt_lost_now"], 1) if out["gt_lost_now"] else 100.0
    )
    out["chains_with_3plus_compactions"] = sum(1 for r in rows if r["compactions"] >= 3)
    for key in ("audit_ms", "audit_warm_ms"):
        out[f"{key}_per_compaction"] = (
            round(out[key] / out["compactions"], 1) if out["compactions"] else 0.0
        )
    cats: dict[str, list[int]] = {}
    for r in rows:
        for name, (facts, now) in r["categories"].items():
            acc = cats.setdefault(name, [0, 0])
            acc[0] += facts
            acc[1] += now
    out["categories"] = {
        name: {"facts": f, "known_now": k, "retention_pct": round(100 * k / f, 1) if f else 100.0}
        for name, (f, k) in sorted(cats.items())
    }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--corpus", default=None, help="folder of OpenAI-format transcripts")
    parser.add_argument("--window", type=int, default=16_000, help="context length in tokens")
    parser.add_argument("--limit", type=int, default=0, help="only the first N transcripts")
    parser.add_argument("--only", default="", help="only transcripts whose name contains this")
    parser.add_argument("--recall", action="store_true", help="also the fact-model recall")
    parser.add_argument("--recall-only", action="store_true", help="only the fact-model recall")
    parser.add_argument("--examples", type=int, default=3, help="missed lines shown per category")
    args = parser.parse_args(argv)
    folder = corpus_dir(args.corpus)
    files = transcripts(folder) if folder.is_dir() else []
    if not files:
        emit({"bench": "audit_corpus", "skipped": f"no corpus at {folder}"})
        return 0
    files = [p for p in files if args.only in p.name]
    if args.limit:
        files = files[: args.limit]
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    if args.recall_only:
        files_for_recall, files = files, []
    with tempfile.TemporaryDirectory() as tmp:
        for number, path in enumerate(files):
            try:
                row = measure(path, args.window, Path(tmp), number)
            except Exception as exc:  # a crash is a finding: report it, measure the rest
                errors.append(path.name)
                emit({"bench": "audit_corpus", "transcript": path.name, "error": repr(exc)})
                continue
            emit(row)
            rows.append(row)
    if rows or errors:
        emit({**total(rows, args.window), "errors": len(errors)})
    if args.recall or args.recall_only:
        sys.path.insert(0, str(HERE))
        from corpus_lines import recall_report

        emit(recall_report(files_for_recall if args.recall_only else files, args.examples))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
