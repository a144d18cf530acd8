"""Which ledger session a proxied request belongs to, and what is new in it.

A chat client resends its whole history every turn. The ledger holds, for each
*line* (a compression chain started by the proxy or by a branch), every message the
client sent and every reply the proxy recorded, in order: the messages appended to
the chain's sessions (a compaction's summaries and stubs are not appended, so they
are not part of it). A request continues a line when that recorded history is a
prefix of the client's list; the rest is the new suffix. When no line of the family
matches, the client edited or dropped something: the request gets a new branch.

Messages are compared as dicts first and, when those differ, by what a provider
sees (role, text, tool calls, tool call id, and a refusal or audio id when the client's
copy carries one), so a client that drops ``null`` fields or moves its own ``cache_control`` markers still continues its line; a
tool-call id the ledger repaired (a re-used one) is compared as the client sent it; a
text is compared without its surrounding whitespace and a call's arguments by the JSON
value they hold (Hermes trims every text and re-encodes the arguments it sends back).
Such a copy is not an edit: the ledger keeps the spelling it recorded, and that is what
the upstream is sent. The same looser comparison tells a repeated turn (`answered`): a
last message differing only so is served the recorded answer.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from ctxledger.events import WITHDRAW_REASONS
from ctxledger.importers.responses import STUBS
from ctxledger.ledger import Ledger
from ctxledger.ledger.carried import CarriedWithdrawals
from ctxledger.limits import too_deep
from ctxledger.messages import audio_reference, refusal_text
from ctxledger.projections.transcript import grew_from, load_bodies

Key = tuple[Any, ...]

#: the extra key of a recorded reply the client may go on without (a Responses answer
#: left ``incomplete``: the Agents SDK fails its run on one), holding why; stored (never
#: sent: the Responses face rebuilds items from their stubs), never a client's to set. A next request holding the history before it and new messages
#: after it withdraws it (:meth:`HistoryIndex.superseded`) instead of branching.
PROVISIONAL = "ctxledger_provisional"


def _part_key(part: Any) -> Any:
    if isinstance(part, Mapping):
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            return part["text"]
        return msgspec.json.encode({k: v for k, v in part.items() if k != "cache_control"})
    return repr(part)


def content_key(content: Any) -> Any:
    """A message's content as compared: text parts by their text, markers ignored."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = tuple(_part_key(p) for p in content)
        if all(isinstance(p, str) for p in parts):
            return "\n".join(parts)
        return parts
    return repr(content)


def message_key(message: Mapping[str, Any], renames: Mapping[str, str] | None = None) -> Key:
    """What a provider sees of a message, compared with :func:`same_message`'s rules;
    `renames` maps tool-call ids the ledger repaired (replacement -> the id the client
    sent) back, so a client that re-uses ids matches."""
    renames = renames or {}

    def original(call_id: Any) -> Any:
        return renames.get(call_id, call_id) if isinstance(call_id, str) else call_id

    content, refusal = _content_and_refusal(message)
    return (
        _role(message),
        content_key(content),
        _calls_key(message.get("tool_calls") or (), original),
        original(message.get("tool_call_id")),
        # what an assistant said instead of content: a refusal, an audio reply (by id)
        refusal,
        audio_reference(message.get("audio")),
    )


def _role(message: Mapping[str, Any]) -> Any:
    """A message's role as compared: a Responses ``developer`` item recorded before
    session 38 is a ``system`` message whose item stub says ``developer``."""
    role = message.get("role")
    if role == "system":
        stubs = message.get(STUBS)
        if isinstance(stubs, list) and stubs and isinstance(stubs[0], Mapping):
            return "developer" if stubs[0].get("role") == "developer" else role
    return role


