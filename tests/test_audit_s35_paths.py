"""Session 35 (paths): a slash path whose names hold letters of a cased script is read whole.

Session 34 gave no fact for ``/home/José/app.py`` (never a cut name), so the audit could
not say it was lost. Now a slash path's names hold non-ASCII cased letters (Latin,
Greek, Cyrillic, …) and marks (NFD), as the matcher reads them: the extraction, the
matcher (kept in a verbatim copy, lost when absent) and the reference agree. A name
cut at a character neither reads whole (``ʰ``, folded an ``h``) is still no fact.
"""

from __future__ import annotations

import re
import unicodedata

import pytest
from helpers.fact_checks import facts_of
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxledger.compressor import factletters, factpathrules, factpaths, lettertables
from ctxledger.compressor.facts import extract_facts, retention

NAMES = ["José", "Müller", "Łukasz", "Иван", "Νίκος", "Ærø", "İstanbul", "Straße"]
TEMPLATES = [
    ("Edit /home/{}/app.py now", "/home/{}/app.py"),
    ("see src/{}/x.py, then", "src/{}/x.py"),
    ("open ~/{}/notes.md.", "~/{}/notes.md"),
    ("cd /data/{}/ and run", "/data/{}/"),
    ("修改/home/{}/app.py文件", "/home/{}/app.py"),  # CJK prose glued on both sides
]


def _path_facts(text: str):  # type: ignore[no-untyped-def]
    facts = extract_facts([{"role": "user", "content": text}])
    return [fact for fact in facts if fact.kind == "path"]


def _read_whole(name: str, form: str, template: str, path: str):  # type: ignore[no-untyped-def]
    """`template` with `name` in `form`: its one path fact is the whole `path`, which a
    verbatim copy keeps; (that path, the fact, the path with its non-ASCII dropped)."""
    text = unicodedata.normalize(form, template.format(name))
    whole = unicodedata.normalize(form, path.format(name))
    assert facts_of(text, "path", "user") == [whole]
    (fact,) = _path_facts(text)
    assert retention([fact], f"summary: {whole} done") == ([fact], [])
    plain = "".join(c for c in unicodedata.normalize("NFD", whole) if c.isascii())
    return whole, fact, plain


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("form", ["NFC", "NFD"])
@pytest.mark.parametrize(("template", "path"), TEMPLATES)
def test_a_cased_name_is_read_whole_and_kept(
    name: str, form: str, template: str, path: str
) -> None:
    whole, fact, plain = _read_whole(name, form, template, path)
    # a verbatim copy keeps it, in either form, glued to CJK prose too
    for copy in (unicodedata.normalize("NFC", whole), f"已修改{whole}。"):
        assert retention([fact], f"summary: {copy} done") == ([fact], [])
    # without the letter, or only its tail, it is lost
    tail = whole[whole.index("/", 1) :] if whole.count("/") > 1 else "x.py"
    cut = f"{whole}ʰ" if not whole.endswith("/") else plain  # (a directory is in ``dir/x``)
    for other in (plain, tail, f"a{whole}", cut):
        assert retention([fact], f"summary: {other} done") == ([], [fact]), other


def test_the_regex_fallback_agrees() -> None:
    """After PLAIN_TRIES rejected occurrences the matcher's regex decides: the same."""
    (fact,) = _path_facts("Edit /home/José/app.py now")
    rejected = "x/home/josé/app.py /home/josé/app.pyd " * 9
    assert retention([fact], rejected) == ([], [fact])
    assert retention([fact], rejected + "修改/home/josé/app.py文件") == ([fact], [])
    assert retention([fact], rejected + "/home/josé/app.pyʰ") == ([], [fact])


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        # a modifier letter, folded an ``h``: a folder name holds it (review 1: a folder
        # name is read as the matcher reads it); the last name is cut there
        ("see /home/joʰn/app.py ok", ["/home/joʰn/app.py"]),
        ("see /home/joʰn ok", []),
        ("see /home/jose/app.pyŉ ok", ["/home/jose/app.py"]),  # ``ʼn`` to the matcher
        ("แก้ไฟล์src/app.pyแล้ว", ["src/app.py"]),  # Thai prose's last mark: prose
        ("see Jose\u0301/app.py ok", ["Jose\u0301/app.py"]),  # NFD: the name whole
        (f"see x{chr(0x301) * 40}src/app.py ok", []),  # a long run of marks: a cut
        ("see ésrc/app.py ok", ["ésrc/app.py"]),  # one name (s34: none)
    ],
)
def test_edges(text: str, paths: list[str]) -> None:
    assert facts_of(text, "path", "user") == paths


