"""The fact categories a debugging user looks for, beyond values: edits, outcomes, error lines.

:mod:`ctxledger.compressor.facts` finds values (paths, commands, identifiers, numbers,
URLs); this module finds the *lines* a continuation needs verbatim:

* **edits** — which line an edit introduced (``use_DS_decimal = False``), read from
  the tool call that made it: an editor's ``new_str``, a patch's ``+`` lines, a
  written file, ``sed -i 's/…/…/'``, a heredoc or ``echo … > file``;
* **shell error lines** — ``cat: x: No such file or directory``,
  ``find: 'grep' terminated by signal 13``, ``bash: line 1: foo: command not found``;
* **script error lines** — a line that names an exception with its message
  (``parse_http_date("") raised: ValueError - '' is not …``), not the bare name;
* **outcomes** — test summaries (``3 failed, 10 passed``, ``FAILED (failures=2)``,
  ``Ran 5 tests``) and result lines (``All tests passed!``, ``SUCCESS: …``);
* **decisions** (an assistant's stated choice) and **constraints** (what the user
  said must or must not happen), as sentences (found in :mod:`.factsentences`).

Also the boilerplate filters: URLs of schemas, licences and tool documentation, and
static asset paths (``/settings/img/admin.svg``), which are noise, not facts.
:data:`CATEGORIES` names the category of every kind, as reports group them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from ctxledger.compressor.factcodes import EXIT_CODES, EXIT_LITERALS, code_value, exit_code
from ctxledger.compressor.factnoise import CODE_LINE as _CODE_LINE
from ctxledger.compressor.factnoise import (
    is_label,
    listed_or_documented,
    may_report_success,
    no_program,
    on_success_line,
    raised_line,
    reports_success,
)
from ctxledger.compressor.factscan import (
    has_any,
    holds_any,
    line_matches,
    may_match_ignoring_case,
)
from ctxledger.compressor.factsentences import (
    LINE_MAX_CHARS,
    constraint_sentences,
    decision_sentences,
)
from ctxledger.compressor.factsentences import cap_line as _cap
from ctxledger.compressor.toolcalls import EDITOR_TOOLS, bare_tool_name, tool_family

__all__ = [
    "CATEGORIES",
    "LINE_MAX_CHARS",
    "SENTENCE_KINDS",
    "boilerplate_url",
    "constraint_sentences",
    "decision_sentences",
    "edit_lines",
    "error_lines",
    "exit_code",
    "is_asset_path",
    "listed_or_documented",
    "outcome_lines",
    "script_error_lines",
    "shell_error_lines",
]

#: kinds whose value is a whole sentence (costly to keep verbatim; reported apart in benchmarks)
SENTENCE_KINDS = frozenset({"decision", "constraint"})

#: fact kind -> the category reports group it under
CATEGORIES: Mapping[str, str] = {
    "ask": "user asks and constraints",
    "constraint": "user asks and constraints",
    "path": "paths",
    "command": "commands run",
    "error": "errors",
    "edit": "edits",
    "outcome": "test and script outcomes",
    "identifier": "identifiers",
    "number": "numbers with units",
    "decision": "decisions",
    "url": "urls",
    "quoted": "quoted values",
}


def _lines_with(pattern: re.Pattern[str], text: str) -> list[tuple[int, str]]:
    r"""``(start, line)`` of each distinct line of `text` holding a match of `pattern`.

    One regex search per matching line, resumed after that line's ``\n``: the rest of a
    matching line is never scanned (a long line of many matches cost a scan to its end
    and a match object per match; a per-line loop over a long tool output of few
    matching lines costs about twice as much). A match's line is the one it starts on.
    The lines are those of ``finditer``'s matches (main's loop, kept in
    tests/helpers/reference_facts/factkinds.py) on condition that no match of `pattern`
    starts at a ``\n`` and none starts inside the part of another match past its line's
    end. Both patterns given here hold to it (tests/test_trajectories_fastpaths.py):
    _RESULT_LINE's matches cross a line only as ``result\n:`` / ``output\n=``
    (``\s*[:=]``: whitespace, ``:`` or ``=``, where no match starts) and ``x)\n returned``
    (``\)\s*(?:returned|returns|raised)``: whitespace and a word none of its alternatives
    starts inside), and every alternative of both starts with a character other than ``\n``.
    A pattern that can match at a ``\n`` or match empty still ends (the search always
    moves past the line it found), but its lines may differ from ``finditer``'s.
    """
    out: list[tuple[int, str]] = []
    pos = 0
    while (match := pattern.search(text, pos)) is not None:
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.start())
        if end < 0:
            out.append((start, text[start:]))
            break
        out.append((start, text[start:end]))
        pos = end + 1
    return out


def _significant(line: str) -> bool:
    """A line worth quoting: some letters or digits, not only brackets or a comment marker."""
    stripped = line.strip()
    return sum(c.isalnum() for c in stripped) >= 3 and not stripped.startswith(("#", "//", '"""'))


