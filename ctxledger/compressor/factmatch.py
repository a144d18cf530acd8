"""Facts and how a text is checked for them: the matching half of :mod:`ctxledger.compressor.facts`.

Matching is normalized (:func:`normalize`): case-folded, whitespace collapsed, curly
quotes straightened, backslashes read as path separators; a fact that begins or ends
with a word character only matches on word boundaries, so ``foo`` is not found inside
``foobar``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

import msgspec


class Fact(msgspec.Struct, frozen=True, kw_only=True):
    """One salient value and where it was first seen."""

    kind: str
    value: str
    normalized: str
    message_index: int
    message_id: str | None = None
    role: str = ""


_QUOTE_TABLE = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u00ab": '"',
        "\u00bb": '"',
        "\\": "/",
    }
)
WHITESPACE = re.compile(r"\s+")


def normalize(text: str) -> str:
    """The form facts and texts are compared in."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTE_TABLE).casefold()
    return WHITESPACE.sub(" ", text).strip()


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def contains(haystack: str, needle: str) -> bool:
    """Whether normalized `needle` occurs in normalized `haystack` (word-bounded at word ends)."""
    if not needle:
        return False
    check_start = _is_word(needle[0])
    check_end = _is_word(needle[-1])
    start = haystack.find(needle)
    while start != -1:
        end = start + len(needle)
        ok_start = not check_start or start == 0 or not _is_word(haystack[start - 1])
        ok_end = not check_end or end == len(haystack) or not _is_word(haystack[end])
        if ok_start and ok_end:
            return True
        start = haystack.find(needle, start + 1)
    return False


def fact_in_text(fact: Fact, text: str) -> bool:
    """Whether `text` still states `fact` (normalized, word-bounded match)."""
    return contains(normalize(text), fact.normalized)


def retention(facts: Sequence[Fact], text: str) -> tuple[list[Fact], list[Fact]]:
    """``(kept, lost)``: which `facts` `text` still states, each in the input order."""
    haystack = normalize(text)
    kept: list[Fact] = []
    lost: list[Fact] = []
    for fact in facts:
        (kept if contains(haystack, fact.normalized) else lost).append(fact)
    return kept, lost


def normalize_fact(kind: str, value: str) -> str:
    """The normalized form of a value of `kind` (paths lose ``./``, quotes their quotes)."""
    text = normalize(value)
    if kind == "path":
        while text.startswith("./"):
            text = text[2:]
        text = text.rstrip("/") or text
    elif kind == "quoted":
        text = text.strip("\"'`").strip()
    return text
