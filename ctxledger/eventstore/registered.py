"""The ordered set of named migrations a store registers by decorator, shared by
SQLite's ``migrations.Migrations`` and PostgreSQL's ``postgres_schema.PgMigrations``
(session 45): kept apart so PostgreSQL's schema imports nothing of SQLite's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Registered", "Step"]

Step = TypeVar("Step", bound=Callable[..., None])


class Registered(Generic[Step]):
    """An ordered set of named migrations; register with ``@migrations("0001_name")``.
    Each store adds how its own are read and applied."""

    def __init__(self) -> None:
        self._steps: list[tuple[str, Step]] = []

    def __call__(self, name: str) -> Callable[[Step], Step]:
        def register(fn: Step) -> Step:
            if any(existing == name for existing, _ in self._steps):
                raise ValueError(f"migration {name!r} is registered twice")
            self._steps.append((name, fn))
            return fn

        return register

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self._steps]
