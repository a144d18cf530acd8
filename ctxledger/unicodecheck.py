"""Unicode checks of input text: UTF-8 must encode a string (no lone surrogate, the half
of an escaped emoji pair that JSON can spell as ``"\\ud83d"``), and what a JSON
decoder's error means when the text holds such an escape.

Split out of :mod:`ctxledger.limits` (session 41), which still offers these names.
"""

from __future__ import annotations

import re

from ctxledger.errors import InvalidInput

__all__ = ["check_unicode", "json_problem", "not_unicode"]


def not_unicode(what: str, exc: UnicodeEncodeError) -> str:
    """What is wrong with text UTF-8 cannot encode: `what` holds a lone surrogate, named
    escaped. Python reads a byte that is not UTF-8 in an argument, a file name or the
    environment as U+DC80 to U+DCFF (``surrogateescape``): that is named as the byte,
    with its likely cause (``recall S $'\\xff'`` was told of "half of an escaped emoji
    pair", session 41). Any other lone surrogate is the half of a pair that JSON can
    spell as ``"\\ud83d"``."""
    bad = exc.object[exc.start : exc.end]
    if all(0xDC80 <= ord(c) <= 0xDCFF for c in bad):
        raw = " ".join(f"0x{ord(c) - 0xDC00:02x}" for c in bad[:8])
        more = " …" if len(bad) > 8 else ""
        return (
            f"{what} holds bytes that are not UTF-8 ({raw}{more}): it was typed or "
            "stored in another encoding; give it in UTF-8"
        )
    return f"{what} holds text that is not valid Unicode ({bad!a}, half of an escaped emoji pair)"


#: a JSON escape of half a surrogate pair with no other half: a high one not followed by
#: a low one, or a low one not after a high one
_LONE_SURROGATE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def _lone_surrogate(text: str) -> str | None:
    """The first escaped lone surrogate of JSON `text` whose backslash is not itself
    escaped (JSON ``"\\\\ud800"`` is the six characters ``\\ud800``, no escape)."""
    for found in _LONE_SURROGATE.finditer(text):
        start = back = found.start()
        while back > 0 and text[back - 1] == "\\":
            back -= 1
        if (start - back) % 2 == 0:
            return found.group()
    return None


def json_problem(exc: Exception, data: str | bytes) -> str:
    """What a JSON decoder's error says about `data`, plus what an escaped lone surrogate
    means when `data` holds one (msgspec calls ``"\\ud800"`` "Input data was truncated")."""
    text = data.decode("latin-1") if isinstance(data, bytes) else data
    found = _lone_surrogate(text)
    if found is None:
        return str(exc)
    lone = f"the escape {found} is half of an escaped emoji pair, not valid Unicode"
    return lone if str(exc) == "Input data was truncated" else f"{exc}: {lone}"


def check_unicode(value: str, field: str) -> str:
    """`value` when UTF-8 can encode it, else :class:`InvalidInput` (see :func:`not_unicode`)."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(not_unicode(field, exc)) from None
    return value
