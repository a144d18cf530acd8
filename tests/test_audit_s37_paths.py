"""Session 37 (paths2): the audit's path facts are real and kept where they are.

Shapes session 36 left: a relative path under a project's folder glued to caseless
prose (``项目/lib/util.py`` gave the false ``/lib/util.py``), a one-letter name before
a fullwidth colon (``x：/tmp/build.sh``, a drive to the matcher), a ``\\`` right
before an absolute path (``\\/usr/x.py``, ``//usr/x.py`` to the matcher) and ``//``
starts (``//a/app.py修改``, a UNC path to the matcher). Each is read alike by the
extraction, the matcher and the reference.
"""

from __future__ import annotations

import pytest
from helpers.fact_checks import facts_of

from ctxledger.compressor.facts import extract_facts, retention


def _path_fact(text: str):  # type: ignore[no-untyped-def]
    (fact,) = [f for f in extract_facts([{"role": "user", "content": text}]) if f.kind == "path"]
    return fact


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        # a name a project's tree starts with, or one letter, after caseless prose:
        # maybe a relative path's first folder (before: the absolute tail, false)
        ("项目/lib/util.py", []),
        ("项目/bin/run.sh", []),
        ("项目/src/app.py", []),
        ("项目/x/main.py", []),
        ("目录/a/b.txt", []),
        ("用户/c/x.py", []),
        # a system's top directory: an absolute path glued to prose, as before
        ("修改/etc/hosts", ["/etc/hosts"]),
        ("修改/usr/lib/x.so", ["/usr/lib/x.so"]),
        ("修改/home/用户/app.py文件", ["/home/用户/app.py"]),
        ("打开/tmp/x.log", ["/tmp/x.log"]),
        ("项目/data/x.csv", ["/data/x.csv"]),  # (a container's volume: left, see the note)
        # not after caseless prose: as before
        ("see /lib/util.py ok", ["/lib/util.py"]),
        ("see 项目 /lib/util.py ok", ["/lib/util.py"]),
        ("see /c/x.py ok", ["/c/x.py"]),
    ],
)
def test_a_project_folder_after_caseless_prose_gives_no_absolute_path(
    text: str, paths: list[str]
) -> None:
    assert facts_of(text, "path", "user") == paths


def test_the_matcher_reads_a_project_folder_after_caseless_prose_alike() -> None:
    """``/lib/util.py`` is not stated by ``项目/lib/util.py`` (maybe a relative path), by
    the plain check nor by the regex fallback; ``/etc/hosts`` still is by ``修改/etc/hosts``."""
    lib = _path_fact("see /lib/util.py now")
    for text in ("项目/lib/util.py", "see 目录/lib/util.py文件"):
        assert retention([lib], text) == ([], [lib]), text
        assert retention([lib], "x/lib/util.py " * 9 + text) == ([], [lib]), text
    assert retention([lib], "项目 /lib/util.py") == ([lib], [])
    drive = _path_fact("see /c/x.py now")
    assert retention([drive], "用户/c/x.py") == ([], [drive])
    etc = _path_fact("see /etc/hosts now")
    assert retention([etc], "x/etc/hosts " * 9 + "修改/etc/hosts") == ([etc], [])
