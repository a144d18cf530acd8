"""Quoted ``sed`` expressions in text (``sed 's/old/new/g'``) and range addresses of
``sed`` and ``awk`` (``'/class Date/,/^class /p'``): their pieces (``s/``, ``Date/``) are
not paths, so fact extraction (:mod:`.factpaths`) masks them out first."""

from __future__ import annotations

import re
from bisect import bisect_left

from ctxledger.compressor.factscan import holds_any

__all__ = ["range_spans", "sed_spans"]

# a quoted ``sed 's/old/new/g'`` expression: its pieces (``s/``, ``v/``) are not paths.
# Its start (a quote, ``s``, a delimiter), then on the same line a delimiter, and a
# closing delimiter, flags and the same quote (:func:`sed_spans`)
_SED_START = re.compile(r"""(?<!\w)(['"])s([/|#,:@])""")
_SED_CLOSE = {
    (quote, delimiter): re.compile(re.escape(delimiter) + "[a-zA-Z0-9]*" + quote)
    for quote in "'\""
    for delimiter in "/|#,:@"
}


#: where a quoted range address of sed or awk starts: a quote, then ``/``
_RANGE_START = re.compile(r"""['"]/""")
#: what ends the first regex of a range address (a ``/``), or spoils it
_REGEX_END = re.compile(r"""[/\n'"]""")
#: what ends the rest of a range address (its quote), or spoils it
_QUOTE_END = re.compile(r"""[\n'"]""")
#: a program that reads range addresses, named as a command: after a blank, the line's
#: start, ``(``, a backquote, a quote, ``/`` (``/usr/bin/sed``) or a command's end, and
#: before no word character (``sed -n``, ``awk``; no ``config.sed``, ``x-sed``, ``used``)
_RANGE_TOOL = re.compile(r"(?<![^\s(`'\"/;|&])(?:sed|g?awk|perl)\b")
#: where a command ends: a range address is its own command's only
_COMMAND_END = re.compile(r"[;|&]")
#: how a range's second address starts: a regex, the last line, a count or a line
_SECOND_ADDRESS = frozenset("/$+0123456789")


def range_spans(text: str) -> list[tuple[int, int]]:
    """The spans of the quoted range addresses of `text` (``'/class Date/,/^class /p'``,
    ``'/^def run/,+20p'``, ``'/x/,$p'``): in a command of ``sed``, ``awk``, ``gawk`` or
    ``perl`` (named before it, with no ``;``, ``|`` or ``&`` between), a quote after no
    word character, ``/``, a regex with no ``/``, ``/,``, a second address (``/``, ``$``, ``+`` or a digit), then the rest to the same
    quote on the line (``"/data1/,/data2/hdfs"`` of a config is two paths). Each start
    reads to the next quote, ``/`` or line end at most, each line is looked at once for
    a program, and a start inside a span is skipped: linear."""
    spans: list[tuple[int, int]] = []
    if not holds_any(text, ("/,",)):
        return spans
    line_start, line_end = 0, -1
    tools: list[int] = []  # where the line's programs and commands' ends are
    ends: list[int] = []
    for start in _RANGE_START.finditer(text):
        at = start.start()
        if at > line_end:  # a new line: its start, end, programs and commands' ends
            line_start = text.rfind("\n", max(line_end, 0), at) + 1 or line_start
            line_end = text.find("\n", at)
            line_end = len(text) if line_end == -1 else line_end
            tools = [m.start() for m in _RANGE_TOOL.finditer(text, line_start, line_end)]
            ends = [m.start() for m in _COMMAND_END.finditer(text, line_start, line_end)]
        if (
            (spans and at < spans[-1][1])
            or not _tool_before(tools, ends, at)
            or (at and (text[at - 1].isalnum() or text[at - 1] == "_"))
        ):
            continue
        first = _REGEX_END.search(text, at + 2)
        if first is None or not (
            text.startswith("/,", first.start())
            and text[first.start() + 2 : first.start() + 3] in _SECOND_ADDRESS
        ):
            continue
        end = _QUOTE_END.search(text, first.start() + 3)
        if end is not None and text[end.start()] == text[at]:
            spans.append((at, end.end()))
    return spans


def _tool_before(tools: list[int], ends: list[int], at: int) -> bool:
    """Whether a program of `tools` stands before `at` in the command `at` is in (after
    the last of `ends` before it)."""
    tool = bisect_left(tools, at) - 1
    end = bisect_left(ends, at) - 1
    return tool >= 0 and (end < 0 or tools[tool] > ends[end])


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
