"""Facts and how a text is checked for them: the matching half of :mod:`ctxledger.compressor.facts`.

Matching is normalized (:func:`.factnormal.normalize`): case-folded, whitespace collapsed, curly
quotes straightened, backslashes read as path separators, superscript digits (a
footnote's mark) read as blanks; a fact that begins or ends
with a word character only matches on word boundaries, so ``foo`` is not found inside
``foobar``. Identifiers are the exception to case folding (:data:`CASE_SENSITIVE_KINDS`):
code is case-sensitive, so ``PVSystem`` is not found in ``pvsystem.py``.

A match is never part of a longer number (``$5`` is not found in ``$5,000``, ``v2.0``
not in ``v2.0.1`` or ``v2.0-rc1``), and a path's match never part of a longer path: an
absolute path is not found inside another (``/app/settings.py`` in
``/opt/legacy/app/settings.py``), but it is in a URL whose path it is
(``http://localhost:8000/api/v1/users``), a relative one only after a ``/``
(``src/app.py`` names ``app.py``), and neither followed by more of a name
(``run.log.1``); the rules are :mod:`ctxledger.compressor.factbounds`. A decision or
constraint (a sentence, its final ``.`` kept) is also stated by its words ending a line
or a text without the ``.``, as the extraction ends a sentence there too. A one-name
directory keeps its slash (``build/``, see :func:`normalize_fact`): the bare word
"build" does not state it, ``build/``, ``./build/`` and ``build/out.txt`` do.

Facts from tool-call arguments are extracted from the decoded argument values, so
texts are matched in the same decoded form (:func:`fact_text`): a ``sed`` command whose
JSON encoding doubles its backslashes is still found in the call that ran it.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

import msgspec

from ctxledger.compressor.factbounds import contains, first_match, states_range_end
from ctxledger.compressor.factcodes import code_value, stated_exit_codes
from ctxledger.compressor.factelided import states_elided
from ctxledger.compressor.factescapes import escape_follows
from ctxledger.compressor.factgrep import grep_follows, tree_follows
from ctxledger.compressor.factnormal import normalize, normalize_cased
from ctxledger.compressor.factparams import parameter_ids
from ctxledger.compressor.factranges import states_lines
from ctxledger.compressor.factscan import JOIN as JOIN  # (one constant, read here too)
from ctxledger.compressor.factscan import LONG_TEXT
from ctxledger.compressor.facturls import url_goes_on
from ctxledger.compressor.toolcalls import ELIDED, call_name_and_args


class Fact(msgspec.Struct, frozen=True, kw_only=True):
    """One salient value and where it was first seen."""

    kind: str
    value: str
    normalized: str
    message_index: int
    message_id: str | None = None
    role: str = ""


#: kinds matched without case folding (code is case-sensitive)
CASE_SENSITIVE_KINDS = frozenset({"identifier"})


#: a relative path of two names or more, as normalized (``\\`` reads as ``/``), single
#: separators: a Windows path (``c:/logs``, ``src/app.py``) whose text may double them
_SEPARATED = re.compile(r"[^/]+(?:/[^/]+)+/?\Z")
#: a UNC path, as normalized (``//server/share/x.txt``): its text may double every
#: separator, the two leading ones too (``\\\\\\\\server\\\\share``)
_UNC = re.compile(r"//[^/]+(?:/[^/]+)+/?\Z")
#: a named version, as normalized (``python 3.12``)
_NAMED_VERSION = re.compile(r"([a-z]+) (v?[0-9]+(?:\.[0-9]+)+)")
#: a range of lines, as extracted and normalized (``lines 12-20``)
_LINES = re.compile(r"lines ([0-9]+)-([0-9]+)")
#: the kinds that are sentences, their stop kept (``factsentences``)
_SENTENCE_KINDS = frozenset({"decision", "constraint"})
#: a sentence's one final period (not an ellipsis)
_PERIOD_END = re.compile(r"(?<!\.)\.\Z")
#: a path's second readings, cheapest first (escapes, tree branches, pytest ids, grep's)
_FOLLOWS = (escape_follows, tree_follows, parameter_ids, grep_follows)
_NOT_ASCII_ALNUM = re.compile("[^A-Za-z0-9]+")
#: where a line ends (a JOIN ends a text), and the mark it leaves in the folded text;
#: ``\x00`` is :data:`JOIN` (from :mod:`.factscan`): a sentence ending one text of a joined
#: haystack ends a line, and unmarked the JOIN would stay glued to it (no blank)
_LINE_ENDS = re.compile("[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029\x00]+")
_LINE_MARK = " \x00"
#: an exit code, as extracted (``exit code 2``)
_EXIT_CODE = re.compile(r"exit code ([0-9]+)")


#: a text's ``(normalize_cased, normalize)``
Forms = tuple[str, str]
#: what tells a long text's forms when they are known without making them (or None)
FormsOf = Callable[[str], "Forms | None"]


class Haystack:
    """A text prepared once for many fact checks (folded, and cased on demand)."""

    __slots__ = (
        "_answers",
        "_cased",
        "_escaped",
        "_exit_codes",
        "_follow_hays",
        "_follows",
        "_lined",
        "_present",
        "_unescaped",
        "folded",
        "text",
    )

    def __init__(self, text: str, forms: Forms | None = None) -> None:
        self.text = text
        #: (normalize_cased, normalize) of `text` when known (stored, :mod:`.normalstore`)
        self._cased: str | None = forms[0] if forms is not None else None
        self.folded = forms[1] if forms is not None else normalize(text)
        self._exit_codes: frozenset[int] | None = None
        #: `folded` with each line's end marked (:meth:`_ends_a_line`), made when first asked
        self._lined: str | None = None
        self._escaped: bool | None = None
        #: a path's second readings (:data:`_FOLLOWS`): each one's text, read when first
        #: needed (None: empty, :meth:`_read`), its haystack (:meth:`_follow`), and all of
        #: them joined (False until asked: :meth:`_follows_joined`)
        self._follows: list[str | None] = []
        self._follow_hays: dict[int, Haystack] = {}
        self._unescaped: Haystack | Literal[False] = False
        #: (case-sensitive, path, written with a backslash, needle) -> answer, kept for long texts only
        self._answers: dict[tuple[bool, bool, bool, str], bool] | None = (
            {} if len(text) >= LONG_TEXT else None
        )
        #: (case-sensitive, character) -> whether the text holds it (asked of long texts)
        self._present: dict[tuple[bool, str], bool] = {}

    @property
    def cased(self) -> str:
        if self._cased is None:
            self._cased = normalize_cased(self.text)
        return self._cased

    def holds(self, kind: str, normalized: str, windows: bool = False) -> bool:
        """Whether the text states a fact of `kind` normalized as `normalized`
        (`windows`: a path written with a ``\\``, :func:`written_windows`).

        A Windows path (``c:/logs/app.log``, ``src/app.py`` as normalized) is also stated
        with doubled separators: the text of a JSON string escapes each backslash
        (``C:\\\\logs``, ``src\\\\app.py``). So is any relative path of two names or more
        (``src//app.py`` names the same file) and a UNC path (``////server//share``);
        another absolute one is not (``//host/x`` is another path). A path is also
        stated by the text with the escapes of its escaped lines blanked
        (``"docs\\nsetup.py\\n"`` states ``setup.py``, as the extraction reads it), and
        with grep's context separators blanked (``README.md-11-setup.py`` states
        ``setup.py``: :func:`.factgrep.grep_follows`), and after a tree's branch
        (``|----__init__.py`` states ``__init__.py``: :func:`.factgrep.tree_follows`),
        and in a pytest parameter id (``x.py::t[a.sql-utf-8]`` states ``a.sql``:
        :func:`.factparams.parameter_ids`).
        """
        if self._holds_fact(kind, normalized, windows):
            return True
        if kind != "path":
            return False
        # A path right after a blanked escape (or in a pytest id, grep's or a tree's line)
        # is in a second reading only. Session 44: each is made when first needed,
        # cheapest first (grep's ~0.6 s on 3 MB of ids, for none), answering as their
        # join (as JoinedHaystack); their ASCII letters and digits are the text's, so a
        # needle with one the text lacks is in none
        if _spans_texts(normalized):
            return self._follows_joined()._holds_fact(kind, normalized, windows)
        if not self._may_hold(False, self.folded, _NOT_ASCII_ALNUM.sub("", normalized)):
            return False
        for at in range(len(_FOLLOWS)):
            hay = self._follow(at)
            if hay is not None and hay._holds_fact(kind, normalized, windows):
                return True
        return False

    def _read(self, at: int) -> str | None:
        """The text of the `at`-th second reading (:data:`_FOLLOWS`): its pieces joined
        by JOIN, None when it has none. Each reading is read once, in order."""
        while len(self._follows) <= at:
            read = _FOLLOWS[len(self._follows)](self.text)
            self._follows.append(JOIN.join(read) if read else None)
        return self._follows[at]

    def _follow(self, at: int) -> Haystack | None:
        """The `at`-th second reading as a haystack, made when first asked."""
        hay = self._follow_hays.get(at)
        if hay is None:
            text = self._read(at)
            if text is None:
                return None
            hay = self._follow_hays[at] = Haystack(text)
        return hay

    def _follows_joined(self) -> Haystack:
        """Every second reading's pieces joined, in :data:`_FOLLOWS`' order. That is the
        readings' texts (:meth:`_read`) joined, those with none left out: JOIN-joining
        two JOIN-joined non-empty lists is JOIN-joining the one list. No reading already
        read is read again (session 45)."""
        if self._unescaped is False:
            texts = [self._read(at) for at in range(len(_FOLLOWS))]
            self._unescaped = Haystack(JOIN.join([t for t in texts if t is not None]))
        return self._unescaped

    def _holds_fact(self, kind: str, normalized: str, windows: bool) -> bool:
        """:meth:`holds` without the second reading of escaped lines."""
        cased = kind in CASE_SENSITIVE_KINDS
        path = kind == "path"
        if self._holds(cased, path, normalized, windows):
            return kind != "url" or self._states_url(normalized)
        if kind in ("number", "error") and " " in normalized:
            return self._read_as(normalized)
        if kind == "command" and ELIDED in normalized:  # (an inline script's, session 42)
            return self._states_elided(normalized)
        if kind in _SENTENCE_KINDS and _PERIOD_END.search(normalized) is not None:
            return self._ends_a_line(normalized[:-1])
        if not path or (_SEPARATED.match(normalized) or _UNC.match(normalized)) is None:
            return False
        if ":" not in normalized and not self._doubled():
            return False  # (its doubled form would hold a "//" outside a "://")
        return self._holds(cased, path, normalized.replace("/", "//"), windows)

    def _states_url(self, needle: str) -> bool:
        """Whether a match of URL `needle` is followed by no more of its last name
        (session 46: ``…/a-old``, ``…/a.bak`` name another resource; ``**…/a**``,
        ``…/a。`` and ``…/a/b`` do not, :func:`.facturls.url_goes_on`); asked only once a
        match is found, reading only the characters at each match's end."""
        if needle.endswith("/"):
            return True  # (a folder: anything under it states it, as a path's)
        text = self.folded
        at = first_match(text, needle)
        while at != -1:
            if not url_goes_on(text, at + len(needle)):
                return True
            at = first_match(text, needle, at + 1)
        return False

    def _doubled(self) -> bool:
        """Whether the text holds a ``//`` that is no URL's ``://`` (asked once per text)."""
        if self._escaped is None:
            self._escaped = "//" in self.folded.replace("://", "")
        return self._escaped

    def _ends_a_line(self, sentence: str) -> bool:
        """Whether `sentence` (a decision or constraint without its final ``.``) stands
        at the end of a line or of a text: the extraction ends a sentence at a newline
        as at a ``. ``, so ``The fix is in `x`.`` and the same words ending a line state
        one choice. Not before more words on the line (``We use foo.`` is not stated by
        ``we use foo bar``). The text is read a second time, with line ends kept, only
        when the sentence is found without its period at all."""
        if not self._holds(False, False, sentence, False):
            return False
        if self._lined is None:
            self._lined = normalize(_LINE_ENDS.sub(_LINE_MARK, self.text)) + _LINE_MARK
        return contains(self._lined, sentence + _LINE_MARK)

    def _read_as(self, normalized: str) -> bool:
        """Whether the text states a fact the extraction words its own way in the words
        it reads it from: a named range's other end (``python 3.12``) by the range
        restated (``python 3.8-3.12``), lines (``lines 12-20``) by ``line 12 to 20``, an
        exit code (``exit code 2``) by ``exited with 2`` or ``"exit_code": 2``."""
        named = _NAMED_VERSION.fullmatch(normalized)
        if named is not None:
            return states_range_end(self.folded, *named.groups())
        lines = _LINES.fullmatch(normalized)
        if lines is not None:
            return states_lines(self.folded, *lines.groups())
        code = _EXIT_CODE.fullmatch(normalized)
        if code is None:
            return False
        if self._exit_codes is None:  # read once per text: many facts ask
            self._exit_codes = stated_exit_codes(self.folded)
        value = code_value(code.group(1))
        return value is not None and value in self._exit_codes

    def _states_elided(self, normalized: str) -> bool:
        """:func:`.factelided.states_elided`, kept among a long text's answers under
        JOIN + the needle (no normalized fact holds JOIN: no other key is one)."""
        answers = self._answers
        if answers is None:
            return states_elided(self.folded, normalized)
        key = (False, False, False, JOIN + normalized)
        found = answers.get(key)
        if found is None:
            found = answers[key] = states_elided(self.folded, normalized)
        return found

    def _holds(self, cased: bool, path: bool, normalized: str, windows: bool) -> bool:
        answers = self._answers
        if answers is None:
            text = self.cased if cased else self.folded
            return contains(text, normalized, path=path, windows=windows)
        key = (cased, path, windows, normalized)
        found = answers.get(key)
        if found is None:
            text = self.cased if cased else self.folded
            found = self._may_hold(cased, text, normalized) and contains(
                text, normalized, path=path, windows=windows
            )
            answers[key] = found
        return found

    def _may_hold(self, cased: bool, text: str, needle: str) -> bool:
        """False when a character of `needle` is nowhere in `text`, else True.

        Most needles checked against a long text are absent (the facts a summary
        dropped, the commands of other turns), and a failed search reads the whole
        text (~3 ms per 10 MB). Whether a character occurs is a memchr (~0.1 ms when
        it does not), asked once per character and text: many needles share them.
        """
        present = self._present
        for char in set(needle):
            seen = present.get((cased, char))
            if seen is None:
                seen = present[(cased, char)] = char in text
            if not seen:
                return False
        return True


class _LongHaystacks:
    """The process's prepared long texts (least recently used first out), at most
    `limit_chars` characters of text (each kept with its two normalized forms)."""

    def __init__(self, limit_chars: int = 24 * 1024 * 1024) -> None:
        self.limit_chars = limit_chars
        self._items: OrderedDict[str, Haystack] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, text: str, forms_of: FormsOf | None = None) -> Haystack:
        with self._lock:
            found = self._items.get(text)
            if found is not None:
                self._items.move_to_end(text)
                return found
        hay = Haystack(text, forms_of(text) if forms_of is not None else None)
        with self._lock:
            if text not in self._items:
                self._items[text] = hay
                self._chars += len(text)
            while self._chars > self.limit_chars and len(self._items) > 1:
                old, _ = self._items.popitem(last=False)
                self._chars -= len(old)
        return hay

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._chars = 0

    def __len__(self) -> int:
        return len(self._items)


