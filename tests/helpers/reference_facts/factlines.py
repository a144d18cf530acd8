"""Which lines name an exception that did not happen: code a tool showed and lines
reporting a success (reference, session 32; split out of :mod:`.factkinds`).

* **code** — a statement, a traceback frame, an assignment of a call's result to
  names (``out, ok = self.fix(``), a tuple's continuation, an f-string, an annotated
  parameter (``v: SQLLintError``);
* **success lines** — a check mark, ``SUCCESS:``, ``OK`` alone, ``Expected x:``, a
  pytest node that passed, or an exception named right before ``as expected`` with
  nothing after it saying something else came.
"""

from __future__ import annotations

import re

__all__ = ["CODE_LINE", "EXCEPTION_IN_LINE", "code", "label_off", "slash_cut", "success"]

EXCEPTION_IN_LINE = re.compile(r"(?<![\w.])(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b")
CODE_LINE = re.compile(
    r"^\s*(?:E {2,}|File \"|raise\b|except\b|class\b|def\b|import\b|from\b|assert\b|@|#|>>>|\.\.\.|"
    r"if\b|elif\b|return\b|with\b|try\b|\w+\s*=\s*[\w.]+\()"
)


def label_off(at: int, line: str) -> tuple[int, str]:
    """(session 40) A script's ``Error: ValueError: x`` is the exception line after its
    label: the line at `at`, or what follows the label and where. The name may be
    dotted and may be ``Exception`` itself (review 1: as ``MyException``); ``Error``
    alone is no exception's name (``Error: Error: x`` keeps its label)."""
    head, _, rest = line.partition(":")
    body = rest.lstrip(" \t")
    name = body.partition(":")[0] if ":" in body else ""
    *owners, last = name.split(".")
    exception = last == "Exception" or EXCEPTION_IN_LINE.fullmatch(last) is not None
    if (
        head.lower() == "error"
        and rest[:1] in (" ", "\t")
        and exception
        and all(re.fullmatch(r"[A-Za-z_]\w*", owner) for owner in owners)
    ):
        return at + len(line) - len(body), body
    return at, line


_SPLIT = re.compile(r"\w[\w/]")  # (compiled once: no pattern is compiled per text)


def slash_cut(text: str, limit: int) -> int:
    """(session 40, review 1) Where a text longer than `limit` with no blank in its last
    40 % is cut: after the last ``/`` there when the cut at `limit` would split a name or
    end just before a ``/`` (a path the text goes on with); else at `limit`."""
    splits = _SPLIT.fullmatch(text, limit - 1, limit + 1) is not None
    low = int(limit * 0.6)
    slash = text.rfind("/", low, limit)
    return slash + 1 if splits and slash != -1 else limit


def code(line: str) -> bool:
    return (
        CODE_LINE.match(line) is not None or _tuple_assigned(line) or _source_shape(line.lstrip())
    )


def _is_name(word: str) -> bool:
    return bool(word) and all(c.isalnum() or c == "_" for c in word)


def _tuple_assigned(line: str) -> bool:
    """(session 32) Two names or more, comma-separated, assigned a call's result
    (``out, ok = self.fix(``), read piece by piece: the names before the first ``=``,
    then a dotted name and ``(`` after it."""
    head, equals, call = line.lstrip().partition("=")
    if not equals:
        return False
    names = head.split(",")
    if len(names) < 2:
        return False
    for index, name in enumerate(names):
        # blanks and tabs around a comma; any whitespace before the ``=``
        inner = name.lstrip(" \t")
        inner = inner.rstrip() if index == len(names) - 1 else inner.rstrip(" \t")
        if not _is_name(inner):
            return False
    call = call.lstrip()
    callee = ""
    for char in call:
        if not (char.isalnum() or char in "_."):
            break
        callee += char
    return bool(callee) and call[len(callee) : len(callee) + 1] == "("


def _three_words(text: str) -> bool:
    """Second review: whether `text` opens with three lower-case words (a-z), each after
    blanks, the last one whole (wrapped prose: ``, the build failed with …,``)."""
    for _ in range(3):
        words = text.lstrip(" \t")
        if words == text:
            return False
        word = words[: len(words) - len(words.lstrip("abcdefghijklmnopqrstuvwxyz"))]
        if not word:
            return False
        text = words[len(word) :]
    return not (text[:1].isalnum() or text[:1] == "_")


