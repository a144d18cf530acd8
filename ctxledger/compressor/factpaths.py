"""Finding file paths and URLs in text, for fact extraction (:mod:`.facts`).

Paths are found from their anchors (a ``/``, a known extension, a known file or
dotfile name, a Windows drive or ``.\\``) and grown in both directions, then judged
(``and/or`` and the pieces of a ``sed`` expression are not paths; environment paths
like ``site-packages`` are not the user's files). A name keeps its second suffix
after a known extension (``config.yaml.j2``, ``run.log.1``), a dotfile or dotted
directory its dot (``.env``, ``.github/workflows/ci.yml``), a Windows path its drive
and backslashes (``C:\\Users\\me\\app.py``, matched as ``c:/users/me/app.py``). URLs are
found from their ``://`` and masked out before paths are looked for.
"""

from __future__ import annotations

import bisect
import re
import string
from collections.abc import Iterator, Sequence

from ctxledger.compressor.factescapes import unescaped
from ctxledger.compressor.factlookalikes import TEX_COMMANDS, division
from ctxledger.compressor.factscan import LONG_TEXT  # (read as this module's name: tests lower it)

__all__ = [
    "PATH_CHARS",
    "bounded",
    "find_paths",
    "first_paths",
    "is_word_char",
    "mask",
    "path_text",
    "paths",
    "plausible_path",
    "urls",
]

