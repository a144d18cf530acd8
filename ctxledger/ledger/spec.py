"""``SessionSpec``: how a session starts, named once.

The ledger, the service, imports and what-if replays all start sessions with the
same handful of settings; they pass one :class:`SessionSpec` instead of spelling the
parameters out again. Checking happens where the events are built
(:meth:`~ctxledger.ledger.facade.Ledger.start_events`), so every entry point is
checked alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, get_args

import msgspec

from ctxledger.errors import InvalidInput
from ctxledger.events import SessionReason, SystemPromptSet
from ctxledger.integers import shown as quoted
from ctxledger.limits import (
    MAX_MODEL_CHARS,
    MAX_REASON_CHARS,
    MAX_SESSION_ID_CHARS,
    MAX_TITLE_CHARS,
    check_json,
    check_name,
    check_nonblank,
)
from ctxledger.messages import check_system_role, stored_role
from ctxledger.tokens import DEFAULT_ENCODING, check_encoding, count_message

__all__ = [
    "IMPORT_DIGEST",
    "LOOPS",
    "LOOP_KEY",
    "SessionSpec",
    "check_end_reason",
    "check_loop",
    "check_model",
    "check_names",
    "check_session_id",
    "check_title",
    "checked_tools",
    "inherit_loop",
    "prompt_event",
    "recorded_loop",
    "with_loop",
]


class SessionSpec(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a session is started with (``SessionStarted`` + prompt + tools)."""

    model: str
    #: None: the ledger's configured ``context_length``
    context_length: int | None = None
    system_prompt: str | None = None
    #: the role the system prompt is given back in: ``system`` or ``developer`` (s38;
    #: checked here, so a bad one is refused before anything is built)
    system_role: str = "system"
    tools: Sequence[Mapping[str, Any]] | None = None
    parent_session_id: str | None = None
    reason: SessionReason = "new"
    title: str | None = None
    #: where an imported session came from (``format:key``)
    source: str | None = None
    encoding: str = DEFAULT_ENCODING
    #: None: a new id from the ledger's id generator
    session_id: str | None = None
    #: where the host checks for compaction (:data:`LOOPS`); None: not said (the
    #: ``SessionStarted.config`` snapshot gets no :data:`LOOP_KEY`)
    loop: str | None = None

    def __post_init__(self) -> None:
        if self.reason not in get_args(SessionReason):  # (msgspec quoted a 2 MB one whole)
            choices = ", ".join(get_args(SessionReason))
            raise InvalidInput(f"reason must be one of {choices}, got {quoted(self.reason)}")
        if check_system_role(self.system_role) != "system" and self.system_prompt is None:
            # refused, not kept for a later prompt: a session has no role without a prompt
            raise InvalidInput(f"system_role {quoted(self.system_role)} needs a system_prompt")


#: the agent loops a what-if can replay: ``hermes`` (HERMES_SPEC §2: hygiene before a
#: user turn, preflight after the user message, in-loop after a response asking for
#: tools), ``every_call`` (no hygiene; preflight before every model call: the LangChain
#: middleware, the proxy), ``per_run`` (no hygiene; preflight when a run reads its
#: history and after a run's final answer is saved: the Agents SDK session)
LOOPS = ("hermes", "every_call", "per_run")
#: the key of ``SessionStarted.config`` naming the loop of the host that started the
#: session (absent: not said, read as ``hermes``); compaction continuations carry it
LOOP_KEY = "agent_loop"
#: the ``SessionStarted.config`` key holding the SHA-256 of the input a session was
#: imported from (``importers.detect.file_digest``): a second import of the same input
#: is told by it (``ledger.importing``). A version that does not know it ignores it
#: (``CompressionConfig.from_snapshot``); like :data:`LOOP_KEY`, no plan reads it
IMPORT_DIGEST = "import_sha256"


def check_loop(loop: object, field: str = "loop") -> str:
    """`loop` when it names one of :data:`LOOPS` (``every-call`` is ``every_call``), else
    InvalidInput naming `field` and the choices (as the CLI's ``--loop`` writes them for
    ``loop``, else as stored)."""
    name = loop.replace("-", "_") if isinstance(loop, str) and loop.isascii() else None
    if name not in LOOPS:
        if not isinstance(loop, str):
            shown = quoted(loop)
        elif loop.isascii():  # (cut inside its quotes)
            shown = repr(loop[:37]) + ("..." if len(loop) > 37 else "")
        else:
            shown = "non-ASCII"
        choices = ", ".join(x.replace("_", "-") if field == "loop" else x for x in LOOPS)
        raise InvalidInput(f"{field} must be one of {choices} (got {shown})")
    return name


