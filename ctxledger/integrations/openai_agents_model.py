"""An OpenAI Agents SDK ``Model`` that recovers a call from the provider's overflow error
on a :class:`~ctxledger.integrations.openai_agents.CtxLedgerSession` (as the proxy does).

The SDK gives a session no say once a run has read it: the Runner sends each model
call its own input (what ``get_items`` returned at the run's start, the new input, the
run's items so far), and its retry settings (``ModelRetrySettings``) resend that same
input. A model wrapper is where a call can be retried with another input::

    model = CtxLedgerModel(OpenAIResponsesModel("gpt-4.1", client), session)
    Runner.run(agent, "hi", session=session, run_config=RunConfig(model=model))

On an error the wrapped model raised, :func:`ctxledger.integrations.recovery.recover`
lets the service decide (one classifier): a lower ``max_tokens`` (the same input), or
the session compacted and the call retried on its live view plus the input's items
the ledger does not hold yet (found after the ledger's last message); anything else,
or an input the ledger's last message cannot be placed in, is raised as it was. A
streamed call is retried only when the failure came before its first event. Once the
ledger's view differs from what the run read (that compaction, or an in-loop one), the
run's later calls are sent the view too, not the whole history again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from agents.models.interface import Model

from ctxledger.errors import CtxLedgerError
from ctxledger.importers.responses import items_to_messages, messages_to_items
from ctxledger.integrations import recovery
from ctxledger.integrations.common import live_messages
from ctxledger.integrations.openai_agents import CtxLedgerSession

JSON = dict[str, Any]


class CtxLedgerModel(Model):
    """`model`, its calls retried after an overflow error on `session`'s ledger."""

    def __init__(self, model: Model, session: CtxLedgerSession) -> None:
        self.model = model
        self.session = session

    async def get_response(
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        **kw: Any,
    ) -> Any:
        """The wrapped model's response, retried as the service decides after an overflow."""
        rest = (tools, output_schema, handoffs, tracing)
        settings, lowered = model_settings, 0
        input = self._as_recorded(input)
        while True:
            try:
                return await self.model.get_response(
                    system_instructions, input, settings, *rest, **kw
                )
            except Exception as exc:
                step = await self._retry(exc, input, settings, lowered)
                if step is None:
                    raise
                input, settings, lowered = step

    async def stream_response(
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        **kw: Any,
    ) -> AsyncIterator[Any]:
        """The wrapped model's events; retried (as :meth:`get_response`) only when it
        failed before its first event."""
        rest = (tools, output_schema, handoffs, tracing)
        settings, lowered = model_settings, 0
        input = self._as_recorded(input)
        while True:
            started = False
            try:
                async for event in self.model.stream_response(
                    system_instructions, input, settings, *rest, **kw
                ):
                    started = True
                    yield event
                return
            except Exception as exc:
                step = None if started else await self._retry(exc, input, settings, lowered)
                if step is None:
                    raise
                input, settings, lowered = step

    def _as_recorded(self, input: Any) -> Any:
        """The Runner's `input`, or, when a compaction since the run read the session made
        the ledger's view differ from it (a recovery earlier in this run, an in-loop
        compaction), that view plus the input's items the ledger does not hold yet: the
        Runner would send the whole history again (and overflow again)."""
        sid = self.session.ledger_session_id()
        if sid is None:
            return input
        held = live_messages(self.session.service, sid)
        try:
            sent = items_to_messages(_items(input))
        except CtxLedgerError:  # an item the importer does not know: sent as it is
            return input
        unsaved = _unsaved(sent, held)
        if unsaved is None or sent[: len(sent) - len(unsaved)] == held:
            return input
        return messages_to_items([*held, *unsaved])

    async def _retry(
        self, exc: Exception, input: Any, settings: Any, lowered: int
    ) -> tuple[Any, Any, int] | None:
        """The input, settings and lowered-cap count to retry with; None: raise `exc`."""
        session = self.session
        sid = session.ledger_session_id()
        if sid is None or lowered >= recovery.MAX_CAP_RETRIES:
            return None
        try:
            sent = items_to_messages(_items(input))
        except CtxLedgerError:
            return None
        unsaved = _unsaved(sent, live_messages(session.service, sid))
        if unsaved is None:
            return None
        cap = recovery.requested_cap(getattr(settings, "max_tokens", None))
        step = await recovery.recover(session.service, sid, exc, requested_max_tokens=cap)
        if step is None:
            return None
        if step.max_tokens is not None:
            return input, replace(settings, max_tokens=step.max_tokens), lowered + 1
        view = live_messages(session.service, step.session_id)
        return messages_to_items([*view, *unsaved]), settings, lowered

    async def close(self) -> None:
        await self.model.close()

    def get_retry_advice(self, request: Any) -> Any:
        """The wrapped model's advice (the SDK's own retry settings still apply)."""
        return self.model.get_retry_advice(request)

    async def _cleanup_on_run_end(self, owner: object) -> None:
        await self.model._cleanup_on_run_end(owner)


def _items(input: Any) -> list[Any]:
    return [{"role": "user", "content": input}] if isinstance(input, str) else list(input)


def _unsaved(sent: list[JSON], held: list[JSON]) -> list[JSON] | None:
    """The messages of `sent` after the last one equal to the ledger's last message
    (`held`'s): what the session was not given yet. All of `sent` when the ledger holds
    nothing; None when the ledger's last message is not in `sent` (no place to cut)."""
    if not held:
        return sent
    for index in range(len(sent) - 1, -1, -1):
        if sent[index] == held[-1]:
            return sent[index + 1 :]
    return None


__all__ = ["CtxLedgerModel"]