_LETTERS = st.sampled_from(
    "aeiouxyz019_-." + "éèüößçøłžáñ" + "ÉÜÖÇØŁŽ" + "αβγδεζνίος" + "ДЖИВАНиванжд" + "ǅİſﬁ"
)
_MARKS = st.sampled_from(["\u0301", "\u0308", "\u0327", "\u0e4c"])
_NAME = st.lists(st.one_of(_LETTERS, _LETTERS, _LETTERS, _MARKS), min_size=1, max_size=8).map(
    "".join
)
_GLUE = st.sampled_from(
    [" ", "", "修改", "文件", "é", "д", "ʰ", "ไฟล์", "ŉ", "\u0301", "."]
)  # (no "/": see s35-paths.md)


@settings(max_examples=250, deadline=None)
@given(st.lists(_NAME, min_size=1, max_size=3), _GLUE, _GLUE, st.sampled_from(["/", "", "~/"]))
@example(["José"], " ", " ", "/")
@example(["Jose\u0301"], "修改", "文件", "/")
def test_extraction_matcher_and_reference_agree(
    names: list[str], before: str, after: str, root: str
) -> None:
    """Whatever the names and what is glued on: the extraction equals the reference,
    each path fact is kept in its own text (both checked by :func:`facts_of`), and none
    is a cut name: no cased letter right beside it."""
    path = root + "/".join(names) + "/app.py"
    _no_cut_name(f"see {before}{path}{after} now")


def _no_cut_name(text: str) -> None:
    """Each path fact of `text` (checked by :func:`facts_of`) has no cased letter right
    beside it, as the matcher reads them, folded (``ŉ`` is ``ʼn``, a modifier letter)."""
    for value in facts_of(text, "path", "user"):
        at = text.index(value)
        after = text[at + len(value) : at + len(value) + 1]
        beside = [_folded(text[at - 1])[-1:], _folded(after)[:1]]
        assert not any(unicodedata.category(c) in ("Lu", "Ll", "Lt") for c in beside if c), value


def _folded(char: str) -> str:
    return unicodedata.normalize("NFKC", char).casefold()


# stage 2: Windows and UNC paths with such names


WINDOWS = [
    ("dir C:\\Users\\{}\\app.py now", "C:\\Users\\{}\\app.py"),
    ("see src\\{}\\x.py, then", "src\\{}\\x.py"),
    ("copy \\\\srv\\share\\{}\\a.txt done", "\\\\srv\\share\\{}\\a.txt"),
    ("open D:/{}/notes.md.", "D:/{}/notes.md"),
    ('"C:\\\\Users\\\\{}\\\\app.py"', "C:\\Users\\{}\\app.py"),  # (a JSON string's escapes)
]


@pytest.mark.parametrize("name", ["José", "Élodie", "Иван", "Straße"])
@pytest.mark.parametrize("form", ["NFC", "NFD"])
@pytest.mark.parametrize(("template", "path"), WINDOWS)
def test_a_windows_name_is_read_whole_and_kept(
    name: str, form: str, template: str, path: str
) -> None:
    whole, fact, plain = _read_whole(name, form, template, path)
    for other in (plain, f"{whole}ʰ", f"修改{whole}"):  # (a Windows path: any letter cuts it)
        assert retention([fact], f"summary: {other} done") == ([], [fact]), other


