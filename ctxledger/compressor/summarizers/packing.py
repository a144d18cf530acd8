"""Packing the offline summary under its budget: ranked section lines, then facts.

:func:`pack` takes the candidate :class:`Line` s of every section (lower rank first)
and the salient facts the lines do not state, cheapest per value first, and renders
the handoff template; the exact token count has the last word (the latest additions
are dropped until the text fits). With a focus topic, the topic's lines and then its
facts fill the focus share first and the rest of the budget is spent as without one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ctxledger.compressor.facts import Fact, normalize, retention
from ctxledger.compressor.summarizers.base import render_sections
from ctxledger.tokens import count_text

__all__ = ["FOCUS_LINE_SHARE", "FOCUS_SHARE", "STRUCTURE_SHARE", "Line", "pack"]

STRUCTURE_SHARE = 0.45  # ranked section lines may fill this share before facts are packed
FOCUS_SHARE = 0.65  # HERMES_SPEC §3: the focus topic gets ~60–70 % of the budget
FOCUS_LINE_SHARE = 0.25  # of which the lines about the topic may take this much first


@dataclass(order=True)
class Line:
    """A candidate line of one section; lower ``rank`` is taken first."""

    rank: float
    order: int
    section: str = field(compare=False)
    text: str = field(compare=False)
    number: int | None = field(default=None, compare=False)
    tokens: int = field(default=0, compare=False)
    focus: bool = field(default=False, compare=False)


# --------------------------------------------------------------------------- packing

# Facts are packed cheapest first (more facts per token), errors and then commands and
# paths counted as cheaper than they are, recent ones slightly ahead of old ones.
#: what one fact of a kind is worth to a continuation, relative to a number
_KIND_VALUE = {
    "error": 4.0,
    "edit": 3.5,
    "outcome": 3.0,
    "constraint": 2.0,
    "decision": 1.5,
    "command": 2.0,
    "path": 2.0,
    "url": 1.5,
    "identifier": 1.2,
    "number": 1.0,
    "quoted": 1.0,
    "ask": 2.0,
}
_KIND_LABEL = {
    "error": "errors",
    "edit": "edited lines",
    "outcome": "outcomes",
    "constraint": "constraints",
    "decision": "decisions",
    "command": "commands",
    "path": "paths",
    "url": "urls",
    "identifier": "identifiers",
    "number": "numbers",
    "quoted": "values",
    "ask": "asks",
}


def _fact_text(fact: Fact) -> str:
    return f"`{fact.value}`" if fact.kind == "command" else fact.value


class _PricedFact(NamedTuple):
    """A fact as the summary states it, with its exact token count."""

    kind: str
    text: str
    tokens: int


class _Packer:
    """Chooses lines and facts under the budget; the exact count has the last word."""

    def __init__(
        self, required: dict[str, list[str]], preamble: str, budget: int, first_number: int
    ) -> None:
        self.required = required
        self.first_number = first_number
        self.preamble = preamble
        self.budget = budget
        self.chosen: list[Line] = []
        self.facts: dict[str, list[str]] = {}
        self.log: list[tuple[str, Any]] = []  # additions in order, undone from the end
        self.seen: set[str] = set()
        self.used = count_text(self.render())

    def render(self) -> str:
        sections: dict[str, list[str]] = {k: list(v) for k, v in self.required.items()}
        completed = sorted(
            (ln for ln in self.chosen if ln.section == "completed"),
            key=lambda ln: (ln.number if ln.number is not None else -1, ln.order),
        )
        others = sorted(
            (ln for ln in self.chosen if ln.section != "completed"), key=lambda ln: ln.order
        )
        previous: int | None = self.first_number - 1
        for line in completed:
            if line.number is not None and previous is not None and line.number > previous + 1:
                sections.setdefault("completed", []).append(
                    f"({previous + 1}–{line.number - 1}: omitted for length; see Critical Context)"
                )
            sections.setdefault("completed", []).append(line.text)
            previous = line.number if line.number is not None else previous
        for line in others:
            sections.setdefault(line.section, []).append(line.text)
        for kind, values in self.facts.items():
            sections.setdefault("critical", []).append(
                f"- {_KIND_LABEL[kind]}: {' · '.join(values)}"
            )
        return render_sections(sections, self.preamble)

    def fits(self, tokens: int) -> bool:
        return self.used + tokens <= self.budget

    def take_line(self, line: Line) -> bool:
        key = normalize(line.text)
        if key in self.seen or not self.fits(line.tokens):
            return False
        self.seen.add(key)
        self.chosen.append(line)
        self.log.append(("line", line))
        self.used += line.tokens
        return True

    def take_fact(self, fact: _PricedFact) -> bool:
        new_kind = fact.kind not in self.facts
        cost = fact.tokens + 1 + (4 if new_kind else 0)
        if not self.fits(cost):
            return False
        self.facts.setdefault(fact.kind, []).append(fact.text)
        self.log.append(("fact", fact.kind))
        self.used += cost
        return True

    def finish(self) -> str:
        """The rendered text, dropping the latest additions until the exact count fits."""
        text = self.render()
        while count_text(text) > self.budget and self.log:
            kind, item = self.log.pop()
            if kind == "line":
                self.chosen.remove(item)
            else:
                self.facts[item].pop()
                if not self.facts[item]:
                    del self.facts[item]
            text = self.render()
        return text


def _fact_order(facts: Sequence[Fact], total_messages: int) -> list[_PricedFact]:
    """Facts by value per token: kind weight, recency, and diminishing returns per message.

    A pure count of facts would favour a log's hundred cheap ``line N`` numbers over
    the one exception line a continuation needs; each further fact from the same
    message is worth less, and errors, commands and paths are worth more. Each fact
    is tokenized once, here; the packer takes the count along.
    """
    seen_in_message: dict[int, int] = {}
    priced: list[_PricedFact] = []
    scored: list[tuple[int, float, int]] = []
    for order, fact in enumerate(facts):
        k = seen_in_message.get(fact.message_index, 0)
        seen_in_message[fact.message_index] = k + 1
        recency = fact.message_index / max(1, total_messages)
        value = _KIND_VALUE[fact.kind] * (1.0 + recency) / (1.0 + 0.2 * k)
        text = _fact_text(fact)
        tokens = count_text(text)
        priced.append(_PricedFact(fact.kind, text, tokens))
        scored.append((0, -value / max(1, tokens), order))
    return [priced[i] for _, _, i in sorted(scored)]


def pack(
    required: dict[str, list[str]],
    preamble: str,
    candidates: Sequence[Line],
    facts: Sequence[Fact],
    budget: int,
    total_messages: int,
    focus_messages: set[int] | None = None,
) -> str:
    numbers = [
        ln.number for ln in candidates if ln.section == "completed" and ln.number is not None
    ]
    packer = _Packer(required, preamble, budget, min(numbers, default=1))
    structure_cap = packer.used + int(budget * STRUCTURE_SHARE)
    focus_cap = packer.used + int(budget * FOCUS_SHARE)
    lines = sorted(candidates)
    if focus_messages:
        # the topic first: its lines (answers, actions), then its facts, up to the focus share
        lines_cap = packer.used + int(budget * FOCUS_LINE_SHARE)
        # what was said about the topic (answers, errors, choices) before what was done
        said = ("resolved", "pending", "blocked", "decisions", "constraints", "goal")
        for line in sorted((ln for ln in lines if ln.focus), key=lambda ln: ln.section not in said):
            if packer.used + line.tokens <= lines_cap:
                packer.take_line(line)
        _, missing = retention(
            [f for f in facts if f.message_index in focus_messages], packer.render()
        )
        for fact in _fact_order(missing, total_messages):
            if packer.used + fact.tokens + 5 <= focus_cap:
                packer.take_fact(fact)
        # the rest of the budget is spent as before
        structure_cap = packer.used + int((budget - packer.used) * STRUCTURE_SHARE)
    deferred: list[Line] = []
    for line in lines:
        if line.rank >= 5 and packer.used + line.tokens > structure_cap:
            deferred.append(line)
        else:
            packer.take_line(line)
    _, lost = retention(facts, packer.render())
    for fact in _fact_order(lost, total_messages):
        packer.take_fact(fact)
    for line in deferred:
        packer.take_line(line)
    return packer.finish()
