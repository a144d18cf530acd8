"""Lines and numbers that look like facts but are code, a listing or documentation.

:mod:`.factkinds` and :mod:`.facts` find error lines and numbers by their shape; the
same shapes occur in code a tool showed (``79:class AstroidBuildingError(…):`` of
``grep -n``), in a docstring (``:raises KeyError: when …``) and in a file listing
(``drwxr-xr-x 3 root root 4096 May  6  2025 tests`` is no count of tests). Also lines
that name an exception that did not happen (``✓ SUCCESS: Got expected KeyError``), a
script's output printed into a traceback, and a label read as a program's name.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right

from ctxledger.compressor.factfences import fenced_blocks, has_fence_marker
from ctxledger.compressor.factpathrules import KNOWN_FILES
from ctxledger.compressor.factscan import holds_any

__all__ = [
    "CODE_LINE",
    "diff_side",
    "fenced_blocks",
    "in_file_listing",
    "is_label",
    "labelled",
    "listed_code_or_field",
    "listed_or_documented",
    "may_report_success",
    "no_program",
    "numbered",
    "numbered_listing",
    "on_success_line",
    "raised_line",
    "reports_success",
    "stated",
]

#: a line of code: a traceback frame, a statement, a decorator, a comment, a prompt, an
#: assignment of a call's result (``x = f(``, ``out, ok = self.fix(``); a tuple's or
#: call's continuation (``("noqa?", SQLParseError),``: a line that goes on, ending in
#: ``,``, ``{``, ``(`` or ``[``, not prose's ``(e.g., the build failed …)``: three
#: lower-case words in a row after its first comma are prose, wrapped or not;
#: ``) -> List[SQLLexError]:``), an
#: f-string, an annotated parameter (``violations: List[SQLBaseError]``, ``v: SQLLintError``)
CODE_LINE = re.compile(
    r"^\s*(?:E {2,}|File \"|raise\b|except\b|class\b|def\b|import\b|from\b|assert\b|@|#|>>>|\.\.\.|"
    r"if\b|elif\b|return\b|with\b|try\b|\w+(?:[ \t]*,[ \t]*\w+)*\s*=\s*[\w.]+\(|"
    r"\)[ \t]*->|\((?:\"[^\"\n]*\"|'[^'\n]*'|[\w.]+),(?!(?:[ \t]+[a-z]+){3}\b)[ \t][^\n]*[,{(\[][ \t]*$|"
    r"f[\"']|"
    r"(?![a-z_]*(?:err|exc|fail|fatal|warn))[a-z_]\w*:[ \t]*"
    r"(?:[A-Z]\w*\[|[A-Z]\w*(?:Error|Exception)[ \t]*[,)]?[ \t]*$))"
)

#: a line reporting a success: a check mark first, ``SUCCESS``/``PASS``/``PASSED`` before
#: ``:``, ``!`` or the line's end (``✓ SUCCESS: Got expected NotSupportedError``,
#: ``SUCCESS: No TypeError raised``; not ``PASS 3/4 - test_x raised ValueError``), ``OK``
#: alone (``OK``, ``OK (skipped=1)``; not ``OK, so the error is …``), or a pytest node
#: line that passed (``tests/x.py::test_y[-SQLParseError] PASSED``; a skip whose reason
#: names an exception, ``SKIPPED (ImportError: …)``, ``SKIPPED (Errors in setup, see
#: ValueError above)``, still reports it; ``SKIPPED (Errors in setup)`` names none)
_SUCCESS_LINE = re.compile(
    r"[ \t]*(?:[✓✔✅]|(?:SUCCESS|PASS(?:ED)?)(?:[:!]|[ \t]*$)|OK(?:[ \t]*$|[ \t]+\())"
    r"|[ \t]*[\w/.\-]+::[^\n]*[ \t]"
    r"(?:PASSED|XFAIL|SKIPPED(?![ \t]*\([^)\n]*?(?<![\w.])[\w.]*(?:Error|Exception)\b))\b"
)
#: ``Expected`` with its ``:`` (``Expected error: KeyError``), the word between read
#: as the expected exception when it names one
_EXPECTED_LABEL = re.compile(r"[ \t]*Expected(?:[ \t]+(\w+))?:")
#: an exception named right before ``as expected`` (``Got KeyError as expected``,
#: ``ValueError raised as expected``, ```KeyError` as expected``, ``KeyError (as expected)``), read in :data:`_EXPECTED_REACH` characters
#: an exception's name, not inside a longer dotted name (``KeyError``, ``re.error`` is none)
_EXCEPTION_NAME = r"(?<![\w.])[A-Za-z_][\w.]*(?:Error|Exception)"
_EXPECTED_NAME = re.compile(
    rf"({_EXCEPTION_NAME})[`'\"]?(?:[ \t]+(?:was[ \t]+)?raised)?"
    r"[ \t]+\(?$"
)
_EXPECTED_REACH = 120
_AS_EXPECTED = "as expected"
#: a word denying what follows: ``did not raise KeyError as expected``, ``than``
_DENIED = re.compile(r"(?i)\b(?:not|never|than)\b|n't\b")
#: after what was expected, a word saying something else came (``…, got TypeError``)
_OTHERWISE = re.compile(r"(?i)\b(?:got|but)\b")
#: an exception's name after what was expected
_NAMED = re.compile(rf"{_EXCEPTION_NAME}\b")
#: where the clause of what was expected ends: a sentence's or clause's mark before a
#: blank or the line's end (``…; 3 tests passed but 1 skipped``), or a parenthesis
#: (``ValueError raised as expected (see KeyError docs)``)
_CLAUSE_END = re.compile(r"[;.!?](?:\s|$)|\(")
#: after that clause, what still disputes it: an exception with its message
#: (``; TypeError: boom``, ``(RuntimeError(…``: group 1 its name) or failures or errors
#: as an outcome (``; 1 failed``, ``. 2 errors``, ``FAILED:``; its usual cases only,
#: ASCII); a bare name does not
#: (``; TypeError check comes next``, ``(see KeyError docs)``)
_LATER_DISPUTE = re.compile(
    rf"({_EXCEPTION_NAME})[:(]"
    r"|\b[1-9][0-9]*[ \t]+(?:[Ff]ailed|FAILED|[Ee]rrors?|ERRORS?)\b"
    r"|\b(?:[Ff]ailed|FAILED|[Ee]rrors?|ERRORS?)[ \t]*:"
)


#: a listing's line number (``79:``, ``80-`` of ``grep -n``, ``cat -n``), with its file
#: (``astroid/builder.py:79:``), not a clock (``12:30``) or a date (``2024-01-02``); a
#: file of ``grep -r`` (``astroid/manager.py:``); a diff's ``+`` or ``-`` before code
#: (``+import os``, ``+        except TypeError:``), not before one blank and a word:
#: that is a markdown bullet (``- if the file is missing, a FileNotFoundError …``)
_LISTED = re.compile(
    r"\s*(?:(?:[\w/.\-]+:)?\d+(?::(?!\d)|-(?!\d))|[\w/.\-]+\.[A-Za-z]\w*:(?!\d)"
    r"|[+\-](?![ \t]\S))"
)
#: a listing's line number alone at the start of a line (``1194:``, ``28-``)
_NUMBERED = re.compile(r"\s*\d+(?::(?!\d)|-(?!\d))")
#: a docstring's field naming what a function raises (``:raises KeyError:``, ``@throws``)
_DOC_FIELD = re.compile(r"\s*(?::raises?\b|:exception\b|@raises?\b|@throws\b|Raises:\s*$)")


#: a numbered line's rest that names an exception as source does: the name alone (a
#: docstring's ``Raises`` section, a tuple's ``AstroidIndexError,``) or a docstring's
#: ``Raises X if …`` (``25:    Raises RuntimeError if not found.``)
_LISTED_NAME = re.compile(
    r"\s*(?:(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)[ \t]*[,)]?[ \t\r]*\Z|Raises?[ \t]+[A-Z])"
)


def listed_or_documented(line: str) -> bool:
    """Whether a line naming an exception is code as a listing shows it
    (``79:class AstroidBuildingError(AstroidError):``, ``185: raise KeyError(``, a name
    alone ``262:    AttributeError``, ``25:    Raises RuntimeError if …``) or a
    docstring's field (``:raises TooManyLevelsError: When …``): no error that happened."""
    number = _NUMBERED.match(line)
    if number is not None and _LISTED_NAME.match(line, number.end()) is not None:
        return True  # (after a file's name, ``src/x.py:224: AssertionError`` is pytest's)
    return listed_code_or_field(line)


def listed_code_or_field(line: str) -> bool:
    """Whether a line is code after a listing's line number or file
    (``79:class AstroidBuildingError(AstroidError):``) or a docstring's field
    (``:raises TooManyLevelsError: When …``): session 30's rule, without session 33's
    names alone after a bare number."""
    listed = _LISTED.match(line)
    rest = line[listed.end() :] if listed is not None else line
    return (listed is not None and CODE_LINE.match(rest) is not None) or (
        _DOC_FIELD.match(rest) is not None
    )


#: one of them is in every line :func:`reports_success` accepts
_SUCCESS_LITERALS = (
    "✓",
    "✔",
    "✅",
    "SUCCESS",
    "PASS",
    "OK",
    "Expected",
    "as expected",
    "XFAIL",
    "SKIPPED",
)


def may_report_success(text: str) -> bool:
    """Whether `text` holds a word of :data:`_SUCCESS_LITERALS` (a text without any has
    no line :func:`reports_success` accepts)."""
    return holds_any(text, _SUCCESS_LITERALS)


def reports_success(line: str) -> bool:
    """Whether `line` reports a success: an exception it names was expected, avoided or
    tested for, and did not happen (no error fact). What was expected is no success
    when ``got``, ``but`` or another exception's name follows it in its clause
    (``ValueError raised as expected, got TypeError: no``, ``Expected ValueError: got
    TypeError``), or :data:`_LATER_DISPUTE` after it (``…; TypeError: boom``).

    Callers must cap `line` (as :func:`.factkinds.script_error_lines` and
    :func:`.factkinds.outcome_lines` do): it is quadratic on crafted long lines (a
    pytest node's ``a::b``, many ``SKIPPED (x``, then an exception's name: 8.4 s at
    88 KB)."""
    if _SUCCESS_LINE.match(line) is not None:
        return True
    label = _EXPECTED_LABEL.match(line)
    if label is not None:
        named = label.group(1)
        named = named if _NAMED.fullmatch(named or "") else None
        return _undisputed(line, label.end(), named, _LaterDisputes(line))
    at = line.find(_AS_EXPECTED)
    if at == -1:
        return False
    denied = _DENIED.search(line)  # (once: the first denial is before every later hit)
    later: _LaterDisputes | None = None  # (read once, at the first name: linear)
    while at != -1 and (denied is None or at <= denied.start()):
        after = line[at + len(_AS_EXPECTED) : at + len(_AS_EXPECTED) + 1]
        if not after.isalnum() and after != "_":
            name = _EXPECTED_NAME.search(line, max(0, at - _EXPECTED_REACH), at)
            if name is not None:
                later = _LaterDisputes(line) if later is None else later
                if _undisputed(line, at + len(_AS_EXPECTED), name.group(1), later):
                    return True
        at = line.find(_AS_EXPECTED, at + 1)
    return False


class _LaterDisputes:
    """The matches of :data:`_LATER_DISPUTE` in a line, read once, so that each
    ``as expected`` asks in logarithmic time whether one after its clause disputes it."""

    def __init__(self, line: str) -> None:
        self.starts: list[int] = []
        self.names: list[str | None] = []  # (None: an outcome, no exception's name)
        for match in _LATER_DISPUTE.finditer(line):
            self.starts.append(match.start())
            self.names.append(match.group(1))
        seen: frozenset[str | None] = frozenset()
        suffix: list[frozenset[str | None]] = []  # (from each match on: at most two kinds)
        for name in reversed(self.names):
            seen = seen if name in seen or len(seen) > 1 else seen | {name}
            suffix.append(seen)
        self.suffix = suffix[::-1]

    def dispute(self, stop: int, named: str | None) -> bool:
        """Whether a match from `stop` on is an outcome or names an exception but `named`."""
        index = bisect_left(self.starts, stop)
        if index == len(self.starts):
            return False
        kinds = self.suffix[index]
        return len(kinds) > 1 or None in kinds or named not in kinds


def _undisputed(line: str, end: int, named: str | None, later: _LaterDisputes) -> bool:
    """Whether nothing after what was expected (ending at `end`) in its clause says
    something else came: no ``got`` or ``but``, and no exception other than `named` (any,
    when None: ``Expected error: KeyError`` names what it expected after the ``:``). A
    later sentence or clause disputes it only by :data:`_LATER_DISPUTE` (``…; TypeError:
    boom``, not ``…; TypeError check comes next``), by an exception other than `named`
    (when None, than the clause's first)."""
    clause = _CLAUSE_END.search(line, end)
    stop = len(line) if clause is None else clause.start()
    if _OTHERWISE.search(line, end, stop) is not None:
        return False
    others = list(_NAMED.finditer(line, end, stop))
    if named is not None and any(other.group(0) != named for other in others):
        return False
    if clause is None:
        return True
    expected = named if named is not None or not others else others[0].group(0)
    return not later.dispute(stop, expected)


#: how a remote shell's own errors start
_HOST_ERRORS = ("Permission denied", "Connection ", "No route to host", "Host key", "Could not")
#: a version where a shell error line's program goes (``3.0: DateTime fields cannot be
#: used``, ``2.7.18.1: …``, a changelog's entry); not an IPv4 address, a host's name that
#: ``pdsh`` puts before its output: a dotted quad of at most 3 digits each before a
#: program's name and its ``:`` (``bash: x: command not found``; a lower-case word alone
#: is a changelog's entry: ``4.2.0.1: cannot be used with …``) or a remote shell's
#: error (``10.0.0.5: Permission denied``, ``Connection refused``, ``No route to host``)
_VERSION_PROG = re.compile(
    r"[ \t]*(?![0-9]{1,3}(?:\.[0-9]{1,3}){3}:[ \t]*(?:[a-z][\w.-]*:|"
    + "|".join(_HOST_ERRORS)
    + r"))"
    r"[0-9]+(?:\.[0-9]+)+(?: [0-9]+)?:"
)


def no_program(line: str) -> bool:
    """Whether a shell error line's ``prog:`` is none: a listing's line number
    (:func:`numbered`), a capitalised label (:func:`labelled`) or a version."""
    return numbered(line) or labelled(line) or _VERSION_PROG.match(line) is not None


def numbered(line: str) -> bool:
    """Whether `line` starts with a listing's line number (``1194:``, ``28-``): no
    program's name (``1194: … cannot be …`` is no shell error)."""
    return _NUMBERED.match(line) is not None


#: the start of a line of ``ls -l``: a file type and mode (``drwxr-xr-x``, ``-rw-r--r--.``)
#: and the link count (``---------- 2024-01-02 …`` is a banner, no listing)
_LS_LINE = re.compile(r"[-dlcbps][rwxsStT-]{9}[.+@]?[ \t]+\d+[ \t]")
#: how far back the start of such a line is looked for (its columns before a name)
_LS_REACH = 160


def in_file_listing(text: str, at: int) -> bool:
    """Whether position `at` of `text` lies on a line of ``ls -l`` (its sizes, dates and
    times are no counts: ``May  6  2025 tests``, ``Sep 10 14:22 files``). The line's
    start is looked for at most _LS_REACH characters back (a long line is no listing)."""
    window = max(0, at - _LS_REACH)
    line = text.rfind("\n", window, at) + 1
    if line == 0 and window > 0:
        return False
    return _LS_LINE.match(text, line) is not None


def diff_side(text: str, position: int) -> bool:
    """Whether a path at `position` starting ``a/`` or ``b/`` is a side of a diff's
    header (``diff --git a/x.py b/x.py``, ``--- a/x.py``, ``+++ b/x.py``): git's mark
    of the old and new file, no directory (the fact is ``x.py``). Looked for back over
    the header's words only, never a whole line (a long line holds many ``a/`` paths)."""
    if _line_starts_with(text, position, ("--- ", "+++ ", "diff --git ")):
        return True
    if position < 1 or text[position - 1] != " ":
        return False
    word = text.rfind(" ", 0, position - 1) + 1  # the header's first side before this one
    if word == position - 1 or text.find("\n", word, position) >= 0:
        return False
    return _line_starts_with(text, word, ("diff --git ",))


def _line_starts_with(text: str, position: int, heads: tuple[str, ...]) -> bool:
    """Whether the line holding `position` is one of `heads` up to it."""
    for head in heads:
        start = position - len(head)
        if start >= 0 and text.startswith(head, start) and (start == 0 or text[start - 1] == "\n"):
            return True
    return False


#: a traceback's last line: an exception's name, dotted or not, then ``:`` or the
#: line's end (``ValueError: bad``, ``django.http.Http404``, ``struct.error: unpack``,
#: ``socket.gaierror: [Errno -2] …``): its last part is a class's (capitalised), or a
#: lower-case error's or timeout's of a module (``re.error``, ``socket.timeout``); no
#: file (``logging.conf: loaded``, ``x.py:12: UserWarning``: no extension ends so) nor a
#: logger's name (``app.main: starting worker``)
_RAISED = re.compile(
    r"(?:(?:[A-Za-z_]\w*\.)*[A-Z]\w*|(?:[A-Za-z_]\w*\.)+[a-z_]*(?:error|timeout))(?::|$)"
)
#: where a traceback's own lines end: a chained traceback's header
_CHAINED = ("\nDuring handling", "\nThe above exception")
#: a traceback's last frame, after which its exception line comes
_FRAME = '\n  File "'
#: how many lines at the margin after the last frame are read for the exception (a
#: script's output may come between them: eight test banners and results in the corpus)
_MARGIN_LINES = 64


#: where an exception group's traceback starts: its border (``  + Exception Group
#: Traceback``, ``    | Traceback`` of a sub-exception)
_BORDER_START = re.compile(r"[ \t]*[|+]")
#: the border of an exception group's line (``  | ``, ``+-+------ 1 ------``, ``    +---``)
_BORDER = re.compile(r"^[ \t]*[|+][-+]*[ ]?", re.MULTILINE)


#: how far before a traceback header's end its line's start is looked for: the header
#: and at most 32 characters before it (``  + Exception Group ``)
_BORDER_REACH = len("Traceback (most recent call last):") + 32


#: the end of a traceback header's line: blanks only (a markdown table's ``| Traceback
#: (most recent call last): | x |`` goes on: no exception group)
_HEADER_LINE_END = re.compile(r"[ \t]*(?:\n|\Z)")


def _bordered(text: str, start: int) -> bool:
    """Whether the traceback header ending at `start` stands after an exception group's
    border, read in :data:`_BORDER_REACH` characters (a header per line of a long line
    reads a bounded stretch each), and ends its line."""
    line = text.rfind("\n", max(0, start - _BORDER_REACH - 1), start) + 1
    return (
        start - line <= _BORDER_REACH
        and _BORDER_START.match(text, line) is not None
        and _HEADER_LINE_END.match(text, start) is not None
    )


def raised_line(text: str, start: int, end: int) -> str | None:
    """The line the traceback whose header ends at `start` ends with, read before `end`
    (the next traceback's header) and before a chained traceback's ``During handling``:
    the first of the first :data:`_MARGIN_LINES` lines at the margin (no closing tag, as
    ``</output>`` of a cut traceback) after its last
    ``File "`` frame that names an exception (``ValueError: bad``, ``struct.error: x``).
    A script's output printed into the traceback (``Test 1: valid`` before a frame,
    ``Result: 42`` after the exception; stdout and stderr interleaved) is passed over.
    With none, the first line at the margin after the last frame, or else after the
    header. Each traceback reads its own lines only (linear in the text). An exception
    group's traceback (``  + Exception Group Traceback``) is read without its border."""
    if _bordered(text, start):  # (once: stripped lines are read as they are, no recursion)
        text = _BORDER.sub("", text[start:end])
        start, end = 0, len(text)
    for head in _CHAINED:
        at = text.find(head, start, end)
        end = end if at == -1 else at
    frame = text.rfind(_FRAME, start, end)
    margin = _margin_lines(text, start if frame == -1 else frame + 1, end)
    for line in margin:
        if _RAISED.match(line):
            return line
    if margin:
        return margin[0]
    earlier = _margin_lines(text, start, end) if frame != -1 else []
    return earlier[0] if earlier else None


def _margin_lines(text: str, start: int, end: int) -> list[str]:
    """The first :data:`_MARGIN_LINES` lines at the margin of ``text[start:end]`` (no
    traceback header)."""
    found: list[str] = []
    opened: set[str] = set()  # the tags opened on the lines read: printed HTML, no wrapper
    while start < end and len(found) < _MARGIN_LINES:
        stop = text.find("\n", start, end)
        stop = end if stop == -1 else stop
        if text.startswith("<", start):
            closing = _CLOSING_TAG.fullmatch(text, start, stop)
            if closing is not None and closing.group(1) not in opened:
                break  # the wrapper's end: the tool's output, and the traceback, end there
        opening = _OPENING_TAG.match(text, start, stop)
        if opening is not None:
            opened.add(opening.group(1))
        if (
            start < stop
            and not text[start].isspace()
            and not text.startswith(_NOT_RAISED, start)
            and (text[start] != "<" or _TAG_ALONE.fullmatch(text, start, stop) is None)
        ):
            found.append(text[start:stop])
        start = stop + 1
    return found


_NOT_RAISED = ("Traceback", "During", "The above")
#: a closing tag alone on its line: the end of an agent's wrapper around a tool's output
#: (a cut traceback ends ``</output>``, or ``</output_head>`` before ``<elided_chars>``):
#: no line after it is the traceback's, unless a line read before opens its tag (a
#: script's printed ``<table>`` … ``</table>``)
_CLOSING_TAG = re.compile(r"</([A-Za-z][\w.:-]*)>[ \t\r]*")
#: a line opening a tag (after blanks): ``<table>``, ``<div class="x">``
_OPENING_TAG = re.compile(r"[ \t]*<([A-Za-z][\w.:-]*)[ \t>]")
#: a line that is a tag alone (``<table>``, ``<div class="a">``, ``</div>``, ``<br/>``):
#: printed markup, never a traceback's exception line
_TAG_ALONE = re.compile(r"</?[A-Za-z][\w.:-]*(?:[ \t][^<>\n]*)?/?>[ \t\r]*")


#: how far back the start of an exception name's line is looked for
_LINE_LOOK_BACK = 400


def on_success_line(text: str, at: int, known: dict[int, bool]) -> bool:
    """Whether the name at `at` stands on a line reporting a success (:func:`reports_success`),
    its start and end looked for at most :data:`_LINE_LOOK_BACK` characters away (a
    longer line tells nothing: each name reads a bounded stretch). `known` keeps each
    line's answer by its start: a line naming many exceptions is read once."""
    low = max(0, at - _LINE_LOOK_BACK)
    start = text.rfind("\n", low, at) + 1
    if start == 0 and low > 0:
        return False  # (a line too long to tell)
    if start in known:
        return known[start]  # (the same whole line: its end was found before)
    end = text.find("\n", at, at + _LINE_LOOK_BACK)
    if end == -1 and len(text) - at > _LINE_LOOK_BACK:
        return False
    known[start] = reports_success(text[start : end if end != -1 else len(text)])
    return known[start]


def labelled(line: str) -> bool:
    """Whether the name before a shell error line's ``:`` is a capitalised label, no
    program (``Result: {'x': ['x cannot be empty']}``, ``Errors: …``): as
    :func:`.factkinds.reports_tool_error` reads ``prog: error:``."""
    prefix = line.lstrip().split(":", 1)[0]
    if _ERROR_WORD.search(prefix):
        return False  # ``Exception: Value 'x' not found``: a caught error, printed
    return is_label(prefix)


def is_label(prefix: str) -> bool:
    """Whether `prefix`, the name before a line's ``:``, is a capitalised label
    (``Result``, ``Note``), not a program or a file: those are lower-case or hold a
    digit, ``.`` or ``/``, or are a known file name (``Makefile``, ``Dockerfile``)."""
    return (
        prefix[:1].isupper()
        and not any(c.isdigit() or c in "./" for c in prefix)
        and prefix not in KNOWN_FILES
    )


_ERROR_WORD = re.compile(r"(?i)error|exception|fail|fatal|warn|denied|abort|crash")


def stated(
    text: str, sentences: list[tuple[int, str]], fences: list[tuple[int, int]] | None = None
) -> list[tuple[int, str]]:
    """The ``(position, sentence)`` of `sentences` (of `text`, in order) a user states:
    none starting inside a fenced block whose fences open their lines, which quotes a
    file or a log (a PR's config ``# L049 - Always use IS …``), and none on a listing's
    numbered line (:func:`numbered_listing`: ``1463:  msg = 'The precision must be …'``
    of a file shown). A fence may also open at the end of a line of prose (``See below:`` then
    the fence).
    No sentence: nothing to look for (no fence scan). `fences`: the blocks, when the
    caller read them already (at least up to the last sentence's start)."""
    if not sentences:
        return sentences
    if fences is None:  # (review 1: blocks opened after the last sentence's start are not read)
        until = max(position for position, _ in sentences) + 1
        fences = fenced_blocks(text, until) if has_fence_marker(text) else []
    starts = [start for start, _ in fences]
    kept: list[tuple[int, str]] = []
    for position, sentence in sentences:
        at = bisect_right(starts, position) - 1
        if at >= 0 and position < fences[at][1]:
            continue
        if numbered_listing(sentence, text[position : position + _RAW_READ]):
            continue
        kept.append((position, sentence))
    return kept


#: how much of a numbered sentence's own text is read for the blanks after its number
_RAW_READ = 200
#: a listing's indent after its number: three blanks, or a tab among the first three
#: with another blank before or after it (one tab alone is a user's list item:
#: ``1:<TAB>Never push``; ``5:  <TAB>x`` and ``7:<TAB><TAB>x`` are a listing's)
_INDENTED = re.compile(r"\s*\d+[:-](?: {3}| {1,2}\t|\t[ \t])")
#: a line number of ``cat -n`` or ``nl``: right-aligned in 6 columns, then a tab
_CAT_NUMBERED = re.compile(r"(?=[ \d]{6}\t) *\d+\t")
#: a comment of C, Go or SQL after a line's number and a lone tab (``12:<TAB>// Never
#: call this``: ``grep -n`` of tab-indented source; review 2: after blanks, ``1: --
#: Never push`` is a user's list; ``#`` is :data:`CODE_LINE`'s)
_TAB_COMMENT = re.compile(r"\s*\d+[:-]\t(?://|/\*|--[ \t])")


def numbered_listing(sentence: str, raw: str) -> bool:
    """Whether `sentence` (its blanks made one; `raw`, its text as written) starts with
    a number of ``cat -n`` or ``nl`` (``     2<TAB># Never push``), or a listing's line
    number (:func:`numbered`) and reads as a listing's line, not as a
    user's numbered list (``1- Never push to main.``, ``100: Never push``, ``1:Never``,
    ``2-  You must not``): a listing's line has source's indent after its number (three
    blanks, or a tab and another blank: ``1463:        msg = 'The precision must be …'``) or code after it
    (``12: import os``). A listing's line of prose at one or two blanks (``3: Always
    returns x.``) is read as a user's item: no sound rule tells the two apart, and a
    user's requirement lost is worse than a quoted one kept. A comment after the number
    after a lone tab (``12:<TAB>// Never call this``) is code too."""
    if _CAT_NUMBERED.match(raw) is not None:
        return True
    number = _NUMBERED.match(sentence)
    if number is None:
        return False
    rest = sentence[number.end() :]
    indented = _INDENTED.match(raw) is not None or _TAB_COMMENT.match(raw) is not None
    return indented or CODE_LINE.match(rest) is not None
