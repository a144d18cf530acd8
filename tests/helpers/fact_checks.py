"""Checks shared by the fact-extraction review tests (``test_audit_s33_review*``,
``test_audit_s34``, ``test_audit_s41_*``, ``test_audit_s42_*``): one text's facts of a
kind, each checked against the reference, and whether a view keeps a fact."""

from __future__ import annotations

from typing import Any

from ctxledger.compressor.factmatch import Haystack, normalize_fact
from ctxledger.compressor.facts import Fact, extract_facts, fact_in_text
from helpers.reference_facts import facts as reference


def one_message(text: str, role: str = "tool") -> dict[str, Any]:
    """One message of `role` saying `text` (a tool message answers call ``c``)."""
    message: dict[str, Any] = {"role": role, "content": text}
    if role == "tool":
        message["tool_call_id"] = "c"
    return message


def facts_of(text: str, kind: str, role: str = "tool") -> list[str]:
    """The values of `kind` extracted from one message of `role` saying `text`; each fact
    is found in its own text and the whole list is the reference extractor's."""
    messages = [{"role": role, "content": text}]
    facts = extract_facts(messages)
    assert all(fact_in_text(fact, text) for fact in facts)  # each found in its own text
    assert facts == reference.extract_facts(messages)
    return [fact.value for fact in facts if fact.kind == kind]


def message_facts(text: str, role: str = "assistant", kind: str | None = None) -> list[Fact]:
    """The facts (of `kind`, or all) extracted from one message of `role` saying `text`."""
    message: dict[str, Any] = {"role": role, "content": text}
    return [f for f in extract_facts([message]) if kind is None or f.kind == kind]


def view_keeps(kind: str, value: str, view: str) -> bool:
    """Whether the text `view` keeps the fact of `kind` whose value is `value`."""
    return Haystack(view).holds(kind, normalize_fact(kind, value))
