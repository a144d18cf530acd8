"""Hypothesis strategies for valid OpenAI-shape agent transcripts, shared by the suite.

What they generate (every transcript passes ``messages.validate_messages``):

* an optional system prompt at index 0;
* turns: a user message, then an assistant "episode" of 0-4 tool-call groups (an
  assistant message with 1-3 parallel calls, immediately followed by one result per
  call), usually ending with a visible assistant reply;
* content shapes: plain strings, lists of parts (text, sometimes an image part),
  empty strings, ``None`` on call-only assistant messages, very long messages;
* tool results that sometimes repeat an earlier result verbatim (duplicates) and
  call arguments that are sometimes huge or not JSON at all;
* optionally a *dangling* final call: a last assistant message whose calls have no
  results yet (a run that stopped mid-call). Nowhere else is a call unanswered.

Entry points:

``transcripts(...)``         -> ``list[dict]``
``counted_transcripts(...)`` -> ``(messages, token_counts)`` with counts parallel to
                                the messages (Hermes's rough estimate, optionally
                                jittered to mimic exact counts)
``turns(id_prefix=...)``     -> whole turns to append to an existing transcript
``tool_names``, ``arguments_json``, ``texts`` are building blocks.

Import it as ``from helpers import strategies`` (pytest puts ``tests/`` on ``sys.path``).
Tool-call ids are unique within a transcript: ``{prefix}_{n}``. Generation avoids
``st.text`` for bulk content (slow and noisy); words come from a small vocabulary.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from ctxledger.compressor import markers
from ctxledger.compressor.config import CompressionConfig
from ctxledger.demo.synth import VOCABULARY
from ctxledger.tokens import rough_message_tokens

Message = dict[str, Any]

WORDS = VOCABULARY

#: tool names seen in real logs, including aliases and one the prune pass does not know
TOOL_NAMES = (
    "terminal",
    "bash",
    "execute_bash",
    "read_file",
    "view",
    "search_files",
    "grep",
    "write_file",
    "patch",
    "str_replace_editor",
    "web_search",
    "get_reservation_details",
)
_ARG_KEYS = ("command", "path", "pattern", "query", "content", "offset", "mode", "user_id")


def _filler(n_chars: int) -> str:
    base = "lorem ipsum dolor sit amet, consectetur adipiscing elit; "
    return (base * (n_chars // len(base) + 1))[:n_chars]


@functools.cache
def texts(min_words: int = 1, max_words: int = 40, *, long: bool = True) -> st.SearchStrategy[str]:
    """Prose of a few words, or (rarely, when `long`) 2,000-12,000 chars of filler."""
    short = st.lists(st.sampled_from(WORDS), min_size=min_words, max_size=max_words).map(" ".join)
    if not long:
        return short
    return st.one_of(short, short, short, short, short, st.integers(2_000, 12_000).map(_filler))


def _parts(text: str, with_image: bool) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if with_image:
        parts.append(
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
        )
    return parts


@functools.cache
def contents(
    *, allow_empty: bool = True, allow_parts: bool = True, long: bool = True
) -> st.SearchStrategy[Any]:
    """Message content: a string, sometimes a list of parts, sometimes empty."""
    options: list[st.SearchStrategy[Any]] = [texts(long=long)] * 4
    if allow_parts:
        options.append(st.builds(_parts, texts(long=False), st.booleans()))
    if allow_empty:
        options.append(st.just(""))
    return st.one_of(*options)


tool_names = st.sampled_from(TOOL_NAMES)
# rare events compare with a middle value: hypothesis favours the ends of an integer range
_ONE_IN_20 = st.integers(0, 19).map(lambda x: x == 7)
_ONE_IN_6 = st.integers(0, 5).map(lambda x: x == 3)
_ONE_IN_7 = st.integers(0, 6).map(lambda x: x == 3)
_CALL_CONTENT = st.sampled_from([None, "", "Let me check."])
_RESULT_CONTENT = {
    flag: st.one_of(
        texts(long=flag), texts(long=flag), st.builds(lambda t: _parts(t, False), texts(long=False))
    )
    for flag in (True, False)
}


_ARG_VALUES = st.one_of(
    texts(1, 8, long=False),
    st.integers(0, 500),
    st.integers(600, 3_000).map(_filler),  # huge leaf: argument truncation
    st.lists(texts(1, 3, long=False), max_size=3),
)
_ARG_OBJECTS = st.dictionaries(st.sampled_from(_ARG_KEYS), _ARG_VALUES, max_size=3)
_INVALID_ARGS = texts(1, 5, long=False).map(lambda t: "{not json: " + t)


@st.composite
def arguments_json(draw: st.DrawFn, *, allow_invalid: bool = True) -> str:
    """A call's arguments: usually a small JSON object, sometimes huge, rarely not JSON."""
    if allow_invalid and draw(_ONE_IN_20):
        return draw(_INVALID_ARGS)
    return json.dumps(draw(_ARG_OBJECTS))


