"""The chat message model (OpenAI shape) and its validation.

Messages are kept as plain dicts so provider extras (``reasoning_content``,
``cache_control``, ...) pass through untouched and head/tail messages stay
byte-identical to what the caller sent. This module owns the rules a message list
must follow; :func:`validate_messages` checks a batch against the calls already
issued in a session and raises :class:`InvalidMessage` naming the first problem.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

import msgspec

from ctxledger.errors import InvalidInput, InvalidMessage
from ctxledger.integers import shown
from ctxledger.limits import json_depth, max_json_depth, not_json, too_deep
from ctxledger.message_text import audio_reference as audio_reference
from ctxledger.message_text import content_text as content_text
from ctxledger.message_text import is_text_content_empty as is_text_content_empty
from ctxledger.message_text import kind_of as kind_of
from ctxledger.message_text import refusal_text as refusal_text

#: ``developer`` is OpenAI's system role for o-series / gpt-5 models: kept as sent and
#: read as a system message (added in session 37; older ledgers never hold it)
ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
#: the roles that give instructions: a leading one is read as the system prompt
INSTRUCTION_ROLES = ("system", "developer")
#: the role a session's system prompt is given back in (``SystemPromptSet.role``, s38)
SystemRole = Literal["system", "developer"]
#: that role as an event stores it: ``system`` is left unset, so not encoded, and every
#: event written before the field existed keeps its bytes and hash
StoredRole = Literal["developer"] | msgspec.UnsetType


def check_system_role(role: object, what: str = "system_role") -> SystemRole:
    """`role` when it is ``system`` or ``developer`` (None: ``system``), else InvalidInput."""
    if role is None or role == "system":
        return "system"
    if role == "developer":
        return "developer"
    raise InvalidInput(f"{what} must be 'system' or 'developer', got {shown(role)}")


def stored_role(role: SystemRole) -> StoredRole:
    """`role` as an event field (:data:`StoredRole`)."""
    return "developer" if role == "developer" else msgspec.UNSET


def role_of(stored: StoredRole) -> SystemRole:
    """The role an event's stored `stored` role says (unset: ``system``)."""
    return "developer" if stored == "developer" else "system"


#: a JSON object as decoded (a message, a tool schema, a usage block, a plan)
JSON = dict[str, Any]
#: one chat message in the OpenAI shape
Message = JSON


def _check_content(content: Any, role: str, index: int | None) -> None:
    if content is None:
        if role == "user" or role in INSTRUCTION_ROLES:
            raise InvalidMessage(f"{role} message has no content", index=index)
        return
    if isinstance(content, str):
        return
    if isinstance(content, list):
        for j, part in enumerate(content):
            if not isinstance(part, Mapping):
                raise InvalidMessage(
                    f"content part {j} must be an object, got {type(part).__name__}", index=index
                )
            if not isinstance(part.get("type"), str):
                raise InvalidMessage(f"content part {j} has no string 'type'", index=index)
            if part["type"] == "text" and not isinstance(part.get("text"), str):
                raise InvalidMessage(f"text content part {j} has no string 'text'", index=index)
        return
    raise InvalidMessage(
        f"content must be a string, a list of parts or null, got {type(content).__name__}",
        index=index,
    )


def _check_tool_calls(calls: Any, index: int | None) -> list[str]:
    if not isinstance(calls, list):
        raise InvalidMessage("'tool_calls' must be a list", index=index)
    ids: list[str] = []
    for j, call in enumerate(calls):
        if not isinstance(call, Mapping):
            raise InvalidMessage(f"tool call {j} must be an object", index=index)
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidMessage(f"tool call {j} has no string 'id'", index=index)
        fn = call.get("function")
        if not isinstance(fn, Mapping):
            raise InvalidMessage(
                f"tool call {shown(call_id)} has no 'function' object", index=index
            )
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            raise InvalidMessage(f"tool call {shown(call_id)} has no function name", index=index)
        if not isinstance(fn.get("arguments"), str):
            raise InvalidMessage(
                f"tool call {shown(call_id)}: 'arguments' must be a JSON string, "
                f"got {type(fn.get('arguments')).__name__}",
                index=index,
            )
        if too_deep(fn["arguments"]):
            raise InvalidMessage(
                f"tool call {shown(call_id)}: arguments nest deeper than {max_json_depth()} levels "
                "(raise CTXLEDGER_MAX_JSON_DEPTH if this is intended)",
                index=index,
            )
        ids.append(call_id)
    return ids