# --------------------------------------------------------------------------- edits

_NEW_KEYS = ("new_str", "new_string", "new_content", "replacement", "insert_text")
_OLD_KEYS = ("old_str", "old_string", "old_content")
_FILE_BODY_KEYS = ("file_text", "content", "contents", "text", "code")
_PATCH_KEYS = ("patch", "diff", "input")
_SED = re.compile(
    r"\b(?:sed|perl)\s+(?:-[a-zA-Z]*i[a-zA-Z.]*\S*|-p?i(?:\.\w+)?\s+-e|-i\s+-e)\s+"
    r"(?:-e\s+)?(['\"])s(.)(.*?)(?<!\\)\2(.*?)(?<!\\)\2[a-zA-Z]*\1"
)
_HEREDOC = re.compile(
    r"\bcat\s*>{1,2}\s*\S+\s*<<-?\s*(['\"]?)(\w+)\1[^\n]*\n(.*?)\n\s*\2\b", re.DOTALL
)
_ECHO = re.compile(r"\b(?:echo|printf)\s+(['\"])(.+?)(?<!\\)\1\s*>{1,2}\s*\S+")


def _first_new_line(new: str, old: str = "") -> str | None:
    old_lines = {ln.strip() for ln in old.splitlines()}
    for line in new.splitlines():
        if _significant(line) and line.strip() not in old_lines:
            return _cap(line)
    return None


def _patch_line(patch: str) -> str | None:
    for line in patch.splitlines():
        if line.startswith("+") and not line.startswith("+++") and _significant(line[1:]):
            return _cap(line[1:])
    return None


#: ``import re``, ``import os, sys``: names no more than a module (``from x import name`` does)
_IMPORT_LINE = re.compile(r"\s*import\s+[\w.]+(?:\s*,\s*[\w.]+)*\s*$")


def _body_line(body: str) -> str | None:
    """The key line of a written file: its first definition, else its first significant
    line that is not a bare module import (``import re`` says nothing about a script),
    else its first."""
    lines = [ln for ln in body.splitlines() if _significant(ln)]
    for line in lines:
        if re.match(r"\s*(?:def|class|fn|func|function|export|const|let)\b", line):
            return _cap(line)
    for line in lines:
        if not _IMPORT_LINE.match(line):
            return _cap(line)
    return _cap(lines[0]) if lines else None


def _shell_edits(command: str) -> Iterator[str]:
    for match in _SED.finditer(command):
        replacement = match.group(4)
        if _significant(replacement):
            yield _cap(replacement)
    for match in _HEREDOC.finditer(command):
        line = _body_line(match.group(3))
        if line:
            yield line
    for match in _ECHO.finditer(command):
        if _significant(match.group(2)):
            yield _cap(match.group(2))


def edit_lines(name: str, args: Mapping[str, Any]) -> list[str]:
    """The key line(s) an edit-making tool call introduced (empty when it edits nothing)."""
    family = tool_family(name)
    editor = bare_tool_name(name) in EDITOR_TOOLS
    strings = {str(k).lower(): v for k, v in args.items() if isinstance(v, str)}
    if editor and strings.get("command") in ("view", "undo_edit"):
        return []
    if not editor and family == "terminal":
        return list(dict.fromkeys(_shell_edits(_command_of(strings))))
    if not editor and family not in ("write", "patch"):
        return []
    new = next((strings[k] for k in _NEW_KEYS if k in strings), None)
    if new is not None:
        old = next((strings[k] for k in _OLD_KEYS if k in strings), "")
        line = _first_new_line(new, old)
        return [line] if line else []
    patch = next((strings[k] for k in _PATCH_KEYS if k in strings), None)
    if patch is not None and family == "patch":
        line = _patch_line(patch)
        return [line] if line else []
    body = next((strings[k] for k in _FILE_BODY_KEYS if k in strings), None)
    line = _body_line(body) if body else None
    return [line] if line else []


