"""Separators the matcher reads otherwise than a Windows path finder (session 38).

The first two shapes gave a path fact the matcher (:mod:`.factmatch`) never finds in its
own text, so the audit called it lost wherever it stood; the third dropped a path the
matcher finds:

- a JSON string's path that mixes its separators (``"D:\\\\a/b.txt"`` holds the path
  ``D:\\a/b.txt``): the judgement reads each doubled backslash as one, the matcher
  reads the path written with every separator single or every one doubled
  (``D:/a/b.txt``, ``D://a//b.txt``), never some of each (:func:`single_separators`):
  the file's name it finds after the last separator is read instead (``b.txt``, review
  1: ``factpathrules._file_name``);
- a UNC path right after a character that folds to a ``:`` or a ``/`` (``：\\\\srv``,
  ``／\\\\srv``): the matcher, reading the text folded, sees a URL's ``://`` or a
  longer path's ``///`` there (:func:`folded_separator_before`; an ASCII ``:`` or ``/``
  there already starts no UNC path);
- a one-letter word after an escaped newline before a fullwidth colon
  (``"a\\nx：/tmp/hosts"``): the extraction blanked the escape and read a drive there
  (``x：/tmp`` is ``x:/tmp`` to the matcher, ``factletters.folded_colon_before``), but
  the matcher reads the text as written first, ``nx:/tmp/hosts``, no drive, and finds
  ``/tmp/hosts``: the escape's letter is put back before such a word
  (:func:`escape_letter_before_colon`), so the extraction reads no drive either (left by
  session 37, review 2, F4).
"""

from __future__ import annotations

import re

from ctxledger.compressor.factletters import matcher_fold

__all__ = [
    "BACKSLASH_RUNS",
    "DOUBLED_BACKSLASHES",
    "before_escaped_quote",
    "escape_letter_before_colon",
    "folded_separator_before",
    "mixes_separators",
    "single_separators",
]

#: a run of backslashes a JSON string doubled (also read by ``factpathrules``)
DOUBLED_BACKSLASHES = re.compile(r"\\{2,}")
#: every run of backslashes
BACKSLASH_RUNS = re.compile(r"\\+")
#: the leading ``./`` pieces the normalized fact drops (``factmatch.normalize_fact``)
_DOT_SLASHES = re.compile(r"\A(?:\./)+")
#: the characters that fold (NFKC, case) to a ``:`` (every one, by a scan of Unicode)
_COLONS = "\ufe13\ufe55\uff1a"
#: an escape's letter, then one lower-case ASCII letter, such a colon and a ``/`` (a
#: capital is a drive's, ``"\\r\\nC：/etc/hosts"``: review 1 of session 38, F4)
_LETTER_COLON = re.compile(r"\\[nrt](?=[a-z][" + _COLONS + "]/)")
#: a word (what ``str.split`` reads between blanks: ``\s`` is ``str.isspace``)
_WORD = re.compile(r"\S*")


def single_separators(raw: str) -> str | None:
    """The path JSON-escaped `raw` (its backslashes doubled: ``D:\\\\a\\\\b.txt``) names,
    each doubled backslash one (``D:\\a\\b.txt``); None when it also holds a ``/`` where
    the matcher cannot read it (``D:\\\\a/b.txt``): it finds the normalized path written
    with every separator single or every one doubled, and ``./`` pieces first and
    separators last dropped (``.\\\\a/b.txt``, ``D:\\\\a\\\\x.py/`` are read)."""
    value = DOUBLED_BACKSLASHES.sub("\\\\", raw)
    if "/" not in value:
        return value  # (every separator a doubled backslash: read doubled)
    written = raw.replace("\\", "/").rstrip("/")
    needle = _DOT_SLASHES.sub("", value.replace("\\", "/"), count=1).rstrip("/")
    read = written.endswith(needle) or written.endswith(needle.replace("/", "//"))
    return value if read else None


def mixes_separators(raw: str) -> bool:
    """Whether candidate `raw` (before the judgement strips its trailing dots) is a
    JSON-escaped path (each backslash doubled) :func:`single_separators` reads as none:
    a path all the same, whose names are none of their own (``src\\\\a/b.txt`` names no ``a/b.txt``)."""
    value = raw.rstrip(".-,:")
    if "\\\\" not in value or "/" not in value:
        return False
    # (each backslash doubled: a run of another length reads its names alone, as before;
    # separators last aside, as the fact drops them: ``src\\\\a/b.json\\/``, session 39)
    doubled = all(len(run) == 2 for run in BACKSLASH_RUNS.findall(value.rstrip("/\\")))
    return doubled and single_separators(value) is None


def before_escaped_quote(text: str, end: int) -> int:
    """`end`, or one less when an odd run of backslashes ends there before a ``"``: its
    last backslash escapes the quote that ends a JSON string (``…/config.json\\"``),
    no separator of the path before it (session 39, review 1, F1: stripped as one, it
    made a path's runs uneven, and the path none). Not after a dot or dash: the
    matcher reads a backslash as a ``/``, and ``x.py.\\"`` as ``x.py./"``, a longer
    name (``factescapes.backslash_after_dots``, session 37)."""
    if not text.startswith('"', end):
        return end
    at = end
    while at > 0 and text[at - 1] == "\\":
        at -= 1
    return end - 1 if (end - at) % 2 and text[at - 1 : at] not in (".", "-") else end


def folded_separator_before(text: str, start: int) -> bool:
    """Whether the character before `start` is not ASCII and folds (NFKC, case) to end
    with a ``:`` or a ``/`` (``：``, ``﹕``, ``／``, ``＼``): a UNC path starting at
    `start` is a URL's or a longer path's tail to the matcher."""
    if start < 1 or text[start - 1].isascii():
        return False
    return matcher_fold(text[start - 1]).endswith((":", "/"))  # (a backslash folds to /)


def escape_letter_before_colon(text: str, blanked: str) -> str:
    """`blanked` (`text` with its escapes blanked, ``factescapes.unescaped``) with the
    letter of each blanked escape put back before one lower-case ASCII letter (a capital
    is a drive's: review 1), a character folding to ``:`` and a ``/`` (``\\nx：/``): the
    matcher reads ``nx:/`` there, no drive.
    Not before another character (``\\nC：../a.py.\\n`` keeps ``../a.py``, as on
    main), nor when the word ends in dots or dashes before an escape
    (``"\\nx：/tmp/x.py.\\n"``): the matcher reads ``x.py./n`` as written, and the
    word alone in the blanked text, where ``x：`` is a drive, so it finds no path there
    (``factescapes.backslash_after_dots``). Linear: each word is read once."""
    if not any(colon in text for colon in _COLONS):
        return blanked
    pieces, done = [], 0
    for match in _LETTER_COLON.finditer(text):
        at = match.end() - 1
        if blanked[at] == " " and not _dots_before_escape(text, blanked, at + 1):
            pieces += [blanked[done:at], text[at]]
            done = at + 1
    return "".join([*pieces, blanked[done:]]) if pieces else blanked


def _dots_before_escape(text: str, blanked: str, start: int) -> bool:
    """Whether the word of `blanked` from `start` ends with a dot or dash right before a
    blanked escape's backslash."""
    word = _WORD.match(blanked, start)  # (in C: a Python loop cost 3.5 times main's time)
    end = word.end() if word is not None else start
    return end < len(text) and text[end] == "\\" and text[end - 1] in ".-"
