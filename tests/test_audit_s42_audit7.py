"""Session 42 (helper ``audit7``): more of the audit's verdicts made true.

A fact ending in a word character and its stop (``Use v1.2.``, ``We will use foo.``)
was found where a word character follows the stop (``use v1.2.x``, ``we will use
foo.bar``): the ``.`` is then part of a longer token, and the verdict a false "kept".
Session 41 closed it for a digit after a digit's stop; now any word character after a
word character's stop makes the occurrence no match (:func:`.factbounds.glued_stop`),
per occurrence and in the regex.

A half-escaped Win32 device path (``\\\\\\\\?\\\\UNC\\srv\\share\\x.txt``, a JSON
escaped prefix, then single backslashes) gives its file's name in production; the
reference read a UNC path starting after the ``?``, whose server would be ``UNC``.
The reference now reads the backslashes after a device's ``?`` as its separator, no
UNC start, and agrees; a property compares the two on device-prefix soup.

Two inline scripts whose first 200 characters are equal (a django settings preamble)
were one command fact, so a summary stating one "kept" both. A script longer than the
cap now keeps its start and its end with its middle left out (``head [...] tail``,
:func:`.toolcalls.elided`), and a text states it where the start is found and the end
after it in the same text (:mod:`.factelided`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.fact_checks import message_facts as _facts
from helpers.fact_checks import view_keeps as _kept
from helpers.reference_facts import facts as reference
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxledger.compressor.factbounds import contains, search
from ctxledger.compressor.factmatch import (
    JOIN,
    Haystack,
    fact_in_text,
    fact_text,
    normalize,
    retention,
)
from ctxledger.compressor.facts import COMMAND_MAX_CHARS, Fact, extract_facts
from ctxledger.compressor.factsentences import cap_text
from ctxledger.compressor.toolcalls import ELIDED

# --------------------------------------------------------------------------- a glued stop


@pytest.mark.parametrize(
    ("kind", "value", "view", "expected"),
    [
        ("decision", "Use v1.2.", "Use v1.2.x", False),
        ("decision", "Use v1.2.", "we use v1.2.post1 now", False),
        ("decision", "We will use foo.", "we will use foo.bar", False),
        ("decision", "We will use foo.", "we will use foo.py", False),
        ("decision", "We will use foo.", "we will use foo._x", False),
        ("constraint", "Never touch settings.", "never touch settings.py", False),
        ("ask", "Please pin django 3.", "please pin django 3.x", False),
        ("error", "ValueError: bad value.", "ValueError: bad value.txt", False),
        ("decision", "Use foo.", "use foo.é", False),
        # the stop, then no word character: stated
        ("decision", "Use v1.2.", "Use v1.2.", True),
        ("decision", "Use v1.2.", "Use v1.2. Then test.", True),
        ("decision", "We will use foo.", "we will use foo.\nnext", True),
        ("decision", "We will use foo.", "(we will use foo.)", True),
        ("decision", "We will use foo.", "we will use foo./", True),
        ("decision", "We will use foo.", "we will use foo..", True),
        ("decision", "We will use foo.", "we will use foo.-", True),
        # the words ending a line without the stop (session 41) still state it
        ("decision", "We will use foo.", "we will use foo\nbar", True),
        # no word character before the stop: not this rule (an ellipsis, a call)
        ("decision", "Use foo...", "use foo...bar", True),
        ("decision", "Use `f()`.", "use `f()`.then", True),
    ],
)
def test_a_stop_is_no_stop_before_a_word_character(
    kind: str, value: str, view: str, expected: bool
) -> None:
    assert _kept(kind, value, view) is expected


def test_extracted_sentences_are_lost_to_a_longer_token() -> None:
    (decision,) = _facts("I decided to use v1.2. Fine.", kind="decision")
    assert decision.value == "I decided to use v1.2."
    assert retention([decision], "Summary: I decided to use v1.2.x builds.") == ([], [decision])
    assert retention([decision], "Summary: I decided to use v1.2. Done.") == ([decision], [])
    (constraint,) = _facts("Never edit settings. Go.", role="user", kind="constraint")
    assert constraint.value == "Never edit settings."
    assert retention([constraint], "user: never edit settings.py") == ([], [constraint])
    assert retention([constraint], "user: never edit settings.") == ([constraint], [])


_WORD = st.text(alphabet="abcxyz019_", min_size=1, max_size=5)
_AFTER_WORD = st.text(alphabet="abz09_é", min_size=1, max_size=3)
_AFTER_NO_WORD = st.sampled_from(["", " ", "\n", ")", ",", "/", "-", ".", ":", " x"])


@settings(max_examples=200)
@given(
    words=st.lists(_WORD, min_size=1, max_size=3),
    glued=_AFTER_WORD,
    after=_AFTER_NO_WORD,
    repeat=st.integers(min_value=1, max_value=12),
)
@example(words=["use", "v1"], glued="x", after="", repeat=1)
@example(words=["use", "foo"], glued="bar", after=" ", repeat=10)
def test_a_word_stop_is_never_found_before_a_word_character(
    words: list[str], glued: str, after: str, repeat: int
) -> None:
    """Property: a needle ending in a word character and ``.`` is not found where a
    word character follows the ``.``; it is where none does; the rule per occurrence and
    the one regex agree (a text repeating the needle often hands over to the regex)."""
    needle = " ".join(words) + "."
    # (ending in "!": the words without the stop do not end its line, session 41's rule)
    longer = " ".join([needle + glued] * repeat) + "!"
    assert not contains(longer, needle)
    assert not search(longer, needle)
    assert not _kept("decision", needle, longer)
    stated = longer + " " + needle + after
    assert contains(stated, needle)
    assert search(stated, needle)


# --------------------------------------------------------------------------- device paths


def _paths(extract: Any, text: str) -> list[str]:
    return [f.value for f in extract([{"role": "user", "content": text}]) if f.kind == "path"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"see \\\\?\\UNC\srv\share\x.txt now", ["x.txt"]),
        (r"see \\\?\\UNC\srv\share\x.txt now", ["x.txt"]),
        (r"see \\?\UNC\srv\share\x.txt now", ["\\\\?\\UNC\\srv\\share\\x.txt"]),
        (r"see \\\\?\\UNC\\srv\\share\\x.txt now", ["\\\\?\\UNC\\srv\\share\\x.txt"]),
        (r"see \\\\?\\C:\dir\x.txt now", ["C:\\dir\\x.txt"]),
        # after a path character the backslashes before the ``?`` are no device's
        (r"see a\\?\\srv\share\x.txt now", ["\\\\srv\\share\\x.txt"]),
        (r"see a?\\srv\share\x.txt now", ["\\\\srv\\share\\x.txt"]),
    ],
)
def test_code_and_reference_read_a_device_prefix_alike(text: str, expected: list[str]) -> None:
    assert _paths(extract_facts, text) == expected
    assert _paths(reference.extract_facts, text) == expected
    assert all(_kept("path", value, text) for value in expected)


#: device prefixes (plain and JSON-escaped), UNC and drive pieces, relative anchors,
#: quotes, and (session 43, ``docs/notes/s43-audit8.md``) ``$``, letters outside ASCII
#: and a combining mark
_DEVICE_PIECES = [
    "\\\\?\\", "\\\\.\\", "\\\\\\\\?\\\\", "\\\\\\\\.\\\\", "?", ".", "C:", "\\", "\\\\",
    "UNC", "srv", "share", "x.txt", "..\\", ".\\", "~\\", " ", "a", "dir", "/", '"', '\\"',
    "$", "$\\", "\u00e9", "\u00c9", "\u0434", "\u7528", "\u0301", "a\u0301",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_DEVICE_PIECES), max_size=14).map("".join))
@example(r"\\\\?\\UNC\srv\share\x.txt")
@example(r"x \\\?\\srv\share\x.txt")
@example("\u00e9\\\\\\\\?\\\\UNC\\x.txt")
@example("\\\\\\\\.\\\\\u00e9a\\\\\\\\\\.\\\\$\\\\.\\a")  # (session 43)
@example("..\\UNC$\\\\\\\\.\\\\aC:")
def test_device_prefix_soup_gives_the_reference_paths(text: str) -> None:
    """Property: production and the reference find the same path facts."""
    assert _paths(extract_facts, text) == _paths(reference.extract_facts, text)


# --------------------------------------------------------------------------- long scripts

_PREAMBLE = (
    'cd /testbed && python -c "\nimport os\nimport django\nfrom django.conf import settings\n'
    "settings.configure(DEBUG=True, INSTALLED_APPS=['django.contrib.contenttypes', "
    "'django.contrib.auth'], DATABASES={'default': {'ENGINE': 'django.db.backends.sqlite3'}})\n"
    "django.setup()\n"
)
_SCRIPT_A = _PREAMBLE + 'from django.db import models\nprint(models.Q(a=1) | models.Q(b=2))\n"'
_SCRIPT_B = _PREAMBLE + 'from django.forms import Form\nprint(Form().is_valid())\n"'


def _call(command: str) -> dict[str, Any]:
    arguments = json.dumps({"command": command})
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": arguments}}
    return {"role": "assistant", "content": "", "tool_calls": [call]}


def _command(command: str) -> Fact:
    (fact,) = [f for f in extract_facts([_call(command)]) if f.kind == "command"]
    return fact


def test_two_scripts_sharing_a_preamble_are_two_facts() -> None:
    """The corpus case: django scripts whose first 200 characters are one settings
    block. Each fact keeps its script's end, so a summary stating one states only it."""
    a, b = _command(_SCRIPT_A), _command(_SCRIPT_B)
    assert len(a.value) <= COMMAND_MAX_CHARS and len(b.value) <= COMMAND_MAX_CHARS
    assert a.value.startswith('cd /testbed && python -c " import os import django')
    assert ELIDED in a.value and a.value.endswith('print(models.Q(a=1) | models.Q(b=2)) "')
    assert a.normalized != b.normalized
    both = [f for f in extract_facts([_call(_SCRIPT_A), _call(_SCRIPT_B)]) if f.kind == "command"]
    assert [f.value for f in both] == [a.value, b.value]
    # each is stated by its own call, by its fact quoted, by its script restated
    for fact, script in ((a, _SCRIPT_A), (b, _SCRIPT_B)):
        assert fact_in_text(fact, fact_text(_call(script)))
        assert fact_in_text(fact, "- commands: " + fact.value + "; more")
        assert fact_in_text(fact, "ran:\n" + script + "\nok")
    # not by the other script's call, nor by the preamble alone (a summary's RAN line)
    assert retention([a, b], fact_text(_call(_SCRIPT_B))) == ([b], [a])
    assert retention([a, b], "RAN " + " ".join(_PREAMBLE.split())) == ([], [a, b])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the end before the start, or in another text of a joined view: not stated
        ('print(models.Q(a=1) | models.Q(b=2)) " then ' + _PREAMBLE, False),
        (_PREAMBLE + JOIN + 'print(models.Q(a=1) | models.Q(b=2)) "', False),
        # the start glued to more of a word: no match of the start
        ("x" + _SCRIPT_A, False),
        # a later text that holds both: stated
        ("summary" + JOIN + "again: " + _SCRIPT_A, True),
        # the first start of a text has no end after it, a later one of another text has
        (_PREAMBLE + JOIN + _SCRIPT_A, True),
    ],
)
def test_an_elided_script_is_stated_by_its_start_then_its_end(text: str, expected: bool) -> None:
    fact = _command(_SCRIPT_A)
    assert Haystack(text).holds("command", fact.normalized) is expected