class _Ids:
    """Call-id counter threaded through one draw so ids stay unique."""

    def __init__(self, prefix: str, start: int = 0) -> None:
        self.prefix = prefix
        self.n = start

    def next(self) -> str:
        self.n += 1
        return f"{self.prefix}_{self.n}"


def _tool_group(
    draw: st.DrawFn, ids: _Ids, results: list[Any], *, answered: bool, long: bool
) -> list[Message]:
    calls = [
        {
            "id": ids.next(),
            "type": "function",
            "function": {"name": draw(tool_names), "arguments": draw(arguments_json())},
        }
        for _ in range(draw(st.integers(1, 3)))
    ]
    assistant: Message = {"role": "assistant", "content": draw(_CALL_CONTENT), "tool_calls": calls}
    if assistant["content"] is None and draw(st.booleans()):
        assistant["content"] = draw(contents(long=False))
        if assistant["content"] == "":
            assistant["content"] = None
    group = [assistant]
    if not answered:
        return group
    for call in calls:
        if results and draw(_ONE_IN_6):
            content: Any = results[
                draw(st.integers(0, len(results) - 1))
            ]  # verbatim repeat: a duplicate
        else:
            content = draw(_RESULT_CONTENT[long])
            results.append(content)
        group.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    return group


def _turn(
    draw: st.DrawFn, ids: _Ids, results: list[Any], *, allow_parts: bool, long: bool
) -> list[Message]:
    turn: list[Message] = [
        {"role": "user", "content": draw(contents(allow_parts=allow_parts, long=long))}
    ]
    for _ in range(draw(st.integers(0, 4))):
        turn.extend(_tool_group(draw, ids, results, answered=True, long=long))
    if draw(st.integers(0, 3)) > 0:  # usually a reply; without one, two user turns meet
        turn.append(
            {"role": "assistant", "content": draw(contents(allow_parts=allow_parts, long=long))}
        )
    return turn


@st.composite
def transcripts(
    draw: st.DrawFn,
    *,
    min_turns: int = 1,
    max_turns: int = 10,
    system: bool | None = None,
    allow_dangling: bool = True,
    allow_parts: bool = True,
    long: bool = True,
    id_prefix: str = "call",
) -> list[Message]:
    """A valid transcript (see the module docstring). `system=None` draws whether to have one."""
    ids = _Ids(id_prefix)
    results: list[Any] = []
    messages: list[Message] = []
    if system if system is not None else draw(st.booleans()):
        messages.append({"role": "system", "content": draw(texts(5, 60, long=False))})
    for _ in range(draw(st.integers(min_turns, max_turns))):
        messages.extend(_turn(draw, ids, results, allow_parts=allow_parts, long=long))
    if allow_dangling and draw(_ONE_IN_7):
        messages.extend(_tool_group(draw, ids, results, answered=False, long=long))
    return messages


