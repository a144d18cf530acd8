"""`ctxledger usage` never cuts a figure (at 80 columns its nine-column table showed
"169,2…"): one row per bucket, one column per scope, no column narrower than its
longest figure."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from ctxledger import Ledger
from ctxledger.cli.main import cli
from ctxledger.clock import SequentialIds, StepClock


def test_usage_shows_every_figure_whole_at_80_columns(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    ledger = Ledger.open(str(db), clock=StepClock(), ids=SequentialIds())
    sid = ledger.start_session(model="m", context_length=200_000)
    for i in range(3):
        ledger.append_messages(sid, [{"role": "user", "content": f"turn {i}"}])
        ledger.report_usage(
            sid,
            {
                "prompt_tokens": 1_425_076 + i,
                "completion_tokens": 4_742,
                "prompt_tokens_details": {"cached_tokens": 1_000_000},
            },
        )
    usage = ledger.usage(sid).to_dict()
    ledger.close()
    result = CliRunner().invoke(cli, ["--db", str(db), "usage", sid], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80
    agent = usage["agent"]
    assert isinstance(agent, dict)
    for key in ("input", "cache_read", "output", "prompt", "total"):
        assert f"{agent[key]:,}" in result.output, key
    assert "…" not in result.output
