"""Versions of derived values that nobody has to remember to bump (session 39).

A derived value (:mod:`.derived`) is a function of a message's content and of the code
that computed it. Its version is a *fingerprint* of that code: a digest of the source
bytes of a root module and of every ctxledger module it imports, directly or not (also
inside functions), found by reading their import statements (:func:`imported_modules`,
checked against the import linter's graph by a test), plus the Python version and its
Unicode database. Any edit to any of those files gives another version, and a value of
another version is simply not found.

Also the merged-count value (``count-after``): the count of a long content followed by
the start of the merge lead (see :func:`ctxledger.tokens.remember_count_after`).
"""

from __future__ import annotations

import functools
import hashlib
import re
import sys
import unicodedata
from importlib import resources
from pathlib import Path

import msgspec

__all__ = [
    "COUNT_ENCODING",
    "count_after_kind",
    "count_after_version",
    "decode_count_after",
    "encode_count_after",
    "fingerprint_of",
    "imported_modules",
    "package_root",
    "source_of",
]

_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(ctxledger[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)"
    r"|import[ \t]+(ctxledger[\w.]*))",
    re.MULTILINE,
)
_NAME = re.compile(r"\b(\w+)\b(?:\s+as\s+\w+)?")
#: the count-after value's layout (bump when its encoding changes)
COUNT_ENCODING = "count-after-1"
_COUNT = msgspec.msgpack.Decoder(tuple[str, int])


def package_root() -> Path:
    """The folder holding the ``ctxledger`` package."""
    return Path(str(resources.files("ctxledger"))).parent


def source_of(root: Path, module: str) -> Path | None:
    """The source file of `module` under `root` (a module or a package), or None."""
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def imported_modules(module: str, root: Path | None = None) -> list[str]:
    """`module` and every ctxledger module it imports, directly or not (also inside
    functions), read from their import statements; sorted. ``from P import m`` names
    module ``P.m`` when it is one (and ``P`` itself only for a name that is not)."""
    base = package_root() if root is None else root
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        path = source_of(base, name)
        if name in seen or path is None:
            continue
        seen.add(name)
        for found in _IMPORT.finditer(path.read_text("utf-8")):
            target = found.group(1) or found.group(3)
            names = _NAME.findall(found.group(2) or "")
            subs = [f"{target}.{n}" for n in names if source_of(base, f"{target}.{n}") is not None]
            todo.extend(subs)
            if len(subs) < len(names) or not names:  # (a name the module itself defines)
                todo.append(target)
    return sorted(seen)


def fingerprint_of(modules: list[str], root: Path, data_dirs: tuple[str, ...] = ()) -> str:
    """A digest of the sources of `modules`, the files under `data_dirs`, and the Python
    version and Unicode database (casefolding and letter classes come from them)."""
    digest = hashlib.sha256(f"{sys.version_info[:2]}|{unicodedata.unidata_version}".encode())
    paths = [p for m in modules if (p := source_of(root, m)) is not None]
    for folder in data_dirs:
        paths.extend(sorted(p for p in (root / folder).rglob("*") if p.is_file()))
    for path in paths:
        data = path.read_bytes()
        digest.update(f"\0{path.relative_to(root).as_posix()}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:32]


@functools.cache
def _tokens_fingerprint() -> str:
    from importlib.metadata import version

    root = package_root()
    modules = imported_modules("ctxledger.tokens", root)
    return f"{fingerprint_of(modules, root)}:tiktoken-{version('tiktoken')}"


def count_after_version() -> str:
    """:data:`COUNT_ENCODING` and the counting code's fingerprint (``ctxledger.tokens``
    and what it imports, and tiktoken's version); computed once per process."""
    return f"{COUNT_ENCODING}:{_tokens_fingerprint()}"


def count_after_kind(encoding: str) -> str:
    return f"count-after/{encoding}"


def encode_count_after(extension: str, count: int) -> bytes:
    """The stored value: the text counted after the content, and the count of both."""
    return msgspec.msgpack.encode((extension, count))


def decode_count_after(value: bytes | None) -> tuple[str, int] | None:
    """(extension, count) of a stored value, or None (absent or damaged)."""
    if value is None:
        return None
    try:
        return _COUNT.decode(value)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
