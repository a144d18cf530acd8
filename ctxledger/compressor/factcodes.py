"""Exit codes as tool results report them, read by the extraction and by the matcher.

:mod:`.factkinds` makes the fact ``exit code 2`` of ``<returncode>2</returncode>``,
``exited with 2``, ``non-zero exit status 2`` or ``"exit_code": 2``; the matcher
(:mod:`.factmatch`) keeps that fact when a text reports the code in any of those
words (:func:`stated_exit_codes`). Both read the same patterns, written once
(:func:`_patterns`): as found in a text, and as found in a case-folded one.
"""

from __future__ import annotations

import re

from ctxledger.compressor.factscan import has_any

__all__ = [
    "EXIT_CODES",
    "EXIT_CODE_DIGITS",
    "EXIT_LITERALS",
    "code_value",
    "exit_code",
    "stated_exit_codes",
]

#: the most digits an exit code is written with (a 64-bit status has 20): a longer
#: number is none (``int()`` of over 4,300 digits is a ValueError)
EXIT_CODE_DIGITS = 20


def _patterns(folded: bool) -> tuple[re.Pattern[str], ...]:
    """The exit-code patterns, in a text (`folded` False) or in a case-folded text
    (``exitcode``; no IGNORECASE, a slower scan of a text already folded)."""
    exit_word = "exit" if folded else "[Ee]xit"
    camel = "exitcode" if folded else "exitCode"
    return (
        re.compile(r"<returncode>\s*(\d+)\s*</returncode>"),
        re.compile(exit_word + r"(?:ed)?(?: with)?(?: code| status)?[ :=]+(\d+)"),
        re.compile(r"non-zero exit status (\d+)"),
        re.compile(r"\"(?:exit_code|returncode|" + camel + r")\"\s*:\s*(\d+)"),
    )


EXIT_CODES = _patterns(folded=False)
#: a literal each of EXIT_CODES needs (in its order)
EXIT_LITERALS = (
    ("<returncode>",),
    ("xit",),
    ("non-zero exit status",),
    ("exit_code", "returncode", "exitCode"),
)
_FOLDED_EXIT_CODES = _patterns(folded=True)


def code_value(digits: str) -> int | None:
    """The exit code `digits` write, or None when they are too many to be one."""
    return int(digits) if len(digits) <= EXIT_CODE_DIGITS else None


def stated_exit_codes(folded: str) -> frozenset[int]:
    """The exit codes case-folded `folded` reports in a way the extraction reads one
    (``exited with 2``, ``<returncode>2</returncode>``, ``"exit_code": 2``)."""
    if not has_any(folded, ("xit", "returncode")):
        return frozenset()
    codes = (
        code_value(match.group(1))
        for pattern in _FOLDED_EXIT_CODES
        for match in pattern.finditer(folded)
    )
    return frozenset(code for code in codes if code is not None)


def exit_code(text: str) -> int | None:
    """The last exit code a tool result reports, if it reports one."""
    found: list[tuple[int, int]] = []
    for pattern in EXIT_CODES:
        for match in pattern.finditer(text):
            code = code_value(match.group(1))
            if code is not None:
                found.append((match.start(), code))
    return max(found)[1] if found else None