def _is_refusal_part(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") == "refusal"


def _content_and_refusal(message: Mapping[str, Any]) -> tuple[Any, str | None]:
    """The content without refusal parts, and the refusal: the ``refusal`` field, else
    the parts' text. A Responses client sends a chat face's refusal back as a content
    part, so both forms have one key."""
    content, refusal = message.get("content"), refusal_text(message)
    if isinstance(content, list) and any(_is_refusal_part(p) for p in content):
        said = "".join(str(p.get("refusal") or "") for p in content if _is_refusal_part(p))
        content = [p for p in content if not _is_refusal_part(p)]
        refusal = refusal or said or None
    return content, refusal


def _replaces(message: Any) -> bool:
    """Whether the client puts a reply of its own where the provisional one was (another
    choice, an edit): that is an edited history, a branch, not a reply gone without."""
    return not isinstance(message, Mapping) or message.get("role") == "assistant"


def provisional(message: Mapping[str, Any]) -> str | None:
    """Why a recorded reply is one a client may go on without, else None: its
    :data:`PROVISIONAL` mark (a Responses answer left ``incomplete``), or ``refusal`` for
    an assistant message that refuses and asks for nothing (the Agents SDK fails its run
    on a refusal; a chat client that keeps one sends it back). A refusal is told from the
    message itself, which is stored as it came."""
    mark = message.get(PROVISIONAL)
    if mark is not None:
        return mark if mark in WITHDRAW_REASONS else "incomplete"
    if message.get("role") != "assistant" or message.get("tool_calls"):
        return None
    return "refusal" if _content_and_refusal(message)[1] is not None else None


def same_message(
    recorded: Mapping[str, Any], client: Any, renames: Mapping[str, str] | None = None
) -> bool:
    """Whether the client's copy of a message is the recorded one (see the module's rules)."""
    if recorded == client:
        return True
    return isinstance(client, Mapping) and _same(
        message_key(recorded, renames), message_key(client)
    )


def _same(recorded: Key, client: Key) -> bool:
    """Whether a recorded message's key is the client's. A text is the same without its
    surrounding whitespace, arguments by their value (:func:`_same_arguments`). A refusal
    or an audio id is compared only when the client's copy carries one: a client that
    keeps only role and content sends a refusal back as ``content: ""`` (as matched
    before refusals were keyed), while a different one is another reply (a branch)."""
    return (
        recorded[0] == client[0]
        and _same_text(recorded[1], client[1])
        and _same_calls(recorded[2], client[2])
        and recorded[3] == client[3]
        and (client[4] is None or recorded[4] == client[4])
        and (client[5] is None or recorded[5] == client[5])
    )


def _same_text(recorded: Any, client: Any) -> bool:
    """Texts are the same when only their surrounding whitespace differs (a client
    trimming its copy); the exact text is tried first."""
    if recorded == client:
        return True
    return (
        isinstance(recorded, str) and isinstance(client, str) and recorded.strip() == client.strip()
    )


def _same_calls(recorded: Any, client: Any) -> bool:
    if recorded == client:
        return True
    if (
        not isinstance(recorded, tuple)
        or not isinstance(client, tuple)
        or len(recorded) != len(client)
    ):
        return False
    return all(
        a == b
        or (
            isinstance(a, tuple)
            and isinstance(b, tuple)
            and a[:2] == b[:2]
            and _same_arguments(a[2], b[2])
        )
        for a, b in zip(recorded, client, strict=True)
    )


def _calls_key(calls: Any, original: Callable[[Any], Any]) -> Any:
    """The tool calls as compared: (id, name, arguments as sent) each. Anything but a list
    of calls with a ``function`` object (a number, a string: iterating it raised a 500
    before validation could name it) is its repr, which no recorded (validated) message
    has: never a match."""
    if not isinstance(calls, list | tuple):
        return repr(calls)
    keys: list[Any] = []
    for call in calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            keys.append(repr(call))
            continue
        keys.append((original(call.get("id")), function.get("name"), function.get("arguments")))
    return tuple(keys)


def _same_arguments(recorded: Any, client: Any) -> bool:
    """Whether a call's arguments are the same: the same text, else JSON text holding the
    same value (a client that re-encodes the model's arguments, compact and with sorted
    keys as Hermes does, sends the same call). Cheapest first: the exact text; then the
    client's text against the recorded value's one spelling (:func:`_canonical`, whose
    digest is kept per recorded text); only then is the client's text parsed."""
    if recorded == client:
        return True
    if not isinstance(recorded, str) or not isinstance(client, str):
        return False
    want = _recorded_digest(recorded)
    if want is None:  # not compared by value: as written, and the texts differ
        return False
    if _digest(client) == want:  # (Hermes's spelling is the one spelling)
        return True
    canonical = _canonical(client)
    return canonical is not None and _digest(canonical) == want


def _canonical(text: str) -> str | None:
    """JSON `text` in one spelling (compact, sorted keys, ASCII escapes), or None when it
    is compared as written: not JSON, nesting deeper than the limit (not parsed: refused
    when it would be appended), or holding a number no float holds (``1e400``, ``NaN``,
    ``Infinity``: parsed, ``1e400`` and ``2e400`` would both be infinity)."""
    if too_deep(text):
        return None
    try:
        value = json.loads(text, parse_float=_finite, parse_constant=_no_constant)
    except (ValueError, RecursionError):  # (a raised depth limit: still no 500)
        return None
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is beyond a float")
    return value


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not a JSON number")


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


#: recorded argument texts up to this many characters have their digest kept; a bigger
#: one is hashed on each comparison (the cache would keep it alive as a key)
_CACHED_TEXT_CAP = 64 * 1024


def _recorded_digest(text: str) -> bytes | None:
    """The digest of a recorded call's arguments in their one spelling (None: compared as
    written), kept for texts under :data:`_CACHED_TEXT_CAP` characters: a line's recorded
    replies are compared again on every request. Only recorded texts are kept (a client's
    are new strings each request); 16,384 texts of up to 64 KB each at most, since the
    cache holds its keys alive (review of session 41: MB-sized arguments were kept)."""
    if len(text) > _CACHED_TEXT_CAP:
        return _digest_of(text)
    return _cached_digest(text)


@functools.lru_cache(maxsize=16_384)
def _cached_digest(text: str) -> bytes | None:
    return _digest_of(text)


def _digest_of(text: str) -> bytes | None:
    canonical = _canonical(text)
    return None if canonical is None else _digest(canonical)


def strip_cache_markers(message: Mapping[str, Any]) -> dict[str, Any]:
    """A client's own ``cache_control`` markers removed (the service places its own)."""
    content = message.get("content")
    marked_parts = isinstance(content, list) and any(
        isinstance(p, Mapping) and "cache_control" in p for p in content
    )
    if "cache_control" not in message and not marked_parts:
        return message if isinstance(message, dict) else dict(message)  # the common case: no copy
    out = {k: v for k, v in message.items() if k != "cache_control"}
    if marked_parts:
        assert isinstance(content, list)
        out["content"] = [
            {k: v for k, v in p.items() if k != "cache_control"} if isinstance(p, Mapping) else p
            for p in content
        ]
    return out


def stable_key(system_prompt: str | None, messages: Sequence[Mapping[str, Any]]) -> str:
    """A session id derived from the system prompt and the first user message."""
    first = next((m for m in messages if m.get("role") == "user"), None)
    material = msgspec.json.encode(
        [system_prompt or "", content_key(first.get("content")) if first else ""]
    )
    return "px-" + hashlib.sha256(material).hexdigest()[:24]


@dataclass(frozen=True)
class Superseded:
    """A line whose last reply, provisional, the client went on without."""

    session_id: str  # the tip, whose live view ends with the reply
    suffix_start: int  # index in the client's list where its new messages begin
    withdrawn: list[str]  # the reply's message ids (none: a compaction replaced it, a branch)
    reason: str = "incomplete"  # why it was provisional (:func:`provisional`)


@dataclass(frozen=True)
class Match:
    """Where a request lands: the line's tip and the messages it adds (or a branch to make)."""

    session_id: str  # the tip to continue, or the session to branch from
    suffix_start: int  # index in the client's list where the new messages begin
    branch: bool = False
    common: int = 0  # messages shared with the line branched from


class HistoryIndex:
    """Recorded client histories per session, cached and extended as the ledger grows."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        #: session id -> (live messages examined, the ids and the messages appended to it,
        #: as appended, the last id examined: a view that lost its last messages is read again)
        self._appended: dict[str, tuple[int, list[str], list[Mapping[str, Any]], str | None]] = {}
        #: the carried replies each continuation withdrew (:mod:`ctxledger.ledger.carried`)
        self._withdrawn = CarriedWithdrawals(ledger)

    def session_messages(self, session_id: str) -> list[Mapping[str, Any]]:
        """The messages appended to `session_id` itself, in order (not summaries or carried ones)."""
        return self._own(session_id)[1]

    def _own(self, session_id: str) -> tuple[list[str], list[Mapping[str, Any]]]:
        """The ids and messages appended to `session_id` itself, in order."""
        live = self.ledger.transcript.session(session_id).live
        seen, ids, appended, last = self._appended.get(session_id) or (0, [], [], None)
        if not grew_from(live, seen, last):  # (a reply withdrawn)
            seen, ids, appended = 0, [], []
        messages = self.ledger.transcript.state.messages
        own = [
            (mid, stored)
            for mid, stored in ((mid, messages.get(mid)) for mid in live[seen:])
            if stored is not None
            and stored.session_id == session_id
            and stored.origin == "appended"
        ]
        load_bodies([stored for _, stored in own])  # bodies a rebuild left in the log: one batch
        ids.extend(mid for mid, _ in own)
        appended.extend(stored.message for _, stored in own)
        self._appended[session_id] = (len(live), ids, appended, live[-1] if live else None)
        return ids, appended

    def line_messages(self, line_root: str) -> list[Mapping[str, Any]]:
        """The line's recorded history: the messages appended to each session of its
        chain, without a reply a continuation withdrew after its compaction carried it."""
        chain = self.ledger.chains.chain(line_root)
        gone = self._withdrawn.of(chain)
        out: list[Mapping[str, Any]] = []
        for sid in chain:
            ids, messages = self._own(sid)
            if gone:
                out.extend(m for mid, m in zip(ids, messages, strict=True) if mid not in gone)
            else:
                out.extend(messages)
        return out

    def lines(self, family_root: str) -> list[str]:
        """The line roots of a family: the root's chain and every branch below it."""
        chains = self.ledger.chains
        out, todo = [family_root], [family_root]
        while todo:
            for child in chains.lineage(todo.pop()).children:
                if chains.lineage(child).reason == "branch":
                    out.append(child)
                todo.append(child)
        return out

    @staticmethod
    def common_prefix(
        recorded: Sequence[Mapping[str, Any]],
        client: Sequence[Any],
        renames: Mapping[str, str] | None = None,
    ) -> int:
        """How many leading messages the two lists share (equal dicts, else equal keys;
        `renames`: the ledger's repaired tool-call ids, replacement -> original)."""
        for i, (a, b) in enumerate(zip(recorded, client, strict=False)):
            if not same_message(a, b, renames):
                return i
        return min(len(recorded), len(client))

    def match(self, family_root: str, client: Sequence[Any], system_prompt: str | None) -> Match:
        """The longest line whose recorded history the client's list extends, else a branch point.

        A line whose system prompt differs from the client's matches nothing.
        """
        best: tuple[int, str] | None = None
        closest = (-1, family_root)
        for line in self.lines(family_root):
            if self.ledger.transcript.session(line).system_prompt != system_prompt:
                continue
            recorded = self.line_messages(line)
            common = self.common_prefix(recorded, client, self.ledger.transcript.state.call_renames)
            if common == len(recorded):
                if best is None or common > best[0]:
                    best = (common, line)
            elif common > closest[0]:
                closest = (common, line)
        if best is not None:
            return Match(session_id=self.ledger.tip(best[1]), suffix_start=best[0])
        return Match(
            session_id=self.ledger.tip(closest[1]),
            suffix_start=0,
            branch=True,
            common=max(closest[0], 0),
        )

    def superseded(
        self, family_root: str, client: Sequence[Any], system_prompt: str | None
    ) -> Superseded | None:
        """The line (the longest, if several) whose recorded history ends with a
        provisional reply (:func:`provisional`) still last in its tip's live view, when the
        client's list holds the history before that reply and more after it (not a reply
        of its own in its place), else None. Its ``withdrawn`` is empty when no tip's view
        ends with the reply any more (a compaction replaced it: a summary, a stub, a
        stripped copy): a branch."""
        best: Superseded | None = None
        renames = self.ledger.transcript.state.call_renames
        for line in self.lines(family_root):
            if self.ledger.transcript.session(line).system_prompt != system_prompt:
                continue
            recorded = self.line_messages(line)
            start = len(recorded)
            while start and provisional(recorded[start - 1]) is not None:
                start -= 1
            if start == len(recorded) or len(client) <= start or _replaces(client[start]):
                continue
            if _answers_calls_of(client[start:], recorded[start:]):
                continue  # (it sends back what only the reply asked for: a branch)
            if best is not None and best.withdrawn and start <= best.suffix_start:
                continue
            if self.common_prefix(recorded[:start], client, renames) != start:
                continue
            tip = self.ledger.tip(line)
            ids = self._last_live(tip, recorded[start:])
            if ids is not None or best is None:  # (None: a compaction folded it, a branch)
                why = provisional(recorded[start]) or "incomplete"
                best = Superseded(
                    session_id=tip, suffix_start=start, withdrawn=ids or [], reason=why
                )
        return best

    def _last_live(self, tip: str, reply: Sequence[Mapping[str, Any]]) -> list[str] | None:
        """The ids of `reply`'s messages when they end the tip's live view, else None:
        appended to the tip, or carried there verbatim by a compaction (the withdrawal then
        goes to the continuation, and :meth:`line_messages` leaves the reply out of the
        ended session's messages). A compaction that took the reply into a summary, a
        stub or a stripped copy left another message at the end: None, a branch."""
        live = self.ledger.transcript.session(tip).live
        if len(live) < len(reply):
            return None
        ids = live[len(live) - len(reply) :]
        stored = self.ledger.transcript.state.messages
        same = all(
            (m := stored.get(mid)) is not None and m.origin == "appended" and m.message == want
            for mid, want in zip(ids, reply, strict=True)
        )
        return ids if same else None

    def answered(
        self, family_root: str, client: Sequence[Any], system_prompt: str | None
    ) -> str | None:
        """The tip of a line whose recorded history is the client's list plus one reply that
        is still the last message of its live view (the client repeats a turn the ledger
        has just answered: a concurrent duplicate or a retry), else None."""
        renames = self.ledger.transcript.state.call_renames
        for line in self.lines(family_root):
            if self.ledger.transcript.session(line).system_prompt != system_prompt:
                continue
            recorded = self.line_messages(line)
            if len(recorded) != len(client) + 1 or recorded[-1].get("role") != "assistant":
                continue
            if self.common_prefix(recorded, client, renames) != len(client):
                continue
            tip = self.ledger.tip(line)
            live = self.ledger.transcript.session(tip).live
            last = self.ledger.transcript.state.messages.get(live[-1]) if live else None
            if last is not None and last.message == recorded[-1]:
                return tip
        return None


def _answers_calls_of(messages: Sequence[Any], reply: Sequence[Mapping[str, Any]]) -> bool:
    """Whether `messages` hold a tool result for a call one of `reply`'s messages made."""
    calls = {
        call.get("id")
        for m in reply
        for call in (m.get("tool_calls") or ())
        if isinstance(call, Mapping)
    }
    calls.discard(None)
    for m in messages:
        if not isinstance(m, Mapping):
            continue
        if m.get("role") == "tool" and m.get("tool_call_id") in calls:
            return True
        content = m.get("content")
        if isinstance(content, list) and any(  # (a result block in a user message)
            isinstance(b, Mapping) and b.get("tool_use_id") in calls for b in content
        ):
            return True
    return False


__all__ = [
    "PROVISIONAL",
    "HistoryIndex",
    "Key",
    "Match",
    "Superseded",
    "content_key",
    "message_key",
    "provisional",
    "same_message",
    "stable_key",
    "strip_cache_markers",
]
