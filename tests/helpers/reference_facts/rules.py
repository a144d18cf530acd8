"""Session 30's rules, stated here their own (plain, slow) way, not imported.

The module under test writes them as regexes and lookups tuned for speed; these are
character loops and plain comparisons, so a mistake in one (review 1a–1f: a crash on a
number of thousands of digits, a division read as a path, LaTeX as a Windows path, a
time range as a zone, a cut amount, a banner as ``ls -l``) shows as a difference.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterator

from ctxledger.compressor.factlookalikes import TEX_COMMANDS  # (a list of names, no rule)
from ctxledger.compressor.factpathrules import has_ext  # (the known extensions, no rule)
from ctxledger.compressor.factpaths import plausible_path as _code_plausible_path
from helpers.reference_facts.mixedpaths import mixed_escaped, mixed_file_name  # session 38

_DIGITS = "0123456789"


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _dotted_parts(run: str) -> list[str] | None:
    """The numbers of `run` when it is two ASCII numbers or more joined by dots."""
    parts = run.split(".")
    if len(parts) < 2 or any(not p or any(c not in _DIGITS for c in p) for p in parts):
        return None
    return parts


def _lower(right: list[str], left: list[str]) -> bool:
    """Whether the dotted number `right` is lower than `left`, number by number; the
    numbers padded with zeros to one width compare as strings as they do as values."""
    width = max(len(p) for p in right + left)
    return [p.rjust(width, "0") for p in right] < [p.rjust(width, "0") for p in left]


def prerelease_end(text: str, at: int, version: str) -> int:
    """Where a numeric pre-release after semver `version` (ending at `at`) ends, or -1:
    ``-`` and a dotted number lower than the version's three numbers or more, not
    followed by a word character, ``-``, ``+`` or a dot and a word character."""
    start = len(version)
    while start > 0 and (version[start - 1] in _DIGITS or version[start - 1] == "."):
        start -= 1
    run = version[start:]
    if run.startswith("."):  # (the run must start with a digit after no dot)
        return -1
    if start > 0 and version[start - 1] in ",$":
        return -1
    if start > 1 and version[start - 1] == ":" and version[start - 2] in _DIGITS:
        return -1  # session 31: a time's seconds (``10:00:00.5``)
    left = _dotted_parts(run)
    if left is None or len(left) < 3 or not text.startswith("-", at):
        return -1
    end = at + 1  # the longest dotted number: digits, then dots each before digits
    right: list[str] = []
    while _digits_at(text, end, 1):
        number = end
        while _digits_at(text, end, 1):
            end += 1
        right.append(text[number:end])
        if not (text[end : end + 1] == "." and _digits_at(text, end + 1, 1)):
            break
        end += 1
    if len(right) < 2:
        return -1
    after = text[end : end + 2]
    if after[:1] and (_is_word(after[0]) or after[0] in "-+"):
        return -1
    if len(after) == 2 and after[0] == "." and _is_word(after[1]):
        return -1
    if _day_first_date(left) and _day_first_date(right):
        return -1  # session 31: ``28.02.2024-03.03.2024`` is two dates, a range
    return end if _lower(right, left) else -1


def _day_first_date(parts: list[str]) -> bool:
    """Whether dotted numbers are a day-first date: a day 1 to 31 and a month 1 to 12
    of one or two digits, and a year of four."""
    if len(parts) != 3 or len(parts[2]) != 4 or not all(1 <= len(p) <= 2 for p in parts[:2]):
        return False
    return 1 <= int(parts[0]) <= 31 and 1 <= int(parts[1]) <= 12


def joined_version(text: str, end: int, value: str, joined: set[int]) -> str:
    """`value` with its numeric pre-release; the pre-release's start goes to `joined`."""
    tail = prerelease_end(text, end, value)
    if tail == -1:
        return value
    joined.add(end + 1)
    return value + text[end:tail]


def in_file_listing(text: str, at: int) -> bool:
    """Whether `at` lies on a line of ``ls -l``: the line starts less than 160 characters
    back (or at the text's start, at most 160 back) with a type letter, nine permission
    letters, maybe one of ``.+@``, blanks, a link count and a blank."""
    line = text.rfind("\n", 0, at) + 1
    if at - line > 160 or (line > 0 and at - line == 160):
        return False
    if not (len(text) > line + 10 and text[line] in "-dlcbps"):
        return False
    if any(c not in "rwxsStT-" for c in text[line + 1 : line + 10]):
        return False
    i = line + 10 + (text[line + 10] in ".+@")
    blanks = i
    while i < len(text) and text[i] in " \t":
        i += 1
    digits = i
    while i < len(text) and text[i].isdecimal():
        i += 1
    return blanks < digits < i < len(text) and text[i] in " \t"


