"""What a chat message says, read from its fields whatever their shape: the text of its
content, an assistant's refusal, an audio reply's id, and the words an error uses for a
value of the wrong type. Pure and without validation: callers read messages that may not
have been validated yet (an upstream's reply, an import's line)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def audio_reference(audio: Any) -> str | None:
    """The id of an OpenAI audio reply (``{"id": "audio_..."}``, as a client sends it
    back), else None."""
    audio_id = audio.get("id") if isinstance(audio, Mapping) else None
    return audio_id if isinstance(audio_id, str) and audio_id else None


def refusal_text(message: Mapping[str, Any]) -> str | None:
    """What an assistant said instead of answering: OpenAI's ``refusal`` field when it is
    a non-empty string, else None."""
    refusal = message.get("refusal")
    return refusal if isinstance(refusal, str) and refusal else None


def is_text_content_empty(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    if content is None:
        return True
    if isinstance(content, str):
        return not content.strip()
    return not any(isinstance(p, Mapping) and str(p.get("text", "")).strip() for p in content)


def content_text(message: Mapping[str, Any]) -> str:
    """The text of a message's content (string, or the text parts joined)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        )
    return ""


def kind_of(value: Any) -> str:
    """What JSON `value` is, for a message naming a field of the wrong type (never the
    data itself): "null", "an object", "an integer", ..."""
    if value is None:
        return "null"
    if value == "":
        return "an empty string"
    return _KINDS.get(type(value), type(value).__name__)


_KINDS = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
_KINDS |= {int: "an integer", float: "a number"}
