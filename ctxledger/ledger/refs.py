"""Naming a session (its id or a prefix) and a message of a live view (its full id, the
short id ``show`` prints, or its index)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ctxledger.errors import InvalidInput, UnknownMessage, UnknownSession
from ctxledger.integers import shown
from ctxledger.projections import SessionView
from ctxledger.projections.chains import ChainsState

__all__ = [
    "SHORT_ID_CHARS",
    "compaction_matches",
    "resolve_message",
    "resolve_pin",
    "resolve_session",
    "short_ids",
]

#: the shortest suffix ``show`` prints as a message's short id
SHORT_ID_CHARS = 8


def short_ids(ids: Sequence[str]) -> list[str]:
    """The shortest suffixes (at least :data:`SHORT_ID_CHARS` long) that tell `ids` apart.

    Suffixes, not prefixes: random ids start with their creation time, so the messages
    of one session share a prefix.
    """
    width = SHORT_ID_CHARS
    longest = max((len(i) for i in ids), default=0)
    while width < longest and len({i[-width:] for i in ids}) < len(set(ids)):
        width += 1
    return [i[-width:] for i in ids]


def resolve_session(state: ChainsState, ref: str) -> str:
    """A session id from a full id or a unique prefix. A compaction's id is named as one
    (``show cmp_…`` said "no session"), with the commands that take it and the session
    it continued into, whose view is what it made."""
    if not isinstance(ref, str) or not ref.strip():
        raise InvalidInput("a session id (or a unique prefix of one) is required")
    sessions = state.sessions
    if ref in sessions:
        return ref
    matches = [s for s in sessions if s.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise InvalidInput(f"session prefix {shown(ref)} is ambiguous ({len(matches)} sessions)")
    compactions = compaction_matches(state.compacted, ref)
    if len(compactions) == 1:
        raise UnknownSession(_a_compaction(state, compactions[0]))
    if compactions:
        raise UnknownSession(
            f"no session {shown(ref)}: it begins {len(compactions)} compaction ids; `ctxledger "
            "sessions` lists the sessions, `ctxledger audit SESSION` a chain's compactions"
        )
    raise UnknownSession(f"no session {shown(ref)}; `ctxledger sessions` lists them")


def compaction_matches(compacted: Collection[str], ref: str) -> list[str]:
    """The compaction ids among `compacted` that `ref` names: ``[ref]`` when it is one,
    else every id it begins (the one rule for ``show``, ``expand``, ``diff``, ``audit``)."""
    return [ref] if ref in compacted else [c for c in compacted if c.startswith(ref)]


def _a_compaction(state: ChainsState, cid: str) -> str:
    compacted = state.compacted[cid]
    made = state.sessions[compacted].compression_child if compacted in state.sessions else None
    into = f" into {made}" if made else ""
    shows = f"; `ctxledger show {made}` shows the session it started" if made else ""
    return (
        f"{cid} is a compaction (of session {compacted}{into}), not a session: "
        f"`ctxledger expand {cid}` shows the messages it summarized, `ctxledger diff {cid}` "
        f"the view it replaced beside the one it made{shows}"
    )


def _is_index(ref: str) -> bool:
    # ASCII digits only: str.isdigit() is true of '²' (int() refuses it) and '١' (an
    # index no `show` prints); those are taken as ids, and named as such if unknown
    return ref.isascii() and ref.isdigit() and len(ref) < SHORT_ID_CHARS


def resolve_message(view: SessionView, ref: str | int) -> str:
    """A live message's id from its id, the short form ``show`` prints, or its index.

    An index counts the API view as ``show`` does (the system prompt, if any, is 0);
    a string of fewer than :data:`SHORT_ID_CHARS` ASCII digits is an index (a short id is
    never that short); any other string is a full id or a suffix unique among the
    live ids (the short form). Read-only.
    """
    live, session_id = view.live, view.session_id
    offset = int(view.system_prompt is not None)
    if isinstance(ref, str) and _is_index(ref.strip()):
        ref = int(ref.strip())
    if isinstance(ref, int) and not isinstance(ref, bool):
        if offset and ref == 0:
            raise InvalidInput("index 0 is the system prompt, which every view keeps anyway")
        if not offset <= ref < len(live) + offset:
            raise UnknownMessage(
                f"no message at index {shown(ref)} of {shown(session_id)} (the view has indexes "
                f"{offset}..{len(live) + offset - 1}; `ctxledger show` lists them)"
            )
        return live[ref - offset]
    if not isinstance(ref, str) or not ref.strip():
        raise InvalidInput("a message id is required (or its short form, or its index)")
    ref = ref.strip()
    if ref in live:
        return ref
    matches = [mid for mid in live if mid.endswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise InvalidInput(
            f"{shown(ref)} matches {len(matches)} live messages; give more of the id"
        )
    raise UnknownMessage(
        f"message {shown(ref)} is not in the live view of {shown(session_id)} "
        "(`ctxledger show` lists ids and indexes)"
    )


def resolve_pin(named: SessionView, tip: SessionView, ref: str | int) -> str:
    """The message a pin of `ref` in session `named` applies to, live in the chain's `tip`.

    `ref` names a message of the view ``show NAMED`` prints (an index or short id
    counts in that view; a full id live at the tip is taken as it is). A pin only
    affects the tip, so a message of an ended session that is no longer live there
    is refused (nothing to pin). Read-only.
    """
    if named.session_id == tip.session_id or (isinstance(ref, str) and ref.strip() in tip.live):
        return resolve_message(tip, ref)
    message_id = resolve_message(named, ref)
    if message_id not in tip.live:
        raise InvalidInput(
            f"message {shown(message_id)} ({shown(ref)} in `ctxledger show {named.session_id}`) is no "
            f"longer live at the chain's tip {shown(tip.session_id)}, and a pin applies to the tip "
            f"only; `ctxledger show {tip.session_id}` lists what can be pinned"
        )
    return message_id
