"""Injected time and id sources, so replays and tests are deterministic."""

from __future__ import annotations

import itertools
import secrets
import time
from typing import Protocol


class Clock(Protocol):
    def __call__(self) -> float:
        """Seconds since the epoch."""
        ...


class IdGenerator(Protocol):
    def __call__(self, prefix: str) -> str:
        """A new unique id beginning with `prefix` (e.g. ``ses``, ``msg``, ``evt``)."""
        ...


def system_clock() -> float:
    return time.time()


class StepClock:
    """A deterministic clock: starts at `start` and advances `step` seconds per call."""

    def __init__(self, start: float = 1_767_225_600.0, step: float = 1.0) -> None:
        self._now = start
        self._step = step

    def __call__(self) -> float:
        now = self._now
        self._now += self._step
        return now


def random_ids(prefix: str) -> str:
    """A random 96-bit id, time-ordered by a millisecond prefix so ids sort roughly by age."""
    return f"{prefix}_{int(time.time() * 1000):012x}{secrets.token_hex(8)}"


class SequentialIds:
    """Deterministic ids: ``<prefix>_<namespace><n>`` with one counter per generator."""

    def __init__(self, namespace: str = "", start: int = 1) -> None:
        self._namespace = namespace
        self._counter = itertools.count(start)

    def __call__(self, prefix: str) -> str:
        return f"{prefix}_{self._namespace}{next(self._counter):08d}"