def _command_of(strings: Mapping[str, str]) -> str:
    for key in ("command", "cmd", "script", "input", "code", ""):
        if key in strings:
            return strings[key]
    return ""


# --------------------------------------------------------------------------- error lines

_EXCEPTION_BODY = (
    r"((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Fault|Failure|Warning)"
    r"(?::[^\n]*)?)[ \t]*$"
)
_EXCEPTION_LINE = re.compile(r"^[ \t]*" + _EXCEPTION_BODY, re.MULTILINE)
#: an exception group's line with its border (``    | ValueError: 1``), read after the
#: group's header only (``| ValueError: bad`` of a table is no sub-exception)
_GROUP_EXCEPTION_LINE = re.compile(r"^[ \t]*\|[ \t]+" + _EXCEPTION_BODY, re.MULTILINE)
_GROUP_HEADER = "Exception Group Traceback (most recent call last):"
_EXCEPTION_LINE_LITERALS = (
    "Error", "Exception", "Exit", "Interrupt", "Fault", "Failure", "Warning",
)  # fmt: skip
_ERROR_PREFIX_LINE = re.compile(
    r"^[ \t]*((?:error|fatal|npm err!|\[error\]|error\[\w+\]|failed(?! \()|fail:|panic:)(?=[:!\s\[])[^\n]*)$",
    re.MULTILINE | re.IGNORECASE,
)
#: a line of the error-prefix rule that reports no error: a status of none
#: (``Error: none``, ``failed: 0``)
_NO_ERROR_STATUS = re.compile(
    r"(?:error|fatal|failed|fail)[ \t]*:[ \t]*(?:none|0|no|null|n/a|false)[ \t.]*$", re.IGNORECASE
)
#: the prefix word written out, then a blank and the next word (``Error handling``)
_PREFIX_WORD_NEXT = re.compile(r"(error|fatal|failed)[ \t]+([A-Za-z]+)", re.IGNORECASE)
#: nouns that the prefix word describes in prose about errors, not in a report of one
#: (``Error handling looks fine``, ``Failed attempts so far``, ``Fatal flaws``): a line
#: whose prefix word is followed by one of them is no error report. Any other line of
#: the rule still is (``Error response from daemon``, ``Failed unmounting /var``).
_PROSE_NOUNS = frozenset(
    {
        "handling", "attempts", "attempt", "flaws", "flaw", "messages", "rate", "rates",
        "cases", "budget", "budgets", "reporting", "logging", "codes", "categories",
        "counts", "count", "paths",
    }
)  # fmt: skip


def _reports_error(line: str) -> bool:
    """Whether a line the error-prefix rule matched reports an error: not a status of
    none (``Error: none``), not prose where the prefix word describes a noun of
    :data:`_PROSE_NOUNS`; a prefix word in capitals (``ERROR``, ``FAILED``) always does."""
    stripped = line.lstrip()
    if _NO_ERROR_STATUS.match(stripped):
        return False
    word = _PREFIX_WORD_NEXT.match(stripped)
    if word is None or word.group(1).isupper():
        return True
    # a figure makes it a report again ("Error count: 12", "Failed attempts: 5")
    return word.group(2).lower() not in _PROSE_NOUNS or any(c.isdigit() for c in stripped)


#: a build tool's or compiler's error line: make's ``***`` (``make: *** [all] Error 2``,
#: ``make[1]: *** No rule to make target 'x'.  Stop.``, ``Makefile:3: *** missing
#: separator.  Stop.``) and ``prog: error:`` / ``file:line:col: error:`` (gcc, clang,
#: ld, mypy, ninja: ``x.c:3:5: error: expected ';'``, ``collect2: error: ld returned 1``),
#: also on Windows: a drive and backslashes (``C:\\proj\\main.c:3:5: error:``) and the
#: MSVC / MSBuild form with a code (``Program.cs(12,5): error CS1002: ; expected``)
TOOL_ERROR_LINE = re.compile(
    r"^[ \t]*((?:[A-Za-z]:)?[\w.+\-/\\]+(?:\[\d+\])?(?:\(\d+(?:,\d+)?\))?(?::\d+){0,2}: "
    r"(?:\*\*\*|(?:fatal )?error(?: [A-Z]{1,4}\d{1,5})?:)[ \t]+\S[^\n]*)$",
    re.MULTILINE,
)
_TOOL_ERROR_LITERALS = (": ***", ": error", ": fatal error")


