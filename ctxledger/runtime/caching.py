"""Anthropic prompt caching, the "system_and_3" layout (HERMES_SPEC §7).

Anthropic accepts at most four ``cache_control`` breakpoints per request. The system
prompt is the most stable prefix, so it takes one; the last three non-system
messages that can carry one on the route take the others (all four without a system
prompt), a rolling window that re-establishes the cache within a turn or two after a
compaction invalidates the middle. Placement is hermes-agent 0.19's, checked against
it (``tests/test_parity_caching.py``).

:func:`apply_cache_markers` is pure and cheap: it copies the list shallowly and
deep-copies only the (at most four) messages it marks, so the caller's messages are
never touched and the cost does not grow with the transcript.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from ctxledger.errors import InvalidInput
from ctxledger.integers import shown
from ctxledger.messages import INSTRUCTION_ROLES

CacheTTL = Literal["5m", "1h"]
MAX_BREAKPOINTS: Final = 4
ROLLING_BREAKPOINTS: Final = 3

_NATIVE_PROVIDERS = frozenset({"anthropic"})
_ROUTER_PROVIDERS = frozenset({"openrouter"})
# hermes-agent 0.19's names for Bedrock ("aws", "amazon": its aliases), and one of ours
_BEDROCK_PROVIDERS = frozenset(
    {"bedrock", "aws-bedrock", "amazon-bedrock", "aws", "amazon", "aws_bedrock"}
)
# Claude 2 / Instant predate prompt caching; every later family supports it. Spelled
# "claude-2.1" / "claude-instant-1.2" on the Anthropic API, "anthropic.claude-v2:1" /
# "anthropic.claude-instant-v1" on Bedrock.
_UNCACHEABLE_CLAUDE = re.compile(r"claude-(?:v?2\b|instant)", re.IGNORECASE)
# Bedrock's Claude ids, as hermes-agent 0.19 recognises them (``is_anthropic_bedrock_model``):
# "anthropic.claude-3-5-sonnet-20240620-v1:0", optionally after one inference-profile
# prefix from its list ("us.", "global.", "apac.", ...). Only these run on the Anthropic
# Messages wire there, where breakpoints are honoured; any other id (a bare "claude-*"
# included) goes to the Converse API, which Hermes sends none.
_BEDROCK_ID = re.compile(
    r"^(?:(?:global|us|eu|apac|ap|au|jp|ca|sa|me|af)\.)?anthropic\.claude", re.IGNORECASE
)


def _marker(ttl: CacheTTL) -> dict[str, str]:
    # a fresh dict per breakpoint: markers shared between messages would alias, and a
    # caller editing one marked message would silently edit the others
    marker = {"type": "ephemeral"}
    if ttl == "1h":
        marker["ttl"] = "1h"
    return marker


def _carries(message: Mapping[str, Any], native_anthropic: bool) -> bool:
    """Whether a breakpoint on this message counts on this route (hermes-agent 0.19's
    ``_can_carry_marker``). The native Anthropic adapter moves a message-level marker
    onto the right block, so every message counts there; on OpenAI-compatible routes
    (OpenRouter) only a marker inside a content part is honoured, so a message with no
    content (a pure tool-call turn, an empty result) or whose last part is not an object
    would waste one of the four breakpoints and is passed over for an older one."""
    if native_anthropic:
        return True
    content = message.get("content")
    if isinstance(content, str):
        return content != ""
    return isinstance(content, list) and bool(content) and isinstance(content[-1], Mapping)


def _mark(
    message: Mapping[str, Any], ttl: CacheTTL, native_anthropic: bool
) -> dict[str, Any] | None:
    """A marked deep copy of ``message``, or None when it cannot carry a breakpoint here
    (hermes-agent 0.19's ``_apply_cache_marker``)."""
    role, content = message.get("role"), message.get("content")
    top_level = role == "tool" and native_anthropic
    if not top_level and (content is None or content == ""):
        if not native_anthropic and role in ("tool", "assistant"):
            # OpenRouter rejects a top-level marker on a tool message and ignores one on
            # an envelope with no content: nowhere valid to put it
            return None
        top_level = True
    if top_level:
        marked = copy.deepcopy(dict(message))
        marked["cache_control"] = _marker(ttl)
        return marked
    if isinstance(content, str):
        # a text part carries it, a tool result's too (OpenRouter honours part markers)
        part = {"type": "text", "text": content, "cache_control": _marker(ttl)}
        return {k: [part] if k == "content" else copy.deepcopy(v) for k, v in message.items()}
    if isinstance(content, list) and content and isinstance(content[-1], Mapping):
        marked = copy.deepcopy(dict(message))
        marked["content"][-1]["cache_control"] = _marker(ttl)
        return marked
    return None  # an empty list, or one ending in a non-object part


def apply_cache_markers(
    messages: Sequence[dict[str, Any]],
    *,
    ttl: CacheTTL = "5m",
    native_anthropic: bool = False,
) -> list[dict[str, Any]]:
    """Return the messages with up to four ``cache_control`` breakpoints.

    Breakpoints go on the system prompt (when ``messages[0]`` is one; a leading
    ``developer`` message counts as one) and on the last three non-system messages
    that can carry one on this route (all four on those when there is no system
    prompt), as hermes-agent 0.19 places them (session 31,
    ``tests/test_parity_caching.py``). Unmarked messages are the caller's own objects
    (shallow list copy); marked ones are deep copies.
    """
    if ttl not in ("5m", "1h"):
        raise InvalidInput(f"cache ttl must be '5m' or '1h', got {shown(ttl)}")
    out = list(messages)
    if not out:
        return out
    targets: list[int] = []
    if out[0].get("role") in INSTRUCTION_ROLES:
        targets.append(0)
    room = MAX_BREAKPOINTS - len(targets)
    rolling: list[int] = []
    for index in range(len(out) - 1, -1, -1):
        if len(rolling) == room:
            break
        message = out[index]
        if message.get("role") not in INSTRUCTION_ROLES and _carries(message, native_anthropic):
            rolling.append(index)
    targets.extend(reversed(rolling))
    for index in targets:
        marked = _mark(out[index], ttl, native_anthropic)
        if marked is not None:
            out[index] = marked
    return out


def count_cache_markers(messages: Sequence[Mapping[str, Any]]) -> int:
    """How many ``cache_control`` breakpoints a message list carries (message or part level)."""
    total = 0
    for message in messages:
        if "cache_control" in message:
            total += 1
        content = message.get("content")
        if isinstance(content, list):
            total += sum(
                1 for part in content if isinstance(part, Mapping) and "cache_control" in part
            )
    return total


def supports_prompt_caching(model: str, provider: str | None = None) -> bool:
    """Whether ``cache_control`` breakpoints are worth sending for this model and route.

    Only Claude models, and only where the breakpoints reach Anthropic: the native
    API, OpenRouter's ``anthropic/claude-*`` models, and Bedrock's ``anthropic.claude-*``
    ids (a bare ``claude-*`` id on Bedrock is not one: hermes-agent 0.19 sends it to the
    Converse API uncached). With no provider given, the model id's shape decides.
    Narrower than Hermes on purpose (README "Differences", *Prompt caching routes*):
    Claude 2 / Instant never (Bedrock's ``anthropic.claude-v2`` spelling included), the
    Anthropic route only ``claude-*`` ids, OpenRouter only ``anthropic/claude-*`` ids
    (Hermes also marks Kimi / Moonshot models there).
    """
    name = model.strip().lower()
    if "claude" not in name or _UNCACHEABLE_CLAUDE.search(name):
        return False
    route = (provider or "").strip().lower()
    if route in _NATIVE_PROVIDERS:
        return name.startswith("claude-")
    if route in _ROUTER_PROVIDERS:
        return name.startswith("anthropic/claude-")
    if route in _BEDROCK_PROVIDERS:
        return bool(_BEDROCK_ID.match(name))
    if route:
        return False
    return name.startswith(("claude-", "anthropic/claude-")) or bool(_BEDROCK_ID.match(name))


def native_cache_layout(provider: str | None) -> bool:
    """Whether breakpoints take the native Anthropic layout on this route (markers on a
    tool result itself, every message a carrier) rather than the envelope one of
    OpenAI-compatible routes (hermes-agent 0.19's ``anthropic_prompt_cache_policy``).

    Hermes sends Claude on the Anthropic Messages wire directly and on Bedrock (its
    runtime picks ``anthropic_messages`` for Claude there), both native; OpenRouter is
    the envelope. With no provider the route is unknown (Hermes always resolves one
    first), so the envelope layout stays, as before the Bedrock change: the proxy's
    OpenAI face would otherwise send top-level markers on tool messages, which
    OpenAI-wire routes reject. Only meaningful where :func:`supports_prompt_caching`
    is true (the route alone decides the layout, not the model).
    """
    route = (provider or "").strip().lower()
    return route in _NATIVE_PROVIDERS or route in _BEDROCK_PROVIDERS


__all__ = [
    "MAX_BREAKPOINTS",
    "ROLLING_BREAKPOINTS",
    "CacheTTL",
    "apply_cache_markers",
    "count_cache_markers",
    "native_cache_layout",
    "supports_prompt_caching",
]
