"""A LangChain v1 agent middleware on a ctxledger ledger (``pip install 'ctxledger[langchain]'``).

``CtxLedgerMiddleware`` wraps every model call of a ``create_agent`` graph:

1. the new suffix of ``request.messages`` (what the graph state gained since the last
   call) is appended to the thread's ledger session;
2. preflight runs (system prompt + messages + tools schema against the threshold);
3. the model is sent the ledger's live view through ``request.override(messages=...,
   system_message=...)``: the messages are the ledger's; the system message is the
   agent's own for that call (a ``dynamic_prompt`` applies) with the ledger's compaction
   note added after a compaction; after preflight, a prompt that differs from the one
   the ledger holds is recorded (``SystemPromptSet``, session 34) and preflight runs again
   on it, so the call is checked with what is sent (a what-if replays the same order);
4. the response's ``usage_metadata`` is reported (the in-loop trigger).

When the agent finishes (``after_agent``) what the state gained since the last model
call (the final answer, a structured response's tool message) is appended too, so a
finished run is whole in the ledger, not only once the thread's next call sends it.

The graph state keeps the full history (LangChain's ``SummarizationMiddleware`` replaces
the originals in the checkpoint); the compaction history is in the ledger. One ledger
session per graph thread (``config["configurable"]["thread_id"]``; a run without one is
the thread ``default:<an id of the run>``, see :meth:`CtxLedgerMiddleware.before_agent`):
``langchain:<thread>``, and ``~2``, ``~3``, ... when the state's history stops being an
extension of what the ledger saw (messages removed or rewritten), which starts over from
the state as it is; a history going on from another open generation (two workers that
ran the thread at once leave two) goes on there (session 36).
How ``<thread>`` is written (escaped, a long one cut): :mod:`.langchain_keys`.
Each appended message keeps its LangChain id in the ``lc_id`` key, so a restarted
process finds where the ledger left off.
"""

from __future__ import annotations

import functools
import threading
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import AIMessage

from ctxledger import ContextService
from ctxledger.errors import ConcurrencyError, CtxLedgerError, SessionEndedError
from ctxledger.integrations import recovery
from ctxledger.integrations.common import (
    LoopThread,
    host_title,
    live_messages,
    logger,
    record_changed_prompt,
    report_usage_or_warn,
    system_view,
)
from ctxledger.integrations.langchain_keys import (
    LC_ID,
    RunIndex,
    Thread,
    expected_version,
    is_run,
    last_recorded,
    recorded_ids,
    rewrites,
    run_of,
    session_key,
    thread_key,
)
from ctxledger.integrations.langchain_messages import (
    ModelCall,
    View,
    from_chat,
    host_prompt,
    new_run,
    overridden,
    prompt_role,
    responses_usage,
    state_messages,
    text_of,
    thread_id,
    to_chat,
    tool_schemas,
)
from ctxledger.integrations.langchain_tools import read_persisted
from ctxledger.limits import taking_as_recorded

JSON = dict[str, Any]
#: the (private) state field holding the thread of a run without a thread id
RUN_KEY = "ctxledger_run"
#: how many runs without a thread id the middleware keeps in memory (the least recently
#: used is forgotten first: a forgotten run found again in the ledger, see ``RunIndex``)
RUNS_KEPT = 256
#: how many times a model call's append is tried at the version it read (the last unchecked)
APPEND_TRIES = 3


class RunState(AgentState[Any]):
    """The agent state with the middleware's private field: the key of the run."""

    ctxledger_run: NotRequired[Annotated[str, PrivateStateAttr]]


