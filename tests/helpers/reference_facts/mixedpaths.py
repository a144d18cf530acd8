"""Session 38: a path a JSON string escaped that mixes doubled backslashes and slashes
(``D:\\\\a/b.txt``), its own rule (a name alone is judged by the module's
``plausible_path``, which :mod:`.rules` passes in: this module imports none of it): the matcher reads a path's separators all single
or all doubled, so it finds no such path, but it finds the file's name after the last
separator (review 1)."""

from __future__ import annotations

import re
from collections.abc import Callable


def mixed_file_name(raw: str, judge: Callable[[str], str | None]) -> str | None:
    """Session 38, review 1: the last name of a JSON-mixed path, which the matcher finds
    after its separator: a name that is a path alone (a known extension, a known file),
    or after a drive, ``.\\``, ``..\\``, ``~\\`` or two backslashes a name with an
    extension (``C:\\\\Users\\\\me/report.docx``). `judge`: the module's ``plausible_path``."""
    value = raw.rstrip(".-,:")
    name = re.split(r"[\\/]", value)[-1]
    if name and judge(name) == name:
        return name
    anchored = re.match(r"[A-Za-z]:|\.\.?\\|~\\|\\\\", value) is not None
    with_extension = re.fullmatch(r"\w[\w.+@~-]*\.[A-Za-z][A-Za-z0-9]{0,7}", name)
    return name if anchored and with_extension else None


def mixed_escaped(raw: str) -> bool:
    """Session 38: a path a JSON string escaped (a doubled backslash) that also holds a
    ``/`` (``D:\\\\a/b.txt``): the matcher reads a path's separators all single or all
    doubled, so no path; leading ``.\\\\`` pieces aside (the normalized fact drops them)."""
    rest = raw.rstrip(".-,:").rstrip("/\\")  # (separators last: the fact drops them)
    while rest.startswith(".\\\\"):
        rest = rest[3:]
    runs = re.findall(r"\\+", rest)  # (each doubled: a JSON string's; as ``plausible_path``)
    return "/" in rest and bool(runs) and all(len(run) == 2 for run in runs)


def quote_escape(text: str, end: int) -> int:
    """Session 39, review 1 (F1): where a Windows path ending at `end` ends, read before
    ``\\"``, a JSON string's escaped closing quote: a run of backslashes of odd length
    before a ``"`` ends with the quote's escape, no separator of the path; but after a
    ``.`` or ``-`` it is read as one (``x.py.\\"`` is the longer name ``x.py./``)."""
    run = re.search(r"([.-]?)(\\*)\Z", text[:end])
    odd = run is not None and len(run.group(2)) % 2 == 1 and not run.group(1)
    return end - 1 if odd and text[end : end + 1] == '"' else end