def reports_tool_error(line: str) -> bool:
    """Whether a :data:`TOOL_ERROR_LINE` match reports an error: make's ``***`` always;
    ``prog: error:`` when `prog` is a tool or file name, not a capitalised label
    (:func:`.factnoise.is_label`: ``Note: error: handling is fine``), and
    the error is no status of none (``ld: error: none``)."""
    prefix, _, rest = line.lstrip().partition(": ")
    if rest.startswith("***"):
        return True
    return not is_label(prefix) and not _NO_ERROR_STATUS.match(rest.removeprefix("fatal "))


_PYTEST_E_LINE = re.compile(r"^E {2,}(\S[^\n]*)$", re.MULTILINE)
_EXCEPTION_NAME = re.compile(r"[A-Z][A-Za-z0-9]*(?:Error|Exception)(?!\w)")
_EXCEPTION_ANCHOR = re.compile(r"(?:Error|Exception)(?!\w)")
_TRACEBACK = "Traceback (most recent call last):"


def _error_lines(text: str) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for pattern, literals in zip(EXIT_CODES, EXIT_LITERALS, strict=True):
        for match in pattern.finditer(text) if has_any(text, literals) else ():
            code = code_value(match.group(1))
            if code:  # (not 0, not None)
                found.append((match.start(), f"exit code {code}"))
    start = text.find(_TRACEBACK)
    while start != -1:
        pos = start + len(_TRACEBACK)
        after = text.find(_TRACEBACK, pos)
        # (a header glued to a line, ``from yTraceback (most …``, ends the traceback
        # before that line: its part before the header is no line of its own)
        end = len(text) if after == -1 else max(pos, text.rfind("\n", pos, after))
        line = raised_line(text, pos, min(pos + 20000, end))
        if line is not None:
            found.append((start, _cap(_unlabelled(0, line)[1])))
        start = after
    group = text.find(_GROUP_HEADER) if "|" in text else -1
    for pattern, literals in (
        (_EXCEPTION_LINE, _EXCEPTION_LINE_LITERALS),
        (_ERROR_PREFIX_LINE, ()),
    ):
        for match in line_matches(pattern, text, literals):
            if pattern is _ERROR_PREFIX_LINE and not _reports_error(match.group(1)):
                continue  # prose about errors (``Error handling looks fine``)
            position, value = _unlabelled(match.start(1), match.group(1))
            found.append((position, _cap(value)))
    for match in _GROUP_EXCEPTION_LINE.finditer(text, group) if group != -1 else ():
        found.append((match.start(1), _cap(match.group(1))))
    # (a literal check even on a short text: most texts hold none, and the pattern tries
    # every line start; has_any answers a long text without ":" at once)
    tool_errors = holds_any(text, _TOOL_ERROR_LITERALS)
    for match in line_matches(TOOL_ERROR_LINE, text) if tool_errors else ():
        if reports_tool_error(match.group(1)):
            found.append((match.start(1), _cap(match.group(1))))
    for match in line_matches(_PYTEST_E_LINE, text):
        rest = match.group(1)
        if _EXCEPTION_NAME.match(rest) or rest.startswith("assert "):
            found.append((match.start(1), _cap(rest)))
    lines = [value for _, value in found]
    successes: bool | None = None  # (looked for at the first name: most texts name none)
    success_lines: dict[int, bool] = {}  # (by line start: many names on a line)
    for match in _EXCEPTION_ANCHOR.finditer(text):
        start = match.start()
        while start > 0 and text[start - 1].isalnum():
            start -= 1
        if start == match.start() or not ("A" <= text[start] <= "Z"):
            continue
        if start > 0 and (text[start - 1] in "._" or text[start - 1].isalnum()):
            continue
        name = text[start : match.end()]
        if any(name in line for line in lines):
            continue
        if successes is None:
            successes = may_report_success(text)
        if not (successes and on_success_line(text, start, success_lines)):
            found.append((start, name))
    return found


def error_lines(text: str) -> list[str]:
    """The error facts of one text (exit codes, exception and error lines), in order, once."""
    seen: dict[str, None] = {}
    for _, value in sorted(_error_lines(text), key=lambda item: item[0]):
        seen.setdefault(value, None)
    return list(seen)


