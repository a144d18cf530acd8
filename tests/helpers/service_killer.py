"""Helper process for the service SIGKILL test: compact one session chain over and over until killed.

Usage: ``python service_killer.py LEDGER_PATH RUN``. Imports everything, then waits for a
line on stdin (so the test can start the next writer while the previous one still runs)
before it opens the ledger, continues on the tip of the chain that starts at session
``ses_root`` (starting it on the first run), prints ``ready`` and then loops: append a synthetic turn, report usage, compact
manually (printing ``compacted`` after each), with a summarizer that pauses a little so a kill can land between the
decision events, the summary and the switch. Never exits on its own.
"""

from __future__ import annotations

import sys

import anyio

from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.demo.synth import SessionSynth
from ctxledger.runtime.service import ContextService
from ctxledger.tokens import count_message

ROOT = "ses_root"


class SlowSummarizer:
    """The offline summarizer, after a pause (a model call takes a while)."""

    kind = "slow-offline"

    def __init__(self) -> None:
        self.inner = OfflineSummarizer()

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        await anyio.sleep(0.005)
        return await self.inner.summarize(request)


async def main(path: str, run: int) -> None:
    config = CompressionConfig(threshold_floor_tokens=0)
    svc = ContextService.open(path, config=config, summarizer=SlowSummarizer(), durability="normal")
    if ROOT not in svc.ledger.chains.state.sessions:
        await svc.start_session(
            model="killer-model",
            context_length=16_384,
            system_prompt="You are a coding agent.",
            session_id=ROOT,
        )
    synth = SessionSynth(run, big_outputs=False, id_prefix=f"r{run}_call")
    print("ready", flush=True)
    i = 0
    while True:
        sid = svc.tip(ROOT)
        for _ in range(3):
            await svc.append(sid, synth.turn(i))
            i += 1
        await svc.report_usage(sid, {"prompt_tokens": 3_000, "completion_tokens": 40})
        await svc.compress(sid)
        print("compacted", flush=True)


if __name__ == "__main__":
    count_message({"role": "user", "content": "load the encoding before the test's clock starts"})
    sys.stdin.readline()
    anyio.run(main, sys.argv[1], int(sys.argv[2]))
