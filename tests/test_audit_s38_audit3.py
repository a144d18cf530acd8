"""Session 38 (audit3): path facts of the shapes session 37 left.

A folder's noun glued to an absolute path names that path (``主目录/home/me``: kept as
session 36 reads it, review 1; ``项目/data/x.csv`` still gives the known false
``/data/x.csv``, test_audit_s37_paths), a JSON string's path mixing doubled backslashes and slashes
(``D:\\\\a/b.txt`` gave ``D:\\a/b.txt``, lost in its own text), a UNC path after a
fullwidth colon or slash (``：\\\\srv\\share\\hosts``, lost in its own text) and a
fullwidth "drive" after an escaped newline (``"a\\nx：/tmp/hosts"``: the matcher finds
``/tmp/hosts``, the extraction read none). Each is read alike by the extraction, the
matcher and the reference (:func:`helpers.fact_checks.facts_of` checks both).
"""

from __future__ import annotations

import unicodedata

import pytest
from helpers.fact_checks import facts_of
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxledger.compressor.facts import extract_facts, retention

#: ``폴더`` decomposed (NFD, as macOS writes file names): conjoining jamo
_NFD_FOLDER = unicodedata.normalize("NFD", "폴더")


def _path_fact(text: str):  # type: ignore[no-untyped-def]
    (fact,) = [f for f in extract_facts([{"role": "user", "content": text}]) if f.kind == "path"]
    return fact


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        # a folder's noun glued to an absolute path names that path (review 1: "home
        # directory /home/me"): the absolute reading of session 36 stays, in any form
        ("主目录/home/me/.bashrc", ["/home/me/.bashrc"]),
        ("工作目录/tmp/build/out.log", ["/tmp/build/out.log"]),
        ("安装目录/usr/local/bin/tool", ["/usr/local/bin/tool"]),
        ("根目录/etc/hosts", ["/etc/hosts"]),
        ("日志目录/var/log/nginx/error.log", ["/var/log/nginx/error.log"]),
        ("ホームディレクトリ/home/me/.bashrc", ["/home/me/.bashrc"]),
        ("作業ディレクトリ/tmp/build/out.log", ["/tmp/build/out.log"]),
        ("홈 디렉토리/home/me/.bashrc", ["/home/me/.bashrc"]),
        ("설치 폴더/opt/app/bin/run", ["/opt/app/bin/run"]),
        (unicodedata.normalize("NFD", "폴더/home/x.py"), ["/home/x.py"]),
        (unicodedata.normalize("NFD", "ディレクトリ/tmp/a.py"), ["/tmp/a.py"]),
        ("ﾌﾟﾛｼﾞｪｸﾄ/tmp/a.py", ["/tmp/a.py"]),
    ],
)
def test_a_folder_noun_before_an_absolute_path_names_it(text: str, paths: list[str]) -> None:
    """Each fact is also found by the matcher in its own text (:func:`facts_of`)."""
    assert facts_of(text, "path", "user") == paths


