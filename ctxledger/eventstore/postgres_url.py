"""A PostgreSQL ledger's URL: how it is recognized, and ctxledger's own ``schema``
parameter taken out of it before libpq sees it (libpq refuses unknown parameters).

Kept apart from :mod:`ctxledger.eventstore.postgres` so URL handling can be read and
tested without the store (and without psycopg: :func:`describe` imports it when called).
"""

from __future__ import annotations

import re
import urllib.parse

from ctxledger.errors import InvalidInput
from ctxledger.integers import shown
from ctxledger.shownurl import shown_url

__all__ = [
    "SCHEMA_NAME",
    "NoLedger",
    "check_postgres_url",
    "describe",
    "is_postgres_url",
    "split_schema",
]

#: the schemas a ledger may live in (a lowercase identifier: never quoted)
SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def is_postgres_url(target: str) -> bool:
    return target.startswith(("postgresql://", "postgres://"))


def check_postgres_url(url: str) -> None:
    """InvalidInput unless `url` is a PostgreSQL URL; the error shows it without its
    password, query or fragment, and short (it was quoted whole, password and all)."""
    if not isinstance(url, str):
        raise InvalidInput(f"a PostgreSQL URL is text, got {type(url).__name__}")
    if not is_postgres_url(url):
        raise InvalidInput(
            f"not a PostgreSQL URL: {shown(shown_url(url))}; use postgresql://user@host/db"
        )


def split_schema(url: str) -> tuple[str, str | None]:
    """Take ctxledger's own ``schema`` query parameter out of a libpq URL (libpq rejects it).

    Only the ``schema=...`` pieces of the query are cut out; every other byte of the URL
    is passed on as given (no re-encoding: libpq reads ``+`` as a plus, not a space).
    The last ``schema`` wins. Raises :class:`InvalidInput` for a URL that cannot be
    parsed (an unclosed ``[`` host).
    """
    _check_parsable(url)
    head, mark, tail = url.partition("?")
    if not mark:
        return url, None
    query, hash_mark, fragment = tail.partition("#")
    kept: list[str] = []
    schema: str | None = None
    for piece in query.split("&"):
        key, _eq, value = piece.partition("=")
        if urllib.parse.unquote(key) == "schema":
            schema = urllib.parse.unquote(value)
        else:
            kept.append(piece)
    rest = "&".join(kept)
    return head + ("?" + rest if rest else "") + hash_mark + fragment, schema


def _check_parsable(url: str) -> None:
    try:
        urllib.parse.urlsplit(url)  # no port check: libpq's multi-host form has commas
    except ValueError as exc:
        raise InvalidInput(
            f"cannot parse the PostgreSQL URL ({exc}); expected "
            "postgresql://user:password@host:port/dbname?param=value"
        ) from None


def describe(conninfo: str, schema: str) -> str:
    """The server, database and schema, for messages (never the password)."""
    import psycopg.conninfo  # (only a store calls this: it has psycopg)

    try:
        info = psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.Error as exc:
        raise InvalidInput(f"cannot parse the PostgreSQL URL: {exc}") from exc
    host = str(info.get("host") or "localhost")
    port = f":{info['port']}" if info.get("port") else ""
    return f"postgresql://{host}{port}/{info.get('dbname') or ''} (schema {schema})"


class NoLedger(InvalidInput):
    """A database and schema holding no ledger, opened by a command that only reads
    (``PostgresEventStore(create=False)``): nothing was created there, so a mistyped
    URL (another database, another ``?schema=``) is not read as an empty ledger that
    verifies. `option` names a second ledger (``--from``, ``--b-db``) in the message."""

    def __init__(self, where: str, option: str | None = None) -> None:
        self.where = where
        if option is not None:
            super().__init__(f"{option} {where}: no ledger there")
        else:
            super().__init__(
                f"no ledger in {where} (another database or ?schema= than meant?); "
                "`ctxledger import FILE`, `ctxledger demo` or `ctxledger migrate --to URL` "
                "creates one"
            )
