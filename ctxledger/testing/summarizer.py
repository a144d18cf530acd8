"""The behaviour every summarizer must show, as an abstract test class.

Subclass :class:`SummarizerContract` in a ``test_*.py`` module and implement
``make_summarizer()``; pytest runs the contract against it. The four summarizers
shipped with ctxledger (offline, LLM against a local fake model, recorded, fallback) run it in
``tests/contracts/``. A summarizer whose output length is up to a model sets
``respects_budget = False``; one that answers from a fixed script rather than the
request sets ``reads_request = False`` (those checks then pass trivially).
"""

from __future__ import annotations

import abc
import copy
import json
from typing import Any, ClassVar

import anyio

from ctxledger.compressor.summarizers.base import (
    SECTION_KEYS,
    Summarizer,
    SummaryRequest,
    SummaryResult,
    parse_sections,
)
from ctxledger.tokens import count_text

__all__ = ["SummarizerContract", "long_request", "sample_request"]


def sample_request(*, budget_tokens: int = 600, focus: str | None = None) -> SummaryRequest:
    """A small coding-agent middle: an ask, a tool call and its result, an answer."""
    turns: list[dict[str, Any]] = [
        {"role": "user", "content": "Fix the failing test in src/app/config.py, keep the API."},
        {
            "role": "assistant",
            "content": "Running the tests first.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "terminal", "arguments": '{"command": "pytest -q"}'},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "FAILED tests/test_config.py::test_load - KeyError: 'timeout'\n1 failed",
        },
        {"role": "assistant", "content": "The loader drops the timeout key; I will restore it."},
    ]
    return SummaryRequest(turns=turns, budget_tokens=budget_tokens, focus=focus)


def long_request(*, budget_tokens: int, steps: int = 60) -> SummaryRequest:
    """A middle far larger than any budget: many distinct commands, paths and errors."""
    turns = list(sample_request().turns)
    for i in range(steps):
        call = {
            "id": f"call_{i + 2}",
            "type": "function",
            "function": {
                "name": "terminal",
                "arguments": json.dumps({"command": f"pytest tests/test_mod{i}.py -q"}),
            },
        }
        turns.append(
            {"role": "assistant", "content": f"Checking module {i}.", "tool_calls": [call]}
        )
        turns.append(
            {
                "role": "tool",
                "tool_call_id": f"call_{i + 2}",
                "content": f"FAILED tests/test_mod{i}.py::test_case_{i} - ValueError: bad value {i}\n"
                + "log line\n" * 40,
            }
        )
    return SummaryRequest(turns=turns, budget_tokens=budget_tokens)


class SummarizerContract(abc.ABC):
    """Subclass per summarizer; ``make_summarizer`` builds a fresh one."""

    #: the summary fits ``budget_tokens`` (with the template's headings counted)
    respects_budget: ClassVar[bool] = True
    #: the summary is built from the request (a scripted fake may answer the same text)
    reads_request: ClassVar[bool] = True

    @abc.abstractmethod
    def make_summarizer(self) -> Summarizer: ...

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        summarizer = self.make_summarizer()
        return anyio.run(summarizer.summarize, request)

    def test_has_a_kind(self) -> None:
        kind = self.make_summarizer().kind
        assert isinstance(kind, str) and kind

    def test_returns_a_non_empty_structured_handoff(self) -> None:
        result = self.summarize(sample_request())
        assert isinstance(result, SummaryResult)
        assert result.text.strip() and result.summarizer
        sections = parse_sections(result.text)
        assert set(sections) - {"preamble"} <= set(SECTION_KEYS)
        assert any(key in sections for key in SECTION_KEYS), "no handoff section was filled"

    def test_the_same_request_gives_the_same_summary(self) -> None:
        request = sample_request()
        first, second = self.summarize(request), self.summarize(request)
        assert first.text == second.text
        assert first.prompt_hash == second.prompt_hash

    def test_never_mutates_its_request(self) -> None:
        request = sample_request(focus="the config loader")
        before = copy.deepcopy(request.turns)
        self.summarize(request)
        assert request.turns == before

    def test_keeps_within_the_budget(self) -> None:
        if not self.respects_budget:
            return
        for budget in (600, 1200, 4000):  # real budgets: the planner never asks for less
            for request in (
                sample_request(budget_tokens=budget),
                long_request(budget_tokens=budget),
            ):
                result = self.summarize(request)
                assert count_text(result.text) <= budget

    def test_the_summary_is_about_the_request(self) -> None:
        if not self.reads_request:
            return
        text = self.summarize(sample_request()).text
        assert "config.py" in text

    def test_runs_on_trio_as_well_as_asyncio(self) -> None:
        summarizer = self.make_summarizer()
        result = anyio.run(summarizer.summarize, sample_request(), backend="trio")
        assert result.text.strip()