def amounts(text: str) -> Iterator[tuple[int, str]]:
    """``$`` amounts: digits, then groups of ``,`` and three digits, then a ``.`` or
    ``,`` and digits, the longest such reading not followed by a digit (nor, session 31,
    by a ``.`` or ``,`` and a digit). A digit is any decimal digit, as ``\\d`` reads."""
    for start, char in enumerate(text):
        if char != "$" or start + 1 >= len(text) or not text[start + 1].isdecimal():
            continue
        end = start + 1
        while end < len(text) and text[end].isdecimal():
            end += 1
        ends = [end]  # after each thousands group
        while text[ends[-1] : ends[-1] + 1] == "," and _decimals_at(text, ends[-1] + 1, 3):
            ends.append(ends[-1] + 4)
        for group_end in reversed(ends):
            found = _amount_end(text, group_end)
            if found != -1:
                yield start, text[start:found]
                break


def _digits_at(text: str, at: int, count: int) -> bool:
    return len(text) >= at + count and all(c in _DIGITS for c in text[at : at + count])


def _decimals_at(text: str, at: int, count: int) -> bool:
    return len(text) >= at + count and all(c.isdecimal() for c in text[at : at + count])


def _more_number(text: str, at: int) -> bool:
    return text[at : at + 1] in (".", ",") and _decimals_at(text, at + 1, 1)


def _amount_end(text: str, end: int) -> int:
    """The end of an amount whose groups end at `end` (a decimal part after them if one
    fits), or -1 when each reading is followed by an ASCII word character (session 46:
    not only a digit, ``$12.50_old``, ``$5k``; a CJK letter may follow)."""
    if text[end : end + 1] in (".", ",") and _decimals_at(text, end + 1, 1):
        decimal = end + 1
        while decimal < len(text) and text[decimal].isdecimal():
            decimal += 1
        # (all its digits: never followed by one); session 31: nor by more of a
        # number (``$1.0.0`` is no amount)
        more = _more_number(text, decimal) or _ascii_word(text[decimal : decimal + 1])
        return -1 if more else decimal
    return -1 if _ascii_word(text[end : end + 1]) else end


def _ascii_word(char: str) -> bool:
    """An ASCII letter, digit or ``_``: what may not follow an amount (a CJK letter may)."""
    return char.isascii() and _is_word(char)


def timestamps(text: str) -> Iterator[tuple[int, str]]:
    """``YYYY-MM-DD``, then maybe a time ``HH:MM``, then seconds (with a fraction and a
    zone ``Z`` or ``±HH[:]MM``) or ``Z``: the longest reading followed by no word
    character; not after a word character, ``-`` or ``.``."""
    resume = 0  # (a match found: the next starts after it)
    for start in range(len(text) - 9):
        if start < resume:
            continue
        if start > 0 and (_is_word(text[start - 1]) or text[start - 1] == "-"):
            continue
        if start > 1 and text[start - 1] == "." and _is_word(text[start - 2]):
            continue  # (session 31: nor a "." after a word, ``1.0.0.2024-05-20``; review
            # fixes: ``..`` is a range, ``2024-05-20..2024-05-25``)
        if not _shape(text, start, "dddd-dd-dd"):
            continue
        ends = [start + 10]
        if text[start + 10 : start + 11] in ("T", " ") and _shape(text, start + 11, "dd:dd"):
            minutes = start + 16
            ends.append(minutes)
            if _shape(text, minutes, "Z"):
                ends.append(minutes + 1)
            if _shape(text, minutes, ":dd"):
                ends.extend(_after_seconds(text, minutes + 3))
        for end in sorted(ends, reverse=True):
            if end >= len(text) or not _is_word(text[end]):
                yield start, text[start:end]
                resume = end
                break


