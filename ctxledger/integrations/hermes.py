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
  back from ``state.db`` in a new agent (its chain is found by title and view);
* its CLI's ``/new``, ``/resume <id>`` and ``/branch`` call ``on_session_reset`` alone
  (no ``on_session_start``): the next chain is the new id's, never the old one's.

Usage reports are queued by ``update_from_response`` and written when the host next
hands over its messages (``compress``, a recall tool call, the session's end), so each
lands after the messages it counted; the latest one goes through the service, so a
compaction Hermes triggered on real prompt tokens is recorded as ``in_loop``. When the
host asks without a fresh report (its pre-call estimate), the compaction runs as a
manual one. ``recall`` and ``expand_compaction`` are the engine's tools.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from agent.context_engine import ContextEngine

from ctxledger import (
    EXPAND_TOOL,
    RECALL_TOOL,
    CompressionConfig,
    ContextService,
    CtxLedgerError,
    TurnResult,
)
from ctxledger import handle_tool_call as ledger_tool_call
from ctxledger.compressor.assemble import reason_line
from ctxledger.compressor.settings import resolve_config
from ctxledger.errors import InvalidInput
from ctxledger.eventstore.opening import env_db, is_url
from ctxledger.integrations.common import LoopThread, host_title, ledger_target, live_messages
from ctxledger.limits import check_context_length, check_token_count
from ctxledger.messages import check_new_messages
from ctxledger.tokens import rough_message_tokens
from ctxledger.usage import normalize_usage

logger = logging.getLogger(__name__)
JSON = dict[str, Any]
T = TypeVar("T")
DB_NAME = "ctxledger.ledger.db"
_TOOLS = {t["function"]["name"]: t["function"] for t in (RECALL_TOOL, EXPAND_TOOL)}


def default_db_path(hermes_home: str | None = None) -> str | Path:
    """``$CTXLEDGER_DB`` (a file or a ``postgresql://`` URL), else ``ctxledger.ledger.db``
    in ``HERMES_HOME`` (``~/.hermes``)."""
    db = env_db()
    if db:
        return db if is_url(db) else Path(db)
    home = hermes_home or os.environ.get("HERMES_HOME") or str(Path.home() / ".hermes")
    return Path(home) / DB_NAME


class _Shared:
    """What every copy of the engine shares: the service (opened on first use) and the
    thread its loop runs on."""

    def __init__(self, service: ContextService | None, db_path: str | Path | None) -> None:
        self._service = service
        self.db_path = db_path
        self._lock = threading.Lock()
        self._loop: LoopThread | None = None
        self._config: CompressionConfig | None = None

    def run(self, make: Callable[[ContextService], Any]) -> Any:
        with self._lock:
            if self._loop is None:
                self._loop = LoopThread("ctxledger-hermes")
        loop = self._loop

        async def call() -> Any:
            result = make(self.service())
            if hasattr(result, "__await__"):
                return await result
            return result

        return loop.run(call)

    def config(self) -> CompressionConfig:
        """The settings, without opening the ledger (Hermes asks for the threshold in
        ``update_model`` before ``on_session_start`` names its home)."""
        if self._service is not None:
            return self._service.config
        with self._lock:
            if self._config is None:
                # one settings resolution, as Ledger.open would do it
                self._config = resolve_config().config
            return self._config

    def service(self) -> ContextService:
        if self._service is None:
            target = ledger_target(self.db_path or default_db_path())
            self._service = ContextService.open(target, config=self.config())
        return self._service


class CtxLedgerEngine(ContextEngine):
    """Hermes's ``ContextEngine`` backed by :class:`~ctxledger.ContextService`."""

    def __init__(
        self, service: ContextService | None = None, *, db_path: str | Path | None = None
    ) -> None:
        self._shared = _Shared(service, db_path or None)
        self._model = "hermes"
        self._hermes_session: str | None = None
        self._root: str | None = None  # the ledger chain this agent's conversation is on
        self._known: list[JSON] = []  # the host messages the ledger holds, in order
        self._pending: list[JSON] = []  # usage reports not written yet
        self._handed: list[bytes] = []  # digests of the host's list at the last compaction
        self._resumable = False  # a chain titled with the Hermes id may be continued
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
        """
        window = _window(context_length)
        if window is None:
            logger.warning(
                "ctxledger: no usable context length for model %r (got %r): automatic "
                "compaction is off until one is given",
                model,
                context_length,
            )
            self._model = model or self._model
            self.context_length = self.threshold_tokens = 0
            return
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
            self._run_safely(lambda svc: svc.switch_model(root, self._model, self.context_length))

    def update_from_response(self, usage: dict[str, Any]) -> None:
        """Keep the report for the next ``compress``. One whose figures are not numbers
        (NaN, infinity, text) is dropped with a warning: it raised into the host's loop."""
        if not usage:
            return
        try:
            report = chat_usage(usage)
            last = [_tokens(usage, k) for k in ("prompt_tokens", "completion_tokens")]
            total = _tokens(usage, "total_tokens")
        except (AttributeError, InvalidInput) as exc:
            logger.warning("ctxledger: a usage report was not recorded (%s): %.200r", exc, usage)
            return
        self.last_prompt_tokens, self.last_completion_tokens = last
        self.last_total_tokens = total
        self._pending.append(report)

    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        """At the threshold, unless the ledger's anti-thrash guard or a cooldown holds."""
        if (
            prompt_tokens is None
            or self.threshold_tokens <= 0
            or prompt_tokens < self.threshold_tokens
        ):
            return False
        root = self._root
        if root is None:
            return True
        status = self._run_safely(lambda svc: svc.status(root))
        return not (status and (status["blocked"] or status["cooldown_remaining"] > 0))

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
            return self._shared.run(lambda svc: self._compress(svc, messages, focus_topic))  # type: ignore[no-any-return]
        except CtxLedgerError as exc:
            # the host keeps its messages unchanged and tells the user; nothing half-done
            logger.warning("ctxledger compaction failed: %s", exc)
            self._last_compress_aborted = True
            self._last_summary_error = f"ctxledger: {reason_line(str(exc))}"
            return messages

    async def _compress(
        self, svc: ContextService, messages: list[JSON], focus: str | None
    ) -> list[JSON]:
        messages = _unmarked(messages)
        sid, last = await self._sync(svc, messages)
        self._handed = [_digest(m) for m in messages]
        result = await svc.report_usage(sid, last) if last is not None else None
        if result is None or not result.compressed:
            result = await svc.compress(sid, focus=focus)
        sid = result.session_id
        self._report_failure(result)
        self._last_compression_made_progress = result.compressed
        self.compression_count = svc.ledger.chains.compression_count(sid)
        view = _unmarked(live_messages(svc, sid))  # a ledger from before kept the marks
        self._known = copy.deepcopy(view)
        return view

    def _report_failure(self, result: TurnResult) -> None:
        """What Hermes's ``/compress`` reads to report a failed summary (its
        ``summarize_manual_compression``, its gateway): an abandoned compaction
        (``_last_compress_aborted``, nothing removed) or a fallback summary and how many
        messages it replaced, each with its reason (``_last_summary_error``, redacted)."""
        for outcome in result.compactions:
            if outcome.fallback:
                self._last_summary_fallback_used = True
                # stored redacted (at the source): one-lined, not redacted again
                said = reason_line(outcome.failure or "", redacted=True)
                self._last_summary_error = said or outcome.failure_class
                self._last_summary_dropped_count = outcome.removed
        if result.aborted is not None:
            self._last_compress_aborted = True
            self._last_summary_error = result.aborted

    async def _sync(
        self, svc: ContextService, messages: list[JSON], host_id: str | None = None
    ) -> tuple[str, JSON | None]:
        """Append the host's new messages (without the session store's mark: callers
        pass them through :func:`_unmarked` once); write queued usage but the latest
        (returned). ``host_id``: the Hermes id the host named with the messages
        (``on_session_end``)."""
        if self._root is None:
            self._rebind(host_id)
            await self._resume(svc, messages)
        n = len(self._known)
        if self._root is None or messages[:n] != self._known:
            check_new_messages(messages)  # a list the ledger cannot take starts nothing
            self._root = await svc.start_session(
                model=self._model,
                context_length=self.context_length or None,
                title=_title(self._hermes_session or "?"),
            )
            self._known, n = [], 0
        sid = svc.tip(self._root)
        suffix = copy.deepcopy(messages[n:])
        if suffix:
            sid = (await svc.append(sid, suffix)).session_id
            self._known.extend(copy.deepcopy(suffix))
        pending, self._pending = self._pending, []
        for usage in pending[:-1]:
            svc.ledger.report_usage(sid, usage)  # older reports: accounting only
        return sid, (pending[-1] if pending else None)

    def _rebind(self, host_id: str | None) -> None:
        """After a reset with no start (the CLI's ``/new``, ``/resume <id>``, ``/branch``
        only set the agent's id and call ``reset_session_state()``: ``on_session_reset``
        alone), learn the conversation's id: the one the host names with the messages,
        else the one Hermes keeps current for its tools (``HERMES_SESSION_ID``, moved
        before the reset)."""
        if self._resumable:
            return
        current = host_id or _host_session_id()
        if current and current != self._hermes_session:
            self._hermes_session, self._resumable = current, True

    async def _resume(self, svc: ContextService, messages: list[JSON]) -> None:
        """A Hermes conversation resumed in a new agent (``hermes --resume``, the gateway
        after an eviction): its ledger chain goes on when the host's list starts with the
        chain tip's live view (compared as a conversation, without the bookkeeping keys
        Hermes's session store adds or drops: ``timestamp``, ``reasoning``, ...); before,
        every resume recorded the whole history again under a new root. Only for an id
        the engine was started on (after a reset the old id's chain is not this one), and
        the tip takes the agent's model and window if they changed meanwhile."""
        if self._hermes_session is None or not self._resumable:
            return
        svc.ledger.refresh()
        title = _title(self._hermes_session)
        chains = svc.ledger.chains.state.sessions
        roots = sorted(
            (i for i in chains.values() if i.title == title and i.parent_session_id is None),
            key=lambda i: i.started_seq,
            reverse=True,  # the latest conversation under this id first
        )
        for lineage in roots:
            tip = svc.tip(lineage.session_id)
            if svc.ledger.transcript.session(tip).ended:
                continue
            view = live_messages(svc, tip)
            if 0 < len(view) <= len(messages) and all(
                _said(a) == _said(b) for a, b in zip(view, messages, strict=False)
            ):
                self._root, self._known = lineage.session_id, copy.deepcopy(messages[: len(view)])
                await self._follow_model(svc, tip)
                return

    async def _follow_model(self, svc: ContextService, tip: str) -> None:
        """A resumed chain written under another model or window switches to the agent's
        (the service takes its thresholds from the session's window); the compaction
        count is the chain's."""
        session = svc.ledger.transcript.session(tip)
        if self.context_length and (session.model, session.context_length) != (
            self._model,
            self.context_length,
        ):
            tip = (await svc.switch_model(tip, self._model, self.context_length)).session_id
        self.compression_count = svc.ledger.chains.compression_count(tip)

    def _flush(
        self, messages: list[JSON], *, final: bool = False, host_id: str | None = None
    ) -> str | None:
        """Hand the host's messages and queued usage to the ledger without compacting (a
        compaction the host did not ask for would leave it holding a stale list). The
        latest usage stays queued for the next ``compress`` unless this is the end.
        `messages` are :func:`_unmarked` already."""

        async def flush(svc: ContextService) -> str:
            sid, last = await self._sync(svc, messages, host_id)
            if last is not None and final:
                svc.ledger.report_usage(sid, last)
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
            return  # the conversation goes on: the ledger chain already continued
        self._hermes_session, self._resumable = session_id, True
        self._root, self._known, self._pending, self._handed = None, [], [], []

    def on_session_end(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        """Make sure the ledger holds the whole conversation (even one never compacted).

        Hermes also calls it right after a compaction with the list it handed to
        ``compress`` (its memory flush, ``commit_memory_session``): the ledger holds that
        list already, and taking it for a new conversation started a second root with
        the whole uncompacted history at every compaction."""
        if not isinstance(messages, list) or not messages:
            return
        messages, handed = _unmarked(messages), self._handed
        if len(messages) <= len(handed) and all(
            _digest(m) == d for m, d in zip(messages, handed, strict=False)
        ):
            return  # the list a compaction was made from: recorded already
        self._flush(messages, final=True, host_id=session_id)

    def on_session_reset(self) -> None:
        """A new conversation follows; its id comes with ``on_session_start``, or (the
        CLI's ``/new``, ``/resume``, ``/branch``) is learnt at the next hand-over."""
        super().on_session_reset()
        self._root, self._known, self._pending, self._handed = None, [], [], []
        self._resumable = False

    # --- tools and status -----------------------------------------------------------------------

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return [copy.deepcopy(schema) for schema in _TOOLS.values()]

    def handle_tool_call(self, name: str, args: dict[str, Any], **kwargs: Any) -> str:
        """``recall`` / ``expand_compaction`` over this conversation's whole history."""
        if name not in _TOOLS:
            return json.dumps({"error": f"Unknown context engine tool: {name}"})
        messages = kwargs.get("messages")
        sid = self._flush(_unmarked(messages)) if isinstance(messages, list) and messages else None
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


def chat_usage(usage: dict[str, Any]) -> JSON:
    """Hermes's normalized usage dict as an OpenAI chat-completions usage dict
    (InvalidInput for a figure that is no number of tokens, as the ledger would say)."""
    cache_read = _tokens(usage, "cache_read_tokens")
    cache_write = _tokens(usage, "cache_write_tokens")
    if usage.get("prompt_tokens") is None:
        prompt = _tokens(usage, "input_tokens") + cache_read + cache_write
    else:
        prompt = _tokens(usage, "prompt_tokens")
    completion = "completion_tokens" if "completion_tokens" in usage else "output_tokens"
    report = {
        "prompt_tokens": prompt,
        "completion_tokens": _tokens(usage, completion),
        "prompt_tokens_details": {"cached_tokens": cache_read, "cache_write_tokens": cache_write},
        "completion_tokens_details": {"reasoning_tokens": _tokens(usage, "reasoning_tokens")},
    }
    normalize_usage(report)  # what the ledger would refuse at the next compress
    return report


#: the key Hermes's session store stamps on a message dict once it wrote it to its
#: ``state.db``, after the fact (host bookkeeping: its compressor strips it too)
_PERSISTED_MARK = "_db_persisted"


def _unmarked(messages: list[Any]) -> list[Any]:
    """Shallow copies of the host's messages without the session store's mark (the
    values are shared: what is kept is copied where it is kept). Kept, the mark
    made the host's list differ from what the ledger held once Hermes had saved it (a
    new ledger root, the whole history again, at every compaction), and the view
    handed back told Hermes its compacted messages were saved already (#57491)."""
    return [
        {k: v for k, v in m.items() if k != _PERSISTED_MARK} if isinstance(m, dict) else m
        for m in messages
    ]


def _digest(message: Any) -> bytes:
    """A message's fingerprint: what the engine keeps of the list a compaction was made
    from (the list itself was a second copy of the whole history for the agent's life)."""
    text = json.dumps(message, sort_keys=True, default=repr, ensure_ascii=False)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _host_session_id() -> str | None:
    """The Hermes session id Hermes keeps current for its tools (its CLI moves it before
    ``reset_session_state()`` on ``/new``, ``/resume``, ``/branch``); None outside Hermes."""
    try:
        from gateway.session_context import get_session_env
    except ImportError:
        return None
    current = get_session_env("HERMES_SESSION_ID")
    return current if isinstance(current, str) and current else None


def _title(hermes_session: str) -> str:
    """The title of the ledger chain of one Hermes conversation (how a resume finds it)."""
    return host_title("hermes session", hermes_session)


def _said(message: Any) -> Any:
    """What a message says, as Hermes's session store gives it back: role, content, tool
    calls (id, name, arguments) and the call a result answers."""
    if not isinstance(message, dict):
        return message
    calls = [
        (
            c.get("id"),
            (c.get("function") or {}).get("name"),
            (c.get("function") or {}).get("arguments"),
        )
        if isinstance(c, dict)
        else c
        for c in message.get("tool_calls") or ()
    ]
    return (message.get("role"), message.get("content") or None, calls, message.get("tool_call_id"))


def _tokens(usage: dict[str, Any], key: str) -> int:
    """A figure as the ledger takes it (None is 0), else InvalidInput: text, a bool, a
    fraction, a negative or oversized count (``int()`` made "12" 12 and True 1, and a
    negative one failed the next compaction)."""
    return check_token_count(usage.get(key), f"usage field {key!r}")


def _window(value: Any) -> int | None:
    """A context length the host gave, as the ledger takes one; None when no session
    could have it (0, None, under 1,024 or past MAX_CONTEXT_LENGTH: every compress failed)."""
    try:
        return check_context_length(value)
    except InvalidInput:
        return None


def register(ctx: Any) -> None:
    """Hermes's plugin hook: register the engine (used when ``context.engine: ctxledger``)."""
    ctx.register_context_engine(CtxLedgerEngine())


__all__ = ["DB_NAME", "CtxLedgerEngine", "chat_usage", "default_db_path", "register"]
