"""A session's API view handed out without a copy, copied by whoever writes to it first.

The transcript projection keeps each session's API view (system message + live
messages) current as it folds, and ``api_messages`` used to hand out a shallow copy:
after an append that copy touches every message object, cache-cold, and cost
several times a warm ``list()``. A :class:`SharedView` is that cached list itself,
handed to every reader; copy-on-write keeps the contract that the list is the
caller's:

* a reader that changes it (any list method that mutates) first gives the projection
  a copy of its own (``release``), then owns the list outright;
* the projection, before folding a new message into a view a reader may still hold,
  switches to a copy (:func:`writable`): a reader's list never changes under it;
* a view is shared with one reader at most: when an earlier reader still holds it,
  the next reader gets a copy (the cost every read paid before).

When nobody else holds the view (the common case: a reader sends the list and drops
it before the next append), it is extended in place and nothing is copied at all.

The message dicts stay the projection's, read-only, as before. Copies, pickles and
slices of a view are plain lists.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any, SupportsIndex

__all__ = ["SharedView", "writable"]

#: references to a view while :func:`writable` decides: the projection's dict entry,
#: its local and getrefcount's argument; None where refcounts are not exact (always copy)
_OWN_REFS: int | None = 3 if sys.implementation.name == "cpython" else None


class SharedView(list[Any]):
    """A list the projection may still be holding; it detaches on its first change."""

    __slots__ = ("__weakref__", "_release")

    def __init__(
        self, items: Iterable[Any] = (), release: Callable[[SharedView], None] | None = None
    ) -> None:
        super().__init__(items)
        self._release = release

    def _detach(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release(self)  # the projection takes a copy of the view as it is now

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        return (list, (list(self),))  # copies and pickles are plain lists

    def append(self, item: Any) -> None:
        self._detach()
        list.append(self, item)

    def extend(self, items: Iterable[Any]) -> None:
        self._detach()
        list.extend(self, items)

    def insert(self, index: SupportsIndex, item: Any) -> None:
        self._detach()
        list.insert(self, index, item)

    def pop(self, index: SupportsIndex = -1) -> Any:
        self._detach()
        return list.pop(self, index)

    def remove(self, item: Any) -> None:
        self._detach()
        list.remove(self, item)

    def clear(self) -> None:
        self._detach()
        list.clear(self)

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self._detach()
        list.sort(self, *args, **kwargs)

    def reverse(self) -> None:
        self._detach()
        list.reverse(self)

    def __setitem__(self, index: Any, value: Any) -> None:
        self._detach()
        list.__setitem__(self, index, value)

    def __delitem__(self, index: Any) -> None:
        self._detach()
        list.__delitem__(self, index)

    def __iadd__(self, items: Iterable[Any]) -> SharedView:  # type: ignore[misc]
        self._detach()
        list.extend(self, items)
        return self

    def __imul__(self, times: SupportsIndex) -> SharedView:
        self._detach()
        list.__imul__(self, times)
        return self


def held_elsewhere(refcount: int) -> bool:
    """Whether a view whose refcount (seen from :func:`writable`) is `refcount` has readers."""
    return _OWN_REFS is None or refcount > _OWN_REFS


def writable(
    views: dict[str, list[Any]], session_id: str, release: Callable[[SharedView], None]
) -> list[Any] | None:
    """The cached view of `session_id`, safe to change or hand out (None when not cached).

    A view a reader still holds is replaced by a copy first, so the reader's list stays
    as it was handed out and is never shared with a second reader. Change the result with ``list.append(view, ...)`` /
    ``list.__setitem__``, never its own methods (they would detach it).
    """
    view = views.get(session_id)
    if view is None:
        return None
    if held_elsewhere(sys.getrefcount(view)):
        view = views[session_id] = SharedView(view, release)
    return view
