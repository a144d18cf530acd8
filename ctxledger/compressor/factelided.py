"""How a text states an inline script's fact whose middle is left out (``head [...] tail``).

A long inline script's command fact keeps its start and its end
(:func:`.toolcalls.elided`), so two scripts that share a preamble are two facts. A
text states it where the start is found (a match, :func:`.factbounds.first_match`)
and the end after it in the same text (before the next :data:`.factmatch.JOIN`): the
call that ran the script, the script restated, or the fact quoted as it is.
"""

from __future__ import annotations

from ctxledger.compressor.factbounds import contains, first_match
from ctxledger.compressor.toolcalls import ELIDED

__all__ = ["states_elided"]

#: :data:`.factmatch.JOIN`, which ends one text of a joined haystack (not imported: the
#: matcher imports this module)
_JOIN = "\x00"


def states_elided(folded: str, needle: str) -> bool:
    """Whether normalized `folded` states `needle`, a command fact holding one
    :data:`.toolcalls.ELIDED`: its start matched, then its end matched later in the same
    text. Only the first start in each text is tried: a later one leaves less of it."""
    head, _, tail = needle.partition(ELIDED)
    if not head or not tail or ELIDED in tail:
        return False
    start = 0
    while (at := first_match(folded, head, start)) != -1:
        stop = folded.find(_JOIN, at)
        stop = len(folded) if stop == -1 else stop
        if contains(folded[at + len(head) : stop], tail):
            return True
        start = stop + 1
    return False
