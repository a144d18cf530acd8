"""What every handler of one server process shares: the service, the settings, the
upstream client, the proxy's history index and its per-session locks."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import httpx

from ctxledger import ContextService
from ctxledger.ledger import Ledger
from ctxledger.server.history import HistoryIndex

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


__all__ = ["DEFAULT_CONTEXT_LENGTH", "DEFAULT_UPSTREAMS", "ServerState"]
