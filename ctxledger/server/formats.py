"""The two wire formats the proxy speaks: OpenAI chat completions and Anthropic messages.

For each: read a client request into the ledger's OpenAI message shape, build the
upstream request from the ledger's compacted view, and read the reply and its real
usage back, from a JSON body or incrementally from a Server-Sent-Events stream.
Anthropic messages are converted with the importer and exporter the CLI uses, so a
proxied conversation is stored exactly as an imported one would be.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxledger.errors import InvalidInput
from ctxledger.importers.anthropic import add_anthropic_message, add_assistant, openai_tools
from ctxledger.importers.common import SessionBuilder, SourceText, text_of_parts
from ctxledger.importers.export import _anthropic as anthropic_document
from ctxledger.importers.responses import STUBS
from ctxledger.integers import shown
from ctxledger.limits import MAX_CONTEXT_LENGTH, MAX_MODEL_CHARS, check_name
from ctxledger.messages import INSTRUCTION_ROLES, audio_reference, kind_of, refusal_text
from ctxledger.server.history import strip_cache_markers
from ctxledger.server.sseparse import SSEEvent, SSEParser
from ctxledger.server.upstream_reply import (
    BadUpstreamReply,
    check_openai_message,
    decode_event,
    index_of,
    marked_if_cut,
    need_object,
    optional_list,
    optional_object,
    optional_str,
    usage_block,
)

JSONDict = dict[str, Any]

#: the recorded reply's extra key holding its Responses API response id (stored, never
#: sent upstream); ``previous_response_id`` is resolved by it, so a client may not set it
RESPONSE_ID = "responses_response_id"


@dataclass
class ClientTurn:
    """A proxied request as the ledger sees it."""

    model: str
    system_prompt: str | None
    messages: list[JSONDict]
    tools: list[JSONDict]
    stream: bool
    max_tokens: int | None
    wants_usage: bool = False  # OpenAI: the client asked for the usage chunk itself
    #: the leading ``developer`` message `system_prompt` was taken from, as a message: a
    #: session recorded with it as its first message (the state API) is matched by it
    lead: JSONDict | None = None
    system_role: str | None = None  # the role of the message it came from (None: no role)

    def __post_init__(self) -> None:
        # a client-sent message carrying the proxy's response-id key would let a later
        # ``previous_response_id`` of another client resolve to this client's history
        for message in self.messages:
            if isinstance(message, dict):
                message.pop(RESPONSE_ID, None)


def _model(body: Mapping[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise InvalidInput("'model' must be a non-empty string")
    return check_name(model, "'model'", MAX_MODEL_CHARS)


def _max_tokens(body: Mapping[str, Any], *keys: str) -> int | None:
    """The output cap the client asked for: an integer in [1, MAX_CONTEXT_LENGTH] (no
    window is larger, and the cap is halved and sent upstream on a retry)."""
    for key in keys:
        value = body.get(key)
        if value is not None:
            if (
                not isinstance(value, int)
                or isinstance(value, bool)
                or not 1 <= value <= MAX_CONTEXT_LENGTH
            ):
                raise InvalidInput(
                    f"'{key}' must be a positive integer up to {MAX_CONTEXT_LENGTH:,}, "
                    f"got {_shown(value)}"
                )
            return value
    return None


def _shown(value: Any) -> str:
    """A number as the client sent it (unless absurdly long), else its JSON type."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value}" if value.bit_length() <= 200 else "an integer over 60 digits long"
    return kind_of(value)


def _tools(body: Mapping[str, Any], face: str) -> list[Any]:
    """The request's tool definitions, checked where the ledger will read them (a tool's
    name, its parameters): `face` ``openai`` nests a function's fields under
    ``function``, ``responses`` has them flat, ``anthropic`` names every tool the
    client defines (untyped or ``custom``); its typed server tools (``web_search_…``,
    ``mcp_toolset``) may have no name, and are checked only for what they carry."""
    tools = body.get("tools")
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise InvalidInput("'tools' must be a list")
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise InvalidInput(f"tools[{i}] must be a JSON object, got {kind_of(tool)}")
        kind = tool.get("type", "function" if face == "openai" else None)
        if kind is not None and not isinstance(kind, str):
            raise InvalidInput(f"tools[{i}].type must be a string, got {kind_of(kind)}")
        if face == "openai" and (kind == "function" or "function" in tool):
            fn = tool.get("function")
            if not isinstance(fn, Mapping):
                raise InvalidInput(f"tools[{i}].function must be a JSON object, got {kind_of(fn)}")
            _tool_fields(fn, f"tools[{i}].function", "parameters")
        elif face == "responses" and kind == "function":
            _tool_fields(tool, f"tools[{i}]", "parameters")
        elif face == "anthropic" and (kind in (None, "custom") or tool.get("name") is not None):
            _tool_fields(tool, f"tools[{i}]", "input_schema")  # a server tool may have no name
    return tools


