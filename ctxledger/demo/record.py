"""Record generated coding-agent sessions through the service (tests, benchmarks, the demo).

``record_generated`` drives a :class:`~ctxledger.demo.synth.SessionSynth` session through
:class:`~ctxledger.runtime.service.ContextService` with the what-if driver, so the ledger's
config decides when compactions happen. It lives here, not in ``analysis``, because the
synthetic generator is demo data and analysis must not import upward.
"""

from __future__ import annotations

from collections.abc import Mapping

import anyio

from ctxledger.analysis.whatif import DriveResult, StartInfo, scripted_steps, start_and_drive
from ctxledger.demo.synth import SessionSynth
from ctxledger.ledger.facade import Ledger
from ctxledger.runtime.service import ContextService

__all__ = ["record_generated"]


def record_generated(
    ledger: Ledger,
    *,
    seed: int,
    turns: int,
    big_outputs: bool = False,
    focus_at: Mapping[int, str | None] | None = None,
    session_id: str = "ses_root",
    model: str = "synth-coder-1",
) -> str:
    """Record a generated coding-agent session (``SessionSynth``) through the service.

    For tests and benchmarks: the ledger's config decides when compactions happen.
    Returns the chain's tip.
    """
    synth = SessionSynth(seed, big_outputs=big_outputs)
    start = StartInfo(
        session_id=session_id,
        model=model,
        context_length=ledger.config.context_length or 128_000,
        system_prompt=synth.system_prompt(),
        tools=synth.tools(),
    )
    steps = scripted_steps(synth.turns(turns), focus_at=focus_at)
    svc = ContextService(ledger, config=ledger.config)

    async def run() -> DriveResult:
        return await start_and_drive(svc, start, steps, replay=False)

    return anyio.run(run).session_id
