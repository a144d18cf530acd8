"""The ``whatif_cli`` row of ``bench/pathological_bench.py`` (issue 14's what-if as a user
runs it: ``ctxledger replay --summarizer offline`` in a new interpreter per run).

A tiny message: this checks that the row is produced with its fields, that the children
run this checkout's code and that the README table renders it, never how fast anything is
(speed lives in ``bench/``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import pathological_bench  # noqa: E402
import readme_table  # noqa: E402


def test_the_cli_whatif_row_runs_new_processes_of_this_checkout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # no PYTHONPATH of the caller's: the bench alone must point the children at this tree
    # (each child asserts that its ctxledger is this checkout's, or the row fails)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    row = pathological_bench.cli_row(runs=1, big_mb=0.05)
    assert row["bench"] == "pathological_user_whatif_cli"
    fields = {"value", "unit", "baseline", "ratio", "goal", "met", "cpu_ms", "baseline_cpu_ms"}
    assert fields | {"cpu_ratio", "runs"} <= row.keys()
    assert row["unit"] == "ms" and row["goal"] == "ratio <= 2" and row["runs"] == 1
    assert row["cpu_ms"] > 0 and row["baseline_cpu_ms"] > 0  # the children's CPU is counted
    assert row["ratio"] == pytest.approx(row["value"] / row["baseline"], rel=0.01)
    assert row["met"] == (row["ratio"] <= 2)

    rendered = readme_table.table([json.dumps(row)], "today")
    line = next(text for text in rendered.splitlines() if "by the CLI" in text)
    assert "a new process per run (`ctxledger replay --summarizer offline`)" in line
    assert "0.05 MB user message |" in line and "#14: ratio ≤ 2" in line
    # the CPU figures beside the wall ones, the CPU ratio in the ratio cell (as the
    # Hermes compaction rows write it)
    assert f" (CPU {readme_table._num(row['cpu_ms'], 'ms')}) |" in line
    assert f"| {row['ratio']:g} (CPU {row['cpu_ratio']:g}) |" in line
    assert ("**met**" if row["met"] else "**missed**") in line
