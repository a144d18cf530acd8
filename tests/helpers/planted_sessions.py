"""Generated agent sessions with planted facts, and a truth check of the audit's verdicts
that uses no ctxledger fact code (session 46).

:func:`planted_session` writes one session: a task, then turns in which an agent runs
commands and reads tool outputs, with facts of every kind the extractor knows planted
in varied surroundings (prose, code blocks, JSON tool outputs, tables, non-ASCII text,
pytest output). Each planted fact is a :class:`Planted` (its kind and exact value).

:func:`truth_check` compacts the session with the offline summarizer (and, to make
losses, a lossy variant that drops and mangles lines of the offline summary), audits
the compaction, and compares the audit's verdict on each planted fact with
:func:`present`: plain substring search with boundary rules of its own, on the text of
the view after the compaction. A planted fact the audit did not extract is *missed*
(counted apart); a verdict that differs from the checker's is *false*.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

import anyio

from ctxledger.analysis.audit import audit_chain
from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.ledger.compaction import compact
from helpers.ledger_helpers import deterministic_ledger

WORDS = ["alpha", "bravo", "delta", "ember", "frost", "gamma", "harbor", "ivory", "juniper"]
WORDS += ["kettle", "lumen", "mortar", "nectar", "orbit", "pylon", "quartz", "raven"]
EXTENSIONS = [".py", ".json", ".yaml", ".sql", ".md", ".toml", ".cfg", ".txt"]
NON_ASCII = ["修改了", "ファイル", "Überprüfung", "проверка", "café"]
#: the surroundings a turn plants its facts in
SHAPES = ["prose", "code", "json", "table", "non_ascii", "pytest", "error", "url", "grep"]
SHAPES += ["windows", "link", "quoted", "version"]


@dataclass(frozen=True)
class Planted:
    """A fact written into a session: its kind and its exact value."""

    kind: str
    value: str


@dataclass
class Session:
    """A generated session's messages and the facts planted in them."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    planted: list[Planted] = field(default_factory=list)


def _call(call_id: str, command: str) -> dict[str, Any]:
    arguments = json.dumps({"command": command})
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": arguments}}


