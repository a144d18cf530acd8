"""The pure planner's arguments checked up front, each wrong type named (pure, cheap).

``plan``/``draft`` and ``apply`` are public: a library user may call them with a dict of
settings as the config, a count spelled as text, pins that are not indices. Those were
Python's own errors raised deep inside (``AttributeError: 'dict' object has no attribute
'enabled'``, ``TypeError: '<=' not supported``), or were taken into the plan (a focus of
5, a force of "yes"). Here each is InvalidInput (InvalidConfig for the config) naming
the argument and the type it got; an item of the list that is no message object is
InvalidMessage naming its index. What is a number in all but type is taken: an
IntEnum or a numpy integer as a pin or a count of compactions (``operator.index``),
``force=1``, a generator of pins (materialized); a bool as a number, text, a float or
a mapping of pins is refused.

Only type checks, in constant time but for the counts and the pins (the counts were
checked before): the message list's items are checked only when the planner's scan
fails on one (``planner.draft``), so a good list costs nothing more where a plan scans
it anyway; a disabled config, not forced, answers its skip after that scan (session
44: a list is refused or taken whatever ``enabled`` says), so there a good list costs
the scan. What a message holds is the caller's to validate (``plan`` needs validated
OpenAI messages, as the ledger's paths give it).
"""

from __future__ import annotations

import operator
from collections.abc import Collection, Iterable, Mapping
from typing import Any, NamedTuple

from ctxledger.compressor.config import CompressionConfig, checked_config
from ctxledger.compressor.plancache import PlanCache
from ctxledger.compressor.plans import CompactionPlan
from ctxledger.errors import InvalidConfig, InvalidInput, InvalidMessage
from ctxledger.integers import shown
from ctxledger.messages import check_message_list

__all__ = ["PlanArgs", "check_apply_args", "check_messages", "check_plan_args"]


def _named(value: object) -> str:
    return type(value).__name__


def check_messages(messages: Any, *, items: bool = True) -> None:
    """InvalidInput unless `messages` is a sequence (not text) (``check_message_list``);
    InvalidMessage naming the first item that is not a message object. `items` False:
    the sequence only (the planner and ``apply`` check the items only when they fail on
    one: no cost on a good list)."""
    check_message_list(messages)
    for kind in set(map(type, messages)) - {dict} if items else ():
        if not issubclass(kind, Mapping):
            at = next(i for i, m in enumerate(messages) if type(m) is kind)
            raise InvalidMessage(f"a message must be a JSON object, got {kind.__name__}", index=at)


def _counts(token_counts: Any, n_messages: int) -> list[int]:
    if type(token_counts) not in _PLAIN and (
        not isinstance(token_counts, Iterable) or isinstance(token_counts, _NOT_LISTS)
    ):
        raise InvalidInput(
            f"token_counts must be a list of integers, one per message, got {_named(token_counts)}"
        )
    counts: list[int] = list(token_counts)
    if len(counts) != n_messages:
        raise InvalidInput(f"token_counts has {len(counts)} entries for {n_messages} messages")
    if counts and (not set(map(type, counts)) <= {int} or min(counts) < 0):
        bad = next(c for c in counts if type(c) is not int or c < 0)
        raise InvalidInput(f"token_counts must be non-negative integers, got {shown(bad)}")
    return counts


#: what is iterable but no list of values here: text, bytes, a mapping (its keys)
_NOT_LISTS = (str, bytes, bytearray, Mapping)
#: collections taken without an ABC's check (each costs a microsecond or two)
_PLAIN = (list, tuple, set, frozenset, range)


def _index(value: object, what: str) -> int:
    """`value` as an int when it is one (an IntEnum, a numpy integer: ``operator.index``),
    not a bool (a flag given for a number is a mistake), else InvalidInput."""
    if type(value) is int:
        return value
    if not isinstance(value, bool):
        try:
            return int(operator.index(value))  # type: ignore[arg-type]
        except TypeError:
            pass
    raise InvalidInput(f"{what}, got {shown(value)}")


def _pins(pinned: Any) -> Collection[int]:
    """The pins as given when they are ints (a set, a list, a range), else as a list of
    ints (index-like values, a generator materialized)."""
    plain = type(pinned) in _PLAIN
    if not plain and (not isinstance(pinned, Iterable) or isinstance(pinned, _NOT_LISTS)):
        raise InvalidInput(f"pinned must be a collection of message indices, got {_named(pinned)}")
    ints: Collection[int] = pinned
    if (plain or isinstance(pinned, Collection)) and set(map(type, pinned)) <= {int}:
        return ints
    return [_index(p, "pinned must hold message indices (integers)") for p in pinned]


def _flag(value: object, what: str) -> bool:
    """A bool, or an int-like 0 or 1 as one (``force=1``); anything else is a mistake."""
    if type(value) is bool:
        return value
    if not isinstance(value, bool | str | bytes | float):
        try:
            number = operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            number = -1
        if number in (0, 1):
            return bool(number)
    raise InvalidInput(f"{what} must be True or False, got {shown(value)}")


class PlanArgs(NamedTuple):
    """``plan``'s arguments as checked: the values the planner uses."""

    config: CompressionConfig
    counts: list[int]
    pinned: Collection[int]
    compaction_count: int
    force: bool


def check_plan_args(
    messages: Any,
    config: object,
    token_counts: object,
    *,
    focus: object,
    pinned: object,
    compaction_count: object,
    force: object,
    cache: object,
) -> PlanArgs:
    """``plan``'s arguments checked (its window is the config's to check), as the planner
    uses them. Raises InvalidConfig / InvalidInput naming the first argument of a wrong
    type or value."""
    checked = checked_config(config)
    if checked is None:
        raise InvalidConfig("config must be a CompressionConfig, got None")
    check_messages(messages, items=False)
    counts = _counts(token_counts, len(messages))
    if focus is not None and not isinstance(focus, str):
        raise InvalidInput(f"focus must be text or None, got {_named(focus)}")
    pins = _pins(pinned)
    count = _index(compaction_count, "compaction_count must be a non-negative integer")
    if count < 0:
        raise InvalidInput(f"compaction_count must be a non-negative integer, got {count}")
    flag = _flag(force, "force")
    if cache is not None and not isinstance(cache, PlanCache):
        raise InvalidInput(f"cache must be a PlanCache or None, got {_named(cache)}")
    return PlanArgs(checked, counts, pins, count, flag)


def check_apply_args(
    plan: object, messages: object, summary_text: object, copy_carried: object
) -> bool:
    """``apply``'s arguments checked: InvalidInput naming the first of a wrong type;
    returns `copy_carried` as a bool."""
    if not isinstance(plan, CompactionPlan):
        raise InvalidInput(f"plan must be a CompactionPlan (from plan()), got {_named(plan)}")
    check_messages(messages, items=False)  # (the plan was made from its items)
    if not isinstance(summary_text, str):
        raise InvalidInput(f"summary_text must be text, got {_named(summary_text)}")
    return _flag(copy_carried, "copy_carried")
