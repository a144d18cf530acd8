"""Keys made for a host's ids: a title from an id that could hold no title, and the
shortened keys the adapters name their sessions by (moved out of :mod:`ctxledger.limits`,
whose :func:`~ctxledger.limits.check_name` decides what needs one)."""

from __future__ import annotations

import hashlib
import re

from ctxledger.errors import InvalidInput
from ctxledger.limits import MAX_TITLE_CHARS, check_name

#: how much of a long id a key made for it keeps (then ``.h`` and 32 hex digits: 160)
KEY_KEPT = 126
#: what an id's start may keep in :func:`keyed_title`'s fallback
_NOT_IN_TITLE_KEY = re.compile(r"[^A-Za-z0-9._:@/ -]")


def digest_key(start: str, whole: str) -> str:
    """A key made for the id `whole`: `start` (at most :data:`KEY_KEPT` characters of it,
    as the caller made them safe), ``.h`` and 32 hex digits of the sha256 of the whole id
    (the LangChain and OpenAI Agents adapters share it). Each caller keeps its own
    characters of the start, on purpose: a title may hold ``/`` and spaces
    (:func:`keyed_title`); an OpenAI Agents key only what the HTTP API names in a path;
    LangChain %-escapes (its keys of before hold ``/``, spaces and any letter). Their
    ledgers hold keys made so: none of the three can change."""
    digest = hashlib.sha256(whole.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{start[:KEY_KEPT]}.h{digest}"


def keyed_title(head: str, host_id: str, tail: str = "") -> str:
    """`head`, a host's id (an adapter's session, a trajectory's record) and `tail` as a
    session title; where that is no title :func:`check_name` takes (too long, a control
    character), the id is a key made for it (its start with other characters as ``-``,
    and a digest), so each id still has one title the ledger takes."""
    title = f"{head}{host_id}{tail}"
    try:
        return check_name(title, "title", MAX_TITLE_CHARS)
    except InvalidInput:
        key = digest_key(_NOT_IN_TITLE_KEY.sub("-", host_id[:KEY_KEPT]), host_id)
        return f"{head}{key}{tail}"


__all__ = ["KEY_KEPT", "digest_key", "keyed_title"]