#: the process's shared haystacks of long texts (:func:`prepared`)
LONG_HAYSTACKS = _LongHaystacks()


def prepared(text: str, forms_of: FormsOf | None = None) -> Haystack:
    """A :class:`Haystack` of `text`: shared by the process when `text` is long (its
    normal forms asked of `forms_of` first: None, they are made)."""
    return LONG_HAYSTACKS.get(text, forms_of) if len(text) >= LONG_TEXT else Haystack(text)


def _spans_texts(needle: str) -> bool:
    """Whether `needle` may match across a JOIN: empty, holding one, or edge blanks."""
    return not needle or JOIN in needle or needle.strip() != needle


class JoinedHaystack:
    """Texts checked as if joined by :data:`JOIN` into one :class:`Haystack`, cheaper.

    Short texts are joined as before; each long text is its own :func:`prepared`
    haystack (normalized once per process, answers remembered). The answer is the
    joined haystack's: normalizing is per character and collapses whitespace, so the
    normalized join is the normalized texts joined (give or take one space next to a
    JOIN), a word-bounded match of a needle without JOIN and without edge whitespace
    lies inside one text, and JOIN and the string ends are both non-word neighbours.
    Any other needle is checked in the real join (built when first needed).
    """

    __slots__ = ("_hays", "_joined", "texts")

    def __init__(self, texts: Sequence[str], forms_of: FormsOf | None = None) -> None:
        self.texts = list(texts)
        self._joined: Haystack | None = None
        self._hays = [prepared(t, forms_of) for t in self.texts if len(t) >= LONG_TEXT]
        short = [t for t in self.texts if len(t) < LONG_TEXT]
        if short:
            self._hays.insert(0, Haystack(JOIN.join(short)))

    def holds(self, kind: str, normalized: str, windows: bool = False) -> bool:
        """What ``Haystack(JOIN.join(texts)).holds(kind, normalized, windows)`` answers."""
        if self._joined is None and _spans_texts(normalized):
            self._joined = Haystack(JOIN.join(self.texts))
        if self._joined is not None:
            return self._joined.holds(kind, normalized, windows)
        return any(hay.holds(kind, normalized, windows) for hay in self._hays)