class _Writer:
    """One session's turns, each planting a few facts (seeded)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.session = Session()
        self.used: set[str] = set()
        self.calls = 0

    def word(self) -> str:
        return self.rng.choice(WORDS)

    def fresh(self, make: Any) -> str:
        """A value not planted before (each fact is one value): `make` is a callable, or
        a template whose ``{w}``, ``{v}`` are words (``{W}``, ``{V}`` titled) and ``{n}`` a
        number below 1,000."""
        for _ in range(50):
            if callable(make):
                value = str(make())
            else:
                w, v = self.word(), self.word()
                value = make.format(w=w, v=v, W=w.title(), V=v.title(), n=self.rng.randrange(1000))
            if value not in self.used and not any(value in u or u in value for u in self.used):
                self.used.add(value)
                return value
        raise RuntimeError("no fresh value")

    def plant(self, kind: str, value: str) -> str:
        self.session.planted.append(Planted(kind, value))
        return value

    # ------------------------------------------------------------------ values
    def path(self) -> str:
        shape = self.rng.choice(
            ["src/{w}/{v}_{n}", "/etc/{w}/{v}{n}", "docs/{w}-{v}{n}", "{w}/{v}{n}"]
        )
        return self.plant("path", self.fresh(shape + self.rng.choice(EXTENSIONS)))

    def url(self) -> str:
        return self.plant("url", self.fresh("https://{w}.example.org/{v}/{n}"))

    def identifier(self) -> str:
        shape = "{w}_{v}_{n}" if self.rng.random() < 0.5 else "{W}{V}{n}"
        return self.plant("identifier", self.fresh(shape))

    def number(self) -> str:
        rng = self.rng
        forms = [
            lambda: f"port {rng.randrange(10, 65536)}",
            lambda: f"line {rng.randrange(1, 9999)}",
            lambda: f"{rng.randrange(1, 500)} {rng.choice(['passed', 'failed', 'files'])}",
            lambda: f"localhost:{rng.randrange(1000, 65536)}",
            lambda: f"${rng.randrange(1, 999)}.{rng.randrange(100):02d}",
            lambda: f"2024-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}",
        ]
        return self.plant("number", self.fresh(rng.choice(forms)))

    def error(self) -> str:
        name = self.rng.choice(["ValueError", "KeyError", "TypeError", "RuntimeError"])
        return self.plant("error", self.fresh(name + ": {w} {v} {n} is invalid"))

    def command(self) -> str:
        return self.plant("command", self.fresh("python -m {w}_{n} --{v}"))

    # ------------------------------------------------------------------ turns
    def tool_turn(self, command: str, output: str, thought: str) -> None:
        self.calls += 1
        cid = f"call_{self.calls}"
        self.session.messages += [
            {"role": "assistant", "content": thought, "tool_calls": [_call(cid, command)]},
            {"role": "tool", "tool_call_id": cid, "content": output},
        ]

    def turn(self) -> None:
        shape = self.rng.choice(SHAPES)
        getattr(self, f"_{shape}")()

    def _prose(self) -> None:
        path, ident, number = self.path(), self.identifier(), self.number()
        text = f"I opened {path} and renamed `{ident}`; the service listens on {number} now."
        self.tool_turn(self.command(), f"ok {self.rng.randrange(9)}", text)

    def _code(self) -> None:
        path, ident = self.path(), self.identifier()
        text = (
            f"```python\nfrom {self.word()} import {ident}\nOPEN = {path!r}\n```\nThat is {path}."
        )
        self.session.messages.append({"role": "assistant", "content": text})

    def _json(self) -> None:
        path, url, number = self.path(), self.url(), self.number()
        output = json.dumps({"file": path, "source": url, "note": f"bound to {number}"}, indent=2)
        self.tool_turn(self.command(), output, "Reading the manifest.")

    def _table(self) -> None:
        rows = [f"| {self.path()} | {self.rng.randrange(99)} |" for _ in range(3)]
        text = "| file | hits |\n|---|---|\n" + "\n".join(rows)
        self.session.messages.append({"role": "assistant", "content": text})

    def _non_ascii(self) -> None:
        path, ident = self.path(), self.identifier()
        word = self.rng.choice(NON_ASCII)
        text = f"{word} {path} — {word} `{ident}` ({self.rng.choice(NON_ASCII)})."
        self.session.messages.append({"role": "assistant", "content": text})

    def _pytest(self) -> None:
        test = self.plant(
            "path", self.fresh(lambda: f"tests/test_{self.word()}{self.rng.randrange(99)}.py")
        )
        data = self.path() if self.rng.random() < 0.5 else None
        param = f"[{data}-{self.rng.randrange(9)}]" if data else ""
        output = (
            f"{test}::test_{self.word()}{param} FAILED\n"
            f"E   {self.error()}\n"
            f"1 failed, {self.rng.randrange(2, 40)} passed in 0.5s"
        )
        self.tool_turn(f"python -m pytest -q {test}", output, "Running the tests.")

    def _error(self) -> None:
        error, path = self.error(), self.path()
        output = (
            f'Traceback (most recent call last):\n  File "{path}", line 3, in <module>\n{error}'
        )
        self.tool_turn(self.command(), output, "Reproducing.")

    def _grep(self) -> None:
        path, ident = self.path(), self.identifier()
        n = self.rng.randrange(2, 300)
        output = f"{path}-{n - 1}-# before\n{path}:{n}:def {ident}():\n{path}-{n + 1}-    pass"
        self.tool_turn(f"grep -rn -C1 {ident} .", output, "Searching.")

    def _windows(self) -> None:
        name = self.fresh(lambda: f"{self.word()}{self.rng.randrange(99)}")
        path = self.plant("path", f"C:\\Users\\{name}\\app.py")
        output = json.dumps({"path": path, "size": self.rng.randrange(999)})
        self.tool_turn(self.command(), output, f"Checking {path} on the runner.")

    def _link(self) -> None:
        path = self.path()
        text = f"See [{self.word()}]({path}) and **{self.path()}**, then {self.path()}:{self.rng.randrange(9, 99)}."
        self.session.messages.append({"role": "assistant", "content": text})

    def _quoted(self) -> None:
        value = self.fresh(lambda: f"{self.word()} {self.word()} {self.rng.randrange(99)}")
        self.plant("quoted", value)
        text = f'The config key must read "{value}" exactly; {self.number()} stays.'
        self.session.messages.append({"role": "assistant", "content": text})

    def _version(self) -> None:
        rng = self.rng
        version = self.plant(
            "number",
            self.fresh(lambda: f"v{rng.randrange(1, 9)}.{rng.randrange(30)}.{rng.randrange(30)}"),
        )
        text = f"Pinned {self.word()} at {version}, {self.number()} unchanged."
        self.session.messages.append({"role": "assistant", "content": text})

    def _url(self) -> None:
        url = self.url()
        self.session.messages.append(
            {"role": "assistant", "content": f"The upstream notes are at {url} (see the table)."}
        )


def planted_session(seed: int, turns: int = 12) -> Session:
    """One session of `turns` turns with facts planted in them (deterministic in `seed`)."""
    writer = _Writer(seed)
    task = f"Fix the failing build of {writer.word()} without touching its public API."
    writer.session.messages += [
        {"role": "user", "content": task},
        {"role": "assistant", "content": "Starting."},
        {"role": "user", "content": "ok"},
    ]
    for _ in range(turns):
        writer.turn()
    return writer.session


# ---------------------------------------------------------------------- compaction

_FILLER = "The rest of the module was read and left alone. " * 40


class LossySummarizer:
    """The offline summary with lines dropped and planted values mangled (seeded): a
    mangled value is cut short, grown on either side, or glued to more of a name."""

    kind = "lossy"

    def __init__(self, seed: int, planted: list[Planted]) -> None:
        self.rng = random.Random(seed)
        self.values = sorted({p.value for p in planted}, key=lambda v: (-len(v), v))

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        offline = await OfflineSummarizer().summarize(request)
        lines = []
        for line in offline.text.splitlines():
            roll = self.rng.random()
            if roll < 0.3:
                continue
            if roll < 0.7:
                line = self._mangle(line)
            lines.append(line)
        return SummaryResult(text="\n".join(lines) or "- nothing kept", summarizer=self.kind)

    def _mangle(self, line: str) -> str:
        here = [v for v in self.values if v in line]
        if not here:
            return line
        value = self.rng.choice(here)
        mangles = [
            value[:-1],
            value[:-2],
            value[1:],
            value + "x",
            value + "_old",
            value + "-old",
            value + ".bak",
            value + "9",
            value + ".5",
            "x" + value,
            "old/" + value,
            "/" + value,
            value + "/more",
            value + "--/more",
            value + "-12-more",
            value + "-/more",
            value + "~",
            value + "!",
            value + "'s",
            value + ".",
            value + ",",
            value + ":12",
            value + ")",
            "./" + value,
            value.upper(),
            f"`{value}`",
            f"({value})",
            value.replace("/", " / ", 1),
            value.replace("_", "-", 1),
            value.replace(" ", "  ", 1),
        ]
        return line.replace(value, self.rng.choice(mangles))


class DecoratingSummarizer(LossySummarizer):
    """The offline summary with planted values decorated in ways that keep them (no
    line dropped): bold, emphasis, a CJK full stop or brackets, a dash, a zero-width
    space after it. Every planted fact stays kept (session 46's review: a URL rule once
    read ``**…/a**`` as more of its name)."""

    kind = "decorating"

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        offline = await OfflineSummarizer().summarize(request)
        lines = [self._decorate(line) for line in offline.text.splitlines()]
        return SummaryResult(text="\n".join(lines), summarizer=self.kind)

    def _decorate(self, line: str) -> str:
        here = [v for v in self.values if v in line]
        if not here or self.rng.random() < 0.3:
            return line
        value = self.rng.choice(here)
        forms = ["**{}**", "{}。", "「{}」", "{}—", "{}*", "{}\u200b", "{}&nbsp;"]
        return line.replace(value, self.rng.choice(forms).format(value))


def compacted(session: Session, summarizer: Any) -> tuple[Any, list[dict[str, Any]]]:
    """The audit of compacting `session` (its turns in the middle) with `summarizer`,
    and the view after the compaction (the new session's messages)."""
    ledger = deterministic_ledger()
    sid = ledger.start_session(model="m", context_length=16_000, system_prompt="You fix bugs.")
    ledger.append_messages(sid, [dict(m) for m in session.messages])
    for i in range(12):
        ledger.append_messages(
            sid,
            [
                {"role": "assistant", "content": f"Step {100 + i} done. {_FILLER}"},
                {"role": "user", "content": f"continue {i}"},
            ],
        )
    outcome = anyio.run(lambda: compact(ledger, sid, summarizer))
    assert outcome.action == "compressed"
    audit = audit_chain(ledger, sid).compactions[0]
    return audit, ledger.api_messages(outcome.new_session_id or sid)


# ---------------------------------------------------------------------- the checker

_SPACES = re.compile(r"\s+")
_WORD = re.compile(r"\w")
_ALNUM = re.compile(r"[A-Za-z0-9]")


def view_text(messages: list[dict[str, Any]]) -> str:
    """Every message's text and every tool call's command, one per line."""
    texts = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [part.get("text", "") for part in content if isinstance(part, dict)]
        for call in message.get("tool_calls") or []:
            arguments = json.loads(call["function"]["arguments"] or "{}")
            texts += [str(v) for v in arguments.values()]
    return "\n".join(texts)


def _is(pattern: re.Pattern[str], char: str) -> bool:
    return bool(char) and pattern.match(char) is not None


def present(kind: str, value: str, view: str) -> bool | None:
    """Whether `view` states `value` (checker's own rules): case-folded (but an
    identifier), blanks collapsed; an occurrence counts unless more of a word, name or
    number touches it. A number goes on over ``.5`` or ``,000``. A path is longer when
    a path's character (``.``, ``-``, ``_``, ``~``) comes before it, a ``/`` or a word
    character before an absolute path (``x/etc/a`` is relative), or after it a ``~`` or a
    ``.``/``-`` then a letter or digit (``a.py~``, ``a.py.bak``, ``a.py-old``); a ``/``
    after it states it (the folder of what follows, as the product's contract has it).
    A path with ``\\`` is also stated with each doubled (a JSON string's escapes). A
    URL is kept by one under it, its query or part (``…/a/b``, ``…/a?q``, ``…/a#p``,
    ``…/a:12``, as the product's contract has it) and where a blank, a quote, or
    closing marks then a blank or a quote follow; anything else after it makes another
    resource (``…/a-old``, ``…/a.bak``).

    None (not judged) when the only occurrences are a path followed by dashes then a
    line number and a dash (``a.py-12-x``: grep's context line, or a longer name) or by
    dashes then a ``/`` (``a.py--/x``: see ``docs/notes/s46-audit11.md``)."""
    fold = (lambda t: t) if kind == "identifier" else str.casefold  # (``Foo`` is not ``foo``)
    text = fold(_SPACES.sub(" ", view))
    needle = fold(_SPACES.sub(" ", value))
    needles = [needle]
    if kind == "path" and "\\" in needle:  # a JSON string's escaped backslashes: one path
        needles.insert(0, needle.replace("\\", "\\\\"))
    found: bool | None = False
    for one in needles:
        at = text.find(one)
        while at != -1:
            judged = _bounded(kind, one, text, at)
            if judged:
                return True
            found = None if judged is None else found
            at = text.find(one, at + 1)
    return found


#: after a path: dashes then a line number and a dash, or dashes then a ``/``
_UNJUDGED = re.compile(r"-+(?:[0-9]+-|/)")


def _bounded(kind: str, needle: str, text: str, at: int) -> bool | None:
    before = text[at - 1] if at else ""
    end = at + len(needle)
    after, after2 = (text[end : end + 1].strip(), text[end + 1 : end + 2].strip())
    if _is(_WORD, needle[0]) and _is(_WORD, before):
        return False
    if _is(_WORD, needle[-1]) and _is(_WORD, after):
        return False
    if needle[-1].isdigit() and after in ".," and after2.isdigit():
        return False  # more of a number (``86.5``, ``1,000``)
    if kind == "path":
        # a longer name: a path's character before it, a ``/`` before an absolute one,
        # a dot or dash and more after it; a ``/`` after it names a folder it is (kept)
        absolute = needle[0] == "/"
        if (before and before in ".-~") or (absolute and (before == "/" or _is(_WORD, before))):
            return False
        if _UNJUDGED.match(text, end):
            return None
        if after == "~" or (after and after in ".-" and _is(_ALNUM, after2)):
            return False  # (``a.py~`` is an editor's backup, another file)
    if kind == "url" and after and needle[-1] != "/" and after not in "/?#:" + _QUOTES:
        # (under it, its query or part: kept, the path rule; session 40's decision)
        return not _url_name_goes_on(text, end)
    return True


_QUOTES = "\"'`<"


def _url_name_goes_on(text: str, end: int) -> bool:
    """Whether more of a URL's last name follows `end`: past sentence marks and
    underscores, an ASCII letter or digit or one of ``-~%+`` (``…/a.bak``, ``…/a_old``,
    ``…/a-old``). Anything else ends the URL: emphasis ``*``, a non-ASCII mark or space
    (``。``, ``」``, ``—``, a zero-width space), ``&``, a bracket."""
    at = end
    while at < len(text) and text[at] in ".;:!?_":
        at += 1
    char = text[at : at + 1]
    return char.isascii() and (char.isalnum() or (char != "" and char in "-~%+"))


@dataclass
class Tally:
    """What a truth check counted, and its false verdicts (kind, value, verdict)."""

    sessions: int = 0
    planted: int = 0
    verdicts: int = 0
    kept: int = 0
    lost: int = 0
    missed: list[Planted] = field(default_factory=list)
    unjudged: list[Planted] = field(default_factory=list)
    false: list[tuple[str, str, str, str]] = field(default_factory=list)


def truth_check(seed: int, summarizer: Any, tally: Tally, turns: int = 12) -> None:
    """Compact one planted session with `summarizer` and add its verdicts to `tally`."""
    session = planted_session(seed, turns)
    audit, view = compacted(session, summarizer(seed, session.planted))
    text = view_text(view)
    verdicts = {f.value.casefold(): f in audit.kept for f in audit.extracted}
    tally.sessions += 1
    for fact in session.planted:
        tally.planted += 1
        kept = verdicts.get(fact.value.casefold())
        if kept is None:
            tally.missed.append(fact)
            continue
        tally.verdicts += 1
        tally.kept += kept
        tally.lost += not kept
        truth = present(fact.kind, fact.value, text)
        if truth is None:
            tally.unjudged.append(fact)
        elif kept != truth:
            verdict = "kept" if kept else "lost"
            tally.false.append((fact.kind, fact.value, verdict, _around(fact.value, text)))


def _around(value: str, text: str) -> str:
    """Where `value` (or its start) stands in `text`, for a false verdict's report."""
    folded, found = text.casefold(), []
    for probe in (value, value[: max(4, len(value) // 2)]):
        at = folded.find(probe.casefold())
        while at != -1 and len(found) < 3:
            found.append(text[max(0, at - 30) : at + len(value) + 30])
            at = folded.find(probe.casefold(), at + 1)
        if found:
            break
    return " | ".join(found)


def offline(seed: int, planted: list[Planted]) -> OfflineSummarizer:
    return OfflineSummarizer()