@st.composite
def turns(
    draw: st.DrawFn, *, id_prefix: str, min_turns: int = 1, max_turns: int = 3
) -> list[Message]:
    """New turns to append to a transcript; `id_prefix` must differ from the ids in use."""
    ids = _Ids(id_prefix)
    results: list[Any] = []
    out: list[Message] = []
    for _ in range(draw(st.integers(min_turns, max_turns))):
        out.extend(_turn(draw, ids, results, allow_parts=True, long=False))
    return out


def jittered_counts(messages: list[Message], factors: list[float]) -> list[int]:
    """Rough counts scaled per message (exact counts differ from rough ones that way)."""
    return [
        max(1, int(rough_message_tokens(m) * f)) for m, f in zip(messages, factors, strict=True)
    ]


@st.composite
def counted_transcripts(
    draw: st.DrawFn, *, jitter: bool = True, **transcript_kwargs: Any
) -> tuple[list[Message], list[int]]:
    """(messages, token_counts): counts parallel to the messages."""
    messages = draw(transcripts(**transcript_kwargs))
    if not jitter:
        return messages, [rough_message_tokens(m) for m in messages]
    factors = draw(st.lists(st.floats(0.6, 1.6), min_size=len(messages), max_size=len(messages)))
    return messages, jittered_counts(messages, factors)


def ends_with_dangling_call(messages: list[Message]) -> bool:
    last = messages[-1] if messages else {}
    return last.get("role") == "assistant" and bool(last.get("tool_calls"))


@st.composite
def planner_configs(draw: st.DrawFn, *, vary_summary_cap: bool = False) -> CompressionConfig:
    """Settings that move every planning decision (optionally the summary cap too)."""
    cap = {}
    if vary_summary_cap:
        cap["max_summary_tokens_cap"] = draw(st.sampled_from([60, 400, 12_000]))
    return CompressionConfig(
        protect_first_n=draw(st.integers(0, 4)),
        protect_last_n=draw(st.integers(1, 25)),
        tail_min_messages=draw(st.integers(0, 10)),
        target_ratio=draw(st.sampled_from([0.1, 0.2, 0.5])),
        threshold_floor_tokens=0,
        summary_min_tokens=draw(st.sampled_from([50, 300])),
        **cap,
        orphan_policy=draw(st.sampled_from(["strip", "stub"])),
        prune_min_chars=draw(st.sampled_from([50, 200, 1000])),
        args_truncate_over=draw(st.sampled_from([100, 500])),
        args_leaf_keep=draw(st.sampled_from([20, 200])),
    )


@st.composite
def planner_sessions(draw: st.DrawFn) -> list[Message]:
    """A transcript, sometimes holding an earlier summary (standalone or merged)."""
    messages = draw(transcripts(max_turns=8))
    kind = draw(st.sampled_from(["none", "none", "standalone", "merged"]))
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    if kind != "none" and users:
        at = draw(st.sampled_from(users))
        body = "Goal: fix the tests. Done: read the failing module."
        if kind == "standalone":
            messages.insert(at, {"role": "user", "content": markers.wrap_summary(body)})
        else:
            messages[at] = markers.merge_summary(messages[at], body)
    return messages


