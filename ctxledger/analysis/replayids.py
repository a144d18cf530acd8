"""The ids and the clock of a replay ledger (:mod:`ctxledger.analysis.whatif`): the
recorded message ids first, and the recorded time of the step being replayed."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["PresetIds", "ReplayClock"]


class PresetIds:
    """Ids for a replay ledger: queued ``msg`` ids first (the recorded ones), then fresh ones.

    Fresh ids never collide with `reserved` (the recorded message ids).
    """

    def __init__(self, namespace: str = "whatif-", reserved: Iterable[str] = ()) -> None:
        self.namespace = namespace
        self.reserved = set(reserved)
        self.queue: list[str] = []
        self.n = 0

    def preset(self, message_ids: Iterable[str]) -> None:
        self.queue = list(message_ids)

    def __call__(self, prefix: str) -> str:
        if prefix == "msg" and self.queue:
            return self.queue.pop(0)
        while True:
            self.n += 1
            candidate = f"{prefix}_{self.namespace}{self.n:08d}"
            if candidate not in self.reserved:
                return candidate


class ReplayClock:
    """The recorded time of the step being replayed (cooldowns then expire as they did)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