def test_the_matcher_keeps_a_path_after_a_folder_noun() -> None:
    """A summary saying ``主目录/home/me/.bashrc`` keeps ``/home/me/.bashrc``, by the plain
    check, by the regex fallback and by its stricter pattern (past a thousand rejects)."""
    bashrc = _path_fact("check /home/me/.bashrc please")
    for text in ("主目录/home/me/.bashrc", "x/home/me/.bashrc " * 9 + "主目录/home/me/.bashrc"):
        assert retention([bashrc], text) == ([bashrc], []), text
    assert retention([bashrc], "用/home/me/.bashrc1 " * 1100 + "目录/home/me/.bashrc") == (
        [bashrc],
        [],
    )


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        # a JSON string's path mixing doubled backslashes and slashes: its file's name,
        # which the matcher finds (before: the path with single backslashes, which it
        # never finds there; review 1: then none at all)
        ("see D:\\\\a/b.txt ok", ["b.txt"]),
        ('see "D:\\\\a/b/c.txt" ok', ["c.txt"]),
        ("see D:/a\\\\b.txt ok", ["b.txt"]),
        ("see ..\\\\a/b.txt ok", ["b.txt"]),
        ("see ~\\\\a/b.txt ok", ["b.txt"]),
        ("see .\\\\a\\\\b/c.txt ok", ["c.txt"]),
        ("see src\\\\a/config.json ok", ["config.json"]),  # (not the tail ``a/config.json``)
        ('{"p": "C:\\\\Users\\\\me/Documents/report.docx"}', ["report.docx"]),
        ('{"p": "D:\\\\proj\\\\src/app/Makefile"}', ["Makefile"]),
        ('{"cmd": "type \\\\\\\\srv\\\\share\\\\a/b.txt"}', ["b.txt"]),  # (an escaped UNC path)
        ("see \\\\\\\\srv\\\\share\\\\x/ ok", ["\\\\srv\\share\\x/"]),  # (a last ``/``: read)
        ("see src\\\\a/report.docx ok", []),  # (relative: a known extension only)
        ("see D:\\\\a/Documents ok", []),  # (a folder's name)
        ("see pvlib/irradiance.py.backup ok", []),  # (no JSON-mixed path: as before)
        ('"\\n\\nC~\\\\a/x.py- now', ["x.py"]),
        # every separator doubled, or single, or a leading ``.\\`` the fact drops: as before
        ("see D:\\\\a\\\\b.txt ok", ["D:\\a\\b.txt"]),
        ("see src\\\\a\\\\b.txt ok", ["src\\a\\b.txt"]),
        ("see C:\\Users\\me/a.txt ok", ["C:\\Users\\me/a.txt"]),
        ("see .\\\\a/b.txt ok", [".\\a/b.txt"]),
        ("see D:\\\\a\\\\x.py/ ok", ["D:\\a\\x.py/"]),  # (the fact drops a last ``/``)
        ("see .\\\\a/config.json\\\\ ok", [".\\a/config.json\\"]),
        # a UNC path after a character the matcher reads as ``:`` or ``/``: none
        ("see ：\\\\srv\\share\\hosts", []),
        ("see x：\\\\srv\\share\\hosts", []),
        ("见﹕\\\\srv\\share\\a.txt", ["a.txt"]),  # (a bare name, as after ``／``)
        ("see ︓\\\\srv\\share\\a.txt", ["a.txt"]),
        ("see ／\\\\srv\\share\\a.txt", ["a.txt"]),
        ("see ＼\\\\srv\\share\\a.txt", ["a.txt"]),
        ("see ：\\\\\\\\srv\\\\share\\\\a.txt", ["a.txt"]),
        # after anything else: as before
        ("see \\\\srv\\share\\hosts", ["\\\\srv\\share\\hosts"]),
        ("see ％\\\\srv\\share\\a.txt", ["\\\\srv\\share\\a.txt"]),
        ("见 \\\\srv\\share\\a.txt", ["\\\\srv\\share\\a.txt"]),
        # a one-letter word and a fullwidth colon after an escaped newline: the matcher
        # reads ``nx:``, no drive, and finds the path; so does the extraction now
        ('{"path": "a\\nx：/tmp/hosts\\n"}', ["/tmp/hosts"]),
        ('"a\\r\\nC：/etc/hosts\\n"', []),  # (review 1: a capital is a drive's: none)
        ('"a\\r\\nc：/etc/hosts\\n"', ["/etc/hosts"]),
        ('"a\\n\\tx：/src/main.py:"', ["/src/main.py"]),
        ('"a\\\\nx：/tmp/hosts\\n"', ["/tmp/hosts"]),  # (no escape: as before)
        ("see x：/tmp/hosts now", []),  # (a drive to the matcher: as before)
        ('"a\\n x：/tmp/hosts\\n"', []),
        # the word ends in dots before an escape: the matcher reads it longer as written
        # (``x.py./n``) and with the drive blanked, so finds no path: none, as before
        ('"\\nx：/tmp/x.py.\\n now', []),
        ('"a \\nx：/tmp/x.py.\\n now', []),
        ('"a \\nx：/tmp/x.py\\n now', ["/tmp/x.py"]),
        ('"\\nC：../a.py.\\n now', ["../a.py"]),  # (no ``/`` after the colon: as before)
        ('"a\\nx：//srv/a.txt\\n"', []),  # (a URL's ``://`` to the matcher: as before)
    ],
)
def test_separators_read_as_the_matcher_reads_them(text: str, paths: list[str]) -> None:
    assert facts_of(text, "path", "user") == paths


def test_the_matcher_never_found_the_mixed_and_colon_shapes() -> None:
    """Why they are none: the path each gave before is not stated by its own text."""
    mixed = _path_fact("see D:\\a/b.txt now")
    assert retention([mixed], "see D:\\\\a/b.txt ok") == ([], [mixed])
    name = _path_fact("see b.txt now")  # (what the extraction gives now: found there)
    assert retention([name], "see D:\\\\a/b.txt ok") == ([name], [])
    unc = _path_fact("see \\\\srv\\share\\hosts now")
    assert retention([unc], "see ：\\\\srv\\share\\hosts") == ([], [unc])
    hosts = _path_fact("see /tmp/hosts now")
    assert retention([hosts], '{"path": "a\\nx：/tmp/hosts\\n"}') == ([hosts], [])


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(
        ["", " ", "\\n", "\\r\\n", "\\t", "a", "项目", "修改", "ﾌﾟﾛｼﾞｪｸﾄ", "폴더", _NFD_FOLDER]
    ),
    st.sampled_from(["", "x", "C", "ab", "：", "／", "﹕", "x：", "︓"]),
    st.sampled_from(
        ["/data/", "/tmp/", "\\\\srv\\share\\", "D:\\\\a/", "D:\\\\a\\\\", "..\\\\a/", "/lib/"]
    ),
    st.sampled_from(["x.csv", "b.txt", "hosts", "a/b.txt"]),
    st.sampled_from(["", "\\n", " now", '"', "。", ".\\n", "-.\\n"]),
)
@example("项目", "", "/data/", "x.csv", "")
@example(" ", "：", "\\\\srv\\share\\", "hosts", "")
@example(" ", "", "D:\\\\a/", "b.txt", "")
@example("\\n", "x：", "/tmp/", "hosts", "\\n")
def test_the_session_shapes_agree_with_the_reference_and_the_matcher(
    before: str, glue: str, root: str, name: str, after: str
) -> None:
    """Extraction and reference agree, and each fact is kept in its own text (a JSON
    string's line or prose around it)."""
    facts_of(f'{{"path": "{before}{glue}{root}{name}{after}"}}', "path", "user")
    facts_of(f"see {before}{glue}{root}{name}{after}", "path", "user")
