"""The faces of the compacting proxy: what differs between the APIs it serves
(:class:`Api`: how a request is read, what goes upstream, how the reply is folded), and
the two defined here, OpenAI chat completions and Anthropic messages (the Responses
face is :mod:`ctxledger.server.responses_face`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import httpx
from starlette.requests import Request

from ctxledger.server.formats import (
    AnthropicStream,
    ClientTurn,
    OpenAIStream,
    SSEEvent,
    anthropic_json_reply,
    anthropic_turn,
    anthropic_upstream,
    openai_json_reply,
    openai_turn,
    openai_upstream,
)

if TYPE_CHECKING:
    from ctxledger.server.state import ServerState

#: what a face records of an answer: one message, several (a Responses output), or nothing
Reply = dict[str, Any] | list[dict[str, Any]] | None


class Accumulator(Protocol):
    """Folds a stream's events into the reply and its usage (see formats.OpenAIStream)."""

    usage: dict[str, Any] | None

    def feed(self, ev: SSEEvent) -> bool: ...

    @property
    def complete(self) -> bool: ...

    @property
    def ended(self) -> bool:
        """The stream's end marker arrived (the reply is recorded before it is forwarded)."""
        ...

    def reply(self) -> Reply: ...


#: (state, request, body, turn) -> the session family, having completed ``turn.messages``
Resolver = Callable[["ServerState", Request, Mapping[str, Any], ClientTurn], str | None]


@dataclass(frozen=True)
class Api:
    name: str
    upstream_path: str
    turn: Callable[[Mapping[str, Any], bool], ClientTurn]
    upstream: Callable[[Mapping[str, Any], list[dict[str, Any]], int | None], dict[str, Any]]
    json_reply: Callable[[Any], tuple[Reply, dict[str, Any] | None]]
    #: the upstream API (``--api``) this face forwards to, when not its own name
    provider: str = ""
    #: the stream accumulator of a face defined outside this module
    stream: Callable[[ClientTurn], Accumulator] | None = None
    #: reads the start of a 2xx stream: an error the provider reports as an event before
    #: any output comes back as an error response (so it is recovered from like one)
    peek: Callable[[httpx.Response], Awaitable[httpx.Response]] | None = None
    #: completes a request that continues recorded history by reference (it may extend
    #: ``turn.messages`` in front) and names its session family; None: the usual way
    resolve: Resolver | None = None

    @property
    def served_by(self) -> str:
        return self.provider or self.name

    def accumulator(self, turn: ClientTurn) -> Accumulator:
        if self.stream is not None:
            return self.stream(turn)
        return (
            OpenAIStream(wants_usage=turn.wants_usage)
            if self.name == "openai"
            else AnthropicStream()
        )


OPENAI = Api("openai", "/chat/completions", openai_turn, openai_upstream, openai_json_reply)
#: the upstream paths are the API's, after the base (``with_path`` adds an Anthropic ``/v1``)
ANTHROPIC = Api("anthropic", "/messages", anthropic_turn, anthropic_upstream, anthropic_json_reply)


__all__ = ["ANTHROPIC", "OPENAI", "Accumulator", "Api", "Reply", "Resolver"]
