"""References to a point of a session: ``SESSION``, ``SESSION@SEQ`` (``show``, ``export``,
``diff`` and ``GET /v1/diff``).

A client may choose a session id holding "@" (``me@host``): a ref that is one whole id
is that session, unless its part before the last "@" is a session too (``a`` and
``a@1``), which is refused as ambiguous with both spellings named.
"""

from __future__ import annotations

from collections.abc import Collection, Container

from ctxledger.errors import InvalidInput
from ctxledger.integers import ascii_int, shown, shown_id, shown_ids
from ctxledger.ledger.facade import Ledger


def parse_ref(
    ref: str, sessions: Collection[str] = (), *, last_seq: int | None = None
) -> tuple[str, int | None]:
    """``SESSION@SEQ`` -> (SESSION, SEQ); anything else -> (ref, None). Raises InvalidInput.

    A `ref` that is a whole id in `sessions` is that session: an id a client chose may
    hold "@" (``user@laptop`` was refused, ``v@2`` read as session ``v…`` at seq 2).
    When its part before the last "@" is a session too (``a`` and ``a@1`` both exist)
    the ref is ambiguous and refused, naming how to write each reading (`last_seq`, the
    log's last event, makes the first one concrete). A ref refused as ``SESSION@SEQ``
    that starts ids in `sessions` (``me@h`` of ``me@host``) names them in its error."""
    if ref is not None and not isinstance(ref, str):
        raise InvalidInput(
            "a reference is text: SESSION, SESSION@SEQ or a compaction id, "
            f"got {type(ref).__name__}"
        )
    if not ref or not ref.strip():
        raise InvalidInput("a reference is required: SESSION, SESSION@SEQ or a compaction id")
    ref = ref.strip()
    if "@" not in ref:
        return ref, None
    name, _, seq_text = ref.rpartition("@")
    seq = ascii_int(seq_text)  # int() alone took "1_0", "+1" and "١" (Arabic-Indic 1)
    if ref in sessions:
        if name in sessions and seq is not None and seq >= 1:
            raise InvalidInput(_ambiguous(ref, name, seq, sessions, last_seq))
        return ref, None
    if not name:
        raise _refused(ref, "name the session before the @ (SESSION@SEQ)", sessions)
    if seq is None:
        raise _refused(ref, "the part after @ must be an event sequence number", sessions)
    if seq < 1:
        raise _refused(ref, "event sequence numbers start at 1", sessions)
    return name, seq


def _refused(ref: str, problem: str, sessions: Collection[str]) -> InvalidInput:
    """A ref read as ``SESSION@SEQ`` and refused; when it starts session ids (a prefix of
    ``me@host``: only a whole id is taken as is, see :func:`parse_ref`) they are named."""
    starting = sorted(s for s in sessions if isinstance(s, str) and s.startswith(ref))
    if not starting:
        return InvalidInput(f"{shown(ref)}: {problem}")
    names = shown_ids(starting)  # (whole: to be copied)
    which = "session" if len(starting) == 1 else "sessions"
    return InvalidInput(
        f"{shown(ref)}: {problem}; it is also the start of {which} {names}: a ref "
        "holding @ is read as SESSION@SEQ unless it is a whole id, so write the whole id"
    )


def _ambiguous(
    ref: str, name: str, seq: int, sessions: Container[str], last_seq: int | None
) -> str:
    """The error for a ref that is both a whole session id and SESSION@SEQ."""
    whole = f"{ref}@{last_seq if last_seq else 'SEQ'}"
    zeros = "0"  # a leading 0 keeps the seq and is no longer the id
    while f"{name}@{zeros}{seq}" in sessions:
        zeros += "0"
    at = f"{name}@{zeros}{seq}"
    return (
        f"{shown_id(ref)} is ambiguous: it is session {shown_id(ref)} and also session "
        f"{shown_id(name)} at seq {seq}; write {shown_id(whole)} for session {shown_id(ref)} "
        f"(as of that event) or {shown_id(at)} for session {shown_id(name)} at seq {seq}"
    )


def ledger_ref(ledger: Ledger, ref: str) -> tuple[str, int | None]:
    """:func:`parse_ref` against `ledger`'s sessions (``show``, ``export``, ``diff``)."""
    # only an @ can be ambiguous (a ref that is no text is refused by parse_ref)
    last_seq = ledger.store.last_seq() if isinstance(ref, str) and "@" in ref else None
    return parse_ref(ref, ledger.chains.state.sessions, last_seq=last_seq)


__all__ = ["ledger_ref", "parse_ref"]
