"""Quoted ``sed`` expressions in text (``sed 's/old/new/g'``): their pieces (``s/``,
``v/``) are not paths, so fact extraction (:mod:`.factpaths`) masks them out first."""

from __future__ import annotations

import re

__all__ = ["sed_spans"]

# a quoted ``sed 's/old/new/g'`` expression: its pieces (``s/``, ``v/``) are not paths.
# Its start (a quote, ``s``, a delimiter), then on the same line a delimiter, and a
# closing delimiter, flags and the same quote (:func:`sed_spans`)
_SED_START = re.compile(r"""(?<!\w)(['"])s([/|#,:@])""")
_SED_CLOSE = {
    (quote, delimiter): re.compile(re.escape(delimiter) + "[a-zA-Z0-9]*" + quote)
    for quote in "'\""
    for delimiter in "/|#,:@"
}


def sed_spans(text: str) -> list[tuple[int, int]]:
    """The spans of the quoted sed expressions of `text`: from each start, to the first
    closing (a delimiter, flags, the quote) after the next delimiter on its line.

    What the regex ``(['"])s([/|#,:@])[^\\n]*?\\2[^\\n]*?\\2[a-zA-Z0-9]*\\1`` finds, without
    its cost: with no closing on the line, that regex tried every pair of delimiters
    after each start (``'s/`` and 16,000 ``x/`` took 3 s). A closing looked for in vain
    from a place is not looked for again from a later one on the same line.
    """
    spans: list[tuple[int, int]] = []
    pos, line_end = 0, -1
    no_closing: dict[tuple[str, str], int] = {}  # (quote, delimiter) -> none from here on
    while (start := _SED_START.search(text, pos)) is not None:
        at = start.start()
        if at > line_end:
            line_end = text.find("\n", at)
            line_end = len(text) if line_end < 0 else line_end
            no_closing.clear()
        key = (start.group(1), start.group(2))
        first = text.find(key[1], start.end(), line_end)
        if first >= 0 and first + 1 < no_closing.get(key, line_end + 1):
            closing = _SED_CLOSE[key].search(text, first + 1, line_end)
            if closing is not None:
                spans.append((at, closing.end()))
                pos = closing.end()
                continue
            no_closing[key] = first + 1
        pos = at + 1
    return spans
