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
  said must or must not happen), as sentences.

Also the boilerplate filters: URLs of schemas, licences and tool documentation, and
static asset paths (``/settings/img/admin.svg``), which are noise, not facts.
:data:`CATEGORIES` names the category of every kind, as reports group them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

# rules changed since c2756f6 (session 28: prose about errors; session 29: build tools'
# error lines, asset paths written with backslashes), not fast paths: shared with the
# module under test
from ctxledger.compressor.factkinds import (
    TOOL_ERROR_LINE,
    _reports_error,
    is_asset_path,
    reports_tool_error,
)

# session 30's listings (code after a line number, a docstring's field); session 33's
# names alone after a bare number are stated in .numbering
from ctxledger.compressor.factnoise import listed_code_or_field
from ctxledger.compressor.toolcalls import EDITOR_TOOLS, bare_tool_name, tool_family
from helpers.reference_facts import factlines
from helpers.reference_facts.factlines import CODE_LINE, EXCEPTION_IN_LINE, code, label_off, success
from helpers.reference_facts.numbering import listed_name, numbered, version
from helpers.reference_facts.tags import closing_tag, opening_tag, tag_alone

__all__ = [
    "CATEGORIES",
    "LINE_MAX_CHARS",
    "SENTENCE_KINDS",
    "boilerplate_url",
    "edit_lines",
    "error_lines",
    "exit_code",
    "is_asset_path",
    "outcome_lines",
    "script_error_lines",
    "shell_error_lines",
]

LINE_MAX_CHARS = 160
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


def _cap(text: str, limit: int = LINE_MAX_CHARS) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", int(limit * 0.6), limit)
    return text[: cut if cut > 0 else factlines.slash_cut(text, limit)].rstrip()


def _lines_with(pattern: re.Pattern[str], text: str) -> list[tuple[int, str]]:
    """``(start, line)`` of each distinct line of `text` holding a match of `pattern`.

    One regex scan of the whole text, then only the matching lines are looked at: a
    per-line loop over a long tool output of few matching lines costs about twice as much.
    """
    out: list[tuple[int, str]] = []
    next_free = -1
    for match in pattern.finditer(text):
        if match.start() < next_free:
            continue
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.start())
        end = len(text) if end < 0 else end
        out.append((start, text[start:end]))
        next_free = end
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

_EXIT_CODES = (
    re.compile(r"<returncode>\s*(\d+)\s*</returncode>"),
    re.compile(r"[Ee]xit(?:ed)?(?: with)?(?: code| status)?[ :=]+(\d+)"),
    re.compile(r"non-zero exit status (\d+)"),
    re.compile(r"\"(?:exit_code|returncode|exitCode)\"\s*:\s*(\d+)"),
)
_EXCEPTION_LINE = re.compile(
    r"^[ \t]*((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Fault|Failure|Warning)"
    r"(?::[^\n]*)?)[ \t]*$",
    re.MULTILINE,
)
#: third review: a line with an exception group's border (``    | ValueError: 1``) after
#: the group's header only
_GROUP_EXCEPTION_LINE = re.compile(
    r"^[ \t]*\|[ \t]+" + _EXCEPTION_LINE.pattern.removeprefix(r"^[ \t]*"), re.MULTILINE
)
_GROUP_HEADER = "Exception Group Traceback (most recent call last):"
_ERROR_PREFIX_LINE = re.compile(
    r"^[ \t]*((?:error|fatal|npm err!|\[error\]|error\[\w+\]|failed(?! \()|fail:|panic:)(?=[:!\s\[])[^\n]*)$",
    re.MULTILINE | re.IGNORECASE,
)
_PYTEST_E_LINE = re.compile(r"^E {2,}(\S[^\n]*)$", re.MULTILINE)
_EXCEPTION_NAME = re.compile(r"[A-Z][A-Za-z0-9]*(?:Error|Exception)(?!\w)")
_EXCEPTION_ANCHOR = re.compile(r"(?:Error|Exception)(?!\w)")
_TRACEBACK = "Traceback (most recent call last):"


def _names_exception(line: str) -> bool:
    """Session 32: whether `line` starts with an exception's name, then ``:`` or the
    line's end: its last part capitalised, or dotted with a lower-case last part that
    ends in error or timeout (``struct.error``, ``socket.gaierror``)."""
    head = line.split(":", 1)[0]
    parts = head.split(".")
    if not all(
        part and part[0].isascii() and (part[0].isalpha() or part[0] == "_") for part in parts
    ):
        return False
    if not all(c.isalnum() or c == "_" for part in parts for c in part):
        return False
    last = parts[-1]
    if last[0].isupper() and last[0].isascii():
        return True  # (a class: ``ValueError``, ``django.http.Http404``)
    # (second review: a module's lower-case error or timeout, no file nor logger)
    lower = all(c == "_" or ("a" <= c <= "z") for c in last)
    return len(parts) > 1 and lower and last.endswith(("error", "timeout"))


