"""The reference's rules of a slash path read as the matcher reads the text, folded
(review 1 of session 35, session 36), moved out of :mod:`.factpaths` (600 lines)."""

from __future__ import annotations

import re
import unicodedata

from helpers.reference_facts.rules import caseless, has_ext, in_slash_name, matcher_reads

_PATH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-+@~")


def tail_of_folder(before: str) -> bool:
    """Whether `before`, read as the matcher reads it, ends with a ``/`` and a folder
    name whose last character is a caseless letter, or with a ``/`` (a path after
    either is a tail)."""
    seen = "".join(matcher_reads(c) for c in before)
    if seen.endswith("/"):
        return True
    if not seen or ord(seen[-1]) < 128 or not caseless(seen[-1]):
        return False
    name = len(seen)
    while name > 0 and (
        seen[name - 1] in _PATH_CHARS
        or (
            ord(seen[name - 1]) >= 128
            and (in_slash_name(seen[name - 1]) or caseless(seen[name - 1]))
        )
    ):
        name -= 1
    return name > 0 and seen[name - 1] == "/"


def caseless_before(text: str, start: int) -> bool:
    """Session 36: whether the character before `start`, as the matcher reads it (its
    fold without its own marks; a mark's base: up to 32 marks back), is a caseless
    letter: a relative path's caseless first name may end there."""
    at = start - 1
    while at >= 0 and start - at <= 33:  # (32 marks and their base)
        seen = matcher_reads(text[at])
        base = seen.rstrip("".join(c for c in seen if unicodedata.category(c)[0] == "M"))
        if ord(text[at]) < 128 or base:
            return ord(base[-1:] or "a") >= 128 and caseless(base[-1])
        at -= 1
    return False


def folds_to_separator(text: str, start: int) -> bool:
    """Session 38: the character before a UNC path is one the matcher, reading the text
    NFKC-folded and case-folded, reads as a ``:`` or a ``/`` (``：``, ``／``, ``＼``): a
    URL's ``://`` or a longer path there."""
    if start == 0 or ord(text[start - 1]) < 128:
        return False
    last = unicodedata.normalize("NFKC", text[start - 1]).casefold()[-1:]
    return last in (":", "/", "\\")


def system_root(path: str) -> bool:
    """Session 36: whether absolute `path` starts at a top directory of a system or
    container (``/home``, ``/etc``, ``/usr``, …, as the matcher reads it): after
    caseless prose it is read absolute (``修改/home/用户/app.py``); any other could be a
    relative path's tail. Session 37: so could a name a project's own tree starts with
    (``项目/lib/util.py``, ``src``, ``app``, ``bin``) or a single letter
    (``目录/a/b.txt``, no MSYS drive any more); review 1: a container's work folder
    (``workspace``, ``repo``, ``work``, ``code``, ``project``) stays a top one."""
    roots = "boot data dev etc home lib64 media mnt opt proc root run sbin srv sys tmp"
    roots += " usr var users workspaces testbed workspace repo work code project"
    roots += " private volumes nix snap content sdcard storage"
    first = "".join(matcher_reads(c) for c in path[1:].split("/")[0])
    return first in roots.split()


def longer_when_folded(text: str, start: int, end: int) -> bool:
    """Session 36: whether the matcher, reading the text folded, sees the path go on
    after `end`, where a non-ASCII character it reads as dots, dashes or more stands
    (maybe after ASCII dots and dashes): after its value (without the dots and
    dashes the judgement strips), a run of dots and dashes then a name character, or a
    ``/`` after a dot (not a directory's ``/`` it ends with; grep's line numbers are
    not looked at)."""
    if end >= len(text) or text[end - 1] == "/":
        return False
    value_end = start + len(text[start:end].rstrip(".-"))
    stop = value_end  # (the dots and dashes after it, as the matcher reads them)
    while stop < len(text) and not matcher_reads(text[stop]).strip(".-"):
        stop += 1
    if text[value_end : stop + 1].isascii():
        return False  # (ASCII: the anchors' own rules)
    # possessive: at the end of the text a dot is no "next character" (review 1)
    after = re.match(r"([.\-]*+)(.)", "".join(matcher_reads(c) for c in text[value_end:]), re.S)
    if after is None:
        return False
    run, first = after.groups()
    return first in _PATH_CHARS or (first == "/" and "." in run)


def word_beside_when_folded(text: str, start: int, end: int) -> bool:
    """Session 36: whether a bare name (no ``/``) starting with a word character comes
    right after a non-ASCII character the matcher reads (folded) as ending with a word
    character, or ending with one comes right before one it reads as starting with
    one: to it, the name is part of a longer word."""
    if "/" in text[start:end]:
        return False
    before = text[start - 1] if start else "a"
    glued = ord(before) >= 128 and re.match(r"\w", text[start])
    if glued and re.search(r"\w\Z", matcher_reads(before)):
        return True
    after = text[end] if end < len(text) else "a"
    return (
        ord(after) >= 128
        and re.search(r"\w\Z", text[start:end]) is not None
        and (re.match(r"\w", matcher_reads(after)) is not None)
    )


def caseless_file_after(text: str, end: int, path: str) -> bool:
    """Session 36: whether slash path `path` (a last name without a known extension)
    ends at `end` before a caseless letter that, with more of them and ASCII name
    characters, runs on to a known extension (and its second suffixes) ending a name
    (``/home/x/app用户.py``), all read as the matcher reads them (review 1:
    ``/home/x/app㍿x.py``)."""
    if end >= len(text) or ord(text[end]) < 128:
        return False
    if path.endswith("/") or "/" not in path or has_ext(path):
        return False
    seen = "".join(matcher_reads(c) for c in text[end:])
    if not seen or ord(seen[0]) < 128 or not caseless(seen[0]):
        return False
    stop = 0
    while stop < len(seen) and (
        (ord(seen[stop]) >= 128 and caseless(seen[stop]))
        or re.fullmatch(r"[A-Za-z0-9_\-]", seen[stop])
    ):
        stop += 1
    names = re.match(r"(?:\.[A-Za-z0-9]+)+", seen[stop:])
    if names is None:
        return False
    suffixes = names.group().split(".")[1:]
    for count in range(len(suffixes), 0, -1):  # (an extension, then second suffixes)
        upto = stop + sum(len(s) + 1 for s in suffixes[:count])
        ends = upto == len(seen) or not (
            re.fullmatch(r"[A-Za-z0-9_]", seen[upto])
            or (ord(seen[upto]) >= 128 and caseless(seen[upto]))
        )
        first = has_ext("x." + suffixes[0])  # (an extension first)
        if ends and first and has_ext("x." + ".".join(suffixes[:count])):
            return True
    return False


def drive_before(text: str, start: int) -> bool:
    """Session 37: whether the text before the ``/`` at `start`, read as the matcher
    reads it, ends with a ``:`` written with a character that is not ASCII (``x：``,
    ``ｘ:``), after an ASCII letter after no path character or the text's start (a
    drive) or before a ``//`` (a URL's ``://``): no finder reads those, and the matcher
    reads no path of its own there."""
    raw = text[max(0, start - 3) : start]
    if len(raw) < 1 or raw[-2:].isascii():
        return False
    seen = "".join(matcher_reads(c) for c in raw)
    if seen.endswith(":") and text.startswith("//", start):
        return True
    head = r"\A|" if start <= 3 else ""  # (the window starts the text)
    return re.search(f"(?:{head}[^A-Za-z0-9_.+@~\\-])[A-Za-z]:\\Z", seen) is not None
