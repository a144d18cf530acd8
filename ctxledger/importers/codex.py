"""Codex CLI rollout JSONL -> ``ImportedSession`` chain.

A rollout holds one record per line, ``{"timestamp", "type", "payload"}`` with type
``session_meta`` (session id, cwd, cli version, base instructions), ``turn_context``
(the model), ``response_item`` (the Responses-API items the model saw: ``message``,
``reasoning``, ``function_call``, ``function_call_output``, ``custom_tool_call``,
``custom_tool_call_output``, ``local_shell_call``, ...), ``event_msg`` (UI events;
``token_count`` carries the usage of the last model call) and ``compacted`` (a
compaction: the summary ``message`` and, in newer versions, the
``replacement_history``). Older rollouts (bare items, a meta object first,
``record_type: state`` lines) are read too.

Mapping: messages -> user / assistant / system / developer messages; function
and custom tool calls -> ``tool_calls`` attached to the assistant message of the
same response; outputs -> ``tool`` messages; reasoning items -> the next assistant
message's ``reasoning_content`` (summary text) and ``codex_reasoning_items`` (the raw
items, encrypted content included); ``token_count`` -> an ``ImportedUsage`` in
Responses shape. Each ``compacted`` record ends the current session (reason
``compression``) and starts a continuation whose messages are the replacement
history, or the summary as a user message when no history was recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from ctxledger.errors import InvalidInput
from ctxledger.importers.anthropic import content_from_parts
from ctxledger.importers.common import (
    SessionBuilder,
    SourceText,
    dump_arguments,
    read_json_lines,
    source_name,
    synth_call_id,
    type_name,
)
from ctxledger.importers.model import ImportedSession
from ctxledger.integers import shown
from ctxledger.limits import check_token_count
from ctxledger.messages import INSTRUCTION_ROLES

_WRAPPERS = frozenset({"session_meta", "response_item", "turn_context", "event_msg", "compacted"})
_ITEM_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "web_search_call",
        "image_generation_call",
        "ghost_snapshot",
        "other",
    }
)
_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text", "reasoning_text")
_META_FIELDS = (
    "id",
    "cwd",
    "originator",
    "cli_version",
    "instructions",
    "git",
    "model_provider",
    "source",
    "timestamp",
)


def _parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else ():
        if not isinstance(part, dict):
            continue
        if part.get("type") in _TEXT_PARTS and isinstance(part.get("text"), str):
            out.append({"type": "text", "text": part["text"]})
        elif part.get("type") == "input_image" and isinstance(part.get("image_url"), str):
            out.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
        elif isinstance(part.get("type"), str):
            out.append(dict(part))
    return out


def _texts(items: Any) -> list[str]:
    # (a "text" part whose text is not a string is kept raw, for validation to name)
    return [
        p["text"]
        for p in _parts(items)
        if p.get("type") == "text" and isinstance(p.get("text"), str)
    ]


def _count(usage: Mapping[str, Any], key: str) -> int:
    """A token count of a usage block: an integer (absent or null: 0), never coerced
    (``int("12")``, ``int(1.9)`` or ``int(True)`` would make up a count), in the range
    the ledger takes (not negative)."""
    value = usage.get(key)
    if value is None:
        return 0
    if type(value) is not int:
        raise InvalidInput(f"last_token_usage.{key} must be an integer, got {shown(value)}")
    return check_token_count(value, f"last_token_usage.{key}")  # the ledger's range


def responses_usage(last: Mapping[str, Any]) -> dict[str, Any]:
    """A Codex ``last_token_usage`` block in OpenAI Responses usage shape."""
    output = _count(last, "output_tokens")
    reasoning = _count(last, "reasoning_output_tokens")
    raw: dict[str, Any] = {
        "input_tokens": _count(last, "input_tokens"),
        "input_tokens_details": {"cached_tokens": _count(last, "cached_input_tokens")},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning if reasoning <= output else 0},
    }
    if last.get("total_tokens") is not None:
        raw["total_tokens"] = last["total_tokens"]
    return raw


class _Rollout:
    """Walks a rollout's records, building one session per compaction segment."""

    def __init__(self, src: SourceText) -> None:
        self.src = src
        self.base = source_name(src.path)
        self.done: list[SessionBuilder] = []
        self.b = SessionBuilder(src, self.base, "codex")
        self.meta: dict[str, Any] = {}
        self.model: str | None = None
        self.context_length: int | None = None
        self.reasoning: list[dict[str, Any]] = []
        self.last_total: Any = None
        #: per compaction segment (by builder): the summary text and the message holding it
        self.summaries: dict[int, tuple[str | None, int | None]] = {}

    # ---------------------------------------------------------------- records

    def record(self, lineno: int, rec: Any, first: bool) -> None:
        if not isinstance(rec, dict):
            raise self.src.error(f"expected a rollout record object, got {type_name(rec)}", lineno)
        kind = rec.get("type")
        if not isinstance(kind, str):  # a list or an object: unhashable, `in` raised
            kind = None
        if kind in _WRAPPERS and "payload" in rec:
            payload = rec["payload"]
        elif rec.get("record_type") == "state":
            return
        elif kind in _ITEM_TYPES:
            kind, payload = "response_item", rec
        elif first and "id" in rec and "timestamp" in rec:
            kind, payload = "session_meta", rec
        elif isinstance(kind, str):
            self.b.warn(f"rollout records of type {shown(kind)} are not known and were skipped")
            return
        else:
            raise self.src.error("not a Codex rollout record (no text 'type')", lineno)
        if not isinstance(payload, dict):
            raise self.src.error(
                f"a {kind} payload must be an object, got {type_name(payload)}", lineno
            )
        getattr(self, f"_on_{kind}")(lineno, payload)

    def _on_session_meta(self, lineno: int, payload: dict[str, Any]) -> None:
        if self.meta:
            self.b.warn("later session_meta records (resumed sessions) were not used")
            return
        self.meta = {k: payload[k] for k in _META_FIELDS if k in payload}
        if isinstance(payload.get("id"), str) and payload["id"]:
            self.base = payload["id"]
        base = payload.get("base_instructions")
        text = base.get("text") if isinstance(base, dict) else base
        if isinstance(text, str):
            self.b.system_prompt = text
        else:
            self.b.warn("this rollout does not record the base instructions (system prompt)")

    def _on_turn_context(self, lineno: int, payload: dict[str, Any]) -> None:
        if isinstance(payload.get("model"), str):
            self.model = payload["model"]

    def _on_event_msg(self, lineno: int, payload: dict[str, Any]) -> None:
        if payload.get("type") != "token_count":
            self.b.warn(
                "event_msg records other than token_count (UI copies of response items) were not imported"
            )
            return
        info = payload.get("info")
        if not isinstance(info, dict) or info.get("total_token_usage") == self.last_total:
            return
        self.last_total = info.get("total_token_usage")
        window = info.get("model_context_window")
        if isinstance(window, int) and not isinstance(window, bool):
            self.context_length = window
        last = info.get("last_token_usage")
        if isinstance(last, dict):
            try:
                usage = responses_usage(last)
            except InvalidInput as exc:
                raise self.src.error(str(exc), lineno) from None
            self.b.add_usage(usage, lineno, shape="openai_responses", model=self.model)

    def _on_compacted(self, lineno: int, payload: dict[str, Any]) -> None:
        self._drop_reasoning()
        prompt = self.b.system_prompt
        self.done.append(self.b)
        self.b = SessionBuilder(self.src, self.base, "codex")
        self.b.system_prompt = prompt
        history = payload.get("replacement_history")
        summary = payload.get("message") if isinstance(payload.get("message"), str) else None
        if isinstance(history, list):
            for item in history:
                self._on_response_item(lineno, item if isinstance(item, dict) else {})
            held = [
                i
                for i, m in enumerate(self.b.messages)
                if summary and m.get("role") == "user" and summary.strip() in str(m.get("content"))
            ]
            self.summaries[id(self.b)] = (summary or None, held[-1] if held else None)
        elif summary is not None:
            self.b.add({"role": "user", "content": summary}, lineno)
            self.summaries[id(self.b)] = (summary, 0)
            self.b.warn(
                "the compaction recorded no replacement history: the continuation starts with its summary only"
            )
        else:
            raise self.src.error(
                "a compacted record needs a 'message' or a 'replacement_history'", lineno
            )

    # ---------------------------------------------------------------- response items

    def _on_response_item(self, lineno: int, item: dict[str, Any]) -> None:
        kind = item.get("type")
        if kind == "message":
            self._message(lineno, item)
        elif kind == "reasoning":
            self.reasoning.append(item)
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            self._call(lineno, item)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            self._output(lineno, item)
        else:
            self.b.warn(
                f"response items of type {shown(kind)} have no chat-message equivalent and were skipped"
            )

    def _message(self, lineno: int, item: dict[str, Any]) -> None:
        role = item.get("role")
        extras = {k: v for k, v in item.items() if k not in ("type", "role", "content")}
        parts = _parts(item.get("content"))
        if role == "assistant":
            msg: dict[str, Any] = {
                **extras,
                "role": "assistant",
                "content": content_from_parts(parts, ""),
            }
            self._attach_reasoning(msg)
            self.b.add(msg, lineno)
        elif role == "user":
            self.b.add({**extras, "role": "user", "content": content_from_parts(parts, "")}, lineno)
        elif role in INSTRUCTION_ROLES:  # each kept in its own role
            self.b.add({**extras, "role": role, "content": content_from_parts(parts, "")}, lineno)
        else:
            raise self.src.error(f"a message item with unknown role {shown(role)}", lineno)

    def _call(self, lineno: int, item: dict[str, Any]) -> None:
        kind = item["type"]
        call_id = (
            item.get("call_id") or item.get("id") or synth_call_id(self.base, len(self.b.messages))
        )
        if kind == "function_call":
            name, args = item.get("name"), dump_arguments(item.get("arguments", "{}"))
        elif kind == "custom_tool_call":
            name, args = (
                item.get("name"),
                msgspec.json.encode({"input": item.get("input", "")}).decode(),
            )
        else:
            name, args = "local_shell", msgspec.json.encode(item.get("action", {})).decode()
        if not isinstance(name, str) or not name:
            raise self.src.error(f"a {kind} item has no 'name'", lineno)
        call: dict[str, Any] = {
            "id": str(call_id),
            "type": "function",
            "function": {"name": name, "arguments": args},
        }
        if kind != "function_call":
            call["codex_type"] = kind
        last = self.b.messages[-1] if self.b.messages else None
        if last is not None and last["role"] == "assistant" and not self.reasoning:
            last.setdefault("tool_calls", []).append(call)  # same response as the text before it
            if last.get("content") == "":
                last["content"] = None
            return
        msg: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        self._attach_reasoning(msg)
        self.b.add(msg, lineno)

    def _output(self, lineno: int, item: dict[str, Any]) -> None:
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise self.src.error(f"a {item.get('type')} item has no 'call_id'", lineno)
        output = item.get("output", "")
        if isinstance(output, dict):
            content: Any = (
                output["content"]
                if isinstance(output.get("content"), str)
                else msgspec.json.encode(output).decode()
            )
        elif isinstance(output, list):
            content = content_from_parts(_parts(output), "")
        else:
            content = "" if output is None else str(output)
        self.b.add({"role": "tool", "tool_call_id": call_id, "content": content}, lineno)

    def _attach_reasoning(self, msg: dict[str, Any]) -> None:
        if not self.reasoning:
            return
        texts = [
            t
            for item in self.reasoning
            for t in _texts(item.get("summary")) + _texts(item.get("content"))
        ]
        if texts:
            msg["reasoning_content"] = "\n\n".join(texts)
        msg["codex_reasoning_items"] = self.reasoning
        self.reasoning = []

    def _drop_reasoning(self) -> None:
        if self.reasoning:
            self.b.warn("reasoning items not followed by an assistant output were dropped")
            self.reasoning = []

    # ---------------------------------------------------------------- result

    def sessions(self) -> list[ImportedSession]:
        self._drop_reasoning()
        builders = [*self.done, self.b]
        out: list[ImportedSession] = []
        for k, b in enumerate(builders):
            last = k == len(builders) - 1
            b.key = self.base if last else f"{self.base}#{k + 1}"
            session = b.build(
                model=self.model,
                context_length=self.context_length,
                parent_key=out[-1].key if out else None,
                end_reason=None if last else "compression",
                extras=dict(self.meta),
            )
            session.summary_text, session.summary_index = self.summaries.get(id(b), (None, None))
            out.append(session)
        return out


def parse_codex(text: str, *, path: str | None = None) -> list[ImportedSession]:
    """Parse one Codex CLI rollout into its compression chain (oldest segment first).

    Raises :class:`ImportFormatError` (with the 1-based line) for malformed input;
    nothing is returned unless every segment validates.
    """
    src = SourceText(text, path)
    rollout = _Rollout(src)
    for n, (lineno, rec) in enumerate(read_json_lines(text, path, "Codex rollout records")):
        rollout.record(lineno, rec, n == 0)
    sessions = rollout.sessions()
    if not any(s.messages for s in sessions):
        raise src.error("no response items found in this rollout", 1)
    return sessions
