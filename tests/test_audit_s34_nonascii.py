"""Session 34 (nonascii): a path holding a non-ASCII letter is no cut name.

The extraction reads paths of ASCII characters. Before, ``/home/José/app.py`` gave
``/home/Jos`` and ``/app.py``: two false facts. Now a path or name with a cased letter
(Latin, Greek, Cyrillic, …) or a mark of any script right beside it gives no fact (a
loss, not a lie), and the matcher judges a path fact glued to such a letter not kept.
A caseless letter (CJK, kana, Hangul, Thai: scripts written without spaces) glued on
is prose: the path ends there (``修改src/app.py文件``), as session 34's audit decided.
"""

from __future__ import annotations

import unicodedata

import pytest
from helpers.fact_checks import facts_of
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxledger.compressor.facts import extract_facts, retention

NAMES = ["José", "Müller", "François", "Łukasz", "Ørsted", "Иван", "Νίκος", "Zoë"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("form", ["NFC", "NFD"])
def test_a_folder_with_a_cased_non_ascii_letter_gives_no_cut_path(name: str, form: str) -> None:
    text = unicodedata.normalize(form, f"Edit /home/{name}/app.py and src/{name}.py now.")
    # (session 34: none, no cut name; session 35 reads the name whole)
    whole = [unicodedata.normalize(form, p) for p in (f"/home/{name}/app.py", f"src/{name}.py")]
    assert facts_of(text, "path", "user") == whole  # (before s34: /home/Jos, /app.py, …)


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        # a cased letter inside: session 34 no cut name, session 35 the name whole
        ("修改/home/José/app.py文件", ["/home/José/app.py"]),
        ("修改/home/jose/app.py文件", ["/home/jose/app.py"]),  # CJK glued on: prose
        ("open ésrc/app.pyé now", []),  # (moved from test_audit_s34: a cut name)
        ("открыть дsrc/app.py", ["дsrc/app.py"]),  # (s35: the name whole, not ``src``)
        ("open éapp.py now", ["éapp.py"]),  # a bare name reads any letter (unchanged)
        ("see /home/jose/app.py now", ["/home/jose/app.py"]),
    ],
)
def test_glued_letters(text: str, paths: list[str]) -> None:
    assert facts_of(text, "path", "user") == paths


def _path_fact(path: str):  # type: ignore[no-untyped-def]
    facts = extract_facts([{"role": "user", "content": f"see {path} now"}])
    return next(fact for fact in facts if fact.kind == "path" and fact.value == path)


@pytest.mark.parametrize(
    ("path", "summary", "kept"),
    [
        ("/home/jose/app.py", "edited /home/jose/app.py文件", True),
        ("/home/jose/app.py", "edited /home/jose/app.pyé", False),
        ("/home/jose/app.py", "edited /home/jose/app.pyд", False),
        ("/app.py", "edited /home/José/app.py", False),  # (before: kept)
        ("/app.py", "edited /home/Jose\u0301/app.py", False),
        ("src/app.py", "edited ésrc/app.py", False),
        ("build/", "see build/é", False),
    ],
)
def test_the_matcher_agrees(path: str, summary: str, kept: bool) -> None:
    fact = _path_fact(path)
    assert retention([fact], summary) == (([fact], []) if kept else ([], [fact]))


def _no_backslash(char: str) -> bool:
    return "\\" not in unicodedata.normalize("NFKC", char)  # (``﹨``: a Windows path, left)