def joined_haystack(
    texts: Sequence[str], forms_of: FormsOf | None = None
) -> Haystack | JoinedHaystack:
    """What checks `texts` as one :data:`JOIN`-joined text: that :class:`Haystack` when
    every text is short (as before), else a :class:`JoinedHaystack` (`forms_of`: see
    :func:`prepared`)."""
    if all(len(t) < LONG_TEXT for t in texts):
        return Haystack(JOIN.join(texts))
    return JoinedHaystack(texts, forms_of)


def fact_in_text(fact: Fact, text: str | Haystack) -> bool:
    """Whether `text` still states `fact` (normalized, word-bounded match)."""
    hay = text if isinstance(text, Haystack) else Haystack(text)
    return hay.holds(fact.kind, fact.normalized, written_windows(fact.value))


def retention(facts: Sequence[Fact], text: str) -> tuple[list[Fact], list[Fact]]:
    """``(kept, lost)``: which `facts` `text` still states, each in the input order."""
    hay = Haystack(text)
    kept: list[Fact] = []
    lost: list[Fact] = []
    for fact in facts:
        (
            kept if hay.holds(fact.kind, fact.normalized, written_windows(fact.value)) else lost
        ).append(fact)
    return kept, lost


def written_windows(value: str) -> bool:
    """Whether a fact's `value` is written with a ``\\`` (a Windows path: ``src\\app.py``
    is ``src/app.py`` normalized, but the extraction reads it glued to a letter as no
    path, so its boundary stays a word's: :func:`.factbounds.contains`)."""
    return "\\" in value


