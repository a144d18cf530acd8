"""Paths the extractor missed or cut (the audit probe of session 28), and how they match.

* Windows paths (``C:\\Users\\me\\proj\\app.py``, ``.\\scripts\\run.ps1``,
  ``D:/data/x.csv``) were no path, or only their last name (``app.py``); they are one
  path fact, matched as the same path whichever separators a summary writes, and not
  kept by another drive's path or by the POSIX path after the drive.
* A name with a second suffix after a known extension (``config.yaml.j2``,
  ``app.py.bak``, ``run.log.1``) was cut to ``config.yaml``, a fact the matcher then
  found nowhere, not even in its own message (``config.yaml`` is not in
  ``config.yaml.j2``). A known file with a suffix (``Dockerfile.dev``) or ending a
  sentence (``the Makefile.``) was no path.
* Dotfiles (``.env``, ``.bashrc``, ``.gitignore``) and paths through a dotted directory
  (``.github/workflows/ci.yml``, ``.ssh/config``) were no path: a path starting with a
  dot was skipped. Bare dotfiles come from a closed list, so a method call
  (``.filter(``), a CSS class (``.header``), a name (``.NET``) or the word after a full
  stop stay no path.
"""

from __future__ import annotations

from typing import Any

from helpers.audit_harness import assistant, audit_of, status
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.compressor.factmatch import contains, fact_in_text, normalize, normalize_fact
from ctxledger.compressor.facts import extract_facts, find_paths


def _paths(text: str, role: str = "tool") -> list[str]:
    message: dict[str, Any] = {"role": role, "content": text}
    if role == "tool":
        message["tool_call_id"] = "c1"
    return [f.value for f in extract_facts([message]) if f.kind == "path"]


# --------------------------------------------------------------------------- Windows


def test_a_windows_path_is_one_path_fact() -> None:
    cases = {
        r"Open C:\Users\me\proj\app.py now": [r"C:\Users\me\proj\app.py"],
        r"run .\scripts\run.ps1 first": [r".\scripts\run.ps1"],
        r"then ..\shared\lib.dll": [r"..\shared\lib.dll"],
        "read D:/data/x.csv.": ["D:/data/x.csv"],
        r"(C:\Users\me\proj)": [r"C:\Users\me\proj"],
        r"mixed C:\proj/src\app.py": [r"C:\proj/src\app.py"],
    }
    for text, expected in cases.items():
        for role in ("tool", "assistant", "user"):
            assert _paths(text, role) == expected, (text, role, _paths(text, role))


def test_windows_environment_and_asset_paths_are_no_facts() -> None:
    assert _paths(r"C:\Python39\Lib\site-packages\x\y.py") == []
    assert _paths(r"C:\proj\node_modules\x\y.js") == []
    assert _paths(r"C:\app\static\img\logo.png") == []


def test_a_windows_path_matches_whichever_separators_a_summary_writes() -> None:
    fact = normalize_fact("path", r"C:\Users\me\proj\app.py")
    assert fact == "c:/users/me/proj/app.py"
    for summary in (
        r"C:\Users\me\proj\app.py",
        "c:/users/me/proj/app.py",
        r"C:/Users\me/proj\app.py",
    ):
        assert contains(normalize(f"Edited {summary}."), fact, path=True), summary
    for summary in (r"D:\Users\me\proj\app.py", r"C:\Users\me\proj\app.py.bak"):
        assert not contains(normalize(f"Edited {summary}."), fact, path=True), summary
    relative = normalize_fact("path", r".\scripts\run.ps1")
    assert relative == "scripts/run.ps1"
    for summary in ("./scripts/run.ps1", r"scripts\run.ps1", r"C:\proj\scripts\run.ps1"):
        assert contains(normalize(f"ran {summary}"), relative, path=True), summary


def test_a_windows_path_in_json_text_is_the_path_its_escapes_stand_for() -> None:
    # review of session 29: a tool's JSON output holds the path with each backslash
    # doubled (its escapes); the fact was that doubled text, which no summary keeps
    output = '{"logPath": "C:\\\\logs\\\\app.log", "port": 8080}'
    facts = extract_facts([{"role": "tool", "tool_call_id": "c", "content": output}])
    paths = [f for f in facts if f.kind == "path"]
    assert [f.value for f in paths] == ["C:\\logs\\app.log"]
    assert fact_in_text(paths[0], output)  # still found in its own (escaped) text
    for summary, kept in (
        ("Logs go to C:\\logs\\app.log.", True),
        ("Logs go to C:/logs/app.log.", True),
        ('Config: {"logPath": "C:\\\\logs\\\\app.log"}', True),
        ("Logs go to C:\\logs\\app.log.1 now.", False),
        ("Logs go to D:\\logs\\app.log.", False),
    ):
        audit = audit_of(assistant(output), summary)
        assert status(audit, "C:\\logs\\app.log") == ("kept" if kept else "lost"), summary


