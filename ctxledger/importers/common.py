"""What every importer shares: sources with line numbers, session building, readers.

``SourceText``, ``SessionBuilder``, ``read_json`` and ``synth_call_id`` give every
parser the same behaviour: errors carry the 1-based line of the offending record (for
a pretty-printed JSON document the line is found lazily, only when an error is
raised), and a session is validated with :func:`ctxledger.messages.check_in_order`
before anything is returned. ``normalize_tool_calls`` repairs OpenAI-shape tool calls
the same way for every importer, and ``parse_conversations`` reads any chat format
whose files hold conversation objects or messages (OpenAI, Anthropic), given its
``ConversationFormat`` and ``MessageReader``.
"""

from __future__ import annotations

import abc
import collections
import dataclasses
import hashlib
import itertools
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

import msgspec

from ctxledger.errors import ImportFormatError, InvalidInput, InvalidMessage
from ctxledger.importers.model import ImportedSession, ImportedUsage
from ctxledger.limits import json_depth, json_problem, max_json_depth, not_json
from ctxledger.messages import CallIdRepair, check_in_order, check_system_role, repair_call_ids
from ctxledger.usage import normalize_usage

#: where a message came from: a 1-based line, a JSON path inside a document, or a description
Origin = int | tuple[str | int, ...] | str | None

SYNTHETIC_ID_PREFIX = "call_syn_"
_DECODER = msgspec.json.Decoder()
_BYTE_AT = re.compile(r"byte (\d+)")
_MESSAGE_PREFIX = re.compile(r"^message \d+: ")


def synth_call_id(source: str, index: int, sub: int = 0) -> str:
    """A deterministic id for a tool call whose source has none: sha1(source|index|sub)."""
    digest = hashlib.sha1(f"{source}|{index}|{sub}".encode()).hexdigest()[:24]
    return SYNTHETIC_ID_PREFIX + digest


