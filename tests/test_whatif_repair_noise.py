"""A what-if whose replay compacts elsewhere than the recording may repair a tool-call
id an upstream re-used (the recording's compaction had summarized its first use) in
its scratch ledger: logged at debug level, not as a warning on stderr about a session
that is not the user's (session 39). The recording's own repairs stay warnings
(``test_validation_policy``)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers.ledger_helpers import deterministic_ledger

from ctxledger import ContextService
from ctxledger.analysis.whatif import whatif
from ctxledger.compressor.config import CompressionConfig

CLI = str(Path(sys.executable).with_name("ctxledger"))
SMALL = CompressionConfig(context_length=4_000, threshold_floor_tokens=0)
#: a window the chain never fills: the replay compacts nothing, so a call id the
#: recording re-used after a compaction had summarized its first use is re-used in the
#: replay's live view, and repaired there
WIDE = CompressionConfig(context_length=64_000, threshold_floor_tokens=0)
REPAIRED = "re-used tool-call id 'call_0' became 'call_whatif-"


def _turn(n: int) -> list[dict[str, Any]]:
    call = {"id": "call_0", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    return [
        {"role": "user", "content": f"step {n}: " + "word " * 300},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_0", "content": f"file{n}.py " + "x " * 200},
        {"role": "assistant", "content": f"done {n}"},
    ]


def _recorded(path: Path) -> str:
    async def record() -> str:
        with deterministic_ledger(path, config=SMALL) as ledger:
            svc = ContextService(ledger, config=SMALL)
            sid = await svc.start_session(model="m", context_length=4_000)
            for n in range(6):  # every turn re-uses call_0
                sid = (await svc.append(sid, _turn(n))).session_id
                sid = (await svc.preflight(sid)).session_id
            assert ledger.chains.compression_count(sid) == 2
            return sid

    return anyio.run(record)


def test_a_whatif_logs_the_scratch_ledger_s_repairs_at_debug_level(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sid = _recorded(tmp_path / "rec.db")
    caplog.clear()  # (the recording's own repairs were warnings)
    ledger = deterministic_ledger(tmp_path / "rec.db", config=SMALL)
    with ledger, caplog.at_level(logging.DEBUG, logger="ctxledger"):
        whatif(ledger, sid, config=WIDE)
    replayed = [r for r in caplog.records if REPAIRED in r.getMessage()]
    assert replayed  # the replay repaired a re-used id in its scratch session
    assert {r.levelno for r in replayed} == {logging.DEBUG}
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_replay_from_the_cli_prints_no_scratch_repairs(tmp_path: Path) -> None:
    sid = _recorded(tmp_path / "rec.db")
    wide = tmp_path / "wide.toml"
    wide.write_text("context_length = 64000\nthreshold_floor_tokens = 0\n")
    args = ["--db", str(tmp_path / "rec.db"), "replay", sid, "--config", str(wide), "-q"]
    proc = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "compaction" in proc.stdout
    assert proc.stderr == ""