def _traceback_error(lines: list[str]) -> str | None:
    """Session 32 (review): the error of one traceback's own lines (to the next header,
    cut at a chained ``During handling``/``The above exception``): of the first 64
    margin lines after its last frame, the first naming an exception, else the first;
    with none after it, the first margin line of all."""
    for index, line in enumerate(lines):
        if index and line.startswith(("During handling", "The above exception")):
            lines = lines[:index]
            break
    frames = [index for index, line in enumerate(lines) if line.startswith('  File "')]
    after = lines[frames[-1] + 1 :] if frames else lines

    def margin(chosen: list[str]) -> list[str]:
        # (session 33's review: a closing tag ends the wrapped output, and the traceback,
        # unless a line before it opens its tag: printed HTML)
        ended = [
            index
            for index, line in enumerate(chosen)
            if closing_tag(line) and closing_tag(line) not in map(opening_tag, chosen[:index])
        ]
        return [
            line
            for line in chosen[: ended[0] if ended else len(chosen)]
            if line
            and not line[0].isspace()
            and not line.startswith(("Traceback", "During", "The above"))
            and not tag_alone(line)  # (session 34: printed markup)
        ][:64]

    last = margin(after)
    named = [line for line in last if _names_exception(line)]
    chosen = named or last or margin(lines)
    return chosen[0] if chosen else None


def _unbordered(line: str) -> str:
    """`line` without an exception group's border: blanks, ``|`` or ``+``, then dashes
    and pluses, then one blank."""
    body = line.lstrip(" \t")
    if body[:1] not in ("|", "+"):
        return line
    body = body[1:].lstrip("-+")
    return body[1:] if body[:1] == " " else body


def _own_lines(text: str, start: int, end: int) -> list[str]:
    """The lines of a traceback whose header ends at `start`: to the text's end, or
    (session 33's review) to the line holding the next header at `end`, without that
    line; at most 20,000 characters."""
    lines = text[start:] if end == -1 else text[start:end]
    kept = lines.split("\n") if end == -1 else lines.split("\n")[:-1]
    return "\n".join(kept)[:20000].split("\n")


def _traceback_errors(text: str) -> list[tuple[int, str]]:
    """``(position, error)`` of each traceback of `text` (:func:`_traceback_error`)."""
    found: list[tuple[int, str]] = []
    start = text.find(_TRACEBACK)
    while start != -1:
        pos = start + len(_TRACEBACK)
        following = text.find(_TRACEBACK, pos)
        # session 32: a script's output interleaved is no error
        lines = _own_lines(text, pos, following)
        header = text[text.rfind("\n", 0, start) + 1 : start].lstrip(" \t")
        bordered = start - (text.rfind("\n", 0, start) + 1) <= 32  # (at most 32 before)
        ends = not lines[0].strip(" \t")  # (third review: the header ends its line)
        if bordered and ends and header[:1] in ("|", "+"):  # (second review: a group's border)
            lines = [_unbordered(line) for line in lines]
        error = _traceback_error(lines)
        if error is not None:  # (s40 review 1: a labelled line there is its exception line)
            found.append((start, _cap(label_off(start, error)[1])))
        start = following
    return found