def json_places(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON `value` as a key path, the whole value first (``()``): where
    a fuzzing test may put something else."""
    out = [at]
    if isinstance(value, dict):
        for key, item in value.items():
            out += json_places(item, (*at, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += json_places(item, (*at, i))
    return out


def mutate_once(
    draw: st.DrawFn,
    doc: Any,
    values: st.SearchStrategy[Any],
    add: Callable[[st.DrawFn, Any, Any], None],
) -> bool:
    """Change one place of the JSON `doc` in place, drawn from :func:`json_places`: set it
    to one of `values`, drop it, or `add(draw, parent, key)` something there; False when
    `doc` has no place but itself."""
    places = json_places(doc)[1:]
    if not places:
        return False
    at = draw(st.sampled_from(places))
    parent = doc
    for key in at[:-1]:
        parent = parent[key]
    how = draw(st.sampled_from(["set", "drop", "add"]))
    if how == "set":
        parent[at[-1]] = draw(values)
    elif how == "drop":
        del parent[at[-1]]
    else:
        add(draw, parent, at[-1])
    return True


#: the shapes a streamed append's property draws (test_append_stream, test_postgres_stream):
#: streams' sizes, the chunk size, events already in the log, which event is a blob (-1: none)
STREAM_SHAPES = {
    "sizes": st.lists(st.integers(0, 9), min_size=1, max_size=3),
    "chunk": st.integers(1, 4),
    "before": st.integers(0, 3),
    "big": st.integers(-1, 5),
}


def numbered_per_turn(messages: list[Message]) -> list[Message]:
    """`messages` with every answered call's id renumbered per turn (``call_0``,
    ``call_1``, ... in each assistant message), and its results with it: the same ids
    in many turns, as tau-bench logs and local models that number calls per turn send
    them (the ledger repairs them; ``plan()`` takes them as they are). Calls without a
    result keep their ids, as do results whose call no message made."""
    answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    renamed: dict[str, str] = {}
    out: list[Message] = []
    for m in messages:
        m = dict(m)
        if m.get("tool_calls"):
            calls = []
            for j, c in enumerate(m["tool_calls"]):
                if c["id"] in answered:
                    renamed[c["id"]] = f"call_{j}"
                    c = {**c, "id": f"call_{j}"}
                calls.append(c)
            m["tool_calls"] = calls
        elif m["role"] == "tool" and m["tool_call_id"] in renamed:
            m["tool_call_id"] = renamed[m["tool_call_id"]]
        out.append(m)
    return out


def interleaved_results(
    messages: list[Message], counts: list[int]
) -> tuple[list[Message], list[int]]:
    """`messages` (and their `counts`) with each turn's results moved after the next
    turn's calls where that turn follows them at once: ``A(x), r1, B(x), r2`` becomes
    ``A(x), B(x), r1, r2`` (with ids numbered per turn, a re-use while a call waits)."""
    pairs = list(zip(messages, counts, strict=True))
    out: list[tuple[Message, int]] = []
    i = 0
    while i < len(pairs):
        out.append(pairs[i])
        j = i + 1
        while j < len(pairs) and pairs[j][0]["role"] == "tool":
            j += 1
        if (
            pairs[i][0].get("tool_calls")
            and i + 1 < j < len(pairs)
            and pairs[j][0].get("tool_calls")
        ):
            out.append(pairs[j])
            out.extend(pairs[i + 1 : j])
            i = j + 1
        else:
            i += 1
    return [m for m, _ in out], [c for _, c in out]


#: the text of a call :func:`with_lost_calls` inserts (kept when the call is stripped)
LOST_TEXT = "stopped with a call in flight"


def with_lost_calls(
    messages: list[Message], counts: list[int], before: set[int], *, reuse: bool
) -> tuple[list[Message], list[int]]:
    """`messages` (and `counts`) with an assistant call that never got a result right
    before each user message whose index is in `before` (a run stopped with its call in
    flight, then the user asked again). With `reuse` its id is ``call_0``, which calls
    numbered per turn (:func:`numbered_per_turn`) make again later; else a unique one."""
    out: list[Message] = []
    out_counts: list[int] = []
    for i, (m, c) in enumerate(zip(messages, counts, strict=True)):
        if i in before and m["role"] == "user" and i > 0:
            call_id = "call_0" if reuse else f"lost_{i}"
            function = {"name": "terminal", "arguments": "{}"}
            call = {"id": call_id, "type": "function", "function": function}
            out.append({"role": "assistant", "content": LOST_TEXT, "tool_calls": [call]})
            out_counts.append(40)
        out.append(m)
        out_counts.append(c)
    return out, out_counts