_EXTENSIONS = (
    # no ``db``/``conf``/``env``: ``django.db`` and ``django.conf`` are modules, not files
    "py|pyi|pyx|ipynb|js|mjs|cjs|ts|tsx|jsx|vue|svelte|json|jsonl|toml|yaml|yml|ini|cfg|"
    "txt|md|rst|html|htm|css|scss|sh|bash|zsh|ps1|bat|rs|go|java|kt|scala|c|h|cc|"
    "cpp|hpp|cs|rb|php|swift|sql|lock|xml|csv|tsv|log|mk|gradle|proto|tf|lua|dart|"
    "exs|erl|hs|zig|jl|patch|diff|pem|crt|sqlite|gz|zip|tar|whl|png|jpg|jpeg|gif|svg|"
    "pdf|dll|exe|wasm|pyc"
)
# Paths are found from their anchors — a "/" or a known extension — and grown in both
# directions: a single path regex tried at every position of a tool output is ~10x slower.
PATH_CHARS = frozenset(string.ascii_letters + string.digits + "_.-+@~")
#: suffixes a file name keeps after a known extension (``config.yaml.j2``, ``app.py.bak``,
#: ``run.log.1``): a closed list, so ``resp.json.get`` stays no path
_SECOND_SUFFIXES = (
    r"j2|jinja2?|tpl|tmpl|template|erb|bak|orig|old|new|tmp|swp|dist|example|sample|"
    r"local|in|enc|gpg|asc|sig|bz2|xz|zst|\d{1,3}"
)
#: more of a name: a word character, but a superscript digit (``x.log¹``: a footnote's
#: mark, which the matcher reads as a blank)
_MORE_NAME = r"[^\W\u00b9\u00b2\u00b3\u2070\u2074-\u2079]"
#: a known extension, its second suffixes, then no more of a name: not a word char, ``-``,
#: ``+``, ``~``, ``@`` (what the matcher reads as more of it: ``app.py~`` is a backup),
#: ``(`` or ``/``, nor a ``.`` and a word char (``Sample.h.create(``, ``resp.json.get``
#: and ``app.py.xyz`` are no ``Sample.h``, ``resp.json``, ``app.py``: a fact the
#: matcher found nowhere, not even in its own text)
_EXT_ANCHOR = re.compile(
    rf"\.(?:{_EXTENSIONS})(?:\.(?:{_SECOND_SUFFIXES}))*(?!{_MORE_NAME}|[\-+~@(/]|\.\w)"
)
#: a known file name, with one lower-case suffix (``Dockerfile.dev``), ending a sentence
_KNOWN_FILE = re.compile(
    r"(?:Makefile|Dockerfile|Gemfile|Procfile|Rakefile|Vagrantfile|Jenkinsfile)"
    r"(?:\.[a-z0-9]+)?(?!" + _MORE_NAME + r"|\.\w)"
)
#: dotfiles named bare (``.env``, ``.bashrc``): a closed list, since a dot before a word
#: is also a method call (``.filter(``), a CSS class (``.header``) or a name (``.NET``)
_DOTFILE = re.compile(
    r"\.(?:env|envrc|bashrc|bash_profile|bash_aliases|bash_history|profile|zshrc|zprofile|"
    r"vimrc|inputrc|gitignore|gitattributes|gitmodules|gitconfig|dockerignore|npmrc|nvmrc|"
    r"yarnrc|editorconfig|prettierrc|prettierignore|eslintrc|eslintignore|babelrc|pylintrc|"
    r"flake8|coveragerc|pypirc|netrc|htaccess|python-version|node-version|ruby-version|"
    r"tool-versions)(?:\.(?:local|example|sample|template|dev|development|prod|production|"
    r"test|staging))?(?!" + _MORE_NAME + r"|[\-+~@(/]|\.\w)"
)
#: where a Windows path starts: a drive (``C:\\``, ``D:/``), ``.\\``, ``..\\`` or ``~\\``
_WINDOWS_ANCHOR = re.compile(r":[\\/]|(?:\.\.?|~)\\")
#: where a relative Windows path starts (``src\\app.py``): its first name, after no path
#: character, separator or ``:``, then a backslash. The character before is matched,
#: not looked behind at, so each name is read once (a leading lookbehind would be
#: tried at every position)
_RELATIVE_START = re.compile(r"(?:\A|[^A-Za-z0-9_.+@~\-/\\:%])([A-Za-z0-9_][A-Za-z0-9_.+@~\-]*+)\\")
#: what a Windows path grows over: path characters and both separators
_WINDOWS_RIGHT = re.compile(r"[A-Za-z0-9_.+@~\-\\/]*")
#: where a UNC path starts (``\\\\server\\share``, or JSON-escaped with four
#: backslashes): after no path character, separator or ``:``, two backslashes or more,
#: then a name; it grows over what a Windows path does and ``$`` (``\\\\srv\\c$``)
_UNC_START = re.compile(r"(?:\A|[^A-Za-z0-9_.+@~\-/\\:%])(\\{2,}[A-Za-z0-9_])")
_UNC_RIGHT = re.compile(r"[A-Za-z0-9_.+@~$\-\\/]*")
#: a UNC path's server (a host name, an address, ``wsl$``) and share (``c$``) names
_UNC_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*\$?")
_DRIVE = re.compile(r"[A-Za-z]:[\\/]")
#: a single backslash before ``n``, ``r`` or ``t``: maybe an escape, not a separator
_ESCAPE_LIKE = re.compile(r"(?<!\\)\\[nrt]")
#: what a name of a relative Windows path starts with
_NAME_START = frozenset(string.ascii_letters + string.digits + "_")
#: a run of backslashes in a Windows path: a JSON string's escapes double each one
_DOUBLED_BACKSLASHES = re.compile(r"\\{2,}")
_BACKSLASH_RUNS = re.compile(r"\\+")
#: a relative path whose first name is a dotted directory (``.ssh/config``)
_DOT_DIR = re.compile(r"\.[a-z][\w\-]*/[^/]")
_NOT_BEFORE_PATH = frozenset("/.-~@:%+")
#: what may not stand before a Windows path (else it is part of something longer)
_NOT_BEFORE_WINDOWS = PATH_CHARS | _NOT_BEFORE_PATH | frozenset("\\")
_HAS_EXT = re.compile(
    r"\.(?:" + _EXTENSIONS + r")(?:\.(?:" + _SECOND_SUFFIXES + r"))*$", re.IGNORECASE
)
#: a file name: a name, a dot and a lower-case extension of two characters or more
#: (``schema.prisma``, ``index.mdx``; not ``3.x``, ``e.g``)
_FILE_NAME = re.compile(r"[A-Za-z_][\w\-]*\.[a-z][a-z0-9]{1,9}")
#: the directory before such a file name: a name with a letter
_FILE_NAME_DIR = re.compile(r"[\w\-.]*[A-Za-z][\w\-.]*")
_NOT_PATHS = frozenset(
    {"and/or", "w/o", "i/o", "n/a", "yes/no", "on/off", "true/false", "read/write"}
    # the pieces of a ``sed 's/True/False/'`` expression
    | {"true/", "false/", "none/", "null/"}
)
#: a date written with slashes and a month's name (``20/May/2024``, nginx's and
#: Apache's logs): no path (one with numbers only has no letter, so none either)
_DATE_SLASHES = re.compile(r"[0-9]{1,4}/[A-Za-z]{3}/[0-9]{2,4}")
_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*$")
_URL_TAIL = re.compile(r"://[^\s<>\"'`\])}|,]+")
_URL_STRIP = ".,;:!?)]}'\""

