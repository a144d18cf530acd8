"""A real Hermes Agent on a provider that reports no usage (``tests/hermes_nousage.py``
under ``.venv-hermes``). Hermes 0.19.0 defers its estimate right after a compaction
until the provider counts the compacted request, and ends that wait on a response
without usage (``update_from_response({})``). The engine ignored the empty report and
kept deferring: one compaction, then requests past the window (session 38, review 1)."""

from __future__ import annotations

import json

from helpers.hermes_run import run_hermes_script


def test_compactions_go_on_when_the_provider_reports_no_usage(tmp_path):
    run_hermes_script("hermes_nousage.py", tmp_path)
    result = json.loads((tmp_path / "nousage.json").read_text())
    assert result["counts"][-1] >= 2, result["counts"]
    # every request Hermes sent stayed under its threshold (by the same estimate)
    assert max(result["sizes"]) < result["threshold"] < result["window"], result["sizes"]