def dump_arguments(value: Any) -> str:
    """Tool-call arguments as the JSON string the OpenAI shape requires (compact, key order kept)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) == {"_raw_arguments"}:
        raw = value["_raw_arguments"]  # how our exporters carry arguments that were not JSON
        if isinstance(raw, str):
            return raw
    if not json_depth(value)[1]:  # a NaN from a json.loads was encoded as null, silently
        raise InvalidInput(not_json(value, "tool-call arguments") or "arguments are not JSON")
    try:
        return msgspec.json.encode(value).decode()
    except RecursionError:
        raise InvalidInput(
            f"tool-call arguments nest deeper than {max_json_depth()} levels"
        ) from None


def source_name(path: str | None) -> str:
    return os.path.basename(path) if path else "stdin"


def type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", type(None): "null"}.get(
        type(value), type(value).__name__
    )


class SourceText:
    """The text being parsed: turns an origin into a line number and errors into ImportFormatError."""

    def __init__(self, text: str, path: str | None) -> None:
        self.text = text
        self.path = path

    def line_of(self, origin: Origin) -> int | None:
        if isinstance(origin, int):
            return origin
        if isinstance(origin, tuple):
            return locate_line(self.text, origin)
        return None

    def error(self, message: str, origin: Origin = None) -> ImportFormatError:
        if isinstance(origin, str):
            message = f"{origin}: {message}"
        return ImportFormatError(message, line=self.line_of(origin), path=self.path)


def _skip_ws(text: str, pos: int) -> int:
    n = len(text)
    while pos < n and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _step_into(text: str, pos: int, step: str | int, decoder: json.JSONDecoder) -> int | None:
    """Position of child `step` of the container starting at `pos`, or None."""
    if isinstance(step, int) and text[pos] == "[":
        pos = _skip_ws(text, pos + 1)
        for _ in range(step):
            _, pos = decoder.raw_decode(text, pos)
            pos = _skip_ws(text, pos)
            if text[pos] != ",":
                return None
            pos = _skip_ws(text, pos + 1)
        return pos
    if isinstance(step, str) and text[pos] == "{":
        pos = _skip_ws(text, pos + 1)
        while text[pos] != "}":
            key, pos = decoder.raw_decode(text, pos)
            pos = _skip_ws(text, _skip_ws(text, pos) + 1)  # past the ':'
            if key == step:
                return pos
            _, pos = decoder.raw_decode(text, pos)
            pos = _skip_ws(text, pos)
            if text[pos] == ",":
                pos = _skip_ws(text, pos + 1)
        return None
    return None


def locate_line(text: str, json_path: Sequence[str | int]) -> int | None:
    """The 1-based line where the value at `json_path` starts in the JSON document `text`.

    Only called when an error is reported, so it may re-scan the document.
    """
    decoder = json.JSONDecoder()
    pos: int | None = _skip_ws(text, 0)
    try:
        for step in json_path:
            assert pos is not None
            pos = _step_into(text, pos, step, decoder)
            if pos is None:
                return None
    except (ValueError, IndexError):
        return None
    assert pos is not None
    return text.count("\n", 0, pos) + 1


def _decode_error_line(text: str, err: Exception) -> int:
    match = _BYTE_AT.search(str(err))
    if match is None:
        return text.rstrip().count("\n") + 1  # truncated input: the error is at the end
    return text.encode()[: int(match.group(1))].count(b"\n") + 1


def _split_lines(text: str) -> Iterator[tuple[int, str]]:
    """``enumerate(text.split("\n"), 1)`` without the list of every line (s40: memory)."""
    start = 0
    for lineno in itertools.count(1):
        end = text.find("\n", start)
        yield lineno, text[start : len(text) if end < 0 else end]
        if end < 0:
            return
        start = end + 1


def iter_json_lines(text: str, path: str | None) -> Iterator[tuple[int, Any]]:
    """(line number, decoded value) of each non-blank line of a JSONL text, as read."""
    decode = _DECODER.decode
    for lineno, raw in _split_lines(text):
        if not raw or raw.isspace():
            continue
        try:
            yield lineno, decode(raw)
        except RecursionError:
            raise _too_deep(lineno, path) from None
        except msgspec.DecodeError as err:
            problem = json_problem(err, raw)
            raise ImportFormatError(f"invalid JSON: {problem}", line=lineno, path=path) from None


def _too_deep(line: int | None, path: str | None) -> ImportFormatError:
    return ImportFormatError(
        "the JSON nests deeper than Python can decode "
        f"(a message may nest at most {max_json_depth()} levels)",
        line=line,
        path=path,
    )


def read_json(text: str, path: str | None) -> tuple[bool, Any]:
    """``(False, value)`` for one JSON document, ``(True, (line, value) iterator)`` for
    JSONL: each line decoded as it is read (a bad line raises when it is reached).

    A leading byte-order mark is dropped (as when a file is read), also from text handed
    to a parse function."""
    text = text.removeprefix("\ufeff")
    if not text or text.isspace():  # (not strip(): a copy of the text)
        raise ImportFormatError("the input is empty", line=1, path=path)
    try:
        return False, _DECODER.decode(text)
    except RecursionError:
        raise _too_deep(None, path) from None
    except msgspec.DecodeError as doc_err:
        first = next(line for _, line in _split_lines(text) if line.strip())
        try:
            _DECODER.decode(first)
        except RecursionError:
            raise _too_deep(1, path) from None
        except msgspec.DecodeError:
            raise ImportFormatError(
                f"invalid JSON: {json_problem(doc_err, text)}",
                line=_decode_error_line(text, doc_err),
                path=path,
            ) from None
        return True, iter_json_lines(text, path)  # (decoded as they are read)


def read_json_lines(text: str, path: str | None, what: str) -> Iterable[tuple[int, Any]]:
    """JSONL only (a format whose files are always line-oriented), decoded as it is read."""
    is_lines, data = read_json(text, path)
    if is_lines:
        return cast("Iterable[tuple[int, Any]]", data)
    first = next(i for i, line in _split_lines(text) if line.strip())
    if text.strip().count("\n") == 0:
        return [(first, data)]
    raise ImportFormatError(
        f"expected {what} (one JSON record per line), got one multi-line JSON document",
        line=first,
        path=path,
    )


def unique_key(seen: set[str], key: str) -> str:
    out, n = key, 1
    while out in seen:
        n += 1
        out = f"{key}#{n}"
    seen.add(out)
    return out


class SessionBuilder:
    """Collects one session's messages with their origins, usages and warnings; validates at the end."""

    def __init__(self, src: SourceText, key: str, source_format: str) -> None:
        self.src = src
        self.key = key
        self.source_format = source_format
        self.messages: list[dict[str, Any]] = []
        self.origins: list[Origin] = []
        self.usages: list[ImportedUsage] = []
        self.system_prompt: str | None = None
        self.system_role = "system"
        self._warnings: collections.Counter[str] = collections.Counter()

    def add(self, message: dict[str, Any], origin: Origin) -> None:
        self.messages.append(message)
        self.origins.append(origin)

    def checked_role(self, role: Any, origin: Origin) -> str:
        """`role` as the system prompt's role, else an error at `origin`."""
        try:
            return check_system_role(role)
        except InvalidInput as err:
            raise self.src.error(str(err), origin) from None

    def warn(self, text: str) -> None:
        self._warnings[text] += 1

    def add_usage(
        self,
        raw: Any,
        origin: Origin,
        *,
        shape: str | None = None,
        model: str | None = None,
        aggregate: bool = False,
    ) -> None:
        """Report `raw` after the latest message (checked now, so a bad block names its line)."""
        if not isinstance(raw, Mapping):
            raise self.src.error(f"a usage block must be an object, got {type_name(raw)}", origin)
        try:
            shape, _ = normalize_usage(raw, shape)
        except InvalidInput as err:
            raise self.src.error(f"bad usage block: {err}", origin) from None
        if not self.messages:
            self.warn("a usage block before the first message was dropped")
            return
        self.usages.append(
            ImportedUsage(
                after_index=len(self.messages) - 1,
                raw=dict(raw),
                shape=shape,
                model=model,
                aggregate=aggregate,
            )
        )

    @property
    def warnings(self) -> list[str]:
        return [text if n == 1 else f"{text} (x{n})" for text, n in self._warnings.items()]

    def _dedupe_call_ids(self) -> list[CallIdRepair]:
        """Give a re-used tool-call id a synthesized one (and its result with it).

        Some sources (e.g. tau-bench logs) reuse an id for a later call; the ledger needs
        ids unique within a session. The repair is the one every entry point makes
        (:func:`ctxledger.messages.repair_call_ids`); the warnings say so and the ledger
        records the repairs as an event when the session is imported.
        """
        self.messages, repairs = repair_call_ids(
            self.messages, None, lambda i, j: synth_call_id(self.key, i, j)
        )
        for _ in (r for r in repairs if r.call_index is not None):
            self.warn("re-used tool-call ids were replaced by synthesized ids")
        return repairs

    def build(self, **fields: Any) -> ImportedSession:
        """Validate the messages (raising ImportFormatError at the culprit's line) and build the session."""
        try:
            repairs = self._dedupe_call_ids()  # may refuse a result for a lost call
            check_in_order(self.messages)
        except InvalidMessage as err:
            origin = (
                self.origins[err.index]
                if err.index is not None and err.index < len(self.origins)
                else None
            )
            raise self.src.error(_MESSAGE_PREFIX.sub("", str(err)), origin) from None
        return ImportedSession(
            key=self.key,
            source_format=self.source_format,
            messages=self.messages,
            system_prompt=self.system_prompt,
            system_role=self.system_role,
            usages=self.usages,
            warnings=self.warnings,
            repairs=repairs,
            **fields,
        )