_WINDOWS_ROOTS = st.sampled_from(["C:\\", "\\\\srv\\share\\", "", ".\\", "D:/"])


@settings(max_examples=200, deadline=None)
@given(st.lists(_NAME, min_size=1, max_size=3), _GLUE, _GLUE, _WINDOWS_ROOTS)
@example(["José"], " ", " ", "C:\\")
@example(["é"], "", "", "\\\\srv\\share\\")
@example(["\u0301."], " ", " ", "\\\\srv\\share\\")  # (session 43: ``.\\app.py``)
@example(["\u0301.."], " ", " ", "")
@example(["x"], "\u0301", "", ".\\")
def test_windows_forms_agree(names: list[str], before: str, after: str, root: str) -> None:
    """The same property for Windows and UNC forms (a letter of any script beside one is
    a cut: Windows paths keep session 33's rule). Session 43: a mark before one is judged
    by the character it sits on, in production and the reference alike (a mark after a
    blank or a backslash glues nothing on: ``\\\\srv\\share\\`` + U+0301 +
    ``.\\app.py`` names ``.\\app.py``)."""
    _no_cut_name(f"see {before}{root}{chr(92).join(names)}\\app.py{after} now")


# stage 3: caseless scripts (CJK, Arabic, Hebrew, Devanagari, …) in a folder name


@pytest.mark.parametrize("name", ["用户", "משה", "राम", "ユーザー", "مستخدم", "사용자", "abc用户"])
@pytest.mark.parametrize(
    ("template", "path"),
    [
        ("Edit /home/{}/app.py now", "/home/{}/app.py"),
        ("修改/home/{}/app.py文件", "/home/{}/app.py"),  # CJK prose glued on: prose
        ("see src/{}/x.py, then", "src/{}/x.py"),
        ("cd ~/{}/ ok", "~/{}/"),
    ],
)
def test_a_caseless_folder_name_is_read_whole(name: str, template: str, path: str) -> None:
    text = template.format(name)
    whole = path.format(name)
    assert facts_of(text, "path", "user") == [whole]  # (before: /home/ and /app.py)
    (fact,) = _path_facts(text)
    assert retention([fact], f"已修改{whole}。") == ([fact], [])
    # a tail of it is no longer stated there: the extraction reads the longer path
    (tail,) = _path_facts("see /app.py now")
    assert retention([tail], text) == ([], [tail])
    assert retention([tail], "x/app.py " * 9 + text) == ([], [tail])  # (the regex fallback)


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        # the rule: a caseless letter is a name's only in a folder name (a "/" after it);
        # glued before a path's first name or after its last, it is prose, as before
        ("修改src/app.py文件", ["src/app.py"]),
        ("打开/home/jose/app.py文件", ["/home/jose/app.py"]),
        ("see /home/用户 ok", ["/home/"]),  # (the last name: prose glued on, as before)
        ("see /home/abc用户 ok", ["/home/abc"]),
        # session 36: a relative path's caseless first name is no prose: the absolute
        # tail (``/app.py``, before) is a path the text does not hold; none
        ("用户/app.py", []),
        ("see /home/用户/app.py文件 ok", ["/home/用户/app.py"]),
        ("see http://例子.com/用户/app.py ok", []),  # (a URL: masked, as before)
    ],
)
def test_caseless_prose_around_a_path(text: str, paths: list[str]) -> None:
    assert facts_of(text, "path", "user") == paths