_ENVIRONMENT_PATH = re.compile(r"site-packages|dist-packages|/lib/python\d|<frozen|node_modules/")
_OBJECT_NAMES = frozenset(
    [
        "self",
        "cls",
        "mock",
        "os",
        "sys",
        "np",
        "pd",
        "obj",
        "super",
        "this",
        "args",
        "kwargs",
        "request",
        "response",
    ]
)
_PATH_ROOTS = frozenset(
    [
        "tmp",
        "etc",
        "usr",
        "var",
        "home",
        "opt",
        "dev",
        "bin",
        "sbin",
        "srv",
        "mnt",
        "root",
        "proc",
        "sys",
        "lib",
        "work",
        "data",
        "app",
        "src",
        "workspace",
        "testbed",
        "repo",
        "code",
        "project",
        "users",
    ]
)
_KNOWN_FILES = frozenset(
    {"Makefile", "Dockerfile", "Gemfile", "Procfile", "Rakefile", "Vagrantfile", "Jenkinsfile"}
)


def mask(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """`text` with `spans` blanked out (same length, so positions stay valid)."""
    if not spans:
        return text
    n = len(text)
    if len(spans) < 8 or not all(0 <= start <= end <= n for start, end in spans):
        chars = list(text)
        for start, end in spans:
            chars[start:end] = " " * (end - start)
        return "".join(chars)
    # many spans (a long text): the union blanked between slices of `text`, no char list
    out: list[str] = []
    done = 0
    for start, end in sorted(spans):
        if end <= done:
            continue
        start = max(start, done)
        out.append(text[done:start])
        out.append(" " * (end - start))
        done = end
    out.append(text[done:])
    return "".join(out)


def urls(text: str) -> list[tuple[int, int, str]]:
    found: list[tuple[int, int, str]] = []
    for match in _URL_TAIL.finditer(text):
        start = match.start()
        while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "+.-"):
            start -= 1
        scheme = text[start : match.start()]
        value = text[start : match.end()].rstrip(_URL_STRIP)
        if len(scheme) < 2 or not _URL_SCHEME.match(scheme) or len(value) <= len(scheme) + 4:
            continue
        found.append((start, start + len(value), value))
    return found


def plausible_path(raw: str) -> str | None:
    """The path `raw` names (without sentence punctuation after it), or None.

    A Windows path (``C:\\Users\\me``, ``.\\run.ps1``) is judged as the POSIX path it
    reads as without its drive (``/Users/me``, ``./run.ps1``), and returned as written,
    except that doubled backslashes (a JSON string's escapes, ``C:\\\\logs``) are one.
    """
    value = raw.rstrip(".-,:")
    windows = _DRIVE.match(value) is not None
    if "\\" in value and not _uniform(value):
        return None  # (``a\\\\\\b``: the matcher reads single or doubled separators)
    if windows or value.startswith((".\\", "..\\", "~\\")):
        value = _DOUBLED_BACKSLASHES.sub("\\\\", value) if "\\\\" in value else value
        posix = value.replace("\\", "/")
        return value if _plausible(posix[2:] if windows else posix) is not None else None
    if value.startswith("\\\\"):
        return _unc(value)
    if "\\" in value:
        return _relative_windows(value)
    return _plausible(value)


