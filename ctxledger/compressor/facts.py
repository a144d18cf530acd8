"""Salient facts of a conversation, and whether a text (a summary) still holds them.

A *fact* is a short, exact value a continuation would need and could not rebuild
without the original turns: a file path, a URL, a shell command, an error line or
non-zero exit code, an identifier, a number with its context (``port 8080``,
``line 42``, ``v1.2.3``, ``3 failed``), a quoted value, or a user's ask; and the
lines of :mod:`ctxledger.compressor.factkinds` (edits, shell and script error lines,
test and script outcomes, decisions, constraints). The offline
summarizer packs them into its summary; ``ctxledger audit`` asks which ones a summary
lost and which message they came from.

Matching is normalized (:func:`normalize`): case-folded, whitespace collapsed, curly
quotes straightened, backslashes read as path separators; a fact that begins or ends
with a word character only matches on word boundaries, so ``foo`` is not found inside
``foobar``, a number not inside a longer one, a path not inside a longer path (see
:mod:`ctxledger.compressor.factmatch`). Extraction is deterministic: facts come in
message order, then by kind (:data:`FACT_KINDS`), then by position; a normalized value
is reported once, at its first occurrence.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ctxledger.compressor.factasks import ASK_MARGIN, ask_cut, is_acknowledgement
from ctxledger.compressor.factbounds import VERSION_RANGE_END, VERSION_SUFFIX, prerelease_end
from ctxledger.compressor.factfences import code_spans, needed_blocks
from ctxledger.compressor.factkinds import (
    CATEGORIES,
    boilerplate_url,
    constraint_sentences,
    decision_sentences,
    edit_lines,
    error_lines,
    exit_code,
    is_asset_path,
    outcome_lines,
    script_error_lines,
    shell_error_lines,
)
from ctxledger.compressor.factkinds import _error_lines as _error_lines
from ctxledger.compressor.factmatch import Fact, fact_in_text, normalize_fact, retention
from ctxledger.compressor.factnoise import diff_side, in_file_listing, stated
from ctxledger.compressor.factnormal import WHITESPACE, normalize
from ctxledger.compressor.factpaths import (
    bounded,
    find_paths,
    first_paths,
    is_word_char,
    mask,
    path_text,
    paths,
    plausible_path,
    urls,
)
from ctxledger.compressor.factscan import has_any, line_matches, may_have_digit
from ctxledger.compressor.factsentences import cap_text as _cap
from ctxledger.compressor.toolcalls import (
    COMMAND_KEYS,
    EDITOR_TOOLS,
    TERMINAL_COMMAND_KEYS,
    bare_tool_name,
    call_name_and_args,
    command_fact,
    tool_family,
)
from ctxledger.messages import content_text

#: every kind, in the order facts of one message are reported
FACT_KINDS: tuple[str, ...] = (
    "ask",
    "constraint",
    "error",
    "outcome",
    "edit",
    "command",
    "path",
    "url",
    "identifier",
    "number",
    "quoted",
    "decision",
)
ASK_MAX_CHARS = 300
COMMAND_MAX_CHARS = 200


# --------------------------------------------------------------------------- patterns

_FREE_TEXT_KEYS = frozenset(
    {
        "command", "cmd", "shell_command", "script", "commands", "code", "content", "text",
        "patch", "diff", "old_str", "new_str", "old_string", "new_string", "file_text",
        "new_content", "body", "message", "input", "query", "prompt", "description", "reason",
        "summary", "note", "thought",
    }
)  # fmt: skip
_DOLLAR_LINE = re.compile(r"^[ \t]*\$ +(\S[^\n]*)$", re.MULTILINE)

_DEFINITION = re.compile(
    r"(def|fn|function|class|func)\s+(?:\([^)\n]*\)\s*)?([A-Za-z_]\w*)\s*([(<:{])"
)
_BACKTICK = re.compile(r"`([^`\n]{1,80})`")
_IDENTIFIER_LIKE = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*(?:\(\))?")
# Both start only at an ASCII word start (the cheap lookbehind): trying every position
# inside a long run of letters made a 10 MB word cost minutes (quadratic backtracking).
_SNAKE = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z][A-Za-z0-9]*+(?:_[A-Za-z0-9]+)+(?![\w\-])")
_CAMEL = re.compile(
    r"(?<![A-Za-z0-9_])(?:[A-Z][a-z0-9]+|[a-z]++)(?:[A-Z][a-z0-9]+)+[A-Z]?(?![\w\-])"
)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_STOPWORDS = _words(
    "self cls none true false null args kwargs str int list dict set tuple bool float bytes "
    "object type len print range open main test tests data value values name key keys items "
    "result results return import from class def for while if else elif try except with pass "
    "break continue lambda yield async await json echo cat grep sed head tail find the and "
    "this that init new get put post delete yes no"
)

#: what makes a version longer (the matcher's rule): no version is found without it
_SUFFIX = VERSION_SUFFIX
#: the rest of a version after its dotted number: a pre-release (``-rc1``, ``-rc.1``), then
#: build metadata (``+build.5``, ``-rc.1+build.5``); not a range's other end
#: (``1.2.3-1.4.0`` is two versions). A numeric pre-release lower than the version
#: (``1.0.0-0.3.7``) is joined to it in Python (factbounds.prerelease_end)
_MORE = (
    r"(?:-" + VERSION_RANGE_END + r"[0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?"
    r"(?:\+[0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?"
)

# a number's end: no ASCII word character after it (``port 8080x``), nor a decimal part
# (``_ALL``: nor a comma's group); a CJK letter may follow (``8080端口``, as a summary writes)
_ENDS, _ENDS_ALL = r"(?![A-Za-z0-9_]|\.\d)", r"(?![A-Za-z0-9_]|[.,]\d)"
# (pattern, template, characters that may not precede a match besides word characters;
# None: no check). The boundary is checked in Python (see bounded): a leading
# lookbehind would make the regex engine try every position of a long tool output.
_NUMBER_PATTERNS: tuple[tuple[re.Pattern[str], str, str | None], ...] = (
    (re.compile(r"(?i:port)[ \t:=]+(\d{2,5})" + _ENDS), "port {1}", ""),
    (re.compile(r"((?:localhost|127\.0\.0\.1|0\.0\.0\.0):\d{2,5})" + _ENDS), "{1}", "."),
    (re.compile(r"([Ll]ines?) (\d++)(?:(?:\s*(?:-|–|to)\s*)(\d++))?+" + _ENDS_ALL), "line", ""),
    (
        re.compile(r"(v\d+(?:\.\d+)+" + _MORE + r")(?!\w|\.\w|" + _SUFFIX + ")"),
        "version",
        ".",
    ),
    (
        re.compile(
            r"(\d{1,9}\.\d{1,9}\.\d{1,9}" + _MORE + r")"
            r"(?![\w]|\.\d|" + _SUFFIX + ")"
        ),
        "version",
        ".",
    ),
    (
        re.compile(
            r"((?:\d{1,3}(?:,\d{3})+|\d{1,15})(?:/\d{1,15})? (?:passed|failed|errors?|skipped|"
            r"xfailed|xpassed|warnings?|"
            r"tests?|files?|lines?|matches|items|rows|records|commits|seconds|ms|minutes|hours|"
            r"bytes|KB|MB|GB|tokens|characters|chars|messages|retries|attempts|workers|"
            r"passengers|bags|nights|days))(?!\w)"
        ),
        "{1}",
        ".",
    ),
    # thousands groups (not ``$375,`` of ``$375, $500``), then a decimal point or comma (``$3,50``,
    # ``$1,2345``: the whole amount, never a part; ``$1.0.0``, ``$1.5_x`` are none, ``$5k`` too:
    # five thousand, and ``$5`` would be a false fact)
    (re.compile(r"(\$\d+(?:,\d{3})*(?:[.,]\d+)?)" + _ENDS_ALL), "{1}", None),
    # a timestamp with its fraction of a second (``.019077``, logging's ``,744``; not a
    # CSV field, ``,744,5``) and zone; a zone's offset only after seconds and not
    # followed by more of a time: ``10:00-11:30`` and ``10:00:00-11:30:00`` are time ranges
    (
        re.compile(
            r"(\d{4}(?<!\w\.\d{4})-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9}|,\d{3}(?!\d|[,.]\d))?"
            r"(?:Z|[+-]\d{2}:?\d{2}(?!:?\d))?|Z)?)?)(?![\w])"
        ),
        "{1}",
        # (a date after a dot after a word is part of a name or number: ``1.0.0.2024-05-20``;
        # not after ``..``, a range: ``2024-05-20..2024-05-25``)
        "-",
    ),
)
# ``Django 3.2``: found from the version, then the word before it is checked. A
# pre-release or build suffix is part of it (``release v2.0-rc1``), a word after a
# hyphen is not (``Python 3.8-compatible``); never the version without a suffix it has.
_VERSION_AFTER_NAME = re.compile(
    r" v?\d+(?:\.\d+)+(?:(?=" + _SUFFIX + r")-[0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?"
    r"(?:\+[0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?(?!\w|\.\w|" + _SUFFIX + ")"
)
#: a named range's other end (``Python 3.8-3.12``: Python 3.12 too)
VERSION_RANGE_TO = re.compile(r"-(v?\d+(?:\.\d+)+)(?!\w|\.\w|" + _SUFFIX + ")")
_VERSIONED_NAMES = _words(
    "python django node nodejs npm pip go rust java ruby php postgresql postgres mysql redis "
    "ubuntu debian numpy pandas pytest react typescript gcc clang cuda torch version release"
)

#: _CAMEL needs one
_CAPITALS = tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_QUOTED = re.compile(r"(\"|')([^\"'\n]{2,80}?)\1(?![\w])")


# --------------------------------------------------------------------------- helpers


#: a European grouped number's groups (``1.234.567``), before a decimal comma
_GROUPS = re.compile(r"\d{1,3}(?:\.\d{3})+")


def _grouped(text: str, match: re.Match[str]) -> bool:
    """Whether a version match is a European grouped number (``1.234.567,89``): groups
    of three digits after the first, then a ``,`` and a digit, which the matcher reads
    as more of the number (checked here, not in the pattern: a leading lookahead is
    tried at every position of every text)."""
    end = match.end(1)
    return (
        text.startswith(",", end)
        and end + 1 < len(text)
        and text[end + 1].isdecimal()
        and _GROUPS.fullmatch(match.group(1)) is not None
    )


def _joined_version(text: str, end: int, value: str, joined: set[int]) -> str:
    """`value` (a version ending at `end`) with its numeric pre-release (``1.0.0-0.3.7``),
    whose start then goes to `joined`: no version of its own."""
    tail = prerelease_end(text, end, value)
    if tail == -1:
        return value
    joined.add(end + 1)
    return value + text[end:tail]


def _numbers(text: str) -> Iterator[tuple[int, str]]:
    if not may_have_digit(text):
        return  # every number pattern needs a digit
    joined: set[int] = set()  # where a numeric pre-release joined to its version starts
    for pattern, template, not_before in _NUMBER_PATTERNS:
        matches = (
            pattern.finditer(text) if not_before is None else bounded(pattern, text, not_before)
        )
        for match in matches:
            if in_file_listing(text, match.start()):
                continue  # ``May  6  2025 tests`` of ``ls -l``: no count
            if template == "version":  # ``1.0.0``, or ``1.0.0-0.3.7`` joined (prerelease_end)
                if _grouped(text, match):
                    continue  # ``1.234.567,89``: a European grouped number, read whole
                if match.start() not in joined:
                    yield match.start(), _joined_version(text, match.end(1), match.group(1), joined)
            elif template == "line":
                if text[max(0, match.start() - 3) : match.start()] == '", ':
                    continue  # a traceback frame: its error line is the fact
                word = "lines" if match.group(3) else "line"
                tail = f"-{match.group(3)}" if match.group(3) else ""
                yield match.start(), f"{word} {match.group(2)}{tail}"
            else:
                yield match.start(), template.format(*(match.group(0), *match.groups()))
    for match in _VERSION_AFTER_NAME.finditer(text):
        start = match.start()
        while start > 0 and text[start - 1].isalpha():
            start -= 1
        if (
            text[start : match.start()].lower() in _VERSIONED_NAMES
            and (start == 0 or not (is_word_char(text[start - 1]) or text[start - 1] == "-"))
            and not in_file_listing(text, start)
        ):
            value = text[start : match.end()]
            whole = _joined_version(text, match.end(), value, joined)
            yield start, whole
            upper = VERSION_RANGE_TO.match(text, match.end())
            if upper is not None and whole == value:
                yield upper.start(1), f"{text[start : match.start()]} {upper.group(1)}"


def _quoted(text: str, code: list[tuple[int, int]]) -> Iterator[tuple[int, str]]:
    """The quoted strings of `text` whose quotes are outside `code`, each as written (a
    code span inside a quote stays in it: ``'Removed custom `distutils` handling'``)."""
    for match in bounded(_QUOTED, mask(text, code), "\\"):
        inner = text[match.start(2) : match.end(2)]
        if "'" in inner or '"' in inner or "\n" in inner:
            continue  # (review 1: a quote or newline of code inside it: ``"a`b" and "c`d"``)
        if inner.strip() == inner and sum(c.isalnum() for c in inner) >= 2:
            yield match.start(), inner


def _definitions(text: str) -> Iterator[tuple[int, str]]:
    if not has_any(text, ("def", "fn", "class", "func")):
        return
    for match in _DEFINITION.finditer(text):
        start = match.start()
        if start > 0 and not (text[start - 1].isspace() or text[start - 1] == "("):
            continue  # ``undefined``, ``subclass x``: not a definition keyword
        if match.group(1) != "class" and match.group(3) in ":{":
            continue  # ``this function too:`` is prose; functions are followed by ``(``
        if _good_identifier(match.group(2)):
            yield start, match.group(2)


def _good_identifier(name: str) -> bool:
    bare = name.removesuffix("()")
    return (
        len(bare) >= 3
        and bare.lower() not in _STOPWORDS
        and not (bare.startswith("__") and bare.endswith("__"))
        and any(c.isalpha() for c in bare)
    )


def _backticks(text: str) -> Iterator[tuple[int, str, str]]:
    """``(position, kind, value)``: identifier-like spans are identifiers, others quoted."""
    for match in _BACKTICK.finditer(text):
        inner = match.group(1).strip()
        if not inner:
            continue
        if _IDENTIFIER_LIKE.fullmatch(inner):
            if _good_identifier(inner):
                yield match.start(), "identifier", inner.removesuffix("()")
        elif len(inner) >= 2:
            yield match.start(), "quoted", inner


def _code_tokens(text: str) -> Iterator[tuple[int, str]]:
    for pattern, literals in ((_SNAKE, ("_",)), (_CAMEL, _CAPITALS)):
        if not has_any(text, literals):
            continue
        for match in bounded(pattern, text, ".-\\"):
            if _good_identifier(match.group(0)):
                yield match.start(), match.group(0)


def _string_leaves(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _string_leaves(v, str(k))
    elif isinstance(value, list):
        for item in value:
            yield from _string_leaves(item, key)


# --------------------------------------------------------------------------- extraction

_RANK = {kind: rank for rank, kind in enumerate(FACT_KINDS)}
_Item = tuple[int, int, str, str]


class _Found:
    """The raw facts of one message: ``(kind rank, position, kind, value)``."""

    def __init__(self) -> None:
        self.items: list[_Item | None] = []
        #: (kind, value) -> index of its item: a repeat is only kept when it comes first
        self._at: dict[tuple[str, str], int] = {}

    def add(self, kind: str, position: int, value: str) -> None:
        """Record a fact; a value seen again is kept once, at its first position.

        Same facts as keeping every repeat (a 10 MB text names one path 150,000
        times): the ordered extraction keeps the first of equal values; a repeat
        at an earlier position replaces the item and moves to the end, where the
        stable sort would have ranked it among equal positions.
        """
        if not value:
            return
        key = (kind, value)
        at = self._at.get(key)
        if at is not None:
            item = self.items[at]
            if item is None or position >= item[1]:
                return
            self.items[at] = None
        self._at[key] = len(self.items)
        self.items.append((_RANK[kind], position, kind, value))

    def sorted_items(self) -> list[_Item]:
        items = [item for item in self.items if item is not None]
        items.sort(key=lambda item: (item[0], item[1]))
        return items

    def scan(
        self,
        text: str,
        offset: int,
        *,
        prose: bool,
        errors: bool = True,
        blank_paths: bool = False,
        fences: list[tuple[int, int]] | None = None,
    ) -> str:
        """Facts of free text; with `blank_paths`, returns `text` with its URLs and paths
        blanked out (else "": blanking 150,000 paths of a long message costs ~0.1 s).
        `fences`: its fenced blocks if read already (:func:`needed_blocks`)."""
        found = urls(text)
        for start, _, value in found:
            if not boilerplate_url(value):
                self.add("url", offset + start, value)
        masked = mask(text, [(start, end) for start, end, _ in found])
        path_spans: list[tuple[int, int]] = []
        # each path once, at its first position (add() keeps that one of equal values),
        # unless every occurrence is to be blanked
        found_paths = paths(path_text(masked)) if blank_paths else first_paths(path_text(masked))
        assets: dict[str, bool] = {}  # a long text repeats its paths: judge each once
        for position, value in found_paths:
            asset = assets.get(value)
            if asset is None:
                asset = assets[value] = is_asset_path(value)
            if not asset:
                if value[:2] in ("a/", "b/") and value[2:3] != "/" and diff_side(text, position):
                    self.add("path", offset + position + 2, value[2:])  # git's a/ and b/
                else:
                    self.add("path", offset + position, value)
            if blank_paths:
                path_spans.append((position, position + len(value)))
        # what a call sends (code, a command) is not an error that happened
        for position, value in _error_lines(text) if errors else ():
            self.add("error", offset + position, value)
        for position, value in _definitions(text):
            self.add("identifier", offset + position, value)
        for position, kind, value in _backticks(text):
            self.add(kind, offset + position, value)
        for position, value in _numbers(masked):
            self.add("number", offset + position, value)
        if prose and has_any(text, ("'", '"')):
            # String literals of code blocks and spans are mostly noise; quotes in prose are not.
            for position, value in _quoted(text, code_spans(text, "'\"", fences)):
                self.add("quoted", offset + position, value)
        for match in line_matches(_DOLLAR_LINE, text):
            self.add("command", offset + match.start(1), _cap(match.group(1), COMMAND_MAX_CHARS))
        return mask(masked, path_spans) if blank_paths else ""

    def lines(self, text: str, role: str, constraints: list[tuple[int, str]]) -> None:
        """The line and sentence kinds: errors and outcomes a tool or user shows, choices, constraints."""
        if role in ("tool", "user"):
            for position, value in (*shell_error_lines(text), *script_error_lines(text)):
                self.add("error", position, value)
            for position, value in outcome_lines(text):
                self.add("outcome", position, value)
        if role == "assistant":
            for position, value in decision_sentences(text):
                self.add("decision", position, value)
        for position, value in constraints:
            self.add("constraint", position, value)

    def scan_call(self, call: Mapping[str, Any], offset: int) -> int:
        """Facts of one tool call's arguments; returns the next free position."""
        name, args = call_name_and_args(call)
        for line in edit_lines(name, args):
            self.add("edit", offset, line)
        leaves = list(_string_leaves(args))
        command_keys = TERMINAL_COMMAND_KEYS if tool_family(name) == "terminal" else COMMAND_KEYS
        if bare_tool_name(name) in EDITOR_TOOLS:  # its ``command`` is view / str_replace / ...
            leaves = [(k, v) for k, v in leaves if k.lower() != "command"]
        for key, value in leaves:
            lowered = key.lower()
            if lowered in command_keys:
                self.add("command", offset, command_fact(value, COMMAND_MAX_CHARS))
            if lowered in _FREE_TEXT_KEYS or not key or len(value) > 80 or "\n" in value:
                # a multi-line argument is a script or a file body, a command is code: not prose
                prose = "\n" not in value.strip() and lowered not in command_keys
                masked = self.scan(value, offset, prose=prose, errors=False, blank_paths=True)
                for position, token in _code_tokens(masked):
                    self.add("identifier", offset + position, token)
            else:
                self._scan_leaf(value, offset)
            offset += len(value) + 1
        return offset

    def _scan_leaf(self, value: str, offset: int) -> None:
        """A short structured argument value (an id, a name, a path, a city)."""
        value = value.strip()
        if "://" in value:
            self.scan(value, offset, prose=False, errors=False)
        elif " " in value:
            if any(c.isalnum() for c in value):
                self.add("quoted", offset, value)
            self.scan(value, offset, prose=False, errors=False)
        elif plausible_path(value) is not None:
            self.add("path", offset, plausible_path(value) or value)
        elif (
            any(c.isalpha() for c in value) and value.lower() not in _STOPWORDS and len(value) >= 2
        ):
            self.add("identifier", offset, value)
        else:
            self.scan(value, offset, prose=False, errors=False)


