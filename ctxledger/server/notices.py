"""What a proxied turn noticed, told to the operator and the client: each notice is
logged once (``ctxledger.server``, info, plain text with the session's id) and sent
back as ``X-Ctxledger-Notice`` response headers, one per notice, leaving the answer's
body (the provider's wire format) untouched.

A notice is a sentence the proxy wrote (a history already answered, a reply the client
went on without and its withdrawal, a branch, a compaction, an overflow retry). Its
header value is ASCII: every byte of its UTF-8 outside printable ASCII, and ``%`` and
``,``, is percent-encoded, so a client that joins repeated headers with ``", "`` (as
HTTP allows) still splits them apart (:func:`read_notice_headers`). At most
:data:`MAX_NOTICE_HEADERS` are sent, each cut to :data:`MAX_NOTICE_BYTES`; the log
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
    "MAX_NOTICE_BYTES",
    "MAX_NOTICE_HEADERS",
    "NOTICE_HEADER",
    "TurnNotices",
    "notice_value",
    "read_notice_headers",
]

log = logging.getLogger("ctxledger.server")

NOTICE_HEADER = "x-ctxledger-notice"
#: the most notice headers one response carries (the last then says how many more)
MAX_NOTICE_HEADERS = 8
#: the most bytes one notice header's value holds (a longer one is cut, ending "...")
MAX_NOTICE_BYTES = 512
#: printable ASCII left as it is: everything but ``%`` (the escape) and ``,`` (the
#: separator of joined header values)
_SAFE = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) not in "%,")


def notice_value(text: str) -> bytes:
    """`text` as one header value: ASCII, percent-encoded (UTF-8) outside printable
    ASCII and for ``%`` and ``,``, cut between characters to :data:`MAX_NOTICE_BYTES`
    (ending ``...``). A leading or trailing space is encoded too (a header value's are
    dropped); a lone surrogate (text that was not UTF-8) is written as its escape."""
    value = _quoted(text)
    if len(value) > MAX_NOTICE_BYTES:
        kept, size = [], len("...") + len("%20")  # (room for an encoded first space)
        for piece in map(_quoted, text):
            if (size := size + len(piece)) > MAX_NOTICE_BYTES:
                break
            kept.append(piece)
        value = "".join(kept) + "..."
    if value[:1] == " ":
        value = "%20" + value[1:]
    if value[-1:] == " ":
        value = value[:-1] + "%20"
    return value.encode("ascii")


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
        """The notice headers, in the order noticed."""
        said = self.said
        if len(said) > MAX_NOTICE_HEADERS:
            more = len(said) - MAX_NOTICE_HEADERS + 1
            said = [*said[: MAX_NOTICE_HEADERS - 1], f"{more} more notices (the server's log)"]
        return [(NOTICE_HEADER.encode("ascii"), notice_value(text)) for text in said]

    def on(self, response: Response) -> Response:
        """`response` with the notice headers added."""
        response.raw_headers.extend(self.headers())
        return response
