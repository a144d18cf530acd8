"""What every handler of one server process shares: the service, the settings, the
upstream client, the proxy's history index and its per-session locks (with the
store's lease, which serializes a session's turns across worker processes)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from urllib.parse import urlsplit

import anyio
import httpx
from starlette.types import Receive

from ctxledger import ContextService
from ctxledger.errors import InvalidInput, StoreError
from ctxledger.eventstore import SQLiteEventStore, leases
from ctxledger.integers import shown
from ctxledger.ledger import Ledger
from ctxledger.server.clientgone import cancel_on_disconnect
from ctxledger.server.history import HistoryIndex
from ctxledger.server.response_index import ResponseIndex

log = logging.getLogger("ctxledger.server")

DEFAULT_CONTEXT_LENGTH = 128_000
#: a proxied stream whose client takes no bytes for this long is ended (seconds): a
#: client that stops reading would otherwise hold its session's turn forever
DEFAULT_STALL_TIMEOUT = 60.0
#: how long a proxied turn (or a passed-on request) waits while the upstream sends no
#: bytes at all (seconds; httpx's read timeout counts per socket read, so this caps
#: silence, not the whole answer: keep-alive comments or ``ping`` events renew it): far
#: past what a client's own timeout usually allows (a reasoning model may think in
#: silence for many minutes), yet finite, so a silent or half-open upstream never holds
#: a session (and a server's shutdown) for ever when its client set no timeout
DEFAULT_TURN_TIMEOUT = 3600.0
#: connecting to the upstream (seconds), for every request the server sends it
CONNECT_TIMEOUT = 10.0
DEFAULT_UPSTREAMS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}


def check_upstream(url: str) -> str:
    """`url` when it is an http(s) URL with a host (and a port that is a port); else
    InvalidInput. ``http://``, ``http://[::1`` or a port of 99999 were served, and every
    proxied request then failed."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError for a port that is not a port)
    except ValueError as exc:
        raise InvalidInput(f"--upstream {shown(url)} is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput(f"--upstream must be an http(s) URL with a host, got {shown(url)}")
    if any(c.isspace() or not c.isprintable() for c in url):
        raise InvalidInput(f"--upstream {shown(url)} holds blanks or control characters")
    return url


def _seconds(name: str, value: float) -> None:
    """ValueError unless `value` is a finite positive number of seconds (not 0, a
    negative, infinity or NaN: none of them is a timeout)."""
    if not 0 < value < float("inf"):
        raise ValueError(f"{name} must be a positive number of seconds, not {shown(value)}")


class ServerState:
    """What every handler shares: the service, the settings, the upstream client, the locks."""

    def __init__(
        self,
        service: ContextService,
        *,
        token: str | None = None,
        guard_proxy: bool = False,
        upstream: str | None = None,
        api: str = "openai",
        context_length: int | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        stopping: Callable[[], bool] | None = None,
        stall_timeout: float = DEFAULT_STALL_TIMEOUT,
        turn_timeout: float = DEFAULT_TURN_TIMEOUT,
    ) -> None:
        if api not in DEFAULT_UPSTREAMS:
            raise ValueError(f"api must be openai or anthropic, not {shown(api)}")
        _seconds("stall_timeout", stall_timeout)
        _seconds("turn_timeout", turn_timeout)
        self.service = service
        self.ledger: Ledger = service.ledger
        self.token = token
        self.guard_proxy = guard_proxy
        self.api = api
        self.upstream = check_upstream(upstream) if upstream else DEFAULT_UPSTREAMS[api]
        self.context_length = (
            context_length or service.config.context_length or DEFAULT_CONTEXT_LENGTH
        )
        #: every upstream request (a proxied turn's, the passthrough's): each read,
        #: write and the pool wait up to `turn_timeout` (a cap on silence, not on the
        #: whole answer); each request names it, so it is the client's default too
        self.turn_timeout = httpx.Timeout(turn_timeout, connect=CONNECT_TIMEOUT)
        self.client = httpx.AsyncClient(transport=transport, timeout=self.turn_timeout)
        self.history = HistoryIndex(self.ledger)
        #: Responses ``previous_response_id`` -> the recorded reply (see response_index)
        self.responses = ResponseIndex(self.ledger)
        self.stopping: Callable[[], bool] = stopping or (lambda: False)
        self.stall_timeout = stall_timeout
        #: family -> (its semaphore, how many turns hold or wait for it); an entry goes
        #: when its last turn leaves, so a long-lived server keeps no lock per family it
        #: ever saw
        self._locks: dict[str, tuple[anyio.Semaphore, list[int]]] = {}

    async def take_turn(self, family: str, receive: Receive) -> Callable[[], None] | None:
        """Wait for the family's turn: this process's semaphore, then the store's lease
        ``proxy:<family>`` (the other worker processes on the same ledger). Returns the
        release function, or None when the client left while waiting (nothing held)."""
        lock, key = self._enter(family), "proxy:" + family
        try:
            free = self._take_if_free(lock, key)
        except BaseException:
            self._leave(family)
            raise
        if free is not None:
            return self._leaving(family, free)
        held: list[Callable[[], None]] = [lambda: self._leave(family)]
        try:
            with anyio.CancelScope() as waiting:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(cancel_on_disconnect, receive, waiting)
                    await lock.acquire()
                    held.append(lock.release)
                    try:
                        lease = await leases.acquire(self.ledger.store, key)
                    except StoreError as exc:  # no lease: turns still land (expected versions)
                        log.warning("no cross-process lease for %s: %s", family, exc)
                        lease = None
                    held.append(lease or (lambda: None))
                    tg.cancel_scope.cancel()
        except BaseException:  # cancelled from outside (shutdown): leave nothing held
            for undo in reversed(held):
                undo()
            raise
        if len(held) < 3:
            for undo in reversed(held):
                undo()
            return None
        return self._leaving(family, _both(held[2], held[1]))

    def _take_if_free(self, lock: anyio.Semaphore, key: str) -> Callable[[], None] | None:
        """The usual case, without waiting: the semaphore is free and the store is a SQLite
        file whose lease (a non-blocking ``flock``) is free too. Taken here on the event
        loop, with no disconnect watcher (nothing to wait for) and no worker-thread hop;
        otherwise nothing is held and :meth:`take_turn` waits for both."""
        store = self.ledger.store
        if not isinstance(store, SQLiteEventStore):
            return None  # a PostgreSQL try is a network round trip: a worker thread's job
        try:
            lock.acquire_nowait()
        except anyio.WouldBlock:
            return None
        try:
            lease = store.try_lease(key)
        except BaseException:
            lock.release()
            raise
        if lease is None:  # another worker process holds it
            lock.release()
            return None
        return _both(lease, lock.release)

    def _enter(self, family: str) -> anyio.Semaphore:
        """The family's semaphore (one turn at a time; a stream releases it from its own
        task), counting one more turn that holds or waits for it."""
        entry = self._locks.get(family)
        if entry is None:
            entry = self._locks[family] = (anyio.Semaphore(1), [0])
        entry[1][0] += 1
        return entry[0]

    def _leave(self, family: str) -> None:
        entry = self._locks.get(family)
        if entry is not None:
            entry[1][0] -= 1
            if entry[1][0] <= 0:
                del self._locks[family]

    def _leaving(self, family: str, release: Callable[[], None]) -> Callable[[], None]:
        done = [False]

        def release_and_leave() -> None:
            if done[0]:
                return  # released already: never count a turn out twice
            done[0] = True
            try:
                release()
            finally:
                self._leave(family)

        return release_and_leave

    def families_locked(self) -> int:
        """How many session families have a turn holding or waiting (for tests and status)."""
        return len(self._locks)

    def ledger_resolve(self, ref: str) -> str:
        """A session id from an id or unique prefix, after folding other writers' events."""
        self.ledger.refresh()
        return self.ledger.resolve(ref)

    async def aclose(self) -> None:
        await self.client.aclose()


def _both(
    release_lease: Callable[[], None], release_lock: Callable[[], None]
) -> Callable[[], None]:
    def release() -> None:
        try:
            release_lease()
        finally:
            release_lock()

    return release


__all__ = [
    "CONNECT_TIMEOUT",
    "DEFAULT_CONTEXT_LENGTH",
    "DEFAULT_STALL_TIMEOUT",
    "DEFAULT_TURN_TIMEOUT",
    "DEFAULT_UPSTREAMS",
    "ServerState",
]
