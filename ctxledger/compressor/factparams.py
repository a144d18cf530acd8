"""pytest's parameter ids: a ``-`` after a file's name there joins the next parameter.

A test run names each case by its node id, the parameters' ids joined with ``-`` in
brackets (``tests/x.py::test_read[data/utf-8.sql-autodetect-False]``). Elsewhere a
``-`` and more of a name after a known extension is one longer name (``app.py-old``, a
backup), but inside those brackets it starts the next parameter: the path there is
``data/utf-8.sql``. Only a path with a folder is cut there: a ``-`` joins parameters
before it too, so a bare name's start is not written (``[L031-aliases.sql-v2]``).
For the same reason a path's first name holding a ``-`` may be a parameter glued on
or a folder's name (``[utf-8-data/a.sql]``): the path is stated from its second name
on, the part both readings share; and a ``-`` after a file's name followed by a ``/``
(``[a/b.sql-utf-8-data/c.sql]``: the file ``a/b.sql`` then a parameter, or a folder
``b.sql-utf-8-data``) states the path after that ``/`` only. The same brackets are
read in a failure's header line and in ``<Function …>`` (pytest writes the case there
without its file). :func:`parameter_spans` gives those separators and blanked names;
path finding blanks them (same length), and the matcher reads the brackets with the
separators blanked too (:func:`parameter_ids`), so a path written as a parameter is
found and stated alike.
"""

from __future__ import annotations

import re

from ctxledger.compressor.factpathrules import EXTENSIONS, SECOND_SUFFIXES

__all__ = ["parameter_ids", "parameter_spans"]

#: a bracket's parameter ids (one group): pytest writes no bracket, blank or NUL there
#: (a NUL joins two texts, which one bracket does not span)
_IDS = r"\[([^\[\]\s\x00]*+)\]"
#: a node id's test (after a ``.py`` file and ``::``, maybe a class's ``::``) and its
#: parameter ids in brackets (group 1)
_NODE_PARAMETERS = re.compile(rf"\.py(?:::\w+)+{_IDS}")
#: the same brackets where pytest writes a case without its file (session 45): a
#: failure's or error's header line (``____ test_read[a/b.sql-1] ____``, ``____ ERROR at
#: setup of TestX.test_read[a/b.sql-1] ____``), and ``--collect-only``'s
#: ``<Function test_read[a/b.sql-1]>``, each a whole line, maybe with a ``\r`` before its
#: end. A line starts and ends at a newline or a JOIN (a NUL, as :mod:`.factgrep` reads
#: lines), so a text's first and last lines read alike alone and joined to others: it is
#: matched in the text with a newline on each side (3x faster than look-arounds); each
#: run is possessive (``++``: what follows it is never its character, so giving some
#: back never matches; a line of underscores is not read back one at a time)
_CASE_PARAMETERS = re.compile(
    rf"[\n\x00](?:_++ (?:ERROR at (?:setup|teardown) of )?\w++(?:\.\w++)*+{_IDS} _++"
    rf"| *+<Function \w++{_IDS}>)\r?(?=[\n\x00])"
)
#: the known extensions and second suffixes, as written (a suffix may also be one to
#: three digits): a name ending with an extension and suffixes, after a name's character
#: (a letter, digit, ``_``, ``+``, ``@``, ``~``), then a ``-`` starts the next parameter
_EXTENSION_NAMES = frozenset(EXTENSIONS.split("|"))
_SUFFIX = re.compile(rf"(?:{SECOND_SUFFIXES})")


def parameter_spans(text: str) -> list[tuple[int, int]]:
    """The spans of the ``-`` that follow a known extension inside a pytest node id's
    parameter brackets (``-`` after ``.sql`` in ``x.py::test[a/b.sql-utf-8]``), and a
    bracket's first name and its ``/`` when that name holds a ``-`` (``utf-8-t/`` in
    ``x.py::test[utf-8-t/a.sql]``: ``utf-8`` may be a parameter or part of the folder's
    name; pytest writes both alike, so the path is stated as ``a.sql``), with any empty,
    ``.`` or ``..`` names right after it (``utf-8-t//../`` in ``[utf-8-t//../a.sql]``);
    and a parameter up to the ``/`` after a file's ``-`` (``a/b.sql-utf-8-data/`` in
    ``[a/b.sql-utf-8-data/c.sql]``), in the order they stand. Session 45: the same
    brackets in a failure's header line and in ``<Function …>``, each a whole line (the
    case without its file: ``____ test_read[a/b.sql-1] ____``)."""
    spans: list[tuple[int, int]] = []
    for _, _, dashes, blanks in _separated(text):
        spans += sorted(blanks + [(dash, dash + 1) for dash in dashes])
    return spans


def _past_empty_names(text: str, at: int, end: int) -> int:
    """Where the path's second name starts after `at`: past each empty, ``.`` or ``..``
    name and its ``/`` (``[a-b//c.sql]``, ``[a-b/../c.sql]``: both readings name
    ``c.sql``, but ``/c.sql`` and ``../c.sql`` are other files, never written there)."""
    while True:
        for step in ("/", "./", "../"):
            if text.startswith(step, at, end):
                at += len(step)
                break
        else:
            return at


