"""Numbered lines and fenced blocks, stated plainly (reference, session 33's review).

* **numbered** — a listing's line number at a line's start (``1463:``, ``28-``): blanks,
  digits, then ``:`` or ``-`` with no digit after it;
* **a listing's line** — numbered, then three blanks, or at most two blanks and a tab
  with another blank or tab before or after it (source's indent), or code; any other
  numbered line is a user's list item (``1- Never push to main.``, ``100: Never``,
  ``1:Never``, ``2-  You must``, ``1:<TAB>Never``); and (session 34) a line of
  ``cat -n`` or ``nl``: a number right-aligned in six columns, then a tab; and (its
  review) a numbered line whose rest starts with a comment: ``//``, ``/*``, ``--`` and a
  blank (code);
* **a listed name** — numbered, then an exception's name alone (maybe with a ``,`` or
  ``)`` and blanks after it) or ``Raise``/``Raises``, blanks and an upper-case letter;
* **a version** in a shell error line's program place (``3.0: …``), no IPv4 address;
* **fenced blocks** — from a line opening (after any blanks) with three or more ``` ` ```
  or ``~``, or a line of prose ending in blanks, ``````` and an info word, to the end of the
  next line its fence (the whole run: a ```` block quotes ``` lines) opens or ends (an
  unclosed one to the text's end); a line of ``~`` under a title no longer than it is
  the title's underline (RST), no fence: a title holds a letter or digit, is no label
  (``Do:``) and no fence's line, and follows a blank line or starts the text;
* **code spans** (session 35, what quoted strings are not read in) — the fenced blocks, and
  on each line outside them, each run of backticks with the next run of exactly as many
  backticks on that line (a run a span holds opens none, nor one after an odd number of
  backslashes: review 1). Review 1: a ``` opening a line with a backtick after its run
  on that line opens no block, nor does one ending a line of prose that closes a span.
"""

from __future__ import annotations

from helpers.reference_facts.factlines import code

__all__ = ["cat_numbered", "fenced", "listed_name", "numbered", "numbered_listing", "version"]


def _number_end(line: str) -> int:
    """Where the rest of a numbered `line` starts (after its separator), or -1."""
    at = len(line) - len(line.lstrip())
    digits = at
    while digits < len(line) and line[digits].isdecimal():
        digits += 1
    after = line[digits + 1 : digits + 2]
    if digits > at and line[digits : digits + 1] in (":", "-") and not after.isdecimal():
        return digits + 1
    return -1


def numbered(line: str) -> bool:
    """Whether `line` starts with a listing's line number."""
    return _number_end(line) != -1


def numbered_listing(sentence: str, raw: str) -> bool:
    """Whether `sentence` is numbered and no user's list item; its blanks are read in
    `raw`, the first 200 characters of its text as written."""
    if cat_numbered(raw):
        return True
    rest = _number_end(sentence)
    if rest == -1:
        return False
    written = _number_end(raw)
    run = raw[written:] if written != -1 else ""
    spaces = len(run) - len(run.lstrip(" "))
    # (session 34: one tab alone after the number is a user's list, ``1:<TAB>Never``)
    tabbed = run[spaces : spaces + 1] == "\t" and (spaces > 0 or run[1:2] in (" ", "\t"))
    indented = written != -1 and (spaces >= 3 or tabbed)
    # (its review: a comment of C, Go or SQL, ``12:<TAB>// Never call this``, is code;
    # review 2: only after a lone tab, ``1: -- Never push`` is a user's item)
    lone_tab = run[:1] == "\t" and run[1:2] not in (" ", "\t")
    comment = lone_tab and run[1:].startswith(("//", "/*", "-- ", "--\t"))
    return indented or code(sentence[rest:]) or comment


def cat_numbered(raw: str) -> bool:
    """Session 34: whether `raw` (a sentence's text as written) starts as a line of
    ``cat -n`` or ``nl`` does: six columns of blanks then digits, then a tab."""
    column = raw[:6]
    digits = column.lstrip(" ")
    return raw[6:7] == "\t" and digits.isdecimal()