def _uniform(value: str) -> bool:
    """Whether the backslashes of `value` separate alike: each alone, or each doubled (a
    JSON string's escapes); a UNC path's leading ones are :func:`_unc`'s to judge."""
    runs = {len(run) for run in _BACKSLASH_RUNS.findall(value.lstrip("\\"))}
    return runs <= {1} or runs == {2}


def _unc(raw: str) -> str | None:
    """The UNC path `raw` names (``\\\\server\\share\\dir\\file.txt``), or None.

    Two backslashes, then single separators; or JSON-escaped, every backslash doubled
    (four, then two). A server name and a share name at least, each a name (``$``
    may end them: ``c$``, ``wsl$``), no LaTeX command among them (``\\\\alpha\\beta``
    is an escaped formula) and, when the last has no known extension, no single
    backslash before ``n``, ``r`` or ``t`` (an escape, as in :func:`_directories`);
    the other names start with a letter, digit or ``_``. Returned with two leading
    backslashes and single separators.
    """
    rest = raw.lstrip("\\")
    lead = len(raw) - len(rest)
    escaped = "\\\\" in rest
    if lead != (4 if escaped else 2):
        return None
    names = (_DOUBLED_BACKSLASHES.sub("\\\\", rest) if escaped else rest).split("\\")
    if names[-1] == "":
        names.pop()  # a directory's trailing separator
    if len(names) < 2 or not all(_UNC_NAME.fullmatch(name) for name in names[:2]):
        return None
    if any(not name or name[0] not in _NAME_START for name in names[2:]):
        return None
    file = _HAS_EXT.search(names[-1]) is not None and len(names) > 2
    formula = any(
        name.rstrip("$").lower() in TEX_COMMANDS for name in names[: -1 if file else None]
    )
    if formula or (not file and _ESCAPE_LIKE.search(raw) is not None):
        return None
    return "\\\\" + "\\".join(names) + ("\\" if raw.endswith("\\") else "")


def _relative_windows(raw: str) -> str | None:
    """The relative Windows path `raw` names (``src\\app.py``, ``src\\\\app.py`` as a
    JSON string escapes it: one backslash each), or None.

    Regex escapes and LaTeX have the same shape (``\\d+\\.\\d+``, ``x\\in``,
    ``2\\theta\\sin``, ``config\\.yaml``), so it must look like a path: two names or
    more, each starting with a letter, digit or ``_`` (or ``..``), none but the last a
    file name (``a.py\\nb.py`` is a listing with a newline escape), and the last a file
    name with a known extension, or three names or more of two characters each
    (``src\\app\\models``).
    """
    value = _DOUBLED_BACKSLASHES.sub("\\\\", raw) if "\\\\" in raw else raw
    names = value.replace("/", "\\").split("\\")
    if names[-1] == "":
        names.pop()  # a directory's trailing separator
    if len(names) < 2 or not (_HAS_EXT.search(names[-1]) or _directories(raw, names)):
        return None
    if any(not name or (name[0] not in _NAME_START and name != "..") for name in names):
        return None
    if any(_HAS_EXT.search(name) for name in names[:-1]):
        return None
    return value if _plausible(value.replace("\\", "/")) is not None else None


def _directories(raw: str, names: list[str]) -> bool:
    """Whether names without an extension are a directory path: three names or more of
    two characters each, each ending with a letter, digit or ``_`` (``ab\\w+\\d+`` is a
    regex), none a LaTeX command (``w_i\\cdot\\log``), none after a single backslash
    starting with ``n``, ``r`` or ``t`` (``word\\nword\\nword`` is text with its
    newlines escaped, ``src\\\\tests\\\\unit`` a path as a JSON string writes it)."""
    return (
        len(names) >= 3
        and all(len(name) >= 2 and name[-1] in _NAME_START for name in names)
        and not any(name.lower() in TEX_COMMANDS for name in names)
        and _ESCAPE_LIKE.search(raw) is None
    )


