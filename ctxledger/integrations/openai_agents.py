"""An OpenAI Agents SDK session on a ctxledger ledger (``pip install 'ctxledger[agents]'``).

``CtxLedgerSession`` implements the SDK's ``Session`` protocol (``session_id``,
``get_items``, ``add_items``, ``pop_item``, ``clear_session``) and ``run_compaction``,
which makes it compaction-aware: the Runner calls it after each settled write. Every
method accepts the ``wrapper=`` keyword, so the Runner hands over its
``RunContextWrapper``; the per-request usage in ``wrapper.usage`` is reported to the
ledger (real input tokens drive the in-loop trigger). Items are stored as chat messages
through :mod:`ctxledger.importers.responses`; ``get_items`` returns the ledger's live
view (after preflight), so a compacted history is what the next run sends. The agent's
system prompt is recorded (and counted from then on) by
:mod:`ctxledger.integrations.openai_agents_hooks` at each model call, as it is sent;
``agent=`` gives the session its start prompt (see :class:`CtxLedgerSession`).

One SDK session id names a series of ledger sessions: ``<id>`` first, then ``<id>~2``,
``<id>~3``, ... after ``clear_session`` (the old one is ended, nothing deleted) or
``pop_item`` (a branch holding the view minus the popped item; the session it
replaces is ended). Compactions continue
each one's chain as usual; the session always works on the chain's tip.

An SDK id the HTTP API could not name (over 150 characters, or with characters other
than letters, digits and ``._:@-``) is kept as a key of at most 160 characters: its
start with each other character as ``-``, ``.h`` and 32 hex digits of its sha256
(as the LangChain adapter keys a long thread id). A session already recorded under
the whole id is continued under it (for an id shaped like a key, only one titled with it:
the session under a key made for another id is that id's). A chain recorded before
session 33's name checks goes on as recorded: ``pop_item``'s branch keeps the chain's
model, and an id recorded whole numbers its next sessions, even where those checks
would refuse them now (the agent's own model is checked as ever).
"""

from __future__ import annotations

import asyncio
import functools
import re
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ctxledger import ContextService, InvalidInput
from ctxledger.events import UsageReported
from ctxledger.importers.responses import items_to_messages, messages_to_items
from ctxledger.integers import shown
from ctxledger.integrations.common import (
    KEY_KEPT,
    digest_key,
    host_title,
    is_made_key,
    live_messages,
    record_changed_prompt,
    report_usage_or_warn,
    taken_whole,
)
from ctxledger.ledger.prompt import held_prompt
from ctxledger.limits import check_input_text, check_text, check_token_count, taking_as_recorded
from ctxledger.runtime.service_io import check_new_batch

JSON = dict[str, Any]
#: attribute on a run's ``Usage`` (its wrapper's, shared by the run's forks): how many of
#: its request usages were reported (or are being reported)
_REPORTED = "_ctxledger_reported_requests"


#: an SDK id used as the ledger's own: one the HTTP API can name (with room for a
#: generation's ``~N``), not shaped as a key made for another id (ending ``.h`` and 32
#: hex digits)
_NAMEABLE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,149}")
_NOT_NAMEABLE = re.compile(r"[^A-Za-z0-9._:@-]")


def ledger_key(session_id: str) -> str:
    """The ledger's id for an SDK `session_id` (see the module docs): the id itself when
    the HTTP API can name it, else its start (other characters as ``-``), ``.h`` and 32
    hex digits of its sha256 (an id past 200 characters could not be named at all)."""
    if _NAMEABLE.fullmatch(session_id) and not is_made_key(session_id):
        return session_id
    start = _NOT_NAMEABLE.sub("-", session_id[:KEY_KEPT])
    return digest_key(
        start if start[:1].isascii() and start[:1].isalnum() else "s" + start, session_id
    )


def _title(session_id: str) -> str:
    """The title of the first ledger session of an SDK id (how it is told apart)."""
    return host_title("openai-agents session", session_id)


