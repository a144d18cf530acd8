"""Independent reference (moved out of ``factpaths`` in session 43): what is blanked
out of a text before paths are looked for in it, keeping every position (grep's
context separators, a tree's branches, the ``-`` joining a path to the next pytest
parameter id, sed and awk range addresses, the pieces of a quoted ``sed`` expression),
after the escapes of JSON strings are read."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ctxledger.compressor.factpathrules import EXTENSIONS, SECOND_SUFFIXES  # (lists, no rule)
from helpers.reference_facts.rangeaddresses import range_addresses
from helpers.reference_facts.rules import escape_after_dot, escape_letter_kept, unescape_lines

__all__ = ["SED_EXPRESSION", "mask", "path_text", "pytest_parameter_dashes", "tree_branches"]

_PATH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-+@~")


def mask(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """`text` with `spans` blanked out (same length, so positions stay valid)."""
    if not spans:
        return text
    chars = list(text)
    for start, end in spans:
        chars[start:end] = " " * (end - start)
    return "".join(chars)


# a quoted ``sed 's/old/new/g'`` expression: its pieces (``s/``, ``v/``) are not paths
SED_EXPRESSION = re.compile(r"""(?<!\w)(['"])s([/|#,:@])[^\n]*?\2[^\n]*?\2[a-zA-Z0-9]*\1""")


#: session 32: a known extension and its second suffixes ending a name (case as written)
_ENDS_WITH_EXT = re.compile(rf"\.(?:{EXTENSIONS})(?:\.(?:{SECOND_SUFFIXES}))*$")
_GREP_NAME_CHARS = _PATH_CHARS | {"/"}


def _grep_separator(line: str) -> tuple[str, str, int, int] | None:
    """Session 32: a line's grep separator after the file name that starts it: (the name,
    ``:`` or ``-``, where the separator starts, where it ends), the first place in the
    line's leading name where a name with a known extension is followed by ``:`` or
    ``-``; a ``-`` takes a line number and ``-`` after it when one follows (no date's
    year: ``-2024-05-20``)."""
    token = 0
    while token < len(line) and line[token] in _GREP_NAME_CHARS:
        token += 1
    for at in range(1, token + 1):
        if at == len(line) or line[at] not in ":-" or not _ENDS_WITH_EXT.search(line[:at]):
            continue
        if line[:at].startswith(".") and _ENDS_WITH_EXT.match(line[:at]):
            return None  # (``.py-`` alone)
        end = at + 1
        digits = end
        while digits < len(line) and line[digits].isdigit():
            digits += 1
        date = re.match(r"\d\d-\d", line[digits + 1 : digits + 5])
        if line[at] == "-" and digits > end and line[digits : digits + 1] == "-" and not date:
            end = digits + 1
        return line[:at], line[at], at, end
    return None


def _grep_context(text: str) -> list[tuple[int, int]]:
    """Session 32: the separators of grep's context lines: numbered ones, and ``-`` after
    a name some line of the text starts as a match line (``name:``)."""
    offset, found, matched = 0, [], set()
    for line in text.split("\n"):
        got = _grep_separator(line)
        if got is not None:
            name, sep, at, end = got
            if sep == ":":
                matched.add(name)
            else:
                found.append((name, offset + at, offset + end, end > at + 1))
        offset += len(line) + 1
    return [(at, end) for name, at, end, numbered in found if numbered or name in matched]


def path_text(text: str) -> str:
    blanked = escape_letter_kept(text, unescape_lines(text))  # session 38: ``\\nx：/tmp``
    text = escape_after_dot(text, blanked)  # session 31: ``"docs\\nsetup.py\\n"``
    text = mask(text, _grep_context(text))
    text = mask(text, tree_branches(text))  # session 34
    text = mask(text, pytest_parameter_dashes(text))  # session 43
    text = mask(text, range_addresses(text))  # session 33
    return mask(text, [m.span() for m in SED_EXPRESSION.finditer(text)]) if "s" in text else text


def tree_branches(text: str) -> list[tuple[int, int]]:
    """Session 34: a tree's branches glued to a name, each from its line's start: blanks
    and ``|``, then a ``|`` (the last of them) or a backquote or ``+``, then two dashes or
    more, then a letter, digit, ``_`` or ``.``. Session 45: a line starts after a newline
    or a NUL (the matcher's JOIN between two texts)."""
    spans: list[tuple[int, int]] = []
    for offset, line in _lines(text):
        blanks = 0
        while blanks < len(line) and line[blanks] in " \t|":
            blanks += 1
        if line[blanks : blanks + 1] in ("`", "+"):
            dashes = blanks + 1
        else:
            dashes = blanks if blanks and line[blanks - 1] == "|" else -1
        end = dashes
        while dashes != -1 and end < len(line) and line[end] == "-":
            end += 1
        after = line[end : end + 1]
        if (
            dashes != -1
            and end - dashes >= 2
            and after != ""
            and (after.isalnum() or after in "_.")
        ):
            spans.append((offset, offset + end))
    return spans


def pytest_parameter_dashes(text: str) -> list[tuple[int, int]]:
    """Session 43: in a pytest node id's parameter brackets (a ``.py`` file, then
    ``::`` and a name one or more times, then ``[``, no bracket, blank or NUL, then ``]``),
    each ``-`` right after a name ending with a known extension (and second suffixes),
    the name's last character before the dot a letter, digit, ``_``, ``+``, ``@`` or
    ``~``, when what follows the ``-`` is no blank and no ``]``, and a ``/`` stands
    between the bracket (or the last such ``-``) and it. Session 44: before those, the
    bracket's first name and its ``/`` when that name holds a ``-`` (a parameter glued
    on or a folder's own ``-``: pytest writes both alike, so the path starts after it).
    Session 45: likewise a parameter up to the ``/`` after a ``-`` that follows a known
    extension (``a/b.sql-utf-8-data/`` in ``[a/b.sql-utf-8-data/c.sql]``). All in the
    order they stand."""
    spans: list[tuple[int, int]] = []
    for line_start, line in _lines(text):
        at = line.find("[")
        while at != -1:
            close = line.find("]", at)
            inside = line[at + 1 : close] if close != -1 else ""
            named = close != -1 and (_node_before(line[:at]) or _case_line(line, at, close))
            if named and _one_id(inside) and "/" in inside:
                cuts = _dashes(inside)
                found = _glued_parameters(inside, cuts) + [(d, d + 1) for d in cuts]
                spans.extend(
                    (line_start + at + 1 + a, line_start + at + 1 + b) for a, b in sorted(found)
                )
            at = line.find("[", at + 1)
    return spans


def _glued_parameters(inside: str, cuts: list[int]) -> list[tuple[int, int]]:
    """Session 45: per parameter (`inside` cut at `cuts`), what is blanked from its
    start: up to the ``/`` after the bracket's first name when it holds a ``-``
    (session 44), and after each ``-`` following a known extension with a ``/`` after
    it (a file then a parameter, or a folder's name: both readings share only what
    follows; session 46: anywhere after it, ``[x/a.sql-b.sql-c/d.sql]`` may be the folder
    ``a.sql-b.sql-c``), each with the empty, ``.`` and ``..`` names after it."""
    candidates = [d for d in range(len(inside)) if _after_extension(inside, d)]
    glued = [d for d in candidates if "/" in inside[d + 1 :]]
    if "-" in inside.split("/")[0]:
        glued.insert(0, 0)
    found = []
    for first, stop in zip([0] + [c + 1 for c in cuts], [*cuts, len(inside)], strict=True):
        ends = [d + _blanked(inside[d:].split("/")) for d in glued if first <= d < stop]
        if ends:
            found.append((first, max(ends)))
    return found


def _blanked(names: list[str]) -> int:
    """How many characters of a bracket split at ``/`` are blanked: the first name, then
    each name that is empty, ``.`` or ``..`` (and not the last), each with its ``/``."""
    count = len(names[0]) + 1
    for name in names[1:-1]:
        if name not in ("", ".", ".."):
            break
        count += len(name) + 1
    return count


def _one_id(inside: str) -> bool:
    """Whether `inside` can be a bracket's parameter ids: no bracket, no blank of any
    kind (pytest writes none; prose is no id) and no NUL (it joins two texts)."""
    return not any(c in "[]\x00" or c.isspace() for c in inside)


#: where a line ends (compiled once: no pattern is compiled while a text is read)
_LINE_ENDS = re.compile("[\n\x00]")


def _lines(text: str) -> list[tuple[int, str]]:
    """Each line of `text` and where it starts: a line ends at a newline or a NUL (the
    matcher's JOIN between two texts), session 45."""
    out, offset = [], 0
    for line in _LINE_ENDS.split(text):
        out.append((offset, line))
        offset += len(line) + 1
    return out


def _node_before(head: str) -> bool:
    """Whether `head` ends with ``.py`` and ``::name`` once or more (a name: letters,
    digits and ``_``)."""
    parts = head.split("::")
    at = len(parts) - 1
    while at >= 1 and _is_name(parts[at]):
        if parts[at - 1].endswith(".py"):
            return True
        at -= 1
    return False


def _case_line(line: str, at: int, close: int) -> bool:
    """Session 45: whether the bracket ``line[at:close + 1]`` names a case in a line of
    its own without its file: a failure's or error's header (underscores, a blank, maybe
    ``ERROR at setup of `` or ``ERROR at teardown of ``, names joined by ``.``, the
    bracket, a blank, underscores) or ``--collect-only``'s ``<Function name[…]>``; one
    ``\r`` may end the line."""
    head, tail = line[:at], line[close + 1 :].removesuffix("\r")
    if tail == ">":
        name = head.lstrip(" ").removeprefix("<Function ")
        return head.lstrip(" ").startswith("<Function ") and _is_name(name)
    if not (tail[:1] == " " and tail[1:] and set(tail[1:]) == {"_"}):
        return False
    title = head.lstrip("_")
    if title == head or not title.startswith(" "):
        return False
    title = title[1:]
    for prefix in ("ERROR at setup of ", "ERROR at teardown of "):
        if title.startswith(prefix):
            title = title[len(prefix) :]
            break
    return all(_is_name(name) for name in title.split("."))


def _is_name(name: str) -> bool:
    return name != "" and all(c.isalnum() or c == "_" for c in name)


def _dashes(inside: str) -> list[int]:
    """Where a ``-`` after a known extension starts the next parameter in `inside`: not
    where a ``/`` follows anywhere after it (a folder's name may go on,
    ``three.js-master/``, ``a.sql-b.sql-c/``), and only after a ``/`` since the last
    separator."""
    candidates = [d for d in range(len(inside)) if _after_extension(inside, d)]
    found, since = [], 0
    for d in candidates:
        if "/" in inside[d + 1 :]:  # (session 46: anywhere after it, see _glued_parameters)
            continue
        if "/" in inside[since:d]:  # (a bare name's start is not written: left whole)
            found.append(d)
        since = d + 1
    return found


def _after_extension(inside: str, d: int) -> bool:
    """Whether ``inside[d]`` is a ``-`` after a name ending with a known extension, the
    name's character before the dot a letter, digit, ``_``, ``+``, ``@`` or ``~``, and
    something but a blank after it."""
    after = inside[d + 1 : d + 2]
    if inside[d] != "-" or after == "" or after.isspace():
        return False
    ext = _ENDS_WITH_EXT.search(inside[:d])
    if ext is None or ext.start() == 0:
        return False
    before = inside[ext.start() - 1]
    return before.isalnum() or before in "_+@~"