def _plausible(value: str) -> str | None:
    if not any(c.isalpha() for c in value) or value.lower() in _NOT_PATHS:
        return None
    if _DATE_SLASHES.fullmatch(value):
        return None  # ``20/May/2024`` of a web server's log: a date
    if "/" not in value:
        known = value.split(".", 1)[0] in _KNOWN_FILES
        return value if _HAS_EXT.search(value) or known or _DOTFILE.fullmatch(value) else None
    parts = [p for p in value.split("/") if p]
    if not parts:
        return None
    if value.startswith(("/", "~/", "./", "../")):
        if len(parts) >= 2 or _HAS_EXT.search(value) or parts[0].lower() in _PATH_ROOTS:
            return value
        return None
    # ``src/`` is a directory, ``s/`` and ``v/`` are pieces of an expression
    if _HAS_EXT.search(value) or value.count("/") >= 2 or (value.endswith("/") and len(value) > 2):
        return value
    # under a directory a file name needs no known extension (``prisma/schema.prisma``)
    if (
        _FILE_NAME.fullmatch(parts[-1])
        and _FILE_NAME_DIR.fullmatch(parts[0])
        and not division(parts[0], parts[-1])
    ):
        return value
    # ``.ssh/config``, ``config/.env``: a dotted directory or a dotfile names a path
    return value if _DOT_DIR.match(value) or _DOTFILE.fullmatch(parts[-1]) else None


def is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def bounded(pattern: re.Pattern[str], text: str, not_before: str = "") -> Iterator[re.Match[str]]:
    """``pattern.finditer`` where a match may not follow a word char or one of `not_before`.

    Same result as a leading negative lookbehind, without its cost: rejected matches
    resume one character later, so an overlapping valid match is still found.
    """
    pos = 0
    while True:
        match = pattern.search(text, pos)
        if match is None:
            return
        start = match.start()
        if start > 0 and (is_word_char(text[start - 1]) or text[start - 1] in not_before):
            pos = start + 1
            continue
        yield match
        pos = match.end() if match.end() > start else start + 1


#: a "/" and what follows it of a path: PATH_CHARS and "/"
_SLASH_AND_RIGHT = re.compile(r"/[A-Za-z0-9_.+@~/-]*")
#: the same, or an extension anchor: one scan finds both in a long text, and a slash
#: path swallows the extension anchors inside it
_SLASH_OR_EXTENSION = re.compile(r"/[A-Za-z0-9_.+@~/-]*+|" + _EXT_ANCHOR.pattern)
#: what a known file name (_KNOWN_FILE) needs: one of their capitals
_KNOWN_FILE_CAPITALS = tuple(dict.fromkeys(name[0] for name in sorted(_KNOWN_FILES)))
_SHORT_SCANS = (_SLASH_AND_RIGHT, _EXT_ANCHOR, _KNOWN_FILE, _DOTFILE)


