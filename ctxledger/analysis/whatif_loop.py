"""Where a what-if's agent loop checks for compaction: the loop of the host that recorded it.

Each host checks at its own points (``SessionStarted.config`` names its loop when it
said so: :data:`~ctxledger.ledger.spec.LOOP_KEY`), and a what-if under the recorded
settings reproduces a chain only when it checks at the same points:

- ``hermes`` (HERMES_SPEC §2; a chain whose host said nothing): ``hygiene`` before each
  user turn, ``preflight`` right after the user message. The Hermes integration
  records Hermes's own decisions (its pre-API checks included) as host decisions,
  which every loop replays.
- ``every_call`` (the LangChain middleware, the proxy's three faces): no hygiene;
  ``preflight`` after the messages of each request, before the model call they feed
  (a user message, a tool loop's results). A model's reply is appended after its call,
  so a recorded batch is split before each reply that follows what fed it. The check
  after a batch's last request waits for the next step: a run that ended on a tool
  result (LangChain's ``ToolStrategy``, a ``return_direct`` tool) calls no model after
  it, and the next run's user message is checked when it is appended.
- ``per_run`` (the Agents SDK session): no hygiene; ``preflight`` when a run reads its
  history (before the user message it saves) and after a run's final answer is saved
  (the Runner's post-write compaction hook, which it defers while tools ran). A run's
  tool loop checks only in the loop (``report_usage``), as for every host.

The in-loop check after each response is ``report_usage``'s own: the same everywhere.
"""

from __future__ import annotations

from collections.abc import Iterator

from ctxledger.analysis.history import AppendStep, UsageStep
from ctxledger.ledger.spec import check_loop

HERMES = "hermes"
EVERY_CALL = "every_call"
PER_RUN = "per_run"


def replay_loop(recorded: str | None, chosen: str | None) -> str:
    """The loop a what-if runs: `chosen` (``replay --loop``, checked) over the one the
    chain's host named, else ``hermes``."""
    if chosen is not None:
        return check_loop(chosen)
    return recorded or HERMES


def requests(step: AppendStep) -> Iterator[AppendStep]:
    """`step` cut before each model reply (an assistant message right after a message
    that is not one): the request's messages, then the reply and what follows it."""
    messages = step.messages
    start = 0
    for i in range(1, len(messages)):
        if messages[i].get("role") == "assistant" and messages[i - 1].get("role") != "assistant":
            yield _part(step, start, i)
            start = i
    yield step if start == 0 else _part(step, start, len(messages))


def _part(step: AppendStep, start: int, end: int) -> AppendStep:
    ids = step.message_ids
    return AppendStep(
        messages=step.messages[start:end],
        message_ids=None if ids is None else ids[start:end],
        at=step.at,
    )


def feeds_a_call(step: AppendStep) -> bool:
    """Whether the model is called on `step` next: it ends in a message that is not the
    model's (a user message, tool results)."""
    return bool(step.messages) and step.messages[-1].get("role") != "assistant"


def checks_after(loop: str, step: UsageStep) -> bool:
    """Whether `loop` runs preflight after the response `step` reports: a ``per_run``
    run's final answer is saved, then the Runner's post-write hook checks."""
    return loop == PER_RUN and step.tool_calls is False


__all__ = [
    "EVERY_CALL",
    "HERMES",
    "PER_RUN",
    "checks_after",
    "feeds_a_call",
    "replay_loop",
    "requests",
]
