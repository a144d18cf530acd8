"""What every copy of the Hermes engine shares (:mod:`ctxledger.integrations.hermes`):
the service, opened on first use, and the thread its loop runs on; where the ledger is.
Loads without Hermes."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxledger import CompressionConfig, ContextService
from ctxledger.compressor.settings import resolve_config
from ctxledger.eventstore.opening import env_db, is_url
from ctxledger.integrations.common import LoopThread, ledger_target
from ctxledger.integrations.hermes_host import (
    compaction_answers,
    compression_ancestors,
    turn_attempts,
)

logger = logging.getLogger("ctxledger.integrations.hermes")  # (the engine's, as before)

DB_NAME = "ctxledger.ledger.db"
#: the failure reasons (Hermes's ``FailoverReason``) its recovery answers by compacting
OVERFLOW_REASONS = frozenset({"context_overflow", "payload_too_large", "long_context_tier"})
#: how many compactions of one turn it makes so (its ``max_compression_attempts``, a count
#: its pre-API compactions share: :func:`~ctxledger.integrations.hermes_host.turn_attempts`):
#: past it the turn is given up
HERMES_ATTEMPTS = 3


def default_db_path(hermes_home: str | None = None) -> str | Path:
    """``$CTXLEDGER_DB`` (a file or a ``postgresql://`` URL), else ``ctxledger.ledger.db``
    in ``HERMES_HOME`` (``~/.hermes``)."""
    db = env_db()
    if db:
        return db if is_url(db) else Path(db)
    home = hermes_home or os.environ.get("HERMES_HOME") or str(Path.home() / ".hermes")
    return Path(home) / DB_NAME


class Shared:
    """What every copy of the engine shares: the service (opened on first use) and the
    thread its loop runs on."""

    def __init__(self, service: ContextService | None, db_path: str | Path | None) -> None:
        self._service = service
        self.db_path = db_path
        self._lock = threading.Lock()
        self._loop: LoopThread | None = None
        self._config: CompressionConfig | None = None
        self.store_failed = False  # Hermes's store could not be read (warned once)
        #: Hermes session id -> why its provider refused its last request (:meth:`refusal`)
        self.refused: dict[str, str] = {}
        #: Hermes session id -> (its turn, how many compaction attempts that turn had)
        self._turns: dict[str, tuple[str, int]] = {}

    def refusal(self, **hook: Any) -> None:
        """Hermes's ``api_request_error`` plugin hook (hermes-agent 0.19.0 calls it for
        every failed model call, before its recovery): a refusal for the request's size
        (``reason`` ``context_overflow``, ``payload_too_large``, ``long_context_tier``) is
        kept for the session's next ``compress``, which Hermes's recovery calls without
        asking ``should_compress`` first. Not one Hermes will not answer by compacting:
        past its attempts of the turn (its count, its pre-API compactions too, read from
        its loop: ``hermes_host.turn_attempts``; else the turn's refusals counted here),
        with its compression off, about the output cap
        (:func:`~ctxledger.integrations.hermes_host.compaction_answers`). Until then it
        is dropped by any ask (Hermes answered it another way), the next request's
        start and the turn's end (:meth:`request_started`, :meth:`turn_ended`), a new
        agent on the session (the gateway's hygiene agent): a later compaction (the
        TUI's, ACP's ``/compress``) is no answer to it (review 1)."""
        session, reason = str(hook.get("session_id") or ""), hook.get("reason")
        if reason not in OVERFLOW_REASONS:
            return
        turn, made = str(hook.get("turn_id") or ""), turn_attempts()
        last, seen = self._turns.get(session, ("", 0))
        if made is None:  # no count from Hermes's loop: the turn's refusals counted here
            made = seen if turn and turn == last else 0
        count = made + 1  # (Hermes's own count takes in its pre-API compactions too)
        self._turns[session] = (turn, count)
        if count <= HERMES_ATTEMPTS and compaction_answers(str(reason), hook.get("error")):
            self.refused[session] = str(reason)
        else:
            self.refused.pop(session, None)

    def attempts_renewed(self, session: str | None) -> None:
        """Hermes's ``update_model`` with no size refusal pending: a fallback activation
        (hermes-agent 0.19.0 zeroes its turn's compression attempts with it: a refusal
        after it is answered by compacting again; not the one for empty replies, which the
        engine does not pass on: ``hermes_host.empty_reply_fallback``), a model switch,
        an agent's set-up. The windows Hermes cuts after a size refusal (the one the
        provider stated, the long-context tier) come while it is pending, and renew
        nothing, as in Hermes."""
        if session and session not in self.refused:
            self._turns.pop(session, None)

    def request_started(self, **hook: Any) -> None:
        """Hermes's ``pre_api_request`` plugin hook: a refusal before this request was
        answered, or will not be."""
        self.refused.pop(str(hook.get("session_id") or ""), None)

    def turn_ended(self, **hook: Any) -> None:
        """Hermes's ``on_session_end`` plugin hook (the end of every completed turn)."""
        self.refused.pop(str(hook.get("session_id") or ""), None)
        self._turns.pop(str(hook.get("session_id") or ""), None)

    def ancestors(self, session_db: Any, session_id: str) -> list[str]:
        """The Hermes ids `session_id` continues, read from Hermes's session store in
        the host's thread (:func:`~ctxledger.integrations.hermes_host.compression_ancestors`);
        none when the store has no ``get_session`` or fails (its own errors: the resume
        goes by the session's own id, and a failure is told once)."""
        get_session = getattr(session_db, "get_session", None)
        if not callable(get_session):
            return []
        try:
            return compression_ancestors(get_session, session_id)
        except Exception as exc:
            if not self.store_failed:  # a silent second root otherwise: told once
                logger.warning(
                    "ctxledger: Hermes's session store could not tell what %s continues "
                    "(%s): a conversation it rotated may start a new ledger chain",
                    session_id,
                    exc,
                )
            self.store_failed = True
            return []

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


__all__ = ["DB_NAME", "Shared", "default_db_path"]