def test_an_absolute_path_is_not_kept_behind_a_drive() -> None:
    audit = audit_of(
        assistant("The config lives in /users/me/app.py on the server."),
        r"Edited C:\users\me\app.py on the laptop.",
    )
    assert status(audit, "/users/me/app.py") == "lost"
    # a PATH list is no drive: the letter before the colon follows more of a name
    assert contains("path=/usr/bin:/usr/local/bin", "/usr/local/bin", path=True)


def test_the_audit_keeps_a_windows_path_written_with_slashes() -> None:
    audit = audit_of(
        assistant(r"The failing script is C:\Users\me\proj\app.py (see .\scripts\run.ps1)."),
        "Fixed C:/Users/me/proj/app.py; ./scripts/run.ps1 passes.",
    )
    assert status(audit, r"C:\Users\me\proj\app.py") == "kept"
    assert status(audit, r".\scripts\run.ps1") == "kept"
    assert status(audit, "app.py") == "not extracted"


def test_a_trace_query_of_a_windows_path_is_a_path() -> None:
    assert find_paths("C:/Users/me/proj/app.py") == ["C:/Users/me/proj/app.py"]


# --------------------------------------------------------------------------- names


def test_a_name_keeps_its_second_suffix() -> None:
    text = (
        "edit config.yaml.j2, archive.tar.gz, x.d.ts, app.py.bak, run.log.1, setup.py.in "
        "and Dockerfile.dev; see the Makefile."
    )
    assert _paths(text) == [
        "config.yaml.j2",
        "archive.tar.gz",
        "x.d.ts",
        "app.py.bak",
        "run.log.1",
        "setup.py.in",
        "Dockerfile.dev",
        "Makefile",
    ]


def test_a_longer_name_does_not_keep_the_shorter_one() -> None:
    audit = audit_of(
        assistant("The template config.yaml.j2 renders config.yaml."),
        "Only config.yaml.j2 was edited.",
    )
    assert status(audit, "config.yaml.j2") == "kept"
    assert status(audit, "config.yaml") == "lost"


_SECOND = st.sampled_from(("j2", "bak", "orig", "1", "42", "gz", "in", "example", "tmp"))


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet="abc_-", min_size=1, max_size=5).filter(lambda s: s[0].isalpha()),
    st.sampled_from(("py", "yaml", "json", "log", "txt", "tar", "d.ts")),
    st.lists(_SECOND, max_size=2),
    st.sampled_from(("", ".", ",", " now", ")")),
)
def test_every_path_fact_is_found_in_its_own_text(
    stem: str, ext: str, more: list[str], tail: str
) -> None:
    name = ".".join([stem, ext, *more])
    text = f"see {name}{tail}"
    facts = extract_facts([{"role": "tool", "tool_call_id": "c", "content": text}])
    assert [f.value for f in facts if f.kind == "path"] == [name]
    for fact in facts:
        assert fact_in_text(fact, text), fact


# --------------------------------------------------------------------------- dotfiles


def test_dotfiles_and_dotted_directories_are_paths() -> None:
    text = (
        "set .env and .env.local, .bashrc, .gitignore, .eslintrc.json, "
        ".github/workflows/ci.yml, .ssh/config, config/.env and ~/.ssh/config."
    )
    assert _paths(text, "user") == [
        ".env",
        ".env.local",
        ".bashrc",
        ".gitignore",
        ".eslintrc.json",
        ".github/workflows/ci.yml",
        ".ssh/config",
        "config/.env",
        "~/.ssh/config",
    ]


def test_a_dotfile_is_matched_by_its_name() -> None:
    audit = audit_of(
        assistant("Secrets go in .env, hooks in .github/workflows/ci.yml."), "Edited .env only."
    )
    assert status(audit, ".env") == "kept"
    assert status(audit, ".github/workflows/ci.yml") == "lost"
    assert not contains(normalize("the foo.env file"), ".env", path=True)
    assert not contains(normalize("see .env.local"), ".env", path=True)


_NOT_DOTFILES = (
    "I fixed it. Then. The end. Env vars are set.",
    "items.filter(x).map(y)\n    .filter(z)\n    .then(done)",
    ".header { color: red }\n.btn-primary { margin: 0 }",
    "Works on .NET and .5 seconds...and/or .",
    "the profile. bashrc. gitignore is fine.",
    "foo.env and my.bashrc and x.gitignore",
)


def test_prose_code_and_sentence_ends_make_no_dotfile() -> None:
    for text in _NOT_DOTFILES:
        for role in ("tool", "assistant", "user"):
            assert _paths(text, role) == [], (text, role, _paths(text, role))


_WORDS = st.sampled_from(
    ("env", "profile", "the", "Then", "NET", "bashrc", "config", "git", "ignore", "it", "x1")
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(_WORDS, st.sampled_from((" ", ". ", ", ", "! ", ".\n", "? "))), max_size=12)
)
def test_sentences_of_words_yield_no_path(words: list[tuple[str, str]]) -> None:
    text = "".join(word + stop for word, stop in words)
    assert _paths(text, "assistant") == [], text