def _after_seconds(text: str, seconds: int) -> list[int]:
    ends = [seconds]
    for count in range(1, 10):
        if _shape(text, seconds, "." + "d" * count):
            ends.append(seconds + 1 + count)
    # logging's ``,744``; session 31: not a CSV field (``,744,5``)
    comma = _shape(text, seconds, ",ddd")
    if comma and not any(_shape(text, seconds + 4, s) for s in ("d", ",d", ".d")):
        ends.append(seconds + 4)
    zoned = []
    for end in ends:
        if _shape(text, end, "Z"):
            zoned.append(end + 1)
        for sign in "+-":
            for zone in (sign + "dd:dd", sign + "dddd"):
                after = end + len(zone)
                # session 31: ``-11:30:00`` is the end of a time range, no zone
                more_time = _shape(text, after, "d") or _shape(text, after, ":d")
                if _shape(text, end, zone) and not more_time:
                    zoned.append(after)
    return ends + zoned


def _shape(text: str, at: int, shape: str) -> bool:
    """Whether `text` at `at` has `shape` (``d`` a digit, anything else itself)."""
    if len(text) < at + len(shape):
        return False
    return all(
        (c in _DIGITS) if s == "d" else c == s for c, s in zip(text[at:], shape, strict=False)
    )


# --------------------------------------------------------------------------- paths

_OBJECTS = ("self", "cls", "this", "np", "pd", "df", "torch", "tf", "nn", "jnp", "plt")
_ATTRIBUTES = ("sum", "mean", "total", "sqrt", "size", "shape", "count", "max", "min", "len")
_ATTRIBUTES += ("std", "var", "abs", "exp", "log", "item", "values", "value", "norm", "numel")
_TEX = ("cdot", "times", "log", "ln", "exp", "sin", "cos", "tan", "sum", "prod", "int")
_TEX += ("frac", "sqrt", "partial", "nabla", "infty", "sigma", "alpha", "beta", "gamma")
_TEX += ("delta", "epsilon", "theta", "lambda", "mu", "pi", "rho", "tau", "phi", "psi")
_TEX += ("omega", "mathbb", "mathrm", "mathbf", "mathcal", "left", "right", "ldots", "cdots")
_TEX += ("leq", "geq", "neq", "approx")


def plausible_path(raw: str) -> str | None:
    """The module's judgement, then review 1b and 1c stated again: a name and a dotted
    name (no known extension) that read as a division in code, and three backslashed
    names one of which is a LaTeX command or ends in a regex quantifier, are no path.
    Session 31: a UNC path is judged here alone (:func:`unc_path`)."""
    if raw.startswith("\\\\"):
        return unc_path(raw)
    if mixed_escaped(raw):  # session 38: no path the matcher reads; review 1: its file
        single = _code_plausible_path(raw.replace("\\\\", "\\"))
        return None if single is None else mixed_file_name(raw, _code_plausible_path)
    value = _code_plausible_path(raw)
    if value is None:
        return None
    if _month_date(value):  # session 31: ``20/May/2024``
        return None
    parts = value.split("/")
    relative = not value.startswith(("/", "~", "."))
    if relative and len(parts) == 2 and "\\" not in value and "." in parts[1]:
        obj, _, attribute = parts[1].partition(".")
        division = (
            len(obj) < 2
            or obj.lower() in _OBJECTS
            or attribute.split(".")[0].lower() in _ATTRIBUTES
        )
        known = _code_plausible_path(parts[1]) is not None  # a known extension
        if division and not known and obj[:1].isalpha():
            return None
    names = [n for n in value.replace("\\\\", "\\").split("\\") if n]
    drive = len(value) > 1 and value[1] == ":"
    directories = relative and not drive and len(names) >= 3
    formula = any(n.lower() in _TEX or not _is_word(n[-1]) for n in names)
    if directories and formula and _code_plausible_path(names[-1]) is None:
        return None
    return value


_NAME_FIRST = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
_SLASH_PATH_CHARS = frozenset(_NAME_FIRST + ".-+@~")


def in_slash_name(char: str) -> bool:
    """Whether `char` is part of a slash path's names: an ASCII path character, or
    (session 35) a letter of an alphabet with case or a mark, outside ASCII."""
    if char in _SLASH_PATH_CHARS:
        return True
    return ord(char) >= 128 and all(
        c in _SLASH_PATH_CHARS or (ord(c) >= 128 and _cased_or_mark(c))
        for c in char + unicodedata.normalize("NFKC", char).casefold()
    )  # (each as the matcher reads it: ``ŉ`` is ``ʼn`` there, a modifier letter first)


