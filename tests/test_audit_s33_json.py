"""Session 33: a text that is a JSON document reads every ``\\n`` escape of it as one.

ctxledger's recall answer (``json.dumps(..., ensure_ascii=False)``) holds snippets whose
``\\n`` no line shows as escaped (``".\\nalpha0 beta"``): it was read as the relative
Windows path ``.\\nalpha0`` (the README's Hermes audit example).
"""

from __future__ import annotations

import json

from helpers.reference_facts.facts import extract_facts as reference_facts
from hypothesis import example, given
from hypothesis import strategies as st

from ctxledger.compressor.factescapes import DOCUMENTS, unescaped
from ctxledger.compressor.factmatch import Haystack
from ctxledger.compressor.factpaths import find_paths
from ctxledger.compressor.facts import extract_facts

_SNIPPET = "Turn 3: review part 3 of the alpha module. .\nalpha0 beta gamma"


def _recall(snippet: str = _SNIPPET, hits: int = 2) -> str:
    hit = {"message_id": "msg_01", "seq": 18, "role": "user", "snippet": snippet}
    return json.dumps({"query": "alpha", "hits": [hit] * hits}, ensure_ascii=False)


def _tool(text: str) -> dict[str, object]:
    return {"role": "tool", "tool_call_id": "c1", "content": text}


def _paths(text: str) -> list[str]:
    return [f.value for f in extract_facts([_tool(text)]) if f.kind == "path"]


def test_a_recall_answer_gives_no_path() -> None:
    text = _recall()
    assert ".\\nalpha0" in text
    assert find_paths(text) == []
    assert _paths(text) == []


def test_the_same_characters_outside_a_json_document_keep_their_reading() -> None:
    line = '"snippet": ".\\nalpha0 beta gamma"'
    assert find_paths(line) == [".\\nalpha0"]
    assert find_paths(_recall()[:-1]) == [".\\nalpha0"]  # truncated: no document
    assert find_paths("[" + line + "}") == [".\\nalpha0"]  # shaped as one, invalid


def test_a_windows_path_in_a_json_document_stays_a_path() -> None:
    text = json.dumps({"path": "C:\\temp\\a.txt", "out": "done\nok"})
    assert '"C:\\\\temp\\\\a.txt"' in text
    assert find_paths(text) == ["C:\\temp\\a.txt"]
    assert unescaped(text) == text.replace("\\nok", "  ok")


def test_a_snippet_of_an_earlier_answer_keeps_its_doubled_backslash_a_path() -> None:
    """The README's Hermes example: a recall answer quoting a cut snippet of an earlier
    one holds ``.\\\\nalpha0``, a backslash written doubled as a JSON string writes a
    Windows path's, in a string that is no document of its own: still read as a path."""
    answer = _recall()
    at = answer.index("alpha0")
    earlier = answer[at - 60 : at + 20]
    assert "\\nalpha0" in earlier
    text = _recall("…" + earlier + "…")
    assert ".\\\\nalpha0" in text
    assert find_paths(text) == [".\\nalpha0"]


def test_a_json_document_between_joins_is_read_alone() -> None:
    text = "\x00".join(['x "y .\\nalpha0 z', _recall()])
    blanked = unescaped(text)
    assert blanked is not None
    assert ".\\nalpha0" in blanked.split("\x00")[0]
    assert ".\\nalpha0" not in blanked.split("\x00")[1]


def test_a_fact_after_an_escape_of_a_document_is_found_in_its_own_text() -> None:
    text = _recall("listing:\ndocs\nsetup.py")
    assert "setup.py" in _paths(text)
    assert Haystack(text).holds("path", "setup.py")


def test_a_long_document_is_parsed_once_per_message() -> None:
    """Its extraction (which blanks its URLs first) and its matcher ask of the same text."""
    DOCUMENTS.clear()
    text = _recall(_SNIPPET + " see https://example.com/a", hits=2000)
    assert len(text) > DOCUMENTS.long_text
    before = DOCUMENTS.parsed
    assert _paths(text) == []
    Haystack(text).holds("path", "alpha0")
    assert DOCUMENTS.parsed - before == len(text)


def test_documents_are_found_in_linear_work() -> None:
    """n vs 4n texts of many small documents and of one large one: characters parsed
    grow 4x, no clock."""
    counts = []
    for n in (200, 800):
        DOCUMENTS.clear()
        start = DOCUMENTS.parsed
        unescaped("\x00".join([_recall(hits=1)] * n) + "\x00" + _recall(hits=n))
        counts.append(DOCUMENTS.parsed - start)
    assert counts[1] <= 4 * counts[0] + 1000


def test_only_texts_shaped_as_documents_are_parsed() -> None:
    DOCUMENTS.clear()
    before = DOCUMENTS.parsed
    unescaped('{"a": "b\\nc"} and more\x00x\\ny\x00[1, "\\n"')
    assert DOCUMENTS.parsed == before


_PIECES = st.sampled_from(
    [
        '{"a": "',
        '"}',
        "[",
        "]",
        ", ",
        ".\\nalpha0",
        "\\n",
        "\\\\",
        "C:\\\\temp\\\\a.txt",
        "C:\\temp",
        " x.py",
        '"',
        "\x00",
        "\n",
        " ",
        "docs\\nsetup.py",
    ]
)
_RAW = st.lists(
    st.sampled_from([".\nalpha0", "\n", "\t", "\\", "C:\\temp\\a.txt", " x.py", "docs/", '"']),
    max_size=6,
).map("".join)
_DOCUMENT = st.builds(
    lambda values, cut: json.dumps({"hits": values}, ensure_ascii=False)[: cut or None],
    st.lists(_RAW, max_size=3),
    st.integers(-3, 0),
)


@given(st.one_of(st.lists(_PIECES, max_size=12).map("".join), _DOCUMENT))
@example('{"hits": [".\\nalpha0"]}')
@example('{"hits": [".\\nalpha0"]')
def test_the_reference_agrees(text: str) -> None:
    for role in ("tool", "user"):
        message = {"role": role, "content": text}
        if role == "tool":
            message["tool_call_id"] = "c1"
        got = [(f.kind, f.value) for f in extract_facts([message])]
        assert got == [(f.kind, f.value) for f in reference_facts([message])]
