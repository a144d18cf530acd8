"""Reading the middle turns for the offline summarizer: actions, outcomes, asks, text.

One pass over the (redacted) turns turns every tool call into an :class:`Action`
(verb, target, outcome, errors) and collects the user asks and assistant text the
section builders of :mod:`ctxledger.compressor.summarizers.offline` rank.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxledger.compressor.factkinds import edit_lines, error_lines, exit_code
from ctxledger.compressor.markers import is_summary_message
from ctxledger.compressor.toolcalls import (
    COMMAND_KEYS,
    DIR_KEYS,
    EDITOR_TOOLS,
    TERMINAL_COMMAND_KEYS,
    bare_tool_name,
    call_parts,
    command_line,
    parse_arguments,
    tool_family,
)
from ctxledger.compressor.toolcalls import PATH_KEYS as FILE_KEYS
from ctxledger.messages import content_text

VERBS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("write", "create", "save", "new_file"), "WROTE"),
    (("edit", "patch", "replace", "modify", "update", "insert", "apply"), "EDITED"),
    (("read", "view", "open", "cat", "show", "get_file", "load"), "READ"),
    (("search", "grep", "find", "glob", "list", "ls", "query", "lookup"), "SEARCHED"),
    (("delete", "remove", "rm", "cancel"), "REMOVED"),
    (("fetch", "http", "browse", "web", "url", "download"), "FETCHED"),
)
# an action's target: a file, else a directory (the shared key lists of ctxledger.compressor.toolcalls)
PATH_KEYS = (*FILE_KEYS, *DIR_KEYS)
#: an editor tool's ``command`` -> the action's verb; its bodies are the edit, not the target
_EDITOR_VERBS = {"view": "READ", "create": "WROTE", "str_replace": "EDITED", "insert": "EDITED"}
_EDITOR_BODY_KEYS = ("old_str", "new_str", "file_text", "insert_line", "view_range")
DETAILED_ACTIONS = 6  # the newest actions quote their output; older ones only its size
# a sentence (or clause) ends at . ! ? ; followed by white space (not inside ``utils.py`` or ``v1.2``)
SENTENCE = re.compile(r"(?:[^.!?;\n]|[.!?;](?=[^\s]))+[.!?;]?")


def collapse(text: str) -> str:
    return " ".join(text.split())


def cap(text: str, limit: int) -> str:
    """`text` in at most about `limit` chars, cut between words and never inside a `code` span."""
    text = collapse(text)
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit + 1)
    if cut <= 0:  # one long word: cut after its last punctuation, else keep it whole
        marks = [text.rfind(c, 0, limit) for c in "/.,;:)-_"]
        cut = max(marks) + 1 if max(marks) > limit // 2 else len(text)
    if text.count("`", 0, cut) % 2:  # the cut is inside a code span: cut before it
        cut = text.rfind("`", 0, cut)
        cut = text.rfind(" ", 0, cut) if text.rfind(" ", 0, cut) > 0 else cut
    head = text[:cut].rstrip(" ,;:")
    return head + " …" if head and len(head) < len(text) else text


def sentences(text: str, pattern: re.Pattern[str], limit: int) -> list[str]:
    return [
        cap(s, limit)
        for s in (m.group(0).strip() for m in SENTENCE.finditer(text))
        if len(s) > 12 and pattern.search(s)
    ]


# --------------------------------------------------------------------------- analysis


@dataclass
class Action:
    index: int
    tool: str
    verb: str
    target: str
    outcome: str
    failed: bool
    errors: list[str]
    command: str = ""
    path: str = ""
    #: the key lines the call's edit introduced (``factkinds.edit_lines``)
    edits: list[str] = field(default_factory=list)


@dataclass
class Analysis:
    asks: list[tuple[int, str]] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    assistant_texts: list[tuple[int, str]] = field(default_factory=list)
    results: dict[str, str] = field(default_factory=dict)
    last_text: str = ""


def call_arguments(call: Mapping[str, Any]) -> tuple[str, dict[str, Any], str]:
    """``(name or "?", parsed arguments, raw arguments text)`` of one tool call.

    Arguments that are not a JSON object are kept under ``toolcalls.RAW_KEY`` ("").
    """
    name, raw = call_parts(call)
    return name or "?", parse_arguments(raw), raw if isinstance(raw, str) else ""


def _verb(tool: str) -> str:
    words = set(re.findall(r"[a-z]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", tool).lower()))
    for names, verb in VERBS:
        if words.intersection(names):
            return verb
    return "CALLED"


def _result_body(text: str) -> str:
    return re.sub(
        r"<returncode>\s*-?\d+\s*</returncode>|</?(?:returncode|output)>", " ", text
    ).strip()


def _outcome(result: str | None, limit: int) -> tuple[str, bool, list[str]]:
    """``(outcome text, failed, error lines)`` of one tool result."""
    if result is None:
        return "no result yet", False, []
    code = exit_code(result)
    # Bare exception names are often just text a command printed; lines carry a message.
    errors = [e for e in error_lines(result) if " " in e and not e.startswith("exit code ")]
    failed = bool(code) if code is not None else bool(errors)
    parts: list[str] = [f"exit {code}"] if code is not None else []
    body = collapse(_result_body(result))
    if errors and failed:
        parts.append(errors[-1])
    elif len(body) <= max(60, limit // 2):
        parts.append(body or "no output")
    elif not limit:
        parts.append(f"{_result_body(result).count(chr(10)) + 1} lines of output")
    else:
        lines_out = _result_body(result).count("\n") + 1
        parts.append(
            f"{lines_out} lines: {cap(body, limit)}" if lines_out > 1 else cap(body, limit)
        )
    return "; ".join(parts), failed, errors if failed else []


def _action(index: int, call: Mapping[str, Any], result: str | None, detail: int) -> Action:
    tool, args, raw = call_arguments(call)
    edits = edit_lines(tool, args)
    editor_verb = None
    if bare_tool_name(tool) in EDITOR_TOOLS:  # ``command`` names the edit, ``path`` its file
        editor_verb = _EDITOR_VERBS.get(str(args.get("command")), "EDITED")
        args = {k: v for k, v in args.items() if k not in ("command", *_EDITOR_BODY_KEYS)}
    terminal = tool_family(tool) == "terminal"
    keys = TERMINAL_COMMAND_KEYS if terminal else COMMAND_KEYS
    command = next((str(args[k]) for k in keys if isinstance(args.get(k), str)), "")
    if not command and terminal:
        command = raw
    path = next((str(args[k]) for k in PATH_KEYS if isinstance(args.get(k), str)), "")
    if command:
        verb, target = "RAN", f"`{cap(command_line(command), 200)}`"
    elif path:
        extra = [
            f"{k}={cap(str(v), 40)}"
            for k, v in args.items()
            if k not in PATH_KEYS and isinstance(v, str | int)
        ][:2]
        verb, target = editor_verb or _verb(tool), " ".join([path, *extra])
    else:
        pairs = [f"{k}={cap(str(v), 60)}" for k, v in args.items()][:3]
        verb, target = _verb(tool), f"{tool}({', '.join(pairs)})"
    outcome, failed, errors = _outcome(result, detail)
    if edits and verb in ("READ", "SEARCHED", "CALLED"):
        verb = "EDITED"
    return Action(
        index, tool, verb, target, outcome, failed, errors, command=command, path=path, edits=edits
    )


def analyse(turns: Sequence[Mapping[str, Any]], detail: int) -> Analysis:
    found = Analysis()
    calls: list[tuple[int, Mapping[str, Any]]] = []
    results: list[str | None] = []
    open_calls: dict[str, int] = {}  # call id -> position in `calls` (ids can repeat in logs)
    for index, message in enumerate(turns):
        role, text = message.get("role"), content_text(message).strip()
        if role == "user" and text and not is_summary_message(message):
            found.asks.append((index, text))
        elif role == "assistant":
            if text:
                found.assistant_texts.append((index, text))
                found.last_text = text
            for call in message.get("tool_calls") or ():
                if isinstance(call, Mapping):
                    open_calls[str(call.get("id"))] = len(calls)
                    calls.append((index, call))
                    results.append(None)
        elif role == "tool":
            position = open_calls.pop(str(message.get("tool_call_id")), None)
            if position is not None:
                results[position] = content_text(message)
    found.results = {str(i): r for i, r in enumerate(results) if r is not None}
    recent = len(calls) - DETAILED_ACTIONS
    found.actions = [
        _action(index, call, result, detail if position >= recent else 0)
        for position, ((index, call), result) in enumerate(zip(calls, results, strict=True))
    ]
    return found
