"""Second suffixes and unknown extensions (session 30).

A known extension followed by a dot and more of a name that is not a second suffix
of the list (``Sample.h.create(``, ``resp.json.get``, ``django.db.models.sql.query``,
``app.py.xyz``) gave the path ``Sample.h``: a fact the matcher found nowhere, not
even in its own message (``Sample.h`` is not in ``Sample.h.create``), so every
summary lost it. It is no path now. The rule is not a longer list: a second suffix
either is a known one (``.gz``, ``.bak``, ``.1``, ``.j2``) or the last name ends with a
known extension anyway (``x.d.ts``, ``app.test.tsx``, ``file.spec.js``,
``data.csv.gz``). A bare name with an unknown extension (``schema.prisma``) stays no
path (``module.attr`` has the same shape); under a directory a file name needs no
known extension (``prisma/schema.prisma``, ``src/index.mdx``).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.compressor.factmatch import fact_in_text
from ctxledger.compressor.facts import extract_facts


def _paths(text: str) -> list[str]:
    message: dict[str, Any] = {"role": "tool", "tool_call_id": "c1", "content": text}
    return [f.value for f in extract_facts([message]) if f.kind == "path"]


def test_a_known_extension_followed_by_more_of_a_name_is_no_path() -> None:
    for text in (
        'Sample.h.create(user, name="Sam1")',
        "value = resp.json.get('x')",
        "from django.db.models.sql.query import Query",
        "the app.py.xyz file",
    ):
        assert _paths(text) == [], (text, _paths(text))


def test_names_ending_in_a_known_extension_or_second_suffix_are_paths() -> None:
    text = (
        "see archive.tar.zst, data.csv.gz, x.d.ts, app.test.tsx, file.spec.js, "
        "Dockerfile.dev, config.yaml.j2 and run.log.1."
    )
    assert _paths(text) == [
        "archive.tar.zst",
        "data.csv.gz",
        "x.d.ts",
        "app.test.tsx",
        "file.spec.js",
        "Dockerfile.dev",
        "config.yaml.j2",
        "run.log.1",
    ]


def test_a_file_name_under_a_directory_needs_no_known_extension() -> None:
    assert _paths("edit prisma/schema.prisma and docs/index.mdx") == [
        "prisma/schema.prisma",
        "docs/index.mdx",
    ]
    assert _paths("a bare schema.prisma is a module.attr shape") == []
    for text in ("Python 2/3.x works", "see e.g/i.e", "km/h."):
        assert _paths(text) == [], (text, _paths(text))


_WORD = st.text(alphabet="abcxyz", min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(
    _WORD,
    st.sampled_from(("py", "json", "h", "sql", "log", "tar", "ts")),
    st.lists(st.one_of(_WORD, st.sampled_from(("gz", "bak", "1", "j2"))), max_size=2),
    st.sampled_from(("", ".", "(", " now", ".x(", "()")),
)
def test_every_path_fact_of_a_dotted_name_is_found_in_its_own_text(
    stem: str, ext: str, more: list[str], tail: str
) -> None:
    text = "see " + ".".join([stem, ext, *more]) + tail
    facts = extract_facts([{"role": "tool", "tool_call_id": "c", "content": text}])
    for fact in facts:
        assert fact_in_text(fact, text), (text, fact)
