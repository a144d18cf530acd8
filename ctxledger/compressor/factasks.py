"""User turns that state no task of their own: thanks, approvals, "continue".

Read by the fact extraction (:mod:`.facts`: a thank-you is no ask a summary could lose)
and by the offline summarizer (the Active Task is the latest turn that states one).
"""

from __future__ import annotations

import re

__all__ = ["is_acknowledgement", "states_no_task"]

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