class CtxLedgerSession:
    """Conversation memory for ``Runner.run(..., session=CtxLedgerSession(...))``.

    The system prompt a session starts with is `system_prompt` (as given), or the static
    ``instructions`` of `agent` (the run's starting agent) without the ledger's compaction
    note, so the first run's first call is counted with it (every new ledger session's,
    also after ``clear_session``: runs going on with another agent, such as
    ``result.last_agent``, leave `agent` out and let the hooks record). ``agent=`` reads nothing
    else: a dynamic ``instructions`` callable is never called by the session (it runs
    only when the SDK calls it), and ``CtxLedgerRunHooks`` record each call's prompt as
    sent (a handoff's agent's, a changed one). A prompt recorded at a call is counted
    from that call's preflight on: a run's ``get_items`` counts the one recorded last,
    so the first call of a run whose dynamic prompt changed is counted with the previous
    prompt, and a compaction the new one triggers shapes the next run's input.
    """

    session_settings: Any = None

    def __init__(
        self,
        session_id: str,
        service: ContextService,
        *,
        model: str = "agent",
        context_length: int | None = None,
        system_prompt: str | None = None,
        session_settings: Any = None,
        agent: Any = None,
    ) -> None:
        if not isinstance(session_id, str) or not session_id.strip() or "~" in session_id:
            raise InvalidInput(
                f"session_id must be a non-empty string without '~', got {shown(session_id)}"
            )
        if agent is not None and system_prompt is not None:
            raise InvalidInput("give system_prompt or agent, not both (the agent's is its prompt)")
        if agent is not None and not callable(getattr(agent, "get_system_prompt", None)):
            raise InvalidInput(f"agent must be an Agents SDK Agent, got {type(agent).__name__}")
        if isinstance(getattr(agent, "instructions", None), str):  # (the note is the ledger's)
            system_prompt = held_prompt(None, agent.instructions)
        self.session_id = session_id
        self.service = service
        self.model = model
        self.context_length = context_length
        self.system_prompt = system_prompt
        self.session_settings = session_settings
        #: the prompt of a call made before the session's first item (the hooks): the
        #: ledger session that call's items start is started with it
        self._pending: str | None = None
        #: per run that wrote: its ``Usage`` and the task it wrote from (see _report_left);
        #: not its wrapper, which holds the user's context object
        #: (a weak reference: a done task holds the run's result, and so its context)
        self._left: dict[int, tuple[Any, weakref.ref[asyncio.Task[Any]] | None]] = {}
        self.service.ledger.refresh()
        self._key = session_id if self._recorded_whole(session_id) else ledger_key(session_id)
        self._generation = self._latest_generation()

    @classmethod
    def open(cls, session_id: str, path: str | Path, **kwargs: Any) -> CtxLedgerSession:
        """A session on the ledger at `path`: a SQLite file (created on first use) or a
        ``postgresql://`` URL."""
        service_kwargs = {k: kwargs.pop(k) for k in ("config", "summarizer") if k in kwargs}
        return cls(session_id, ContextService.open(path, **service_kwargs), **kwargs)

    # --- which ledger session -----------------------------------------------------------

    def _ledger_id(self, generation: int) -> str:
        return self._key if generation == 1 else f"{self._key}~{generation}"

    def _exists(self, sid: str) -> bool:
        return sid in self.service.ledger.transcript.state.sessions

    def _recorded_whole(self, session_id: str) -> bool:
        """Whether a session was recorded under the whole `session_id` before keys were
        made (it goes on under it). An id shaped like a key may be the key made for another
        id: the session under it is this id's only if its title says so."""
        info = self.service.ledger.chains.state.sessions.get(session_id)
        if info is None:
            return False
        return taken_whole(session_id, info.title, (_title(session_id),))

    def _latest_generation(self) -> int:
        generation = 1
        while self._exists(self._ledger_id(generation + 1)):
            generation += 1
        return generation

    def ledger_session_id(self) -> str | None:
        """The tip of the current ledger session's chain (None before anything was added,
        or after ``clear_session``)."""
        root = self._ledger_id(self._generation)
        if not self._exists(root):
            return None
        tip = self.service.tip(root)
        return None if self.service.ledger.transcript.session(tip).ended else tip

    async def _writable(self) -> str:
        sid = self.ledger_session_id()
        if sid is not None:
            return sid
        generation = self._generation
        if self._exists(self._ledger_id(generation)):
            generation += 1  # the last one was cleared (ended): start the next
        sid = self._ledger_id(generation)
        title = _title(self.session_id)
        with taking_as_recorded(sid):  # (the next of an id recorded whole: see pop_item)
            started = await self.service.start_session(
                model=self.model,
                context_length=self.context_length,
                system_prompt=self.system_prompt if self._pending is None else self._pending,
                session_id=sid,
                title=title,
                loop="per_run",  # preflight at a run's read and after its final answer's write
            )
        self._generation = generation
        self._pending = None
        return started

    # --- the Session protocol -----------------------------------------------------------

    async def get_items(self, limit: int | None = None, *, wrapper: Any = None) -> list[Any]:
        """The live view as input items (the latest `limit` of them when given).

        A full read is the start of a run: preflight runs first, so a history over the
        threshold is compacted before it is sent. The requests a run's ``Usage`` holds
        at its first read were made before the run started (see _claim_carried).
        """
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
        ):
            raise InvalidInput(f"limit must be a non-negative integer or None, got {shown(limit)}")
        sid = self.ledger_session_id()
        self._claim_carried(_usage(wrapper), sid)
        if sid is None:
            # a run starts here, before its first call's hook: a prompt left pending by a
            # run that failed before it saved anything was never this run's
            self._pending = None
            return []
        if limit is None:
            sid = await self._report_left(sid, wrapper)
            sid = (await self.service.preflight(sid)).session_id
        items = messages_to_items(live_messages(self.service, sid))
        if limit is not None:
            return items[-limit:] if limit else []
        return items

    def _claim_carried(self, usage: Any, sid: str | None) -> None:
        """Count as reported the requests a run's `usage` holds when the session first sees
        it (a run's first read: a resumed run's, before its first model call) that the
        conversation's chain (`sid`) recorded: a run resumed from ``RunState`` JSON carries
        the interrupted run's entries without our count (an attribute, not serialised), and
        that run reported them. Only those recorded, from the first on, are claimed (see
        _recorded_count); the rest (made by a run that wrote elsewhere or not at all, or
        after a write that failed) are reported again rather than lost."""
        if usage is None or hasattr(usage, _REPORTED):
            return
        entries = _usage_entries(usage)[0]
        claimed = self._recorded_count(sid, entries) if sid is not None and entries else 0
        setattr(usage, _REPORTED, claimed)

    def _recorded_count(self, sid: str, entries: list[Any]) -> int:
        """How many of a run's `entries`, from the first, stand in order among the agent
        usage reports of `sid`'s chain (searched from the newest back: other runs on the
        session may have reported in between). A request is known by its figures (as
        :func:`request_usage` records them): one whose figures no ledger records (a report
        of it is dropped with a warning) counts as recorded. An entry matching another
        request's report of equal figures would be taken as recorded: no usage report
        says which request it was."""
        wanted = [_raw_or_none(entry) for entry in entries]
        pending = [raw for raw in wanted if raw is not None]
        if not pending:
            return len(entries)
        seen: list[Any] = []  # (the chain's agent reports, newest first)
        for raw in self._agent_reports_back(sid):
            seen.append(raw)
            if raw == pending[-1]:
                pending.pop()
                if not pending:
                    return len(entries)
        # not all were recorded: the longest run of them from the first (one pass over the
        # reports, oldest first: each is looked for after the one before it)
        oldest_first = reversed(seen)
        for index, raw in enumerate(wanted):
            if raw is not None and not any(report == raw for report in oldest_first):
                return index
        return len(entries)

    def _agent_reports_back(self, sid: str) -> Iterator[Any]:
        """The raw usage of each agent ``UsageReported`` of `sid`'s chain, newest first (a
        summarizer's, reported by a compaction after a run's write, is no request of a
        run's)."""
        ledger = self.service.ledger
        for session in reversed(ledger.chains.chain(sid)):
            for record in reversed(list(ledger.store.read_session(session))):
                event = record.event
                if isinstance(event, UsageReported) and event.purpose == "agent":
                    yield event.raw

    async def record_system_prompt(self, text: Any) -> bool:
        """The system prompt the agent is sent (``CtxLedgerRunHooks`` give each model
        call's: :mod:`ctxledger.integrations.openai_agents_hooks`): recorded when it differs
        from the ledger's (:func:`~ctxledger.integrations.common.record_changed_prompt`),
        which runs preflight; True then. Before the ledger session's first item (a streamed
        run saves its input after its first call's hook, also after ``clear_session``) it
        is the prompt that session is started with, without the ledger's compaction note.
        ``InvalidInput`` (nothing appended) for a text that is not a string of valid
        Unicode within the input limit. None (an agent with no instructions: none was
        sent) on a session holding a prompt is recorded as an empty one, so the previous
        prompt is no longer counted: the ledger's ``SystemPromptSet`` holds a string, and
        an empty prompt is counted as an empty system message (4 tokens) where none is
        sent. Before the first item, None leaves the start prompt as it is."""
        sid = self.ledger_session_id()
        if text is None:
            if sid is None or self.service.ledger.transcript.session(sid).system_prompt is None:
                return False
            return (await record_changed_prompt(self.service, sid, ""))[1]
        text = check_text(text, "system_prompt")
        if sid is None:
            self._pending = held_prompt(None, check_input_text(text, "system_prompt"))
            return False
        return (await record_changed_prompt(self.service, sid, text))[1]

    async def add_items(self, items: list[Any], *, wrapper: Any = None) -> None:
        """Append items (validated, all or nothing), then report the run's new usage."""
        if not isinstance(items, list):
            raise InvalidInput("items must be a list of input items")
        messages = items_to_messages(items)
        if self.ledger_session_id() is None:
            check_new_batch(messages)  # a refused first batch must not leave a session
            if not messages and not _unreported(wrapper):
                return  # nothing to record: no empty session either
        sid = await self._writable()
        sid = await self._report_left(sid, wrapper)
        if messages:
            sid = (await self.service.append(sid, messages)).session_id
        await self._report_usage(sid, _usage(wrapper), _asked(messages))
        usage = _usage(wrapper)
        if usage is not None:
            task = _task()
            self._left[id(usage)] = (usage, None if task is None else weakref.ref(task))

    async def _report_left(self, sid: str, wrapper: Any, *, ending: bool = False) -> str:
        """Report the requests a run made after it last wrote, once that run can no longer
        write: a run that ends in an error after a model call and before its next write (an
        output guardrail's trip) writes nothing more, and its last requests' usage was lost.
        A run is over when the task it wrote from is gone or done, or that task now makes
        another call (a task runs one run at a time); a run in flight (two runs at once)
        reports its own at its next write, saying whether they asked for tools. Whether a
        left-over's last request asked for tools is unknown (checked), as for a batch that
        ends in no response. `ending`: `sid` is about to end (``clear_session``,
        ``pop_item``): every other run's usage is that conversation's, and no check runs
        on it. The calling run's own is left to its next write (the SDK pops items in a
        run that goes on, when it rewinds to retry a conversation turn)."""
        own, current = _usage(wrapper), _task()
        for key, (usage, task_ref) in list(self._left.items()):
            if usage is own:
                continue  # (this call's run: its write reports its own)
            task = task_ref() if task_ref is not None else None
            if ending or task is None or task is current or task.done():
                del self._left[key]
                sid = await self._report_usage(sid, usage, None, ending=ending)
        return sid

    async def _report_usage(
        self, sid: str, usage: Any, last: bool | None, *, ending: bool = False
    ) -> str:
        """Report each model request of a run's `usage` not reported yet (Responses usage
        shape), saying whether it asked for tools (the in-loop check runs after those only,
        as Hermes's loop): a request another one followed in the run did (a tool call or a
        handoff); the last one as `last` says (see _asked). The requests are claimed
        before the first report awaits: another run's read or write meanwhile (two runs at
        once) must not report them again. On a session that is `ending`, none did (no
        check runs on a conversation that is over)."""
        entries, done = _usage_entries(usage)
        new = entries[done:]
        if new:
            setattr(usage, _REPORTED, len(entries))
        for index, entry in enumerate(new):
            report = functools.partial(request_usage, entry)
            asked = False if ending else True if index < len(new) - 1 else last
            sid = await report_usage_or_warn(self.service, sid, report, tool_calls=asked)
        return sid

    async def pop_item(self, *, wrapper: Any = None) -> Any | None:
        """Remove and return the latest item: the view minus that item continues as a
        branch (the log keeps everything)."""
        sid = self.ledger_session_id()
        if sid is None:
            return None
        sid = await self._report_left(sid, wrapper, ending=True)
        messages = live_messages(self.service, sid)
        if not messages:
            return None
        last_items = messages_to_items([messages[-1]])
        popped = last_items[-1] if last_items else None
        kept = [*messages[:-1], *items_to_messages(last_items[:-1])]
        view = self.service.ledger.transcript.session(sid)
        title = host_title("openai-agents session", self.session_id, " (after pop_item)")
        next_id = self._ledger_id(self._generation + 1)
        # the branch goes on with what the chain recorded: its model, and the next id of an
        # id recorded whole, as they are (a chain recorded before the name checks may hold
        # one they refuse; refusing would leave its history unusable here), and its prompt
        with taking_as_recorded(view.model, next_id, view.system_prompt):
            branch = await self.service.start_session(
                model=view.model,
                context_length=view.context_length,
                system_prompt=view.system_prompt,
                system_role=view.system_role,
                parent_session_id=sid,
                reason="branch",
                session_id=next_id,
                title=title,
                loop="per_run",
            )
        self._generation += 1  # (only once the branch is there: else the view would be empty)
        if kept:
            await self.service.append(branch, kept)
        await self.service.end_session(sid, "pop_item")  # superseded by the branch
        return popped

    async def clear_session(self, *, wrapper: Any = None) -> None:
        """End the current ledger session; the next item starts a new one."""
        self._pending = None
        sid = self.ledger_session_id()
        if sid is not None:
            sid = await self._report_left(sid, wrapper, ending=True)
            await self.service.end_session(sid, "cleared")

    async def run_compaction(
        self, args: Mapping[str, Any] | None = None, *, wrapper: Any = None
    ) -> None:
        """The Runner's post-write hook: ``force`` is a manual compaction, otherwise preflight
        (which compacts only over the threshold)."""
        sid = self.ledger_session_id()
        if sid is None:
            return
        if args and args.get("force"):
            await self.service.compress(sid)
        else:
            await self.service.preflight(sid)