def _is_summary(message: Mapping[str, Any]) -> bool:
    # Imported here: the compressor package depends on this module, not the reverse.
    from ctxledger.compressor.markers import is_summary_message

    return is_summary_message(message)


def _message_items(message: Mapping[str, Any]) -> list[_Item]:
    found = _Found()
    role = str(message.get("role") or "")
    text = content_text(message)
    if (
        role == "user"
        and text.strip()
        and not _is_summary(message)
        and not is_acknowledgement(text)
    ):
        found.add("ask", -1, _ask(text))
    prose, summary = role in ("user", "assistant"), role == "user" and _is_summary(message)
    sentences = constraint_sentences(text) if role == "user" and not summary else []
    until = max((position for position, _ in sentences), default=-1) + 1
    fences = needed_blocks(text, "'\"" if prose else "", until)
    found.scan(text, 0, prose=prose, fences=fences)
    if not summary:
        found.lines(text, role, stated(text, sentences, fences))
    offset = len(text) + 1
    for call in message.get("tool_calls") or ():
        if isinstance(call, Mapping):
            offset = found.scan_call(call, offset)
    return _without_bare_names(found.sorted_items())


def _ask(text: str) -> str:
    """:func:`.ask_cut` of ``WHITESPACE.sub(" ", text)``: of a long text's prefix that
    collapses to over ASK_MAX_CHARS + ASK_MARGIN characters (a prefix of the whole's)."""
    size = _ASK_PREFIX
    while size < len(text):  # (a longer prefix while its whitespace collapses it away)
        if len(head := WHITESPACE.sub(" ", text[:size]).strip()) > ASK_MAX_CHARS + ASK_MARGIN:
            return ask_cut(head, ASK_MAX_CHARS, True)
        size *= 4
    return ask_cut(WHITESPACE.sub(" ", text), ASK_MAX_CHARS, False)