_PATHS = ["/home/jose/app.py", "src/app.py", "/app.py"]


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(_PATHS),
    st.characters(min_codepoint=0x80, max_codepoint=0x30000).filter(_no_backslash),
    st.sampled_from(["before", "after"]),
)
@example("/app.py", "é", "before")
@example("src/app.py", "\u0301", "after")
@example("/home/jose/app.py", "文", "after")
@example("/home/jose/app.py", "ʰ", "before")  # (folded: an ``h``)
@example("src/app.py", "ᵝ", "after")  # (folded: a ``β``)
@example("src/app.py", "¹", "after")  # (a footnote: read and kept)
def test_a_glued_character_is_read_alike(path: str, char: str, side: str) -> None:
    """The matcher keeps a path fact in a text glued to `char` exactly when the
    extraction reads that path there (the review's sweep, on a sample)."""
    text = f"see {char}{path} now" if side == "before" else f"see {path}{char} now"
    read = path in facts_of(text, "path", "user")
    fact = _path_fact(path)
    assert retention([fact], text) == (([fact], []) if read else ([], [fact]))


#: review 1: prose whose last word ends with a mark (Thai, Devanagari, Myanmar), a
#: spacing accent NFKC folds to a space and a mark, a letter it splits into one and a mark
_PROSE_MARKS = [
    ("แก้ไฟล์src/app.pyแล้ว", "src/app.py"),
    ("เปิดที่src/app.py", "src/app.py"),
    ("ดูไฟล์/home/a/app.pyครับ", "/home/a/app.py"),
    ("फ़ाइलकोsrc/app.py", "src/app.py"),
    ("ဖိုင်src/app.py", "src/app.py"),
    ("see ´src/app.py now", "src/app.py"),
    ("ファイル゛src/app.py", "src/app.py"),
    ("क़src/app.py", "src/app.py"),
]


@pytest.mark.parametrize(("text", "path"), _PROSE_MARKS)
def test_a_mark_of_prose_before_a_path_keeps_it(text: str, path: str) -> None:
    assert facts_of(text, "path", "user") == [path]
    fact = _path_fact(path)
    assert retention([fact], text) == ([fact], [])
    # the regex fallback (after PLAIN_TRIES rejected occurrences) agrees
    many = f"{'é' + path} " * 9 + text
    assert retention([fact], many) == ([fact], [])


@pytest.mark.parametrize(
    ("text", "path"), [("Jose\u0301/app.py", "/app.py"), ("e\u0301\u0301src/app.py", "src/app.py")]
)
def test_a_mark_on_a_name_before_a_path_still_cuts_it(text: str, path: str) -> None:
    assert facts_of(text, "path", "user") == []
    fact = _path_fact(path)
    assert retention([fact], text * 9) == ([], [fact])


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("C:\\temp\\app.py", "see ดูC:\\temp\\app.py now"),
        ("\\\\srv\\share\\app.py", "see ดู\\\\srv\\share\\app.py now"),
        ("\\\\srv\\share\\app.py", "see ด\\\\srv\\share\\app.py now"),
    ],
)
def test_a_windows_path_after_prose_of_a_caseless_script_is_not_kept(path: str, text: str) -> None:
    """The extraction's Windows finders cut a name at any letter, under a mark too
    (review 2 of s34-nonascii: the matcher judged the base letter by case alone and
    claimed these kept while the extraction reads only ``app.py`` there)."""
    assert path not in facts_of(text, "path", "user")
    fact = _path_fact(path)
    assert retention([fact], text) == ([], [fact])
    many = f"é{path} " * 9 + text  # the regex fallback (after PLAIN_TRIES) agrees
    assert retention([fact], many) == ([], [fact])


@pytest.mark.parametrize("marks", [31, 32, 33, 40])
@pytest.mark.parametrize("before", ["\u0e14", "a", " "])
def test_the_reference_reads_a_long_run_of_marks_alike(before: str, marks: int) -> None:
    """Production looks back over at most 32 marks and judges a longer run as a mark (a
    cut); the reference states the same (review 2: it read the path after 33)."""
    from helpers.reference_facts.facts import extract_facts as reference_extract

    text = f"see {before}{chr(0x301) * marks}src/app.py now"
    message = {"role": "user", "content": text}
    ours = sorted(f.normalized for f in extract_facts([message]) if f.kind == "path")
    theirs = sorted(f.normalized for f in reference_extract([message]) if f.kind == "path")
    assert ours == theirs
