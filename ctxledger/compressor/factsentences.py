"""Sentences a fact is: an assistant's stated choice (a decision) and what a user said
must or must not happen (a constraint), each found from the words that make it one
(``I'll use``, ``instead of``; ``do not``, ``never``, ``must``) and cut to a line's
length (:func:`cap_line`). Split out of :mod:`.factkinds`, which re-exports them.
"""

from __future__ import annotations

import re

from ctxledger.compressor.factletters import is_word
from ctxledger.compressor.factscan import may_match_ignoring_case

__all__ = ["LINE_MAX_CHARS", "cap_line", "cap_text", "constraint_sentences", "decision_sentences"]

LINE_MAX_CHARS = 160


def cap_line(text: str, limit: int = LINE_MAX_CHARS) -> str:
    """`text` with its runs of whitespace made one blank, cut at a blank to `limit`."""
    return cap_text(" ".join(text.split()), limit)


def cap_text(text: str, limit: int) -> str:
    """`text` cut to at most `limit` chars, at a space when one is near the end; with
    none, after a ``/`` near the end when the cut falls in a name or before a ``/``
    (session 40, review 1 of ``audit5``: ``…/abc`` before ``/abc/…`` is a path its own
    text goes on with, which the matcher finds nowhere, that text included)."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", int(limit * 0.6), limit)
    if cut <= 0 and is_word(text[limit - 1]) and (is_word(text[limit]) or text[limit] == "/"):
        cut = text.rfind("/", int(limit * 0.6), limit) + 1
    return text[: cut if cut > 0 else limit].rstrip()


#: a character a sentence may hold (and start with): one definition for both patterns, as
#: the sentence walk's shortcut relies on their agreeing
_SENTENCE_PIECE = r"[^.!?\n]|[.!?](?=\S)"
_SENTENCE = re.compile(rf"(?:{_SENTENCE_PIECE})+[.!?]?")
_SENTENCE_CHAR = re.compile(_SENTENCE_PIECE)
#: a state after "the fix is" or "the issue is" reports how it stands, no choice (``the
#: fix is working.``, ``now that the issue is resolved,``): the state word ends the
#: clause, alone or with ``correctly`` (``the fix is working correctly.``), or reads
#: ``and that`` after it (``to ensure that the fix is correct and that …``); a ``:`` ends it only at the line's end (``make sure the fix is robust:``),
#: elsewhere it opens what the fix does (``the fix is good: it pins numpy<2``), and
#: ``the issue is being caused by …``, ``the fix is complete and adds a lock …`` stay
#: choices
_STATE = (
    r"[ \t]+(?:applied|correct|robust|working|complete|done|in[ \t]+place|good|fine|"
    r"successful|effective|verified|tested|resolved|fixed|implemented|ready)"
    r"(?=(?:[ \t]+correctly)?[ \t]*(?:[.,;!?)\n]|:?[ \t]*(?:\n|$))|[ \t]+and[ \t]+that\b)"
)
_DECISION = re.compile(
    r"(?i)\b(?:I(?:'ll| will) (?:use|go with|switch to|keep|change|replace|add|remove)|"
    r"(?:we|I) (?:decided|chose|opted|should use)|decided to|instead of|rather than|"
    r"going with|the (?:solution|root cause|cause) is\b|(?:the fix|the issue) is\b(?!"
    + _STATE
    + r"))\b"
)
_CONSTRAINT = re.compile(
    r"(?i)\b(?:don't|do not|never|must(?: not)?|mustn't|always|make sure|avoid|"
    r"without (?:changing|breaking|touching)|keep (?:the|it|python|support)|only (?:change|touch|edit)|"
    r"no more than|at most|at least)\b"
)

_DECISION_LITERALS = (
    "i'll ", "i will ", "decided", "chose", "opted", "should use", "instead of", "rather than",
    "going with", "the fix is", "the solution is", "the root cause is", "the cause is",
    "the issue is",
)  # fmt: skip
_CONSTRAINT_LITERALS = (
    "don't", "do not", "never", "must", "always", "make sure", "avoid", "without ", "keep ",
    "only ", "no more than", "at most", "at least",
)  # fmt: skip


def _sentences(
    text: str, pattern: re.Pattern[str], literals: tuple[str, ...]
) -> list[tuple[int, str]]:
    """The sentences of `text` that hold a match of `pattern` (found from the matches);
    every match holds one of `literals` (ignoring case)."""
    out: list[tuple[int, str]] = []
    if not may_match_ignoring_case(text, literals):
        return out
    next_free = -1
    line_start = looked = 0  # the start of the line of the last hit; text before `looked` read
    walked: re.Match[str] | None = None  # the last sentence the walk below reached
    for hit in pattern.finditer(text):
        if hit.start() < next_free:
            continue
        # the sentence starts after the last . ! ? (followed by a space) or newline before
        # the hit; the newline is looked for only after where the last look ended (on one
        # long line, each hit read the line back to its start: quadratic)
        line_start = text.rfind("\n", looked, hit.start()) + 1 or line_start
        looked = hit.start()
        start = max(line_start, _last_stop(text, hit.start()))
        if walked is not None and start <= walked.end() and _SENTENCE_CHAR.match(text, start):
            # a sentence ends where the first stop after its start is, wherever it starts:
            # the walk from `start` reaches the last walk's sentence (no stop between its
            # start and end), so it goes on from there (from `start`, each hit of one long
            # line with no ". " in the 400 characters before it walked the line again)
            match: re.Match[str] | None = walked
        else:
            match = _SENTENCE.match(text, start)
        while match is not None and match.end() <= hit.start():
            # a stop the backward look did not see (``.`` before a tab): the next sentence
            match = _SENTENCE.search(text, match.end())
        if match is None:
            continue
        walked = match
        next_free = match.end()
        sentence = match.group(0).strip()
        if len(sentence) > 15:
            out.append((match.start(), cap_line(sentence)))
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
        for pos, s in _sentences(text, _DECISION, _DECISION_LITERALS)
        if not s.rstrip().endswith("?") and not _HEDGE.search(s)
    ]


def constraint_sentences(text: str) -> list[tuple[int, str]]:
    """What a user said must or must not happen (``Do not change the public API``)."""
    return _sentences(text, _CONSTRAINT, _CONSTRAINT_LITERALS)
