"""A recall query as FTS5 terms: every word quoted (no FTS operator survives), each
different word once, at most MAX_QUERY_TERMS of them."""

from __future__ import annotations

from collections.abc import Iterator

import sqlite_utils

from ctxledger.errors import InvalidInput
from ctxledger.integers import shown
from ctxledger.limits import check_unicode

#: the most different words one recall query may search for (a repeated word counts once)
MAX_QUERY_TERMS = 64


def fts_terms(query: str) -> list[str]:
    """The quoted FTS5 terms of a free-text query (every FTS operator is neutralized)."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("the query is empty: give words to search for")
    check_unicode(query, "the query")
    # FTS5 reads a query as C text: a NUL ended it mid-term ("unterminated string")
    quoted = sqlite_utils.Database(memory=True).quote_fts(query.replace("\x00", " ").strip())
    # a word given twice narrows nothing, and FTS5's cost grows with the square of the
    # repeats (1,000 times one common word: 16 s; a 100 KB query: hours)
    terms = list({t.lower(): t for t in _split_quoted(quoted) if any(c.isalnum() for c in t)})
    if not terms:
        raise InvalidInput(
            f"the query {shown(query)} has no words to search for (only punctuation)"
        )
    if len(terms) > MAX_QUERY_TERMS:
        raise InvalidInput(
            f"the query has {len(terms):,} different words; recall searches for at most "
            f"{MAX_QUERY_TERMS}: give the few that matter (a path, an error's words)"
        )
    return terms


def _split_quoted(quoted: str) -> Iterator[str]:
    """``"a" "b c"`` -> ``"a"``, ``"b c"`` (quote_fts output is space-separated quoted terms)."""
    term: list[str] = []
    inside = False
    for char in quoted:
        if char == '"':
            inside = not inside
        if char == " " and not inside:
            if term:
                yield "".join(term)
            term = []
            continue
        term.append(char)
    if term:
        yield "".join(term)


__all__ = ["MAX_QUERY_TERMS", "fts_terms"]