def text_of_parts(content: Any) -> str | None:
    """A system prompt as one string (text parts joined), or None if it has no text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        ]
        return "\n\n".join(texts) if texts else None
    return None


# --------------------------------------------------------------------------- OpenAI proper


def normalize_tool_calls(b: SessionBuilder, calls: Any, index: int) -> None:
    """Bring OpenAI-shape tool calls of message `index` (0-based, in `b`) to the required shape, in place.

    A call without an id gets a synthesized one, ``type`` defaults to ``function``,
    missing (or null) arguments become ``"{}"`` and arguments given as JSON values are
    encoded as the string the OpenAI shape requires; every repair is reported in the
    warnings. Anything else that is wrong (not a list, a call that is not an object, no
    function name) is left for the validator to name.
    """
    if not isinstance(calls, list):
        return
    for j, call in enumerate(calls):
        if not isinstance(call, dict):
            continue
        if not call.get("id"):
            call["id"] = synth_call_id(b.key, index, j)
            b.warn("tool calls without an id got a synthesized id")
        call.setdefault("type", "function")
        fn = call.get("function")
        if not isinstance(fn, dict) or isinstance(fn.get("arguments"), str):
            continue
        if fn.get("arguments") is None:
            fn["arguments"] = "{}"
            b.warn("tool calls without arguments got empty arguments ('{}')")
        else:
            fn["arguments"] = dump_arguments(fn["arguments"])
            b.warn("tool-call arguments given as JSON values were encoded as strings")


class MessageReader(abc.ABC):
    """Adds the messages of one session in some source format to its builder.

    One reader per session (it may carry state from one message to the next);
    ``model`` is the session's model as far as it is known, ``usage_shape`` the usage
    shape of the format (None: detected).
    """

    usage_shape: str | None = None

    def __init__(self, builder: SessionBuilder, model: str | None = None) -> None:
        self.b = builder
        self.model = model

    @abc.abstractmethod
    def add(self, raw: Any, origin: Origin, index: int) -> None:
        """Convert and add the message `raw`, number `index` in its source list."""

    def add_line(self, raw: dict[str, Any], lineno: int, index: int) -> None:
        """One JSONL record that is not a whole conversation (by default: a message)."""
        self.add(raw, lineno, index)


# --------------------------------------------------------------------------- conversations


#: top-level fields of a conversation object that are read; the others become ``extras``
CONVERSATION_FIELDS = frozenset(
    {"messages", "model", "tools", "title", "system", "system_role", "usage", "context_length"}
)

Convert = Callable[[SourceText, dict[str, Any], str, tuple[int, ...]], ImportedSession]
KeyOf = Callable[[Mapping[str, Any], str, set[str]], str]


#: (value, builder, origin) -> extras to keep; sets the builder's system prompt
SystemReader = Callable[[Any, SessionBuilder, Origin], dict[str, Any]]
#: (value or None, builder, origin) -> the session's tool definitions (OpenAI shape)
ToolsReader = Callable[[Any, SessionBuilder, Origin], list[dict[str, Any]]]


@dataclasses.dataclass(frozen=True)
class ConversationFormat:
    """What sets one chat format's files apart; the readers below do the rest.

    ``reader`` makes the message reader of one session from its builder and model,
    ``read_system`` / ``read_tools`` read a conversation's ``system`` and ``tools``
    fields, ``key_of`` names a conversation, and top-level fields outside ``fields``
    are kept as the session's extras.
    """

    name: str
    reader: Callable[[SessionBuilder, str | None], MessageReader]
    read_system: SystemReader
    read_tools: ToolsReader
    key_of: KeyOf
    fields: frozenset[str] = CONVERSATION_FIELDS


def conversation_session(
    src: SourceText,
    obj: dict[str, Any],
    key: str,
    prefix: tuple[str | int, ...] | int,
    fmt: ConversationFormat,
) -> ImportedSession:
    """One ``{"messages": [...]}`` object; `prefix` is its line (JSONL) or JSON path (document)."""

    def origin(*rest: str | int) -> Origin:
        return prefix if isinstance(prefix, int) else (*prefix, *rest)

    messages = obj.get("messages")
    if not isinstance(messages, list):
        raise src.error(f"'messages' must be a list, got {type_name(messages)}", origin("messages"))
    b = SessionBuilder(src, key, fmt.name)
    reader = fmt.reader(b, obj["model"] if isinstance(obj.get("model"), str) else None)
    extras = {k: v for k, v in obj.items() if k not in fmt.fields}
    if obj.get("system_role") is not None:  # (s38: the role the system prompt comes back in)
        b.system_role = b.checked_role(obj["system_role"], origin("system_role"))
    if obj.get("system") is not None:
        extras.update(fmt.read_system(obj["system"], b, origin("system")))
    for i, m in enumerate(messages):
        reader.add(m, origin("messages", i), i)
    if b.system_role != "system" and b.system_prompt is None:
        raise src.error(
            f"system_role {b.system_role!r} names no system prompt", origin("system_role")
        )
    if obj.get("usage") is not None:
        b.add_usage(obj["usage"], origin("usage"), shape=reader.usage_shape, model=reader.model)
    ctx = obj.get("context_length")
    return b.build(
        model=reader.model,
        tools=fmt.read_tools(obj.get("tools"), b, origin("tools")),
        title=obj["title"] if isinstance(obj.get("title"), str) else None,
        context_length=ctx if isinstance(ctx, int) and not isinstance(ctx, bool) else None,
        extras=extras,
    )


def document_conversations(
    src: SourceText, doc: Any, convert: Convert, key_of: KeyOf
) -> list[ImportedSession] | None:
    """The sessions of a JSON document holding one conversation object or a list of them.

    None when the document is a plain list of messages (the caller converts it as one
    session); a document that is neither is a line-numbered error.
    """
    base = source_name(src.path)
    seen: set[str] = set()
    if isinstance(doc, dict) and "messages" in doc:
        return [convert(src, doc, key_of(doc, base, seen), ())]
    if not isinstance(doc, list):
        raise src.error(
            f"expected a list of messages or an object with 'messages', got {type_name(doc)}", 1
        )
    if doc and all(isinstance(el, dict) and "messages" in el for el in doc):
        return [
            convert(src, el, key_of(el, f"{base}#{i + 1}", seen), (i,)) for i, el in enumerate(doc)
        ]
    return None


def conversation_document(
    src: SourceText, doc: Any, fmt: ConversationFormat
) -> list[ImportedSession]:
    """The sessions of a JSON document: conversation objects, or one plain list of messages."""

    def convert(
        src: SourceText, obj: dict[str, Any], key: str, prefix: tuple[int, ...]
    ) -> ImportedSession:
        return conversation_session(src, obj, key, prefix, fmt)

    found = document_conversations(src, doc, convert, fmt.key_of)
    if found is not None:
        return found
    b = SessionBuilder(src, source_name(src.path), fmt.name)
    reader = fmt.reader(b, None)
    for i, m in enumerate(doc):
        if isinstance(m, dict) and "role" not in m:
            raise src.error(
                "expected a message (with 'role') or a conversation (with 'messages')", (i,)
            )
        reader.add(m, (i,), i)
    return [b.build()]


def conversation_lines(
    src: SourceText, lines: Iterable[tuple[int, Any]], fmt: ConversationFormat
) -> list[ImportedSession]:
    """The sessions of a JSONL text: one conversation per line, or one message (record) per line."""
    base = source_name(src.path)
    rows = iter(lines)

    def record(obj: Any, lineno: int) -> dict[str, Any]:
        if not isinstance(obj, dict):
            raise src.error(f"expected a JSON object on this line, got {type_name(obj)}", lineno)
        return obj

    first_line, first = head = next(rows)
    rows = itertools.chain((head,), rows)
    if "messages" in record(first, first_line):
        seen: set[str] = set()
        sessions = []
        for lineno, obj in rows:
            if "messages" not in record(obj, lineno):
                raise src.error(
                    "expected a conversation (an object with 'messages') on this line,"
                    " as on the earlier lines",
                    lineno,
                )
            key = fmt.key_of(obj, f"{base}:{lineno}", seen)
            sessions.append(conversation_session(src, obj, key, lineno, fmt))
        return sessions
    b = SessionBuilder(src, base, fmt.name)
    reader = fmt.reader(b, None)
    for i, (lineno, obj) in enumerate(rows):
        if "messages" in record(obj, lineno):
            raise src.error(
                "this line holds a whole conversation, earlier lines hold one message each", lineno
            )
        reader.add_line(obj, lineno, i)
    return [b.build(model=reader.model)]


def _one_record(data: dict[str, Any], fmt: ConversationFormat) -> bool:
    """Whether an object without ``messages`` is read as one line: OpenAI's line reader
    names every shape it takes (a message, a chat completion); another format's only
    when it is a message, else the document's error says what a file must hold."""
    return "messages" not in data and (fmt.name == "openai" or "role" in data)


def parse_conversations(
    text: str, path: str | None, fmt: ConversationFormat
) -> list[ImportedSession]:
    """Parse a chat-format text (document or JSONL) into sessions; at least one message is required."""
    src = SourceText(text, path)
    is_lines, data = read_json(text, path)
    if is_lines:
        sessions = conversation_lines(src, data, fmt)
    elif isinstance(data, dict) and _one_record(data, fmt) and "\n" not in text.strip():
        # JSONL of one line (one message, one response) reads as a JSON document too; any
        # other object is told what a document must hold
        first = next(i for i, line in _split_lines(text) if line.strip())
        sessions = conversation_lines(src, [(first, data)], fmt)
    else:
        sessions = conversation_document(src, data, fmt)
    if not any(s.messages for s in sessions):
        raise src.error("no messages found", 1)
    return sessions


# --------------------------------------------------------------------------- the OpenAI format
