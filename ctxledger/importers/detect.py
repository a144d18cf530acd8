"""Format detection and the importer registry.

``detect_format`` looks at a file (or at text already read, e.g. from stdin) and
names its format; ``load`` / ``load_text`` run the matching parser. Detection reads
the SQLite header for Hermes's ``state.db`` and otherwise the first records of the
JSON / JSONL text: Codex rollouts by their record wrappers, Claude Code logs by
``uuid`` / ``parentUuid`` records, ShareGPT by ``conversations`` / ``from`` +
``value``, Anthropic by its content blocks (``tool_use``, ``tool_result``,
``thinking``) or a top-level ``system`` next to ``messages``; everything else that is
chat-shaped is OpenAI. Plain user/assistant string conversations read the same in
both, so OpenAI is the right default there.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, BinaryIO

import msgspec

from ctxledger.errors import ImportFormatError
from ctxledger.eventstore.files import SQLITE_HEADER, WAL_SUFFIX
from ctxledger.importers.anthropic import parse_anthropic
from ctxledger.importers.claude_code import parse_claude_code
from ctxledger.importers.codex import parse_codex
from ctxledger.importers.hermes_db import parse_hermes_db
from ctxledger.importers.model import ImportedSession
from ctxledger.importers.openai import parse_openai
from ctxledger.importers.sharegpt import parse_sharegpt
from ctxledger.inputfile import NotAFile, open_input, read_capped
from ctxledger.integers import shown
from ctxledger.limits import json_problem, max_input_bytes, max_json_depth

Importer = Callable[..., list[ImportedSession]]

#: format name -> parser. Text formats take ``(text, *, path=None)``; those in
#: ``PATH_FORMATS`` take the file path instead.
IMPORTERS: dict[str, Importer] = {
    "openai": parse_openai,
    "anthropic": parse_anthropic,
    "hermes_db": parse_hermes_db,
    "claude_code": parse_claude_code,
    "codex": parse_codex,
    "sharegpt": parse_sharegpt,
}
PATH_FORMATS = frozenset({"hermes_db"})


def spelled(name: str) -> str:
    """A format's name as the help spells it and a user types it (``hermes-db``; the
    registry key is ``hermes_db``, also accepted): every message names formats so."""
    return name.replace("_", "-")


#: the format names a message offers, as a user types them
FORMAT_CHOICES = ", ".join(spelled(name) for name in IMPORTERS)

_CODEX_WRAPPERS = frozenset(
    {"session_meta", "response_item", "turn_context", "event_msg", "compacted"}
)
_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})
_SAMPLE_LINES = 50


def _records(text: str, path: str | None = None) -> list[Any]:
    """The document (as a one-element list or its elements), or the first JSONL records."""
    try:
        doc = msgspec.json.decode(text)
    except RecursionError:
        raise too_deep_error(path) from None
    except msgspec.DecodeError:
        out: list[Any] = []
        for line in text.split("\n"):
            if len(out) >= _SAMPLE_LINES:
                break
            if line.strip():
                try:
                    out.append(msgspec.json.decode(line))
                except (msgspec.DecodeError, RecursionError):
                    break
        return out
    return doc if isinstance(doc, list) else [doc]


def _messages_of(records: Iterable[Any]) -> Iterable[Mapping[str, Any]]:
    for rec in records:
        if not isinstance(rec, Mapping):
            continue
        if isinstance(rec.get("messages"), list):
            yield from (m for m in rec["messages"] if isinstance(m, Mapping))
        elif "role" in rec:
            yield rec


def _text(value: Any) -> str | None:
    """`value` when it is text, else None: a list or an object of a record's ``type`` is
    unhashable, and a set's ``in`` raised TypeError on it."""
    return value if isinstance(value, str) else None


def _looks_anthropic(records: list[Any]) -> bool:
    for m in _messages_of(records):
        if m.get("role") in ("tool", "system", "developer") or "tool_calls" in m:
            return False
        content = m.get("content")
        if isinstance(content, list) and any(
            isinstance(b, Mapping) and _text(b.get("type")) in _ANTHROPIC_BLOCKS for b in content
        ):
            return True
        if isinstance(content, list) and any(
            isinstance(b, Mapping) and b.get("type") == "image" and "source" in b for b in content
        ):
            return True
    return any(isinstance(r, Mapping) and "messages" in r and "system" in r for r in records)


def _detect_records(records: list[Any]) -> str | None:
    first = next((r for r in records if isinstance(r, Mapping)), None)
    if first is None:
        return None
    kind = _text(first.get("type"))
    if kind in _CODEX_WRAPPERS and "payload" in first:
        return "codex"
    if any(isinstance(r, Mapping) and ("parentUuid" in r or "leafUuid" in r) for r in records):
        return "claude_code"
    if "conversations" in first or ("from" in first and "value" in first):
        return "sharegpt"
    if "id" in first and "timestamp" in first and "role" not in first and "messages" not in first:
        return "codex"  # an older rollout: a bare session meta object first
    if "messages" in first or "role" in first or "choices" in first:
        return "anthropic" if _looks_anthropic(records) else "openai"
    return None