#: (review 1: with characters the matcher folds to ASCII, fullwidth forms among them)
_CASELESS = st.sampled_from("用户文件修改ユーザーמשהمستخدمरामกขค사용" + "１＿．－／＼º™ﬁ①")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.one_of(_LETTERS, _CASELESS, _MARKS), min_size=1, max_size=6), max_size=3),
    st.sampled_from(["", "用户", "app.py", "x文件", "用户/"]),
    st.one_of(_GLUE, st.sampled_from(["／", "＼", "１"])),  # (no ``\\``: s35-paths.md)
    _GLUE,
    st.sampled_from(["/", "", "~/"]),
)
@example([["用", "户"]], "app.py", "修改", "文件", "/")
def test_caseless_folders_agree(
    names: list[list[str]], last: str, before: str, after: str, root: str
) -> None:
    """Extraction and reference agree, and each path fact is kept in its own text."""
    path = root + "".join("".join(name) + "/" for name in names) + last
    facts_of(f"see {before}{path}{after} now", "path", "user")


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from("ab_.-+\\/:%é\u0301用 1"), max_size=30))
def test_first_names_are_the_widened_regex_starts(text: str) -> None:
    """A relative Windows path's first names of a non-ASCII text are read back from each
    backslash: the starts the widened regex finds (session 43: past the marks a name
    starts with, which sit on the character before it; none when no letter, digit or
    ``_`` follows them)."""
    pattern = factpathrules.with_name_letters(factpaths._RELATIVE_START.pattern)
    expected = []
    for m in pattern.finditer(text):
        start = m.start(1)
        while start < m.end() - 1 and unicodedata.category(text[start]).startswith("M"):
            start += 1
        first = text[start]
        if first.isalnum() or first == "_":  # (a mark is neither; nor the backslash)
            expected.append((start, m.end()))
    assert list(factpathrules.first_names(text)) == expected
    # (review 1: the reading for texts with many backslashes and the one for few)
    assert list(factpathrules._dense_first_names(text)) == expected
    assert list(factpathrules._sparse_first_names(text)) == expected


# review 1: a folder name read as the matcher reads it (NFKC, case folded)


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ("see /data/第１版/app.py ok", ["/data/第１版/app.py"]),  # (before: /data/, /app.py)
        ("see /home/ユーザー＿名前/app.py ok", ["/home/ユーザー＿名前/app.py"]),
        ("see /srv/数据．备份/app.py ok", ["/srv/数据．备份/app.py"]),
        ("see /data/資料－最終版/app.py ok", ["/data/資料－最終版/app.py"]),
        ("see ~/データº用户/app.py ok", ["~/データº用户/app.py"]),
        ("see /a/用户™/app.py ok", ["/a/用户™/app.py"]),
        ("see ／用户/app.py ok", []),  # (``/用户/app.py`` to the matcher: /app.py a tail)
        ("see ＼用户/app.py ok", []),
        ("see \\用户/app.py ok", []),
        ("see /a/用户¹/app.py ok", ["/app.py"]),  # (a footnote's mark: a blank to it)
    ],
)
def test_a_folder_name_is_read_as_the_matcher_reads_it(text: str, paths: list[str]) -> None:
    """Each path fact is kept in its own text (:func:`facts_of` checks it, and the
    reference): the matcher reads ``１`` as ``1``, so ``/app.py`` there is a tail."""
    assert facts_of(text, "path", "user") == paths


@pytest.mark.parametrize(
    "text",
    [
        "Ответ: он/она/они правы.",
        "Счёт от 12/03/2024г. оплачен",  # (a date and the year's abbreviation)
        "см. стр/рис/табл",
        "Λύση: α/β/γ είναι",
        "см 50/50/Ω ok",
        "он\\она\\они",  # (none before too: kept as a guard)
        "see données/archive/ ok",
    ],
)
def test_prose_with_slashes_is_no_path(text: str) -> None:
    """Review 1: a relative path of names of other letters with no dot (no extension)
    is prose, as on main (where the letters cut it): ASCII ``he/she/they`` is older."""
    assert facts_of(text, "path", "user") == []


