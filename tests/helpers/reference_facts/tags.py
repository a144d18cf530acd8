"""Tags alone on a line, stated plainly (reference, session 33): an agent's wrapper ends
with a closing tag alone (``</output>``); a script prints HTML (``<table>``)."""

from __future__ import annotations

__all__ = ["closing_tag", "opening_tag", "tag_alone"]


def closing_tag(line: str) -> str:
    """Session 33: the name of `line` if it is a closing tag alone (``</output>``, an
    agent's wrapper): ``</``, a letter, name characters, ``>``, then blanks; else ``""``."""
    body = line.rstrip(" \t\r")
    name = body[2:-1]
    return _tag_name(name) if body.startswith("</") and body.endswith(">") else ""


def opening_tag(line: str) -> str:
    """Session 33 (second review): the name of the tag `line` opens after blanks
    (``<table>``, ``<div class="x">``: ``<``, a letter, name characters, a blank or
    ``>``), else ``""``."""
    body = line.lstrip(" \t")
    end = 1
    while end < len(body) and (body[end].isalnum() or body[end] in "_.:-"):
        end += 1
    ended = body[end : end + 1] in (" ", "\t", ">")
    return _tag_name(body[1:end]) if body.startswith("<") and ended else ""


def tag_alone(line: str) -> bool:
    """Session 34: whether `line` is one tag and blanks (``<table>``, ``</div>``,
    ``<div class="a">``, ``<br/>``): ``<``, maybe ``/``, a tag's name, then nothing or a
    blank and no ``<`` or ``>``, maybe ``/``, then ``>``."""
    body = line.rstrip(" \t\r")
    if not body.startswith("<") or not body.endswith(">"):
        return False
    inner = body[1:-1]
    inner = inner[1:] if inner.startswith("/") else inner
    inner = inner[:-1] if inner.endswith("/") else inner
    end = 0
    while end < len(inner) and (inner[end].isalnum() or inner[end] in "_.:-"):
        end += 1
    rest = inner[end:]
    plain = rest == "" or (rest[0] in " \t" and "<" not in rest and ">" not in rest)
    return _tag_name(inner[:end]) != "" and plain


def _tag_name(name: str) -> str:
    """`name` if it is a tag's name (a letter, then name characters), else ``""``."""
    letter = name[:1].isascii() and name[:1].isalpha()
    return name if letter and all(c.isalnum() or c in "_.:-" for c in name) else ""
