"""The in-loop figure of a response without a prompt count (review of session 30, fix A
and C), as a property over generated report sequences: it is never below the ledger's
estimate of system + messages + tools, and it is the kept real count when that is
larger. The kept count is the latest reported count above 0 since the live session
started, its model switched, or a count of 0 was reported. (Automatic compaction is
off here, so the clearing at a compaction is not exercised: the fold's tests in
``test_parity_runtime.py`` cover it.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.clock import SequentialIds
from ctxledger.compressor.config import CompressionConfig
from ctxledger.demo.synth import SessionSynth
from ctxledger.ledger.facade import Ledger
from ctxledger.runtime.service import ContextService

WINDOW = 16_384
#: compression off: every figure is judged and recorded, nothing is compacted
CONFIG = CompressionConfig(threshold_floor_tokens=0, enabled=False)

_REPORT = st.one_of(
    st.just({}),
    st.just(None),
    st.builds(lambda n: {"prompt_tokens": n, "completion_tokens": 3}, st.integers(0, 4_000)),
)
_STEP = st.one_of(
    st.tuples(st.just("report"), _REPORT),
    st.tuples(st.just("grow"), st.integers(1, 4)),
    st.tuples(st.just("switch"), st.just(None)),
)


async def _run(path: Path, steps: list[tuple[str, Any]]) -> list[tuple[int, int, int | None]]:
    """(judged figure, estimate, kept count) of each report without a count."""
    ledger = Ledger.open(path, ids=SequentialIds(), config=CONFIG, durability="normal")
    svc = ContextService(ledger, config=CONFIG)
    judged: list[int] = []
    should_compress = svc.engine.should_compress

    def judging(session_id: str, prompt_tokens: int | None = None) -> tuple[bool, str]:
        judged.append(prompt_tokens or 0)
        return should_compress(session_id, prompt_tokens)

    svc.engine.should_compress = judging  # type: ignore[method-assign]
    sid = await svc.start_session(model="m", context_length=WINDOW, system_prompt="sys")
    synth = SessionSynth(5, big_outputs=False)
    turn, kept, out = 0, None, []
    for kind, arg in steps:
        if kind == "grow":
            for _ in range(arg):
                await svc.append(sid, synth.turn(turn))
                turn += 1
        elif kind == "switch":
            svc.ledger.switch_model(sid, f"model-{turn}", WINDOW)
            kept = None
        else:
            estimate = svc.ledger.transcript.total_tokens(sid)
            count = (arg or {}).get("prompt_tokens")
            await svc.report_usage(sid, arg, tool_calls=True)
            if count:
                kept = count
            else:
                kept = None if count == 0 else kept
                out.append((judged[-1], estimate, kept))
    ledger.close()
    return out


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(_STEP, max_size=14))
def test_a_response_without_a_count_is_judged_by_max_of_kept_count_and_estimate(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, Any]]
) -> None:
    path = tmp_path_factory.mktemp("figure") / "l.db"
    for figure, estimate, kept in anyio.run(_run, path, steps):
        assert figure >= estimate
        assert figure == max(estimate, kept or 0)