def detect_format(path_or_text: str | os.PathLike[str]) -> str:
    """The format name of a file path or of text (a key of ``IMPORTERS``).

    Raises :class:`ImportFormatError` when nothing matches.
    """
    if isinstance(path_or_text, os.PathLike) or _is_path(path_or_text):
        path = os.fspath(path_or_text)
        fmt, _ = _read_and_detect(path)
        return fmt
    return _detect_text(str(path_or_text), None)


def _detect_text(text: str, path: str | None) -> str:
    records = _records(text, path) if text.strip() else []
    found = _detect_records(records) if records else None
    if found is None:
        why = f" ({_json_problem(text)})" if text.strip() and not records else ""
        raise ImportFormatError(
            f"cannot tell the format{why}; pass --format, one of: {FORMAT_CHOICES}",
            line=1 if text.strip() else None,
            path=path,
        )
    return found


def _json_problem(text: str) -> str:
    """Why `text` is not JSON, e.g. a number out of range (``1e400``)."""
    try:
        msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError) as err:
        return f"not JSON: {json_problem(err, text)}"
    return "an empty JSON list: no messages to import"  # the one document that gives no records


def _utf8(data: bytes, path: str) -> str:
    """File bytes as text, newlines translated as text-mode reading does (CRLF and CR -> LF).

    A UTF-8 byte-order mark (Windows editors write one) is dropped; a UTF-16 one is named.
    """
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ImportFormatError(
            "UTF-16 text (it starts with a UTF-16 byte-order mark); save it as UTF-8", path=path
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ImportFormatError(
            f"not UTF-8 text ({err.reason} at byte {err.start})", path=path
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _read_and_detect(path: str, max_bytes: int | None = None) -> tuple[str, str | None]:
    """``(format, text)`` of the file at `path`, read once (text is None for ``hermes_db``).

    Only the header is read from a SQLite file (its parser opens the database itself).
    """
    data = read_input_file(path, max_bytes)
    if data.startswith(SQLITE_HEADER):
        _opened(path, pipes=False).close()  # the database is opened again by name: no pipe
        return "hermes_db", None
    text = _utf8(data, path)
    return _detect_text(text, path), text


def _opened(path: str, *, pipes: bool = True) -> BinaryIO:
    """`path` opened for reading (:func:`ctxledger.inputfile.open_input`: a file, a FIFO or
    pipe, /dev/null; ``pipes=False``: a regular file), else ImportFormatError."""
    try:
        return open_input(path, pipes=pipes)
    except FileNotFoundError:
        raise ImportFormatError("no such file", path=path) from None
    except OSError as err:
        if isinstance(err, NotAFile):
            raise ImportFormatError(str(err.strerror), path=path) from None
        raise ImportFormatError(f"cannot read it: {err.strerror}", path=path) from None


def _too_big(limit: int, path: str | None) -> ImportFormatError:
    return ImportFormatError(
        f"the input is larger than the {limit:,}-byte limit "
        "(raise it with --max-bytes or CTXLEDGER_MAX_INPUT_BYTES)",
        path=path,
    )


def open_regular_file(path: str) -> BinaryIO:
    """`path` opened for reading in binary (a file, a FIFO or pipe, /dev/null), else
    ImportFormatError (a device such as /dev/zero would be read forever)."""
    return _opened(path)


def read_input_file(path: str, max_bytes: int | None = None) -> bytes:
    """The bytes of the regular file at `path`, at most `max_bytes` (default: the limit)."""
    limit = max_input_bytes() if max_bytes is None else max_bytes
    with _opened(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise _too_big(limit, path)
        data = read_capped(fh, limit, size)
    if len(data) > limit:
        raise _too_big(limit, path)
    return data


def read_input_stream(stream: BinaryIO, max_bytes: int | None = None) -> tuple[str, str]:
    """Text read from `stream` (stdin), at most `max_bytes` of it, and the digest of the
    bytes read (:func:`file_digest`: the bytes, not the decoded text, as for a file)."""
    limit = max_input_bytes() if max_bytes is None else max_bytes
    data = read_capped(stream, limit)
    if len(data) > limit:
        raise _too_big(limit, None)
    return _utf8(data, "stdin"), file_digest(data, "stdin")


def too_deep_error(path: str | None) -> ImportFormatError:
    return ImportFormatError(
        f"the JSON nests deeper than Python can decode (the limit for a message is "
        f"{max_json_depth()} levels)",
        path=path,
    )


def _is_path(value: str) -> bool:
    return (
        "\n" not in value
        and len(value) < 4096
        and not value.lstrip().startswith(("{", "["))
        and os.path.exists(value)
    )


def format_name(format: str) -> str:
    """The registry key for a format name (``hermes-db`` and ``hermes_db`` both work)."""
    name = format.strip().lower().replace("-", "_")
    if name not in IMPORTERS:
        raise ImportFormatError(
            f"unknown import format {shown(format)}; expected one of: {FORMAT_CHOICES}"
        )
    return name


def load_text(
    text: str, format: str | None = None, *, path: str | None = None
) -> list[ImportedSession]:
    """Parse text already read (``-`` = stdin is read by the caller). Not for ``hermes_db``."""
    fmt = format_name(format) if format else detect_format(text)
    if fmt in PATH_FORMATS:
        raise ImportFormatError(
            f"the {(format or spelled(fmt)).strip()} format is read from a file, not from text",
            path=path,
        )
    return IMPORTERS[fmt](text, path=path)


def file_digest(data: bytes | None, path: str) -> str:
    """The SHA-256 (hex) of an input: of `data` read, else of the regular file at `path`
    (a ``hermes_db`` store, opened by name: no pipe) and of its ``-wal`` file when there
    is one (a live Hermes keeps its new sessions there until a checkpoint: the main file
    alone would call a grown database "the same bytes"), read in chunks. A repeated
    import of the same input is told by it (``ledger.spec.IMPORT_DIGEST``)."""
    digest = hashlib.sha256()
    if data is not None:
        digest.update(data)
        return digest.hexdigest()
    _hash_file(digest, path)
    wal = path + WAL_SUFFIX
    if os.path.isfile(wal):
        digest.update(b"\x00-wal\x00")
        _hash_file(digest, wal)
    return digest.hexdigest()


def _hash_file(digest: Any, path: str) -> None:
    with _opened(path, pipes=False) as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)


def load_file(
    path: str | os.PathLike[str],
    format: str | None = None,
    *,
    max_bytes: int | None = None,
    check: Callable[[str], None] | None = None,
) -> tuple[list[ImportedSession], str]:
    """:func:`load` of the file at `path`, with the digest of the bytes it read
    (:func:`file_digest`): the file is read once, also when it is a pipe. `check` is
    called with the digest before anything is parsed (an import refusing bytes it
    already holds raises there, without paying the parse)."""
    sessions, digest = _load_named(os.fspath(path), format, max_bytes, check or _no_check)
    assert digest is not None
    return sessions, digest


def _no_check(_digest: str) -> None:
    return None


def _load_named(
    name: str, format: str | None, max_bytes: int | None, check: Callable[[str], None] | None
) -> tuple[list[ImportedSession], str | None]:
    """The sessions of the file `name`, read once (detection works on the same text the
    parser gets; a SQLite file is opened by name), and, with `check`, the digest, given
    to `check` before parsing."""
    fmt = format_name(format) if format is not None else None
    if fmt not in PATH_FORMATS:
        data = read_input_file(name, max_bytes)
        if fmt is not None and data.startswith(SQLITE_HEADER):  # (it said "not UTF-8 text")
            raise ImportFormatError(
                f"a SQLite database, which the {str(format).strip()} format does not read (it reads "
                f"text); a Hermes state.db is {spelled('hermes_db')}, or give no format",
                path=name,
            )
        if not (fmt is None and data.startswith(SQLITE_HEADER)):
            sha = _checked(file_digest(data, name), check) if check else None
            text = _utf8(data, name)
            del data  # (the bytes are not kept while the text is parsed)
            return IMPORTERS[fmt or _detect_text(text, name)](text, path=name), sha
    _opened(name, pipes=False).close()  # the database is opened again by name: no pipe
    # (the digest before the read: a session a live Hermes writes meanwhile makes the
    # next digest differ, so it is imported then, never refused as "the same bytes")
    sha = _checked(file_digest(None, name), check) if check else None
    return IMPORTERS[fmt or "hermes_db"](name), sha


def _checked(digest: str, check: Callable[[str], None]) -> str:
    check(digest)
    return digest


def load(
    path: str | os.PathLike[str] | None,
    format: str | None = None,
    *,
    text: str | None = None,
    max_bytes: int | None = None,
) -> list[ImportedSession]:
    """Parse the file at `path`, or `text` already read (stdin); the format is detected when not given.

    The file is read once: detection works on the same text the parser gets. Only a
    regular file is read, and at most `max_bytes` of it (default: the limit in force).
    """
    if text is not None:
        return load_text(text, format, path=os.fspath(path) if path is not None else None)
    if path is None:
        raise ImportFormatError("nothing to import: give a file path or the text")
    return _load_named(os.fspath(path), format, max_bytes, None)[0]
