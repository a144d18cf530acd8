"""A proxied turn's client hanging up, noticed wherever the turn waits: for its
session's turn (:meth:`ServerState.take_turn`), for the upstream's answer
(:func:`while_connected`) and while a stream is relayed (``TurnStream``).

A client that times out and retries (the OpenAI and Anthropic SDKs retry a timed-out
request twice by default) must not leave behind a turn that goes on without it: that
turn would hold the session for the retry, and record an answer the client never saw,
so the retry, answered again, would branch the conversation at its next turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
from starlette.types import Receive

_T = TypeVar("_T")


async def cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    """Cancel `scope` once the client hangs up (the request's body is read by then:
    what `receive` gives next is the disconnect)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


async def while_connected(receive: Receive, step: Callable[[], Awaitable[_T]]) -> _T | None:
    """`step`'s result, or None when the client hung up first (`step` is cancelled:
    what it does that must not be cut short runs shielded). An error of `step` is
    raised as it is (the route answers a store outage 503, a failed compaction 502)."""
    done: list[_T] = []
    failed: list[Exception] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(cancel_on_disconnect, receive, tg.cancel_scope)
        try:
            done.append(await step())
        except Exception as exc:  # raised as it is, not in the group's ExceptionGroup
            failed.append(exc)
        tg.cancel_scope.cancel()
    if failed:
        raise failed[0]
    return done[0] if done else None


__all__ = ["cancel_on_disconnect", "while_connected"]
