"""A Hermes Agent context engine on a ctxledger ledger (``pip install 'ctxledger[hermes]'``).

Hermes loads this module through the ``hermes_agent.plugins`` entry point when
``plugins.enabled`` lists ``ctxledger``; :func:`register` registers one
:class:`CtxLedgerEngine`, which Hermes uses when ``context.engine: ctxledger``. Every
compaction Hermes asks for then becomes events in a ledger that ``ctxledger replay``,
``diff`` and ``audit`` read. The ledger file is ``$CTXLEDGER_DB`` if set, else
``ctxledger.ledger.db`` in ``HERMES_HOME``; settings are resolved as everywhere else
(defaults < config file: ``$CTXLEDGER_CONFIG``, ``./ctxledger.toml``, the user config
directory < ``CTXLEDGER_<KEY>``; see ``ctxledger config``).

What the host does that the engine survives:

* it ``copy.deepcopy``s the registered engine for every agent: a copy shares the ledger
  and its worker thread, and copies the per-agent counters and bindings;
* ``compress`` is synchronous and may run while an asyncio loop runs in the caller's
  thread (the gateway): the async :class:`~ctxledger.ContextService` runs on a private
  loop thread (:class:`~ctxledger.integrations.common.LoopThread`), which also
  serializes every ledger access of every copy;
* ``messages`` exclude the system prompt and are the host's whole list: only the suffix
  the ledger has not seen is appended, and the live view is returned.
* with its session store on (the CLI, the gateway) it stamps ``_db_persisted`` on the
  dicts it saved (left out here), calls ``on_session_end`` with the list it compacted
  right after each compaction (known as recorded), and a resumed conversation comes
  back from ``state.db`` in a new agent (its chain is found by title and view; with
  rotating compaction, ``compression.in_place: false``, the conversation goes on under a
  new Hermes id at each compaction, and a resume of that id finds the chain by the ids
  it continues, as Hermes's store links them, handed over by ``bind_session_state``);
* its CLI's ``/new``, ``/resume <id>`` and ``/branch`` call ``on_session_reset`` alone
  (no ``on_session_start``): the next chain is the new id's, never the old one's.
* another writer (``ctxledger compress`` / ``undo`` from a shell) may move the chain's
  tip while Hermes runs: ``should_compress`` says yes at Hermes's next check and
  ``compress`` hands back the tip's view, nothing compacted again (:meth:`_adopt`;
  a user's ``/compress`` compacts the tip);
* its ``/compress here [N]`` (CLI, gateway) hands only the head, a strict prefix of what
  the ledger may hold, and re-appends the last N exchanges after the result: the head
  goes on as a branch of the chain's tip, the conversation's chain from then on.

Usage reports are queued by ``update_from_response`` and written when the host next
hands over its messages (``compress``, a recall tool call, the session's end), so each
lands after the messages it counted; the latest one goes through the service, so a
compaction Hermes triggered on real prompt tokens is recorded as ``in_loop``. Otherwise
``compress(force=True)`` (its ``/compress``) is a ``manual`` compaction, and
``force=False`` (Hermes decided, on its estimate) a ``preflight`` one with the size Hermes
passed (:class:`~ctxledger.integrations.hermes_host.Asked`), or ``overflow`` when its
``api_request_error`` hook said the provider refused the request for its size (session
38), ``hygiene`` under its gateway's hygiene (session 39), ``requested`` for its TUI's
and ACP's ``/compress`` (session 40); every one was ``manual`` before session 37.
``recall`` and ``expand_compaction`` are the engine's tools.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from agent.context_engine import ContextEngine

from ctxledger import (
    EXPAND_TOOL,
    RECALL_TOOL,
    ContextService,
    CtxLedgerError,
)
from ctxledger import handle_tool_call as ledger_tool_call
from ctxledger.compressor.assemble import reason_line
from ctxledger.errors import InvalidInput
from ctxledger.integers import shown, written
from ctxledger.integrations import hermes_host as host
from ctxledger.integrations.common import live_messages, prompt_count, session_name
from ctxledger.integrations.hermes_host import chat_usage
from ctxledger.integrations.hermes_repair import answerable, as_hermes_holds
from ctxledger.integrations.hermes_shared import DB_NAME, Shared, default_db_path
from ctxledger.messages import check_new_messages
from ctxledger.runtime.service_io import focus_topic
from ctxledger.tokens import rough_message_tokens

logger = logging.getLogger(__name__)
JSON = dict[str, Any]
T = TypeVar("T")
OVERFLOW = "context_overflow"  # the refusal after which a smaller window was stated
_TOOLS = {t["function"]["name"]: t["function"] for t in (RECALL_TOOL, EXPAND_TOOL)}


class CtxLedgerEngine(host.RealUsageTrust, ContextEngine):
    """Hermes's ``ContextEngine`` backed by :class:`~ctxledger.ContextService`."""

    def __init__(
        self, service: ContextService | None = None, *, db_path: str | Path | None = None
    ) -> None:
        self._shared = Shared(service, db_path or None)
        self._model = "hermes"
        self._hermes_session: str | None = None
        self._root: str | None = None  # the ledger chain this agent's conversation is on
        self._known: list[JSON] = []  # the host messages the ledger holds, in order
        self._seen: str | None = None  # the ledger session whose view the host holds
        self._seen_key: host.ViewKey | None = None  # that view as the host took it
        self._agent = host.agent_token()  # this agent's name for its strikes (Asked)
        self._pending: list[JSON] = []  # usage reports not written yet
        self._handed: list[bytes] = []  # digests of the host's list at the last compaction
        self._resumable = False  # a chain titled with the Hermes id may be continued
        self._session_db: Any = None  # Hermes's session store, as it binds it
        self.last_prompt_tokens = 0
        self.last_completion_tokens = 0
        self.last_total_tokens = 0
        self.compression_count = 0
        self.context_length = 0
        self.threshold_tokens = 0
        self._last_compression_made_progress = False
        self._last_compress_aborted = False
        self._last_summary_error: str | None = None
        self._last_summary_fallback_used = False
        self._last_summary_dropped_count = 0

    @property
    def name(self) -> str:
        return "ctxledger"

    def __deepcopy__(self, memo: dict[int, Any]) -> CtxLedgerEngine:
        """A per-agent copy: the ledger and its thread are shared, the counters copied."""
        clone = copy.copy(self)
        clone._known = copy.deepcopy(self._known, memo)
        clone._pending = copy.deepcopy(self._pending, memo)
        clone._handed = list(self._handed)
        clone._agent = host.agent_token()  # another agent: its own strikes
        return clone

    # --- token state ----------------------------------------------------------------------

    def update_model(
        self,
        model: str,
        context_length: int,
        base_url: str = "",
        api_key: str = "",
        provider: str = "",
        api_mode: str = "",
    ) -> None:
        """The window and threshold follow the model (the ledger's config decides the threshold).

        A window that is no positive number of tokens (0, None: a model Hermes knows
        nothing of) turns automatic compaction off with a warning, as a threshold of 0
        tokens; it raised into the host's loop (InvalidConfig, TypeError).

        The last response's figures were the previous model's: zeroed at every call, as
        Hermes's built-in compressor does (0 is its "no real usage yet" state; its
        status bar and ``get_status`` showed the old model's prompt against the new
        window). Reports not written yet are written to the chain before the switch (they
        are the old model's).
        """
        self.last_prompt_tokens = self.last_completion_tokens = self.last_total_tokens = 0
        self._last_compression_made_progress = False
        self._forget_real_usage()
        if not host.empty_reply_fallback():  # (Hermes keeps its count there)
            self._shared.attempts_renewed(self._hermes_session)  # (a fallback: count 0)
        window = host.window(context_length)
        if window is None:
            logger.warning(
                "ctxledger: no usable context length for model %s (got %s): automatic "
                "compaction is off until one is given",
                shown(model),  # (repr of an int of 5,000 digits raises in the log handler)
                shown(context_length),
            )
            self._model = model or self._model
            self.context_length = self.threshold_tokens = 0
            return
        shrunk = model == self._model and window < self.context_length  # (a stated window?)
        learnt = shrunk and self._shared.refused.get(self._hermes_session or "") == OVERFLOW
        changed = bool(self._root) and (model, window) != (self._model, self.context_length)
        self._model = model or self._model
        self.context_length = window
        config = self._shared.config()
        self.threshold_tokens = config.threshold_tokens(self.context_length)
        self.threshold_percent = self.threshold_tokens / max(1, self.context_length)
        self.protect_first_n = config.protect_first_n
        self.protect_last_n = config.protect_last_n
        root = self._root
        if changed and root is not None:
            self._run_safely(lambda svc: self._switch(svc, root, learnt))

    async def _switch(self, svc: ContextService, root: str, learnt: bool) -> None:
        """The old model's queued reports go to the chain first (accounting only): written
        after the switch they counted the old model's prompt against the new window. A
        smaller window of the same model right after a context-length refusal (`learnt`)
        is the one the provider stated: learnt (``ContextLimitLearned``); Hermes's own
        cut for the long-context tier ("not a model capability") is a switch."""
        tip = svc.tip(root)
        self._write_queued(svc, tip, keep_latest=False)
        said = f"hermes: its provider refused a request ({OVERFLOW}) and stated this window"
        if not learnt or not svc.ledger.learn_context_limit(tip, self.context_length, said):
            await svc.switch_model(tip, self._model, self.context_length)

    def _write_queued(self, svc: ContextService, sid: str, *, keep_latest: bool) -> JSON | None:
        """Write the queued usage reports to `sid` (accounting only), all of them or all
        but the latest, which is then returned (for the service to act on)."""
        pending, self._pending = self._pending, []
        last = pending.pop() if keep_latest and pending else None
        for usage in pending:
            svc.ledger.report_usage(sid, usage)
        return last

    def update_from_response(self, usage: dict[str, Any]) -> None:
        """Keep the report for the next ``compress``. One whose figures are not numbers
        (NaN, infinity, text) is dropped with a warning: it raised into the host's loop.
        Either way, and for none (``{}``: a response without usage), the wait for the
        compacted request's count ends, as Hermes's compressor ends it (it stayed on)."""
        if not usage:
            self._real_prompt(0)
            return
        try:
            report = chat_usage(usage)
            last = [host.tokens(usage, k) for k in ("prompt_tokens", "completion_tokens")]
            total = host.tokens(usage, "total_tokens")
        except (AttributeError, InvalidInput) as exc:
            logger.warning("ctxledger: a usage report was not recorded (%s): %s", exc, shown(usage))
            self._real_prompt(0)
            return
        self.last_prompt_tokens, self.last_completion_tokens = last
        self._real_prompt(last[0])
        self.last_total_tokens = total
        self._pending.append(report)

    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        """At the threshold, unless the ledger's anti-thrash guard or a cooldown holds; or
        whenever another writer moved the chain's tip (:meth:`_moved`): Hermes asks before
        every model call, and ``compress`` then hands it the tip's view (:meth:`_adopt`)."""
        count = prompt_count(prompt_tokens)  # (one of another type: none, warned)
        over = count is not None and 0 < self.threshold_tokens <= count
        self._shared.refused.pop(self._hermes_session or "", None)  # asked: none pending
        root = self._root
        if root is None or (self._seen is None and not over):
            return over
        answer = self._run_safely(lambda svc: self._should(svc, root, over))
        return over if answer is None else bool(answer)

    def _should(self, svc: ContextService, root: str, over: bool) -> bool:
        """:meth:`should_compress` on the tip read once: moved, else the guard if `over`."""
        if host.moved(svc, root, self._seen, self._seen_key):
            return True
        return over and bool(svc.tracker.guard(svc.tip(root), svc.ledger.clock(), self._agent)[0])

    def should_compress_preflight(self, messages: list[dict[str, Any]]) -> bool:
        """Before a call, without a real count: Hermes's rough estimate of ``messages``
        (chars // 4 + 10 a message) against the threshold. Nothing is written."""
        if self.threshold_tokens <= 0 or not isinstance(messages, list):
            return False
        rough = sum(rough_message_tokens(m) for m in messages if isinstance(m, dict))
        return self.should_compress(rough)

    # --- compaction -------------------------------------------------------------------------

    def compress(
        self,
        messages: list[dict[str, Any]],
        current_tokens: int | None = None,
        focus_topic: str | None = None,
        force: bool = False,
        memory_context: str = "",
    ) -> list[dict[str, Any]]:
        """Append what the ledger has not seen, compact, return the live view."""
        self._last_compression_made_progress = False
        self._last_compress_aborted = False
        self._last_summary_error = None
        self._last_summary_fallback_used = False
        self._last_summary_dropped_count = 0
        try:
            ids = self._lineage(None)
            refused = self._shared.refused.pop(self._hermes_session or "", None)
            asked = host.Asked.reading(  # (in Hermes's thread: who called, its config)
                focus_topic, bool(force), current_tokens, self._agent, refused
            )
            return self._shared.run(lambda svc: self._compress(svc, messages, asked, ids))  # type: ignore[no-any-return]
        except CtxLedgerError as exc:
            # the host keeps its messages unchanged and tells the user; nothing half-done
            logger.warning("ctxledger compaction failed: %s", exc)
            self._last_compress_aborted = True
            self._last_summary_error = f"ctxledger: {reason_line(str(exc))}"
            return messages

    async def _compress(
        self, svc: ContextService, messages: list[JSON], asked: host.Asked, ids: tuple[str, ...]
    ) -> list[JSON]:
        focus = focus_topic(asked.focus)  # a focus the ledger refuses appends nothing first
        messages = host.unmarked(messages)
        if self._root is None:
            await self._resume(svc, messages, ids)
            ids = ()  # looked for once
        root = self._root
        if (
            root is not None
            and self._rewinds(messages)
            and not host.head_compacts(svc, svc.tip(root), messages, focus, self.context_length)
        ):
            self._handed = [host.digest(m) for m in messages]
            return messages  # no progress, and no branch: the host keeps its list
        moved = self._moved(svc)
        sid, last = await self._sync(svc, messages, ids)
        self._handed = [host.digest(m) for m in messages]
        if moved and last is not None:  # its prompt: the list it sent (accounting only)
            svc.ledger.report_usage(self._seen or sid, last)
            last = None
        if moved and not (asked.force or asked.requested):  # (a user's ask compacts)
            return self._adopt(svc, sid)
        result = await svc.report_usage(sid, last) if last is not None else None
        if result is None or not result.compressed:
            result = await asked.run(svc, sid, focus)
        for name, value in host.failure_report(result).items():
            setattr(self, name, value)
        self._last_compression_made_progress = result.compressed
        return self._hand_back(svc, result.session_id)

    def _hand_back(self, svc: ContextService, sid: str) -> list[JSON]:
        """The live view of `sid`, which the host takes now (its list from then on)."""
        self.compression_count = host.compactions(svc.ledger.chains, sid)
        view = as_hermes_holds(host.unmarked(live_messages(svc, sid)))  # (marks: old ledgers)
        self._known, self._seen = copy.deepcopy(view), sid
        self._seen_key = host.view_key(svc, sid)
        return view

    def _moved(self, svc: ContextService) -> bool:
        """Whether another writer moved the chain's tip or wrote into the host's session
        since the host took its view (:func:`host.moved`): the host still holds
        ``_seen``'s view until it takes the tip's (:meth:`_adopt`)."""
        root = self._root
        return root is not None and host.moved(svc, root, self._seen, self._seen_key)

    def _adopt(self, svc: ContextService, sid: str) -> list[JSON]:
        """Hermes asked (at its check before its next model call) while the tip had moved:
        it takes the tip's view with its new messages appended, and nothing is compacted
        again (it measured its old list). Before session 37 it kept sending its own list
        while its new messages went onto the moved tip, a view it never sent. A user's
        ``/compress`` (``manual``, or ``requested`` since session 40) compacts the tip."""
        logger.warning(
            "ctxledger: another writer moved this conversation's ledger chain (ctxledger "
            "compress or undo, an append?); Hermes takes its view now (%s)",
            sid,
        )
        self._last_compression_made_progress = True
        return self._hand_back(svc, sid)

    async def _sync(
        self,
        svc: ContextService,
        messages: list[JSON],
        ids: tuple[str, ...],
        hold: bool = False,
        untaken: Callable[[], bool] | None = None,
    ) -> tuple[str, JSON | None]:
        """Append the host's new messages (without the session store's mark: callers
        pass them through :func:`host.unmarked` once); write queued usage but the latest
        (returned). ``ids``: the Hermes ids whose chain may be resumed (:meth:`_lineage`).
        While another writer has moved the tip, the usage goes on ``_seen`` (the view the
        host sent), and with `hold` the messages wait for :meth:`_adopt`; `untaken()`: the
        host will never take the moved view (asked only when the view moved) (its session ends, its compression is off:
        it never asks), and its list with its new messages goes on as a branch of the
        view it sent (session 39; they went onto the moved tip before)."""
        if self._root is None:
            await self._resume(svc, messages, ids)
        n = len(self._known)
        if self._root is not None and self._rewinds(messages):
            await self._branch(svc, self._root, messages)
            n = 0
        elif self._root is None or messages[:n] != self._known:
            check_new_messages(messages)  # a list the ledger cannot take starts nothing
            self._seen = None
            self._root = await svc.start_session(
                model=self._model,
                context_length=self.context_length or None,
                title=host.title(self._hermes_session or "?"),
            )
            self._known, n = [], 0
        sid, seen = svc.tip(self._root), self._seen
        moved = host.moved(svc, self._root, seen, self._seen_key)  # the host holds `seen`'s
        if moved and len(messages) > n and untaken is not None and untaken():
            await self._branch(svc, self._root, messages, seen)
            sid, seen, n, moved = svc.tip(self._root), None, 0, False
        new = [] if moved and hold else copy.deepcopy(messages[n:])
        suffix = answerable(svc, sid, new) if moved else new  # (its call withdrawn)
        base, appended = host.view_key(svc, sid), []
        if suffix:
            result = await svc.append(sid, suffix)
            sid, appended = result.session_id, result.message_ids
        self._known.extend(copy.deepcopy(new))  # (Hermes's list: a result left out too)
        if not moved:  # (a write meanwhile: the key is not the view's, so it moved)
            self._seen, self._seen_key = sid, host.grown(base, appended)
        return sid, self._write_queued(svc, self._seen or sid, keep_latest=True)

    def _rewinds(self, messages: list[JSON]) -> bool:
        """A strict prefix of what the ledger holds (:meth:`_branch`)."""
        return 0 < len(messages) < len(self._known) and messages == self._known[: len(messages)]

    async def _branch(
        self, svc: ContextService, root: str, head: list[JSON], held: str | None = None
    ) -> None:
        """The host handed a strict prefix of what the ledger holds: Hermes's
        ``/compress here [N]`` (CLI and gateway) compacts only the head and re-appends the
        last N exchanges after the result, some of which the ledger had seen (a recall
        call, a flush). The head goes on as a branch of the chain's tip, the
        conversation's chain from now on (a resume finds it by the same title); the old
        tip ends, superseded. A second root held the head again before. A rewind that
        hands a strict prefix branches as well: ``/retry`` with a preflight compaction
        (the history cut before the last user message, that message again), ``/undo``
        followed by ``/compress`` or an exit. A ``compress`` whose head would not compact
        starts no branch (:func:`host.head_compacts`). `held`: the session whose view the
        host holds, not the tip's (``_sync``'s `untaken`), the branch's parent."""
        check_new_messages(head)
        branch = await host.branch_tip(svc, root, self._model, self.context_length, held)
        self._root, self._known, self._seen = branch, [], None

    def _lineage(self, host_id: str | None) -> tuple[str, ...]:
        """With no chain yet, in the host's thread (Hermes's store is queried where Hermes
        uses it, never from the ledger's loop thread): the Hermes ids whose ledger chain
        this conversation may continue, nearest first. A conversation Hermes
        compacted with rotation (``compression.in_place: false``) goes on under a new id
        at each compaction, a child of the last in ``state.db``; its chain is titled with
        the id it started under, so a resume of the rotated id (``hermes --resume`` lands
        on the compression tip) looks under its compression ancestors too, as Hermes's
        own store links them (:func:`host.compression_ancestors`: branches and
        sub-agents are not followed)."""
        if self._root is not None:
            return ()
        self._rebind(host_id)
        own = self._hermes_session
        if own is None or not self._resumable:
            return ()
        return (own, *self._shared.ancestors(self._session_db, own))

    def _rebind(self, host_id: str | None) -> None:
        """After a reset with no start (the CLI's ``/new``, ``/resume <id>``, ``/branch``
        only set the agent's id and call ``reset_session_state()``: ``on_session_reset``
        alone), learn the conversation's id: the one the host names with the messages,
        else the one Hermes keeps current for its tools (``HERMES_SESSION_ID``, moved
        before the reset)."""
        if self._resumable:
            return
        current = host_id or host.host_session_id()
        if current and current != self._hermes_session:
            self._hermes_session, self._resumable = current, True

    async def _resume(
        self, svc: ContextService, messages: list[JSON], ids: tuple[str, ...]
    ) -> None:
        """A Hermes conversation resumed in a new agent (``hermes --resume``, the gateway
        after an eviction): its ledger chain goes on when the host's list starts with the
        chain tip's live view (:func:`host.resumed_chain`); before, every resume recorded
        the whole history again under a new root. Only for an id the engine was started
        on (after a reset the old id's chain is not this one). ``ids``: the Hermes ids
        the chain may be titled with (the agent's, then those it continues after a
        rotation)."""
        if not ids:
            return
        titles = {host.title(i) for i in ids}
        found = await host.resumed_chain(svc, messages, titles, self._model, self.context_length)
        if found is not None:
            self._root, self._known, self.compression_count = found
            self._seen = None

    def _flush(
        self, messages: list[JSON], *, final: bool = False, host_id: str | None = None
    ) -> str | None:
        """Hand the host's messages and queued usage to the ledger without compacting (a
        compaction the host did not ask for would leave it holding a stale list). The
        latest usage stays queued for the next ``compress`` unless this is the end.
        `messages` are :func:`host.unmarked` already."""

        ids = self._lineage(host_id)

        def untaken() -> bool:  # Hermes will not take a moved view (its config read then)
            return final or not host.compression_on()

        async def flush(svc: ContextService) -> str:
            sid, last = await self._sync(svc, messages, ids, not final, untaken)
            if last is not None and final:
                svc.ledger.report_usage(self._seen or sid, last)
            elif last is not None:
                self._pending.insert(0, last)
            return sid

        return self._run_safely(flush)  # type: ignore[no-any-return]

    def _run_safely(self, make: Callable[[ContextService], Any]) -> Any:
        try:
            return self._shared.run(make)
        except CtxLedgerError as exc:
            logger.warning("ctxledger: %s", exc)
            return None

    # --- lifecycle ----------------------------------------------------------------------------

    def on_session_start(self, session_id: str, **kwargs: Any) -> None:
        sid = session_name(session_id)  # (one that is no text: none, warned)
        if (
            self._shared.db_path is None
            and self._shared._service is None
            and kwargs.get("hermes_home")
        ):
            try:
                self._shared.db_path = default_db_path(str(kwargs["hermes_home"]))
            except CtxLedgerError as exc:  # a blank CTXLEDGER_DB: told, as every hook tells
                logger.warning("ctxledger: %s", exc)
        if kwargs.get("boundary_reason") == "compression":
            # the conversation goes on (the ledger chain already continued), under a new
            # Hermes id if Hermes rotated it: the id a later reset is told from
            self._hermes_session = sid or self._hermes_session
            return
        self._hermes_session, self._resumable = sid, True
        self._shared.refused.pop(sid or "", None)  # a new agent was refused nothing
        self._root, self._known, self._pending, self._handed = None, [], [], []
        self._seen = None

    def bind_session_state(self, session_db: Any = None, session_id: str = "") -> None:
        """Hermes hands its session store (``state.db``) to an engine that has this hook
        (its agent set-up, a reset to another id, the gateway's hygiene agent): kept to
        follow a rotated conversation's lineage at a resume, read in Hermes's thread."""
        self._session_db = session_db

    def on_session_end(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        """Make sure the ledger holds the whole conversation (even one never compacted).

        Hermes also calls it right after a compaction with the list it handed to
        ``compress`` (its memory flush, ``commit_memory_session``): the ledger holds that
        list already, and taking it for a new conversation started a second root with
        the whole uncompacted history at every compaction."""
        self._agent = host.agent_token()  # Hermes clears its strike count here, every time
        self._forget_real_usage()  # (and its counts: before it notes a compaction's estimate)
        if not isinstance(messages, list) or not messages:
            return
        messages, handed = host.unmarked(messages), self._handed
        if len(messages) <= len(handed) and all(
            host.digest(m) == d for m, d in zip(messages, handed, strict=False)
        ):
            return  # the list a compaction was made from: recorded already
        self._flush(messages, final=True, host_id=session_id)

    def on_session_reset(self) -> None:
        """A new conversation follows; its id comes with ``on_session_start``, or (the
        CLI's ``/new``, ``/resume``, ``/branch``) is learnt at the next hand-over."""
        super().on_session_reset()
        self._root, self._known, self._pending, self._handed = None, [], [], []
        self._seen, self._agent = None, host.agent_token()  # (Hermes clears its count)
        self._resumable = False
        self._forget_real_usage()

    # --- tools and status -----------------------------------------------------------------------

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return [copy.deepcopy(schema) for schema in _TOOLS.values()]

    def handle_tool_call(self, name: str, args: dict[str, Any], **kwargs: Any) -> str:
        """``recall`` / ``expand_compaction`` over this conversation's whole history."""
        if not isinstance(name, str) or name not in _TOOLS:  # (a list: unhashable)
            return json.dumps({"error": f"Unknown context engine tool: {written(name)}"})
        messages = kwargs.get("messages")
        sid = (
            self._flush(host.unmarked(messages))
            if isinstance(messages, list) and messages
            else None
        )
        root = sid or self._root
        if root is None:
            return json.dumps({"error": "nothing recorded yet in this conversation"})
        arguments = json.dumps(args if isinstance(args, dict) else {})
        out = self._run_safely(
            lambda svc: ledger_tool_call(svc.ledger, svc.tip(root), name, arguments)
        )
        return out if isinstance(out, str) else json.dumps({"error": "ctxledger is unavailable"})

    def get_status(self) -> dict[str, Any]:
        status: dict[str, Any] = dict(super().get_status())
        status["engine"] = self.name
        root = self._root
        if root is not None:
            ledger = self._run_safely(lambda svc: svc.status(root))
            if ledger:
                status["ledger_session_id"] = ledger["session_id"]
                status["ledger_db"] = str(self._shared.db_path or default_db_path())
        return status


def register(ctx: Any) -> None:
    """Hermes's plugin hook: register the engine (used when ``context.engine: ctxledger``),
    its ``api_request_error`` hook, which tells the engine that the provider refused a
    request for its size (:meth:`Shared.refusal`, ``host.Asked.refused``), and the two
    that end such a refusal unanswered (a request's start, a turn's end)."""
    engine = CtxLedgerEngine()
    ctx.register_context_engine(engine)
    register_hook = getattr(ctx, "register_hook", None)  # (a directory engine's drops it)
    if callable(register_hook):
        shared = engine._shared
        register_hook("api_request_error", shared.refusal)
        register_hook("pre_api_request", shared.request_started)
        register_hook("on_session_end", shared.turn_ended)


__all__ = ["DB_NAME", "CtxLedgerEngine", "chat_usage", "default_db_path", "register"]
