"""Phase 1 of a compaction: cheap rewrites of old messages, no model call.

Three rewrites, each producing a full replacement message (never editing the input):

* a long tool result becomes an informative one-liner built from its call's name and
  arguments (``[bash] ran `pytest -q`: exited 1, 3,000 lines of output (81,204 chars)``),
  so the summarizer still learns what ran and how it ended;
* an identical tool result that appears again later becomes a duplicate marker
  naming the newer call (reading one file five times keeps only the newest copy);
* an assistant message whose tool-call arguments are huge gets every long string
  leaf shortened, keeping the arguments valid JSON (Hermes #11762: invalid JSON made
  providers answer 400 forever).

The planner decides *which* messages these apply to (only the summarized middle);
this module only knows how. Nothing here raises on odd input: an unparseable
argument string or an unexpected content shape falls back to a plainer wording.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import msgspec

from ctxledger.compressor.copies import (
    CopyGroups,
    comparable,
    group_copies,
    newest_copies,
    resolve_copies,
)
from ctxledger.compressor.toolcalls import (
    DIR_KEYS,
    EDITOR_TOOLS,
    FILE_SEARCH_TOOLS,
    PATH_KEYS,
    RAW_KEY,
    TERMINAL_COMMAND_KEYS,
    bare_tool_name,
    call_parts,
    parse_arguments,
    result_text,
    tool_family,
)
from ctxledger.limits import too_deep
from ctxledger.messages import Message

__all__ = [
    "CallInfo",
    "CopyGroups",
    "Prune",
    "PruneKind",
    "call_index",
    "call_info",
    "describe_tool_result",
    "duplicate_marker",
    "group_copies",
    "newest_copies",
    "prune_messages",
    "prune_one",
    "prune_tool_result",
    "resolve_copies",
    "truncate_arguments",
    "truncate_call_arguments",
]

PruneKind = Literal["tool_result", "duplicate", "args_truncated"]
#: one tool call's (tool name, raw arguments string)
CallInfo = tuple[str, str]


class Prune(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One phase-1 rewrite: message `index` is replaced by `replacement` (a full message).

    ``gc=False``: a Prune points at a new message that never points back, so it cannot
    be part of a reference cycle; a plan makes thousands of them, untracked.
    """

    index: int
    kind: PruneKind
    replacement: dict[str, Any]


# --- one-liner formats -----------------------------------------------------------------
# Which tool names share a format, and where a path or command sits in the arguments, is
# ctxledger.compressor.toolcalls's knowledge (shared with the offline summarizer and fact extraction).


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# a terminal's command: a command key, its generic input, else the raw (non-JSON) arguments
_TERMINAL_KEYS = tuple(key for key in TERMINAL_COMMAND_KEYS if key != RAW_KEY)
_PATTERN_KEYS = _words("pattern query regex search_term search term q file_name glob")
_DIR_KEYS = ("path", *DIR_KEYS)
_OFFSET_KEYS = _words("offset start_line line from_line line_start start view_range")
_TEXT_KEYS = _words("content file_text text contents data new_content")
_QUERY_KEYS = _words("query q search_query search_term term")

_SHOWN_COMMAND_CHARS = 80
_SHOWN_VALUE_CHARS = 40
_SCAN_EDGE_CHARS = 400

_EXIT_RE = re.compile(
    r"<returncode>\s*(-?\d+)\s*</returncode>"
    r"|[\"']?(?:exit_code|exitcode|exit_status|returncode|return_code)[\"']?\s*[:=]\s*(-?\d+)"
    r"|exit(?:ed)?(?:\s+with)?\s+(?:code|status)\s*:?\s*(-?\d+)",
    re.IGNORECASE,
)
# "Found 12 matches for ..." (SWE-agent) or "No matches found"
_COUNT_SAID_RE = re.compile(
    r"\bfound\s+(\d[\d,]*)\s+(?:match|result|file)|\bno (?:match|result|file)(?:e?s)? found\b",
    re.IGNORECASE,
)
_PATCH_FILE_RE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", re.MULTILINE)


def _first(args: Mapping[str, Any], keys: Iterable[str]) -> Any:
    for key in keys:
        value = args.get(key)
        if value not in (None, "", [], {}):
            return value
    return None