def stored_copy(message: Mapping[str, Any]) -> Message:
    """The form a checked message is stored in: a plain dict copy of its top level (the
    caller's mapping is not kept; its values are shared). :func:`validate_message`
    returns it; an import that checked its messages ahead makes it again for each."""
    return dict(message)


def validate_message(message: Any, index: int | None = None) -> Message:
    """Check one message's own shape (not its place in a sequence). Returns its stored form
    (:func:`stored_copy`: an unchanged plain copy)."""
    if not isinstance(message, Mapping):
        raise InvalidMessage(
            f"a message must be a JSON object, got {type(message).__name__}", index=index
        )
    limit = max_json_depth()
    depth, is_json = json_depth(message, limit)
    if depth > limit:
        raise InvalidMessage(
            f"the message nests deeper than {limit} levels "
            "(raise CTXLEDGER_MAX_JSON_DEPTH if this is intended)",
            index=index,
        )
    if not is_json:  # it would be stored changed (NaN as null, a set as a list, ...)
        raise InvalidMessage(
            not_json(message, whole="the message") or "the message is not JSON", index=index
        )
    role = message.get("role")
    if not isinstance(role, str) or role not in ROLES:  # a list or an object is unhashable
        raise InvalidMessage(
            f"unknown role {shown(role)}; expected one of system, developer, user, assistant, tool",
            index=index,
        )
    if "content" not in message and role != "assistant":
        raise InvalidMessage(f"{role} message has no 'content' field", index=index)
    _check_content(message.get("content"), role, index)
    if role == "tool":
        if not isinstance(message.get("tool_call_id"), str) or not message["tool_call_id"]:
            raise InvalidMessage("tool message without a string 'tool_call_id'", index=index)
    elif "tool_call_id" in message:
        raise InvalidMessage(
            f"'tool_call_id' is only allowed on tool messages, not {role}", index=index
        )
    if "tool_calls" in message and message["tool_calls"] is not None:
        if role != "assistant":
            raise InvalidMessage(
                f"'tool_calls' is only allowed on assistant messages, not {role}", index=index
            )
        _check_tool_calls(message["tool_calls"], index)
    elif (
        role == "assistant"
        and message.get("content") is None
        # OpenAI answers a refusal as content null + "refusal", an audio reply as content
        # null + "audio" (sent back as {"id": ...}); clients send them back
        and not isinstance(message.get("refusal"), str)
        and audio_reference(message.get("audio")) is None
    ):
        raise InvalidMessage(
            "assistant message has neither content nor tool_calls (nor a refusal or an audio id)",
            index=index,
        )
    if "name" in message and not isinstance(message["name"], str):
        raise InvalidMessage("'name' must be a string", index=index)
    return stored_copy(message)


def tool_call_ids(message: Mapping[str, Any]) -> list[str]:
    return [c["id"] for c in message.get("tool_calls") or ()]


#: the end of a refused tool result's text: what the client can do (a resend of the
#: same history meets the same refusal)
_DROP = (
    " in the session's view (a compaction strips a call that has no result and summarizes"
    " older ones, so a late result for such a call has nothing to answer): drop this"
    " result from the messages you send"
)


