"""URLs as messages may show them: never a password, a key in the query, or a fragment.

An error message travels far: to a proxy client that holds no credentials, to a
notice, into the append-only log (a skipped compaction records its error). A
configured upstream or summarizer URL may carry credentials in its userinfo
(``http://user:secret@host``) or its query (``?api_key=...``); messages name such a
URL by :func:`shown_url` and pass text that may quote it through :func:`scrubbed`.
"""

from __future__ import annotations

import urllib.parse

__all__ = ["scrubbed", "shown_url", "with_path"]

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
    """`text` with `url`'s secrets (password, query, fragment, as written and decoded)
    masked wherever they appear (an exception quoting a request), then `url` itself
    shown as :func:`shown_url`."""
    try:
        parts = urllib.parse.urlsplit(url)
        secrets = [parts.password, parts.query, parts.fragment]
    except ValueError:
        return text.replace(url, UNPARSED)
    out = text.replace(url, "\x00")
    for secret in secrets:
        for form in {secret, urllib.parse.unquote(secret or "")}:
            if form:
                out = out.replace(form, "***")
    return out.replace("\x00", shown_url(url))


def with_path(base: str, path: str, anthropic: bool = False, query: str = "") -> str:
    """`base` with the API path `path` (``/chat/completions``, ``/models``) appended to
    its path, its query kept (a key in the query stays a query parameter) and `query`
    after it. An OpenAI base names its ``/v1``; an Anthropic base is the host, so
    ``/v1`` goes before `path` unless the base path already ends with it."""
    parts = urllib.parse.urlsplit(base)
    stem = parts.path.rstrip("/")
    if anthropic and not stem.endswith("/v1"):
        path = "/v1" + path
    joined = "&".join(q for q in (parts.query, query) if q)
    return urllib.parse.urlunsplit(parts._replace(path=stem + path, query=joined))