def _cased_or_mark(char: str) -> bool:
    kind = unicodedata.category(char)
    return kind in ("Lu", "Ll", "Lt") or kind.startswith("M")


def caseless(char: str) -> bool:
    """Session 35: a letter of a script without case (Lo, Lm) outside ASCII, each
    character it folds to (NFKC, case) a letter or mark outside ASCII."""
    return unicodedata.category(char) in ("Lo", "Lm") and all(
        ord(c) >= 128 and unicodedata.category(c)[0] in "LM"
        for c in unicodedata.normalize("NFKC", char).casefold()
    )


def matcher_reads(char: str) -> str:
    """Review 1 of session 35: what the matcher reads for `char`: a blank for a
    footnote's superscript digit, else NFKC then case folded, ``\\`` as ``/``."""
    if char in "\u00b9\u00b2\u00b3\u2070\u2074\u2075\u2076\u2077\u2078\u2079":
        return " "
    return unicodedata.normalize("NFKC", char).casefold().replace("\\", "/")


def in_folder(char: str) -> bool:
    """Review 1 of session 35: `char`, as the matcher reads it, belongs to a folder name
    holding caseless letters: each character it reads is an ASCII path character, a
    letter of a slash path's name or a caseless letter (``１`` is ``1``)."""
    seen = matcher_reads(char)
    return seen != "" and all(
        c in _SLASH_PATH_CHARS or (ord(c) >= 128 and (in_slash_name(c) or caseless(c)))
        for c in seen
    )


def _starts_name(name: str) -> bool:
    """Whether `name` starts with a letter, digit or ``_``; session 35: or a non-ASCII
    letter :func:`in_slash_name` reads (not a mark)."""
    first = name[:1]
    if not first or first in _NAME_FIRST:
        return bool(first)
    return ord(first) >= 128 and in_slash_name(first) and unicodedata.category(first)[0] != "M"


def _month_date(value: str) -> bool:
    """Session 31: a day, a month's three letters and a year between slashes (the
    module's judgement strips sentence punctuation first, so this looks at its value)."""
    parts = value.split("/")
    if len(parts) != 3 or not (1 <= len(parts[0]) <= 4 and 2 <= len(parts[2]) <= 4):
        return False
    ascii_letters = all(c.isascii() and c.isalpha() for c in parts[1])
    return (
        parts[0].isascii()
        and parts[0].isdigit()
        and parts[2].isascii()
        and parts[2].isdigit()
        and len(parts[1]) == 3
        and ascii_letters
        and parts[1].lower() in _MONTHS  # review fixes: ``12/abc/2024`` is a path
    )


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def unc_path(raw: str) -> str | None:
    """Session 31: a UNC path, ``\\\\server\\share[\\more]``: two backslashes and single
    separators, or four and doubled ones (a JSON string's escapes); a server and a
    share named by letters, digits, ``_``, ``.`` and ``-`` (maybe ending with ``$``),
    the other names starting with a letter, digit or ``_``; no LaTeX command but a
    last file name; no ``\\n``, ``\\r``, ``\\t`` (one backslash) unless the path ends
    with a file name of a known extension or is a device path with a name in its namespace
    (session 33)."""
    value = raw.rstrip(".-,:")
    lead = 0
    while lead < len(value) and value[lead] == "\\":
        lead += 1
    rest = value[lead:]
    escaped = "\\\\" in rest
    if lead != (4 if escaped else 2):
        return None
    if {len(run) for run in re.findall(r"\\+", rest)} - {2 if escaped else 1}:
        return None  # (session 38: separators all single, or all doubled after four)
    names = rest.split("\\")
    if escaped:
        names = [name for name in names if name] + ([""] if rest.endswith("\\") else [])
    if names[-1] == "":
        names = names[:-1]
    if len(names) < 2:
        return None
    device = names[0] in ("?", ".")  # session 32: ``\\\\.\\pipe\\x``, the device namespace
    for name in names[1:2] if device else names[:2]:
        body = name[:-1] if name.endswith("$") else name
        if not body or body[0] not in _NAME_FIRST:
            return None
        if any(c not in _NAME_FIRST + ".-" for c in body):
            return None
    if any(not _starts_name(name) for name in names[2:]):
        return None
    file = len(names) > 2 and has_ext(names[-1])
    checked = names[:-1] if file else names
    if any(name.rstrip("$").lower() in TEX_COMMANDS for name in checked):
        return None
    if not file and not (device and len(names) > 2):  # session 33: ``\\\\.\\pipe\\name``
        for i in range(len(value) - 1):
            single = value[i] == "\\" and (i == 0 or value[i - 1] != "\\")
            if single and value[i + 1] in "nrt":
                return None
    if escaped and mixed_escaped(rest):  # session 38, review 1: its file's name
        return mixed_file_name(value, _code_plausible_path)
    return "\\\\" + "\\".join(names) + ("\\" if value.endswith("\\") else "")


