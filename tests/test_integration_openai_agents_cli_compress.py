"""An OpenAI Agents SDK session resumed in a new process after ``ctxledger compress``
from a shell (session 45): the next run is sent the compacted view, its items go onto
the continuation (no branch, no second root), and the ledger replays and verifies."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from helpers.frameworks import require

require("agents", "agents")
from agents import Agent, Runner  # noqa: E402
from agents.testing import ModelStep, ScriptedModel, assistant_message  # noqa: E402
from agents.usage import Usage  # noqa: E402

from ctxledger import CompressionConfig, ContextService, Ledger  # noqa: E402
from ctxledger.events import SessionStarted  # noqa: E402
from ctxledger.integrations.openai_agents import CtxLedgerSession  # noqa: E402

CONFIG = CompressionConfig(threshold_floor_tokens=0, context_length=64_000)
CLI = str(Path(sys.executable).with_name("ctxledger"))


def _said(text: str) -> ModelStep:
    usage = Usage(requests=1, input_tokens=100, output_tokens=5, total_tokens=105)
    return ModelStep(output=[assistant_message(text)], usage=usage)


def _runs(db: Path, asks: list[str], model: ScriptedModel) -> list[Any]:
    """`asks` as runs of one agent on the SDK session "chat", in a service of its own
    (a process's): what each run's model call was sent."""

    async def go() -> list[Any]:
        svc = ContextService(Ledger.open(db, config=CONFIG), config=CONFIG)
        try:
            session = CtxLedgerSession("chat", svc, model="scripted", context_length=64_000)
            agent = Agent(name="a", instructions="Be brief.", model=model)
            sent = []
            for ask in asks:
                first = len(model.calls)
                await Runner.run(agent, ask, session=session)
                sent.append(model.calls[first].input)
            return sent
        finally:
            svc.ledger.close()

    return anyio.run(go)


def test_a_resumed_session_goes_on_from_the_cli_compaction(tmp_path: Path) -> None:
    db = tmp_path / "agents.ledger.db"
    asks = [f"turn {t}: " + " ".join(f"word{t}_{j}" for j in range(150)) for t in range(8)]
    model = ScriptedModel([_said(f"answer {t}") for t in range(10)])
    _runs(db, asks, model)
    proc = subprocess.run(
        [CLI, "--db", str(db), "compress", "chat", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (sent,) = _runs(db, ["after the compaction"], model)

    ledger = Ledger.open(db, config=CONFIG)
    try:
        tip = ledger.tip("chat")
        assert ledger.chains.compression_count(tip) == 1
        starts = [r.event for r in ledger.store.read_all() if isinstance(r.event, SessionStarted)]
        assert [s.reason for s in starts] == ["new", "compression"]  # no branch, no root
        view = ledger.api_messages(tip)
        texts = [json.dumps(item) for item in sent]
        assert len(sent) < 2 * len(asks) + 1  # the compacted view, not the whole history
        asked = [str(item.get("content")) for item in sent if item.get("role") == "user"]
        assert not any(a.startswith(("turn 2:", "turn 3:")) for a in asked)  # summarised
        assert any("handoff summary" in t for t in texts)
        assert "after the compaction" in texts[-1]
        assert view[-1]["content"] == "answer 8"  # the run's reply, on the continuation
        assert tip in proc.stdout  # the CLI named the continuation the run went on in
    finally:
        ledger.close()
    proc = subprocess.run(
        [CLI, "--db", str(db), "verify"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
