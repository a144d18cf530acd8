"""Accounting projection: token usage per session and per compression chain.

Agent calls and summarizer calls are kept apart (a summarizer's tokens must not be
read as the agent's prompt size). ``last_prompt_tokens`` is the provider's real
prompt count (input + cache read + cache write) of the session's latest agent call.
A response that reported no usage counts as a call (``agent_calls_without_usage``
too) and leaves no real prompt count behind: the latest one is unknown, so the
hygiene check falls back to the estimate. (The in-loop trigger judges such a
response by the runtime state's kept count and the estimate, not by this figure:
``RuntimeState.last_real_prompt``.)
"""

from __future__ import annotations

import msgspec

from ctxledger.events import Event, SessionStarted, SessionSwitched, UsageReported
from ctxledger.usage import CanonicalUsage


class SessionUsage(msgspec.Struct, kw_only=True):
    agent: CanonicalUsage = msgspec.field(default_factory=CanonicalUsage)
    summarizer: CanonicalUsage = msgspec.field(default_factory=CanonicalUsage)
    agent_calls: int = 0
    summarizer_calls: int = 0
    last_prompt_tokens: int | None = None
    cost_usd: float = 0.0
    cost_known: bool = True
    agent_calls_without_usage: int = 0

    def to_dict(self) -> dict[str, object]:
        return {
            "agent": self.agent.as_dict(),
            "summarizer": self.summarizer.as_dict(),
            "agent_calls": self.agent_calls,
            "summarizer_calls": self.summarizer_calls,
            "last_prompt_tokens": self.last_prompt_tokens,
            "agent_calls_without_usage": self.agent_calls_without_usage,
            "cost_usd": round(self.cost_usd, 6) if self.cost_known else None,
        }


class AccountingState(msgspec.Struct, kw_only=True):
    sessions: dict[str, SessionUsage] = msgspec.field(default_factory=dict)
    last_seq: int = 0


class AccountingProjection:
    name = "accounting"

    def __init__(self, state: AccountingState | None = None) -> None:
        self.state = state or AccountingState()

    def apply(self, seq: int, event: Event) -> None:
        if isinstance(event, UsageReported):
            self._usage(event)
        elif isinstance(event, SessionStarted | SessionSwitched):
            self.state.sessions.setdefault(event.session_id, SessionUsage())
        self.state.last_seq = seq

    def _usage(self, e: UsageReported) -> None:
        acc = self.state.sessions.setdefault(e.session_id, SessionUsage())
        if e.purpose == "summarizer":
            acc.summarizer = acc.summarizer + e.usage
            acc.summarizer_calls += 1
        else:
            acc.agent = acc.agent + e.usage
            acc.agent_calls += 1
            if e.reported:
                acc.last_prompt_tokens = e.usage.prompt
            else:
                acc.agent_calls_without_usage += 1
                acc.last_prompt_tokens = None
        if e.cost_usd is None:
            acc.cost_known = acc.cost_known and e.usage.total == 0
        else:
            acc.cost_usd += e.cost_usd

    def session(self, session_id: str) -> SessionUsage:
        if not isinstance(session_id, str):  # a list is unhashable: no TypeError
            return SessionUsage()
        return self.state.sessions.get(session_id) or SessionUsage()

    def chain(self, session_ids: list[str]) -> SessionUsage:
        """Sum of the usage of every session in a compression chain."""
        total = SessionUsage()
        for sid in session_ids:
            acc = self.session(sid)
            total.agent = total.agent + acc.agent
            total.summarizer = total.summarizer + acc.summarizer
            total.agent_calls += acc.agent_calls
            total.agent_calls_without_usage += acc.agent_calls_without_usage
            total.summarizer_calls += acc.summarizer_calls
            total.cost_usd += acc.cost_usd
            total.cost_known = total.cost_known and acc.cost_known
            if acc.last_prompt_tokens is not None:
                total.last_prompt_tokens = acc.last_prompt_tokens
        return total

    def encode_state(self) -> bytes:
        return msgspec.msgpack.encode(self.state)

    @classmethod
    def decode_state(cls, data: bytes) -> AccountingProjection:
        return cls(msgspec.msgpack.decode(data, type=AccountingState))
