"""Fenced blocks of markdown: what a user quotes between fence lines (backticks, tildes).

:mod:`.factnoise` reads no constraint a user states inside one (a PR's config, a log);
an RST title's ``~~~~~`` underline opens none (session 34). :mod:`.facts` reads no
quoted string inside one or inside an inline code span (:func:`code_spans`).
"""

from __future__ import annotations

import re

__all__ = ["code_spans", "fenced_blocks"]

#: where a fenced block (``` or ~~~) opens: its fence opens its line (after any blanks:
#: a list item's block is indented) or ends a line of prose after a blank (``See
#: below. ```py``); a ``` inside a sentence (``answer with ``` fences``) opens none.
#: The block runs to the end of a line its fence opens or to the end of one it ends (the
#: opening line's own rest too), the closing run at least as long as the opening one (a
#: ```` block quotes ``` lines), or to the text's end (:func:`_block_end`)
_FENCE_OPENER = re.compile(
    r"(?:^[ \t]*|(?<=\S)[ \t]+(?=```[\w+-]*[ \t]*$))(`{3,}|~{3,})", re.MULTILINE
)
#: per fence character, each whole run that may close a block: one opening its line
#: (``a``: the block ends with that line) or one ending its line (``b``); each run is
#: read once and its length compared in Python (review 2: a pattern matching the
#: opening run again by a backreference compared up to its length at every position
#: inside a run, 1 MB of two runs took 32 s)
_CLOSERS = {
    char: re.compile(rf"^[ \t]*(?P<a>{char}+)|(?<!{char})(?P<b>{char}+)[ \t]*$", re.MULTILINE)
    for char in ("`", "~")
}
#: an RST title's underline: ``~`` from the line's first column to its end (blanks after)
_UNDERLINE = re.compile(r"~{3,}[ \t\r]*(?:\n|\Z)")
#: a whole run of backticks: an inline code span opens and closes with one
_BACKTICKS = re.compile(r"`+")


def code_spans(text: str) -> list[tuple[int, int]]:
    """The spans of `text` that are code (sorted, disjoint): its fenced blocks
    (:func:`fenced_blocks`) and, outside them, its inline code spans: a run of
    backticks to the next run of the same length on its line (CommonMark's code span
    kept to one line: a stray backtick masks no prose below it; a ``` inside a
    sentence with no closing ``` masks nothing).

    Session 35: one reading for the quoted-string mask, before it ```.*?(?:```|$):
    ``~~~`` blocks were not masked, a ```` ```` ```` block ended at a ``` line inside it,
    and 1 MB of two backtick runs gave 166,000 spans. Each run is now matched once."""
    if "`" not in text and "~~~" not in text:
        return []
    spans: list[tuple[int, int]] = []
    done = 0
    for start, end in fenced_blocks(text) if "```" in text or "~~~" in text else ():
        spans += _inline(text, done, start)
        spans.append((start, end))
        done = end
    return spans + _inline(text, done, len(text))


def _inline(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The inline code spans of `text[start:end]`: left to right, each backtick run with
    the next run as long on its line (runs inside a span open none). The next of each
    length is found in one pass from the right, forgotten where a newline parts two runs."""
    runs = [run.span() for run in _BACKTICKS.finditer(text, start, end)]
    closer = [-1] * len(runs)
    after: dict[int, int] = {}
    following = end
    for at in range(len(runs) - 1, -1, -1):
        low, high = runs[at]
        if text.find("\n", high, following) != -1:
            after = {}
        closer[at] = after.get(high - low, -1)
        after[high - low] = at
        following = low
    spans: list[tuple[int, int]] = []
    at = 0
    while at < len(runs):
        if closer[at] == -1:
            at += 1
        else:
            spans.append((runs[at][0], runs[closer[at]][1]))
            at = closer[at] + 1
    return spans


def fenced_blocks(text: str) -> list[tuple[int, int]]:
    """The spans of the fenced blocks of `text` (:data:`_FENCE_OPENER`), but for a line
    of ``~`` that underlines an RST title no longer than it (``Setup`` then ``~~~~~``):
    no fence, or every later constraint of the text would read as quoted.

    Each opener is found alone and an underline is skipped before the block is read
    (a block of ``~`` runs on to a run at least as long: matched for every underline of
    decreasing length, each would read to the text's end)."""
    spans: list[tuple[int, int]] = []
    openers = _Openers(text)
    opener = openers.search(0)
    while opener is not None:
        start = opener.start(1)
        underline = _UNDERLINE.match(text, start)
        if underline is not None and _titled(text, start, underline.group().rstrip(" \t\r\n")):
            opener = openers.search(underline.end())
            continue
        end = _block_end(text, opener.end(1), len(opener.group(1)), opener.group(1)[0])
        spans.append((opener.start(), end))
        opener = openers.search(end)
    return spans


class _Openers:
    """:data:`_FENCE_OPENER`'s first match at or after a position, the pattern tried
    only on lines holding a ``` or ``~~~`` (session 35: tried at every character, it
    cost more than the rest of the quoted-string mask on ordinary texts). Each
    marker's next place is found once per place passed: linear."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.ticks, self.tildes = text.find("```"), text.find("~~~")

    def search(self, pos: int) -> re.Match[str] | None:
        text = self.text
        while True:
            if 0 <= self.ticks < pos:
                self.ticks = text.find("```", pos)
            if 0 <= self.tildes < pos:
                self.tildes = text.find("~~~", pos)
            at = self.ticks if self.tildes == -1 or 0 <= self.ticks < self.tildes else self.tildes
            if at == -1:
                return None
            stop = text.find("\n", at)
            stop = len(text) if stop == -1 else stop
            opener = _FENCE_OPENER.search(text, max(pos, text.rfind("\n", 0, at) + 1), stop)
            if opener is not None:
                return opener
            pos = stop + 1


def _block_end(text: str, after: int, length: int, char: str) -> int:
    """Where the block whose opening run of `length` `char`s ends at `after` ends: the
    first run of :data:`_CLOSERS` at least as long closes it, else the text's end."""
    for run in _CLOSERS[char].finditer(text, after):
        if len(run.group(run.lastgroup or "b")) >= length:
            if run.lastgroup == "a":
                stop = text.find("\n", run.end())
                return len(text) if stop == -1 else stop
            return run.end()
    return len(text)


def _titled(text: str, start: int, run: str) -> bool:
    """Whether the line before `start` (its first column) is a title that `run`
    underlines: no longer than the run (blanks and a carriage return at its end not
    counted), a letter or digit in it, no fence's or rule's line, no label ending in
    ``:``, and the text's first line or one after a blank line (an RST section's).
    Each line is read back at most twice, as one of the two lines before one other."""
    if start == 0 or text[start - 1] != "\n":
        return False
    title = text.rfind("\n", 0, start - 1) + 1
    body = text[title : start - 1].rstrip(" \t\r")
    if (
        len(body) > len(run)
        or not any(char.isalnum() for char in body)
        or body.endswith(":")
        or body.lstrip(" \t").startswith(("```", "~~~"))
    ):
        return False
    if title == 0:
        return True
    before = text[text.rfind("\n", 0, title - 1) + 1 : title - 1]
    return before.strip(" \t\r") == ""
