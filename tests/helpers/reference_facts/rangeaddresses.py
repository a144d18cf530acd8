"""Independent reference (session 33, moved out of ``factpaths`` in session 35): the
quoted range addresses of sed and awk, which name no path."""

from __future__ import annotations


def is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def range_addresses(text: str) -> list[tuple[int, int]]:
    """Session 33: quoted range addresses of sed and awk (``'/class Date/,/^class /p'``,
    ``'/x/,$p'``, ``'/x/,+20p'``): a line naming ``sed``, ``awk``, ``gawk`` or ``perl``
    as a word before it, a quote after no word character, ``/``, a regex without ``/`` or
    a quote, ``/,``, then ``/``, ``$``, ``+`` or a digit, then no quote to the same quote,
    all on one line."""
    spans: list[tuple[int, int]] = []
    at = 0
    while at < len(text):
        quote = text[at]
        if (
            quote not in "'\""
            or text[at + 1 : at + 2] != "/"
            or (at and is_word_char(text[at - 1]))
            or not _names_range_tool(text[text.rfind("\n", 0, at) + 1 : at])
        ):
            at += 1
            continue
        first = at + 2
        while first < len(text) and text[first] not in "/\n'\"":
            first += 1
        end = first + 3
        second = text[first + 2 : first + 3]
        if text[first : first + 2] == "/," and second and second in "/$+0123456789":
            while end < len(text) and text[end] not in "\n'\"":
                end += 1
            if text[end : end + 1] == quote:
                spans.append((at, end + 1))
                at = end + 1
                continue
        at += 1
    return spans


def _names_range_tool(line: str) -> bool:
    """Session 33 (review): whether the last command of `line` (after its last ``;``,
    ``|`` or ``&``) names sed, awk, gawk or perl as a command (the second review: after
    its start, a blank, ``(``, a backquote, a quote or ``/``; no word character after
    it)."""
    line = line[max(line.rfind(end) for end in ";|&") + 1 :]
    for word in ("sed", "awk", "gawk", "perl"):
        at = line.find(word)
        while at != -1:
            after = at + len(word)
            before_ok = at == 0 or line[at - 1].isspace() or line[at - 1] in "(`'\"/"
            if before_ok and (after == len(line) or not is_word_char(line[after])):
                return True
            at = line.find(word, at + 1)
    return False