_SHELL_ERROR = re.compile(
    r"^[ \t]*((?:[\w.\-/]+|/bin/sh|sh|bash)(?:: line \d+| \d+)?:[ \t][^\n]*?"
    r"(?:No such file or directory|Permission denied|command not found|[Ii]s a directory|"
    r"Not a directory|Operation not permitted|terminated by signal \d+|[Cc]annot [a-z][^\n]*|"
    r"can't [a-z][^\n]*|unrecognized (?:option|arguments?)[^\n]*|invalid option[^\n]*|"
    r"illegal option[^\n]*|missing operand[^\n]*|unterminated [^\n]*|unknown (?:option|command)[^\n]*|"
    r"not found|syntax error[^\n]*|File exists|Directory not empty|Killed|Segmentation fault[^\n]*)"
    r"[^\n]*)$",
    re.MULTILINE,
)
#: every shell error line has ``prog: `` (a colon, then a blank)
_SHELL_ERROR_LITERALS = (": ", ":\t")
_EXCEPTION_IN_LINE = re.compile(r"(?<![\w.])(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b")
#: a script's ``Error:`` label before an exception line it printed (``Error: ImportError: x``,
#: ``Error: Exception: boom`` as ``Error: MyException: boom``; ``Error: Error: x`` keeps it)
_ERROR_LABEL = re.compile(
    r"(?i:error):[ \t]+(?=(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception)|Exception):)"
)


def _unlabelled(position: int, line: str) -> tuple[int, str]:
    """`line` at `position` without a script's ``Error:`` label before its exception
    line: the fact is the exception line, as a summary states it (session 40)."""
    label = _ERROR_LABEL.match(line)
    return (position, line) if label is None else (position + label.end(), line[label.end() :])


def shell_error_lines(text: str) -> list[tuple[int, str]]:
    """``(position, line)`` of the shell's own error lines (``prog: what: reason``)."""
    matches = line_matches(_SHELL_ERROR, text, _SHELL_ERROR_LITERALS)
    found = (_unlabelled(m.start(1), m.group(1)) for m in matches if not no_program(m.group(1)))
    return [(position, _cap(value)) for position, value in found]


def script_error_lines(text: str) -> list[tuple[int, str]]:
    """``(position, line)`` of lines naming an exception *with* its message, as a script printed them.

    A line that is only the exception (``ValueError: x`` at the start of a line) is
    found by the exception-line rule of :mod:`facts`; code (``raise``, ``except``,
    traceback frames) is not an outcome.
    """
    found: list[tuple[int, str]] = []
    if not has_any(text, ("Error", "Exception")):
        return found
    successes: bool | None = None  # (looked for at the first line: most texts have none)
    for start, line in _lines_with(_EXCEPTION_IN_LINE, text):
        if len(line) > 400:
            continue
        stripped = line.strip()
        if _CODE_LINE.match(line) or _EXCEPTION_IN_LINE.match(stripped):
            continue
        if sum(c.isalnum() for c in stripped) < 12 or listed_or_documented(line):
            continue
        if successes is None:
            successes = may_report_success(text)
        if successes and reports_success(line):
            continue  # ``✓ SUCCESS: Got expected NotSupportedError``: none happened
        position, value = _unlabelled(start + len(line) - len(line.lstrip()), stripped)
        found.append((position, _cap(value)))
    return found


# --------------------------------------------------------------------------- outcomes

_TEST_SUMMARY = re.compile(
    r"^[ \t=\-]*((?:\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?)"
    r"(?:, )?)+)(?: in [\d.]+s(?: \([\d:]+\))?)?[ \t=\-]*$",
    re.MULTILINE,
)
_UNITTEST = re.compile(
    r"^[ \t]*(Ran \d+ tests?|FAILED \((?:failures|errors)=[^)\n]*\)|OK \([^)\n]*\))", re.MULTILINE
)
_RESULT_LINE = re.compile(
    r"(?i)\b(?:all (?:\d+ )?tests? (?:passed|pass|succeeded|ok)|tests? (?:passed|failed)|"
    r"success(?:fully)?|succeeded|passed(?![ \t]+(?:in|into)\b(?=[ \t]*(?:[.,;:!?)\n]|$|as\b))"
    r"|[ \t]+into[ \t]+this\b|(?<=\bthe[ \t]passed)[ \t]+in[ \t]+path\b)|"
    r"failed|works (?:correctly|as expected|now)|"
    r"(?:is|was|now) fixed|result(?:s)?\s*[:=]|output\s*[:=]|expected\b[^\n]*\bgot\b)|"
    r"\)\s*(?:returned|returns|raised)\b|[✓✔✗✘❌✅]"
)

