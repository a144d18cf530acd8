"""How a text states a range of lines the extraction words its own way (``lines 12-20``).

The extraction makes the fact ``lines 12-20`` of ``Line 12-20``, ``lines 12 to 20`` or
``lines 12 – 20``; the matcher (:mod:`.factmatch`) keeps it when a text names the
same lines in any of those words (:func:`states_lines`). Moved out of
:mod:`.factbounds` (session 40) to make room there.
"""

from __future__ import annotations

import functools
import re

__all__ = ["states_lines"]


def states_lines(haystack: str, first: str, last: str) -> bool:
    """Whether `haystack` names the lines `first` to `last` as the extraction reads them
    (``lines 12-20`` of ``Line 12-20``, ``lines 12 to 20``, ``lines 12 – 20``)."""
    return _lines_pattern(first, last).search(haystack) is not None


@functools.lru_cache(maxsize=1024)
def _lines_pattern(first: str, last: str) -> re.Pattern[str]:
    # "line" first, so the engine finds candidates by it; the rest as extraction reads it
    return re.compile(f"line(?<!\\wline)s? {first}\\s*(?:-|\u2013|to)\\s*{last}(?![0-9]|[.,][0-9])")