class CtxLedgerMiddleware(AgentMiddleware[RunState, Any]):
    """Keeps a ``create_agent`` graph's model input inside the window, on a ledger."""

    state_schema = RunState

    def __init__(
        self,
        service: ContextService,
        *,
        model: str = "langchain-agent",
        context_length: int | None = None,
        run_ids: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        super().__init__()
        self.service = service
        self.model_name = model
        self.context_length = context_length
        self._threads: dict[str, Thread] = {}
        #: runs without a thread id, least recently used first; those that ended
        self._runs: OrderedDict[str, Thread] = OrderedDict()
        self._ended: set[str] = set()
        self._run_ids = run_ids
        self._keys: dict[str, str] = {}
        self._index = RunIndex()
        self._loop: LoopThread | None = None
        self._loop_lock = threading.Lock()
        self._warned_state = False
        self.tools = [read_persisted(self)]  # (the preview of a stored tool output names it)

    @classmethod
    def open(cls, path: str | Path, **kwargs: Any) -> CtxLedgerMiddleware:
        """A middleware on the ledger at `path`: a SQLite file (created on first use) or a
        ``postgresql://`` URL."""
        service_kwargs = {k: kwargs.pop(k) for k in ("config", "summarizer") if k in kwargs}
        return cls(ContextService.open(path, **service_kwargs), **kwargs)

    @property
    def name(self) -> str:
        return "CtxLedgerMiddleware"

    # --- the hooks ----------------------------------------------------------------------

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """A run without a thread id (a graph with no checkpointer) gets its own key, kept
        in the state for the run: runs at the same time never share a session, even when
        their first message is one object every request reuses (LangGraph gives it an id
        once, so an id of a message is no key). A run given the messages of one that
        ended (its whole state plus a new message) continues that run's session: found
        in memory, else in the ledger (after a restart, or once forgotten)."""
        ids = new_run(state, RUN_KEY)
        if ids is None:
            return None
        return {RUN_KEY: self.loop_thread().run(lambda: self._run_key(ids))}

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        ids = new_run(state, RUN_KEY)
        return None if ids is None else {RUN_KEY: await self._run_key(ids)}

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        thread = thread_id(request.state, request.messages, RUN_KEY)
        loop = self.loop_thread()
        call = loop.run(lambda: self._before(thread, request))
        while True:
            try:
                response = handler(overridden(request, call, self.tools[0]))
                break
            except BaseException as exc:
                retry = loop.run(functools.partial(self._failed, thread, call, exc))
                if retry is None:
                    raise
                call = retry
        loop.run(lambda: self._after(thread, call, response))
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        thread = thread_id(request.state, request.messages, RUN_KEY)
        call = await self._before(thread, request)
        while True:
            try:
                response = await handler(overridden(request, call, self.tools[0]))
                break
            except BaseException as exc:
                retry = await self._failed(thread, call, exc)
                if retry is None:
                    raise
                call = retry
        await self._after(thread, call, response)
        return response

    def after_agent(self, state: Any, runtime: Any) -> None:
        thread = thread_id(state, state_messages(state), RUN_KEY)
        self.loop_thread().run(lambda: self._end_run(thread, state))

    async def aafter_agent(self, state: Any, runtime: Any) -> None:
        await self._end_run(thread_id(state, state_messages(state), RUN_KEY), state)

    def loop_thread(self) -> LoopThread:
        """The thread the sync hooks run the middleware's steps on: all its bookkeeping is
        done there (a sync agent's ``batch`` calls the hooks from many threads)."""
        with self._loop_lock:
            if self._loop is None:
                self._loop = LoopThread("ctxledger-langchain")
            return self._loop

    # --- steps ----------------------------------------------------------------------------

    async def _before(self, thread: str, request: ModelRequest[Any]) -> ModelCall:
        """Append the new suffix of the state's messages, run preflight, read the view."""
        messages = list(request.messages)
        known, sid = await self._appended(thread, request, messages)
        # preflight, then the agent's prompt of this call (a dynamic_prompt) is recorded when
        # it changed, which runs preflight again: the order a what-if replays it in
        sid = (await self.service.preflight(sid)).session_id
        host = request.system_message
        if host is not None:
            text, role = text_of(host.content), prompt_role(host)
            sid = (await record_changed_prompt(self.service, sid, text, role))[0]
        self._mark(known)
        system = system_view(self.service, sid)
        view = View(system, live_messages(self.service, sid), messages)
        cap = recovery.requested_cap(
            request.model_settings.get("max_tokens"), getattr(request.model, "max_tokens", None)
        )
        return ModelCall(sid, view, cap)

    async def _appended(
        self, thread: str, request: ModelRequest[Any], messages: list[Any]
    ) -> tuple[Thread, str]:
        """The thread after appending what `messages` add to what its session holds, and
        the session's tip. The append expects the version the check read: another
        process's write in between (``ConcurrencyError``, nothing written) is read and
        the check made again; the last try appends unchecked, as before. A generation
        another process started first is read the same way (the next one is started), and
        a session another process ended in between (``SessionEndedError``): the next
        generation is started. A history going on from another open generation goes on there."""
        ids = [str(m.id) for m in messages]
        ended = False  # another process ended the session between the check and the append
        for attempt in range(APPEND_TRIES):
            last = attempt == APPEND_TRIES - 1
            known = self._known(thread)
            if known is not None and ids[: len(known.seen)] != known.seen:
                known = self._branch(thread, ids, known)
            ended = ended and known is not None and self._is_ended(known.root)
            if known is None or ended or ids[: len(known.seen)] != known.seen:
                try:
                    known = await self._start(thread, request, known, ids)
                except ConcurrencyError:  # another process started that generation first:
                    if last:  # its divergence, read at the next try (what this one saw kept)
                        raise
                    if known is not None:
                        known.version = None
                    continue
            sid = self.service.tip(known.root)
            suffix = messages[len(known.seen) :]
            if not suffix:
                known.mine = None
                return known, sid
            expected = None if last else expected_version(known, sid)
            try:
                result = await self.service.append(sid, to_chat(suffix), expected_version=expected)
            except ConcurrencyError:
                if expected is None:
                    raise
                continue
            except SessionEndedError:
                if last:
                    raise
                ended = True  # re-read: a generation open now, or the next one started
                continue
            known.seen.extend(ids[len(known.seen) :])
            known.mine = None
            return known, result.session_id
        raise AssertionError("unreachable: the last try appends unchecked")

    async def _failed(self, thread: str, call: ModelCall, exc: BaseException) -> ModelCall | None:
        """The model call failed: the call to retry after a provider's overflow error, as
        the service decides (:mod:`ctxledger.integrations.recovery`: a lower output cap,
        or the compacted view); None (the error is the run's) for any other error. A
        failure that is not retried forgets its run (:meth:`_forget_run`)."""
        known = self._runs.get(thread) or self._threads.get(thread)
        ours = known is not None and known.version == self._version(known.root)
        try:
            step = None
            if call.lowered < recovery.MAX_CAP_RETRIES:
                step = await recovery.recover(
                    self.service, call.sid, exc, requested_max_tokens=call.max_tokens
                )
        finally:
            if step is None:  # (also when recovery gave up: ContextOverflowError)
                await self._forget_run(thread)
        if step is None:
            return None
        if ours and known is not None:  # the compaction is this process's own write (a
            self._mark(known)  # write of another process before it is read at the next call)
        sid = step.session_id
        view = View(
            system_view(self.service, sid), live_messages(self.service, sid), call.view.state
        )
        if step.max_tokens is None:
            return ModelCall(sid, view, call.max_tokens, call.lowered, recovered=True)
        return ModelCall(sid, view, step.max_tokens, call.lowered + 1, recovered=True)

    async def _after(self, thread: str, call: ModelCall, response: ModelResponse[Any]) -> None:
        """Report the response's usage; after a recovered call, the turn's recovery is
        over (a model that reports no usage would count every turn's recovery on)."""
        sid = call.sid
        known = self._runs.get(thread) or self._threads.get(thread)
        self.service.ledger.refresh()  # another process's write since _before stays unseen
        ours = known is not None and known.version == self._version(known.root)
        for message in response.result:
            usage = (
                getattr(message, "usage_metadata", None) if isinstance(message, AIMessage) else None
            )
            if usage:  # after a final answer the next call's preflight decides (as Hermes)
                asked = bool(getattr(message, "tool_calls", None))
                report = functools.partial(responses_usage, usage)
                sid = await report_usage_or_warn(self.service, sid, report, tool_calls=asked)
        if call.recovered:
            await self.service.model_call_succeeded(sid)
        if ours and known is not None:
            self._mark(known)

    async def _end_run(self, thread: str, state: Any) -> None:
        """:meth:`_finish`; a run without a thread id is then one a later run may
        continue (:meth:`before_agent`)."""
        try:
            await self._finish(thread, state)
        finally:
            if thread in self._runs:
                self._ended.add(thread)

    async def _finish(self, thread: str, state: Any) -> None:
        """Append what the state gained since the last model call (its final answer). A
        thread no model call recorded, or whose history was rewritten since, is left to
        the next call. A refusal, or a message LangChain cannot convert to a chat message
        (the model-call hook raises there: no call goes ahead without the ledger's view),
        is a warning: the run has its answer already."""
        messages = state_messages(state)
        if messages is None:
            if not self._warned_state:
                self._warned_state = True
                logger.warning(
                    "ctxledger: an agent state with no readable messages (%s): the end of "
                    "each run is recorded at the thread's next model call",
                    type(state).__name__,
                )
            return
        known = self._known(thread)
        ids = [str(m.id) for m in messages]
        if known is None or ids[: len(known.seen)] != known.seen:
            return
        suffix = messages[len(known.seen) :]
        if not suffix:
            return
        tip = self.service.tip(known.root)
        try:  # another process's write since the check: refused, left to the next call
            await self.service.append(
                tip, to_chat(suffix), expected_version=expected_version(known, tip)
            )
        except (CtxLedgerError, ValueError, KeyError, TypeError) as exc:
            logger.warning("ctxledger: the end of thread %s not recorded yet: %s", thread, exc)
            return
        known.seen.extend(ids[len(known.seen) :])
        known.mine = None
        self._mark(known)

    # --- which ledger session -----------------------------------------------------------

    def session_of(self, state: Any) -> str | None:
        """The tip of the session a graph `state`'s thread goes on in (None: nothing
        recorded), for its tools; read only, as last written (no generation is chosen)."""
        thread = thread_id(state, state_messages(state), RUN_KEY)
        self.service.ledger.refresh()
        known = self._runs.get(thread) or self._threads.get(thread) or self._recorded(thread)
        return None if known is None else self.service.ledger.tip(known.root)  # (refreshed)

    def _known(self, thread: str) -> Thread | None:
        self.service.ledger.refresh()
        known = self._runs.get(thread)
        if known is not None:
            self._runs.move_to_end(thread)
        else:
            known = self._threads.get(thread)
        return self._recover(thread) if known is None else self._current(thread, known)

    def _current(self, thread: str, known: Thread) -> Thread:
        """`known` as the (refreshed) ledger holds it: memory is a hint. Another process
        on the ledger (a second worker of a server) may have continued the thread, or
        started a generation of it, since this one last wrote: its ids are read again (of
        its latest generation)."""
        if known.version != self._version(known.root):
            fresh = self._recorded(thread)
            if fresh is not None:
                if known.mine is None:  # (kept until this process writes again)
                    known.mine = known.seen
                known.root, known.seen, known.version = fresh.root, fresh.seen, fresh.version
        return known

    def _is_ended(self, root: str) -> bool:
        return self.service.ledger.transcript.session(self.service.tip(root)).ended

    def _version(self, root: str) -> tuple[str, int]:
        tip = self.service.tip(root)
        return tip, self.service.ledger.version(tip)

    def _mark(self, known: Thread) -> None:
        """This process wrote `known`'s tip last (as far as it knows)."""
        known.version = self._version(known.root)

    def _keep(self, thread: str, known: Thread) -> Thread:
        """Remember `known`; of the runs without a thread id, the :data:`RUNS_KEPT` used
        last (a server's runs, finished or failed, would pile up otherwise)."""
        if not is_run(thread):
            self._threads[thread] = known
            return known
        self._runs[thread] = known
        self._runs.move_to_end(thread)
        while len(self._runs) > RUNS_KEPT:
            old, _ = self._runs.popitem(last=False)
            self._ended.discard(old)
            self._keys.pop(old, None)
        return known

    async def _forget_run(self, thread: str) -> None:
        """A failed model call: no ``after_agent`` follows if the run fails with it, so a
        run without a thread id is forgotten now (memory), its session left as it is: a
        retry of the call (a retry or fallback middleware outside this one) finds it in
        the ledger."""
        if self._runs.pop(thread, None) is not None:
            self._ended.discard(thread)
            self._keys.pop(thread, None)

    async def _run_key(self, ids: list[str]) -> str:
        """The key of a run without a thread id: the run whose messages `ids` continue,
        else a new one."""
        return self._continued(ids) or await self._recorded_run(ids) or f"default:{self._run_ids()}"

    def _continued(self, ids: list[str]) -> str | None:
        """The ended run in memory whose messages `ids` start with (the longest), taken back."""
        self.service.ledger.refresh()
        best, longest = None, 0
        for key in list(self._ended):  # async hooks may be called from several threads
            known = self._runs.get(key)
            seen = [] if known is None else self._current(key, known).seen
            if len(seen) > longest and ids[: len(seen)] == seen:
                best, longest = key, len(seen)
        if best is not None:
            self._ended.discard(best)
        return best

    async def _recorded_run(self, ids: list[str]) -> str | None:
        """The run without a thread id whose ledger session holds the messages `ids` start
        with (the longest), found by the last message id each session recorded: a run
        forgotten, or of a process before this one (main's one ``default`` thread too).
        The generation found is continued, the latest or not (two workers that ran one
        conversation at once left two open), unless it ended (a history rewritten). A
        run going on in this process is never taken."""
        last = await self._index.update(self.service)
        for end in range(len(ids), 0, -1):
            sid = last.get(ids[end - 1])
            root = None if sid is None else self.service.ledger.chains.root(sid)
            thread = None if root is None else run_of(root)
            if thread is None or (thread in self._runs and thread not in self._ended):
                continue
            known = None if root is None or self._is_ended(root) else self._read(root)
            if known is not None and known.seen == ids[:end]:
                self._ended.discard(thread)
                self._keep(thread, known)
                return thread
            if thread not in self._runs:
                self._keys.pop(thread, None)
        return None

    def _root(self, thread: str, generation: int) -> str:
        base = f"langchain:{self._key(thread)}"
        return base if generation == 1 else f"{base}~{generation}"

    def _key(self, thread: str) -> str:
        """The thread's part of its session ids (:func:`langchain_keys.thread_key`)."""
        key = self._keys.get(thread)
        if key is None:
            key = thread_key(thread, self.service.ledger.chains.state.sessions)
            self._keys[thread] = key
        return key

    def _generations(self, thread: str) -> int:
        """How many ledger sessions this thread has had (0: none yet)."""
        self.service.ledger.refresh()
        sessions = self.service.ledger.transcript.state.sessions
        n = 0
        while self._root(thread, n + 1) in sessions:
            n += 1
        return n

    def _branch(self, thread: str, ids: list[str], known: Thread) -> Thread:
        """The open generation of the thread other than `known`'s whose messages `ids`
        go on from (the longest), kept; else `known`. Two workers that ran one
        conversation at once leave two open, and a resend may continue either; an ended
        one (a history rewritten) is never continued."""
        best: Thread | None = None
        for other in self._holding(thread, ids, known):
            seen = other.seen
            if other.root == known.root or not seen or ids[: len(seen)] != seen:
                continue
            if best is None or len(seen) > len(best.seen):
                best = other
        return known if best is None else self._keep(thread, best)

    def _holding(self, thread: str, ids: list[str], known: Thread) -> Iterator[Thread]:
        """The open generations of the thread whose last recorded message (the last of
        its live view) `ids` holds, read (`known` as it is): those the history goes on
        from or rewrites. Only their chains are read."""
        held = set(ids)
        for n in range(1, self._generations(thread) + 1):
            root = self._root(thread, n)
            last = last_recorded(self.service, root)
            if self._is_ended(root) or last not in held | {None}:
                continue
            yield known if root == known.root else self._read(root)

    def _recover(self, thread: str) -> Thread | None:
        """After a restart: the ids this thread's latest ledger session already holds.
        This process saw none of them (``mine`` empty): a history that diverges from
        them is not one it rewrote, the session is left open (another worker's)."""
        known = self._recorded(thread)
        if known is not None:
            known.mine = []
        return None if known is None else self._keep(thread, known)

    def _recorded(self, thread: str) -> Thread | None:
        """The thread's latest generation as the ledger holds it (None: none yet)."""
        n = self._generations(thread)
        return None if n == 0 else self._read(self._root(thread, n))

    def _read(self, root: str) -> Thread:
        """The session `root` (one generation of a thread) and the message ids it holds."""
        return Thread(root, recorded_ids(self.service, root), self._version(root))

    def _replaced(self, thread: str, ids: list[str], old: Thread) -> list[str]:
        """The generations the history `ids` (which goes on from none) replaces: the open
        ones it rewrites (:func:`rewrites`), judged against those whose last recorded
        message it holds, never another (a branch of another worker); and `old`, when
        the history diverged from what this process had seen and comes from no other
        generation (this process's own history rewritten)."""
        held = list(self._holding(thread, ids, old))
        roots = [g.root for g in held if rewrites(ids, g.seen)]
        theirs = old.mine is not None and ids[: len(old.mine)] == old.mine
        if not theirs and old.root not in roots and all(g.root == old.root for g in held):
            roots.append(old.root)
        return roots

    async def _start(
        self, thread: str, request: ModelRequest[Any], old: Thread | None, ids: list[str]
    ) -> Thread:
        """A new ledger session for the thread (the first, or after the history was
        rewritten). The ones it replaces are ended (:meth:`_replaced`); a generation
        another process's write diverged from (two workers running one conversation at
        once) is the other's, going on. The host's prompt is checked first: a refused
        one ends nothing."""
        prompt = host_prompt(request.system_message)
        for root in [] if old is None else self._replaced(thread, ids, old):
            tip = self.service.tip(root)
            if not self.service.ledger.transcript.session(tip).ended:
                await self.service.end_session(tip, "history rewritten")
        generation = self._generations(thread) + 1
        sid = self._root(thread, generation)
        # a long id recorded whole before the digest goes on under it (its next
        # generation may be past today's 1,024 characters for a chosen id): that id only
        whole = self._key(thread) != session_key(thread)
        with taking_as_recorded(*([sid] if whole else [])):
            root = await self.service.start_session(
                model=self.model_name,
                context_length=self.context_length,
                system_prompt=prompt,
                system_role=prompt_role(request.system_message),
                tools=tool_schemas(request.tools, self.tools[0]),
                session_id=sid,
                title=host_title("langchain thread", thread),
                loop="every_call",  # preflight before each model call (before_model), no hygiene
            )
        return self._keep(thread, Thread(root, []))


__all__ = ["LC_ID", "CtxLedgerMiddleware", "from_chat", "responses_usage", "to_chat"]