# --------------------------------------------------------------------------- escapes

_EVIDENCE_AFTER = "\"',;)]}\\\x00"


def _line_escapes(line: str) -> tuple[list[int], bool]:
    """Where the escapes ``\\n``, ``\\r``, ``\\t`` of a line start (read left to right, a
    pair of backslashes being one escaped backslash), and whether one shows the line
    is escaped: a ``\\n`` before a blank, a quote, a closing bracket, ``,``, ``;``, a
    backslash or the line's end, or a ``\\r`` right before a ``\\n``."""
    escapes: list[int] = []
    evidence = False
    i = 0
    while i < len(line) - 1:
        if line[i] != "\\":
            i += 1
        elif line[i + 1] == "\\":
            i += 2
        elif line[i + 1] in "nrt":
            escapes.append(i)
            after = line[i + 2 : i + 3]
            if line[i + 1] == "n" and (not after or after.isspace() or after in _EVIDENCE_AFTER):
                evidence = True
            if line[i + 1] == "r" and line[i + 2 : i + 4] == "\\n":
                evidence = True
            i += 2
        else:
            i += 1
    return escapes, evidence


def unescape_lines(text: str) -> str:
    """Session 31: `text` with the escapes of each escaped line (:func:`_line_escapes`)
    blanked; lines end at a newline or a NUL. Review fixes: a line holding a drive, one
    backslash and a name (``C:\\temp``) is not escaped (a JSON string doubles it), and
    of an escaped line only the quoted strings (cut at ``"`` and ``'`` no backslash
    escapes) that show it themselves are. Final review fixes: an apostrophe between two
    word characters (``it's``) cuts nothing; once one piece shows it, every double-quoted
    string of the line is escaped too; a drive path ``C:\\n…`` (``\\n``, ``\\r``, ``\\t``
    after the drive) counts only with a second single backslash before a name."""
    chars = list(text)
    start = 0
    for end in [i for i, c in enumerate(text) if c in "\n\x00"] + [len(text)]:
        line = text[start:end]
        if not _single_backslash_drive(line):
            shown = [(s, p) for s, p in _quoted_pieces(line) if _line_escapes(p)[1]]
            if shown:
                shown += [(s, line[s:e]) for s, e in _double_quoted_strings(line)]
            for piece_start, piece in shown:
                for at in _line_escapes(piece)[0]:
                    at += start + piece_start
                    chars[at] = chars[at + 1] = " "
        start = end + 1
    return "".join(chars)


def escape_letter_kept(raw: str, blanked: str) -> str:
    """Session 38: a blanked escape's letter before one lower-case ASCII letter (review 1:
    a capital is a drive's), a character not
    ASCII folding to ``:`` and a ``/`` (``\\nx：/tmp``) is put back: the matcher reads
    ``nx:`` there in the text as written, no drive (``x：/tmp`` alone is one to it);
    unless the word ends in dots or dashes before an escape: the matcher reads it
    longer as written (``x.py./n``) and with a drive blanked."""
    chars = list(blanked)
    for at in range(1, len(raw) - 3):
        escape = raw[at - 1] == "\\" and raw[at] in "nrt" and blanked[at] == " "
        colon = ord(raw[at + 2]) >= 128 and matcher_reads(raw[at + 2]) == ":"
        drive_like = raw[at + 1] in string.ascii_lowercase and colon and raw[at + 3] == "/"
        if not (escape and drive_like):
            continue
        word = blanked[at + 1 :].split()[0]  # (the word from the letter after the escape)
        end = at + 1 + len(word)
        if not (end < len(raw) and raw[end] == "\\" and word[-1] in ".-"):
            chars[at] = raw[at]
    return "".join(chars)