def _short(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    # cut before collapsing whitespace: commands can be whole heredocs
    text = " ".join(text[: limit * 3].split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else words or word + 's'}"


def _count_lines(text: str, start: int = 0, end: int | None = None) -> int:
    """Lines in text[start:end], not counting one leading/trailing newline; blank text
    (only whitespace) has none. Copies nothing unless the text starts and ends blank."""
    end = len(text) if end is None else end
    if text.startswith("\n", start) and start < end:
        start += 1
    if end > start and text[end - 1] == "\n":
        end -= 1
    if end <= start:
        return 0
    if text[start].isspace() and text[end - 1].isspace() and not text[start:end].strip():
        return 0
    return text.count("\n", start, end) + 1


def _output_span(content: str) -> tuple[int, int]:
    """Where the command's own output is inside common wrappers (mini-swe tags, Hermes JSON)."""
    start = content.find("<output>", 0, 200)
    if start >= 0:
        end = content.rfind("</output>")
        return start + len("<output>"), end if end > start else len(content)
    return 0, len(content)


def _exit_code(content: str) -> str | None:
    if content.startswith("<returncode>"):  # mini-swe-agent's wrapper: the fast, common case
        end = content.find("</returncode>", 12, 40)
        if end > 0 and content[12:end].strip().lstrip("-").isdigit():
            return content[12:end].strip()
    edges = (
        content
        if len(content) <= 2 * _SCAN_EDGE_CHARS
        else (content[:_SCAN_EDGE_CHARS] + "\n" + content[-_SCAN_EDGE_CHARS:])
    )
    match = _EXIT_RE.search(edges)
    if match is None:
        return None
    return next(group for group in match.groups() if group is not None)


def _terminal_lines(content: str) -> int:
    if content.startswith("{") and len(content) < 500_000:
        try:
            data = msgspec.json.decode(str(content))  # a ResultText is a str subclass
        except msgspec.DecodeError:
            data = None
        if isinstance(data, dict):
            for key in ("output", "stdout", "result"):
                if isinstance(data.get(key), str):
                    return _count_lines(data[key])
    return _count_lines(content, *_output_span(content))


def _describe_terminal(name: str, args: Mapping[str, Any], content: str) -> str:
    command = _first(args, _TERMINAL_KEYS)
    if command is None and isinstance(args.get(RAW_KEY), str) and args[RAW_KEY].strip():
        command = args[RAW_KEY]
    shown = f"`{_short(command, _SHOWN_COMMAND_CHARS)}`" if command is not None else "a command"
    code = _exit_code(content)
    outcome = f"exited {code}" if code is not None else "finished"
    lines = _plural(_terminal_lines(content), "line")
    return f"[{name}] ran {shown}: {outcome}, {lines} of output ({_chars(content)})"


def _describe_read(name: str, args: Mapping[str, Any], content: str) -> str:
    path = _first(args, PATH_KEYS)
    offset = _first(args, _OFFSET_KEYS)
    if isinstance(offset, list):
        offset = offset[0] if offset else None
    where = _short(path, 120) if path is not None else "a file"
    start = _short(offset, 20) if offset is not None else "1"
    return f"[{name}] read {where} from line {start} ({_chars(content)})"


def _match_count(content: str) -> int:
    if content.startswith("{") and len(content) < 500_000:
        try:
            data = msgspec.json.decode(str(content))  # a ResultText is a str subclass
        except msgspec.DecodeError:
            data = None
        if isinstance(data, dict):
            for key in ("total_count", "count", "num_matches", "total", "match_count"):
                if isinstance(data.get(key), int):
                    return int(data[key])
            for key in ("matches", "results", "files"):
                if isinstance(data.get(key), list):
                    return len(data[key])
    head = content[:_SCAN_EDGE_CHARS]
    # both phrasings say "found"; the regex is costly enough to skip when it cannot match
    said = _COUNT_SAID_RE.search(head) if "found" in head.lower() else None
    if said:
        return int(said.group(1).replace(",", "")) if said.group(1) else 0
    return _count_lines(content)  # one match per line is how grep-like tools answer


def _describe_search(name: str, args: Mapping[str, Any], content: str, *, files: bool) -> str:
    pattern = _first(args, _PATTERN_KEYS)
    directory = _first({k: v for k, v in args.items() if k not in ("query", "pattern")}, _DIR_KEYS)
    target = args.get("target")
    if target not in ("content", "files"):
        target = "files" if files else "content"
    what = f"{target} search" if target == "files" else "content search"
    text = f"[{name}] {what}"
    if pattern is not None:
        text += f" for '{_short(pattern, 60)}'"
    if directory is not None:
        text += f" in {_short(directory, 80)}"
    # a non-string result (a ResultText) states its real size and type
    shape = (
        f" ({_chars(content)})"
        if type(content) is not str and hasattr(content, "chars_label")
        else ""
    )
    return f"{text}: {_plural(_match_count(content), 'match', 'matches')}{shape}"


def _describe_write(name: str, args: Mapping[str, Any], content: str) -> str:
    path = _first(args, PATH_KEYS)
    body = _first(args, _TEXT_KEYS)
    where = _short(path, 120) if path is not None else "a file"
    if isinstance(body, str):
        return f"[{name}] wrote {where} ({_plural(_count_lines(body), 'line')})"
    return f"[{name}] wrote {where} ({_result(content)})"


def _describe_patch(name: str, args: Mapping[str, Any], content: str) -> str:
    path = _first(args, PATH_KEYS)
    if path is None:
        patch_text = _first(args, ("input", "patch", "diff"))
        if isinstance(patch_text, str):
            files = _PATCH_FILE_RE.findall(patch_text)
            path = ", ".join(f.strip() for f in files[:3]) if files else None
    mode = args.get("mode") or args.get("command") or "edit"
    where = _short(path, 120) if path is not None else "a file"
    return f"[{name}] {_short(mode, 20)} in {where} ({_result(content)})"


def _describe_web_search(name: str, args: Mapping[str, Any], content: str) -> str:
    query = _first(args, _QUERY_KEYS)
    shown = f"'{_short(query, 80)}'" if query is not None else "(no query)"
    return f"[{name}] web search for {shown} ({_result(content)})"


def _describe_generic(name: str, args: Mapping[str, Any], content: str) -> str:
    # a null argument says nothing (and would print as "None"/"null")
    shown_args = [(k, v) for k, v in args.items() if k != RAW_KEY and v is not None][:2]
    pairs = [f"{key}={_short(value, _SHOWN_VALUE_CHARS)}" for key, value in shown_args]
    shown = " ".join(pairs)
    return f"[{name}] {shown} ({_result(content)})" if shown else f"[{name}] ({_result(content)})"


@functools.lru_cache(maxsize=1024)
def _format(name: str) -> str:
    """Which one-liner format a tool name gets (its family, refined for editors and file finds)."""
    bare = bare_tool_name(name)
    if bare in EDITOR_TOOLS:
        return "editor"
    family = tool_family(name)
    if family == "search" and bare in FILE_SEARCH_TOOLS:
        return "file_search"
    return "generic" if family == "other" else family


def _describe_editor(name: str, args: Mapping[str, Any], content: str) -> str:
    # one tool, several verbs: viewing is a read, creating is a write, the rest edits
    command = args.get("command")
    if command == "view":
        return _describe_read(name, args, content)
    if command == "create":
        return _describe_write(name, args, content)
    return _describe_patch(name, args, content)


_DESCRIBERS: dict[str, Callable[[str, Mapping[str, Any], str], str]] = {
    "terminal": _describe_terminal,
    "read": _describe_read,
    "web_search": _describe_web_search,
    "search": lambda n, a, c: _describe_search(n, a, c, files=False),
    "file_search": lambda n, a, c: _describe_search(n, a, c, files=True),
    "write": _describe_write,
    "patch": _describe_patch,
    "editor": _describe_editor,
    "generic": _describe_generic,
}


@functools.lru_cache(maxsize=1024)
def _display_name(name: str) -> str:
    return _short(name, 60) if name.strip() else "tool"


def _chars(content: str) -> str:
    # a plain str has no label: skip the (failing, costly) attribute lookup
    label = None if type(content) is str else getattr(content, "chars_label", None)
    return label or f"{len(content):,} chars"


def _result(content: str) -> str:
    label = None if type(content) is str else getattr(content, "result_label", None)
    return label or f"{len(content):,}-char result"


def describe_tool_result(name: str, arguments: Any, content: Any) -> str:
    """A one-line stand-in for a tool result, built from its call. Never raises.

    A result that is not a string (None, a list of parts, a number) is described by
    its real size and type, never as the text "None".

    Pure, so memoized: a live session is re-planned at every check, and the same
    results (the same string objects, whose hashes Python caches) come back each time.
    """
    if isinstance(name, str) and isinstance(arguments, str) and isinstance(content, str):
        return _describe_memo(name, arguments, content)
    return _describe(name, arguments, content)


def _describe(name: str, arguments: Any, content: Any) -> str:
    shown_name = _display_name(name) if isinstance(name, str) and name.strip() else "tool"
    text = result_text(content)
    try:
        args = parse_arguments(arguments)
        return _DESCRIBERS[_format(shown_name)](shown_name, args, text)
    except Exception:  # a one-liner must never break a compaction; fall back to the bare facts
        return f"[{shown_name}] ({_result(text)})"


_describe_memo = functools.lru_cache(maxsize=32_768)(_describe)


def duplicate_marker(name: str, newer_call_id: str, chars: int) -> str:
    """What an older copy of a repeated tool result becomes."""
    return (
        f"[{name}] same {chars:,}-char output as the later result of call {newer_call_id}; "
        "only that newer copy is kept"
    )


# --- argument truncation ---------------------------------------------------------------


def _truncation_mark(dropped: int) -> str:
    return f"…[{dropped:,} chars truncated]"


def _shorten_leaves(value: Any, keep: int) -> tuple[Any, bool]:
    if isinstance(value, str):
        if len(value) > keep:
            return value[:keep] + _truncation_mark(len(value) - keep), True
        return value, False
    if isinstance(value, dict):
        changed = False
        out: dict[Any, Any] = {}
        for key, item in value.items():
            out[key], item_changed = _shorten_leaves(item, keep)
            changed = changed or item_changed
        return out, changed
    if isinstance(value, list):
        items = [_shorten_leaves(item, keep) for item in value]
        return [item for item, _ in items], any(changed for _, changed in items)
    return value, False


def truncate_arguments(arguments: str, leaf_keep: int = 200) -> str:
    """Arguments with every string leaf cut to `leaf_keep` chars; the result is valid JSON.

    Arguments that are not JSON are cut as one string and encoded as a JSON string,
    so a provider never receives invalid JSON because of us (#11762).
    """
    try:
        if too_deep(arguments):  # stored before the depth limit existed: cut it as text
            raise ValueError("nested too deeply")
        value = json.loads(arguments)
    except (ValueError, TypeError, RecursionError):
        raw = arguments if isinstance(arguments, str) else str(arguments)
        if len(raw) > leaf_keep:
            raw = raw[:leaf_keep] + _truncation_mark(len(raw) - leaf_keep)
        return json.dumps(raw, ensure_ascii=False)
    shortened, changed = _shorten_leaves(value, leaf_keep)
    return json.dumps(shortened, ensure_ascii=False) if changed else arguments


def _shorten_call(call: Any, over: int, leaf_keep: int) -> Any:
    """The call with shortened arguments, or the very same object when nothing changes."""
    if not isinstance(call, Mapping):
        return call
    fn = call.get("function")
    if not isinstance(fn, Mapping):
        return call
    arguments = fn.get("arguments")
    if not isinstance(arguments, str) or len(arguments) <= over:
        return call
    shorter = truncate_arguments(arguments, leaf_keep)
    if shorter == arguments:
        return call
    return {**call, "function": {**fn, "arguments": shorter}}


def truncate_call_arguments(
    message: Mapping[str, Any], *, over: int = 500, leaf_keep: int = 200
) -> Message | None:
    """A copy of an assistant message with oversized call arguments shortened, or None."""
    calls = message.get("tool_calls")
    if message.get("role") != "assistant" or not isinstance(calls, list):
        return None
    new_calls = [_shorten_call(call, over, leaf_keep) for call in calls]
    if all(new is old for new, old in zip(new_calls, calls, strict=True)):
        return None
    return {**message, "tool_calls": new_calls}


# --- the pass ---------------------------------------------------------------------------


def call_info(call: Any) -> CallInfo:
    """(name, arguments) of one tool call object; odd shapes give ("tool", "")."""
    name, arguments = call_parts(call)
    return (
        name or "tool",
        arguments if type(arguments) is str or isinstance(arguments, str) else "",
    )


def call_index(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Tool call id -> the call object, for every call issued in `messages` (later ids win).

    The same map as the planner's ``Layout.call_of``; :func:`prune_messages` builds it
    only when the caller has none.
    """
    calls: dict[str, Any] = {}
    for msg in messages:
        if msg.get("role") != "assistant":
            continue
        for call in msg.get("tool_calls") or ():
            call_id = call.get("id") if isinstance(call, Mapping) else None
            if isinstance(call_id, str):
                calls[call_id] = call
    return calls


def prune_tool_result(
    index: int,
    message: Mapping[str, Any],
    call: CallInfo | None,
    *,
    newer_call_id: str | None = None,
    min_chars: int = 200,
) -> Prune | None:
    """The rewrite of one tool result, or None when it is short or a stand-in saves nothing.

    `call` is the (name, arguments) of the call it answers; `newer_call_id` names the
    call whose identical, newer result makes this one a duplicate.
    """
    if call is None:
        name = message.get("name")  # an orphan result: some logs still carry the tool name
        call = (name if isinstance(name, str) and name else "tool", "")
    name, arguments = call
    content = message.get("content")
    size = len(content) if type(content) is str else len(comparable(content) or "")
    if newer_call_id is not None:
        replacement = duplicate_marker(name, newer_call_id, size)
        kind: PruneKind = "duplicate"
    elif size > min_chars:
        replacement = (
            _describe_memo(name, arguments, content)  # the usual case, without re-checking types
            if type(name) is str and type(arguments) is str and type(content) is str
            else describe_tool_result(name, arguments, content)
        )
        kind = "tool_result"
    else:
        return None
    if len(replacement) >= size:  # a stand-in longer than the original saves nothing
        return None
    return Prune(index=index, kind=kind, replacement={**message, "content": replacement})


def prune_messages(
    messages: Sequence[Mapping[str, Any]],
    indices: Iterable[int],
    *,
    calls: Mapping[str, Any] | None = None,
    newest: Mapping[int, int] | None = None,
    min_chars: int = 200,
    args_over: int = 500,
    args_leaf_keep: int = 200,
) -> list[Prune]:
    """Phase-1 rewrites for the messages at `indices` (in index order); others untouched.

    `calls` maps a tool call id to its call object (:func:`call_index`) and `newest` an
    older tool result's index to its newest identical copy (:func:`newest_copies`, found
    across the whole list: a newer copy may sit in the tail). Both are built from
    `messages` when not given; the planner passes the ones its layout already has.
    Only messages listed in `indices` are rewritten.
    """
    if calls is None:
        calls = call_index(messages)
    if newest is None:
        newest = newest_copies(messages, min_chars)
    prunes = (
        prune_one(messages, i, calls, newest, min_chars, args_over, args_leaf_keep)
        for i in sorted(indices)
    )
    return [p for p in prunes if p is not None]


def prune_one(
    messages: Sequence[Mapping[str, Any]],
    i: int,
    calls: Mapping[str, Any],
    newest: Mapping[int, int],
    min_chars: int,
    args_over: int,
    args_leaf_keep: int,
) -> Prune | None:
    """The phase-1 rewrite of message `i`, or None (see :func:`prune_messages`)."""
    msg = messages[i]
    role = msg.get("role")
    if role == "tool":
        call_id = msg.get("tool_call_id")
        call = calls.get(call_id) if isinstance(call_id, str) else None
        newer = newest.get(i)
        newer_id = str(messages[newer].get("tool_call_id")) if newer is not None else None
        return prune_tool_result(
            i,
            msg,
            call_info(call) if call is not None else None,
            newer_call_id=newer_id,
            min_chars=min_chars,
        )
    if role == "assistant" and msg.get("tool_calls"):
        shorter = truncate_call_arguments(msg, over=args_over, leaf_keep=args_leaf_keep)
        return (
            Prune(index=i, kind="args_truncated", replacement=shorter)
            if shorter is not None
            else None
        )
    return None