@pytest.mark.parametrize(
    "text",
    [
        "к.т.н./д.т.н./проф.",
        "т.д./т.п./и.т.",
        "Вер. 2.0/β/γ ок",
        "см. сайт.рф/docs/a ok",
        "α.β/γ/δ",
        "ул.Ленина/пр.Мира/д.5",
    ],
)
def test_dotted_prose_with_slashes_is_no_path(text: str) -> None:
    """Review 2: a relative path holding other letters whose last name has no known
    extension is prose too, as on main (session 34)."""
    assert facts_of(text, "path", "user") == []


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ("Ph.D./M.Sc./B.A. ok", ["Ph.D./M.Sc./B.A"]),
        ("v 2.0/b/c ok", ["2.0/b/c"]),
        ("see site.ru/docs/a ok", ["site.ru/docs/a"]),
        ("see src/données/x.py ok", ["src/données/x.py"]),
        ("see ./données/archive ok", ["./données/archive"]),
    ],
)
def test_ascii_and_extension_paths_stay(text: str, paths: list[str]) -> None:
    """Review 2: the ASCII forms are older and unchanged; a non-ASCII relative path with
    a known extension, or a rooted one, is still read whole."""
    assert facts_of(text, "path", "user") == paths


@pytest.mark.parametrize(
    "text",
    [
        "see /home/x/\u0301/a.py ok",
        "see a.py//\u0e4c ok",
        "see /home/\u0301x/a.py ok",
        "see src/\u0301/a.py ok",
        "see /home/\u0301 ok",
    ],
)
def test_a_name_starting_with_a_mark_is_none(text: str) -> None:
    """Review 1: a slash path's name made of marks, or starting with one, is no name (a
    Windows path's rule): no fact, rather than a path of it."""
    assert facts_of(text, "path", "user") == []


@pytest.mark.parametrize("text", ["see http://例子/app.py ok", "see https://例子.中国/app.py ok"])
def test_a_url_states_its_path_after_a_caseless_name(text: str) -> None:
    """The extraction's own look back (review 1: :func:`.factpathrules.cut_path`) is not
    the matcher's: a URL still states its path (``/app.py``)."""
    (fact,) = _path_facts("see /app.py now")
    assert retention([fact], text) == ([fact], [])


def test_a_windows_path_before_a_character_folding_to_a_digit_is_none() -> None:
    """Review 1 (F4): the reference judged ``①`` after ``.\\éд`` as the raw character (a
    path), production as the matcher reads it, ``1`` (a cut: none); both say none."""
    assert facts_of("see .\\éд①/12 ok", "path", "user") == []


_CLASSES = (
    factletters.name_letters,
    factletters.caseless_letters,
    factletters.folder_chars,
    factletters.letters_and_marks,
)


@pytest.mark.skipif(
    unicodedata.unidata_version != lettertables.UNIDATA_VERSION,
    reason="the stored ranges are of another Unicode version (then built)",
)
def test_the_classes_are_read_from_the_stored_table_not_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Review 2 (N2): the first non-ASCII text with a path reads the classes from
    :mod:`.lettertables`; building them from every code point cost that process 0.37 s."""

    def build(name: str) -> list[tuple[int, int]]:
        raise AssertionError(f"{name} built")

    monkeypatch.setattr(factletters, "built_ranges", build)
    for cached in _CLASSES:
        cached.cache_clear()
    try:
        assert re.fullmatch(factletters.name_letters(), "é")
        assert re.fullmatch(factletters.caseless_letters(), "用")
        assert re.fullmatch(factletters.folder_chars(), "１")
        assert re.fullmatch(factletters.letters_and_marks(), "\u0301")
        assert not re.fullmatch(factletters.letters_and_marks(marks=False), "\u0301")
        assert extract_facts([{"role": "user", "content": "Edit /home/José/app.py"}])
    finally:
        for cached in _CLASSES:
            cached.cache_clear()


@pytest.mark.skipif(
    unicodedata.unidata_version != lettertables.UNIDATA_VERSION,
    reason="the stored ranges are of another Unicode version (then built)",
)
@pytest.mark.parametrize("name", sorted(factletters.JUDGES))
def test_the_stored_table_is_the_build(name: str) -> None:
    """Each stored class is the one its judge gives over every code point (rewrite the
    table with ``tools/letter_tables.py`` when a judge changes)."""
    assert factletters.stored_ranges(name) == factletters.built_ranges(name)
