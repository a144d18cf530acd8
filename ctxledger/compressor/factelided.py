"""How a text states an inline script's fact whose middle is left out (``head [...] tail``).

A long inline script's command fact keeps its start and its end
(:func:`.toolcalls.elided`), so two scripts that share a preamble are two facts. A
text states it where the start is found (a match, :func:`.factbounds.first_match`)
and the end after it in the same script: before the next script opening, the next
:data:`.toolcalls.ELIDED` or the next :data:`.factscan.JOIN`, whichever comes first.
"""

from __future__ import annotations

from ctxledger.compressor.factbounds import contains, first_match
from ctxledger.compressor.factscan import JOIN
from ctxledger.compressor.toolcalls import ELIDED

__all__ = ["states_elided"]


def _opener(head: str) -> str:
    """The opening of the script `head` starts: up to its first quote (the whole head
    with none). A script whose line holds an earlier closed quote is bounded sooner,
    the safe side ("lost")."""
    quotes = [at for at in (head.find('"'), head.find("'")) if at != -1]
    return head[: min(quotes) + 1] if quotes else head


def states_elided(folded: str, needle: str) -> bool:
    """Whether normalized `folded` states `needle`, a command fact holding one
    :data:`.toolcalls.ELIDED`: its start matched, then its end matched later in the same
    script (another script's end, later in the text, states nothing). Each match of the
    start is tried in its own region, up to the next opening: the regions do not
    overlap, so the check is linear."""
    head, _, tail = needle.partition(ELIDED)
    if not head or not tail or ELIDED in tail:
        return False
    opener = _opener(head)
    start = 0
    while (at := first_match(folded, head, start)) != -1:
        begin = at + len(head)
        stop = folded.find(JOIN, begin)
        stop = len(folded) if stop == -1 else stop
        for mark in (opener, ELIDED):
            bound = folded.find(mark, begin, stop)
            stop = stop if bound == -1 else bound
        if contains(folded[begin:stop], tail):
            return True
        start = max(stop, at + 1)
    return False
