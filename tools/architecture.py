"""Keep docs/ARCHITECTURE.md's module table in step with the module docstrings.

The table between the ``modules:start`` / ``modules:end`` markers is generated from
the first paragraph of each module's docstring, so it cannot drift from the code:

    python tools/architecture.py           # exit 1 (and say why) when the table is stale
    python tools/architecture.py --write   # regenerate it
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "ARCHITECTURE.md"
START, END = "<!-- modules:start -->", "<!-- modules:end -->"


def summary(path: Path) -> str:
    """The first paragraph of a module's docstring, on one line."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = doc.strip().split("\n\n")[0]
    return " ".join(first.split()).replace("|", "\\|")


def table() -> str:
    rows = ["| module | owns |", "| --- | --- |"]
    for path in sorted((ROOT / "ctxledger").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        text = summary(path)
        if not text:
            raise SystemExit(f"{rel} has no module docstring: say what the module owns")
        rows.append(f"| `{rel}` | {text} |")
    return "\n".join(rows)


def render(doc: str) -> str:
    head, rest = doc.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    doc = DOC.read_text(encoding="utf-8")
    fresh = render(doc)
    if "--write" in argv:
        DOC.write_text(fresh, encoding="utf-8")
        return 0
    if fresh != doc:
        print(
            "docs/ARCHITECTURE.md's module table is stale: run `python tools/architecture.py --write`",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