def listed_name(line: str) -> bool:
    """Whether `line` is numbered, then names an exception alone or as ``Raises X``."""
    rest = _number_end(line)
    if rest == -1:
        return False
    body = line[rest:].lstrip()
    if body.startswith("Raise"):
        after = body[6:] if body[5:6] == "s" else body[5:]
        letter = after.lstrip(" \t")[:1]
        if len(after.lstrip(" \t")) < len(after) and letter.isascii() and letter.isupper():
            return True
    name = body.rstrip(" \t\r")
    name = name[:-1] if name.endswith((",", ")")) else name
    name = name.rstrip(" \t")
    parts = name.split(".")
    last = parts[-1]
    return (
        all(
            _word(part) and ((part[0].isascii() and part[0].isalpha()) or part[0] == "_")
            for part in parts[:-1]
        )
        and _word(last)
        and last[0].isascii()
        and last[0].isupper()
        and any(last.endswith(tail) and len(last) > len(tail) for tail in ("Error", "Exception"))
    )


def _word(part: str) -> bool:
    return part != "" and all(c.isalnum() or c == "_" for c in part)


def fenced(text: str) -> list[tuple[int, int]]:
    """The fenced blocks of `text`, each from its opening fence's line start (or the
    blanks before a ``` ending a line of prose) to the end of its closing line (without
    its newline), the last one unclosed to the text's end."""
    blocks: list[tuple[int, int]] = []
    opened, fence, start, previous, blank_before = -1, "", 0, "", True
    while start <= len(text):
        stop = text.find("\n", start)
        stop = len(text) if stop == -1 else stop
        line = text[start:stop]
        if opened != -1:
            if line.lstrip(" \t").startswith(fence) or line.rstrip(" \t").endswith(fence):
                blocks.append((opened, stop))
                opened = -1
        elif _underline(line, previous) and blank_before:
            pass  # (session 34: an RST title's ``~~~~~``, no fence)
        elif line.lstrip(" \t")[:3] == "~~~" or _tick_fence(line.lstrip(" \t")):
            body = line.lstrip(" \t")
            fence = body[: len(body) - len(body.lstrip(body[0]))]
            opened = start
            if body[len(fence) :].rstrip(" \t").endswith(fence):
                blocks.append((opened, stop))
                opened = -1
        else:
            at = _prose_fence(line)
            if at != -1 and not _ends_a_span(line):
                opened, fence = start + at, "```"
        blank_before = start == 0 or previous.strip(" \t\r") == ""
        previous = line
        start = stop + 1
    if opened != -1:
        blocks.append((opened, len(text)))
    return blocks


def code_spans(text: str) -> list[tuple[int, int]]:
    """The fenced blocks of `text` and its code spans outside them, in order."""
    blocks = fenced(text)
    spans = list(blocks)
    start = 0
    for line in text.split("\n"):
        runs = [
            (at, end)
            for at, end in _runs(line)
            if not any(low <= start + at < high for low, high in blocks)
        ]
        spans += [(start + at, start + end) for at, end in _paired(line, runs)]
        start += len(line) + 1
    return sorted(spans)


def _tick_fence(body: str) -> bool:
    """Review 1: whether `body` (a line from its first non-blank) opens with a fence of
    backticks: three or more, and no backtick later on the line (CommonMark's info
    string holds none: ````foo``` is set`` is prose)."""
    fence = len(body) - len(body.lstrip("`"))
    return fence >= 3 and "`" not in body[fence:]


def _ends_a_span(line: str) -> bool:
    """Review 1: whether the last run of backticks of `line` closes a code span of it."""
    runs = _runs(line)
    return any(runs and end == runs[-1][1] for _, end in _paired(line, runs))


