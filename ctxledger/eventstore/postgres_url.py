"""A PostgreSQL ledger's URL: how it is recognized, and ctxledger's own ``schema``
parameter taken out of it before libpq sees it (libpq refuses unknown parameters).

Kept apart from :mod:`ctxledger.eventstore.postgres` so URL handling can be read and
tested without the store (and without psycopg).
"""

from __future__ import annotations

import urllib.parse

__all__ = ["is_postgres_url", "split_schema"]


def is_postgres_url(target: str) -> bool:
    return target.startswith(("postgresql://", "postgres://"))


def split_schema(url: str) -> tuple[str, str | None]:
    """Take ctxledger's own ``schema`` query parameter out of a libpq URL (libpq rejects it)."""
    parts = urllib.parse.urlsplit(url)
    params = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for key, value in params if key == "schema"]
    rest = urllib.parse.urlencode([(k, v) for k, v in params if k != "schema"])
    return urllib.parse.urlunsplit(parts._replace(query=rest)), (schemas[-1] if schemas else None)
