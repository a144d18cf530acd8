"""A long message's facts, kept in the ledger's derived values (session 39, issue 14).

Extracting the facts of a 10 MB message costs ~300 ms; a cold what-if pays it once per
run. The facts are a pure function of the message *and of the extraction code*, so they
are computed once when such a message is appended and stored in the store's side table
of derived values (:meth:`~ctxledger.eventstore.base.EventStore.put_derived`: not an
event, not in the hash chain, like a checkpoint), keyed by

- the content's blob ref (sha256 of its UTF-8) and a digest of the rest of the message
  (its role, tool calls, ...), which is the ``kind``: ``facts/<digest>``;
- a ``version``: :data:`ENCODING` and :func:`fingerprint`, a digest of the source bytes of
  every ctxledger module extraction imports (found by reading their import statements
  from :data:`ROOT`, never a hand-kept list), of the prompt files the summary markers
  read, and of the Python version and Unicode database. Any change to any of them gives
  another version, so a value stored by other extraction code is never read (it is
  simply not found, and the facts are computed as before).

Nothing here writes: :mod:`ctxledger.ledger.derived` stores values at append time.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sys
import unicodedata
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec

from ctxledger.compressor.factmatch import Fact
from ctxledger.compressor.facts import extract_facts

#: a string content at least this long has its facts stored when appended: ~8 ms of
#: extraction (~30 ms per MB), where a cold what-if's own work (~125 ms for 200 messages)
#: starts to feel it, and a store lookup (~0.1 ms) and a few KB of facts cost nothing
STORED_MIN_CHARS = 256 * 1024
#: the stored value's layout (bump when :func:`encode_facts` changes)
ENCODING = "facts-1"
#: the module whose imports the fingerprint follows
ROOT = "ctxledger.compressor.facts"
#: data files read by modules of the graph (the summary markers' prompt texts)
DATA_DIRS = ("ctxledger/compressor/prompts",)

_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(ctxledger[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)"
    r"|import[ \t]+(ctxledger[\w.]*))",
    re.MULTILINE,
)
_NAME = re.compile(r"\b(\w+)\b(?:\s+as\s+\w+)?")
_ENCODER = msgspec.json.Encoder(order="sorted")
_VALUE = msgspec.msgpack.Encoder()
_DECODE = msgspec.msgpack.Decoder(list[tuple[str, str, str]])


def _package_root() -> Path:
    return Path(str(resources.files("ctxledger"))).parent


def _source(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def imported_modules(module: str = ROOT, root: Path | None = None) -> list[str]:
    """`module` and every ctxledger module it imports, directly or not (also inside
    functions), read from their import statements; sorted."""
    base = _package_root() if root is None else root
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        path = _source(base, name)
        if name in seen or path is None:
            continue
        seen.add(name)
        for found in _IMPORT.finditer(path.read_text("utf-8")):
            target = found.group(1) or found.group(3)
            names = _NAME.findall(found.group(2) or "")
            subs = [f"{target}.{n}" for n in names if _source(base, f"{target}.{n}") is not None]
            todo.extend(subs)
            if len(subs) < len(names) or not names:  # (a name the module itself defines)
                todo.append(target)
    return sorted(seen)


def fingerprint_of(modules: list[str], root: Path) -> str:
    """A digest of the sources of `modules`, the files under :data:`DATA_DIRS`, and the
    Python version and Unicode database (casefolding and letter classes come from them)."""
    digest = hashlib.sha256(f"{sys.version_info[:2]}|{unicodedata.unidata_version}".encode())
    paths = [p for m in modules if (p := _source(root, m)) is not None]
    for folder in DATA_DIRS:
        paths.extend(sorted(p for p in (root / folder).rglob("*") if p.is_file()))
    for path in paths:
        data = path.read_bytes()
        digest.update(f"\0{path.relative_to(root).as_posix()}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:32]


@functools.cache
def fingerprint() -> str:
    """:func:`fingerprint_of` the extraction's modules, computed once per process."""
    root = _package_root()
    return fingerprint_of(imported_modules(ROOT, root), root)


def facts_version() -> str:
    return f"{ENCODING}:{fingerprint()}"


def facts_kind(message: Mapping[str, Any]) -> str:
    """The derived-value kind of `message`'s facts: ``facts/`` and a digest of the message
    without its content (role, name, tool calls: extraction reads them too)."""
    rest = _ENCODER.encode({k: (None if k == "content" else v) for k, v in message.items()})
    return "facts/" + hashlib.blake2b(rest, digest_size=16).hexdigest()


def stored_content(message: Mapping[str, Any]) -> str | None:
    """`message`'s string content when its facts are the kind stored, else None."""
    content = message.get("content")
    if isinstance(content, str) and len(content) >= STORED_MIN_CHARS:
        return content
    return None


def encode_facts(facts: list[Fact]) -> bytes:
    """The stored value: each fact's (kind, value, normalized); the rest of a fact of one
    message is its role and index 0 (:func:`decode_facts`)."""
    return _VALUE.encode([(f.kind, f.value, f.normalized) for f in facts])


def decode_facts(value: bytes, message: Mapping[str, Any]) -> list[Fact] | None:
    """The facts :func:`encode_facts` stored for `message`, or None when the bytes do not
    decode as such (a damaged value is recomputed, never trusted half)."""
    try:
        items = _DECODE.decode(value)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    role = str(message.get("role") or "")
    return [Fact(kind=k, value=v, normalized=n, message_index=0, role=role) for k, v, n in items]


def computed_value(message: Mapping[str, Any]) -> bytes:
    """The value to store for `message` (its facts extracted now)."""
    return encode_facts(extract_facts([message]))


Getter = Callable[[str, str, str], "bytes | None"]


def read_facts(message: Mapping[str, Any], ref: str, get: Getter) -> list[Fact] | None:
    """`message`'s facts stored under blob `ref` (read with `get`), or None when absent
    or of another version."""
    value = get(ref, facts_kind(message), facts_version())
    return decode_facts(value, message) if value is not None else None