def _span_ends(text: str) -> dict[int, int]:
    """Candidate path spans: start -> the longest end of the spans at that start
    (``x.tar.gz`` over ``x.tar``), without the starts paths() skips (after a char of
    _NOT_BEFORE_PATH).

    Slash paths: each "/" (from where the previous span ended) grown left over
    PATH_CHARS and right over them and "/"; bare file names: each extension anchor,
    known file or dotfile name grown left over word chars, "." and "-" (``.py`` alone
    is none); Windows paths (:func:`_windows_spans`), which replace every other span
    starting inside them (``app.py`` of ``C:\\proj\\app.py``). The same spans as the
    candidate walk of tests/helpers/reference_facts (a long text names 150,000 paths).

    A long text (:data:`LONG_TEXT`) is scanned once for slashes and extension anchors
    together: a slash path's right part (from its first "/") swallows the extension
    anchors inside it, whose names grow left to a "/", "+", "@" or "~" of that part,
    all characters of _NOT_BEFORE_PATH, so they never start a span (``app.py`` of
    ``src/app.py``); and known file names are looked for only when one of their
    capitals occurs. A short text is scanned once per kind (two memchr-fast scans
    beat one scan for either of two characters there).
    """
    spans: dict[int, int] = {}
    get, path_chars, not_before = spans.get, PATH_CHARS, _NOT_BEFORE_PATH
    scans: Sequence[re.Pattern[str]] = _SHORT_SCANS
    if len(text) >= LONG_TEXT:
        scans = [_SLASH_OR_EXTENSION, _DOTFILE]
        if any(capital in text for capital in _KNOWN_FILE_CAPITALS):
            scans.insert(1, _KNOWN_FILE)
    for pattern in scans:
        # (by identity: a compiled pattern's hash reads its whole program)
        slashes, mixed = pattern is _SLASH_AND_RIGHT, pattern is _SLASH_OR_EXTENSION
        extensions = mixed or pattern is _EXT_ANCHOR
        last, last_start = 0, 0  # the last name anchor and where its name starts
        for match in pattern.finditer(text):
            anchor, end = match.span()
            start = anchor
            if slashes or (mixed and text[anchor] == "/"):  # (resumes at its end, as the walk)
                while start > 0 and text[start - 1] in path_chars:
                    start -= 1
            else:
                while start > last and ((c := text[start - 1]).isalnum() or c in "_.-"):
                    start -= 1
                if start == last:  # the name runs on through the last anchor: its start
                    start = last_start  # (``a.py.a.py.…`` was grown over once per anchor)
                last, last_start = anchor, start
                if start == anchor and extensions:
                    continue  # ``.py`` alone
            if (start == 0 or text[start - 1] not in not_before) and get(start, -1) < end:
                spans[start] = end
    windows = _windows_spans(text)
    if windows:
        starts = [start for start, _ in windows]  # sorted, the spans apart
        for start in list(spans):
            at = bisect.bisect_left(starts, start) - 1  # the last Windows path before it
            if at >= 0 and start < windows[at][1]:
                del spans[start]
        for start, end in windows:
            spans[start] = max(end, get(start, -1))
    return spans


def _windows_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the Windows paths of `text`: from a drive (``C:\\``, ``D:/``),
    ``.\\``, ``..\\`` or ``~\\`` that follows no path character, separator or ``:``,
    over path characters and both separators; and the relative ones (:func:`_relative_spans`)."""
    if "\\" not in text and (":" not in text or ":/" not in text):
        return []
    found: list[tuple[int, int]] = []
    done = 0
    for match in _WINDOWS_ANCHOR.finditer(text):
        drive = match.group()[0] == ":"
        start = match.start() - 1 if drive else match.start()
        if start < done or (drive and text[start] not in string.ascii_letters):
            continue  # (inside the last one, or no drive letter; done >= 0 > -1)
        if start > 0 and text[start - 1] in _NOT_BEFORE_WINDOWS:
            continue
        right = _WINDOWS_RIGHT.match(text, match.end())
        done = right.end() if right is not None else match.end()
        found.append((start, done))
    relative = _relative_spans(text) if "\\" in text else []
    # (apart from the others: a relative one starts after a character no other holds,
    # a UNC one too, and it holds no ":")
    unc = _unc_spans(text) if "\\\\" in text else []
    return sorted(found + relative + unc) if relative or unc else found


def _unc_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the UNC paths of `text` (:func:`_unc` judges each)."""
    found: list[tuple[int, int]] = []
    judged: dict[str, bool] = {}  # a long text repeats its paths: judge each once
    for match in _UNC_START.finditer(text):
        start = match.start(1)
        right = _UNC_RIGHT.match(text, match.end())
        end = right.end() if right is not None else match.end()
        raw = text[start:end]
        good = judged.get(raw)
        if good is None:
            good = judged[raw] = _unc(raw.rstrip(".-,:")) is not None
        if good:
            found.append((start, end))
    return found