#: every match of _RESULT_LINE holds one of these (ignoring case)
_RESULT_LITERALS = (
    "pass", "fail", "succe", "works", "fixed", "result", "output", "expected", "test ok",
    "tests ok", ")", "✓", "✔", "✗", "✘", "❌", "✅",
)  # fmt: skip

_PYTEST_NODE = re.compile(r"\s*[\w/.\-]+::\w")
#: a result's label ending its line: what it reports is on the lines after it (its
#: word's case ignored in ASCII only: ``reſult`` is no ``result``)
_LABEL_END = re.compile(r"\b(?ai:results?|output)[ \t]*:$")
_THREE_LETTERS = re.compile(r"[^\W\d_](?:[\W\d_]*[^\W\d_]){2}")
#: a line of a file listing (``nl``, ``grep -n``, quoted source): code, not a result
_LISTING = re.compile(r"^\s*(?:\d+[:\-\t]|\d+\s{2,}|[\w/.\-]+\.\w+[:\-]\d+[:\-])|^\s*[\"'#]")


def outcome_lines(text: str) -> list[tuple[int, str]]:
    """``(position, line)`` of test summaries and a script's result lines."""
    found: list[tuple[int, str]] = []
    for match in line_matches(_TEST_SUMMARY, text):
        found.append((match.start(1), match.group(1).rstrip(", ")))
    for match in line_matches(_UNITTEST, text):
        found.append((match.start(1), match.group(1)))
    if not may_match_ignoring_case(text, _RESULT_LITERALS):
        return found
    for start, line in _lines_with(_RESULT_LINE, text):
        # cheapest rejections first: pytest's verbose output is hundreds of node lines
        if _PYTEST_NODE.match(line) or _LISTING.match(line):
            continue  # a node line (``tests/x.py::test_y PASSED``: the summary says it) or a listing
        stripped = line.strip().strip("=-* ")
        if (
            len(stripped) > LINE_MAX_CHARS
            or not _THREE_LETTERS.search(stripped)
            or _CODE_LINE.match(line)
            or (_EXCEPTION_IN_LINE.search(line) and not reports_success(line))
        ):
            continue
        label = _LABEL_END.search(stripped)
        if label is not None and not _RESULT_LINE.search(stripped, 0, label.start()):
            continue  # a label, the result on the next lines (``SQLFluff output:``)
        if _RESULT_LINE.search(stripped) and not _TEST_SUMMARY.match(line):
            found.append((start + len(line) - len(line.lstrip()), stripped))
    return found


# --------------------------------------------------------------------------- noise

_BOILERPLATE_HOSTS = re.compile(
    r"^[a-z+.\-]+://(?:www\.)?(?:w3\.org|schemas?\.[\w.]+|xmlns\.[\w.]+|json-schema\.org|"
    r"purl\.org|opensource\.org|gnu\.org/licenses|apache\.org/licenses|creativecommons\.org|"
    r"docs\.pytest\.org/en/[\w.]+/how-to/capture-warnings|pip\.pypa\.io|bugs\.python\.org|"
    r"fsf\.org|localhost\.localdomain|sphinx-doc\.org|"
    r"python\.org/dev/peps|docs\.python\.org|setuptools\.pypa\.io|packaging\.python\.org|"
    r"github\.com/[\w.\-]+/[\w.\-]+/(?:blob|raw)/[\w.\-]+/(?:LICENSE|COPYING))",
    re.IGNORECASE,
)
_ASSET = re.compile(r"\.(?:png|jpe?g|gif|svg|ico|webp|woff2?|ttf|eot|css|map)$", re.IGNORECASE)
_ASSET_DIRS = frozenset({"img", "images", "static", "assets", "icons", "fonts", "media", "css"})


def boilerplate_url(url: str) -> bool:
    """Schemas, licences, tool documentation: URLs every log repeats and no one needs."""
    return bool(_BOILERPLATE_HOSTS.match(url))


def is_asset_path(path: str) -> bool:
    """A static asset of a web app (``/settings/img/admin.svg``): context, not a fact."""
    if not _ASSET.search(path):
        return False
    parts = {p.lower() for p in path.replace("\\", "/").split("/")[:-1]}
    return bool(parts & _ASSET_DIRS)
