"""What a proxied turn noticed, told to the operator and the client: each notice is
logged once (``ctxledger.server``, info, plain text with the session's id) and sent
back as ``X-Ctxledger-Notice`` response headers, one per notice, leaving the answer's
body (the provider's wire format) untouched.

A notice is a sentence the proxy wrote (a history already answered, a reply the client
went on without and its withdrawal, a branch, a compaction, an overflow retry). Its
header value is ASCII: every byte of its UTF-8 outside printable ASCII, and ``%`` and
``,``, is percent-encoded, so a client that joins repeated headers with ``", "`` (as
HTTP allows) still splits them apart (:func:`read_notice_headers`). Each value is cut
to :data:`MAX_NOTICE_BYTES`, and the notice headers together take at most
:data:`MAX_NOTICES_BYTES` (a proxy in front, nginx's 4 KB header buffer by default,
must not overflow): the last one sent then says how many more the log holds; the log
keeps every notice whole. Headers leave with the response's start: a streamed answer
carries what was noticed before its first byte; what recording its reply notices later
(a compaction in the loop) is logged only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from urllib.parse import quote, unquote

from starlette.responses import Response

from ctxledger.integers import inline_id, printable

__all__ = [
    "MAX_NOTICES_BYTES",
    "MAX_NOTICE_BYTES",
    "NOTICE_HEADER",
    "TurnNotices",
    "notice_value",
    "on_error",
    "read_notice_headers",
]

log = logging.getLogger("ctxledger.server")

NOTICE_HEADER = "x-ctxledger-notice"
#: the most bytes one notice header's value holds (a longer one is cut, ending "...")
MAX_NOTICE_BYTES = 512
#: the most bytes a response's notice header lines take together (name, ``": "``, value
#: and line end each; session 45's review: 8 headers of 512 bytes could fill a 4 KB
#: header buffer of a proxy in front with the upstream's own headers)
MAX_NOTICES_BYTES = 2048
#: printable ASCII left as it is: everything but ``%`` (the escape) and ``,`` (the
#: separator of joined header values)
_SAFE = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) not in "%,")
_CUT = "..."
#: the attribute of an exception that carries a turn's notices (:meth:`TurnNotices.carried_by`)
_CARRIED = "ctxledger_notices"


def notice_value(text: str, limit: int = MAX_NOTICE_BYTES) -> bytes:
    """`text` as one header value: ASCII, percent-encoded (UTF-8) outside printable
    ASCII and for ``%`` and ``,``, and at its edges for a space (a header value's are
    dropped); cut between characters to `limit` bytes, measured once encoded (ending
    ``...``). A lone surrogate (text that was not UTF-8) is written as its escape."""
    value = _edges(_quoted(text))
    if len(value) > limit:
        kept, size = [], len(_CUT) + len("%20") - 1  # (room for an encoded first space)
        for piece in map(_quoted, text):
            if (size := size + len(piece)) > limit:
                break
            kept.append(piece)
        value = _edges("".join(kept) + _CUT)
    return value.encode("ascii")


def _edges(value: str) -> str:
    """`value` with a space at either edge encoded."""
    if value[:1] == " ":
        value = "%20" + value[1:]
    if value[-1:] == " ":
        value = value[:-1] + "%20"
    return value


def _quoted(text: str) -> str:
    return quote(text, safe=_SAFE, errors="backslashreplace")


def read_notice_headers(values: Iterable[str]) -> list[str]:
    """The notices a response's ``X-Ctxledger-Notice`` values hold (repeated headers,
    or their values joined with ``,``), decoded: what a client reads."""
    return [unquote(part.strip(" ")) for value in values for part in value.split(",")]


class TurnNotices:
    """A turn's notices: :meth:`add` logs each as it comes, :meth:`on` puts them on a
    response."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def add(self, session_id: str, *texts: str) -> None:
        """Keep `texts`, logging each with `session_id` (escaped: ids and a notice's
        words from outside are printed as plain text)."""
        for text in texts:
            self.said.append(text)
            log.info("session %s: %s", inline_id(session_id), printable(text))

    def headers(self) -> list[tuple[bytes, bytes]]:
        """The notice headers, in the order noticed, within :data:`MAX_NOTICES_BYTES`:
        when the rest does not fit, the last says how many more the log holds (room
        for that line is kept while more notices wait)."""
        name = NOTICE_HEADER.encode("ascii")
        out: list[tuple[bytes, bytes]] = []
        left = MAX_NOTICES_BYTES
        for i, text in enumerate(self.said):
            more = len(self.said) - i - 1
            value = notice_value(text)
            reserve = _line(name, _more(more)) if more else 0
            if _line(name, value) + reserve > left:
                out.append((name, _more(more + 1)))
                break
            out.append((name, value))
            left -= _line(name, value)
        return out

    def on(self, response: Response) -> Response:
        """`response` with the notice headers added."""
        response.raw_headers.extend(self.headers())
        return response

    def carried_by(self, exc: BaseException) -> None:
        """Let `exc` carry these notices to where it becomes a response (:func:`on_error`):
        a turn that fails after it noticed something (a branch, then a busy store) still
        tells it."""
        setattr(exc, _CARRIED, self)


def on_error(exc: BaseException, response: Response) -> Response:
    """The error response made of `exc`, with the notices it carries, if any."""
    notices = getattr(exc, _CARRIED, None)
    return notices.on(response) if isinstance(notices, TurnNotices) else response


def _more(count: int) -> bytes:
    return notice_value(f"{count} more {'notice' if count == 1 else 'notices'} (the server's log)")


def _line(name: bytes, value: bytes) -> int:
    """The bytes of a header line: name, ``": "``, value, CRLF."""
    return len(name) + len(value) + 4
