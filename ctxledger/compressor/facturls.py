"""URLs in a text, and a text with spans blanked out: what fact extraction masks before
it looks for paths (:mod:`.factpaths`; moved out of it in session 37, at 600 lines)."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["mask", "url_goes_on", "urls"]

_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*$")
_URL_TAIL = re.compile(r"://[^\s<>\"'`\])}|,]+")
_URL_STRIP = ".,;:!?)]}'\""
#: what goes on a URL's last name (an ASCII letter, digit or ``-.~%+``; ``_`` only
#: before more of them, so ``_`` closing an emphasis ends it), anchored where the URL
#: was read to, after the marks that may close a sentence (``.``, ``;``, ``!``…); not
#: ``/``, ``?``, ``#`` or ``:`` first (under it, its query, part or line: the path rule)
_URL_NAME = r"A-Za-z0-9\-.~%+"
_URL_GOES_ON = re.compile(r"(?![/?#:])[.;:!?]*+(?:[" + _URL_NAME + r"]|_++[" + _URL_NAME + r"])")


def mask(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """`text` with `spans` blanked out (same length, so positions stay valid)."""
    if not spans:
        return text
    n = len(text)
    if len(spans) < 8 or not all(0 <= start <= end <= n for start, end in spans):
        chars = list(text)
        for start, end in spans:
            chars[start:end] = " " * (end - start)
        return "".join(chars)
    # many spans (a long text): the union blanked between slices of `text`, no char list
    out: list[str] = []
    done = 0
    for start, end in sorted(spans):
        if end <= done:
            continue
        start = max(start, done)
        out.append(text[done:start])
        out.append(" " * (end - start))
        done = end
    out.append(text[done:])
    return "".join(out)


def urls(text: str) -> list[tuple[int, int, str]]:
    found: list[tuple[int, int, str]] = []
    for match in _URL_TAIL.finditer(text):
        start = match.start()
        while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "+.-"):
            start -= 1
        scheme = text[start : match.start()]
        value = text[start : match.end()].rstrip(_URL_STRIP)
        if len(scheme) < 2 or not _URL_SCHEME.match(scheme) or len(value) <= len(scheme) + 4:
            continue
        found.append((start, start + len(value), value))
    return found


def url_goes_on(text: str, end: int) -> bool:
    """Whether a URL read up to `end` in `text` goes on past it as more of its last
    name, so that a match ending there is another resource (session 46): ``…/a-old``,
    ``…/a.bak``, ``…/a_old``, ``…/a%20x`` go on; a blank, a quote, closing marks then no
    more of a name (``…/a.``, ``…/a).``), emphasis (``**…/a**``, ``…/a_``), any
    non-ASCII character (``…/a。``, ``「…/a」``, ``…/a—x``, a zero-width space) and ``/``,
    ``?``, ``#`` or ``:`` (under it, its query, part or line: a URL follows the path rule,
    session 40's decision) do not. Only the characters at `end` are read (one anchored
    match: no scan of the rest, so asking at each of many occurrences stays linear)."""
    return _URL_GOES_ON.match(text, end) is not None
