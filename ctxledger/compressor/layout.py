"""The message layout the planner works on, gathered in one linear pass (pure).

Tool-call groups as spans (a cut inside a span would split a call from its results),
which messages carry a summary (standalone or merged), the latest real user ask and
visible reply, oversized arguments and long results. The planner
(:mod:`ctxledger.compressor.planner`) places every boundary using only this.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxledger.compressor import markers
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.markers import split_merged
from ctxledger.errors import InvalidMessage
from ctxledger.messages import INSTRUCTION_ROLES, is_text_content_empty


@dataclass(slots=True)
class Layout:
    """What planning needs to know about the list, gathered in one linear pass."""

    n: int
    roles: list[Any]
    # tool groups as spans: cuts in (span_start[k], span_end[k]] would split a group
    span_start: list[int] = field(default_factory=list)
    span_end: list[int] = field(default_factory=list)
    call_of: dict[str, Any] = field(default_factory=dict)  # call id -> the call object
    call_ids: dict[int, list[str]] = field(default_factory=dict)  # assistant -> its call ids
    result_owner: dict[int, int] = field(default_factory=dict)  # tool msg -> calling assistant
    answered: set[str] = field(default_factory=set)  # ids whose latest call has its result
    #: an earlier call whose id a later call re-used (unvalidated input: tau-bench logs,
    #: local models numbering calls per turn) -> whether that earlier call was answered
    superseded: dict[tuple[int, str], bool] = field(default_factory=dict)
    long_args: list[int] = field(default_factory=list)  # assistants with oversized arguments
    long_results: list[int] = field(default_factory=list)  # tool msgs with >= prune_min_chars
    summaries: list[int] = field(default_factory=list)  # messages carrying a summary
    merged: set[int] = field(default_factory=set)  # ... of which merged into a real message
    last_user: int | None = None
    last_reply: int | None = None
    #: whether the first message is the system prompt, or a leading ``developer`` message
    #: (a session without one whose first message gives the instructions): protected alike
    has_system: bool = False

    def is_answered(self, i: int, call_id: str) -> bool:
        """Whether the call `call_id` made by assistant message `i` has its result."""
        earlier = self.superseded.get((i, call_id)) if self.superseded else None
        return call_id in self.answered if earlier is None else earlier

    def _span(self, i: int) -> int:
        """Index of the group span that a cut at i would split, or -1."""
        k = bisect.bisect_left(self.span_start, i) - 1
        return k if k >= 0 and i <= self.span_end[k] else -1

    def prev_cut(self, i: int) -> int:
        """Largest valid cut <= i (0 is always valid)."""
        k = self._span(i)
        return self.span_start[k] if k >= 0 else max(0, i)

    def next_cut(self, i: int) -> int:
        """Smallest valid cut >= i (n when none)."""
        k = self._span(i)
        return min(self.n, self.span_end[k] + 1 if k >= 0 else i)

    def block(self, i: int) -> tuple[int, int]:
        """The unsplittable run [start, end) holding message i (a tool group, or i alone)."""
        return self.prev_cut(i), self.next_cut(i + 1)


def _summary_starts() -> frozenset[str]:
    return frozenset(
        p.lstrip()[:1]
        for p in (
            markers.summary_prefix(),
            *markers.LEGACY_PREFIXES,
            *markers.FOREIGN_TAGS,
            markers.FOREIGN_MERGE_HEADER,
        )
        if p.strip()
    )


def _maybe_summary(content: Any, starts: frozenset[str], end: str) -> bool:
    """Cheap test before the real check: a summary's first character, or a merged
    summary's end marker at the very end (today's merge order puts it last)."""
    if isinstance(content, list):
        if not content:
            return False
        last = content[-1]
        last_text = last.get("text") if isinstance(last, Mapping) else None
        if isinstance(last_text, str) and last_text.endswith(end):
            return True
        first = content[0]
        content = first.get("text") if isinstance(first, Mapping) else None
    if not isinstance(content, str) or not content:
        return False
    head = content[:1]
    return (
        head in starts
        or (head.isspace() and content.lstrip()[:1] in starts)
        or content.endswith(end)
    )


@dataclass(slots=True)
class Scanner:
    """The layout's raw state for a prefix of the list, so a longer list extends it.

    ``feed`` scans messages from where the last feed stopped; ``finish`` derives the
    layout (spans, anchors). A scanner is copied before it is extended, so a layout
    already handed out never changes under its reader.
    """

    min_chars: int
    args_over: int
    roles: list[Any] = field(default_factory=list)
    call_of: dict[str, Any] = field(default_factory=dict)
    call_ids: dict[int, list[str]] = field(default_factory=dict)
    result_owner: dict[int, int] = field(default_factory=dict)
    answered: set[str] = field(default_factory=set)
    superseded: dict[tuple[int, str], bool] = field(default_factory=dict)
    #: a re-used id -> its earlier calls still waiting for a result, earliest first
    #: (filled only on a re-use with no user message or tool result since the earlier
    #: call: the next result goes to the first, as the ledger pairs it; else it is lost)
    waiting: dict[str, list[int]] = field(default_factory=dict)
    #: a re-used id -> its calls that were lost (unanswered across a user message or a
    #: tool result before the re-use), earliest first: a result no waiting or latest call
    #: takes answers the first
    lost: dict[str, list[int]] = field(default_factory=dict)
    last_user: int = -1  # the latest user or tool message scanned (a re-use's test)
    owner_of: dict[str, int] = field(default_factory=dict)
    group_last: dict[int, int] = field(default_factory=dict)  # assistant -> its last result
    long_args: list[int] = field(default_factory=list)
    long_results: list[int] = field(default_factory=list)
    summaries: list[int] = field(default_factory=list)
    merged: set[int] = field(default_factory=set)
    redeclared: int = 0  # call ids issued again (a later call takes over the id)
    owners: list[int] = field(default_factory=list)  # the keys of group_last, sorted
    span_start: list[int] = field(default_factory=list)  # as in Layout, up to `touched`
    span_end: list[int] = field(default_factory=list)
    touched: int | None = None  # the first group changed since the spans were merged

    def copy(self) -> Scanner:
        return Scanner(
            min_chars=self.min_chars, args_over=self.args_over, roles=list(self.roles),
            call_of=dict(self.call_of), call_ids=dict(self.call_ids),
            result_owner=dict(self.result_owner), answered=set(self.answered),
            superseded=dict(self.superseded), waiting={k: list(v) for k, v in self.waiting.items()},
            lost={k: list(v) for k, v in self.lost.items()}, last_user=self.last_user,
            owner_of=dict(self.owner_of), group_last=dict(self.group_last),
            long_args=list(self.long_args), long_results=list(self.long_results),
            summaries=list(self.summaries), merged=set(self.merged),
            redeclared=self.redeclared, owners=list(self.owners),
            span_start=list(self.span_start), span_end=list(self.span_end), touched=self.touched,
        )  # fmt: skip

    def feed(self, messages: Sequence[Mapping[str, Any]]) -> Scanner:
        """Scan the messages after the ones already scanned; raises InvalidMessage."""
        try:
            candidates = self._scan(messages, len(self.roles))
        except (AttributeError, KeyError, TypeError) as exc:
            raise InvalidMessage(
                f"plan() needs validated OpenAI messages (see messages.validate_messages): {exc!r}"
            ) from None
        for i in candidates:
            split = split_merged(messages[i])
            if split is not None:
                self.summaries.append(i)
                if split[1] is not None:
                    self.merged.add(i)
        return self

    def _scan(self, messages: Sequence[Mapping[str, Any]], first: int) -> list[int]:
        """The single pass over new messages; kept tight because it dominates planning time."""
        roles = [m.get("role") for m in itertools.islice(messages, first, None)]
        self.roles.extend(roles)
        call_of, call_ids, owner_of = self.call_of, self.call_ids, self.owner_of
        result_owner, answered, group_last = self.result_owner, self.answered, self.group_last
        waiting, last_user = self.waiting, self.last_user
        candidates: list[int] = []
        changed: list[int] = []  # owners whose group gained a result
        starts, min_chars, args_over = _summary_starts(), self.min_chars, self.args_over
        end_marker = markers.summary_end_marker()
        last_char = end_marker[-1:]
        for i, role in enumerate(roles, first):
            msg = messages[i]
            if role == "tool":
                call_id = msg["tool_call_id"]
                owner = owner_of.get(call_id, -1)
                if waiting and call_id in waiting:  # a re-used id: its earliest waiting call
                    owner = self._answer_earliest(call_id, waiting)
                elif 0 <= owner < i and call_id not in answered:
                    answered.add(call_id)
                elif self.lost and call_id in self.lost:  # a late result for a lost call
                    owner = self._answer_earliest(call_id, self.lost)
                else:
                    owner = -1
                last_user = i  # (a result ends the calls' round: see _supersede)
                if owner >= 0:
                    result_owner[i] = owner
                    group_last[owner] = i
                    changed.append(owner)
                content = msg.get("content")
                if (
                    (len(content) >= min_chars)
                    if type(content) is str
                    else isinstance(content, list)
                ):
                    self.long_results.append(i)
                continue
            content = msg.get("content")
            # the first-character test is inlined: it runs for every message
            if (
                content
                and (
                    type(content) is not str
                    or content[:1] in starts
                    or content[:1].isspace()
                    or content[-1:] == last_char
                )
                and role in ("user", "assistant")
                and _maybe_summary(content, starts, end_marker)
            ):
                candidates.append(i)
            if role == "assistant":
                tool_calls = msg.get("tool_calls")
                if tool_calls:
                    ids = call_ids[i] = []
                    long = False
                    for call in tool_calls:
                        call_id = call["id"]
                        if call_id in call_of:  # a re-used id: the new call awaits its own
                            self.redeclared += 1
                            if owner_of[call_id] != i:
                                self._supersede(call_id, last_user)
                            else:  # twice in one message: the first waits for a result
                                waiting.setdefault(call_id, []).append(i)
                        call_of[call_id] = call
                        owner_of[call_id] = i
                        ids.append(call_id)
                        long = long or len(call["function"]["arguments"]) > args_over
                    if long:
                        self.long_args.append(i)
            elif role == "user":
                last_user = i
        self.last_user = last_user
        self._note_groups(changed)
        return candidates

    def _supersede(self, call_id: str, last_user: int) -> None:
        """A later call re-uses `call_id`: the earlier one keeps its result, or keeps
        waiting for the next result with the id (earliest first) when no user message
        and no tool result (the latest at `last_user`) came between them; else it is
        lost (a new user turn, or its round of results ended without its own): the next
        result goes to the later call, and only one no other call takes answers a lost
        call (``messages.CallLedger`` pairs them alike)."""
        earlier = self.owner_of[call_id]
        answered = call_id in self.answered
        # (an id twice in `earlier`: one key for both calls, answered once one of them is)
        self.superseded[earlier, call_id] = answered or self.superseded.get(
            (earlier, call_id), False
        )
        if answered:
            self.answered.discard(call_id)
        elif last_user < earlier:
            self.waiting.setdefault(call_id, []).append(earlier)
        else:  # (so are the calls waiting before it: all in its user turn)
            gone = self.lost.setdefault(call_id, [])
            gone += self.waiting.pop(call_id, ())
            gone.append(earlier)

    def _answer_earliest(self, call_id: str, calls: dict[str, list[int]]) -> int:
        """The earliest call with re-used `call_id` in `calls` (waiting or lost), now
        answered."""
        queue = calls[call_id]
        owner = queue.pop(0)
        if not queue:
            del calls[call_id]
        self.superseded[owner, call_id] = True
        return owner

    def _note_groups(self, changed: list[int]) -> None:
        """Record the owners new to `owners` (kept sorted) and the first group touched."""
        owners = self.owners
        for owner in changed:
            if not owners or owner > owners[-1]:
                owners.append(owner)
            else:
                at = bisect.bisect_left(owners, owner)
                if owners[at] != owner:
                    owners.insert(at, owner)
        if changed:
            first = min(changed)
            self.touched = first if self.touched is None else min(self.touched, first)

    def _merge_spans(self) -> None:
        """Bring the spans up to date, re-merging only the groups from the first changed one.

        A cut before i is invalid when an earlier call's group reaches i; overlapping
        groups (results interleaved across calls) merge into one unsplittable span.
        """
        lo = self.touched
        if lo is None:
            return
        self.touched = None
        starts, ends = self.span_start, self.span_end
        k = bisect.bisect_right(starts, lo) - 1
        if k >= 0 and ends[k] >= lo:
            lo = starts[k]  # the span holding the change is merged again
        else:
            k += 1
        del starts[k:], ends[k:]
        group_last = self.group_last
        for start in self.owners[bisect.bisect_left(self.owners, lo) :]:
            end = group_last[start]
            if ends and start <= ends[-1]:
                ends[-1] = max(ends[-1], end)
            else:
                starts.append(start)
                ends.append(end)

    def finish(self, messages: Sequence[Mapping[str, Any]]) -> Layout:
        """The layout of `messages` (the list this scanner has scanned entirely)."""
        n = len(self.roles)
        self._merge_spans()
        layout = Layout(
            n=n, roles=self.roles, call_of=self.call_of, call_ids=self.call_ids,
            result_owner=self.result_owner, answered=self.answered,
            superseded=self.superseded, long_args=self.long_args, long_results=self.long_results,
            summaries=self.summaries, merged=self.merged,
            has_system=n > 0 and self.roles[0] in INSTRUCTION_ROLES,
            span_start=self.span_start, span_end=self.span_end,
        )  # fmt: skip
        _find_anchors(messages, layout)
        return layout


def message_layout(messages: Sequence[Mapping[str, Any]], config: CompressionConfig) -> Layout:
    """The layout of `messages`, scanned from scratch."""
    scanner = Scanner(config.prune_min_chars, config.args_truncate_over)
    return scanner.feed(messages).finish(messages)


def _find_anchors(messages: Sequence[Mapping[str, Any]], layout: Layout) -> None:
    """The latest real user message and the latest visible assistant reply (not summaries)."""
    summaries = set(layout.summaries)
    for i in range(layout.n - 1, -1, -1):
        role = layout.roles[i]
        if role == "user" and layout.last_user is None:
            if i not in summaries or i in layout.merged:
                layout.last_user = i
        elif role == "assistant" and layout.last_reply is None:
            msg: Mapping[str, Any] | None = messages[i]
            if i in summaries:
                split = split_merged(messages[i])
                msg = split[1] if split is not None else None
            if msg is not None and not is_text_content_empty(msg):
                layout.last_reply = i
        if layout.last_user is not None and layout.last_reply is not None:
            return