def _tool_fields(tool: Mapping[str, Any], where: str, schema: str) -> None:
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"{where}.name must be a non-empty string, got {kind_of(name)}")
    if tool.get(schema) is not None and not isinstance(tool[schema], Mapping):
        raise InvalidInput(f"{where}.{schema} must be a JSON object, got {kind_of(tool[schema])}")


def _messages(body: Mapping[str, Any]) -> list[Any]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidInput("'messages' must be a non-empty list")
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise InvalidInput(f"messages[{index}] must be a JSON object, got {shown(message)}")
    return messages


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


# --------------------------------------------------------------------------- OpenAI


def openai_turn(body: Mapping[str, Any], markers: bool = True) -> ClientTurn:
    """`markers`: whether the body may hold ``cache_control`` markers to strip (the caller
    knows from the raw bytes; stripping is skipped, not the check, when it says no)."""
    raw = _messages(body)
    system: str | None = None
    lead: JSONDict | None = None
    if isinstance(raw[0], Mapping) and raw[0].get("role") in INSTRUCTION_ROLES:
        system = text_of_parts(raw[0].get("content"))
        if system is None:
            raise InvalidInput("messages[0]: a system message needs text content")
        if raw[0].get("role") == "developer":
            lead = strip_cache_markers(raw[0]) if markers else dict(raw[0])
        raw = raw[1:]
    messages = (
        [strip_cache_markers(m) if isinstance(m, dict) else m for m in raw]
        if markers
        else list(raw)
    )
    for message in messages:  # the Responses face's own key: not a chat client's to set
        message.pop(STUBS, None)
    tools = _tools(body, "openai")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, Mapping):
        raise InvalidInput("'stream_options' must be an object")
    if not isinstance(body.get("stream", False), bool | None):
        raise InvalidInput("'stream' must be true or false")
    wants = isinstance(options, Mapping) and bool(options.get("include_usage"))
    return ClientTurn(
        model=_model(body),
        system_prompt=system,
        messages=messages,
        tools=tools,
        stream=bool(body.get("stream")),
        max_tokens=_max_tokens(body, "max_completion_tokens", "max_tokens"),
        wants_usage=wants,
        lead=lead,
        system_role=None if system is None else ("system" if lead is None else "developer"),
    )


