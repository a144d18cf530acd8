"""A provider error body holding an integer Python cannot write as text (5,000 digits)
is read, never a ValueError out of ``handle_provider_error`` (session 43; session 42
left it: ``str(body)`` of such a number raises past Python's 4,300-digit limit)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from ctxledger import ContextService
from ctxledger.errors import ContextOverflowError
from ctxledger.ledger.facade import Ledger
from ctxledger.runtime.overflow import classify_provider_error

HUGE = 10**5000


@pytest.mark.parametrize(
    "body",
    [
        HUGE,
        -HUGE,
        {"error": {"message": HUGE}},
        {"error": {"message": "prompt is too long", "limit": HUGE}},
        {"error": {"max_tokens": HUGE, "code": "context_length_exceeded"}},
        [HUGE, {"detail": [HUGE]}],
        {"weird": HUGE, "other": object()},
        # llama.cpp's figures: read as text beside the message ("n_ctx: ...")
        {"error": {"message": "the request exceeds the context size", "n_ctx": HUGE}},
        {"error": {"message": "prompt too long", "n_prompt_tokens": HUGE, "n_ctx": 4096}},
        # a key that is such an int (a body built in Python: JSON keys are text)
        {HUGE: "prompt is too long", "error": {HUGE: {"n_ctx": 1}}},
    ],
    ids=range(10),
)
def test_a_body_holding_a_huge_integer_is_classified(body: Any) -> None:
    ledger = Ledger.open(":memory:")
    service = ContextService(ledger)
    sid = ledger.start_session(model="m", context_length=8192)
    ledger.append_messages(sid, [{"role": "user", "content": "hello"}])

    async def ask(status: int | None) -> str:
        try:
            recovery = await service.handle_provider_error(sid, status, body)
        except ContextOverflowError:  # (an overflow this session cannot recover from)
            return "overflow"
        return recovery.action

    for status in (400, 413, None):
        assert anyio.run(ask, status) in ("retry", "fail", "overflow")
    assert classify_provider_error(400, body) is not None
