"""The pure planner's arguments checked up front, each wrong type named (pure, cheap).

``plan``/``draft`` and ``apply`` are public: a library user may call them with a dict of
settings as the config, a count spelled as text, pins that are not indices. Those were
Python's own errors raised deep inside (``AttributeError: 'dict' object has no attribute
'enabled'``, ``TypeError: '<=' not supported``), or were taken into the plan (a focus of
5, a force of "yes"). Here each is InvalidInput (InvalidConfig for the config) naming
the argument and the type it got.

Only type checks, in constant time but for the counts and the pins (the counts were
checked before): the message list's items are checked only when the planner's scan
fails on one (``planner.draft``), so a good list costs nothing more; what a message
holds is the caller's to validate (``plan`` needs validated OpenAI messages, as the
ledger's paths give it).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from ctxledger.compressor.config import CompressionConfig, checked_config
from ctxledger.compressor.plancache import PlanCache
from ctxledger.compressor.plans import CompactionPlan
from ctxledger.errors import InvalidConfig, InvalidInput
from ctxledger.integers import shown

__all__ = ["check_apply_args", "check_messages", "check_plan_args"]


def _named(value: object) -> str:
    return type(value).__name__


def _listing(value: object, kind: type) -> bool:
    """`value` is a `kind` (an ABC) but neither text nor a mapping; a list or a tuple at
    once (an ABC's check of a union costs microseconds, a plan is timed in them)."""
    if type(value) is list or type(value) is tuple:
        return True
    return isinstance(value, kind) and not isinstance(value, str | bytes | bytearray | Mapping)


def check_messages(messages: Any, field: str = "messages", *, items: bool = True) -> None:
    """InvalidInput unless `messages` is a sequence (not text) of mappings, naming
    `field` and the first item that is not one. `items` False: the sequence only (the
    planner checks its items only when its scan fails on one: no cost on a good list)."""
    if not _listing(messages, Sequence):
        raise InvalidInput(f"{field} must be a list of message objects, got {_named(messages)}")
    for kind in set(map(type, messages)) - {dict} if items else ():
        if not issubclass(kind, Mapping):
            at = next(i for i, m in enumerate(messages) if type(m) is kind)
            raise InvalidInput(
                f"{field}[{at}] must be a message object (a dict), got {kind.__name__}"
            )


def _counts(token_counts: Any, n_messages: int) -> list[int]:
    if not _listing(token_counts, Iterable):
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


def _pins(pinned: Any) -> None:
    if not _listing(pinned, Collection):
        raise InvalidInput(f"pinned must be a collection of message indices, got {_named(pinned)}")
    if pinned and not set(map(type, pinned)) <= {int}:
        bad = next(p for p in pinned if type(p) is not int)
        raise InvalidInput(f"pinned must hold message indices (integers), got {shown(bad)}")


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
) -> tuple[CompressionConfig, list[int]]:
    """``plan``'s arguments checked (its window is the config's to check): the config
    and the token counts as a list. Raises InvalidConfig / InvalidInput naming the first
    argument of a wrong type or value."""
    checked = checked_config(config)
    if checked is None:
        raise InvalidConfig("config must be a CompressionConfig, got None")
    check_messages(messages, items=False)
    counts = _counts(token_counts, len(messages))
    if focus is not None and not isinstance(focus, str):
        raise InvalidInput(f"focus must be text or None, got {_named(focus)}")
    _pins(pinned)
    if type(compaction_count) is not int or compaction_count < 0:
        raise InvalidInput(
            f"compaction_count must be a non-negative integer, got {shown(compaction_count)}"
        )
    if type(force) is not bool:
        raise InvalidInput(f"force must be True or False, got {shown(force)}")
    if cache is not None and not isinstance(cache, PlanCache):
        raise InvalidInput(f"cache must be a PlanCache or None, got {_named(cache)}")
    return checked, counts


def check_apply_args(
    plan: object, messages: object, summary_text: object, copy_carried: object
) -> None:
    """``apply``'s arguments checked: InvalidInput naming the first of a wrong type."""
    if not isinstance(plan, CompactionPlan):
        raise InvalidInput(f"plan must be a CompactionPlan (from plan()), got {_named(plan)}")
    check_messages(messages, items=False)  # (the plan was made from its items)
    if not isinstance(summary_text, str):
        raise InvalidInput(f"summary_text must be text, got {_named(summary_text)}")
    if type(copy_carried) is not bool:
        raise InvalidInput(f"copy_carried must be True or False, got {shown(copy_carried)}")