def _paired(line: str, runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The code spans of `line` from its `runs`: each run, left to right, with the next
    run of exactly its length. After an odd number of backslashes the first backtick
    is literal: the rest of the run (if any) opens, and must meet a run of its length
    (review 2); any run closes whole (no escapes inside code)."""
    spans: list[tuple[int, int]] = []
    first = 0
    while first < len(runs):
        slashes = len(line[: runs[first][0]]) - len(line[: runs[first][0]].rstrip("\\"))
        opener = runs[first][0] + slashes % 2
        size = runs[first][1] - opener
        same = [n for n in range(first + 1, len(runs)) if runs[n][1] - runs[n][0] == size]
        if same and size > 0:
            spans.append((opener, runs[same[0]][1]))
            first = same[0] + 1
        else:
            first += 1
    return spans


def _runs(line: str) -> list[tuple[int, int]]:
    """The runs of backticks of `line`, each whole."""
    runs: list[tuple[int, int]] = []
    for at, char in enumerate(line):
        if char != "`":
            continue
        if runs and runs[-1][1] == at:
            runs[-1] = (runs[-1][0], at + 1)
        else:
            runs.append((at, at + 1))
    return runs


def _underline(line: str, previous: str) -> bool:
    """Session 34: whether `line` underlines `previous` as an RST title does: three or
    more ``~`` from its first column and blanks, under a line no longer than the run
    that holds a letter or a digit, does not end in ``:`` (a label: ``Do:``) and opens
    no fence (its review: a fence's line or a rule is no title). (The caller checks
    that a blank line or the text's start comes before the title.)"""
    run = line.rstrip(" \t\r")
    title = previous.rstrip(" \t\r")
    tildes = len(run) >= 3 and run == "~" * len(run)
    worded = any(char.isalnum() for char in title) and not title.endswith(":")
    fence = title.lstrip(" \t")[:3] in ("```", "~~~")
    return tildes and worded and not fence and len(title) <= len(run)


def _prose_fence(line: str) -> int:
    """Where the blanks before a ``` ending `line` after a word start (the ``` followed by
    word characters, ``+`` or ``-`` only), or -1."""
    end = len(line.rstrip(" \t"))
    while end > 0 and (line[end - 1].isalnum() or line[end - 1] in "_+-"):
        end -= 1
    if line[end - 3 : end] != "```" or end < 4 or line[end - 4] not in " \t":
        return -1
    blank = end - 4
    while blank > 0 and line[blank - 1] in " \t":
        blank -= 1
    return blank if blank > 0 and not line[blank - 1].isspace() else -1


def version(prefix: str, tail: str = "") -> bool:
    """Session 33: whether a program's place holds a version: dotted numbers (``3.0``),
    maybe a blank and a number after them; four of at most 3 digits alone are an IPv4
    address when `tail` (after the ``:``) is a program's name and ``:`` (``bash: …``) or a
    remote shell's error (second review: ``2.7.18.1: DateTime …`` is a version)."""
    dotted = prefix.split(" ")
    parts = dotted[0].split(".")
    output = tail.lstrip(" \t")
    name = 1  # (session 34: a program's name and its ``:``; a word alone is a changelog's)
    while name < len(output) and (output[name].isalnum() or output[name] in "_.-"):
        name += 1
    hosted = output[:1] in "abcdefghijklmnopqrstuvwxyz" and output[name : name + 1] == ":"
    hosted = hosted or output.startswith(
        ("Permission denied", "Connection ", "No route to host", "Host key", "Could not")
    )
    address = (
        len(dotted) == 1 and len(parts) == 4 and all(len(part) <= 3 for part in parts) and hosted
    )
    return (
        not address  # (review: ``10.0.0.5: Permission denied``, a host's name of pdsh)
        and len(dotted) <= 2
        and len(parts) > 1
        and all(part.isascii() and part.isdigit() for part in parts)
        and (len(dotted) == 1 or (dotted[1].isdecimal()))
    )