def _error_lines(text: str) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for pattern in _EXIT_CODES:
        for match in pattern.finditer(text):
            digits = match.group(1)
            if len(digits) <= 20 and int(digits) != 0:  # session 30: 21 digits is no code
                found.append((match.start(), f"exit code {int(digits)}"))
    found.extend(_traceback_errors(text))
    group = text.find(_GROUP_HEADER)
    for pattern in (_EXCEPTION_LINE, _GROUP_EXCEPTION_LINE, _ERROR_PREFIX_LINE):
        for match in pattern.finditer(text):
            if pattern is _GROUP_EXCEPTION_LINE and not -1 < group < match.start():
                continue
            if pattern is _ERROR_PREFIX_LINE and not _reports_error(match.group(1)):
                continue  # (ctxledger's rule since s28: prose about errors is no error)
            at, value = label_off(match.start(1), match.group(1))
            found.append((at, _cap(value)))
    for match in TOOL_ERROR_LINE.finditer(text):
        if reports_tool_error(match.group(1)):
            found.append((match.start(1), _cap(match.group(1))))
    for match in _PYTEST_E_LINE.finditer(text):
        rest = match.group(1)
        if _EXCEPTION_NAME.match(rest) or rest.startswith("assert "):
            found.append((match.start(1), _cap(rest)))
    lines = [value for _, value in found]
    for match in _EXCEPTION_ANCHOR.finditer(text):
        start = match.start()
        while start > 0 and text[start - 1].isalnum():
            start -= 1
        if start == match.start() or not ("A" <= text[start] <= "Z"):
            continue
        if start > 0 and (text[start - 1] in "._" or text[start - 1].isalnum()):
            continue
        name = text[start : match.end()]
        line_start = text.rfind("\n", 0, start) + 1
        line_end = text.find("\n", start)
        line_end = len(text) if line_end == -1 else line_end
        own_line = text[line_start:line_end]
        far_start = start - line_start >= 400 if line_start > 0 else start > 400
        far_end = line_end - start >= 400 if line_end < len(text) else line_end - start > 400
        if far_start or far_end:
            own_line = ""  # (session 32: a line too long to tell, as the module's 400 window)
        if not any(name in line for line in lines) and not success(own_line):
            found.append((start, name))
    return found


def error_lines(text: str) -> list[str]:
    """The error facts of one text (exit codes, exception and error lines), in order, once."""
    seen: dict[str, None] = {}
    for _, value in sorted(_error_lines(text), key=lambda item: item[0]):
        seen.setdefault(value, None)
    return list(seen)


def exit_code(text: str) -> int | None:
    """The last exit code a tool result reports, if it reports one."""
    found: list[tuple[int, int]] = []
    for pattern in _EXIT_CODES:
        found.extend(
            (match.start(), int(match.group(1)))
            for match in pattern.finditer(text)
            if len(match.group(1)) <= 20  # session 30
        )
    return max(found)[1] if found else None


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
_FILE_STEMS = ("Make", "Docker", "Gem", "Proc", "Rake", "Vagrant", "Jenkins")


def shell_error_lines(text: str) -> list[tuple[int, str]]:
    """``(position, line)`` of the shell's own error lines (``prog: what: reason``)."""
    # (session 30: a listing's numbered line is no program's)
    found = []
    for m in _SHELL_ERROR.finditer(text):
        program, _, tail = m.group(1).lstrip(" \t").partition(":")
        if numbered(m.group(1)) or version(program, tail):
            continue  # session 33: a changelog's version (``3.0: x cannot be used``)
        # session 32: a capitalised label is no program (``Result: {'x': ['x cannot be']}``)
        # unless it names an error (``Exception: x not found``)
        prefix = m.group(1).lstrip().split(":", 1)[0]
        lowered = prefix.lower()
        erring = any(
            word in lowered
            for word in ("error", "exception", "fail", "fatal", "warn", "denied", "abort", "crash")
        )
        if (
            prefix[:1].isupper()
            and not erring
            and not any(c.isdigit() or c in "./" for c in prefix)
            # (review: a known file name is make's or docker's, no label)
            and not (prefix.endswith("file") and prefix[:-4] in _FILE_STEMS)
        ):
            continue
        # (s40 review 1: ``Error: FileNotFoundError: … No such file`` is its exception line)
        at, value = label_off(m.start(1), m.group(1))
        found.append((at, _cap(value)))
    return found


def script_error_lines(text: str) -> list[tuple[int, str]]:
    """``(position, line)`` of lines naming an exception *with* its message, as a script printed them.

    A line that is only the exception (``ValueError: x`` at the start of a line) is
    found by the exception-line rule of :mod:`facts`; code (``raise``, ``except``,
    traceback frames) is not an outcome.
    """
    found: list[tuple[int, str]] = []
    for start, line in _lines_with(EXCEPTION_IN_LINE, text):
        if len(line) > 400:
            continue
        stripped = line.strip()
        if CODE_LINE.match(line) or EXCEPTION_IN_LINE.match(stripped):
            continue
        if (
            sum(c.isalnum() for c in stripped) < 12
            or listed_name(line)
            or listed_code_or_field(line)
        ):
            continue  # (session 30: a listing's code, a docstring's field)
        if success(line) or code(line):
            continue  # (session 32: an expected or avoided exception; a tuple assigned)
        at, value = label_off(start + len(line) - len(line.lstrip()), stripped)
        found.append((at, _cap(value)))
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
    r"success(?:fully)?|succeeded|passed|"
    r"failed|works (?:correctly|as expected|now)|"
    r"(?:is|was|now) fixed|result(?:s)?\s*[:=]|output\s*[:=]|expected\b[^\n]*\bgot\b)|"
    r"\)\s*(?:returned|returns|raised)\b|[✓✔✗✘❌✅]"
)