class CallLedger:
    """The tool-call ids a session has issued and answered, for sequence validation.

    :meth:`overlay` gives a ledger that records new ids on top of this one without
    copying it, so validating a batch costs O(batch), not O(session).
    """

    def __init__(
        self,
        issued: Iterable[str] = (),
        answered: Iterable[str] = (),
        *,
        base: CallLedger | None = None,
    ) -> None:
        self.issued: set[str] = set(issued)
        self.answered: set[str] = set(answered)
        #: re-used call ids that were repaired: original id -> the replacements that
        #: may still be waiting for a result, in order (an entry here replaces the base's)
        self.renamed: dict[str, list[str]] = {}
        #: original ids of repaired re-uses whose call was lost: unanswered when a user
        #: message or a tool result came before the re-use (the next result with the id
        #: goes to the later call)
        self.lost: set[str] = set()
        #: original id -> the calls made with it that were lost here, in order (their ids
        #: as stored; the base's come before them, never copied): a result with the id
        #: that no waiting call takes answers the first of them still unanswered.
        #: Append-only: a call enters once, when it is lost
        self.lost_calls: dict[str, list[str]] = {}
        #: original id -> how many of its lost calls (the base's first) are known
        #: answered: :meth:`late_owner` starts past them
        self._late_from: dict[str, int] = {}
        #: ids issued since the latest user message or tool result here (`turned`: one
        #: came here; else the base's count too)
        self.in_turn: set[str] = set()
        self.turned = False
        self._base = base

    def fold(self, messages: Iterable[JSON], renames: Mapping[str, str]) -> None:
        """Record the calls issued and answered by `messages` (stored ones, in order);
        `renames` maps each repaired re-used id's replacement to the original, whose
        result may still come under the original id."""
        for msg in messages:
            if msg.get("role") == "assistant":
                for call_id in tool_call_ids(msg):
                    if call_id in renames:
                        self.supersede(renames[call_id], call_id)
                    self.issue(call_id)
            elif msg.get("role") == "user":
                self.new_turn()
            elif msg.get("role") == "tool":
                self.answered.add(str(msg.get("tool_call_id")))
                self.new_turn()  # (the round of results ends the calls before it)

    def issue(self, call_id: str) -> None:
        """Record a call made with `call_id` (in the current user turn)."""
        self.issued.add(call_id)
        self.in_turn.add(call_id)

    def new_turn(self) -> None:
        """A user message or a tool result: the calls issued before it are no longer in
        the current round (a later re-use of an id one of them left unanswered loses it)."""
        self.in_turn.clear()
        self.turned = True

    def issued_this_turn(self, call_id: str) -> bool:
        """Whether `call_id` was issued after the latest user message or tool result."""
        if call_id in self.in_turn:
            return True
        return not self.turned and self._base is not None and self._base.issued_this_turn(call_id)

    def supersede(self, call_id: str, replacement: str) -> None:
        """A later call re-uses `call_id` and got `replacement`. The calls made with the
        id before it keep waiting for the next results with the id, first in, first out,
        if the latest of them is unanswered and no user message or tool result came since
        it was made; else they are lost (a new user turn, or a round of results that
        ended without theirs), and only a result no other call takes answers them (the
        planner's ``compressor.layout.Scanner`` pairs them alike)."""
        made = self.replacements(call_id)
        latest = made[-1] if made else call_id  # the latest call made with the id
        if self.waiting_before_turn(latest):  # lost, and so are those waiting before it
            waiting = []
            gone = [r for r in made if self.was_issued(r) and not self.was_answered(r)]
            if (
                not self.was_lost(call_id)
                and not self.was_answered(call_id)
                and self.was_issued(call_id)
            ):
                self.lost.add(call_id)  # (the original enters once: it may stay unanswered)
                gone.insert(0, call_id)
            if gone:  # (a replacement is lost once: `renamed` then holds only later ones)
                self.lost_calls.setdefault(call_id, []).extend(gone)
        else:
            waiting = [r for r in made if not self.was_answered(r)]
        self.renamed[call_id] = [*waiting, replacement]

    def waiting_before_turn(self, call_id: str) -> bool:
        """Whether the call `call_id`, in the view, has no result and a user message or a
        tool result came after it."""
        return (
            self.was_issued(call_id)
            and not self.was_answered(call_id)
            and not self.issued_this_turn(call_id)
        )

    def replacements(self, call_id: str) -> list[str]:
        """The replacement ids given to later calls re-using `call_id` that may still
        wait for a result, in order (empty when the id was never repaired)."""
        made = self.renamed.get(call_id)
        if made is not None:
            return made
        return self._base.replacements(call_id) if self._base is not None else []

    def was_lost(self, call_id: str) -> bool:
        """Whether the call made first with `call_id` is lost: unanswered when a user
        message or a tool result came before a later call re-used the id (only a result
        no other call takes answers it: :meth:`late_owner`)."""
        return call_id in self.lost or (self._base is not None and self._base.was_lost(call_id))

    def lost_owners(self, call_id: str) -> list[str]:
        """The lost calls made with `call_id` (:meth:`supersede`), in order, as stored
        (a copy: the base's, then this ledger's)."""
        below = self._base.lost_owners(call_id) if self._base is not None else []
        return [*below, *self.lost_calls.get(call_id, ())]

    def late_owner(self, call_id: str) -> str | None:
        """The call a result with `call_id` answers when no call waiting for it takes it
        (the latest call made with the id is answered, or lost): the earliest lost call
        made with the id still in the view and unanswered — a late result, so that a
        client resending a history with one never meets a refusal (session 46)."""
        k = self._late_index(call_id)
        return self._lost_at(call_id, k) if k < self._lost_count(call_id) else None

    def _late_index(self, call_id: str) -> int:
        """The index of the earliest lost call with `call_id` in the view and unanswered
        (the count of them if none), moving this ledger's cursor to it: a lost call is in
        the view when lost and a ledger's answers only grow, so the calls before it stay
        answered (an overlay starts at its base's cursor, which the base moves with what
        the base knows)."""
        k = self._late_from.get(call_id)
        if k is None:
            k = self._base._late_index(call_id) if self._base is not None else 0
        n = self._lost_count(call_id)
        while k < n:
            gone = self._lost_at(call_id, k)
            if self.was_issued(gone) and not self.was_answered(gone):
                break
            k += 1
        self._late_from[call_id] = k
        return k

    def _lost_count(self, call_id: str) -> int:
        below = self._base._lost_count(call_id) if self._base is not None else 0
        return below + len(self.lost_calls.get(call_id, ()))

    def _lost_at(self, call_id: str, k: int) -> str:
        below = self._base._lost_count(call_id) if self._base is not None else 0
        if k < below:
            assert self._base is not None
            return self._base._lost_at(call_id, k)
        return self.lost_calls[call_id][k - below]

    def pending_rename(self, call_id: str) -> str | None:
        """The earliest replacement of a repaired re-used `call_id` still waiting for its
        result."""
        for made in self.replacements(call_id):
            if not self.was_answered(made):
                return made
        return None

    def rename_for(self, call_id: str) -> str | None:
        """The replacement a result with `call_id` goes to, if any: the pending one, once
        the original call is answered, lost (:meth:`supersede`) or no longer in the view
        (a compaction between the repaired call and its result summarized it away); an
        original call still awaiting its result in the re-use's user turn takes it."""
        pending = self.pending_rename(call_id)
        if pending is None:
            return None
        if self.was_answered(call_id) or not self.was_issued(call_id):
            return pending
        return pending if self.was_lost(call_id) else None

    def overlay(self) -> CallLedger:
        return CallLedger(base=self)

    def was_issued(self, call_id: str) -> bool:
        return call_id in self.issued or (self._base is not None and self._base.was_issued(call_id))

    def was_answered(self, call_id: str) -> bool:
        return call_id in self.answered or (
            self._base is not None and self._base.was_answered(call_id)
        )

    def check(self, message: Mapping[str, Any], index: int | None = None) -> None:
        """Raise if `message` cannot follow the calls seen so far; then record it."""
        if message.get("role") == "assistant":
            new = tool_call_ids(message)
            if len(set(new)) != len(new):
                dup = next(i for i in new if new.count(i) > 1)
                raise InvalidMessage(
                    f"duplicate tool_call id {shown(dup)} in one message", index=index
                )
            for call_id in new:
                if self.was_issued(call_id):
                    raise InvalidMessage(
                        f"duplicate tool_call id {shown(call_id)}: already issued earlier",
                        index=index,
                    )
            self.issued.update(new)
        elif message.get("role") == "tool":
            call_id = message["tool_call_id"]
            if not self.was_issued(call_id):
                raise InvalidMessage(
                    f"tool result for {shown(call_id)}, but no earlier assistant message issued"
                    f" that call{_DROP}",
                    index=index,
                )
            if self.was_answered(call_id):
                raise InvalidMessage(
                    f"second tool result for call {shown(call_id)}: every call made with that id"
                    f" is answered{_DROP}",
                    index=index,
                )
            self.answered.add(call_id)


