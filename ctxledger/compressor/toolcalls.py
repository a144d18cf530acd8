"""What a tool call is: its family (terminal, read, write, ...) and its arguments as a dict.

One place for the tool-name and argument knowledge that phase-1 pruning
(:mod:`ctxledger.compressor.prune`), the offline summarizer's analysis
(:mod:`ctxledger.compressor.summarizers.analysis`) and fact extraction
(:mod:`ctxledger.compressor.facts`) share, so the three agree on which tool runs a shell
command and where a path or a command sits in the arguments.

Real logs name the same tools many ways (``bash``, ``exec_command``,
``functions.bash``, ``mcp__server__run_shell``); :func:`tool_family` drops the
namespace and maps the bare name onto one family. :func:`parse_arguments` never
raises: a JSON object gives that object; anything else that is not empty (invalid
JSON, a JSON string or list, a non-string value) is kept under :data:`RAW_KEY`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from ctxledger.compressor.factsentences import cap_text

__all__ = [
    "COMMAND_KEYS",
    "DIR_KEYS",
    "EDITOR_TOOLS",
    "ELIDED",
    "FAMILIES",
    "FILE_SEARCH_TOOLS",
    "PATH_KEYS",
    "RAW_KEY",
    "TERMINAL_COMMAND_KEYS",
    "ResultText",
    "ToolFamily",
    "bare_tool_name",
    "call_name_and_args",
    "call_parts",
    "command_fact",
    "command_line",
    "parse_arguments",
    "result_text",
    "tool_family",
]

ToolFamily = Literal["terminal", "read", "write", "patch", "search", "web_search", "other"]


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_TERMINAL = frozenset(_words(
    "terminal bash shell sh zsh powershell cmd command exec execute run run_shell "
    "execute_bash execute_command exec_command run_command run_shell_command "
    "run_terminal_cmd run_terminal_command local_shell"
))  # fmt: skip
_READ = frozenset(_words("read_file read view open cat view_file open_file read_text_file"))
_SEARCH = frozenset(_words(
    "search_files grep search rg ripgrep grep_search file_search find find_file find_files "
    "search_file search_dir glob codebase_search"
))  # fmt: skip
_WRITE = frozenset(_words("write_file write create_file write_to_file save_file"))
_PATCH = frozenset(_words(
    "patch edit edit_file str_replace_editor str_replace_based_edit_tool apply_patch "
    "str_replace replace_in_file multi_edit multiedit apply_diff insert"
))  # fmt: skip
_WEB_SEARCH = frozenset(_words(
    "web_search websearch search_web brave_search google_search tavily_search bing_search "
    "duckduckgo_search internet_search"
))  # fmt: skip

#: search tools that find files by name, not lines by content (a subset of "search")
FILE_SEARCH_TOOLS = frozenset(_words("find find_file find_files glob file_search"))
#: one tool, several verbs (view / create / str_replace ...) chosen by its ``command`` argument
EDITOR_TOOLS = frozenset(_words("str_replace_editor str_replace_based_edit_tool"))

#: family -> the bare tool names in it ("other" is every name not listed)
FAMILIES: Mapping[ToolFamily, frozenset[str]] = {
    "terminal": _TERMINAL, "read": _READ, "write": _WRITE, "patch": _PATCH,
    "search": _SEARCH, "web_search": _WEB_SEARCH,
}  # fmt: skip
_BY_NAME: dict[str, ToolFamily] = {
    name: family for family, names in FAMILIES.items() for name in names
}

#: argument names holding a file path, most common first
PATH_KEYS = _words("path file_path filepath file filename target_file absolute_path uri")
#: argument names holding a directory (a search's scope, a command's working directory)
DIR_KEYS = _words("dir directory root cwd search_path folder")
#: argument names holding a shell command, whatever the tool
COMMAND_KEYS = _words("command cmd commands shell_command script")
#: where a terminal tool's command may be: also its generic input, or the raw arguments
RAW_KEY = ""
TERMINAL_COMMAND_KEYS = (*COMMAND_KEYS, "input", "code", RAW_KEY)


@functools.lru_cache(maxsize=1024)
def bare_tool_name(name: str) -> str:
    """The name lower-cased, without namespaces (``functions.bash``, ``mcp__srv__bash`` -> ``bash``)."""
    return name.strip().lower().rsplit(".", 1)[-1].rsplit("__", 1)[-1]


def tool_family(name: Any) -> ToolFamily:
    """terminal, read, write, patch, search, web_search, or other (also for a non-string)."""
    return _family(name) if isinstance(name, str) else "other"


@functools.lru_cache(maxsize=1024)
def _family(name: str) -> ToolFamily:
    return _BY_NAME.get(bare_tool_name(name), "other")


def parse_arguments(arguments: Any) -> dict[str, Any]:
    """A tool call's arguments as a dict (a copy when given a mapping). Never raises.

    A JSON object string gives that object; an empty string or None gives {}; any
    other value (invalid JSON, a JSON string, list or number, a non-string) is kept
    whole as ``{RAW_KEY: value}`` so callers can still show or scan it.
    """
    if type(arguments) is str or isinstance(arguments, str | bytes | bytearray):
        if not arguments:
            return {}
        try:
            value = msgspec.json.decode(arguments)
        except (msgspec.DecodeError, RecursionError):
            text = (
                arguments
                if isinstance(arguments, str)
                else bytes(arguments).decode("utf-8", "replace")
            )
            return {RAW_KEY: text}
        return value if isinstance(value, dict) else {RAW_KEY: value}
    if isinstance(arguments, Mapping):
        return dict(arguments)
    return {} if arguments is None else {RAW_KEY: arguments}


def call_parts(call: Any) -> tuple[str, Any]:
    """(name, raw arguments) of one OpenAI tool-call object; odd shapes give ("", None)."""
    # exact type checks first: an ABC isinstance check costs more than the rest of this
    # function, and the planner calls it for every long tool result
    fn = call.get("function") if type(call) is dict or isinstance(call, Mapping) else None
    if type(fn) is not dict and not isinstance(fn, Mapping):
        return "", None
    name = fn.get("name")
    return name if type(name) is str or isinstance(name, str) else "", fn.get("arguments")


def command_line(command: str) -> str:
    """The line of a shell command that says what it runs: its first non-blank line that
    is no ``#`` comment (``# Let me create a test`` of an agent's script, ``#!/bin/bash``
    are no commands). A command of blanks and comments only: its first non-blank line."""
    return _command_line_at(command)[1]


def _command_line_at(command: str) -> tuple[int, str]:
    """(where it starts in `command`, :func:`command_line`): the offset of that line
    itself, not of the first text equal to it (which may lie in a comment before it:
    ``# python3 -c "`` then ``python3 -c "``)."""
    first: tuple[int, str] | None = None
    start = 0
    for line in command.splitlines(keepends=True):
        body = line.splitlines()[0] if line else line
        stripped = body.lstrip()
        if stripped and not stripped.startswith("#"):
            return start, body
        if first is None and stripped:
            first = (start, body)
        start += len(line)
    return first or (0, "")


def command_fact(command: str, limit: int | None = None) -> str:
    """What a shell command states as a fact: its :func:`command_line`, or, when that
    line leaves a quote open (``cd /testbed && python3 -c "`` then a script), the line
    and the rest of the command after it on one line (blanks collapsed). The open line
    alone names no script: every inline script of a session shares it, so a summary
    that kept any of them would state all of them.

    With `limit`, cut to at most `limit` characters: a line at a blank near the end
    (:func:`.factsentences.cap_text`); a script longer than that keeps its start and
    its end, its middle left out (:func:`elided`): scripts that share a preamble (a
    django settings block) are told apart by how they end."""
    start, line = _command_line_at(command)
    if not _leaves_quote_open(line):
        return line if limit is None else cap_text(line, limit)
    script = " ".join(command[start:].split())
    return script if limit is None else elided(script, limit)


#: what stands for the middle an inline script's fact leaves out (``head [...] tail``)
ELIDED = " [...] "
#: how many of an inline script's last characters its fact keeps, at most
SCRIPT_TAIL = 56
#: how many characters an inline script's kept end has at least, one a word character:
#: an end of a lone ``"`` (a long last token, then the closing quote) tells no scripts
#: apart, so such a script keeps the old cut (its start alone)
TAIL_MIN = 8
_WORD = re.compile(r"\w")


def elided(script: str, limit: int) -> str:
    """`script` (one line, blanks single) when it fits in `limit` characters; else its
    start cut at a blank (:func:`.factsentences.cap_text`), :data:`ELIDED`, and its end
    from the first word after a blank in its last :data:`SCRIPT_TAIL` characters (no
    blank there: the start alone, as before). The matcher finds such a fact where its
    start is found and its end after it in the same text (:mod:`.factelided`)."""
    if len(script) <= limit:
        return script
    blank = script.find(" ", len(script) - SCRIPT_TAIL, len(script) - 1)
    tail = script[blank + 1 :]
    if blank == -1 or len(tail) < TAIL_MIN or _WORD.search(tail) is None:
        return cap_text(script, limit)
    return cap_text(script, limit - len(ELIDED) - len(tail)) + ELIDED + tail


#: a line whose quotes all close, read as a shell reads them (a ``\\`` escapes the next
#: character outside single quotes; a last one outside quotes escapes the newline)
_QUOTES_CLOSED = re.compile(r"""(?:[^'"\\]|\\.|\\\Z|'[^']*'|"(?:[^"\\]|\\.)*")*""", re.DOTALL)


def _leaves_quote_open(line: str) -> bool:
    """Whether `line` ends inside a ``'`` or ``"`` string (:data:`_QUOTES_CLOSED`)."""
    return ("'" in line or '"' in line) and _QUOTES_CLOSED.fullmatch(line) is None


def call_name_and_args(call: Any) -> tuple[str, dict[str, Any]]:
    """(name, parsed arguments) of one tool-call object; name is "" when missing."""
    name, arguments = call_parts(call)
    return name, parse_arguments(arguments)


# --- tool results ------------------------------------------------------------------------


class ResultText(str):
    """A non-string tool result's text, carrying how to state its real size and type."""

    chars_label: str
    result_label: str


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word if n == 1 else word + 's'}"


def result_text(content: Any) -> str:
    """A tool result's content as text; a non-string one states its real size and type.

    A string is returned as it is. Anything else (None, a list of parts, a number, an
    object) becomes a :class:`ResultText` whose ``chars_label`` / ``result_label``
    say what it really was ("no content", "300 chars in 1 text part", "5-char number"),
    so a one-liner never prints "None" or a Python repr's length.
    """
    if isinstance(content, str):
        return content
    if content is None:
        text, chars, result = "", "no content", "no content"
    elif isinstance(content, list):
        texts = [
            p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        ]
        text = "\n".join(texts)
        others = len(content) - len(texts)
        parts = _plural(len(texts), "text part") + (
            f", {_plural(others, 'non-text part')}" if others else ""
        )
        chars, result = f"{len(text):,} chars in {parts}", f"{len(text):,}-char result in {parts}"
    else:
        kind = "number" if isinstance(content, int | float) else type(content).__name__
        kind = "JSON object" if isinstance(content, Mapping) else kind
        text = json.dumps(content, ensure_ascii=False, default=str)
        chars, result = f"{len(text):,}-char {kind}", f"{len(text):,}-char {kind} result"
    out = ResultText(text)
    out.chars_label, out.result_label = chars, result
    return out
