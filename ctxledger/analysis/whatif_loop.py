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
  (a user message, a tool loop's results). Appends with nothing recorded between them
  (``AppendStep.joined``) are one request and the reply to it (:func:`runs`, :func:`request_end`): a proxy
  branch or a first request carries a whole history in one append, and a run that
  ended on a tool result (LangChain's ``ToolStrategy``, a ``return_direct`` tool) is
  followed by the next run's user message with no model call between. The check after
  a run whose last message is not the model's waits for the next step (none: no call
  followed, nothing is checked).
- ``per_run`` (the Agents SDK session): no hygiene; ``preflight`` when a run reads its
  history (before the user message it saves) and after a run's final answer is saved
  (the Runner's post-write compaction hook, which it defers while tools ran). A run's
  tool loop checks only in the loop (``report_usage``), as for every host.

The in-loop check after each response is ``report_usage``'s own: the same everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ctxledger.analysis.history import AppendStep, Step, UsageStep
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


def runs(steps: Iterable[Step]) -> Iterator[Step | list[AppendStep]]:
    """`steps` with each run of appends recorded with nothing between them as a list."""
    run: list[AppendStep] = []
    for step in steps:
        if isinstance(step, AppendStep):
            if run and not step.joined:
                yield run
                run = []
            run.append(step)
            continue
        if run:
            yield run
            run = []
        yield step
    if run:
        yield run


def request_end(run: list[AppendStep]) -> tuple[int, int] | None:
    """Where the request of `run` ends: the step and message index of its last message
    that is not the model's (after it, the reply); None: the run is all replies."""
    for j in range(len(run) - 1, -1, -1):
        messages = run[j].messages
        for i in range(len(messages) - 1, -1, -1):
            if messages[i].get("role") != "assistant":
                return j, i
    return None


def split(step: AppendStep, at: int) -> tuple[AppendStep, AppendStep]:
    """`step`'s messages before index `at`, and from it on."""
    return _part(step, 0, at), _part(step, at, len(step.messages))


def _part(step: AppendStep, start: int, end: int) -> AppendStep:
    ids = step.message_ids
    return AppendStep(
        messages=step.messages[start:end],
        message_ids=None if ids is None else ids[start:end],
        at=step.at,
        withdraw=step.withdraw if start == 0 else [],  # (with the append's first message)
        withdraw_reason=step.withdraw_reason,
    )


def checks_after(loop: str, step: UsageStep) -> bool:
    """Whether `loop` runs preflight after the response `step` reports: a ``per_run``
    run's final answer is saved, then the Runner's post-write hook checks."""
    return loop == PER_RUN and step.tool_calls is False


__all__ = [
    "EVERY_CALL",
    "HERMES",
    "PER_RUN",
    "checks_after",
    "replay_loop",
    "request_end",
    "runs",
    "split",
]