def test_a_script_with_no_blank_near_its_end_keeps_its_start_only() -> None:
    script = _PREAMBLE + "print(" + "x" * 80 + ')"'
    fact = _command(script)
    assert ELIDED not in fact.value and len(fact.value) <= COMMAND_MAX_CHARS
    assert fact.value == reference.extract_facts([_call(script)])[0].value


def test_a_short_script_and_a_long_line_are_unchanged() -> None:
    short = 'python3 -c "\nprint(1)\n"'
    assert _command(short).value == 'python3 -c " print(1) "'
    line = "echo " + " ".join(["word"] * 60)
    assert _command(line).value == cap_text(line, COMMAND_MAX_CHARS)
    assert ELIDED not in _command(line).value


_CODE_WORD = st.text(alphabet="abcxyz01_().=", min_size=1, max_size=9)


@settings(max_examples=150, deadline=None)
@given(
    middle=st.lists(_CODE_WORD, min_size=0, max_size=30),
    end_a=st.lists(_CODE_WORD, min_size=1, max_size=12),
    end_b=st.lists(_CODE_WORD, min_size=1, max_size=12),
    blanks=st.sampled_from([" ", "\n", "\n    ", "  "]),
)
def test_long_scripts_are_told_apart_by_their_ends(
    middle: list[str], end_a: list[str], end_b: list[str], blanks: str
) -> None:
    """Property: the fact of a long inline script (code and reference agree) fits the
    cap, is stated by the call that ran it, and, when another script with the same
    start ends in other words, is another fact that call does not state."""
    body = _PREAMBLE + blanks.join(middle) + "\n"
    a, b = body + blanks.join(end_a) + '"', body + blanks.join(end_b) + '"'
    fact_a, fact_b = _command(a), _command(b)
    assert len(fact_a.value) <= COMMAND_MAX_CHARS
    for script, fact in ((a, fact_a), (b, fact_b)):
        (ref,) = [f for f in reference.extract_facts([_call(script)]) if f.kind == "command"]
        assert ref.value == fact.value
        assert fact_in_text(fact, fact_text(_call(script)))
    if ELIDED in fact_a.value and fact_a.normalized != fact_b.normalized:
        tail_a = fact_a.normalized.partition(ELIDED)[2]
        if tail_a not in normalize(fact_text(_call(b))):
            assert not fact_in_text(fact_a, fact_text(_call(b)))


