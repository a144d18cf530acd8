"""What the framework adapters share: a private event loop for synchronous hosts, the
ledger's view as a host sees it, and where the ledger lives (a file or a server URL).

Hermes calls its context engine synchronously, sometimes from a thread whose asyncio
loop is running (the gateway), and LangChain's ``invoke`` path calls middleware
synchronously too. ``anyio.run`` cannot nest inside a running loop, so synchronous
calls go to :class:`LoopThread`: one daemon thread running its own asyncio loop,
which also serializes every ledger access of the adapters that use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import operator
import os
import re
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, SupportsIndex, TypeVar

from ctxledger import ContextService
from ctxledger.analysis.agent_tools import tool_arguments
from ctxledger.errors import CtxLedgerError, InvalidInput
from ctxledger.eventstore import is_url
from ctxledger.idkeys import KEY_KEPT, digest_key, keyed_title
from ctxledger.integers import shown
from ctxledger.ledger.prompt import held_prompt
from ctxledger.runtime.toolbudget import DEFAULT_MAX_SLICE_CHARS, SliceResult

T = TypeVar("T")
JSON = dict[str, Any]
logger = logging.getLogger("ctxledger.integrations")


def host_title(prefix: str, host_id: str, suffix: str = "") -> str:
    """The title of a ledger session made for a host's id: `prefix` and the id, or, where
    that is no title the ledger takes (too long, a control character: see
    :func:`~ctxledger.limits.check_name`), `prefix` and a key made for the id (its start
    with other characters as ``-``, and a digest), so each id still has one title;
    `suffix` (the adapter's own words) follows either (:func:`~ctxledger.idkeys.keyed_title`)."""
    return keyed_title(f"{prefix} ", host_id, suffix)


#: the shape of a key :func:`digest_key` made: a start, ``.h`` and 32 hex digits. No
#: ``re.DOTALL``: a made key never holds a line break (each adapter escapes or replaces
#: it in the start it keeps), so an id holding one is never taken for a made key.
_MADE_KEY = re.compile(r".*\.h[0-9a-f]{32}")


def is_made_key(key: str) -> bool:
    """Whether `key` is shaped like a key :func:`digest_key` made (for another id, maybe)."""
    return _MADE_KEY.fullmatch(key) is not None


def taken_whole(whole: str, title: str | None, titles: tuple[str, ...]) -> bool:
    """Whether the session recorded under the whole id `whole` (before keys were made;
    titled `title`) is this id's: always, unless `whole` is shaped like a made key (one
    can name an id so, and it may be another id's key): then only if its title is one of
    `titles`, those this id's first session is given."""
    return not is_made_key(whole) or title in titles


class LoopThread:
    """A daemon thread running an asyncio loop; :meth:`run` waits for a coroutine on it."""

    def __init__(self, name: str = "ctxledger-loop") -> None:
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(self._ready.set)
        self._loop.run_forever()

    def run(self, make: Callable[[], Awaitable[T]]) -> T:
        """Run the coroutine ``make()`` on the private loop and return its result.

        Called from the loop's own thread (a callback re-entering), it would deadlock,
        so that raises instead.
        """
        if threading.current_thread() is self._thread:
            raise RuntimeError("LoopThread.run called from its own loop thread")

        async def _call() -> T:
            return await make()

        future: Future[T] = asyncio.run_coroutine_threadsafe(_call(), self._loop)
        return future.result()

    def close(self) -> None:
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)


async def report_usage_or_warn(
    service: ContextService,
    session_id: str,
    make_report: Callable[[], JSON],
    *,
    tool_calls: bool | None = None,
) -> str:
    """Report the usage `make_report` builds from a framework's figures (``tool_calls``:
    whether the response asked for tools, as ``report_usage`` takes it); the session to
    use from now on. A report with odd figures (NaN, text, negative, out of range) is
    dropped with a warning, as the proxy drops one: the model has answered, and an
    error here lost its answer to the host (the graph or run failed after the call)."""
    try:
        report = make_report()
        result = await service.report_usage(session_id, report, tool_calls=tool_calls)
        return result.session_id
    except (CtxLedgerError, TypeError, ValueError, OverflowError) as exc:
        logger.warning("ctxledger: usage of session %s not recorded: %s", session_id, exc)
        return session_id