def openai_upstream(
    body: Mapping[str, Any], view: list[JSONDict], max_tokens: int | None
) -> JSONDict:
    out = {**body, "messages": _client_system_role(body, view)}
    if max_tokens is not None:
        out["max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"] = (
            max_tokens
        )
    if body.get("stream"):
        out["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
    return out


def _client_system_role(body: Mapping[str, Any], view: list[JSONDict]) -> list[JSONDict]:
    """`view` with its system prompt as the client sent it this turn: the client's own
    leading system / developer message (its role, list content, ``name``) when the view
    holds its text unchanged (no compaction note, no cache marker on it), else the
    view's text in the client's role (a leading ``developer`` message of o-series /
    gpt-5 clients is the session's system prompt and goes upstream as ``developer``).
    A request without one gets the view's, in the role the ledger holds (s38)."""
    raw = body.get("messages")
    first = raw[0] if isinstance(raw, list) and raw else None
    if not (isinstance(first, Mapping) and first.get("role") in INSTRUCTION_ROLES):
        return view
    if not view or (held := view[0].get("role")) not in INSTRUCTION_ROLES:
        return view
    if view[0] == {"role": held, "content": text_of_parts(first.get("content"))}:
        return [strip_cache_markers(first), *view[1:]]
    return [{**view[0], "role": first.get("role")}, *view[1:]]


def openai_reply(message: Mapping[str, Any]) -> JSONDict | None:
    """The assistant message to record (only what a provider reads back)."""
    calls = [
        {
            "id": c.get("id"),
            "type": "function",
            "function": {
                "name": (c.get("function") or {}).get("name"),
                "arguments": (c.get("function") or {}).get("arguments") or "",
            },
        }
        for c in message.get("tool_calls") or ()
        if isinstance(c, Mapping)
    ]
    content, refusal = message.get("content"), message.get("refusal")
    audio = audio_reference(message.get("audio"))
    out: JSONDict = {"role": "assistant", "content": None}
    if not calls and content is None and (isinstance(refusal, str) or audio):
        if isinstance(refusal, str):  # sent back as it came
            out["refusal"] = refusal
    elif not calls and not isinstance(content, str | list):
        return None
    else:
        out["content"] = content if content is not None else ("" if not calls else None)
    if calls:
        out["tool_calls"] = calls
    if isinstance(refusal, str) and refusal:  # beside content too (gateways send content "")
        out["refusal"] = refusal
    if audio:  # an audio reply is sent back by its id alone (not its data or transcript)
        out["audio"] = {"id": audio}
    return out


def openai_json_reply(data: Any) -> tuple[JSONDict | None, JSONDict | None]:
    """The reply and usage of a chat completion (BadUpstreamReply: not one). A body that
    reports an error instead, or has no choice, is forwarded and records nothing."""
    body = need_object(data, "the body")
    usage = usage_block(body.get("usage"))
    if "choices" not in body and "error" in body:
        return None, usage
    if not isinstance(body.get("choices"), list):
        raise BadUpstreamReply("'choices' must be a list, got " + kind_of(body.get("choices")))
    if not body["choices"]:
        return None, usage
    choice = need_object(body["choices"][0], "choices[0]")
    message = check_openai_message(choice.get("message"), "choices[0].message")
    return marked_if_cut(openai_reply(message), choice.get("finish_reason")), usage


@dataclass
class OpenAIStream:
    """Accumulates a chat-completions stream: the reply, the usage chunk, completion."""

    wants_usage: bool
    content: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    audio: str | None = None
    calls: dict[int, JSONDict] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: JSONDict | None = None
    done: bool = False

    def feed(self, ev: SSEEvent) -> bool:
        """Fold one event; False when it must not be forwarded (a usage chunk nobody asked for)."""
        if ev.data.strip() == "[DONE]":
            self.done = True
            return True
        chunk = decode_event(ev.data)  # BadUpstreamReply: not a chunk
        if chunk is None:
            return True
        usage = usage_block(chunk.get("usage"))
        if usage is not None:
            self.usage = usage
        choices = optional_list(chunk.get("choices"), "a chunk's 'choices'")
        for i, choice in enumerate(choices):
            choice = need_object(choice, f"a chunk's choices[{i}]")
            if index_of(choice.get("index"), f"a chunk's choices[{i}].index") == 0:
                self._delta(choice)
        return self.wants_usage or bool(choices) or usage is None

    def _delta(self, choice: Mapping[str, Any]) -> None:
        delta = check_openai_message(choice.get("delta") or {}, "a chunk's delta")
        if isinstance(delta.get("content"), str):
            self.content.append(delta["content"])
        if isinstance(delta.get("refusal"), str):
            self.refusal.append(delta["refusal"])
        self.audio = audio_reference(delta.get("audio")) or self.audio
        for call in delta.get("tool_calls") or ():
            where = "a chunk's tool call index"
            slot = self.calls.setdefault(
                index_of(call.get("index"), where), {"id": None, "name": "", "arguments": ""}
            )
            fn = call.get("function") or {}
            slot["id"] = call.get("id") or slot["id"]
            slot["name"] += fn.get("name") or ""
            slot["arguments"] += fn.get("arguments") or ""
        finish = optional_str(choice.get("finish_reason"), "a chunk's finish_reason")
        if finish:
            self.finish_reason = finish

    @property
    def complete(self) -> bool:
        return self.finish_reason is not None

    @property
    def ended(self) -> bool:
        """The stream's end marker (``[DONE]``) has arrived."""
        return self.done

    def reply(self) -> JSONDict | None:
        calls = [
            {"id": c["id"], "function": {"name": c["name"], "arguments": c["arguments"]}}
            for _, c in sorted(self.calls.items())
        ]
        whole = openai_reply(
            {
                "content": "".join(self.content)
                if self.content or not (calls or self.refusal or self.audio)
                else None,
                "tool_calls": calls,
                "refusal": "".join(self.refusal) if self.refusal else None,
                "audio": {"id": self.audio},
            }
        )
        return marked_if_cut(whole, self.finish_reason)


# --------------------------------------------------------------------------- Anthropic


def _builder() -> SessionBuilder:
    return SessionBuilder(SourceText("", None), "proxy", "anthropic")


def anthropic_turn(body: Mapping[str, Any], markers: bool = True) -> ClientTurn:
    raw = _messages(body)
    b = _builder()
    for i, message in enumerate(raw):
        add_anthropic_message(b, message, f"messages[{i}]", i)
    system = body.get("system")
    prompt = text_of_parts(system) if system is not None else None
    if system is not None and prompt is None:
        raise InvalidInput("'system' must be a string or a list of text blocks")
    tools = openai_tools(_tools(body, "anthropic") or None, b, "tools")
    max_tokens = _max_tokens(body, "max_tokens")
    return ClientTurn(
        model=_model(body),
        system_prompt=prompt,
        messages=[strip_cache_markers(m) for m in b.messages] if markers else b.messages,
        tools=tools,
        stream=bool(body.get("stream")),
        max_tokens=max_tokens,
    )


#: blocks the Messages API never lets carry a cache marker
_THINKING = frozenset({"thinking", "redacted_thinking"})


#: keys of an exported message the Messages API does not know (it answers 400 to them)
_OPENAI_ONLY = ("ctxledger_role", "refusal", "audio", "name")


def _api_message(message: JSONDict) -> JSONDict | None:
    """An exported message as the Messages API takes it (None: nothing to send). The
    export keeps an OpenAI refusal as a ``refusal`` key beside its (often empty)
    content, for its own round trip: upstream, the refusal is a text block (what the
    model said) before any ``tool_use``, as is a ``refusal`` content part. An audio
    reply (kept by its id alone) is a text block naming it; an assistant turn left
    empty is not sent (the API refuses one). The other OpenAI-only keys go."""
    content = message.get("content")
    parts = content if isinstance(content, list) else ()
    if (
        content
        and not any(k in message for k in _OPENAI_ONLY)
        and not any(isinstance(b, Mapping) and b.get("type") == "refusal" for b in parts)
    ):
        return message  # the common case: as exported
    out = {k: v for k, v in message.items() if k not in _OPENAI_ONLY}
    if isinstance(content, list):
        content = [_refusal_part(b) for b in content]
        said, audio = refusal_text(message), audio_reference(message.get("audio"))
        if audio and not content:
            said = f"[audio reply {audio}]"
        if said and not any(isinstance(b, Mapping) and b.get("text") == said for b in content):
            kinds = [b.get("type") if isinstance(b, Mapping) else None for b in content]
            at = kinds.index("tool_use") if "tool_use" in kinds else len(content)
            content = [*content[:at], {"type": "text", "text": said}, *content[at:]]
        out["content"] = content
    return None if out.get("role") == "assistant" and not content else out


def _refusal_part(block: Any) -> Any:
    """An OpenAI ``refusal`` content part as the text block the Messages API takes."""
    if isinstance(block, Mapping) and block.get("type") == "refusal":
        return {"type": "text", "text": str(block.get("refusal") or "")}
    return block


def _marker_on_last_block(message: JSONDict) -> JSONDict:
    """A message whose prompt-cache marker sits on the message itself (the native layout
    marks a content-less tool-call turn so) with the marker moved onto its last content
    block, a tool-call turn's last ``tool_use``: the Messages API accepts
    ``cache_control`` only on blocks and answers 400 to one on a message. As Hermes 0.19's
    adapter does; a message with no block to carry it (thinking blocks cannot) drops it."""
    if "cache_control" not in message:
        return message
    out = dict(message)
    marker = out.pop("cache_control")
    content = out.get("content")
    if isinstance(content, str) and content:
        out["content"] = [{"type": "text", "text": content, "cache_control": marker}]
    elif isinstance(content, list):
        carriers = [
            i
            for i, block in enumerate(content)
            if isinstance(block, Mapping) and block.get("type") not in _THINKING
        ]
        if carriers:
            blocks = list(content)
            blocks[carriers[-1]] = {"cache_control": marker, **blocks[carriers[-1]]}
            out["content"] = blocks
    return out


def anthropic_upstream(
    body: Mapping[str, Any], view: list[JSONDict], max_tokens: int | None
) -> JSONDict:
    system: Any = None
    if view and view[0].get("role") in INSTRUCTION_ROLES:  # a leading developer message too
        system, view = view[0].get("content"), view[1:]
    exported = anthropic_document(None, view)["messages"]
    sent = [m for m in map(_api_message, exported) if m is not None]
    messages = [_marker_on_last_block(m) for m in sent]
    out = {**body, "messages": messages}
    out.pop("system", None)
    if system is not None:
        out["system"] = system
    if max_tokens is not None:
        out["max_tokens"] = max_tokens
    return out


def anthropic_reply(content: Any) -> JSONDict | None:
    if not isinstance(content, list | str):
        return None
    return add_assistant(_builder(), {"role": "assistant", "content": content}, "reply", 0)


def anthropic_json_reply(data: Any) -> tuple[JSONDict | None, JSONDict | None]:
    """The reply and usage of a message (BadUpstreamReply: not one); a body that reports
    an error instead is forwarded and records nothing."""
    body = need_object(data, "the body")
    usage = usage_block(body.get("usage"))
    content = body.get("content")
    if content is None and "error" in body:
        return None, usage
    if not isinstance(content, list | str):
        raise BadUpstreamReply(f"'content' must be a list or a string, got {kind_of(content)}")
    for i, block in enumerate(content if isinstance(content, list) else ()):
        tool = isinstance(block, Mapping) and block.get("type") == "tool_use" and "input" in block
        if tool and not isinstance(block["input"], Mapping):  # (recorded as '"text"')
            got = kind_of(block["input"])
            raise BadUpstreamReply(f"content[{i}].input of a tool_use must be an object, got {got}")
    try:
        return marked_if_cut(anthropic_reply(content), body.get("stop_reason")), usage
    except InvalidInput as exc:
        raise BadUpstreamReply(str(exc)) from None


@dataclass
class AnthropicStream:
    """Accumulates an Anthropic messages stream (named events) into the reply and its usage."""

    blocks: dict[int, JSONDict] = field(default_factory=dict)
    partial: dict[int, str] = field(default_factory=dict)
    usage: JSONDict | None = None
    stopped: bool = False
    stop_reason: Any = None

    def feed(self, ev: SSEEvent) -> bool:
        data = decode_event(ev.data)  # BadUpstreamReply: not an event
        if data is None:
            return True
        kind = data.get("type") or ev.event
        if kind == "message_start":
            message = optional_object(data.get("message"), "message_start's 'message'")
            self.usage = dict(optional_object(message.get("usage"), "message_start's usage"))
        elif kind == "content_block_start":
            block = optional_object(data.get("content_block"), "a content_block_start's block")
            self.blocks[_index(data)] = dict(block)
        elif kind == "content_block_delta":
            self._delta(_index(data), optional_object(data.get("delta"), "a block's delta"))
        elif kind == "content_block_stop":
            self._finish_block(_index(data))
        elif kind == "message_delta":
            usage = optional_object(data.get("usage"), "message_delta's usage")
            extra = {k: v for k, v in usage.items() if v is not None}
            self.usage = {**(self.usage or {}), **extra}
            delta = data.get("delta")  # (read for its stop_reason only: nothing else checked)
            stop = delta.get("stop_reason") if isinstance(delta, Mapping) else None
            self.stop_reason = stop if stop is not None else self.stop_reason  # the last said
        elif kind == "message_stop":
            self.stopped = True
        return True

    def _delta(self, index: int, delta: Mapping[str, Any]) -> None:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + str(delta.get("text", ""))
        elif kind == "input_json_delta":
            self.partial[index] = self.partial.get(index, "") + str(delta.get("partial_json", ""))
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + str(delta.get("signature", ""))

    def _finish_block(self, index: int) -> None:
        block = self.blocks.get(index)
        # the fragments make the input object's JSON; text that is no JSON (a block cut
        # by max_tokens) is kept raw, JSON that is no object is malformed, as unstreamed
        if block is not None and block.get("type") == "tool_use" and index in self.partial:
            text = self.partial[index] or "{}"
            parsed = _json(text)
            if not isinstance(parsed, dict) and (parsed is not None or text.strip() == "null"):
                got = kind_of(parsed)
                raise BadUpstreamReply(f"a tool_use's input must be an object, got {got}")
            block["input"] = parsed if isinstance(parsed, dict) else {"_raw_arguments": text}

    @property
    def complete(self) -> bool:
        return self.stopped

    @property
    def ended(self) -> bool:
        """The stream's end marker (``message_stop``) has arrived."""
        return self.stopped

    def reply(self) -> JSONDict | None:
        blocks = [
            {k: v for k, v in b.items() if v is not None} for _, b in sorted(self.blocks.items())
        ]
        try:
            return marked_if_cut(anthropic_reply(blocks), self.stop_reason)
        except InvalidInput as exc:
            raise BadUpstreamReply(str(exc)) from None


def _index(data: Mapping[str, Any]) -> int:
    return index_of(data.get("index"), f"a {data.get('type') or 'stream'} event's index")


__all__ = [
    "AnthropicStream",
    "ClientTurn",
    "OpenAIStream",
    "SSEEvent",
    "SSEParser",
    "anthropic_json_reply",
    "anthropic_turn",
    "anthropic_upstream",
    "openai_json_reply",
    "openai_turn",
    "openai_upstream",
]
