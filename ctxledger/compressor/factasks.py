"""User turns that state no task of their own: thanks, approvals, "continue"; and where
a long turn's ask fact is cut (:func:`ask_cut`).

Read by the fact extraction (:mod:`.facts`: a thank-you is no ask a summary could lose)
and by the offline summarizer (the Active Task is the latest turn that states one).
"""

from __future__ import annotations

import re

from ctxledger.compressor.factbounds import matches_at_start
from ctxledger.compressor.factnormal import normalize
from ctxledger.compressor.factsentences import cap_text

__all__ = ["ASK_MARGIN", "ask_cut", "is_acknowledgement", "states_no_task"]

#: user turns that only thank or approve: no ask of their own, so no fact a summary could
#: lose ("thanks!", "great"); compared lower-cased, without punctuation, blanks collapsed.
#: A short answer ("no", "yes", "go ahead") may be a decision the agent asked for: it
#: stays an ask.
_THANKS = frozenset(
    {
        "thanks", "thank you", "thanks a lot", "thank you very much", "thx", "ty", "great",
        "cool", "nice", "perfect", "awesome", "got it", "lgtm", "ok thanks",
        "ok thank you", "great thanks", "perfect thanks",
    }
)  # fmt: skip
#: turns that move the agent on without stating a task ("continue", "ok", "yes"): the
#: task they continue is an earlier ask (what a summary's Active Task states)
_PROMPTS_ON = _THANKS | frozenset(
    {
        "ok", "okay", "k", "continue", "go on", "go ahead", "proceed", "next",
        "please continue", "keep going", "carry on", "yes", "y", "yep", "yeah", "sure",
        "yes please", "alright", "all right", "do it", "please do",
    }
)  # fmt: skip
_NOT_WORD = re.compile(r"[^\w\s]+")


def _phrase(text: str) -> str:
    return "" if len(text) > 40 else " ".join(_NOT_WORD.sub(" ", text).lower().split())


def is_acknowledgement(text: str) -> bool:
    """Whether a user turn only thanks or approves (see _THANKS): no ask fact."""
    return _phrase(text) in _THANKS


def states_no_task(text: str) -> bool:
    """Whether a user turn moves the agent on without a task of its own (see _PROMPTS_ON)."""
    return _phrase(text) in _PROMPTS_ON


def ask_cut(text: str, limit: int, partial: bool) -> str:
    """The ask fact of a user turn, `text` with its whitespace collapsed (`partial`: only
    a prefix of the turn, at least its first ``limit + ASK_MARGIN`` characters): cut to
    `limit` characters at a blank near the end (:func:`.cap_text`) when the matcher
    matches that cut at the start of the turn; else the longest cut in the same last
    40 % it matches there; else none (``""``).

    Session 39, review 1 of ``audit4``: with no blank there (``"a" * 400``, CJK prose,
    an ``ensure_ascii`` JSON line cut inside ``\\u6237``) the cut fell inside a word,
    which the matcher (word boundaries) finds nowhere, the turn itself included: the
    audit said LOST of a live turn. A shorter cut (``see`` of ``"see " + "x" * 400``)
    would be an ask any summary saying "see" keeps: none instead.

    Review 2: each cut is checked only as a match at position 0 of the turn's first
    ``limit + ASK_MARGIN`` characters or fewer (up to a :data:`_STARTER`; none: no ask),
    normalized once, then ``_`` when more follows
    (read as more of a word: no match ends at the window's end). A search of the whole
    turn cost ~120 scans of it when no cut was found (18x main on ``" " * 3000 + "请" *
    10M``), and found cuts only because they recur later (code and reference disagreed).
    At position 0 a cut between two ASCII word characters is never a match: skipping
    those ends is exact.
    """
    value = cap_text(text, limit)
    whole = text.strip()
    if len(whole) <= limit:
        return value
    end = len(whole) if len(whole) <= limit + ASK_MARGIN else _window_end(whole, limit)
    if end < 0:
        return ""  # (no char after the cap whose NFKC is independent of what precedes it)
    haystack = normalize(whole[:end]) + ("_" if partial or len(whole) > end else "")
    if matches_at_start(haystack, normalize(value)):
        return value
    for end in range(limit, int(limit * 0.6), -1):
        if _WORD_PAIR.match(whole, end - 1, end + 1):
            continue  # (inside a word: never a match at the start)
        shorter = whole[:end].rstrip()
        if matches_at_start(haystack, normalize(shorter)):
            return shorter
    return ""


def _window_end(whole: str, limit: int) -> int:
    """The last end in ``limit + 1 .. limit + ASK_MARGIN`` before a :data:`_STARTER`, or -1."""
    return next(
        (end for end in range(limit + ASK_MARGIN, limit, -1) if _STARTER.match(whole, end)), -1
    )


#: characters after the cap read with it (the matcher's look past a match's end); a
#: prefix of a turn must hold more than ``limit`` + this many
ASK_MARGIN = 64
#: characters NFKC neither reorders nor composes with what precedes them, nor maps to one
#: that does (ASCII, CJK ideographs and punctuation, kana, Hangul syllables, full-width
#: ASCII): the window ends before one, so its normalization is a prefix of the turn's (a
#: window cut inside a run of combining marks was read as its own cut: lost in the turn)
_STARTER = re.compile(
    "[\x00-\x7f\u3000-\u3029\u3030-\u303f\u3041-\u3096\u30a1-\u30fa\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7a3\uff01-\uff5e]"
)
#: two word characters NFKC and case folding keep as they are (ASCII, kana, CJK
#: ideographs, Hangul syllables): no cut between them matches at a turn's start
_WORD_PAIR = re.compile(
    r"[A-Za-z0-9_\u3041-\u3096\u30a1-\u30fa\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3]{2}"
)