def check_model(model: object) -> str:
    """`model` when it is a non-empty string UTF-8 can encode, else InvalidInput (not
    "SessionStarted has a field of the wrong type"); at most :data:`MAX_MODEL_CHARS`
    characters and no control characters (:func:`~ctxledger.limits.check_name`)."""
    return check_name(check_nonblank(model, "model"), "model", MAX_MODEL_CHARS)


def with_loop(snapshot: dict[str, Any], loop: str | None) -> dict[str, Any]:
    """A ``SessionStarted.config`` `snapshot` naming `loop` (unchanged for None: a session
    whose host said nothing is recorded as before)."""
    return snapshot if loop is None else {**snapshot, LOOP_KEY: check_loop(loop)}


def recorded_loop(config: Mapping[str, Any]) -> str | None:
    """The loop a ``SessionStarted.config`` names (None: not said, or not one this
    version knows)."""
    loop = config.get(LOOP_KEY)
    return loop if loop in LOOPS else None


def inherit_loop(spec: SessionSpec, parent_config: Mapping[str, Any]) -> SessionSpec:
    """`spec`, a ``branch`` that names no loop taking the one its parent's
    ``SessionStarted.config`` names (session 40: the same conversation, forked, goes on
    in the same host's loop; a loop `spec` names wins). A ``delegate`` (another agent,
    perhaps another host) and a ``new`` session take none."""
    if spec.reason != "branch" or spec.loop is not None:
        return spec
    loop = recorded_loop(parent_config)
    return spec if loop is None else msgspec.structs.replace(spec, loop=loop)


def check_names(spec: SessionSpec) -> None:
    """InvalidInput unless the model, title and tokenizer encoding `spec` names can be
    recorded (:func:`check_model`, :func:`check_title`,
    :func:`~ctxledger.tokens.check_encoding`)."""
    check_model(spec.model)
    check_title(spec.title)
    check_encoding(spec.encoding)
    if spec.loop is not None:
        check_loop(spec.loop)


def prompt_event(fields: dict[str, Any], text: str, role: object, encoding: str) -> SystemPromptSet:
    """The ``SystemPromptSet`` recording `text` in `role` (checked: ``system`` or
    ``developer``, else InvalidInput), counted as a system message under `encoding`."""
    role = check_system_role(role)
    tokens = count_message({"role": "system", "content": text}, encoding)
    return SystemPromptSet(**fields, text=text, tokens=tokens, role=stored_role(role))


def check_end_reason(reason: object) -> str:
    """The reason a session is ended with: a non-empty string of at most
    :data:`MAX_REASON_CHARS` characters with no control characters (it is shown in
    listings, ``ended (reason)``), else InvalidInput."""
    return check_name(check_nonblank(reason, "reason"), "reason", MAX_REASON_CHARS)


def check_title(title: object) -> str | None:
    """`title` when it is None or a string of at most :data:`MAX_TITLE_CHARS` characters
    with no control characters, else InvalidInput (a title was stored unchecked: a number
    made a ledger whose replay failed; NUL and bidi controls reached every listing)."""
    if title is None:
        return None
    if not isinstance(title, str):
        raise InvalidInput(f"title must be a string or None, got {type(title).__name__}")
    return check_name(title, "title", MAX_TITLE_CHARS)


def check_session_id(session_id: object) -> str:
    """A session id a caller chose: text that is not blank (a list was a TypeError from
    the projections' dicts; ``""`` was silently replaced by a generated id)."""
    given = check_nonblank(session_id, "session_id", "a non-blank string (or None for a new id)")
    return check_name(given, "session_id", MAX_SESSION_ID_CHARS)


def checked_tools(tools: object) -> list[dict[str, Any]]:
    """Copies of the tool schemas `tools` lists (None: none), else InvalidInput: a string
    or a single object is no list (it was walked as characters or keys)."""
    if tools is None:
        return []
    if not isinstance(tools, Sequence) or isinstance(tools, str | bytes | bytearray):
        raise InvalidInput(f"tools must be a list of tool schemas, got {type(tools).__name__}")
    out: list[dict[str, Any]] = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise InvalidInput(f"tool {i} must be a JSON object, got {type(tool).__name__}")
        out.append(check_json(dict(tool), f"tool {i}"))
    return out