def _holds_result(line: str) -> bool:
    """Whether `line` holds a result's words, a bare ``passed`` of prose aside."""
    return any(
        match.group(0).lower() != "passed" or not _passed_in_prose(line, match.end())
        for match in _RESULT_LINE.finditer(line)
    )


def _passed_in_prose(line: str, end: int) -> bool:
    """Session 32 (review): ``passed in``/``passed into`` of an argument (``the one
    passed in.``, ``passed in as the only``, ``the passed in path``, ``passed into
    this``), read word by word after the ``passed`` ending at `end`; not a place
    (``passed in the docker container``, ``passed in this environment``, ``passed in
    path mode``) nor a time (``passed in 0.2s``)."""
    rest = line[end:]
    after = rest.lstrip(" \t")
    if after == rest:
        return False
    word = ""
    for char in after:
        if not char.isalpha():
            break
        word += char
    if word.lower() not in ("in", "into"):
        return False
    tail = after[len(word) :].lstrip(" \t")
    if not tail or tail[0] in ".,;:!?)\n":
        return True
    following = ""
    for char in tail:
        if not (char.isalnum() or char == "_"):
            break
        following += char
    following = following.lower()
    if following == "path":  # (second review: only ``the passed in path``)
        before = line[: end - len("passed")]
        the = before[-4:-1].lower() == "the" and before[-1:] in (" ", "\t")
        return word.lower() == "in" and the and not _word_char(before[-5:-4])
    return following == "as" or (following == "this" and word.lower() == "into")


def _word_char(char: str) -> bool:
    return bool(char) and (char.isalnum() or char == "_")


_PYTEST_NODE = re.compile(r"\s*[\w/.\-]+::\w")
_THREE_LETTERS = re.compile(r"[^\W\d_](?:[\W\d_]*[^\W\d_]){2}")
#: a line of a file listing (``nl``, ``grep -n``, quoted source): code, not a result
_LISTING = re.compile(r"^\s*(?:\d+[:\-\t]|\d+\s{2,}|[\w/.\-]+\.\w+[:\-]\d+[:\-])|^\s*[\"'#]")


def outcome_lines(text: str) -> list[tuple[int, str]]:
    """``(position, line)`` of test summaries and a script's result lines."""
    found: list[tuple[int, str]] = []
    for match in _TEST_SUMMARY.finditer(text):
        found.append((match.start(1), match.group(1).rstrip(", ")))
    for match in _UNITTEST.finditer(text):
        found.append((match.start(1), match.group(1)))
    for start, line in _lines_with(_RESULT_LINE, text):
        # cheapest rejections first: pytest's verbose output is hundreds of node lines
        if _PYTEST_NODE.match(line) or _LISTING.match(line):
            continue  # a node line (``tests/x.py::test_y PASSED``: the summary says it) or a listing
        stripped = line.strip().strip("=-* ")
        if (
            len(stripped) > LINE_MAX_CHARS
            or not _THREE_LETTERS.search(stripped)
            or code(line)
            or (EXCEPTION_IN_LINE.search(line) and not success(line))
        ):
            continue
        if _label_only(stripped):
            continue  # session 33: ``SQLFluff output:``, the result on the next lines
        if _holds_result(stripped) and not _TEST_SUMMARY.match(line):
            found.append((start + len(line) - len(line.lstrip()), stripped))
    return found


def _label_only(line: str) -> bool:
    """Whether `line` ends with a result's label (``result:``, ``output :``) and holds no
    result before it. Case is ignored for ASCII letters only (review: ``reſult`` is no
    ``result``)."""
    if not line or line[-1] != ":":
        return False
    head = "".join(c.lower() if c.isascii() else c for c in line[:-1].rstrip(" \t"))
    for word in ("results", "result", "output"):
        before = head[: -len(word)]
        if head.endswith(word) and not (before and (before[-1].isalnum() or before[-1] == "_")):
            return not _holds_result(line[: len(before)])
    return False


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


def boilerplate_url(url: str) -> bool:
    """Schemas, licences, tool documentation: URLs every log repeats and no one needs."""
    return bool(_BOILERPLATE_HOSTS.match(url))
