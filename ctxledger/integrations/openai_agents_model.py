"""An OpenAI Agents SDK ``Model`` that recovers a call from the provider's overflow error
on a :class:`~ctxledger.integrations.openai_agents.CtxLedgerSession` (as the proxy does).

The SDK gives a session no say once a run has read it: the Runner sends each model
call its own input (what ``get_items`` returned at the run's start, the new input, the
run's items so far), and its retry settings (``ModelRetrySettings``) resend that same
input. A model wrapper is where a call can be retried with another input::

    agent = Agent(name="a", model=CtxLedgerModel(OpenAIResponsesModel("gpt-4.1", client)))
    Runner.run(agent, "hi", session=session)

It acts for the session the run read (``get_items`` names it in the run's context), so
one agent may serve many sessions; given a session, it acts only for runs of that one.
A run with no ``CtxLedgerSession`` is passed through as it is.

On an error the wrapped model raised, :func:`ctxledger.integrations.recovery.recover`
lets the service decide (one classifier): a lower ``max_tokens`` (the same input), or
the session compacted and the call retried. Until the session's chain moved to a
compacted continuation during the run, every call is sent exactly the input the SDK
built (``call_model_input_filter``, ``SessionSettings(limit=)``, handoff filters
apply). After one, the input's messages that compaction removed are replaced by what
it put in their place (its summary); the rest of the input is left as the SDK made it,
so the run's later calls do not send the whole history again. A streamed call is
retried only when the failure came before its first event.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from agents.models.interface import Model

from ctxledger.errors import CtxLedgerError
from ctxledger.importers.responses import items_to_messages, messages_to_items
from ctxledger.integrations import recovery
from ctxledger.integrations.common import live_messages
from ctxledger.integrations.openai_agents import RUN_READ, CtxLedgerSession, RunRead

try:  # the SDK's own mark of the run a model call belongs to (private; 0.24)
    from agents.models._run_context import get_model_run_owner
except ImportError:  # pragma: no cover - another SDK version: every call is taken as the run's

    def get_model_run_owner() -> object | None:
        return None


JSON = dict[str, Any]


class CtxLedgerModel(Model):
    """`model`, its calls retried after an overflow error on the run's ledger session
    (`session` given: only for runs of that session)."""

    def __init__(self, model: Model, session: CtxLedgerSession | None = None) -> None:
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
        call = _Call(self._read(), input, model_settings)
        while True:
            try:
                response = await self.model.get_response(
                    system_instructions,
                    call.input,
                    call.settings,
                    tools,
                    output_schema,
                    handoffs,
                    tracing,
                    **kw,
                )
            except Exception as exc:
                if not await call.retry(exc):
                    raise
                continue
            await call.succeeded()
            return response

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
        call = _Call(self._read(), input, model_settings)
        while True:
            started = False
            try:
                async for event in self.model.stream_response(
                    system_instructions,
                    call.input,
                    call.settings,
                    tools,
                    output_schema,
                    handoffs,
                    tracing,
                    **kw,
                ):
                    started = True
                    yield event
            except Exception as exc:
                if started or not await call.retry(exc):
                    raise
                continue
            await call.succeeded()
            return

    def _read(self) -> RunRead | None:
        """The session read of the run this call belongs to, when this wrapper acts for it:
        None for a run that read no ``CtxLedgerSession`` (one read by an earlier run in the
        same task is that run's) or, with `session` given, read another one."""
        read = RUN_READ.get()
        if read is None or (self.session is not None and read.session is not self.session):
            return None
        owner = get_model_run_owner()
        if read.owner is None:
            read.owner = owner
        elif owner is not None and owner is not read.owner:
            return None
        if read.tip is None:  # nothing was recorded when the run read the session
            read.tip = read.session.ledger_session_id()
        return read

    async def close(self) -> None:
        await self.model.close()

    def get_retry_advice(self, request: Any) -> Any:
        """The wrapped model's advice (the SDK's own retry settings still apply)."""
        return self.model.get_retry_advice(request)

    async def _cleanup_on_run_end(self, owner: object) -> None:
        await self.model._cleanup_on_run_end(owner)


class _Call:
    """One model call of a run: the input and settings it is sent (the SDK's until a
    compaction or a lowered cap), and how it is retried."""

    def __init__(self, read: RunRead | None, input: Any, settings: Any) -> None:
        self.read = read
        self.original = input
        self.settings = settings
        self.lowered = 0
        self.recovered = False
        self.input = input if read is None else _shaped(read, input)

    async def retry(self, exc: Exception) -> bool:
        """Whether to retry after `exc` (the input and settings set for it)."""
        read = self.read
        sid = None if read is None else read.session.ledger_session_id()
        if read is None or sid is None or self.lowered >= recovery.MAX_CAP_RETRIES:
            return False
        service = read.session.service
        cap = recovery.requested_cap(getattr(self.settings, "max_tokens", None))
        step = await recovery.recover(service, sid, exc, requested_max_tokens=cap)
        if step is None:
            return False
        self.recovered = True
        if step.max_tokens is not None:
            self.settings = replace(self.settings, max_tokens=step.max_tokens)
            self.lowered += 1
            return True
        shaped = _shaped(read, self.original)
        if shaped == self.input:  # the input holds nothing the compaction replaced
            return False
        self.input = shaped
        return True

    async def succeeded(self) -> None:
        """After a recovered call went through: the turn's recovery is over (the SDK
        reports no usage of a call to the session before its items are saved)."""
        if self.recovered and self.read is not None:
            sid = self.read.session.ledger_session_id()
            if sid is not None:
                await self.read.session.service.model_call_succeeded(sid)


def _shaped(read: RunRead, input: Any) -> Any:
    """`input` as the SDK built it, unless the session's chain moved to a compacted
    continuation since the run read it: then its messages the compactions removed are
    replaced by what they put in their place (:func:`replace_compacted`)."""
    session = read.session
    tip = session.ledger_session_id()
    if tip is None or read.tip is None or tip == read.tip:
        return input
    chain = session.service.ledger.chains.chain(tip)
    if read.tip not in chain:  # another generation (clear_session, pop_item)
        return input
    transcript = session.service.ledger.transcript
    old = [_without_system(transcript.api_view(s)) for s in chain[chain.index(read.tip) : -1]]
    try:
        sent = items_to_messages(_items(input))
    except CtxLedgerError:  # an item the importer does not know: sent as it is
        return input
    merged = replace_compacted(sent, old, live_messages(session.service, tip))
    return input if merged is None else messages_to_items(merged)


def _without_system(view: list[JSON]) -> list[JSON]:
    return view[1:] if view and view[0].get("role") == "system" else list(view)


def _items(input: Any) -> list[Any]:
    return [{"role": "user", "content": input}] if isinstance(input, str) else list(input)


def _key(message: JSON) -> str:
    return json.dumps(message, sort_keys=True, default=str)


def replace_compacted(
    sent: list[JSON], old: list[list[JSON]], held: list[JSON]
) -> list[JSON] | None:
    """`sent` (the SDK's input) with the messages the compactions removed (in an `old`
    view, not in the ledger's live view `held`) replaced by what they put in their place
    (`held`'s messages in no old view and not in `sent`: the summary), each placed after
    the message `held` has before it. Every other message of `sent` stays as it is (one
    a filter changed, one the compactions kept, the run's own); one `held` has that the
    SDK's shaping left out is not added back. None: `sent` holds nothing compacted."""
    before: Counter[str] = Counter()
    for view in old:
        before |= Counter(_key(m) for m in view)
    removed = before - Counter(_key(m) for m in held)
    kept: list[JSON] = []
    at = None
    for message in sent:
        key = _key(message)
        if removed[key] > 0:
            removed[key] -= 1
            at = len(kept) if at is None else at
        else:
            kept.append(message)
    if at is None:
        return None
    keys = [_key(m) for m in kept]
    present = set(keys)
    place = at
    for message in held:
        key = _key(message)
        if key in present:  # kept: what follows it in `held` goes after it (when ahead)
            place = next((i + 1 for i in range(place, len(keys)) if keys[i] == key), place)
        elif key not in before:
            kept.insert(place, message)
            keys.insert(place, key)
            place += 1
    return kept


__all__ = ["CtxLedgerModel", "replace_compacted"]