class CallIdRepair(msgspec.Struct, frozen=True, kw_only=True):
    """One repaired tool-call id: message `index` of the batch, its call `call_index`
    (None: the ``tool_call_id`` of a tool result), the id as sent and the one stored."""

    index: int
    call_index: int | None
    original: str
    replacement: str

    def describe(self, message_id: str | None = None) -> str:
        """One line; the message named by `message_id` (as stored) if given, else its index."""
        what = "re-used tool-call id" if self.call_index is not None else "its result"
        where = f"message {message_id}" if message_id else f"message {self.index}"
        return f"{where}: {what} {self.original!r} became {self.replacement!r}"


def repair_call_ids(
    messages: Sequence[Any],
    ledger: CallLedger | None,
    new_id: Callable[[int, int], str],
) -> tuple[list[Any], list[CallIdRepair]]:
    """Give a re-used tool-call id a new one, and the result that answers it with it.

    The one validation policy of every entry point (import, the ledger, the service):
    some sources re-use an id for a later call (tau-bench logs; local models that number
    calls per turn), while a session needs them unique. A call whose id was already
    issued (earlier in the session per `ledger`, or earlier in the batch) gets
    ``new_id(index, call_index)``; the next result with the original id, once the
    original call is answered, lost (still unanswered when a user message or a tool
    result came before the re-use: a run that stopped with its call in flight, a round
    of results that ended without its own) or no longer in the
    session's view (a compaction summarized it away), is given the replacement; a
    result with the id once no replacement waits answers the earliest lost call still
    unanswered (a late result: not refused, so a resent history does not stick; one whose
    lost call a compaction stripped has nothing left to answer). Messages
    are never mutated: a repaired one is a copy. Shapes are not checked here
    (``validate_messages`` does that next); anything malformed is passed through for it
    to name.
    """
    work = ledger.overlay() if ledger is not None else CallLedger()
    out: list[Any] = list(messages)
    repairs: list[CallIdRepair] = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, Mapping):
            continue
        if msg.get("role") == "assistant" and isinstance(msg.get("tool_calls"), list):
            calls = msg["tool_calls"]
            fixed = list(calls)
            for j, call in enumerate(calls):
                call_id = call.get("id") if isinstance(call, Mapping) else None
                if not isinstance(call_id, str) or not call_id:
                    continue
                if work.was_issued(call_id):
                    new = first = new_id(i, j)
                    for k in itertools.count(1):
                        if not work.was_issued(new):
                            break
                        new = f"{first}_{k}"
                    fixed[j] = {**call, "id": new}
                    work.supersede(call_id, new)
                    repairs.append(
                        CallIdRepair(index=i, call_index=j, original=call_id, replacement=new)
                    )
                    call_id = new
                work.issue(call_id)
            if fixed != calls:
                out[i] = {**msg, "tool_calls": fixed}
        elif msg.get("role") == "user":
            work.new_turn()
        elif msg.get("role") == "tool" and isinstance(msg.get("tool_call_id"), str):
            call_id = msg["tool_call_id"]
            pending = work.rename_for(call_id)
            if pending is None and (
                work.was_answered(call_id)
                or work.was_lost(call_id)
                or not work.was_issued(call_id)  # (summarized away: as in `rename_for`)
            ):
                pending = work.late_owner(call_id)
            if pending is not None and pending != call_id:
                out[i] = {**msg, "tool_call_id": pending}
                repairs.append(
                    CallIdRepair(index=i, call_index=None, original=call_id, replacement=pending)
                )
                call_id = pending
            work.answered.add(call_id)
            work.new_turn()  # (as in `CallLedger.fold`)
    return out, repairs