async def record_changed_prompt(
    service: ContextService, session_id: str, text: str, role: str | None = None
) -> tuple[str, bool]:
    """Record `text`, the system prompt a host sends its model, on the tip `session_id`
    when it differs from the prompt the ledger holds there (the compaction note is the
    ledger's: :func:`~ctxledger.ledger.prompt.held_prompt`), or is sent in another `role`
    (``system`` / ``developer``; None: the held one); the recording runs preflight
    (``set_system_prompt`` with ``seen=``, s34). The tip to use from now on, and whether
    the prompt was recorded. The same text in the same role writes and runs nothing."""
    view = service.ledger.transcript.session(session_id)
    recorded = view.system_prompt
    same_role = role is None or view.system_role == role
    if held_prompt(recorded, text) == recorded and same_role:  # (checked when written)
        return session_id, False
    result = await service.set_system_prompt(session_id, text, seen=recorded, role=role)
    return result.session_id, True


async def read_persisted_call(service: ContextService, session_id: str | None, args: Any) -> str:
    """Run a ``read_persisted`` call a framework's agent made (`args`: JSON text or the
    decoded object) on `session_id`'s chain: the slice as :func:`slice_text` gives it,
    or ``{"error": ...}`` for the model to read and correct (a bad ref, an output of
    another conversation)."""
    if session_id is None:
        return json.dumps({"error": "nothing is recorded in this conversation yet"})
    try:
        decoded = tool_arguments(args)  # (as recall's and expand_compaction's are read)
    except InvalidInput as exc:
        return json.dumps({"error": str(exc)})
    if not isinstance(decoded.get("ref"), str):
        return json.dumps({"error": "arguments must be an object with a string 'ref'"})
    window = {k: decoded[k] for k in ("offset", "limit") if decoded.get(k) is not None}
    try:
        result = await service.read_persisted(session_id, decoded["ref"], **window)
    except CtxLedgerError as exc:
        return json.dumps({"error": str(exc)})
    return slice_text(result)


def slice_text(result: SliceResult) -> str:
    """A slice as the model is sent it: a one-line header (where it is in the output,
    where to go on) and the text as stored, together within ``DEFAULT_MAX_SLICE_CHARS``
    (the text is cut shorter to make room). The results of ``read_persisted`` are exempt
    from the tool budget, so this cap is what keeps them small: as JSON, the escapes of
    a coloured log or control characters made a slice several times the cap."""
    text = result.text
    while True:
        end = result.offset + len(text)
        where = f"characters {result.offset} to {end} of {result.total_chars}"
        more = f"go on at offset {end}" if end < result.total_chars else "that is the end"
        head = f"[stored output: {where}; {more}]\n"
        room = DEFAULT_MAX_SLICE_CHARS - len(head)
        if len(text) <= room:
            return head + text
        text = text[:room]


def live_messages(service: ContextService, session_id: str) -> list[JSON]:
    """The chain tip's live messages (the API view without its system message), as fresh
    dicts the host may mutate. Cache markers are left to the host's own provider code."""
    view = service.api_messages(session_id, cache=False)
    if _prompt_first(service, session_id, view):
        view = view[1:]
    return [_copy(m) for m in view]


def _prompt_first(service: ContextService, session_id: str, view: list[JSON]) -> bool:
    """Whether `view` (the tip's) opens with the system prompt: exactly when the tip holds
    one (in either role); a leading system or developer message of a session without a
    prompt is a message of its own."""
    ledger = service.ledger
    return (
        bool(view) and ledger.transcript.session(ledger.tip(session_id)).system_prompt is not None
    )


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def system_view(service: ContextService, session_id: str) -> JSON | None:
    """The system message of the tip's view (the prompt plus any compaction note), if any."""
    view = service.api_messages(session_id, cache=False)
    return _copy(view[0]) if _prompt_first(service, session_id, view) else None


