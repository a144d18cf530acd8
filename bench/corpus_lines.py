"""An independent line extractor for the real corpus, and the fact model's recall against it.

The issue measured the fact model (``ctxledger.compressor.facts.extract_facts``)
against an independent extractor on the real corpus: 21 % of edits, 21 % of shell
error lines, 27 % of script outcome/error lines, 69 % of "All tests passed!"-style
lines (100 % of exception lines, pytest counts and commands). This module is such an
extractor, written from the corpus's shapes and sharing no code with the fact model:

* **edits**, from bash tool calls: ``sed -i 's/OLD/NEW/' FILE`` (the key line is NEW),
  ``sed -i 'N,Mc\\ TEXT'`` / ``'/re/a\\ TEXT'`` (TEXT) and ``echo TEXT > FILE``; and
  written files, a heredoc ``cat > FILE << 'EOF'`` (a whole file has no one key line:
  any of its lines that is not blank, a comment or an import will do); known when one
  fact of the message names the file and one states the key line;
* **shell error lines**: ``prog: ...: No such file or directory``, ``terminated by
  signal``, ``command not found``, ``Permission denied``, ``cannot access`` ...;
* **script outcome/error lines**: in the output of a ``python`` script (not pytest),
  a line saying ``raised``, ``error``, ``failed``, ``success``, ``works``, ``expected``
  or ``correct`` that is not a traceback frame or a bare ``Name: message`` exception line;
* **all-passed lines**: ``All tests passed!``, ``All basic tests passed!``,
  ``Test passed: ...``, ``SUCCESS`` ...;
* **exception lines** (``ValueError: ...`` at a line start), **pytest counts**
  (``3 failed, 10 passed``) and **commands** (a bash call's first line), for reference.

A line is *known* when a fact extracted from its message contains it (case and
whitespace folded, decoration such as ``===`` stripped; a line longer than the fact
model's 160-character cap is compared on its first 120 characters).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ctxledger.compressor.facts import extract_facts

_SED_SUB = re.compile(
    r"""sed\s+-i(?:\.\w+)?\s+(['"])s(.)(.*?)\2(.*?)\2[gIp0-9]*\1\s+([^\s;&|>]+)"""
)
_SED_TEXT = re.compile(r"""sed\s+-i\s+(['"])[^'"]*?[aic]\\\s*(.*?)\1\s+([^\s;&|>]+)""", re.S)
_HEREDOC = re.compile(
    r"""cat\s*(?:>\s*([^\s<]+)\s*<<-?\s*['"]?(\w+)['"]?|<<-?\s*['"]?(\w+)['"]?\s*>\s*([^\s]+))[^\n]*\n(.*?)^\s*(?:\2|\3)\s*$""",
    re.S | re.M,
)
_ECHO = re.compile(r"""echo\s+(['"])(.+?)\1\s*>>?\s*([^\s;&|]+)""")
_SHELL_ERROR = re.compile(
    r"^(?:bash: |sh: |/bin/\w+: )?(?:line \d+: )?[\w./\-']+: .*(?:No such file or directory|"
    r"terminated by signal \d+|command not found|Permission denied|cannot access|"
    r"cannot open|Is a directory|Not a directory|invalid option|missing operand)\s*$",
    re.M,
)
_SCRIPT_WORD = re.compile(
    r"\b(?:raised|error|failed|fails|success(?:ful(?:ly)?)?|works?|expected|correct(?:ly)?)\b",
    re.I,
)
_FRAME = re.compile(r"^\s*(?:File \"|Traceback|\^|~)")
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit|Interrupt): .+$", re.M)
_ALL_PASSED = re.compile(
    r"^.*(?:\ball\b[\w\s]{0,30}\b(?:tests?|checks?|cases?)\s+(?:passed|pass|succeeded)|"
    r"\btests? passed\b|^\W*success\b(?![^\n]*[=(]\s*$)).*$",
    re.I | re.M,
)
_PYTEST = re.compile(r"\b\d+ (?:failed|passed)(?:, \d+ (?:failed|passed|skipped|errors?))*\b")
_PYTHON_RUN = re.compile(r"\bpython3?\s+(?!-m\s+pytest)(?:-c\b|[\w./-]+\.py)")
_SKIP_BODY = re.compile(r"^\s*(?:#|import |from \S+ import |\"\"\"|'''|$)")


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def _known(line: str, facts: list[str]) -> bool:
    want = _fold(line).strip("=-*#~ ")  # ``=== All tests passed! ===`` is its words
    if len(want) > 150:
        want = want[:120]
    return any(want in f for f in facts)


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    raw = call.get("function", {}).get("arguments")
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {}
    return args if isinstance(args, dict) else {}