def _asked(messages: list[Any]) -> bool | None:
    """Whether the batch's last model response asked for tools: its last assistant
    message, past the tool results after it, holds tool calls (True) or is a final
    answer (False); None when the batch ends in no response (unknown: checked)."""
    for message in reversed(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role == "tool":
            continue
        if role == "assistant":
            return bool(message.get("tool_calls"))
        return None
    return None


def _task() -> asyncio.Task[Any] | None:
    """The task a session call is made from (None: not in a task)."""
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


def _usage(wrapper: Any) -> Any:
    """The run's ``Usage`` (None: a call without the Runner's wrapper)."""
    return getattr(wrapper, "usage", None)


def _usage_entries(usage: Any) -> tuple[list[Any], int]:
    """The run's model requests (usage entries) and how many were reported already."""
    entries = list(getattr(usage, "request_usage_entries", None) or ())
    return entries, int(getattr(usage, _REPORTED, 0) or 0)


def _raw_or_none(entry: Any) -> JSON | None:
    """`entry` as :func:`request_usage` records it; None for figures no ledger records
    (a report of them is dropped with a warning, so none was recorded)."""
    try:
        return request_usage(entry)
    except InvalidInput:
        return None


def _unreported(wrapper: Any) -> bool:
    entries, done = _usage_entries(_usage(wrapper))
    return len(entries) > done


def request_usage(entry: Any) -> JSON:
    """One SDK ``RequestUsage`` as a Responses usage dict (input includes cached tokens)."""
    details = getattr(entry, "input_tokens_details", None)
    out_details = getattr(entry, "output_tokens_details", None)

    def count(block: Any, name: str) -> int:  # text and bools are refused, not made numbers
        return check_token_count(getattr(block, name, None), f"usage field {name!r}")

    return {
        "input_tokens": count(entry, "input_tokens"),
        "output_tokens": count(entry, "output_tokens"),
        "input_tokens_details": {
            "cached_tokens": count(details, "cached_tokens"),
            "cache_creation_tokens": count(details, "cache_write_tokens"),
        },
        "output_tokens_details": {"reasoning_tokens": count(out_details, "reasoning_tokens")},
    }


__all__ = ["CtxLedgerSession", "request_usage"]
