"""Fenced blocks of markdown: what a user quotes between fence lines (backticks, tildes).

:mod:`.factnoise` reads no constraint a user states inside one (a PR's config, a log);
an RST title's ``~~~~~`` underline opens none (session 34). :mod:`.facts` reads no
quoted string inside one or inside an inline code span (:func:`code_spans`).
"""

from __future__ import annotations

import re

from ctxledger.compressor.factscan import holds_any

__all__ = ["code_spans", "fenced_blocks", "has_fence_marker", "needed_blocks", "reach"]

#: where a fenced block (``` or ~~~) opens: its fence opens its line (after any blanks:
#: a list item's block is indented) or ends a line of prose after a blank (``See
#: below. ```py``); a ``` inside a sentence (``answer with ``` fences``) opens none.
#: A ``` opening its line opens none when a backtick follows its run on that line
#: (CommonMark: a backtick fence's info string holds no backtick; `````foo``` is the
#: option`` is a line of prose with a code span), nor does one ending a line that closes
#: a code span of that line (Run ``` ls ```, review 1: :func:`_closes_a_span`).
#: The block runs to the end of a line its fence opens or to the end of one it ends (the
#: opening line's own rest too), the closing run at least as long as the opening one (a
#: ```` block quotes ``` lines), or to the text's end (:func:`_block_end`)
_FENCE_OPENER = re.compile(
    r"(?:^[ \t]*(?=`{3,}[^`\n]*$|~{3})|(?<=\S)[ \t]+(?=```[\w+-]*[ \t]*$))(`{3,}|~{3,})",
    re.MULTILINE,
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
#: (runs all of one short length) a run and the next on its line: a fixed pattern per
#: length (review 2: one compiled from the data's run held up to 16 MB in re's cache
#: per length; a backreference compares a run at each place inside one: session 34)
_PAIRS = {size: re.compile(rf"(?<!`){'`' * size}[^`\n]*+{'`' * size}") for size in (1, 2, 3)}
#: (review 1) a text this long is read line by line for a few lines (code_spans'
#: `holding`) or, dense with fences, by one search; a shorter one costs less read whole
_LONG = 4096


def code_spans(
    text: str, holding: str = "", blocks: list[tuple[int, int]] | None = None
) -> list[tuple[int, int]]:
    """The spans of `text` that are code (sorted, disjoint): its fenced blocks
    (:func:`fenced_blocks`, or `blocks` when the caller read them already, at least to
    :func:`reach`) and, outside them, its inline code spans: a run of
    backticks to the next run of the same length on its line (CommonMark's code span
    kept to one line: a stray backtick masks no prose below it; a ``` inside a
    sentence with no closing ``` masks nothing; a run after an odd number of ``\\``
    opens one with the rest of its run). With `holding` (characters), only what a match of those characters
    on one line can meet: blocks opened before the end of the last line holding one,
    inline spans of the lines holding one (review 1: the quoted-string mask of a dense text).

    Session 35: one reading for the quoted-string mask, before it ```.*?(?:```|$):
    ``~~~`` blocks were not masked, a ```` ```` ```` block ended at a ``` line inside it,
    and 1 MB of two backtick runs gave 166,000 spans. Each run is now matched once."""
    if "`" not in text and not holds_any(text, ("~~~",)):
        return []
    until = reach(text, holding) if holding else len(text)
    lines = _Marked(text, holding) if holding and until > _LONG else None
    if blocks is None:
        blocks = fenced_blocks(text, until) if has_fence_marker(text) else []
    spans: list[tuple[int, int]] = []
    done = 0
    for start, end in blocks:
        if start >= until:
            break
        spans += _inline(text, done, start) if lines is None else lines.inline(done, start)
        spans.append((start, end))
        done = end
    return spans + (_inline(text, done, until) if lines is None else lines.inline(done, until))


def needed_blocks(text: str, holding: str, until: int) -> list[tuple[int, int]]:
    """The fenced blocks both ``code_spans(text, holding)`` (none: `holding` empty) and a
    reader of `text` before `until` need, read once (review 2: the constraints and the
    quoted-string mask of a text each read them)."""
    if not has_fence_marker(text):
        return []
    until = max(reach(text, holding) if holding else 0, until)
    return fenced_blocks(text, until) if until > 0 else []


def has_fence_marker(text: str) -> bool:
    """Whether `text` holds a fence marker, three backticks or three tildes (each character
    looked for first: most long texts hold neither, and a search for the run reads them
    whole)."""
    return holds_any(text, ("```", "~~~"))


def reach(text: str, holding: str) -> int:
    """The end of the last line of `text` holding one of the characters `holding`
    (0: none); a match of them on one line ends there at the latest."""
    last = max(text.rfind(char) for char in holding)
    stop = text.find("\n", last) if last != -1 else 0
    return len(text) if stop == -1 else stop


class _Marked:
    """The inline code spans of the lines of a text that hold one of some characters;
    each character's next place found once per place passed (linear)."""

    def __init__(self, text: str, chars: str) -> None:
        self.text = text
        self.next = {char: text.find(char) for char in chars}

    def inline(self, start: int, end: int) -> list[tuple[int, int]]:
        text, spans = self.text, list[tuple[int, int]]()
        while True:
            for char, at in self.next.items():
                if 0 <= at < start:
                    self.next[char] = text.find(char, start)
            found = [at for at in self.next.values() if 0 <= at < end]
            if not found:
                return spans
            at = min(found)
            stop = text.find("\n", at, end)
            stop = end if stop == -1 else stop
            spans += _inline(text, max(start, text.rfind("\n", start, at) + 1), stop)
            start = stop + 1


def _inline(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The inline code spans of `text[start:end]`: left to right, each backtick run with
    the next run as long on its line (runs inside a span open none). A run after an odd
    number of ``\\`` opens as its rest (one shorter, one later: CommonMark; review 2)
    but closes whole. The next of each length is found in one pass from the right,
    forgotten where a newline parts two runs. Runs all of one length and no escaped
    one pair one after another: one search if short (review 1: 1 MB of them)."""
    sizes = set(_BACKTICKS.findall(text, start, end))
    pairs = _PAIRS.get(len(sizes.pop())) if len(sizes) == 1 else None
    if pairs is not None and text.find("\\`", start, end) == -1:
        return [span.span() for span in pairs.finditer(text, start, end)]
    runs = [run.span() for run in _BACKTICKS.finditer(text, start, end)]
    opens = [low + _escaped(text, low) for low, _ in runs]
    closer = [-1] * len(runs)
    after: dict[int, int] = {}
    following = end
    for at in range(len(runs) - 1, -1, -1):
        low, high = runs[at]
        if text.find("\n", high, following) != -1:
            after = {}
        closer[at] = after.get(high - opens[at], -1) if high > opens[at] else -1
        after[high - low] = at
        following = low
    spans: list[tuple[int, int]] = []
    at = 0
    while at < len(runs):
        if closer[at] == -1:
            at += 1
        else:
            spans.append((opens[at], runs[closer[at]][1]))
            at = closer[at] + 1
    return spans


def _escaped(text: str, at: int) -> bool:
    """Whether an odd number of ``\\`` comes right before `at`."""
    if at == 0 or text[at - 1] != "\\":
        return False
    first = at - 1
    while first > 0 and text[first - 1] == "\\":
        first -= 1
    return (at - first) % 2 == 1


def fenced_blocks(text: str, until: int | None = None) -> list[tuple[int, int]]:
    """The spans of the fenced blocks of `text` (:data:`_FENCE_OPENER`), but for a line
    of ``~`` that underlines an RST title no longer than it (``Setup`` then ``~~~~~``):
    no fence, or every later constraint of the text would read as quoted. With `until`,
    only the blocks opened before it (what a reader of the text before it needs).

    Each opener is found alone and an underline is skipped before the block is read
    (a block of ``~`` runs on to a run at least as long: matched for every underline of
    decreasing length, each would read to the text's end)."""
    spans: list[tuple[int, int]] = []
    openers = _Openers(text, len(text) if until is None else until)
    opener = openers.search(0)
    while opener is not None:
        start = opener.start(1)
        underline = _UNDERLINE.match(text, start)
        if underline is not None and _titled(text, start, underline.group().rstrip(" \t\r\n")):
            opener = openers.search(underline.end())
            continue
        if _closes_a_span(text, opener):
            opener = openers.search(opener.end(1))
            continue
        end = _block_end(text, opener.end(1), len(opener.group(1)), opener.group(1)[0])
        spans.append((opener.start(), end))
        opener = openers.search(end)
    return spans


def _closes_a_span(text: str, opener: re.Match[str]) -> bool:
    """Whether `opener`, a ``` ending a line of prose, closes an inline code span of
    that line (``Run ``` ls ```: one span, no block; review 1)."""
    start = opener.start()
    if start == 0 or text[start - 1] == "\n" or opener.group(1)[0] != "`":
        return False
    line = text.rfind("\n", 0, start) + 1
    return any(end == opener.end(1) for _, end in _inline(text, line, opener.end(1)))


class _Openers:
    """:data:`_FENCE_OPENER`'s first match at or after a position and before `until`,
    the pattern tried only on lines holding a ``` or ``~~~`` (session 35: tried at every
    character, it cost more than the rest of the quoted-string mask on ordinary texts)
    unless such lines are dense (review 1: then one search over the text costs less).
    Each marker's next place is found once per place passed: linear."""

    def __init__(self, text: str, until: int) -> None:
        self.text, self.until = text, until
        self.ticks, self.tildes = text.find("```"), text.find("~~~")
        self.dense = until > _LONG and (text.count("```") + text.count("~~~")) * 64 > until

    def search(self, pos: int) -> re.Match[str] | None:
        if self.dense:
            opener = _FENCE_OPENER.search(self.text, pos)
            return opener if opener is not None and opener.start() < self.until else None
        text = self.text
        while True:
            if 0 <= self.ticks < pos:
                self.ticks = text.find("```", pos)
            if 0 <= self.tildes < pos:
                self.tildes = text.find("~~~", pos)
            at = self.ticks if self.tildes == -1 or 0 <= self.ticks < self.tildes else self.tildes
            line = max(pos, text.rfind("\n", 0, at) + 1)
            if at == -1 or line >= self.until:
                return None
            stop = text.find("\n", at)
            stop = len(text) if stop == -1 else stop
            opener = _FENCE_OPENER.search(text, line, stop)
            if opener is not None:
                return opener if opener.start() < self.until else None
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