_ASK_PREFIX = 8 * ASK_MAX_CHARS


def _without_bare_names(items: list[_Item]) -> list[_Item]:
    """Drop a bare exception name (``ValueError``) when an error line of the message holds it."""
    lines = [value for _, _, kind, value in items if kind == "error" and " " in value]
    if not lines:
        return items
    return [
        item
        for item in items
        if not (item[2] == "error" and " " not in item[3] and any(item[3] in ln for ln in lines))
    ]


def extract_facts(
    messages: Sequence[Mapping[str, Any]], *, ids: Sequence[str] | None = None
) -> list[Fact]:
    """The salient facts of `messages`, each normalized value once, in a stable order.

    `ids` (parallel to `messages`) fills :attr:`Fact.message_id`.
    """
    if ids is not None and len(ids) != len(messages):
        raise ValueError(f"ids has {len(ids)} entries for {len(messages)} messages")
    seen: set[str] = set()
    facts: list[Fact] = []
    for index, message in enumerate(messages):
        role = str(message.get("role") or "")
        for _, _, kind, value in _message_items(message):
            normalized = normalize_fact(kind, value)
            if len(normalized) < 2 or normalized in seen:
                continue
            seen.add(normalized)
            facts.append(
                Fact(
                    kind=kind,
                    value=value,
                    normalized=normalized,
                    message_index=index,
                    message_id=ids[index] if ids is not None else None,
                    role=role,
                )
            )
    return facts


__all__ = [
    "CATEGORIES",
    "FACT_KINDS",
    "Fact",
    "error_lines",
    "exit_code",
    "extract_facts",
    "fact_in_text",
    "find_paths",
    "normalize",
    "normalize_fact",
    "outcome_lines",
    "retention",
]
