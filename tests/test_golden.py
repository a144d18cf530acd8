"""Golden reports: a fixed generated session compacted twice gives stable audit, diff and replay JSON.

The goldens live in ``tests/golden/``. A change to one is a change in what users see:
update them only on purpose, and review the diff::

    CTXLEDGER_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py

(the test then rewrites the files and passes; run it again without the variable).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
from helpers.ledger_helpers import SMALL, deterministic_ledger

from ctxledger.analysis.audit import audit_chain
from ctxledger.analysis.compactions import chain_compactions
from ctxledger.analysis.diff import diff
from ctxledger.analysis.replay import verify_compactions
from ctxledger.analysis.whatif import whatif
from ctxledger.demo.record import record_generated
from ctxledger.ledger.facade import Ledger

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("CTXLEDGER_UPDATE_GOLDEN") == "1"


@pytest.fixture(scope="module")
def chain() -> tuple[Ledger, str]:
    ledger = deterministic_ledger()
    tip = record_generated(ledger, seed=2, turns=10)
    assert len(chain_compactions(ledger, tip)) == 2
    return ledger, tip


def check(name: str, report: Any) -> None:
    actual = json.loads(msgspec.json.encode(report))
    path = GOLDEN / f"{name}.json"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(
            json.dumps(actual, indent=1, ensure_ascii=False, sort_keys=True) + "\n",
            encoding="utf-8",
        )
    assert path.exists(), f"no golden {path}: run with CTXLEDGER_UPDATE_GOLDEN=1 to create it"
    expected = json.loads(path.read_text(encoding="utf-8"))
    assert actual == expected, (
        f"{name} report changed; if on purpose, regenerate (see the module docstring)"
    )


def test_audit_report_is_stable(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    check("audit", audit_chain(ledger, tip))


def test_diff_reports_are_stable(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    first, second = chain_compactions(ledger, tip)
    check(
        "diff",
        {
            "first_compaction": diff(ledger, first.compaction_id),
            "summaries": diff(ledger, first.compaction_id, second.compaction_id),
            "root_at_40_vs_tip": diff(ledger, f"{first.session_id}@40", tip),
        },
    )


def test_replay_reports_are_stable(chain: tuple[Ledger, str]) -> None:
    ledger, tip = chain
    check(
        "replay",
        {
            "verify": verify_compactions(ledger, tip),
            "whatif_recorded_config": whatif(ledger, tip),
            "whatif_target_ratio_0_4": whatif(ledger, tip, config=SMALL.replace(target_ratio=0.4)),
        },
    )
