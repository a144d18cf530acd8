"""Fact shapes that are code, listings or documentation (session 30's corpus probe).

* ``drwxrwxrwx 212 root root 12288 Sep 10  2025 tests`` of ``ls -l`` gave the count
  ``2025 tests`` in nearly every SWE transcript (and ``22 files`` of ``14:22 files``);
  no number on a line of ``ls -l`` is a fact.
* ``79:class AstroidBuildingError(AstroidError):`` and ``185: raise KeyError(`` of a
  ``grep -n`` listing, and a docstring's ``:raises TooManyLevelsError: When …``, were
  error facts: code a tool showed, not an error that happened. A log or test line
  that names an exception stays one (``tests/x.py:45: AssertionError: …``,
  ``2024-01-02 12:00:01 worker crashed with ValueError: bad``).
"""

from __future__ import annotations

from ctxledger.compressor.facts import extract_facts


def _facts(text: str) -> list[tuple[str, str]]:
    message = {"role": "tool", "tool_call_id": "c1", "content": text}
    return [(f.kind, f.value) for f in extract_facts([message])]


def test_no_count_on_a_line_of_ls() -> None:
    listing = (
        "total 12\n"
        "drwxrwxrwx 212 root root 12288 Sep 10  2025 tests\n"
        "-rw-r--r--   1 root root  1553 May  6 14:22 files\n"
        "lrwxrwxrwx.  1 root root     7 May  6  2025 lines -> x\n"
    )
    assert [f for f in _facts(listing) if f[0] == "number"] == []
    # the same words in a report are counts
    assert ("number", "12 tests") in _facts("collected 12 tests\n3 files changed")
    assert ("number", "3 files") in _facts("collected 12 tests\n3 files changed")


def test_a_listing_of_code_or_a_docstring_is_no_error() -> None:
    output = (
        "astroid/exceptions.py:79:class AstroidBuildingError(AstroidError):\n"
        "185: raise AstroidImportError(\n"
        "80-    def __init__(self, message='Failed to import module {modname}.'):\n"
        "        :raises TooManyLevelsError: When the relative import refers to a\n"
        "        :raise ImportError: if the module cannot be found\n"
        "+        except TypeError:\n"
        "astroid/manager.py:            except AstroidBuildingError as error:\n"
    )
    errors = [value for kind, value in _facts(output) if kind == "error"]
    assert not [e for e in errors if " " in e], errors  # at most bare exception names


def test_lines_naming_an_exception_that_happened_stay_errors() -> None:
    output = (
        "tests/test_x.py:45: AssertionError: assert total == 3\n"
        "2024-01-02 12:00:01 worker crashed with ValueError: bad input\n"
        "The call failed with KeyError: 'missing'\n"
    )
    errors = [value for kind, value in _facts(output) if kind == "error"]
    assert errors[:3] == [
        "tests/test_x.py:45: AssertionError: assert total == 3",
        "2024-01-02 12:00:01 worker crashed with ValueError: bad input",
        "The call failed with KeyError: 'missing'",
    ], errors


def test_a_bare_yes_or_no_argument_is_no_fact() -> None:
    # "insurance": "no" made the fact "no", kept by any summary holding the word
    arguments = '{"cabin": "economy", "insurance": "no", "confirm": "yes"}'
    message = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "book", "arguments": arguments}}
        ],
    }
    assert [(f.kind, f.value) for f in extract_facts([message])] == [("identifier", "economy")]


def test_a_numbered_listing_line_is_no_shell_or_script_error() -> None:
    # grep -n / cat -n of source: "1194:" is a line number, not a program's name
    output = (
        '1194:        raise TypeError("Cannot pass None as an argument to only().")\n'
        "28-except ImportError:\n"
        '1447:        "format": "{input!r} cannot be formatted as a timedelta.",\n'
        "cat: x.txt: No such file or directory\n"
    )
    errors = [value for kind, value in _facts(output) if kind == "error"]
    assert errors == ["TypeError", "ImportError", "cat: x.txt: No such file or directory"]


def test_an_amount_ends_before_a_comma_of_prose() -> None:
    # "$375, $500" gave the fact "$375,": a summary saying "$375." lost it
    numbers = [
        value for kind, value in _facts("Fares: $375, $500, $1,250.50 and $5.") if kind == "number"
    ]
    assert numbers == ["$375", "$500", "$1,250.50", "$5"]
