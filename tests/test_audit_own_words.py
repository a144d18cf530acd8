"""Facts the extraction words its own way are kept by the words it read them from (session 30).

Probing the corpus for facts not found in their own message (a fact no summary
restating that message can keep) found three kinds besides paths:

* a timestamp with a fraction of a second (``2018-03-25 15:27:29,744``, logging's;
  ``2014-12-22T03:12:58.019077+00:00``) was cut before it, and the cut value is part
  of a longer number to the matcher: now the fraction and the zone are part of it;
* ``Line 439-440`` and ``lines 1112 to 1154`` are extracted as ``lines 439-440`` and
  ``lines 1112-1154``; a summary saying ``line 439-440`` or ``lines 1112 to 1154``
  lost them;
* ``<returncode>2</returncode>``, ``exited with 2`` and ``"exit_code": 2`` are the fact
  ``exit code 2``; a summary saying ``exited with 2`` lost it.
"""

from __future__ import annotations

from helpers.audit_harness import audit_of, status

from ctxledger.compressor.factmatch import Haystack, fact_in_text
from ctxledger.compressor.facts import extract_facts


def _tool(text: str) -> list[dict[str, str]]:
    return [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [  # type: ignore[dict-item]
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": text},
    ]


def test_a_timestamp_keeps_its_fraction_and_zone() -> None:
    for text, value in (
        ("2018-03-25 15:27:29,744 :: DEBUG :: pydicom", "2018-03-25 15:27:29,744"),
        ("Example: '2014-12-22T03:12:58.019077+00:00'", "2014-12-22T03:12:58.019077+00:00"),
        ("at 2024-01-02T10:00:00Z.", "2024-01-02T10:00:00Z"),
        ("at 2024-01-02 10:00 sharp", "2024-01-02 10:00"),
    ):
        facts = extract_facts([{"role": "assistant", "content": text}])
        assert [f.value for f in facts if f.kind == "number"] == [value], text
        assert all(fact_in_text(f, text) for f in facts), text


def test_lines_are_kept_as_they_were_read() -> None:
    original = [{"role": "assistant", "content": "Line 439-440 and lines 1112 to 1154 matter."}]
    facts = [f.value for f in extract_facts(original)]
    assert {"lines 439-440", "lines 1112-1154"} <= set(facts)
    for summary, kept in (
        ("See line 439-440 and lines 1112 to 1154.", True),
        ("See lines 439-440 and lines 1112-1154.", True),
        ("See lines 439 – 440 and Lines 1112 to 1154.", True),
        ("See lines 439-441 and lines 1112 to 1155.", False),
        ("See lines 439-440.5 and outlines 1112 to 1154.", False),
        ("See 439-440 and 1112 to 1154.", False),
    ):
        audit = audit_of(original, summary)
        for value in ("lines 439-440", "lines 1112-1154"):
            assert status(audit, value) == ("kept" if kept else "lost"), (summary, value)


def test_an_exit_code_is_kept_in_the_words_it_was_read_from() -> None:
    original = _tool("<returncode>2</returncode>\n<output>boom</output>")
    assert "exit code 2" in [f.value for f in extract_facts(original)]
    for summary, kept in (
        ("The build failed with exit code 2.", True),
        ("The build exited with 2.", True),
        ('The build reported {"exit_code": 2}.', True),
        ("The build failed (<returncode>2</returncode>).", True),
        ("The build exited with 0; the test exited with 12.", False),
        ("The build failed, 2 errors.", False),
    ):
        assert status(audit_of(original, summary), "exit code 2") == ("kept" if kept else "lost"), (
            summary
        )


def test_each_fallback_reads_only_its_own_shape() -> None:
    hay = Haystack("python 3.8-3.12, lines 3 to 7, exited with 2")
    assert hay.holds("number", "python 3.12")
    assert hay.holds("number", "lines 3-7")
    assert hay.holds("error", "exit code 2")
    assert not hay.holds("number", "lines 3-8")
    assert not hay.holds("quoted", "exit code 2")  # another kind: read as written
    assert not hay.holds("number", "port 3")