def check_message_list(messages: object) -> None:
    """InvalidInput unless `messages` is a sequence (a list, a tuple, a deque; not text,
    bytes or one message object), naming the type got: the one check of every entry
    point taking a message list (the ledger, the service, the planner). A list or a
    tuple is taken at once (an ABC's check costs microseconds; a plan is timed in them)."""
    if type(messages) is list or type(messages) is tuple:
        return
    if not isinstance(messages, Sequence) or isinstance(
        messages, str | bytes | bytearray | Mapping
    ):
        raise InvalidInput(
            f"messages must be a list of message objects, got {type(messages).__name__}"
        )


def validate_messages(messages: Sequence[Any], ledger: CallLedger | None = None) -> list[Message]:
    """Validate a batch in order against `ledger` (not modified). All or nothing."""
    return list(checked_in_order(messages, ledger))


def checked_in_order(
    messages: Iterable[Any], ledger: CallLedger | None = None
) -> Iterator[Message]:
    """Each message validated (``validate_message``'s copy) and checked in order against
    `ledger` (not modified) and the calls before it: the one loop of
    :func:`validate_messages`, :func:`check_in_order` and an import's pre-pass."""
    work = ledger.overlay() if ledger is not None else CallLedger()
    for i, raw in enumerate(messages):
        msg = validate_message(raw, i)
        work.check(msg, i)
        yield msg


def check_in_order(messages: Sequence[Any]) -> None:
    """:func:`validate_messages` of a new session without its list of checked copies
    (``validate_message`` returns a copy: an importer checking a 200k-message session
    held a second set of dicts for nothing)."""
    for _ in checked_in_order(messages):
        pass


def check_new_messages(messages: Sequence[Any]) -> list[CallIdRepair]:
    """Would a new session take `messages` under the one policy? (pure; nothing stored)

    For an adapter that checks a whole list before it starts a session: re-used
    tool-call ids are repairs (returned, as the ledger will make them, with placeholder
    replacement ids), anything else raises InvalidMessage as ``validate_messages`` does.
    """
    repaired, repairs = repair_call_ids(messages, None, lambda i, j: f"call_repair_{i}_{j}")
    validate_messages(repaired)
    return repairs