def _edits(command: str) -> Iterator[tuple[str, str, list[str]]]:
    """(kind, file, key lines: any one of them will do) of every edit a shell command makes."""
    for m in _SED_SUB.finditer(command):
        yield "edits: sed/echo", m.group(5), [m.group(4).replace("\\.", ".").replace("\\", "")]
    for m in _SED_TEXT.finditer(command):
        first = re.split(r"\\n|\n", m.group(2))[0].rstrip("\\").strip()
        if first:
            yield "edits: sed/echo", m.group(3), [first]
    for m in _ECHO.finditer(command):
        yield "edits: sed/echo", m.group(3), [m.group(2)]
    for m in _HEREDOC.finditer(command):
        path = m.group(1) or m.group(4)
        body = [ln.strip() for ln in m.group(5).splitlines() if not _SKIP_BODY.match(ln)]
        if path and body:
            yield "edits: written files", path, body


def _script_lines(output: str) -> Iterator[str]:
    for line in output.splitlines():
        if len(line.strip()) < 8 or _FRAME.match(line) or _EXCEPTION.match(line.strip()):
            continue
        code_like = line.rstrip().endswith((":", "(", ",")) or " = " in line
        if _SCRIPT_WORD.search(line) and not code_like and not _ALL_PASSED.match(line):
            yield line.strip()


class Tally:
    def __init__(self) -> None:
        self.found: dict[str, int] = {}
        self.known: dict[str, int] = {}
        self.missed: dict[str, list[str]] = {}

    def add(self, category: str, item: str, known: bool) -> None:
        self.found[category] = self.found.get(category, 0) + 1
        self.known[category] = self.known.get(category, 0) + int(known)
        if not known:
            self.missed.setdefault(category, []).append(item[:160])


def _tool_output_lines(tally: Tally, content: str, facts: list[str], by_python: bool) -> None:
    for m in _SHELL_ERROR.finditer(content):
        tally.add("shell error lines", m.group(0), _known(m.group(0), facts))
    for m in _ALL_PASSED.finditer(content):
        line = m.group(0).strip()
        if len(line) >= 7 and " = " not in line:  # ``success = run()`` is code
            tally.add("all-passed lines", line, _known(line, facts))
    for m in _EXCEPTION.finditer(content):
        tally.add("exception lines", m.group(0), _known(m.group(0), facts))
    for m in _PYTEST.finditer(content):
        tally.add("pytest counts", m.group(0), _known(m.group(0), facts))
    if by_python:
        for line in _script_lines(content):
            tally.add("script outcome/error lines", line, _known(line, facts))


def _commands(message: dict[str, Any]) -> list[str]:
    return [
        str(_arguments(c).get("command") or "")
        for c in message.get("tool_calls") or []
        if isinstance(_arguments(c).get("command"), str)
    ]


def measure_file(tally: Tally, path: Path) -> None:
    messages = json.loads(path.read_text())["messages"]
    calls: dict[str, str] = {}
    for message in messages:
        facts = [_fold(f.value) for f in extract_facts([message])]
        for call in message.get("tool_calls") or []:
            calls[str(call.get("id"))] = str(_arguments(call).get("command") or "")
        for command in _commands(message):
            first = command.strip().splitlines()[0] if command.strip() else ""
            if first:
                tally.add("commands", first, _known(first, facts))
            for kind, file, lines in _edits(command):
                named = any(Path(file).name.casefold() in f for f in facts)
                stated = any(_known(line, facts) for line in lines)
                tally.add(kind, f"{file}: {lines[0]}", named and stated)
        if message.get("role") == "tool" and isinstance(message.get("content"), str):
            command = calls.get(str(message.get("tool_call_id")), "")
            _tool_output_lines(tally, message["content"], facts, bool(_PYTHON_RUN.search(command)))


def recall_report(files: list[Path], examples: int = 3) -> dict[str, Any]:
    tally = Tally()
    for path in files:
        measure_file(tally, path)
    return {
        "bench": "fact_model_recall",
        "transcripts": len(files),
        "categories": {
            name: {
                "lines": n,
                "known": tally.known[name],
                "recall_pct": round(100 * tally.known[name] / n, 1) if n else 100.0,
                "missed_examples": tally.missed.get(name, [])[:examples],
            }
            for name, n in sorted(tally.found.items())
        },
    }
