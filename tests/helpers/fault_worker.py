"""Helper process for tests/test_faults.py: one real writer on a shared ledger file.

Usage: ``python fault_worker.py MODE LEDGER SESSION WORKER COUNT [CALLS_FILE]``.
Imports everything, prints ``ready``, waits for a line on stdin (so every worker
starts at once), then:

* ``append``: ``COUNT`` appends of one user message ``w<WORKER>-<k>`` through a
  ContextService, printing ``ok <k>`` or ``conflict <k>`` for each;
* ``compact``: one manual ``compress`` of SESSION with a summarizer that takes a
  while and writes a line to CALLS_FILE per call; prints ``compressed <tip>`` or
  ``continued <tip>``.
"""

from __future__ import annotations

import sys

import anyio

from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.errors import ConcurrencyError
from ctxledger.runtime.service import ContextService

CONFIG = CompressionConfig(threshold_floor_tokens=0)


class CountingSummarizer:
    """The offline summary after a pause, each call noted in a file shared by the workers."""

    kind = "counting-offline"

    def __init__(self, calls_file: str) -> None:
        self.calls_file = calls_file
        self.inner = OfflineSummarizer()

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        with open(self.calls_file, "a", encoding="utf-8") as out:
            out.write("call\n")
        await anyio.sleep(0.3)
        return await self.inner.summarize(request)


async def append(svc: ContextService, sid: str, worker: int, count: int) -> None:
    for k in range(count):
        try:
            await svc.append(sid, [{"role": "user", "content": f"w{worker}-{k}"}])
        except ConcurrencyError:
            print(f"conflict {k}", flush=True)
        else:
            print(f"ok {k}", flush=True)


async def compact(svc: ContextService, sid: str) -> None:
    result = await svc.compress(sid)
    print(f"{'compressed' if result.compressed else 'continued'} {result.session_id}", flush=True)


def main(mode: str, path: str, sid: str, worker: int, count: int, calls: str) -> None:
    svc = ContextService.open(
        path, config=CONFIG, summarizer=CountingSummarizer(calls), durability="normal"
    )
    print("ready", flush=True)
    sys.stdin.readline()
    if mode == "append":
        anyio.run(append, svc, sid, worker, count)
    else:
        anyio.run(compact, svc, sid)
    svc.ledger.close()


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0], args[1], args[2], int(args[3]), int(args[4]), args[5] if len(args) > 5 else "")