def parameter_ids(text: str) -> list[str] | None:
    """Each pytest parameter id of `text` holding such a separator, the separators
    blanked, each once; None when `text` has none. A path followed there by ``-`` reads
    as more of a name in `text` (``a/b.sql-utf-8``), so the matcher looks for it in
    these too."""
    ids: dict[str, None] = {}
    for start, end, dashes, _ in _separated(text):
        if not dashes:
            continue
        pieces: list[str] = []
        at = start
        for dash in dashes:
            pieces += (text[at:dash], " ")
            at = dash + 1
        pieces.append(text[at:end])
        ids["".join(pieces)] = None
    return list(ids) or None


#: a bracket's inside (start, end), its separators, and its blanked spans
_Bracket = tuple[int, int, list[int], list[tuple[int, int]]]


def _separated(text: str) -> list[_Bracket]:
    """Each parameter bracket's inside (start, end) holding a ``/``, with where its
    separators are (maybe none): a ``-`` after a known extension whose name has a folder
    since the bracket or the last such ``-`` (``[L031-aliases.sql-v2]`` may be the rule
    ``L031`` and the file ``aliases.sql``: where a bare name starts is not written, so it
    is left whole). A ``-`` with a ``/`` anywhere after it in the bracket is no separator,
    and what both readings share is the path after the first ``/`` past the last such
    ``-`` (``[a/b.sql-utf-8-data/c.sql]`` is the file ``a/b.sql`` and the parameter
    ``utf-8-data/c.sql``, or one path with a folder ``b.sql-utf-8-data``: both name
    ``c.sql``, session 45; ``[x/a.sql-b.sql-c/d.sql]`` may be a folder ``a.sql-b.sql-c``,
    so ``x/a.sql`` is not stated either, session 46), so the parameter up to it is
    blanked; as is a bracket's
    first name holding a ``-`` (session 44), each with the empty, ``.`` and ``..`` names
    after it (:func:`_past_empty_names`)."""
    found = []
    for start, end in _brackets(text):
        slash = text.find("/", start, end)
        if slash == -1:  # no folder: nothing is cut (the most ids)
            continue
        dashes = _extension_dashes(text, start, end)
        reach = start  # (the parameter since `since` is blanked up to here)
        if text.find("-", start, slash) != -1:
            reach = _past_empty_names(text, slash + 1, end)
        # a ``-`` with a ``/`` after it: a parameter glued on or a folder's own ``-``;
        # both readings share what follows the first ``/`` after the last of them
        last = text.rfind("/", start, end)
        glued = [dash for dash in dashes if dash < last]
        if glued:
            reach = _past_empty_names(text, text.find("/", glued[-1] + 1, end) + 1, end)
        cuts, blanks, after, since = [], [], start, start
        for dash in dashes[len(glued) :]:
            if text.find("/", after, dash) != -1:
                blanks += [(since, reach)] if reach > since else []
                cuts.append(dash)
                since = reach = dash + 1
            after = dash + 1
        found.append((start, end, cuts, blanks + ([(since, reach)] if reach > since else [])))
    return found


def _brackets(text: str) -> list[tuple[int, int]]:
    """Where each parameter bracket's inside is, in the order they stand: a node id's
    (after ``.py::name``) and a header's or ``<Function …>``'s (a whole line)."""
    spans = [node.span(1) for node in _NODE_PARAMETERS.finditer(text)] if "::" in text else []
    if "] _" in text or "]>" in text:
        cases = [_inside(case) for case in _CASE_PARAMETERS.finditer(f"\n{text}\n")]
        spans = sorted(spans + cases) if spans else cases
    return spans


def _inside(case: re.Match[str]) -> tuple[int, int]:
    """A case line's bracket inside, where it is in the text without the newline put
    before it (:data:`_CASE_PARAMETERS`)."""
    start, end = case.span(case.lastindex or 1)
    return start - 1, end - 1


def _extension_dashes(text: str, start: int, end: int) -> list[int]:
    """Where each ``-`` in ``text[start:end]`` after a known extension and its second
    suffixes, something after it, is: each name read back from its dash (an extension
    regex tried at each dot cost ~2.5 us a bracket)."""
    found = []
    dash = text.find("-", start, end - 1)
    while dash != -1:
        stop, dot = dash, text.rfind(".", start + 1, dash)
        while dot != -1:
            if text[dot + 1 : stop] in _EXTENSION_NAMES:  # (no extension is a suffix)
                if _goes_before(text[dot - 1]):
                    found.append(dash)
                break
            if not _SUFFIX.fullmatch(text, dot + 1, stop):
                break
            stop, dot = dot, text.rfind(".", start + 1, dot)
        dash = text.find("-", dash + 1, end - 1)
    return found


def _goes_before(char: str) -> bool:
    """Whether `char` may end a name before its extension's dot."""
    return char.isalnum() or char in "_+@~"
