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
``foobar``. Extraction is deterministic: facts come in message order, then by kind
(:data:`FACT_KINDS`), then by position; a normalized value is reported once, at its
first occurrence.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import accumulate
from typing import Any

# rules changed since c2756f6 (session 28), not fast paths: shared with the module under test
from ctxledger.compressor.factasks import is_acknowledgement
from ctxledger.compressor.factbounds import matches_at_start
from ctxledger.compressor.factmatch import Fact, fact_in_text, normalize_fact, retention
from ctxledger.compressor.factnormal import WHITESPACE, normalize
from ctxledger.compressor.facts import (
    _NUMBER_PATTERNS,
    _VERSION_AFTER_NAME,
    VERSION_RANGE_TO,
)
from ctxledger.compressor.toolcalls import (
    COMMAND_KEYS,
    EDITOR_TOOLS,
    TERMINAL_COMMAND_KEYS,
    bare_tool_name,
    call_name_and_args,
    tool_family,
)
from ctxledger.messages import content_text
from helpers.reference_facts.factkinds import (
    CATEGORIES,
    boilerplate_url,
    edit_lines,
    error_lines,
    exit_code,
    is_asset_path,
    outcome_lines,
    script_error_lines,
    shell_error_lines,
)
from helpers.reference_facts.factkinds import _error_lines as _error_lines
from helpers.reference_facts.factlines import slash_cut
from helpers.reference_facts.factpaths import (
    bounded,
    find_paths,
    is_word_char,
    mask,
    path_text,
    paths,
    plausible_path,
    urls,
)
from helpers.reference_facts.factsentences import constraint_sentences, decision_sentences
from helpers.reference_facts.numbering import code_spans, fenced, numbered_listing
from helpers.reference_facts.rules import (
    amounts,
    european_grouped,
    in_file_listing,
    joined_version,
    timestamps,
)

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
        "command",
        "cmd",
        "shell_command",
        "script",
        "commands",
        "code",
        "content",
        "text",
        "patch",
        "diff",
        "old_str",
        "new_str",
        "old_string",
        "new_string",
        "file_text",
        "new_content",
        "body",
        "message",
        "input",
        "query",
        "prompt",
        "description",
        "reason",
        "summary",
        "note",
        "thought",
    }
)
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

# (pattern, template, characters that may not precede a match besides word characters;
# None: no check). The boundary is checked in Python (see bounded): a leading
# lookbehind would make the regex engine try every position of a long tool output.
# ``Django 3.2``: found from the version, then the word before it is checked.
_VERSIONED_NAMES = _words(
    "python django node nodejs npm pip go rust java ruby php postgresql postgres mysql redis "
    "ubuntu debian numpy pandas pytest react typescript gcc clang cuda torch version release"
)

_QUOTED = re.compile(r"(\"|')([^\"'\n]{2,80}?)\1(?![\w])")

# Interpreter and library internals (traceback frames): context, not salient facts.


# --------------------------------------------------------------------------- helpers


def _diff_side(text: str, position: int, value: str) -> bool:
    """Session 31: a path ``a/…`` or ``b/…`` on a diff's header line (its line starts
    ``diff --git ``, or it comes right after a leading ``--- `` or ``+++ ``)."""
    if value[:2] not in ("a/", "b/") or value[2:3] == "/":
        return False  # (review fixes: ``a///x`` is no side of ``//x``)
    line = text[:position].split("\n")[-1]
    if line in ("--- ", "+++ ", "diff --git "):
        return True
    # review fixes: on a ``diff --git`` line, the second side only (one word before it)
    first = line.removeprefix("diff --git ")
    one_word = len(first) > 1 and first.endswith(" ") and " " not in first[:-1]
    return line.startswith("diff --git ") and one_word


