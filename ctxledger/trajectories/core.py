"""Batch trajectory compression for training data (HERMES_SPEC §8).

Finished ShareGPT trajectories (``{"conversations": [{"from", "value"}, ...]}``)
are brought under a token target offline, one greedy pass each:

1. count tokens per turn (``ctxledger.tokens.count_text`` on the value); at or under
   ``target_max_tokens`` the record is left unchanged (``skipped_under_target``);
2. protect the first system, human, gpt and tool turns and the last
   ``protect_last_n_turns`` turns (see :func:`protected_bounds`); the boundaries move
   so that no tool response is separated from the gpt turn that called it;
3. accumulate middle turns from its start until their tokens reach
   ``(total - target) + summary_target_tokens`` (plus the notice's cost), else take
   the whole middle; a run of tool responses is never cut;
4. replace them with one ``human`` summary turn (at most ``summary_target_tokens``)
   and, optionally, add a notice to the system turn.

Per trajectory, :class:`TrajectoryMetrics` says what happened (``still_over_limit``
when one pass could not reach the target). :func:`compress_file` runs many
trajectories concurrently (anyio workers, a ``CapacityLimiter`` on model requests,
a timeout and jittered retries per trajectory), writes the output in input order,
a metrics JSONL beside it and an aggregate report, and resumes: records already in
the output (matched by key: the record's ``id``, else the sha1 of its input line)
are not redone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import anyio.to_thread
import msgspec

from ctxledger.compressor.serialize import strip_reasoning
from ctxledger.compressor.summarizers.base import Summarizer, SummaryRequest, SummaryResult
from ctxledger.errors import InvalidConfig, InvalidInput, SummarizerError
from ctxledger.importers.sharegpt import ROLE_OF, turns_to_messages
from ctxledger.tokens import DEFAULT_ENCODING, count_text

Turn = dict[str, Any]

DEFAULT_NOTICE = (
    "\n\nNote: part of this conversation was condensed into a summary turn marked "
    "[CONTEXT SUMMARY]; the turns after it are verbatim."
)
SUMMARY_PREFIX = "[CONTEXT SUMMARY]:"
#: failure classes that no retry can fix: the whole batch stops (it can be resumed)
FATAL_FAILURES = frozenset({"auth", "not_configured"})


class TrajectoryConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Settings of one batch run (defaults are Hermes's)."""

    target_max_tokens: int = 15_250
    summary_target_tokens: int = 750
    protect_last_n_turns: int = 4
    add_notice: bool = True
    notice_text: str = DEFAULT_NOTICE
    summary_prefix: str = SUMMARY_PREFIX
    concurrency: int = 16
    max_concurrent_requests: int = 8
    per_trajectory_timeout: float = 300.0
    retries: int = 3
    backoff_base: float = 1.0
    backoff_max: float = 30.0
    #: a turn longer than this is shown to the summarizer as its head and tail (0: never cut)
    summary_input_max_chars: int = 3000
    summary_input_head_chars: int = 1500
    summary_input_tail_chars: int = 500
    encoding: str = DEFAULT_ENCODING

    def __post_init__(self) -> None:
        positive = (
            "target_max_tokens",
            "summary_target_tokens",
            "concurrency",
            "max_concurrent_requests",
            "per_trajectory_timeout",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise InvalidConfig(f"{name} must be positive, got {getattr(self, name)}")
        for name in (
            "protect_last_n_turns",
            "retries",
            "backoff_base",
            "backoff_max",
            "summary_input_max_chars",
        ):
            if getattr(self, name) < 0:
                raise InvalidConfig(f"{name} must not be negative, got {getattr(self, name)}")
        if self.summary_target_tokens >= self.target_max_tokens:
            raise InvalidConfig("summary_target_tokens must be smaller than target_max_tokens")


class TrajectoryMetrics(msgspec.Struct, kw_only=True):
    """What happened to one trajectory (one line of the metrics JSONL)."""

    key: str = ""
    line: int | None = None
    original_tokens: int = 0
    compressed_tokens: int = 0
    original_turns: int = 0
    compressed_turns: int = 0
    turns_compressed_start: int | None = None
    turns_compressed_end: int | None = None
    turns_in_compressed_region: int = 0
    summary_tokens: int = 0
    tokens_saved: int = 0
    compression_ratio: float = 1.0
    was_compressed: bool = False
    skipped_under_target: bool = False
    still_over_limit: bool = False
    skip_reason: str | None = None
    attempts: int = 0
    seconds: float = 0.0
    error: str | None = None
    # sha256 of the IN record's turns (turns_digest) when compressed; None in metrics
    # files written before session 34 (recording then checks OUT's turns against IN's)
    input_digest: str | None = None


class TrajectoryPlan(msgspec.Struct, frozen=True, kw_only=True):
    """Where one trajectory is cut (pure; indices into its turns)."""

    action: str  # "compress" or "skip"
    reason: str | None
    total_tokens: int
    head_end: int
    tail_start: int
    compress_until: int
    tokens_to_compress: int
    accumulated_tokens: int


# --------------------------------------------------------------------------- planning (pure)


def _is_tool(turn: Mapping[str, Any]) -> bool:
    return ROLE_OF.get(str(turn.get("from"))) == "tool"


def protected_bounds(turns: Sequence[Mapping[str, Any]], protect_last_n: int) -> tuple[int, int]:
    """(head_end, tail_start): the compressible middle is ``turns[head_end:tail_start]``.

    As in Hermes, the first system, human, gpt and tool turns and the last
    `protect_last_n` turns are protected; those in the first half of the trajectory
    extend the head, those in the second half the tail. Then the head grows past any
    tool responses right after it and the tail moves back to take in the call of a
    response it would start with, so no call is cut from its responses.
    """
    firsts: dict[str, int] = {}
    for i, turn in enumerate(turns):
        role = ROLE_OF.get(str(turn.get("from")))
        if role is not None and role not in firsts:
            firsts[role] = i
    n = len(turns)
    protected = {*firsts.values(), *range(max(0, n - protect_last_n), n)}
    head_end = max((i for i in protected if i < n // 2), default=-1) + 1
    tail_start = min((i for i in protected if i >= n // 2), default=n)
    while head_end < n and _is_tool(turns[head_end]):
        head_end += 1
    tail_start = max(head_end, tail_start)
    while tail_start > head_end and tail_start < n and _is_tool(turns[tail_start]):
        tail_start -= 1
    return head_end, tail_start


def plan_trajectory(
    turns: Sequence[Mapping[str, Any]],
    turn_tokens: Sequence[int],
    config: TrajectoryConfig,
    notice_tokens: int = 0,
) -> TrajectoryPlan:
    """The greedy §8 plan: how much of the middle to summarize to reach the target."""
    total = sum(turn_tokens)
    head_end, tail_start = protected_bounds(turns, config.protect_last_n_turns)
    need = (total - config.target_max_tokens) + config.summary_target_tokens + notice_tokens
    skip = TrajectoryPlan(action="skip", reason="under_target", total_tokens=total, head_end=head_end,
                          tail_start=tail_start, compress_until=head_end, tokens_to_compress=need,
                          accumulated_tokens=0)  # fmt: skip
    if total <= config.target_max_tokens:
        return skip
    if head_end >= tail_start:
        return msgspec.structs.replace(skip, reason="no_middle")
    acc, until = 0, head_end
    while until < tail_start and acc < need:
        acc += turn_tokens[until]
        until += 1
    while until < tail_start and _is_tool(turns[until]):  # keep a call's responses with it
        acc += turn_tokens[until]
        until += 1
    return msgspec.structs.replace(
        skip, action="compress", reason=None, compress_until=until, accumulated_tokens=acc
    )


def clip_to_tokens(text: str, budget: int, encoding: str = DEFAULT_ENCODING) -> str:
    """`text` cut to at most `budget` tokens (at a line break when one is near the end)."""
    if budget <= 0:
        return ""
    if count_text(text, encoding) <= budget:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_text(text[:mid], encoding) <= budget:
            lo = mid
        else:
            hi = mid - 1
    cut = text[:lo]
    newline = cut.rfind("\n")
    return (cut[:newline] if newline > lo // 2 else cut).rstrip()


# --------------------------------------------------------------------------- one trajectory


def _count_all(values: Sequence[str], encoding: str) -> list[int]:
    return [count_text(v, encoding) for v in values]


def turns_digest(turns: Sequence[Any]) -> str | None:
    """A digest of a record's turns (keys sorted: the same turns, the same digest);
    None for turns that are not JSON (a library caller's own objects)."""
    try:
        return hashlib.sha256(msgspec.json.encode(turns, order="sorted")).hexdigest()
    except (TypeError, ValueError, msgspec.EncodeError):
        return None


def check_turns(turns: Any) -> list[Turn]:
    if not isinstance(turns, list):
        raise InvalidInput(f"'conversations' must be a list of turns, got {type(turns).__name__}")
    for i, turn in enumerate(turns):
        if (
            not isinstance(turn, dict)
            or not isinstance(turn.get("from"), str)
            or not isinstance(turn.get("value"), str)
        ):
            raise InvalidInput(f"turn {i} must be an object with string 'from' and 'value'")
    return turns


def _summary_input(
    middle: Sequence[Turn], config: TrajectoryConfig, key: str
) -> list[dict[str, Any]]:
    """The middle as messages, long contents cut to head + tail (as Hermes does for trajectories)."""
    messages = turns_to_messages(middle, key)
    head, tail = config.summary_input_head_chars, config.summary_input_tail_chars
    for m in messages if config.summary_input_max_chars else ():
        text = m.get("content")
        if isinstance(text, str) and len(text) > config.summary_input_max_chars:
            m["content"] = (
                f"{text[:head]}\n...[{len(text) - head - tail} chars cut]...\n{text[len(text) - tail :]}"
            )
    return messages


async def _summary_turn(
    middle: Sequence[Turn], config: TrajectoryConfig, summarizer: Summarizer, key: str
) -> tuple[str, int]:
    prefix_cost = count_text(config.summary_prefix + "\n", config.encoding)
    budget = max(1, config.summary_target_tokens - prefix_cost)
    request = SummaryRequest(turns=_summary_input(middle, config, key), budget_tokens=budget)
    result: SummaryResult = await summarizer.summarize(request)
    text = strip_reasoning(result.text).strip()  # reasoning never reaches a summary
    if not text:
        raise SummarizerError("the summarizer returned an empty summary", failure_class="empty")
    value = f"{config.summary_prefix}\n{clip_to_tokens(text, budget, config.encoding)}"
    tokens = count_text(value, config.encoding)
    while tokens > config.summary_target_tokens and budget > 1:  # a token may merge across the join
        budget -= 1
        value = f"{config.summary_prefix}\n{clip_to_tokens(text, budget, config.encoding)}"
        tokens = count_text(value, config.encoding)
    return value, tokens


def _notice_cost(
    turns: Sequence[Turn], head_end: int, tokens: Sequence[int], config: TrajectoryConfig
) -> tuple[int | None, int]:
    """(index of the head's system turn that gets the notice, the tokens the notice adds)."""
    if not config.add_notice or not config.notice_text:
        return None, 0
    for i in range(head_end):
        value = turns[i]["value"]
        if ROLE_OF.get(str(turns[i]["from"])) == "system":
            if config.notice_text in value:
                return None, 0
            return i, count_text(value + config.notice_text, config.encoding) - tokens[i]
    return None, 0


async def compress_turns(
    turns: Sequence[Turn], config: TrajectoryConfig, summarizer: Summarizer, *, key: str = ""
) -> tuple[list[Turn], TrajectoryMetrics]:
    """Compress one trajectory's turns. The input is not modified.

    Unchanged turns are returned as the same objects; ``metrics.skip_reason`` says why
    nothing was compressed (``under_target``, ``no_middle``, ``no_gain``).
    """
    turns = check_turns(list(turns))
    tokens = await anyio.to_thread.run_sync(
        _count_all, [t["value"] for t in turns], config.encoding
    )
    total = sum(tokens)
    n = len(turns)
    m = TrajectoryMetrics(
        key=key,
        original_tokens=total,
        compressed_tokens=total,
        original_turns=n,
        compressed_turns=n,
    )
    head_end, _ = protected_bounds(turns, config.protect_last_n_turns)
    notice_at, notice_tokens = _notice_cost(turns, head_end, tokens, config)
    plan = plan_trajectory(turns, tokens, config, notice_tokens)
    if plan.action == "skip":
        m.skipped_under_target = plan.reason == "under_target"
        m.still_over_limit = total > config.target_max_tokens
        m.skip_reason = plan.reason
        return list(turns), m
    start, until = plan.head_end, plan.compress_until
    value, summary_tokens = await _summary_turn(turns[start:until], config, summarizer, key)
    head = list(turns[:start])
    after = sum(tokens[:start]) + summary_tokens + sum(tokens[until:])
    if notice_at is not None:
        head[notice_at] = {
            **head[notice_at],
            "value": head[notice_at]["value"] + config.notice_text,
        }
        after += notice_tokens
    if after >= total:
        m.still_over_limit = True
        m.skip_reason = "no_gain"
        return list(turns), m
    out = [*head, {"from": "human", "value": value}, *turns[until:]]
    m.compressed_tokens = after
    m.compressed_turns = len(out)
    m.turns_compressed_start, m.turns_compressed_end = start, until
    m.turns_in_compressed_region = until - start
    m.summary_tokens = summary_tokens
    m.tokens_saved = total - after
    m.compression_ratio = round(after / max(total, 1), 6)
    m.was_compressed = True
    m.input_digest = await anyio.to_thread.run_sync(turns_digest, turns)
    m.still_over_limit = after > config.target_max_tokens
    return out, m


async def compress_trajectory(
    record: Mapping[str, Any], config: TrajectoryConfig, summarizer: Summarizer, *, key: str = ""
) -> tuple[dict[str, Any], TrajectoryMetrics]:
    """Compress one ShareGPT record (``{"conversations": [...], ...}``); other fields are kept.

    A record that needs no compression is returned unchanged (equal to the input).
    """
    if not isinstance(record, Mapping) or "conversations" not in record:
        raise InvalidInput("a trajectory record needs a 'conversations' list")
    turns, metrics = await compress_turns(record["conversations"], config, summarizer, key=key)
    if not metrics.was_compressed:
        return dict(record), metrics
    return {**record, "conversations": turns}, metrics
