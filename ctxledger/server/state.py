"""What every handler of one server process shares: the service, the settings, the
upstream client, the proxy's history index and its per-session locks (with the
store's lease, which serializes a session's turns across worker processes)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio
import httpx
from starlette.types import Receive

from ctxledger import ContextService
from ctxledger.errors import StoreError
from ctxledger.eventstore import SQLiteEventStore, leases
from ctxledger.ledger import Ledger
from ctxledger.server.history import HistoryIndex

log = logging.getLogger("ctxledger.server")

DEFAULT_CONTEXT_LENGTH = 128_000
DEFAULT_UPSTREAMS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}


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
    ) -> None:
        if api not in DEFAULT_UPSTREAMS:
            raise ValueError(f"api must be openai or anthropic, not {api!r}")
        self.service = service
        self.ledger: Ledger = service.ledger
        self.token = token
        self.guard_proxy = guard_proxy
        self.api = api
        self.upstream = upstream or DEFAULT_UPSTREAMS[api]
        self.context_length = (
            context_length or service.config.context_length or DEFAULT_CONTEXT_LENGTH
        )
        self.client = httpx.AsyncClient(
            transport=transport, timeout=httpx.Timeout(600.0, connect=10.0)
        )
        self.history = HistoryIndex(self.ledger)
        self.stopping: Callable[[], bool] = stopping or (lambda: False)
        self._locks: dict[str, anyio.Semaphore] = {}

    async def take_turn(self, family: str, receive: Receive) -> Callable[[], None] | None:
        """Wait for the family's turn: this process's semaphore, then the store's lease
        ``proxy:<family>`` (the other worker processes on the same ledger). Returns the
        release function, or None when the client left while waiting (nothing held)."""
        lock, key = self.proxy_lock(family), "proxy:" + family
        free = self._take_if_free(lock, key)
        if free is not None:
            return free
        held: list[Callable[[], None]] = []
        try:
            with anyio.CancelScope() as waiting:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_until_disconnect, receive, waiting)
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
        if len(held) < 2:
            for undo in reversed(held):
                undo()
            return None
        return _both(held[1], held[0])

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

    def proxy_lock(self, family: str) -> anyio.Semaphore:
        """One turn at a time per session family (a semaphore: a stream releases it from its own task)."""
        lock = self._locks.get(family)
        if lock is None:
            lock = self._locks[family] = anyio.Semaphore(1)
        return lock

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


async def _until_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


__all__ = ["DEFAULT_CONTEXT_LENGTH", "DEFAULT_UPSTREAMS", "ServerState"]
