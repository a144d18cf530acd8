"""Input limits: how deep JSON may nest, how big an input may be, which numbers are sane.

One module owns these rules so the library, the CLI and the service apply the same
ones. Every walk here is iterative: a check for "too deep" must not itself recurse.

- **Nesting**: a message, a tool call's ``arguments``, a tool, a usage report may nest
  :data:`MAX_JSON_DEPTH` levels (``$CTXLEDGER_MAX_JSON_DEPTH``); deeper input is refused at
  the door, and reads of stored data bound their walks (:func:`json_text_depth`).
- **Size**: the CLI reads at most :data:`MAX_INPUT_BYTES` from a file or stdin
  (``$CTXLEDGER_MAX_INPUT_BYTES`` or ``import --max-bytes``), and only regular files.
- **Names**: a model name, a title, an end reason and a session id a caller chooses are
  bounded (:data:`MAX_MODEL_CHARS`, :data:`MAX_TITLE_CHARS`, :data:`MAX_REASON_CHARS`,
  :data:`MAX_SESSION_ID_CHARS`) and hold no control character (newline and tab included)
  and no bidirectional-text control (:func:`check_name`): they are printed on one line.
  Only new values are checked (an old ledger's replay as recorded: :func:`replaying_recorded`).
  A manual compression's focus is free text: at most :data:`MAX_FOCUS_CHARS`.
- **Numbers**: a token count is an integer in ``[0, MAX_TOKEN_COUNT]`` (a float is
  accepted only when it is integral, ``12.0``); a context length is an integer in
  ``[1024, MAX_CONTEXT_LENGTH]``. Anything else is rejected with :class:`InvalidInput`.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import importlib
import math
import os
import re
import sys
import warnings
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal

from ctxledger.errors import InvalidInput
from ctxledger.integers import ID_CHARS, decimal_digits, shown
from ctxledger.unicodecheck import check_unicode, json_problem, not_unicode

#: default nesting limit of a message or of tool-call arguments (JSON levels)
MAX_JSON_DEPTH = 100
#: default cap on what the CLI reads from one input (bytes): 256 MiB
MAX_INPUT_BYTES = 256 * 1024 * 1024
#: the largest token count accepted anywhere (a trillion: far beyond any real report)
MAX_TOKEN_COUNT = 10**12
#: the largest context window accepted (a billion tokens)
MAX_CONTEXT_LENGTH = 10**9
#: the smallest context window accepted
MIN_CONTEXT_LENGTH = 1024

#: the longest model name (characters): OpenAI's and Anthropic's ids are under 100; an
#: AWS Bedrock model id (an ARN) may be 2,048, a local server's may be a file path
MAX_MODEL_CHARS = 2048
#: the longest session title (characters): room for a path (an audit's title names one)
MAX_TITLE_CHARS = 4096
#: the longest session id a caller chooses through the library (the HTTP API and the
#: proxy's header take at most 200 of a narrower alphabet)
MAX_SESSION_ID_CHARS = ID_CHARS  # (errors quote an id this long whole)
#: the longest reason a session is ended with (characters): a short phrase, shown in listings
MAX_REASON_CHARS = 1000
#: the longest focus topic of a manual compression (characters): a phrase or a few lines
MAX_FOCUS_CHARS = 4096

#: what a name may not hold: C0 and C1 controls and DEL, the line and paragraph
#: separators, and the bidirectional-text controls (marks, embeddings, overrides, isolates)
NOT_IN_NAME_CLASS = "\x00-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_NOT_IN_NAME = re.compile(f"[{NOT_IN_NAME_CLASS}]")
_NAME_RULE = "names, titles and ids may hold no control characters (newline and tab included)"
#: what free text (``lines=True``) may not hold: the same, newline and tab aside
_NOT_IN_TEXT = re.compile("[" + NOT_IN_NAME_CLASS.replace("\x00-\x1f", "\x00-\x08\x0b-\x1f") + "]")

#: a string (escapes included; an unterminated one runs to the end of the text, so a
#: match started at a quote never fails and is never retried from each later quote:
#: 20 KB of \" after one quote took 6 s) or a bracket
_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise InvalidInput(f"{name} must be a positive integer, got {shown(raw)}") from None
    if value < 1:
        raise InvalidInput(f"{name} must be a positive integer, got {shown(raw)}")
    return value


def max_json_depth() -> int:
    """The nesting limit in force (``$CTXLEDGER_MAX_JSON_DEPTH``, else the default)."""
    return _env_int("CTXLEDGER_MAX_JSON_DEPTH", MAX_JSON_DEPTH)


def max_input_bytes() -> int:
    """The input size cap in force (``$CTXLEDGER_MAX_INPUT_BYTES``, else the default)."""
    return _env_int("CTXLEDGER_MAX_INPUT_BYTES", MAX_INPUT_BYTES)


def check_limit_variables() -> None:
    """InvalidInput naming ``$CTXLEDGER_MAX_JSON_DEPTH`` or ``$CTXLEDGER_MAX_INPUT_BYTES`` when
    not a positive integer: called where writing starts (a ledger's append, the writing
    commands), so no limit fails only at the first message; reading is unaffected."""
    max_json_depth()
    max_input_bytes()


def json_text_depth(text: str, stop_above: int | None = None) -> int:
    """How deep the brackets of JSON `text` nest (strings skipped), without decoding it.

    Stops counting once the depth passes `stop_above` (the result is then
    ``stop_above + 1``), so a hostile input costs no more than the scan up to there.
    """
    if "[" not in text and "{" not in text:
        return 0
    depth = deepest = 0
    for match in _JSON_TOKENS.finditer(text):
        tok = match.group()
        if tok in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if stop_above is not None and deepest > stop_above:
                    return deepest
        elif tok in "]}":
            depth = max(0, depth - 1)
    return deepest


_SCALARS = frozenset({str, int, float, bool, type(None)})


def value_depth(value: Any, stop_above: int | None = None) -> int:
    """How deep a decoded JSON value nests (a scalar is 0), walked iteratively."""
    depth = walked_depth(value, stop_above, None)
    assert depth is not None  # no budget: always an answer
    return depth


def walked_depth(value: Any, stop_above: int | None, budget: int | None) -> int | None:
    """:func:`value_depth`, or None once more than `budget` containers were walked
    without an answer (the caller then measures the depth another way)."""
    if not isinstance(value, Mapping | list | tuple):
        return 0
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        if budget is not None:
            budget -= 1
            if budget < 0:
                return None
        item, level = stack.pop()
        if level > deepest:
            deepest = level
            if stop_above is not None and deepest > stop_above:
                return deepest
        children = item.values() if isinstance(item, Mapping) else item
        # only containers go on the stack: a body's thousands of strings are skipped
        # (by their exact type first: an isinstance against Mapping costs ~10x)
        stack.extend(
            (c, level + 1)
            for c in children
            if type(c) not in _SCALARS and isinstance(c, Mapping | list | tuple)
        )
    return deepest


#: leaves JSON holds as they are, by exact type (a float is checked: NaN and the
#: infinities are encoded as null; an int: msgspec writes one of up to 4,300 digits
#: (Python's limit) but reads back at most 4,300 characters, the sign included)
_LEAVES = frozenset({str, bool, type(None)})
_INFINITIES = (math.inf, -math.inf)
_TEXT = {str}


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def json_depth(value: Any, stop_above: int | None = None) -> tuple[int, bool]:
    """:func:`value_depth`, and whether every part of `value` is JSON as it is.

    Not JSON (msgspec would store it changed, silently): a NaN or an infinity (stored as
    null), a key that is not text (``1`` stored as ``"1"``), a set, bytes (stored as
    base64), a Mapping that is no dict inside `value`, any other object. A tuple (a
    namedtuple) or a list subclass is a list. One iterative walk; the types of a
    container's children are gathered at C speed, so a container of plain leaves (the
    common case) costs no Python loop. The walk stops above `stop_above` (the flag then
    covers only what was walked) and at the first part that is not JSON (the depth is
    then how deep it had gone). :func:`not_json` names that part.
    """
    if not isinstance(value, Mapping | list | tuple):
        return 0, _is_leaf(value)
    deepest = 0
    low, high = _int_bounds()
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if level > deepest:
            deepest = level
            if stop_above is not None and deepest > stop_above:
                return deepest, True
        if isinstance(item, Mapping):
            if item and set(map(type, item)) != _TEXT and not all(map(_is_text, item)):
                return deepest, False
            children: Any = item.values()
        else:
            children = item
        kinds = set(map(type, children))
        if kinds <= _LEAVES:
            continue
        if kinds <= _NUMBERS and _plain_numbers(children, kinds, low, high):
            continue
        for child in children:
            kind = type(child)
            if kind in _LEAVES:
                continue
            if kind is int:
                if low < child < high:
                    continue
                return deepest, False
            if kind is dict or kind is list or kind is tuple or isinstance(child, _CONTAINERS):
                stack.append((child, level + 1))  # a subclass (namedtuple) is one too
            elif not _is_leaf(child):
                return deepest, False
    return deepest, True


#: what a container of only these holds can be judged at C speed (:func:`_plain_numbers`)
_NUMBERS = frozenset({int, float, bool})
#: inside a value, a Mapping that is no dict is not JSON: msgspec writes none (a
#: mappingproxy failed naming the event, not the path: review I3); `value` itself may be
#: one (its callers copy it into a dict)
_CONTAINERS = (dict, list, tuple)


def _plain_numbers(numbers: Any, kinds: set[type], low: int | float, high: int | float) -> bool:
    """Whether the ints, floats and bools `numbers` holds (their types: `kinds`) are all
    finite and inside the int bound, judged at C speed (a list of 100,000 numbers took
    a Python loop); False also when the loop must look (an int past a float's range)."""
    try:
        if float in kinds and not all(map(math.isfinite, numbers)):
            return False
        return int not in kinds or (low < min(numbers) and max(numbers) < high)
    except OverflowError:  # an int past a float's range
        return False


def _is_leaf(value: Any) -> bool:
    """Whether `value` is a JSON leaf as it is. A subclass of str, int or float counts
    only as an enum (msgspec encodes an enum by its value and refuses other subclasses:
    ``numpy.float64`` was refused naming an event, not the path)."""
    if type(value) not in _PLAIN and not isinstance(value, enum.Enum):
        return False
    if isinstance(value, float):
        return value == value and value not in _INFINITIES
    if isinstance(value, int) and not isinstance(value, bool):
        low, high = _int_bounds()
        return low < value < high
    return value is None or isinstance(value, str | bool)


_PLAIN = frozenset({str, int, float, bool, type(None)})


def _int_bounds() -> tuple[int | float, int | float]:
    """Ints stored as JSON text and read back lie strictly between these: msgspec reads a
    number of at most as many characters as Python converts to text, the sign included
    (a positive int of 4,300 digits is read back, a negative one is not: review G2, an
    old ledger holding one replays); none when Python's limit is off."""
    return _bounds_for(sys.get_int_max_str_digits())


@functools.cache
def _bounds_for(digits: int) -> tuple[int | float, int | float]:
    if not digits:
        return -math.inf, math.inf
    return -(10 ** (digits - 1)), 10**digits


def _int_digits() -> int:
    """The most digits of a positive int stored and read back (0: no limit)."""
    return max(0, sys.get_int_max_str_digits())


def not_json(value: Any, where: str = "", whole: str = "the value") -> str | None:
    """What JSON cannot hold in `value` (see :func:`json_depth`), named by its path
    under `where` (``content[0].score is nan: JSON has no NaN or infinity``); None
    when it is all JSON. `whole` names `value` itself when `where` is empty."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, Mapping) and (item is value or isinstance(item, dict)):
            for key in item:
                if not isinstance(key, str):
                    return f"{path or whole} has a key that is not text: {shown(key)}"
            stack.extend((item[k], _key_path(path, k)) for k in reversed(list(item)))
        elif isinstance(item, list | tuple):
            stack.extend((item[i], f"{path}[{i}]") for i in reversed(range(len(item))))
        elif _is_leaf(item):
            continue
        elif isinstance(item, float) and not math.isfinite(item):
            return f"{path or whole} is {item!r}: JSON has no NaN or infinity"
        elif isinstance(item, int) and not isinstance(item, bool) and type(item) in _PLAIN:
            return (
                f"{path or whole} is an integer of {decimal_digits(item):,} digits: at most "
                f"{_int_digits():,} are stored and read back ({_int_digits() - 1:,} with a "
                "minus sign)"
            )
        else:
            return (
                f"{path or whole} is a Python {type(item).__name__}, which JSON cannot hold "
                "(JSON holds text, numbers, true/false, null, lists and objects)"
            )
    return None


def _key_path(path: str, key: str) -> str:
    if key.isidentifier() and len(key) <= 40:
        return f"{path}.{key}" if path else key
    cut = key if len(key) <= 40 else key[:40] + "…"
    return f"{path}[{cut!r}]"


def check_json(value: Any, field: str) -> Any:
    """`value` when it is all JSON as it is and (when new) nests at most :func:`max_json_depth`
    levels (one holding itself was walked without end), else InvalidInput naming the part."""
    limit = None if replaying() else max_json_depth()
    depth, plain = json_depth(value, limit)
    if limit is not None and depth > limit:
        raise InvalidInput(f"{field} nests deeper than {limit} levels (CTXLEDGER_MAX_JSON_DEPTH)")
    if plain:
        return value
    raise InvalidInput(not_json(value, field) or f"{field} is not JSON")


def too_deep(text: str, limit: int | None = None) -> bool:
    """Whether JSON `text` nests deeper than `limit` (default: the limit in force)."""
    bound = max_json_depth() if limit is None else limit
    if text.count("[") + text.count("{") <= bound:  # each level opens one: cannot be deeper
        return False
    return json_text_depth(text, bound) > bound


def check_token_count(value: Any, field: str) -> int:
    """A token count as an int; ``None`` is 0. Raises :class:`InvalidInput` otherwise.

    Rejected: booleans, non-numbers, NaN/infinity, non-integral floats (``12.7``),
    negatives and anything above :data:`MAX_TOKEN_COUNT`.
    """
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"{field} must be a number, got {type(value).__name__}")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"{field} must be a finite number, got {shown(value)}")
        if not value.is_integer():
            raise InvalidInput(f"{field} must be a whole number of tokens, got {shown(value)}")
    if value < 0:
        raise InvalidInput(f"{field} must not be negative, got {shown(value)}")
    if value > MAX_TOKEN_COUNT:
        raise InvalidInput(f"{field} is out of range: {shown(value)} > {MAX_TOKEN_COUNT:,} tokens")
    return int(value)


def check_context_length(value: Any, field: str = "context_length") -> int:
    """A context window as an int in ``[MIN_CONTEXT_LENGTH, MAX_CONTEXT_LENGTH]``."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_CONTEXT_LENGTH:
        raise InvalidInput(f"{field} must be an integer ≥ {MIN_CONTEXT_LENGTH}, got {shown(value)}")
    if value > MAX_CONTEXT_LENGTH:
        raise InvalidInput(
            f"{field} is out of range: {shown(value)} > {MAX_CONTEXT_LENGTH:,} tokens (no model "
            "has a window that large)"
        )
    return value


#: the largest event sequence number a store can hold (SQLite's and PostgreSQL's bigint)
MAX_SEQ = 2**63 - 1


def check_seq(value: Any, field: str = "sequence") -> int:
    """An event sequence number: an int in [0, MAX_SEQ] (not a bool, a string or a float;
    10**30 was an OverflowError from SQLite's parameter binding)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{field} must be an integer ≥ 0, got {shown(value)}")
    if value < 0:
        raise InvalidInput(f"{field} must be ≥ 0, got {shown(value)}")
    if value > MAX_SEQ:
        raise InvalidInput(f"{field} is out of range: more than {MAX_SEQ:,} (2^63 - 1)")
    return value


def check_text(value: Any, field: str) -> str:
    """`value` when it is a string, else :class:`InvalidInput` naming `field`."""
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string, got {type(value).__name__}")
    return value


#: True while a what-if replays a ledger's recorded values (:func:`replaying_recorded`),
#: else the exact values an adapter continues as recorded (:func:`taking_as_recorded`)
_RECORDED: ContextVar[Literal[True] | frozenset[str]] = ContextVar(
    "ctxledger_replaying_recorded", default=frozenset()
)


@contextlib.contextmanager
def replaying_recorded() -> Iterator[None]:
    """Inside it, :func:`check_name` takes any name: recorded values replay as recorded
    (a ledger written before these checks may hold a name they refuse; a what-if of it
    replays that name into a scratch ledger). The context is copied into the tasks and
    worker threads started inside it."""
    token = _RECORDED.set(True)
    try:
        yield
    finally:
        _RECORDED.reset(token)


def replaying() -> bool:
    """Whether a what-if replays recorded values (inside :func:`replaying_recorded`)."""
    return _RECORDED.get() is True


@contextlib.contextmanager
def taking_as_recorded(*values: str | None) -> Iterator[None]:
    """Inside it, :func:`check_name` takes these exact `values` (and checks every other
    one): an adapter continuing a chain recorded before these checks passes the recorded
    model, or the id it recorded whole and the next id made from it, or its prompt (None:
    none), as they are, so an old chain goes on; the host's new values are checked as ever."""
    current, given = _RECORDED.get(), frozenset(v for v in values if v is not None)
    token = _RECORDED.set(True if current is True else current | given)
    try:
        yield
    finally:
        _RECORDED.reset(token)


def check_name(value: object, field: str, limit: int, *, lines: bool = False) -> str:
    """`value` when it is a string of at most `limit` characters, UTF-8 can encode it and
    it holds none of :data:`_NOT_IN_NAME`, else InvalidInput naming `field` (a long value
    is never echoed whole; a value of another type is refused, never a TypeError). Any
    string inside :func:`replaying_recorded`, and the values given to
    :func:`taking_as_recorded` inside it. `lines`: free text, newline and tab allowed."""
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string, got {type(value).__name__}")
    recorded = _RECORDED.get()
    if recorded is True or (isinstance(recorded, frozenset) and value in recorded):
        return value
    if len(value) > limit:
        raise InvalidInput(
            f"{field} is too long: {len(value):,} characters (at most {limit:,}), "
            f"starting {value[:40]!a}"
        )
    found = (_NOT_IN_TEXT if lines else _NOT_IN_NAME).search(value)
    if found is not None:
        which = f"a {field} may hold no control characters but newline and tab,"
        raise InvalidInput(
            f"{field} holds the control character U+{ord(found.group()):04X} at character "
            f"{found.start() + 1:,} ({value[:60]!a}): "
            + (which if lines else _NAME_RULE)
            + " and no bidirectional-text controls"
        )
    return check_unicode(value, field)


def check_nonblank(value: object, field: str, kind: str = "a non-empty string") -> str:
    """`value` when it is a string that is not blank (a name that must be given, before
    :func:`check_name`), else InvalidInput saying `field` must be `kind`."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{field} must be {kind}, got {shown(value)}")
    return value


def check_input_text(value: Any, field: str) -> str:
    """`value` when it is a string of valid Unicode within the input limit in UTF-8 bytes
    (any size when recorded: :func:`replaying_recorded`, :func:`taking_as_recorded`)."""
    text = check_unicode(check_text(value, field), field)
    if (recorded := _RECORDED.get()) is True or text in recorded:
        return text
    size, limit = len(text.encode("utf-8")), max_input_bytes()
    if size > limit:
        raise InvalidInput(f"{field} is {size:,} bytes, over CTXLEDGER_MAX_INPUT_BYTES ({limit:,})")
    return text


__all__ = [
    "MAX_CONTEXT_LENGTH",
    "MAX_INPUT_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_MODEL_CHARS",
    "MAX_REASON_CHARS",
    "MAX_SEQ",
    "MAX_SESSION_ID_CHARS",
    "MAX_TITLE_CHARS",
    "MAX_TOKEN_COUNT",
    "MIN_CONTEXT_LENGTH",
    "NOT_IN_NAME_CLASS",
    "check_context_length",
    "check_input_text",
    "check_json",
    "check_name",
    "check_nonblank",
    "check_seq",
    "check_text",
    "check_token_count",
    "check_unicode",
    "decimal_digits",
    "json_depth",
    "json_problem",
    "json_text_depth",
    "max_input_bytes",
    "max_json_depth",
    "not_json",
    "not_unicode",
    "replaying",
    "replaying_recorded",
    "taking_as_recorded",
    "too_deep",
    "value_depth",
    "walked_depth",
]

#: names that moved to :mod:`ctxledger.idkeys` in session 34, still read here for one release
_MOVED_TO_IDKEYS = frozenset({"KEY_KEPT", "digest_key", "keyed_title"})

if not TYPE_CHECKING:  # (mypy keeps checking this module's own attribute names)

    def __getattr__(name: str) -> object:
        """A name moved to :mod:`ctxledger.idkeys`, with a ``DeprecationWarning`` (imported
        when asked: idkeys imports this module, a top-level import would be a cycle)."""
        if name not in _MOVED_TO_IDKEYS:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        warnings.warn(
            f"ctxledger.limits.{name} moved to ctxledger.idkeys.{name}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module("ctxledger.idkeys"), name)
