"""What planning learns about a message list, kept so that re-planning a grown list is cheap.

A live session is planned again and again as it grows: after a compaction that made
no progress, after a conflicting writer, after a dry run. Everything the planner
derives from a message on its own (its role, tool-call links, whether it is long,
whether it carries a summary, its phase-1 rewrite) stays true while the message
object is the same, so a :class:`PlanCache` keeps, per list it has seen, the
layout's raw state (:class:`~ctxledger.compressor.layout.Scanner`), the groups of
repeated results and the rewrites already built, and extends them with only the
messages appended since. A list is recognised by the identity of its message
objects (a prefix of the list seen before), never by their content: the cache is
for lists whose messages are not mutated in place, as the projections' are (their
messages are read-only by contract). Anything else plans with no cache.

The results are the same as planning from scratch, by construction and by test
(``tests/test_plan_cache.py`` compares both on random growing sessions).
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.copies import CopyGroups, group_copies, resolve_copies
from ctxledger.compressor.layout import Layout, Scanner
from ctxledger.compressor.prune import Prune, prune_one
from ctxledger.tokens import rough_message_tokens

__all__ = ["PlanCache", "Scan", "scan"]

#: message index -> (its phase-1 rewrite or None, the rewrite's rough tokens)
_Resolved = dict[int, tuple[Prune | None, int]]


@dataclass(slots=True)
class Scan:
    """One list's layout, its repeated results and the rewrites built so far."""

    key: tuple[int, int, int]
    messages: list[Any]
    scanner: Scanner
    layout: Layout
    #: the repeated long results, grouped when a rewrite first needs them (a plan's
    #: decision does not: see ``planner.draft``); None until then
    groups: CopyGroups | None = None
    found_newest: dict[int, int] | None = None
    #: rewrites of this list's messages (valid for this scan's newest copies and calls);
    #: empty while ``groups`` is None
    resolved: _Resolved = field(default_factory=dict)

    @property
    def newest(self) -> dict[int, int]:
        """Older tool result index -> its newest identical copy (grouped on first use)."""
        if self.found_newest is None:
            if self.groups is None:
                groups: CopyGroups = {}
                group_copies(groups, self.messages, self.scanner.long_results, self.key[0])
                self.groups = groups
            self.found_newest = resolve_copies(self.groups)
        return self.found_newest

    def prune(self, messages: Sequence[Mapping[str, Any]], i: int) -> tuple[Prune | None, int]:
        """The phase-1 rewrite of message `i` and its rough tokens (built once, then reused)."""
        found = self.resolved.get(i)
        if found is None:
            min_chars, args_over, leaf_keep = self.key
            prune = prune_one(
                messages, i, self.layout.call_of, self.newest, min_chars, args_over, leaf_keep
            )
            tokens = rough_message_tokens(prune.replacement) if prune is not None else 0
            found = self.resolved[i] = (prune, tokens)
        return found


def _key(config: CompressionConfig) -> tuple[int, int, int]:
    return (config.prune_min_chars, config.args_truncate_over, config.args_leaf_keep)


def _fresh(messages: Sequence[Mapping[str, Any]], key: tuple[int, int, int]) -> Scan:
    scanner = Scanner(key[0], key[1]).feed(messages)
    return Scan(key, list(messages), scanner, scanner.finish(messages))


def _extend(old: Scan, messages: Sequence[Mapping[str, Any]]) -> Scan:
    """`old` grown by the messages after its prefix; `old` itself is left as it was."""
    scanner = old.scanner.copy()
    seen_long = len(scanner.long_results)
    scanner.feed(messages)
    layout = scanner.finish(messages)
    if old.groups is None:  # never needed: group later, from scratch (nothing was built)
        return Scan(old.key, list(messages), scanner, layout)
    old_newest = old.newest
    groups = dict(old.groups)
    group_copies(groups, messages, scanner.long_results[seen_long:], old.key[0], shared=True)
    newest = resolve_copies(groups)
    # a rewrite depends on its message (the same object: a prefix), the config (the key),
    # the call it answers and its newer copy: keep those whose call and copy did not change
    resolved = dict(old.resolved) if scanner.redeclared == old.scanner.redeclared else {}
    if newest != old_newest:
        for i in old_newest.keys() | newest.keys():
            if old_newest.get(i) != newest.get(i):
                resolved.pop(i, None)
    return Scan(old.key, list(messages), scanner, layout, groups, newest, resolved)


def _prefix_of(known: list[Any], messages: Sequence[Any]) -> bool:
    return len(known) <= len(messages) and all(
        map(operator.is_, known, islice(messages, len(known)))
    )


class PlanCache:
    """The scans of the last few message lists planned (thread-safe, bounded)."""

    def __init__(self, size: int = 4) -> None:
        self._size = size
        self._scans: list[Scan] = []
        self._lock = threading.Lock()

    def scan(self, messages: Sequence[Mapping[str, Any]], config: CompressionConfig) -> Scan:
        """The scan of `messages`: reused, extended from a known prefix, or built."""
        key = _key(config)
        with self._lock:
            known = [s for s in self._scans if s.key == key]
        best = max(
            (s for s in known if _prefix_of(s.messages, messages)),
            key=lambda s: len(s.messages),
            default=None,
        )
        if best is not None and len(best.messages) == len(messages):
            found = best
        else:
            found = _fresh(messages, key) if best is None else _extend(best, messages)
        with self._lock:
            self._scans = [s for s in self._scans if s is not best and s is not found]
            self._scans.append(found)
            del self._scans[: -self._size]
        return found

    def clear(self) -> None:
        with self._lock:
            self._scans = []


def scan(
    messages: Sequence[Mapping[str, Any]], config: CompressionConfig, cache: PlanCache | None
) -> Scan:
    """The scan of `messages`, through `cache` when one is given."""
    if cache is None:
        return _fresh(messages, _key(config))
    return cache.scan(messages, config)