#: leading ``./`` pieces, taken off in one step (a loop of slices was quadratic in a run
#: of them: ``.\\`` repeated over megabytes is one Windows path)
_DOT_SLASHES = re.compile(r"\A(?:\./)+")


def normalize_fact(kind: str, value: str) -> str:
    """The normalized form of a value of `kind` (paths lose ``./``, quotes their quotes).

    A directory path loses its trailing slashes, except that a one-name directory
    (``build/``) keeps one: without it, it would be the bare word ``build``, stated by
    any summary that says "build" (``src/build/``, ``src/build`` name theirs as paths).
    """
    text = normalize_cased(value) if kind in CASE_SENSITIVE_KINDS else normalize(value)
    if kind == "path":
        text = _DOT_SLASHES.sub("", text, count=1)
        stripped = text.rstrip("/")
        if stripped:  # (``/`` itself stays)
            one_name_dir = stripped != text and "/" not in stripped
            text = stripped + "/" if one_name_dir else stripped
    elif kind == "quoted":
        text = _unwrapped(text)
    return text


def _unwrapped(text: str) -> str:
    """A quoted value without the quotes around it: one pair (``'other'`` is ``other``),
    or equal runs of one quote character at both ends (a docstring's three, a code
    span's two backticks); two ``"`` or ``'`` are an empty string, no delimiter
    (``"" or ""`` loses one pair). A quote that only ends it is its own (``sku=""``
    stays: without them it would be ``sku=``, stated by ``sku="bar"``)."""
    quote = text[:1]
    if len(text) >= 2 and quote in "\"'`" and text[-1] == quote:
        lead = len(text) - len(text.lstrip(quote))
        run = min(lead, len(text) // 2) if lead == len(text) - len(text.rstrip(quote)) else 1
        run = 1 if run == 2 and quote != "`" else run
        text = text[run:-run]
    return text.strip()


def _string_leaves(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _string_leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _string_leaves(item)


def fact_text(message: Mapping[str, Any]) -> str:
    """What a message states, as facts are matched in: its text and its calls' decoded arguments.

    The text parts of the content, then per tool call its name and every string value
    of its arguments (decoded from JSON, so escapes read as the tool received them).
    """
    pieces: list[str] = []
    content = message.get("content")
    if isinstance(content, str):
        pieces.append(content)
    elif isinstance(content, list):
        pieces.extend(
            part["text"]
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    for call in message.get("tool_calls") or ():
        name, args = call_name_and_args(call)
        pieces.append(name)
        pieces.extend(_string_leaves(args))
    return "\n".join(pieces)
