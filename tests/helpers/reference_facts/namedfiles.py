"""Files named without an extension, stated plainly (session 33): a known file name
(``Makefile``, ``Dockerfile-dev``, ``Makefile.am``) and a dotfile (``.env``,
``.env.local``). Character scans over closed lists, not the module's regexes, so the
tests compare two statements of the rule.

A name ends where no more of a name follows: not a word character (a superscript
digit, a footnote's mark, is none), nor a ``.`` with dots and dashes and then a word
character, ``+``, ``~``, ``@`` or ``/`` (``Makefile.in.x``, ``.env..x``). After a known
file, none of ``+~@`` (``Makefile~``: session 39, review 1), nor dashes and dots then a
word character, ``+``, ``~`` or ``@``; after a dotfile, none of ``-+~@(/``.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["dotfiles", "known_files"]

KNOWN_FILES = (
    "Makefile",
    "Dockerfile",
    "Gemfile",
    "Procfile",
    "Rakefile",
    "Vagrantfile",
    "Jenkinsfile",
)
_DOTFILE_NAMES = """env envrc bashrc bash_profile bash_aliases bash_history profile zshrc
    zprofile vimrc inputrc gitignore gitattributes gitmodules gitconfig dockerignore npmrc
    nvmrc yarnrc editorconfig prettierrc prettierignore eslintrc eslintignore babelrc
    pylintrc flake8 coveragerc pypirc netrc htaccess python-version node-version
    ruby-version tool-versions"""
DOTFILES = frozenset(_DOTFILE_NAMES.split())
#: what may follow a dotfile's name after a ``.``
_VARIANT_NAMES = "local example sample template dev development prod production test staging"
DOTFILE_VARIANTS = frozenset(_VARIANT_NAMES.split())
_SUPERSCRIPTS = "¹²³⁰⁴⁵⁶⁷⁸⁹"
#: at most this many dashed words after a known file, each of at most this many
#: characters after at most this many dashes (``Dockerfile-dev``, ``Makefile--OK``)
_DASHED_WORDS = 8
_WORD_CHARS = 64
_DASHES = 8


def _name_char(char: str) -> bool:
    """More of a name: a word character, but a superscript digit."""
    return (char.isalnum() or char == "_") and char not in _SUPERSCRIPTS


def _more_after_dot(text: str, at: int) -> bool:
    """Whether ``text[at:]`` is a ``.``, dots and dashes, then a character of a name."""
    if at >= len(text) or text[at] != ".":
        return False
    at += 1
    while at < len(text) and text[at] in ".-":
        at += 1
    # (``\\``: s37; a superscript digit is a blank to the matcher: s39)
    return at < len(text) and (_name_char(text[at]) or text[at] in "+~@/\\")


def _ends(text: str, at: int, dotfile: bool) -> bool:
    """Whether a name ending at `at` ends there (see the module's doc)."""
    if at >= len(text):
        return True
    char = text[at]
    if _name_char(char) or _more_after_dot(text, at):
        return False
    if dotfile:
        return char not in "-+~@(/"
    if char in "+~@":
        return False
    if char != "-":
        return True
    at += 1
    while at < len(text) and text[at] in ".-":
        at += 1
    return not (at < len(text) and (_name_char(text[at]) or text[at] in "+~@"))


def _run(text: str, at: int, more: str = "") -> int:
    """The end of the run of name characters (and of `more`) from `at`."""
    while at < len(text) and (_name_char(text[at]) or text[at] in more):
        at += 1
    return at


def _dashed_words(text: str, at: int) -> int:
    """The end of up to 8 dashed words from `at` (``-dev``, ``--OK``), or `at` when
    none. Each word is taken whole (at most 64 characters; a longer one stops the run
    where 64 end, which the name's end then rejects)."""
    for _ in range(_DASHED_WORDS):
        dashes = at
        while dashes < len(text) and text[dashes] == "-":
            dashes += 1
        if not 1 <= dashes - at <= _DASHES or _run(text, dashes) == dashes:
            break
        at = min(_run(text, dashes), dashes + _WORD_CHARS)
    return at


def known_files(text: str) -> Iterator[tuple[int, int]]:
    """The spans of known file names: the name, then a lower-case suffix (``.am``,
    ``.in``) or dashed words (``-dev``), ending as a name ends. A name inside a span
    already given is not looked at again."""
    floor = 0
    for at, name in sorted(_occurrences(text)):
        if at < floor:
            continue
        end = at + len(name)
        if text[end : end + 1] == "." and _lower_or_digit(text, end + 1):
            end = _lower_end(text, end + 1)
        elif text[end : end + 1] == "-":
            end = _dashed_words(text, end)
        if _ends(text, end, dotfile=False):
            floor = end
            yield at, end


def _occurrences(text: str) -> Iterator[tuple[int, str]]:
    for name in KNOWN_FILES:
        at = text.find(name)
        while at != -1:
            yield at, name
            at = text.find(name, at + 1)


def _lower_or_digit(text: str, at: int) -> bool:
    return at < len(text) and (text[at] in "abcdefghijklmnopqrstuvwxyz0123456789")


def _lower_end(text: str, at: int) -> int:
    while _lower_or_digit(text, at):
        at += 1
    return at


def dotfiles(text: str) -> Iterator[tuple[int, int]]:
    """The spans of dotfiles: ``.`` and a listed name, maybe a ``.`` and a listed
    variant (``.env.local``), ending as a name ends (no ``-+~@(/`` after it)."""
    floor = 0
    dot = text.find(".")
    while dot != -1:
        if dot >= floor:
            end = _run(text, dot + 1, "-")
            if text[dot + 1 : end] in DOTFILES:
                variant = _run(text, end + 1, "-")
                if (
                    text[end : end + 1] == "."
                    and text[end + 1 : variant] in DOTFILE_VARIANTS
                    and _ends(text, variant, dotfile=True)
                ):
                    end = variant
                if _ends(text, end, dotfile=True):
                    floor = end
                    yield dot, end
        dot = text.find(".", dot + 1)
