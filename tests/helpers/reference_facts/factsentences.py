"""An assistant's stated choices and a user's constraints, as sentences (reference;
split out of :mod:`.factkinds` in session 32): ``I'll use X instead of Y``, ``the fix
is to …`` (not how the fix stands: ``the fix is applied.``), ``don't change the API``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from helpers.reference_facts.factkinds import _cap

__all__ = ["constraint_sentences", "decision_sentences"]

_SENTENCE = re.compile(r"(?:[^.!?\n]|[.!?](?=\S))+[.!?]?")
_DECISION = re.compile(
    r"(?i)\b(?:I(?:'ll| will) (?:use|go with|switch to|keep|change|replace|add|remove)|"
    r"(?:we|I) (?:decided|chose|opted|should use)|decided to|instead of|rather than|"
    r"going with|(?:the (?:fix|solution|root cause|cause)|the issue) is)\b"
)
#: session 32 (review): how the fix or the issue stands, no choice
_STATES = frozenset(
    {"applied", "correct", "robust", "working", "complete", "done", "good", "fine"}
    | {"successful", "effective", "verified", "tested", "resolved", "fixed", "implemented"}
    | {"ready"}
)


def _word_at(text: str, at: int) -> tuple[str, int]:
    """The word (letters, digits, ``_``) starting after the blanks at `at`, and its end."""
    while at < len(text) and text[at] in " \t":
        at += 1
    end = at
    while end < len(text) and (text[end].isalnum() or text[end] == "_"):
        end += 1
    return text[at:end].lower(), end


def _no_state(text: str, hit: re.Match[str]) -> bool:
    """Whether a decision hit is a choice: ``the fix is``/``the issue is`` followed by a
    state word that ends the clause (punctuation but ``:``, a line's end, the text's end)
    or reads ``and that`` after it is none (``the fix is applied.``)."""
    if hit.group(0).lower() not in ("the fix is", "the issue is"):
        return True
    if hit.end() >= len(text) or text[hit.end()] not in " \t":
        return True
    word, end = _word_at(text, hit.end())
    if word == "in":
        word, end = _word_at(text, end)
        word = "in place" if word == "place" else ""  # (blanks between: second review)
    if word not in _STATES and word != "in place":
        return True
    rest = text[end:].lstrip(" \t")
    if rest != text[end:] and _word_at(rest, 0)[0] == "correctly":
        rest = rest[len("correctly") :].lstrip(" \t")  # (its clause must end after it)
        if rest[:1].isalnum() or rest[:1] == "_":
            return True
    if rest == "" or rest[0] in ".,;!?)\n":
        return False
    if rest[0] == ":":  # (second review: a ``:`` but the line's last opens what it does)
        return rest[1:].lstrip(" \t")[:1] not in ("", "\n")
    word, end = _word_at(rest, 0)
    return (
        word != "and"
        or end == len(rest)
        or rest[end] not in " \t"
        or _word_at(rest, end)[0] != "that"
    )


_CONSTRAINT = re.compile(
    r"(?i)\b(?:don't|do not|never|must(?: not)?|mustn't|always|make sure|avoid|"
    r"without (?:changing|breaking|touching)|keep (?:the|it|python|support)|only (?:change|touch|edit)|"
    r"no more than|at most|at least)\b"
)


def _sentences(
    text: str, pattern: re.Pattern[str], keep: Callable[[str, re.Match[str]], bool] | None = None
) -> list[tuple[int, str]]:
    """The sentences of `text` that hold a match of `pattern` (found from the matches)
    that `keep` keeps."""
    out: list[tuple[int, str]] = []
    next_free = -1
    for hit in pattern.finditer(text):
        if hit.start() < next_free or (keep is not None and not keep(text, hit)):
            continue
        # the sentence starts after the last . ! ? (followed by a space) or newline before the hit
        start = max(text.rfind("\n", 0, hit.start()) + 1, _last_stop(text, hit.start()))
        match = _SENTENCE.match(text, start)
        while match is not None and match.end() <= hit.start():
            # a stop the backward look did not see (``.`` before a tab): the next sentence
            match = _SENTENCE.search(text, match.end())
        if match is None:
            continue
        next_free = match.end()
        sentence = match.group(0).strip()
        if len(sentence) > 15:
            out.append((match.start(), _cap(sentence)))
    return out


def _last_stop(text: str, before: int) -> int:
    window = max(0, before - 400)
    best = 0
    for mark in ".!?":
        at = text.rfind(mark + " ", window, before)
        if at >= 0:
            best = max(best, at + 2)
    return best


_HEDGE = re.compile(r"(?i)\b(?:maybe|perhaps|might|what if|could be|I wonder|not sure)\b")


def decision_sentences(text: str) -> list[tuple[int, str]]:
    """An assistant's stated choices (``I'll use X instead of Y``, ``the fix is …``).

    Questions and hedges (``Maybe the issue is …``, ``What if …?``) are not choices.
    """
    return [
        (pos, s)
        for pos, s in _sentences(text, _DECISION, _no_state)
        if not s.rstrip().endswith("?") and not _HEDGE.search(s)
    ]


def constraint_sentences(text: str) -> list[tuple[int, str]]:
    """What a user said must or must not happen (``Do not change the public API``)."""
    return _sentences(text, _CONSTRAINT)
