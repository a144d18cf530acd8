"""The README's examples as data: its fenced code blocks and the ``ctxledger …`` commands
it names (in inline code and in code blocks), for the tests that keep them working."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
_INLINE = re.compile(r"`(ctxledger [^`]+)`")
_IN_LINE = re.compile(r"\bctxledger((?: +-[-\w]+(?: +\S+)?)* +[a-z][\w-]*\b.*)")


@dataclass(frozen=True)
class Block:
    lang: str
    body: str
    line: int  # 1-based line of the opening fence

    @property
    def first_line(self) -> str:
        return self.body.splitlines()[0] if self.body else ""


def text() -> str:
    return README.read_text(encoding="utf-8")


def blocks(lang: str | None = None) -> list[Block]:
    """Every fenced block in order (of one language when `lang` is given)."""
    src = text()
    found = [
        Block(m.group(1), m.group(2), src.count("\n", 0, m.start()) + 1)
        for m in _FENCE.finditer(src)
    ]
    return [b for b in found if lang is None or b.lang == lang]


def block(first_line: str) -> Block:
    """The one block whose first line starts with `first_line`."""
    hits = [b for b in blocks() if b.first_line.startswith(first_line)]
    assert len(hits) == 1, f"README: {len(hits)} blocks start with {first_line!r}"
    return hits[0]


def commands() -> list[str]:
    """Every ``ctxledger …`` command the README names: inline code, and the lines of
    shell and console blocks (after a ``$`` prompt or a ``# or:`` comment)."""
    src = text()
    found = [m.group(1) for m in _INLINE.finditer(src)]
    for b in blocks():
        if b.lang not in ("sh", "console", "text"):
            continue
        for line in b.body.splitlines():
            if line.lstrip().startswith("pip "):
                continue
            found += ["ctxledger" + m.group(1) for m in _IN_LINE.finditer(line)]
    return found


def bare_inline(command_names: set[str]) -> list[str]:
    """Inline code that starts with a subcommand's name and names an option
    (``compress --estimator rough``, ``import --max-bytes N``)."""
    spans = re.findall(r"`([a-z][\w-]* [^`]*--[^`]*)`", text())
    return [s for s in spans if s.split()[0] in command_names]
