"""A ledger recorded before session 31 reopens and replays as its writer decided.

Session 31 changed what a model switch or a window the provider stated does to the
compression guards (hermes-agent 0.19's ``update_model``). The rule is versioned per
event (``ModelSwitched`` / ``ContextLimitLearned`` schema 2, ``scoped_guards``): rows
stored at schema 1 keep the old meaning. ``tests/golden/ledger_guard_rules.db`` was
written by main before the change (recipe: ``tests/golden/make_guard_rules_ledger.py``)
with a chain blocked by strikes across a stated window, one with a fallback streak and
a cooldown across a switch to the same model with another window and then to another
model, and one with a cooldown across a switch to another model. Today's code must fold
every chain to the states that main folded (after every event), give the same guard
verdicts, and reproduce the strikes chain exactly in a what-if.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgspec
from golden.make_guard_rules_ledger import CHAINS, CONFIG, LISTED, digest, states

from ctxledger.analysis.whatif import whatif
from ctxledger.clock import SequentialIds
from ctxledger.events import ContextLimitLearned, ModelSwitched, decode_event, encode_event
from ctxledger.ledger.facade import Ledger
from ctxledger.runtime.service import ContextService

GOLDEN = Path(__file__).parent / "golden" / "ledger_guard_rules.db"
FACTS = json.loads((Path(__file__).parent / "golden" / "ledger_guard_rules.json").read_text())


def reopened(tmp_path: Path) -> Ledger:
    path = tmp_path / "old.db"
    shutil.copyfile(GOLDEN, path)
    return Ledger.open(path, config=CONFIG, ids=SequentialIds("n"))


def test_old_window_changes_fold_as_their_writer_folded_them(tmp_path: Path) -> None:
    ledger = reopened(tmp_path)
    try:
        assert ledger.store.verify().ok
        svc = ContextService(ledger, config=CONFIG)
        for root in CHAINS:
            facts = FACTS["chains"][root]
            folded = states(ledger, root)
            assert [row for row in folded if row[1] in LISTED] == facts["listed"], root
            assert digest(folded) == facts["states_sha256"], root
            tip = ledger.tip(root)
            assert tip == facts["tip"]
            assert list(svc.tracker.guard(tip, FACTS["now"])) == facts["guard"], root
            assert msgspec.to_builtins(svc.tracker.rebuilt(tip)) == folded[-1][2]
    finally:
        ledger.close()


def test_a_whatif_of_an_old_ledger_still_reproduces_it_exactly(tmp_path: Path) -> None:
    ledger = reopened(tmp_path)
    try:
        report = whatif(ledger, "ses_strikes")
    finally:
        ledger.close()
    facts = FACTS["whatif_strikes"]
    assert facts["exact"] and report.reproduces_recorded
    assert list(report.reproduction.compactions) == facts["compactions"]
    assert report.reproduction.turns_differing == 0


def test_old_rows_read_under_the_old_rule_and_new_ones_under_the_new(tmp_path: Path) -> None:
    """Schema 1 rows come back with ``scoped_guards`` False; what is written today is
    schema 2 with True, and survives a round trip."""
    ledger = reopened(tmp_path)
    try:
        old = [
            rec.event
            for root in CHAINS
            for sid in ledger.chains.chain(root)
            for rec in ledger.store.read_stream(sid)
            if isinstance(rec.event, ModelSwitched | ContextLimitLearned)
        ]
        assert len(old) == 4 and not any(e.scoped_guards for e in old)
        tip = ledger.tip("ses_cooldown")
        ledger.switch_model(tip, "third-model", 32_768)
        ledger.learn_context_limit(tip, 20_000, "maximum context length is 20000")
        new = [
            rec.event
            for rec in ledger.store.read_stream(tip)
            if isinstance(rec.event, ModelSwitched | ContextLimitLearned)
        ][-2:]
        assert [e.scoped_guards for e in new] == [True, True]
        for event in new:
            assert decode_event(encode_event(event), type(event).__name__, 2) == event
    finally:
        ledger.close()


def test_a_whatif_replays_each_old_window_change_under_its_recorded_rule(tmp_path: Path) -> None:
    """The replay writes each recorded switch and stated window with the rule its writer
    used: the schema 1 rows of the golden ledger come back as ``scoped_guards`` False in
    the what-if's own ledger, not as today's default."""
    ledger = reopened(tmp_path)
    try:
        for root in CHAINS:
            out = tmp_path / f"whatif-{root}.db"
            whatif(ledger, root, out=out)
            replayed = Ledger.open(out)
            try:
                changes = [
                    rec.event
                    for rec in replayed.store.read_all()
                    if isinstance(rec.event, ModelSwitched | ContextLimitLearned)
                ]
            finally:
                replayed.close()
            assert changes, root
            assert [e.scoped_guards for e in changes] == [False] * len(changes), root
    finally:
        ledger.close()