def _relative_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the relative Windows paths of `text` (``src\\app.py``): a name
    after no path character, separator or ``:`` (``\\d+\\.`` is none), then a backslash
    and what a Windows path grows over, when :func:`plausible_path` judges it a path
    (else the names in it are looked at alone, as before)."""
    found: list[tuple[int, int]] = []
    judged: dict[str, bool] = {}  # a long text repeats its paths: judge each once
    for match in _RELATIVE_START.finditer(text):
        start = match.start(1)
        right = _WINDOWS_RIGHT.match(text, match.end())
        end = right.end() if right is not None else match.end()
        raw = text[start:end]
        good = judged.get(raw)
        if good is None:
            good = judged[raw] = plausible_path(raw) is not None
        if good:
            found.append((start, end))
    return found


def paths(text: str) -> Iterator[tuple[int, str]]:
    """``(position, path)`` of every path `text` names, in order."""
    return iter(sorted(_found(text).items()))


def first_paths(text: str) -> list[tuple[int, str]]:
    """``(position, path)`` of each distinct path at its first position, in order: what
    :func:`paths` yields, without the repeats (a caller keeping the first of equal
    values, as fact extraction does, sees the same).

    One pass over the candidates, each distinct one judged once: the judgement reads
    only the candidate's characters (:func:`_path_of`).
    """
    first: dict[str, int] = {}
    judged: dict[str, str | None] = {}  # a long text repeats its paths: judge each once
    get = first.get
    for start, end in _span_ends(text).items():
        raw = text[start:end]
        path = judged[raw] if raw in judged else judged.setdefault(raw, _path_of(raw))
        if path is not None and start < get(path, start + 1):
            first[path] = start
    return sorted((start, path) for path, start in first.items())


def _found(text: str) -> dict[int, str]:
    """Start -> path, for every path of `text` (in no particular order)."""
    found: dict[int, str] = {}
    judged: dict[str, str | None] = {}  # a long text repeats its paths: judge each once
    for start, end in _span_ends(text).items():
        raw = text[start:end]
        value = judged[raw] if raw in judged else judged.setdefault(raw, _path_of(raw))
        if value is not None:
            found[start] = value
    return found


def _path_of(raw: str) -> str | None:
    """The path a candidate span's text names, or None. Its text alone decides: the
    look past a leading ``.`` (:func:`_dot_starts_path`) stays inside it, since a
    candidate starting with ``.`` holds the name or separator that follows the dot."""
    if raw.startswith(".") and not _dot_starts_path(raw, 0):
        return None
    return _judged(raw)


def _dot_starts_path(text: str, start: int) -> bool:
    """Whether a candidate starting with a ``.`` at `start` may be a path: ``./``,
    ``../``, ``.\\``, ``..\\`` or a dotted name (``.env``, ``.github/``), not dots
    (``...``) or a dot before no name (``.5``, ``.-``)."""
    if text.startswith(("./", "../", ".\\", "..\\"), start):
        return True
    return start + 1 < len(text) and (text[start + 1].isascii() and text[start + 1].isalpha())


def _judged(raw: str) -> str | None:
    """The path `raw` names, or None when it is none (or an environment path, an attribute)."""
    value = plausible_path(raw)
    if value is None or _ENVIRONMENT_PATH.search(value.replace("\\", "/")):
        return None
    if "/" not in value and value.split(".", 1)[0].lower() in _OBJECT_NAMES:
        return None  # ``self.log``, ``mock.patch``: attribute access, not a file
    return value


# a quoted ``sed 's/old/new/g'`` expression: its pieces (``s/``, ``v/``) are not paths
_SED_EXPRESSION = re.compile(r"""(?<!\w)(['"])s([/|#,:@])[^\n]*?\2[^\n]*?\2[a-zA-Z0-9]*\1""")


def path_text(text: str) -> str:
    """`text` as paths are looked for in it: the escapes of its escaped lines
    (:func:`escape_spans`: ``"docs\\nsetup.py\\n"``) and quoted ``sed`` expressions
    blanked (same length)."""
    blanked = unescaped(text)
    text = text if blanked is None else blanked
    if "s" not in text or ("'" not in text and '"' not in text):
        return text  # an expression is quoted
    return mask(text, [m.span() for m in _SED_EXPRESSION.finditer(text)])


def find_paths(text: str) -> list[str]:
    """The file paths mentioned in `text` (URLs excluded), in order, once each."""
    masked = mask(text, [(start, end) for start, end, _ in urls(text)])
    return list(dict.fromkeys(value for _, value in paths(path_text(masked))))
