"""The embedded default summarizer: deterministic, no network, same template as the LLM.

It reads the middle turns (redacted first) and fills every section of the handoff
structure (``base.SECTIONS``) from what it can see: the latest user ask verbatim
(Active Task), the first ask (Goal), one numbered line per tool call with its outcome
(Completed Actions), unresolved errors verbatim (Blocked), files touched, decisions,
answered and unanswered questions, and — in whatever room is left — the salient
facts of ``ctxledger.compressor.facts`` that the sections did not already state (Critical
Context).

The summary never exceeds ``budget_tokens`` (exact ``ctxledger.tokens.count_text``):
candidate lines are ranked, the cheap high-value ones are taken first, and lines are
dropped — never headings — until the exact count fits. Because it is judged by how
many facts of the middle it keeps, low-value prose goes first and facts are packed
densely.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ctxledger.compressor.factasks import states_no_task
from ctxledger.compressor.factkinds import decision_sentences
from ctxledger.compressor.factmatch import fact_text
from ctxledger.compressor.facts import Fact, extract_facts, find_paths, normalize
from ctxledger.compressor.markers import unwrap_summary
from ctxledger.compressor.redact import redact, redact_message
from ctxledger.compressor.summarizers.analysis import (
    Analysis,
    analyse,
    call_arguments,
    cap,
    collapse,
    sentences,
)
from ctxledger.compressor.summarizers.base import (
    SECTION_KEYS,
    SummaryRequest,
    SummaryResult,
    parse_sections,
    request_hash,
)
from ctxledger.compressor.summarizers.packing import Line, pack
from ctxledger.messages import JSON, content_text
from ctxledger.tokens import count_text

RECENT_ACTIONS = 3  # always ranked with the important sections
_MAX_LISTED = 25  # files per Relevant Files line (the most recent ones)
ASK_SHARE = 0.35  # at most this share of the budget for the verbatim Active Task

_CD = re.compile(r"(?:^|&&|;|\|\|)\s*cd\s+([^\s;&|]+)")
_BRANCH = re.compile(
    r"git (?:checkout -b|switch -c|checkout|switch)\s+([\w./\-]+)|On branch ([\w./\-]+)"
)
_WRITES = re.compile(
    r"(?:cat|tee|echo[^>\n]*|printf[^>\n]*)\s*>{1,2}\s*([^\s;&|<>]+)|sed -i\S*\s+(?:'[^']*'|\"[^\"]*\"|\S+)\s+([^\s;&|]+)"
)
_BACKGROUND = re.compile(
    r"(?:&\s*$|\bnohup\b|\brunserver\b|\buvicorn\b|\bnpm (?:run )?(?:start|dev)\b|\bserve\b)"
)
_TEST_STATUS = re.compile(
    r"(?m)^=*\s*((?:\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|warnings?)(?:, )?)+)(?: in [\d.]+s)?\s*=*\s*$"
    r"|^(Ran \d+ tests? in [\d.]+s)\s*$|^(OK(?: \([^)]*\))?|FAILED \((?:failures|errors)=[^)]*\))\s*$"
)
_DECISION = re.compile(
    r"\b(?:because|decided|decide to|instead|will use|I'll use|chose|opted|rather than|so that|the fix is|the issue is|root cause)\b",
    re.I,
)
_CONSTRAINT = re.compile(
    r"\b(?:don't|do not|never|always|must|should|prefer|only|without|make sure|avoid|keep|no more than|at most|at least)\b",
    re.I,
)
_PLAN = re.compile(
    r"\b(?:next|then I'll|then I will|remaining|still need|need to|todo|let me|I'll now|I will now)\b",
    re.I,
)
_QUESTION_START = re.compile(
    r"^\s*(?:can|could|would|will|should|is|are|do|does|did|what|why|how|when|where|which|who)\b",
    re.I,
)


# --------------------------------------------------------------------------- candidates


class _Candidates:
    def __init__(self, focus: str | None) -> None:
        self.lines: list[Line] = []
        words = [w for w in re.findall(r"\w{3,}", (focus or "").casefold())]
        self.focus_phrase = normalize(focus or "")
        self.focus_words = words
        self._order = 0

    def is_focus(self, text: str) -> bool:
        if not self.focus_phrase:
            return False
        lowered = normalize(text)
        if self.focus_phrase in lowered:
            return True
        hits = sum(1 for w in self.focus_words if w in lowered)
        return bool(self.focus_words) and hits * 2 >= len(self.focus_words)

    def add(self, section: str, rank: float, text: str, number: int | None = None) -> None:
        self._order += 1
        focus = self.is_focus(text)
        self.lines.append(
            Line(
                rank,
                self._order,
                section,
                text,
                number,
                count_text(text) + 1,
                focus,
            )
        )


def _question(text: str) -> bool:
    return "?" in text or bool(_QUESTION_START.match(text))


def _answered_after(index: int, analysis: Analysis) -> str | None:
    """The first assistant text reply after message `index`, if there is one."""
    return next((t for i, t in analysis.assistant_texts if i > index), None)


def _ask_lines(analysis: Analysis, c: _Candidates) -> None:
    """Goal (first ask), questions (pending / resolved), constraints, other asks.

    The latest ask is the Active Task and appears nowhere else, so it is stated once.
    """
    asks = analysis.asks
    if not asks:
        return
    if len(asks) == 1:
        c.add("goal", 1, "- Same as the Active Task.")
    else:
        c.add("goal", 1, f'- First request in these turns: "{cap(asks[0][1], 400)}"')
    resolved: list[str] = []
    for index, text in asks[1:-1]:
        if _question(text):
            reply = _answered_after(index, analysis)
            if reply is None:
                c.add("pending", 3.5, f'- "{cap(text, 300)}"')
            else:
                resolved.append(f'- Q: "{cap(text, 300)}" A: {cap(reply, 160)}')
        else:
            c.add("goal", 8, f'- User said: "{cap(text, 300)}"')
    for position, line in enumerate(resolved):
        # the newest answer competes with the structure (the user must not ask it again)
        c.add("resolved", 4.9 if position == len(resolved) - 1 else 6.5, line)
    for _, text in asks[:-1]:
        for sentence in sentences(text, _CONSTRAINT, 200):
            if sentence != collapse(text):  # a one-sentence ask is already quoted whole
                c.add("constraints", 4, f"- {sentence}")


def _action_lines(analysis: Analysis, c: _Candidates, first_number: int) -> None:
    """Completed Actions (numbered), Blocked (errors not followed by a success)."""
    total = max(1, len(analysis.actions))
    succeeded_later: set[str] = set()
    blocked: set[str] = set()
    for position in range(len(analysis.actions) - 1, -1, -1):
        action = analysis.actions[position]
        number = first_number + position
        age = (total - 1 - position) / total  # 0 for the newest action, ~1 for the oldest
        line = f"{number}. {action.verb} {action.target} — {action.outcome} [tool: {action.tool}]"
        # the newest few actions compete with the other sections, older ones for what is left
        rank = (
            3.8 if position >= total - RECENT_ACTIONS else (5.0 if action.failed else 5.5) + 3 * age
        )
        c.add("completed", rank, line, number)
        key = action.target
        if action.failed and key not in succeeded_later:
            for error in action.errors[-3:]:
                if error not in blocked:
                    blocked.add(error)
                    c.add("blocked", 3 + age, f"- {error} (from {cap(action.target, 60)})")
        elif not action.failed:
            succeeded_later.add(key)


def _state_lines(analysis: Analysis, c: _Candidates) -> list[str]:
    """Active State lines, Relevant Files lines; returns the state keys produced."""
    cwd = branch = tests = ""
    modified: dict[str, None] = {}
    read: dict[str, None] = {}
    running: list[str] = []
    for action in analysis.actions:
        for match in _CD.finditer(action.command):
            cwd = match.group(1)
        for match in _BRANCH.finditer(action.command):
            branch = match.group(1) or match.group(2)
        for match in _WRITES.finditer(action.command):
            target = match.group(1) or match.group(2)
            if target and not target.startswith(("/dev/", "&")):
                modified[target] = None
        if action.path:
            edited = action.verb in ("WROTE", "EDITED") or action.edits
            (modified if edited else read)[action.path] = None
        for path in find_paths(action.command):
            read.setdefault(path, None)
        if action.command and _BACKGROUND.search(action.command):
            running.append(cap(action.command, 120))
    for result in analysis.results.values():
        for match in _TEST_STATUS.finditer(result):
            tests = next(g for g in match.groups() if g)
        branch = next((m.group(2) for m in _BRANCH.finditer(result) if m.group(2)), branch)
    keys: list[str] = []
    for key, value in (("cwd", cwd), ("branch", branch), ("tests", tests)):
        if value:
            keys.append(key)
            c.add("active_state", 4.5, f"- {key}: {value}")
    if modified:
        keys.append("modified")
        c.add("active_state", 4.6, f"- modified: {' · '.join(list(modified)[-_MAX_LISTED:])}")
        c.add("files", 4.7, f"- modified: {' · '.join(list(modified)[-_MAX_LISTED:])}")
    for command in running[-3:]:
        c.add("active_state", 5, f"- started (may still run): `{command}`")
    _edit_lines(analysis, c)
    fresh = [p for p in read if p not in modified]
    if fresh:
        c.add("files", 4.8, f"- read or searched: {' · '.join(fresh[-_MAX_LISTED:])}")
    return keys


def _edit_lines(analysis: Analysis, c: _Candidates) -> None:
    """Relevant Files: each edited file with the key line its newest edit introduced."""
    latest: dict[str, str] = {}
    for action in analysis.actions:
        if action.edits and not action.failed:
            target = action.path or next(iter(find_paths(action.command)), "") or action.target
            latest.pop(target, None)
            latest[target] = action.edits[-1]
    items = list(latest.items())[-_MAX_LISTED:]
    for position, (target, line) in enumerate(items):
        age = (len(items) - 1 - position) / max(1, len(items))
        c.add("files", 4.2 + age, f"- edited {cap(target, 120)}: `{line}`")


def _text_lines(analysis: Analysis, c: _Candidates) -> None:
    """Key Decisions (the assistant's stated choices), In Progress, the latest plan only."""
    texts = analysis.assistant_texts
    seen: set[str] = set()
    for position in range(len(texts) - 1, -1, -1):
        age = (len(texts) - 1 - position) / max(1, len(texts))
        for _, sentence in decision_sentences(texts[position][1]):
            if sentence not in seen and not sentence.endswith(":"):
                seen.add(sentence)
                c.add("decisions", 5 + 2 * age, f"- {sentence}")
    # a plan goes stale once the assistant states a new one, or the user asks something new
    last_ask = analysis.asks[-1][0] if analysis.asks else -1
    for index, text in reversed(texts):
        latest = sentences(text, _PLAN, 200)[-2:]
        if latest:
            stale = index < last_ask
            for sentence in latest:
                if stale:
                    c.add(
                        "remaining",
                        8.5,
                        f"- Planned before the latest ask (may no longer apply): {sentence}",
                    )
                else:
                    c.add("remaining", 7.5, f"- The assistant had planned: {sentence}")
            break
    if analysis.last_text:
        c.add("in_progress", 2, f"- Last assistant message: {cap(analysis.last_text, 300)}")
    pending = [a for a in analysis.actions if a.outcome == "no result yet"]
    for action in pending[-2:]:
        c.add(
            "in_progress", 2, f"- Waiting for the result of {action.verb} {cap(action.target, 160)}"
        )


def _previous_sections(previous: str) -> dict[str, list[str]]:
    """An earlier summary's lines by section (unwrapped from its prefix and redacted)."""
    body = unwrap_summary(previous)
    return parse_sections(redact(body if body is not None else previous))


def _previous_lines(
    sections: dict[str, list[str]], analysis: Analysis, c: _Candidates, state_keys: list[str]
) -> int:
    """Merge an earlier summary's items; returns the next Completed Actions number."""
    next_number = 1
    for line in sections.get("completed", []):
        match = re.match(r"\s*(\d{1,9})[.)]", line)  # (5,000 digits: int() raised)
        number = int(match.group(1)) if match else None
        if number is not None:
            next_number = max(next_number, number + 1)
        c.add("completed", 6, line, number)
    replies = " ".join(t for _, t in analysis.assistant_texts).casefold()
    for line in sections.get("pending", []):
        words = re.findall(r"\w{4,}", line.casefold())
        answered = bool(words) and sum(w in replies for w in words) * 2 >= len(words)
        c.add("resolved" if answered else "pending", 4 if not answered else 6.5, line)
    if analysis.asks:
        for line in sections.get("active_task", []):
            c.add("goal", 4.5, f"- Earlier task: {line.strip().removeprefix('- ')}")
    for key in ("goal", "constraints", "decisions", "resolved", "files", "remaining", "blocked"):
        for line in sections.get(key, []):
            c.add(key, 4.5 if key in ("goal", "constraints") else 6.5, line)
    for line in sections.get("active_state", []):
        if line.strip().removeprefix("- ").split(":", 1)[0] not in state_keys:
            c.add("active_state", 5.5, line)
    if not analysis.actions and not analysis.assistant_texts:
        for line in sections.get("in_progress", []):
            c.add("in_progress", 2, line)
    for line in sections.get("critical", []):
        c.add("critical", 7, line)
    return next_number


def _active_task(
    analysis: Analysis, previous: dict[str, list[str]] | None, budget: int
) -> list[str]:
    """The latest ask that states a task, verbatim; a later "continue" or "ok" is told
    after it, never instead of it (it states no task of its own)."""
    latest = analysis.asks[-1][1].strip() if analysis.asks else None
    tasks = [text.strip() for _, text in analysis.asks if not states_no_task(text)]
    if tasks:
        text = tasks[-1]
        limit_chars = max(200, int(budget * ASK_SHARE) * 3)
        if len(text) > limit_chars:
            # Verbatim unless the ask alone would crowd out the rest of the summary.
            omitted = len(text) - limit_chars
            text = f"{text[: limit_chars * 2 // 3]} [… {omitted:,} chars omitted …] {text[-limit_chars // 3 :]}"
        lines = [f'User asked: "{text}"']
    else:
        lines = list((previous or {}).get("active_task", []))
    if latest is not None and latest != (tasks[-1] if tasks else None):
        lines.append(f'User then said: "{latest}"' if lines else f'User asked: "{latest}"')
    return lines


def focus_messages(turns: Sequence[JSON], focus: str | None) -> set[int]:
    """The turns about `focus`: those that mention it, with their tool calls' partners."""
    if not focus or not focus.strip():
        return set()
    probe = _Candidates(focus)
    about = {i for i, m in enumerate(turns) if probe.is_focus(fact_text(m))}
    caller: dict[str, int] = {}
    for i, m in enumerate(turns):
        for call in m.get("tool_calls") or ():
            if isinstance(call, dict):
                caller[str(call.get("id"))] = i
    for i, m in enumerate(turns):
        owner = caller.get(str(m.get("tool_call_id"))) if m.get("role") == "tool" else None
        if owner is not None and (owner in about or i in about):
            about.update((owner, i))
    return about


def _focus_note(focus: str | None, about: set[int], facts: Sequence[Fact]) -> list[str]:
    if not focus or not focus.strip():
        return []
    topic = cap(focus, 80)
    if not about:
        return [f"- Focus requested: {topic} (no summarized turn mentions it; summarized as usual)"]
    n = sum(1 for f in facts if f.message_index in about)
    return [f"- Focus: {topic} ({len(about)} of the summarized turns, {n} facts, packed first)"]


# --------------------------------------------------------------------------- summarizer


def build_summary(request: SummaryRequest, *, preamble: str = "", last_turns: int = 0) -> str:
    """The offline handoff text for `request` (also used by the fallback summary)."""
    turns = [redact_message(m) for m in request.source_turns()]
    budget = max(request.budget_tokens, MIN_BUDGET_TOKENS)
    c = _Candidates(request.focus)
    analysis = analyse(turns, detail=160)
    state_keys = _state_lines(analysis, c)
    first_number = 1
    previous = _previous_sections(request.previous_summary) if request.previous_summary else None
    if previous is not None:
        first_number = _previous_lines(previous, analysis, c, state_keys)
    _ask_lines(analysis, c)
    _action_lines(analysis, c, first_number)
    _text_lines(analysis, c)
    for message in turns[len(turns) - last_turns :] if last_turns else ():
        text = content_text(message) or " ".join(
            f"{call_arguments(call)[0]}({cap(call_arguments(call)[2], 120)})"
            for call in message.get("tool_calls") or ()
        )
        if text.strip() and message.get("role") != "user":
            c.add("in_progress", 2.5, f"- Last turn ({message.get('role')}): {cap(text, 240)}")
    required: dict[str, list[str]] = {key: [] for key in SECTION_KEYS}
    required["active_task"] = _active_task(analysis, previous, budget)
    facts = [f for f in extract_facts(turns) if f.kind != "ask"]
    about = focus_messages(turns, request.focus)
    required["critical"] = _focus_note(request.focus, about, facts)
    return pack(required, preamble, c.lines, facts, budget, len(turns), about)


#: below this many tokens the bare structure (headings + a short Active Task) cannot fit;
#: smaller budgets are raised to it
MIN_BUDGET_TOKENS = 256


class OfflineSummarizer:
    """Deterministic extractive summarizer; never calls a model, never fails on valid input."""

    kind = "offline"
    model: str | None = None

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        text = build_summary(request)
        return SummaryResult(
            text=text, summarizer=self.kind, prompt_hash=request_hash(request, summarizer=self.kind)
        )