# ------------------------------------------------------------- fix round (session 42 review)

_DONE = 'print(models.Q(a=1) | models.Q(b=2))\nprint("done")\n"'
_SCRIPT_D = _PREAMBLE + "from django.db import models\n" + _DONE
_SCRIPT_E = _PREAMBLE + 'from django.forms import Form\nprint(Form().is_valid())\nprint("ok")\n"'
_SCRIPT_F = 'cd /testbed && python -c "\nimport sys\n' + "x = 1\n" * 40 + _DONE


def _two_calls(*commands: str) -> dict[str, Any]:
    calls = [
        {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": arguments}}
        for n, arguments in enumerate(json.dumps({"command": c}) for c in commands)
    ]
    return {"role": "assistant", "content": "", "tool_calls": calls}


def test_another_scripts_end_later_in_the_text_states_nothing() -> None:
    """The review's three probes: D's start in script E and D's end in script F (another
    start) later in the same text. The end is looked for only up to the next script."""
    d, e, f = _command(_SCRIPT_D), _command(_SCRIPT_E), _command(_SCRIPT_F)
    assert f.normalized.endswith(d.normalized.partition(ELIDED)[2])
    # the offline summary's facts section lists shortened facts one after another
    summary = "- commands: " + e.value + "\n- commands: " + f.value
    assert not fact_in_text(d, summary)
    assert retention([d, e, f], summary) == ([e, f], [d])
    # one message running E then F
    assert not fact_in_text(d, fact_text(_two_calls(_SCRIPT_E, _SCRIPT_F)))
    # prose quoting script E, then F
    assert not fact_in_text(d, _SCRIPT_E + "\nthen\n" + _SCRIPT_F)
    # D itself, after E in the same text, is still stated (a later start is tried)
    assert fact_in_text(d, fact_text(_two_calls(_SCRIPT_E, _SCRIPT_D)))
    assert fact_in_text(d, "- commands: " + e.value + "\n- commands: " + d.value)


def test_an_end_of_only_the_closing_quote_keeps_the_old_cut() -> None:
    """A long last token, then a newline and the closing quote: the end would be ``"``
    alone, which any other script with the same start also ends with. The fact falls
    back to the start alone (cut at a blank), in code and reference."""
    script = _PREAMBLE + "print(" + "x" * 60 + ')\n"'
    fact = _command(script)
    assert ELIDED not in fact.value
    assert fact.value == cap_text(" ".join(script.split()), COMMAND_MAX_CHARS)
    (ref,) = [f for f in reference.extract_facts([_call(script)]) if f.kind == "command"]
    assert ref.value == fact.value