def _source_shape(body: str) -> bool:
    """Session 32: an f-string, a return annotation's ``) ->``, a tuple's first element
    (a quoted string or a dotted name, then ``, ``), or a parameter annotated with a
    subscripted type or an exception class (its name saying no error)."""
    if body.startswith(("f'", 'f"')) or (
        body.startswith(")") and body[1:].lstrip(" \t")[:2] == "->"
    ):
        return True
    if body.startswith("("):
        inner = body[1:]
        quote = inner[:1]
        if quote in ("'", '"'):
            close = inner.find(quote, 1)
            head = inner[: close + 1] if close > 0 and "\n" not in inner[:close] else ""
        else:
            head = inner[
                : len(inner)
                - len(
                    inner.lstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")
                )
            ]
        rest = inner[len(head) :]
        goes_on = body.removesuffix("\n").rstrip(" \t")[-1:] in (",", "{", "(", "[")
        if head and rest[:1] == "," and rest[1:2] in (" ", "\t") and goes_on:
            return not _three_words(rest[1:])  # (review 7: ``(e.g., the build failed …)``)
    label, colon, annotation = body.partition(":")
    if not colon or not label or not (label[0].islower() or label[0] == "_"):
        return False
    if not label.isidentifier() or not label.isascii():
        return False
    lead = label[: len(label) - len(label.lstrip("abcdefghijklmnopqrstuvwxyz_"))]
    if any(word in lead for word in ("err", "exc", "fail", "fatal", "warn")):
        return False
    annotation = annotation.lstrip(" \t")
    name = annotation[
        : len(annotation)
        - len(annotation.lstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"))
    ]
    if not name or not ("A" <= name[0] <= "Z"):
        return False
    after = annotation[len(name) :]
    if after.startswith("["):
        return True
    tail = after.strip(" \t")
    return name.endswith(("Error", "Exception")) and tail in ("", ",", ")")


def success(line: str) -> bool:
    """(session 32, as the review narrowed it) A line reporting a success: it starts
    (after blanks) with a check mark; with SUCCESS, PASS or PASSED then ``:``, ``!`` or
    nothing more; with OK alone or before a blank and ``(``; with Expected and at most
    one word before its ``:``; or it is a pytest node line whose outcome word (after a
    blank) is PASSED, XFAIL or SKIPPED (not a skip whose parenthesised reason starts
    with an exception's name); or an exception's name (maybe then ``raised``/``was
    raised``) stands right before a whole-word ``as expected`` and no not, never,
    than or ...n't comes before it."""
    body = line.lstrip(" \t")
    if body[:1] in ("✓", "✔", "✅"):
        return True
    word = ""
    for char in body:
        if not (char.isalnum() or char == "_"):
            break
        word += char
    rest = body[len(word) :]
    if word in ("SUCCESS", "PASS", "PASSED") and (rest[:1] in (":", "!") or not rest.strip()):
        return True
    if word == "OK" and (not rest.strip() or (rest[:1] in " \t" and rest.lstrip()[:1] == "(")):
        return True
    if word == "Expected":
        after = rest.lstrip(" \t")
        named = ""
        for char in after if after != rest else "":
            if not (char.isalnum() or char == "_"):
                break
            named += char
        if rest[:1] == ":":
            return _undisputed(rest[1:], None)
        if named and after[len(named) : len(named) + 1] == ":":
            expected = named if named.endswith(("Error", "Exception")) else None
            return _undisputed(after[len(named) + 1 :], expected)
    if _expected_exception(line.split("\n", 1)[0]):
        return True
    head, colons, rest = body.partition("::")
    if not colons or not head or any(not (c.isalnum() or c in "_/.-") for c in head):
        return False
    rest = rest.split("\n", 1)[0]
    for outcome in ("PASSED", "XFAIL", "SKIPPED"):
        at = rest.find(outcome)
        while at != -1:
            after = rest[at + len(outcome) : at + len(outcome) + 1]
            if at > 0 and rest[at - 1] in " \t" and not (after.isalnum() or after == "_"):
                reason = rest[at + len(outcome) :].lstrip(" \t")
                if not (outcome == "SKIPPED" and _exception_reason(reason)):
                    return True
            at = rest.find(outcome, at + 1)
    return False


def _exception_reason(reason: str) -> bool:
    """Whether a skip's reason ``(ImportError: …)`` names an exception (third review:
    anywhere before its ``)``: ``(Errors in setup, see ValueError above)``)."""
    if not reason.startswith("("):
        return False
    inside = reason[1:].split(")", 1)[0]
    runs = "".join(c if (c.isalnum() or c in "_.") else " " for c in inside).split()
    for run in runs:
        cuts = [run[:i] for i in range(1, len(run) + 1) if i == len(run) or run[i] == "."]
        if any(cut.endswith(("Error", "Exception")) for cut in cuts):
            return True
    return False


def _expected_exception(line: str) -> bool:
    at = line.find("as expected")
    while at != -1:
        after = line[at + len("as expected") : at + len("as expected") + 1]
        named = _named_before(line[:at])
        if not (after.isalnum() or after == "_") and named:
            lowered = line[:at].lower()
            words = "".join(c if (c.isalnum() or c in "_'") else " " for c in lowered).split()
            denied = any(w in ("not", "never", "than") or w.endswith("n't") for w in words)
            if not denied and _undisputed(line[at + len("as expected") :], named):
                return True
        at = line.find("as expected", at + 1)
    return False


def _undisputed(after: str, named: str | None) -> bool:
    """Second review: what was expected stands when no word ``got`` or ``but`` and no
    exception but `named` (any, when None) comes `after` it, up to the end of its clause
    (third review: ``;``, ``.``, ``!`` or ``?`` before a blank or the end, or ``(``).
    Final review: past that end, only an exception but the expected one written with
    its message (``TypeError: boom``, ``RuntimeError(``) or a nonzero count of failed
    or errors (``1 failed``), or ``failed:``/``error:``, still disputes it."""
    later = ""
    for index, char in enumerate(after):
        following = after[index + 1 : index + 2]
        if char == "(" or (char in ";.!?" and (not following or following.isspace())):
            after, later = after[:index], after[index:]
            break
    words = "".join(c if (c.isalnum() or c == "_") else " " for c in after).split()
    if any(word.lower() in ("got", "but") for word in words):
        return False
    clause_names = [name for name, _ in _exception_runs(after)]
    if named is not None and any(name != named for name in clause_names):
        return False
    expected = named if named is not None or not clause_names else clause_names[0]
    if any(
        name != expected and next_char in (":", "(") for name, next_char in _exception_runs(later)
    ):
        return False
    return not _failure_outcome(later)


def _exception_runs(text: str) -> list[tuple[str, str]]:
    """Each run of letters, digits, ``_`` and ``.`` of `text` that starts with an ASCII
    letter or ``_`` and holds an exception's name up to a dot or its end: that name
    (its longest) and the character after the run when the name is the whole run."""
    found: list[tuple[str, str]] = []
    index = 0
    while index < len(text):
        if not (text[index].isalnum() or text[index] in "_."):
            index += 1
            continue
        end = index
        while end < len(text) and (text[end].isalnum() or text[end] in "_."):
            end += 1
        run = text[index:end]
        if run[0].isascii() and (run[0].isalpha() or run[0] == "_"):
            cuts = [c for c in range(len(run), 0, -1) if c == len(run) or run[c] == "."]
            names = [run[:c] for c in cuts if _exception_name(run[:c])]
            if names:
                found.append((names[0], text[end : end + 1] if names[0] == run else ""))
        index = end
    return found


def _exception_name(name: str) -> bool:
    """Whether `name` ends with Error or Exception after at least one more character."""
    return any(name.endswith(end) and len(name) > len(end) for end in ("Error", "Exception"))


def _failure_outcome(text: str) -> bool:
    """Whether `text` says failures or errors happened: a word failed, error or errors
    (lower case, capitalised or upper case) after a count not starting with 0 and only
    blanks, or before blanks and a ``:``."""
    words: list[tuple[int, int]] = []  # (start, end) of each run of letters, digits, _
    index = 0
    while index < len(text):
        if text[index].isalnum() or text[index] == "_":
            end = index
            while end < len(text) and (text[end].isalnum() or text[end] == "_"):
                end += 1
            words.append((index, end))
            index = end
        else:
            index += 1
    for number, (start, end) in enumerate(words):
        word = text[start:end]
        if word not in {
            w for f in ("failed", "error", "errors") for w in (f, f.title(), f.upper())
        }:
            continue
        if text[end:].lstrip(" \t").startswith(":"):
            return True
        if number > 0:
            count_start, count_end = words[number - 1]
            count = text[count_start:count_end]
            between = text[count_end:start]
            digits = all(c in "0123456789" for c in count)
            if digits and count[0] != "0" and between and not between.strip(" \t"):
                return True
    return False


def _named_before(before: str) -> str:
    """The exception's name `before` ends with, blanks after it, maybe then ``raised``
    or ``was raised`` (the name at most 120 characters back); "" with none."""
    words = before[-120:]
    words = words[:-1] if words.endswith("(") else words  # ``KeyError (as expected)``
    if words.rstrip(" \t") == words:
        return ""  # (no blank before ``as expected``)
    words = words.rstrip(" \t")
    for tail in (" raised",):
        if words.endswith(tail):
            words = words[: -len(tail)].rstrip(" \t")
            if words.endswith(" was"):
                words = words[:-4].rstrip(" \t")
            break
    words = words[:-1] if words[-1:] in ("`", "'", '"') else words  # (its quote)
    token = ""
    for char in reversed(words):
        if not (char.isalnum() or char in "_."):
            break
        token = char + token
    if not token or not (token[0].isascii() and (token[0].isalpha() or token[0] == "_")):
        return ""
    return token if token.endswith(("Error", "Exception")) else ""