def escape_after_dot(raw: str, blanked: str) -> str:
    """Review 1 of session 37: a blanked escape whose backslash follows a name's trailing
    dots (and dashes, one dot at least: ``out.txt.\\n``) keeps that backslash, which the
    matcher reads, in the text as written, as a ``/`` going on the name; but a word two
    blanks stand before is read by the matcher with the escape blanked (its second
    reading), so there the blank stays. In a word holding a drive (review 2), a Windows
    path would take that backslash in: the word is blanked from the drive on (no fact,
    as ``out.txt``'s)."""
    chars = list(blanked)
    for at, char in enumerate(raw):
        if char == "\\" and blanked[at] == " " and raw[at + 1 : at + 2] in ("n", "r", "t"):
            before = at
            while before > 0 and raw[before - 1] in ".-":
                before -= 1
            head = blanked[:at]
            word = head.split()[-1] if head and not head[-1].isspace() else ""
            after_two_blanks = head[: len(head) - len(word)].endswith("  ")
            if "." not in raw[before:at] or after_two_blanks:
                continue
            windows = _windows_start(blanked, at - len(word), at)
            if windows is None:
                chars[at] = "\\"
            else:
                chars[windows : at + 1] = " " * (at + 1 - windows)
    return "".join(chars)


def _windows_start(blanked: str, start: int, end: int) -> int | None:
    """Where a Windows path finder starts one in ``blanked[start:end]`` (a word) at a
    drive letter (``C:/``, ``C:\\``) that no path character, slash, backslash, ``:``
    or ``%`` stands before; None when it has none."""
    for at in range(start, end):
        letter = blanked[at].isascii() and blanked[at].isalpha()
        drive = letter and blanked[at + 1 : at + 3] in (":/", ":\\")
        if drive and (at == 0 or not re.match(r"[A-Za-z0-9_.+@~\-/\\:%]", blanked[at - 1])):
            return at
    return None


def _double_quoted_strings(line: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the strings of `line` between a ``"`` and the next (or the
    line's end), read left to right, a backslash taking the next character with it."""
    strings: list[tuple[int, int]] = []
    opening = None
    i = 0
    while i < len(line):
        if line[i] == "\\":
            i += 2
            continue
        if line[i] == '"' and opening is None:
            opening = i + 1
        elif line[i] == '"':
            strings.append((opening, i))
            opening = None
        i += 1
    if opening is not None:
        strings.append((opening, len(line)))
    return strings


def _single_backslash_drive(line: str) -> bool:
    for i in range(len(line) - 3):
        letter = line[i].isascii() and line[i].isalpha()
        before = line[i - 1] if i else ""
        word_before = before.isascii() and (before.isalnum() or before == "_")
        name = line[i + 3].isascii() and (line[i + 3].isalnum() or line[i + 3] == "_")
        drive = letter and not word_before and line[i + 1 : i + 3] == ":\\" and name
        if drive and (line[i + 3] not in "nrt" or _second_backslash(line, i + 4)):
            return True
    return False


def _second_backslash(line: str, i: int) -> bool:
    """Whether the name from `i` goes on to a single backslash and a name character."""
    while i < len(line) and not (line[i] == "\\" or line[i].isspace() or line[i] in "\"'"):
        i += 1
    after = line[i + 1 : i + 2]
    return line[i : i + 1] == "\\" and after.isascii() and (after.isalnum() or after == "_")


def _quoted_pieces(line: str) -> list[tuple[int, str]]:
    """The pieces of `line` between its quotes no backslash escapes (read left to right,
    a backslash taking the next character with it), with where each starts."""
    pieces: list[tuple[int, str]] = []
    start = i = 0
    while i < len(line):
        if line[i] == "\\":
            i += 2
            continue
        word_around = _word(line[i - 1 : i]) and _word(line[i + 1 : i + 2])
        if line[i] == '"' or (line[i] == "'" and not word_around):
            pieces.append((start, line[start:i]))
            start = i + 1
        i += 1
    pieces.append((start, line[start:]))
    return pieces


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


def european_grouped(text: str, start: int, value: str) -> bool:
    """Session 31: a version value that is a European grouped number: one to three
    digits, then groups of a dot and three digits, then a ``,`` and a digit."""
    end = start + len(value)
    parts = value.split(".")
    grouped = 1 <= len(parts[0]) <= 3 and all(len(p) == 3 for p in parts[1:])
    digits = all(p.isdecimal() for p in parts)
    after = text[end : end + 2]
    return grouped and digits and len(after) == 2 and after[0] == "," and after[1].isdecimal()