def ask_value(text: str) -> str:
    """Session 39, review 1 of ``audit4``: the turn, its whitespace collapsed, cut to
    ASK_MAX_CHARS: the cap's cut when the matcher matches it at the turn's start, else
    the longest prefix ending in the cap's last 40 % it matches there, else none (a cut
    inside a word is found nowhere: the audit told a live turn's ask LOST).

    Review 2: "at the start" is read in the turn's first ASK_MAX_CHARS + 64 characters
    or fewer: up to the last char there that NFKC composes with nothing before it (none:
    no ask), then ``_`` when more follows (more of a word). Every end is tried here (the
    code skips ends inside an ASCII word: never a match at the start)."""
    whole = WHITESPACE.sub(" ", text).strip()
    if len(whole) <= ASK_MAX_CHARS:
        return whole
    size = len(whole)
    if size > ASK_MAX_CHARS + 64:
        safe = [e for e in range(ASK_MAX_CHARS + 1, ASK_MAX_CHARS + 65) if _SAFE.match(whole[e])]
        if not safe:
            return ""
        size = safe[-1]
    start = normalize(whole[:size]) + ("_" if len(whole) > size else "")
    ends = range(ASK_MAX_CHARS, int(ASK_MAX_CHARS * 0.6), -1)
    cuts = [_cap(whole, ASK_MAX_CHARS), *(whole[:end].rstrip() for end in ends)]
    return next((cut for cut in cuts if matches_at_start(start, normalize_fact("ask", cut))), "")


#: ASCII, CJK punctuation and ideographs, kana, Hangul syllables, full-width ASCII
_SAFE = re.compile(
    "[\x00-\x7f\u3000-\u3029\u3030-\u303f\u3041-\u3096\u30a1-\u30fa"
    "\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3\uff01-\uff5e]"
)