def finite_schema(schema: Any, name: str) -> Any:
    """A copy of a tool schema an adapter derived from code, without the non-finite
    numbers JSON cannot hold (``def f(x: float = math.inf)`` gives ``"default": inf``):
    such a key or list item is left out, with a warning. The ledger refuses them in
    what a caller sends; a derived schema only counts tokens, and refusing it failed
    the whole agent for one default."""
    dropped: list[str] = []
    clean = _finite(schema, name, dropped)
    if dropped:
        logger.warning(
            "ctxledger: tool schema values left out (JSON has no NaN or infinity): %s",
            ", ".join(dropped),
        )
    return clean


def _finite(value: Any, path: str, dropped: list[str]) -> Any:
    """A copy of `value` without its non-finite floats, walked with a stack, not recursion
    (a schema nested 5,000 deep raised RecursionError). The paths of the first
    _NAMED dropped values go to `dropped`, then one count of the rest: a path is built
    only for a dropped value, from the chain of its parents' keys."""
    holder: list[Any] = []
    stack: list[tuple[Any, Any, Any, _Where]] = [(holder, None, value, (None, path))]
    more = 0
    while stack:
        parent, key, item, where = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            if len(dropped) < _NAMED:
                dropped.append(_path(where))
            else:
                more += 1
            continue
        copied: Any = item
        children: list[tuple[Any, Any, str]] = []
        if isinstance(item, dict):
            copied = {}
            children = [(k, v, f".{k}") for k, v in item.items()]
        elif isinstance(item, (list, tuple)):
            copied = []
            children = [(i, v, f"[{i}]") for i, v in enumerate(item)]
        if isinstance(parent, list):
            parent.append(copied)
        else:
            parent[key] = copied
        stack.extend((copied, k, v, (where, part)) for k, v, part in reversed(children))
    if more:
        dropped.append(f"and {more} more")
    return holder[0] if holder else None


#: a path as the chain of its parts (parent chain, this part), rendered only when needed
_Where = tuple[Any, str]
#: how many dropped values a warning names
_NAMED = 8


def _path(where: _Where) -> str:
    parts: list[str] = []
    node: _Where | None = where
    while node is not None:
        node, part = node
        parts.append(part)
    return "".join(reversed(parts))


def session_name(value: object) -> str | None:
    """A host's session id, or None for one that is no text (a host's bug, warned: the
    engine goes on as before a session starts; a dict kept as the id was unhashable later)."""
    if isinstance(value, str):
        return value
    logger.warning("ctxledger: a session id that is no text is taken as none: %s", shown(value))
    return None


def prompt_count(value: object) -> int | float | None:
    """A host's prompt token count: an int (numpy's too) or a float; None for none, and
    for one of another type, warned (text passed as the count turned compaction off
    unsaid)."""
    if value is None or isinstance(value, float):
        return value
    with contextlib.suppress(TypeError):  # (an ``__index__`` that answers no int)
        if isinstance(value, SupportsIndex):
            return operator.index(value)
    logger.warning("ctxledger: a prompt count that is no number is taken as none: %s", shown(value))
    return None


def ledger_target(target: str | os.PathLike[str]) -> str | Path:
    """A ``postgresql://…`` URL stays a string (a ``Path`` would collapse its ``//``); a
    file path becomes a ``Path``. Its folder is made by the store when it opens (owner
    only), and one that cannot be made (a parent that is a file, no permission, a path
    too deep) is the store's :class:`StoreError`, which a host's hook reports as any
    ledger error (session 36: a folder made here was 0755, and an ``OSError`` of it
    crashed Hermes's turn)."""
    if is_url(target):
        return str(target)
    return Path(target)


__all__ = [
    "KEY_KEPT",
    "LoopThread",
    "digest_key",
    "finite_schema",
    "host_title",
    "is_made_key",
    "ledger_target",
    "live_messages",
    "prompt_count",
    "read_persisted_call",
    "session_name",
    "slice_text",
    "system_view",
    "taken_whole",
]
