"""URLs as messages may show them: never a password, a key in the query, or a fragment.

An error message travels far: to a proxy client that holds no credentials, to a
notice, into the append-only log (a skipped compaction records its error). A
configured upstream or summarizer URL may carry credentials in its userinfo
(``http://user:secret@host``) or its query (``?api_key=...``); messages name such a
URL by :func:`shown_url` and pass text that may quote it through :func:`scrubbed`.
"""

from __future__ import annotations

import urllib.parse

__all__ = ["scrubbed", "shown_url"]

#: what stands for a URL that cannot be parsed (it is never echoed)
UNPARSED = "<the configured URL>"


def shown_url(url: str) -> str:
    """`url` with only its scheme, host, port and path."""
    try:
        parts = urllib.parse.urlsplit(url)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return UNPARSED
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def scrubbed(text: str, url: str) -> str:
    """`text` with `url` shown as :func:`shown_url` and its secrets (password, user,
    query, fragment) masked wherever else they appear (an exception quoting a request)."""
    out = text.replace(url, shown_url(url))
    try:
        parts = urllib.parse.urlsplit(url)
        secrets = [parts.password, parts.username, parts.query, parts.fragment]
    except ValueError:
        secrets = []
    for secret in secrets:
        if secret:
            out = out.replace(secret, "***")
    return out