def _cap(text: str, limit: int) -> str:
    """`text` cut to at most `limit` chars, at a space when one is near the end."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", int(limit * 0.6), limit)
    return text[: cut if cut > 0 else slash_cut(text, limit)].rstrip()


#: the number patterns of the module under test whose rules are stated here (the
#: amount and the timestamp, session 30's review 1d and 1e), by the pattern
_OWN_NUMBERS: dict[re.Pattern[str], Callable[[str], Iterator[tuple[int, str]]]] = {
    _NUMBER_PATTERNS[-2][0]: amounts,
    _NUMBER_PATTERNS[-1][0]: timestamps,
}
assert "$" in _NUMBER_PATTERNS[-2][0].pattern and "{4}" in _NUMBER_PATTERNS[-1][0].pattern


def _numbers(text: str) -> Iterator[tuple[int, str]]:
    joined: set[int] = set()  # session 30: where a numeric pre-release joined to its version starts
    for pattern, template, not_before in _NUMBER_PATTERNS:
        if pattern in _OWN_NUMBERS:  # session 30's review: amounts, timestamps stated here
            for start, value in _OWN_NUMBERS[pattern](text):
                if not in_file_listing(text, start):
                    yield start, value
            continue
        matches = (
            pattern.finditer(text) if not_before is None else bounded(pattern, text, not_before)
        )
        for match in matches:
            if in_file_listing(text, match.start()):
                continue  # ``May  6  2025 tests`` of ``ls -l``: no count
            if template == "version":  # ``1.0.0``, or ``1.0.0-0.3.7`` joined (prerelease_end)
                if european_grouped(text, match.start(1), match.group(1)):
                    continue  # session 31: ``1.234.567,89`` is one number
                if match.start() not in joined:
                    yield match.start(), joined_version(text, match.end(1), match.group(1), joined)
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
            whole = joined_version(text, match.end(), value, joined)
            yield start, whole
            upper = VERSION_RANGE_TO.match(text, match.end())
            if upper is not None and whole == value:
                yield upper.start(1), f"{text[start : match.start()]} {upper.group(1)}"


def _quoted(text: str, spans: list[tuple[int, int]]) -> Iterator[tuple[int, str]]:
    """Quotes outside `spans` (code), each value as written (a code span inside one kept)."""
    for match in bounded(_QUOTED, mask(text, spans), "\\"):
        inner = text[match.start(2) : match.end(2)]
        if any(char in inner for char in "'\"\n"):
            continue  # (review 1: the quotes of a span inside are no value's)
        if inner.strip() == inner and sum(c.isalnum() for c in inner) >= 2:
            yield match.start(), inner


def _definitions(text: str) -> Iterator[tuple[int, str]]:
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
    for pattern in (_SNAKE, _CAMEL):
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
        self.items: list[_Item] = []

    def add(self, kind: str, position: int, value: str) -> None:
        if value:
            self.items.append((_RANK[kind], position, kind, value))

    def scan(self, text: str, offset: int, *, prose: bool, errors: bool = True) -> str:
        """Facts of free text; returns `text` with its URLs and paths blanked out."""
        found = urls(text)
        for start, _, value in found:
            if not boilerplate_url(value):
                self.add("url", offset + start, value)
        masked = mask(text, [(start, end) for start, end, _ in found])
        path_spans: list[tuple[int, int]] = []
        for position, value in paths(path_text(masked)):
            if not is_asset_path(value):
                if _diff_side(text, position, value):  # session 31: git's a/ and b/
                    self.add("path", offset + position + 2, value[2:])
                else:
                    self.add("path", offset + position, value)
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
        if prose:
            # String literals of code blocks and spans are mostly noise; quotes in prose are not.
            for position, value in _quoted(text, code_spans(text)):
                self.add("quoted", offset + position, value)
        for match in _DOLLAR_LINE.finditer(text):
            self.add("command", offset + match.start(1), _cap(match.group(1), COMMAND_MAX_CHARS))
        return mask(masked, path_spans)

    def lines(self, text: str, role: str) -> None:
        """The line and sentence kinds: errors and outcomes a tool or user shows, choices, constraints."""
        if role in ("tool", "user"):
            for position, value in (*shell_error_lines(text), *script_error_lines(text)):
                self.add("error", position, value)
            for position, value in outcome_lines(text):
                self.add("outcome", position, value)
        if role == "assistant":
            for position, value in decision_sentences(text):
                self.add("decision", position, value)
        elif role == "user":
            blocks = fenced(text)
            for position, value in constraint_sentences(text):
                inside = any(start <= position < end for start, end in blocks)
                if not inside and not numbered_listing(value, text[position : position + 200]):
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
                self.add("command", offset, _command_fact(value))
            if lowered in _FREE_TEXT_KEYS or not key or len(value) > 80 or "\n" in value:
                # a multi-line argument is a script or a file body, a command is code: not prose
                prose = "\n" not in value.strip() and lowered not in command_keys
                masked = self.scan(value, offset, prose=prose, errors=False)
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
        found.add("ask", -1, ask_value(text))
    found.scan(text, 0, prose=role in ("user", "assistant"))
    if not (role == "user" and _is_summary(message)):
        found.lines(text, role)
    offset = len(text) + 1
    for call in message.get("tool_calls") or ():
        if isinstance(call, Mapping):
            offset = found.scan_call(call, offset)
    found.items.sort(key=lambda item: (item[0], item[1]))
    return _without_bare_names(found.items)


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


def _runs(command: str) -> tuple[int, str]:
    """Session 34: the line a command runs: its first line that holds more than blanks and
    does not start with ``#`` after them (a shell comment runs nothing); with none, its
    first line that holds more than blanks. Session 41: with where it starts in
    `command` (the same words may stand before it, in a comment)."""
    # (the offsets of the lines, then of the command's end: one more than the lines)
    starts = accumulate((len(piece) for piece in command.splitlines(keepends=True)), initial=0)
    numbered = zip(starts, command.splitlines(), strict=False)
    lines = [(at, line) for at, line in numbered if line.strip()]
    ran = [(at, line) for at, line in lines if not line.strip().startswith("#")]
    return (ran or lines or [(0, "")])[0]


def _script_or_runs(command: str) -> tuple[bool, str]:
    """Session 41: :func:`_runs`, unless a shell would read that line as ending inside a
    quote (an inline script's ``python3 -c "``): then it and all that follows it, with
    every run of blanks one space (session 42: with whether it is such a script)."""
    at, ran = _runs(command)
    try:
        shlex.split(ran + "_")  # (a last backslash escapes the ``_``, inside quotes or not)
    except ValueError as error:
        if "closing quotation" in str(error):
            return True, " ".join(command[at:].split())
    return False, ran


def _command_fact(command: str) -> str:
    """Session 42: a command's fact, :func:`_script_or_runs` cut to COMMAND_MAX_CHARS. A
    script too long for that is its first words (cut as a line is), ``" [...] "``, and
    the words its last 56 characters hold after their first blank; with no blank there
    it is cut as a line is, and so with an end under 8 characters or with no
    word character (a lone closing quote tells no scripts apart)."""
    script, value = _script_or_runs(command)
    if not script or len(value) <= COMMAND_MAX_CHARS:
        return _cap(value, COMMAND_MAX_CHARS)
    _, blank, tail = value[-56:].partition(" ")
    if not blank or len(tail) < 8 or not re.search(r"\w", tail):  # (session 42 fix round)
        return _cap(value, COMMAND_MAX_CHARS)
    return _cap(value, COMMAND_MAX_CHARS - len(" [...] ") - len(tail)) + " [...] " + tail
