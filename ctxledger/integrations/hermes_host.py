"""What Hermes Agent hands its context engine, read as the ledger takes it: its usage
reports, its message dicts (the session store's mark, what a message says as the store
gives it back), its session ids and context lengths, how it asked for a compaction (``force``); and
the engine's helpers that need no Hermes state (a head's plan, a failure's report, a
resume's model), its answer to when Hermes's estimate waits for the provider's
count (:class:`RealUsageTrust`), and whether Hermes answers a refusal by compacting
(:func:`compaction_answers`, which reads Hermes's config in Hermes). They load without Hermes;
:mod:`ctxledger.integrations.hermes` is the engine."""

from __future__ import annotations

import copy
import hashlib
import json
import sys
import uuid
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any, NamedTuple

from ctxledger.compressor.assemble import reason_line
from ctxledger.compressor.planner import plan, rough_counts
from ctxledger.compressor.recording import token_counts
from ctxledger.errors import InvalidInput, InvalidMessage
from ctxledger.importers.hermes_db import compression_parents
from ctxledger.integrations.common import host_title, live_messages
from ctxledger.integrations.hermes_repair import as_hermes_holds, head_counts
from ctxledger.ledger.compaction import compaction_input
from ctxledger.limits import check_context_length, check_token_count, taking_as_recorded
from ctxledger.messages import kind_of
from ctxledger.projections.chains import MAX_CHAIN, ChainsProjection, Lineage
from ctxledger.tokens import count_message
from ctxledger.usage import normalize_usage

if TYPE_CHECKING:
    from ctxledger.runtime.service import ContextService
    from ctxledger.runtime.service_io import TurnResult

JSON = dict[str, Any]


def chat_usage(usage: dict[str, Any]) -> JSON:
    """Hermes's normalized usage dict as an OpenAI chat-completions usage dict
    (InvalidInput for a figure that is no number of tokens, as the ledger would say)."""
    cache_read = tokens(usage, "cache_read_tokens")
    cache_write = tokens(usage, "cache_write_tokens")
    if usage.get("prompt_tokens") is None:
        prompt = tokens(usage, "input_tokens") + cache_read + cache_write
    else:
        prompt = tokens(usage, "prompt_tokens")
    completion = "completion_tokens" if "completion_tokens" in usage else "output_tokens"
    report = {
        "prompt_tokens": prompt,
        "completion_tokens": tokens(usage, completion),
        "prompt_tokens_details": {"cached_tokens": cache_read, "cache_write_tokens": cache_write},
        "completion_tokens_details": {"reasoning_tokens": tokens(usage, "reasoning_tokens")},
    }
    normalize_usage(report)  # what the ledger would refuse at the next compress
    return report


#: the key Hermes's session store stamps on a message dict once it wrote it to its
#: ``state.db``, after the fact (host bookkeeping: its compressor strips it too)
PERSISTED_MARK = "_db_persisted"


def unmarked(messages: list[Any]) -> list[Any]:
    """Shallow copies of the host's messages without the session store's mark (the
    values are shared: what is kept is copied where it is kept). Kept, the mark
    made the host's list differ from what the ledger held once Hermes had saved it (a
    new ledger root, the whole history again, at every compaction), and the view
    handed back told Hermes its compacted messages were saved already (#57491). Messages
    that are no list are InvalidMessage (a TypeError in ``compress`` before)."""
    if not isinstance(messages, list):
        raise InvalidMessage(f"messages must be a list of message objects, got {kind_of(messages)}")
    return [
        {k: v for k, v in m.items() if k != PERSISTED_MARK} if isinstance(m, dict) else m
        for m in messages
    ]


def digest(message: Any) -> bytes:
    """A message's fingerprint: what the engine keeps of the list a compaction was made
    from (the list itself was a second copy of the whole history for the agent's life)."""
    text = json.dumps(message, sort_keys=True, default=repr, ensure_ascii=False)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def host_session_id() -> str | None:
    """The Hermes session id Hermes keeps current for its tools (its CLI moves it before
    ``reset_session_state()`` on ``/new``, ``/resume``, ``/branch``); None outside Hermes."""
    try:
        from gateway.session_context import get_session_env
    except ImportError:
        return None
    current = get_session_env("HERMES_SESSION_ID")
    return current if isinstance(current, str) and current else None


def title(hermes_session: str) -> str:
    """The title of the ledger chain of one Hermes conversation (how a resume finds it):
    the id, or a key made for it where it is no title the ledger takes (too long, a
    control character: :func:`~ctxledger.integrations.common.host_title`)."""
    return host_title("hermes session", hermes_session)


def said(message: Any) -> Any:
    """What a message says, as Hermes's session store gives it back: role, content, tool
    calls (id, name, arguments) and the call a result answers."""
    if not isinstance(message, dict):
        return message
    calls = [
        (
            c.get("id"),
            (c.get("function") or {}).get("name"),
            (c.get("function") or {}).get("arguments"),
        )
        if isinstance(c, dict)
        else c
        for c in message.get("tool_calls") or ()
    ]
    return (message.get("role"), message.get("content") or None, calls, message.get("tool_call_id"))


def tokens(usage: dict[str, Any], key: str) -> int:
    """A figure as the ledger takes it (None is 0), else InvalidInput: text, a bool, a
    fraction, a negative or oversized count (``int()`` made "12" 12 and True 1, and a
    negative one failed the next compaction)."""
    return check_token_count(usage.get(key), f"usage field {key!r}")


def window(value: Any) -> int | None:
    """A context length the host gave, as the ledger takes one; None when no session
    could have it (0, None, under 1,024 or past MAX_CONTEXT_LENGTH: every compress failed)."""
    try:
        return check_context_length(value)
    except InvalidInput:
        return None


def compression_ancestors(get_session: Callable[[str], Any], session_id: str) -> list[str]:
    """The Hermes sessions `session_id` continues, nearest first, read from Hermes's
    store (its ``get_session``) by the importer's walk
    (:func:`~ctxledger.importers.hermes_db.compression_parents`: no branch, sub-agent or
    tool's session; cycle-guarded). Not the store's ``get_compression_lineage``: once the
    conversation has delegated a task before a rotation, that walks down into the
    sub-agent's row and gives the rotated id alone."""
    return [parent_id for parent_id, _ in compression_parents(get_session, session_id)]


def chains_titled(chains: ChainsProjection, titles: set[str]) -> list[Lineage]:
    """The ledger chains a resume may continue, the latest started first: roots titled
    with one of `titles`, and the engine's own branches (a ``/compress here`` went on as
    a branch of its conversation, under the same title; the chain it branched from ended)."""
    return sorted(
        (
            node
            for node in chains.state.sessions.values()
            if node.title in titles and (node.parent_session_id is None or node.reason == "branch")
        ),
        key=lambda node: node.started_seq,
        reverse=True,
    )


def compactions(chains: ChainsProjection, session_id: str) -> int:
    """How many compactions the conversation holding `session_id` made (Hermes's
    ``compression_count``): those of its chain, and of the chains it branched from (a
    ``/compress here`` goes on as a branch), walked as recall walks them
    (:meth:`~ctxledger.projections.chains.ChainsProjection.branched_from`) but up to
    :data:`~ctxledger.projections.chains.MAX_CHAIN` hops, not recall's 100: a hop costs
    the count a walk of that chain, with no body read, and a count that stopped at
    recall's cap would drop back (to the compactions of the last 100 branches) as the
    conversation goes on."""
    parents = (parent for parent, _ in chains.branched_from(session_id, MAX_CHAIN))
    return sum(chains.compression_count(sid) for sid in (session_id, *parents))


class Asked(NamedTuple):
    """How Hermes asked for a compaction: ``force=True`` is its CLI's and gateway's
    ``/compress`` (the user asked: ``manual``, forced, past the cooldown); ``force=False``
    is Hermes's own decision (its preflight, overflow retries, gateway hygiene), recorded
    as such with the size it measured (``ContextService.host_compress``), or its TUI's
    and ACP's ``/compress``, which do not force (``requested``, session 40). Both were
    recorded as ``manual`` before session 37, which a what-if replayed as asked for by
    the user.

    ``refused``: why the provider refused the request Hermes now compacts for (its
    ``api_request_error`` hook said so: a context-length error, 413, the long-context
    tier; :meth:`~ctxledger.integrations.hermes_shared.Shared.refusal`): Hermes's
    recovery, recorded as ``overflow`` (session 38; ``preflight`` before, which a
    what-if judged against the threshold and dropped)."""

    focus: str | None
    force: bool
    tokens: Any  # as Hermes passed it (:func:`measured`)
    agent: str | None = None  # the engine copy asking (:func:`agent_token`)
    refused: str | None = None
    hygiene: int = 0  # its gateway's hygiene: its message limit (:func:`hygiene_hard_limit`)
    requested: bool = False  # its TUI's or ACP's /compress (:data:`REQUEST_CALLERS`)

    @classmethod
    def reading(
        cls, focus: str | None, force: bool, tokens: Any, agent: str | None, refused: str | None
    ) -> Asked:
        """How Hermes asked, read in its thread: with ``force=False``, the module that
        called its ``_compress_context`` (:func:`compress_caller`) tells its gateway's
        hygiene and a user's request from its loop's own decisions; neither answers a
        refusal still pending."""
        caller = None if force else compress_caller()
        if caller == HYGIENE_CALLER:
            return cls(focus, force, tokens, agent, hygiene=hygiene_hard_limit())
        if caller in REQUEST_CALLERS:
            return cls(focus, force, tokens, agent, requested=True)
        return cls(focus, force, tokens, agent, refused=refused)

    async def run(self, svc: ContextService, sid: str, focus: str | None) -> TurnResult:
        if self.force:
            return await svc.compress(sid, focus=focus)
        tokens = measured(self.tokens)
        said = "its estimate" if tokens is None else f"~{tokens:,} tokens by its estimate"
        why = f", after its provider refused the request ({self.refused})" if self.refused else ""
        why = ", its gateway's hygiene before a turn" if self.hygiene else why
        who = "hermes decided"
        if self.requested:  # (session 40's final review: the user asked, Hermes did not decide)
            who, why = "hermes's user asked", ", its TUI's or ACP's /compress"
        source = f"{who} (compress, force=False{why}): {said}"
        return await svc.host_compress(
            sid,
            source,
            tokens=tokens,
            focus=focus,
            agent=self.agent,
            refused=bool(self.refused),
            hygiene=bool(self.hygiene),
            hard_limit=self.hygiene or None,
            requested=self.requested,
        )


#: the module of Hermes 0.19.0 that calls ``AIAgent._compress_context`` for its gateway's
#: hygiene (``GatewayRunner._handle_message_with_agent``, on a fresh agent, before the
#: turn); its loop calls it from ``agent.*``, its slash commands from their own modules
HYGIENE_CALLER = "gateway.run"
#: the modules of Hermes 0.19.0 whose ``/compress`` calls it with ``force=False`` (its
#: TUI's ``_compress_session_history``, ACP's ``_cmd_compact``): the user asked, and
#: Hermes's guards (its cooldown, its breaker) still apply; its CLI's and gateway's force
REQUEST_CALLERS = frozenset({"tui_gateway.server", "acp_adapter.server"})


def compress_caller() -> str | None:
    """The module that called ``AIAgent._compress_context`` (``run_agent``) on this
    thread's stack, if it is there: Hermes gives the engine no other sign of who asked
    with ``force=False`` (its gateway's hygiene, a fresh agent, calls it as its turn
    preflight does; so does its TUI's ``/compress``)."""
    frame = _hermes_frame("run_agent", "_compress_context")
    caller = frame.f_back if frame is not None else None
    name = caller.f_globals.get("__name__") if caller is not None else None
    return name if isinstance(name, str) else None


#: Hermes 0.19.0's gateway hygiene message limit when its config names none
HYGIENE_HARD_LIMIT = 5000


def hygiene_hard_limit() -> int:
    """The message limit Hermes's gateway hygiene fires at (with 85 % of the window):
    ``compression.hygiene_hard_message_limit`` of the config its gateway reads (its
    ``_load_gateway_config``), taken as it takes it (a positive integer, else
    :data:`HYGIENE_HARD_LIMIT`). Recorded with a hygiene compaction, for a what-if."""
    gateway = sys.modules.get(HYGIENE_CALLER)
    try:
        section = gateway._load_gateway_config().get("compression") if gateway else None
        raw = (
            int(section.get("hygiene_hard_message_limit") or 0) if isinstance(section, dict) else 0
        )
    except Exception:  # (absent, not a number: Hermes's default, as its gateway takes it)
        raw = 0
    return raw if raw > 0 else HYGIENE_HARD_LIMIT


#: the empty replies Hermes 0.19.0 retries before it activates a fallback for them
#: (``conversation_loop``: at this count it falls back or gives the turn up)
EMPTY_RETRIES = 3


def empty_reply_fallback() -> bool:
    """Whether the engine's ``update_model`` runs under Hermes's fallback activation for
    empty replies: ``try_activate_fallback`` on this thread's stack, its agent's
    ``_empty_content_retries`` at :data:`EMPTY_RETRIES` (every other activation comes
    with it below: a reply with content, a new turn or that fallback zero it). Hermes
    zeroes its turn's compression attempts at its nine other fallback sites, not there."""
    frame = _hermes_frame("agent.chat_completion_helpers", "try_activate_fallback")
    retries = getattr(frame.f_locals.get("agent"), "_empty_content_retries", 0) if frame else 0
    return isinstance(retries, int) and retries >= EMPTY_RETRIES


def turn_attempts() -> int | None:
    """Hermes's count of its turn's compaction attempts (``compression_attempts``, a
    local of ``agent.conversation_loop.run_conversation`` in 0.19.0) on this thread's
    stack, as its ``api_request_error`` hook finds it: the attempts its size-refusal
    handlers made, and its pre-API compactions (the check before each model call), which
    share the count; zeroed by a fallback activation but the empty replies' one. ``None``
    outside a turn, or from a Hermes that keeps it elsewhere."""
    frame = _hermes_frame("agent.conversation_loop", "run_conversation")
    count = frame.f_locals.get("compression_attempts") if frame is not None else None
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def _hermes_frame(module: str, function: str) -> FrameType | None:
    """Hermes's `function` of `module` on this thread's stack, at most 16 frames above
    the caller's caller (the engine's method, Hermes's helper, its forwarder)."""
    frame: FrameType | None = sys._getframe(2)
    for _ in range(16):
        if frame is None:
            return None
        if frame.f_code.co_name == function and frame.f_globals.get("__name__") == module:
            return frame
        frame = frame.f_back
    return None


class RealUsageTrust:
    """When Hermes's rough estimate of a request (its system prompt, messages and tools
    schema at ~4 characters a token) is not to be trusted over the provider's count:
    the engine's ``should_defer_preflight_to_real_usage``, which Hermes asks before its
    turn preflight and its check before each model call (hermes-agent 0.19.0, #36718).
    Without it, a chain whose schema-heavy estimate stays at the threshold after a
    compaction, while the provider's count fits, was compacted again at every check.

    Hermes sets ``awaiting_real_usage_after_compression`` and
    ``last_compression_rough_tokens`` (its estimate of the compacted request) on its
    engine after each compaction it made; the engine keeps the provider's counts
    (:meth:`_real_prompt`). An estimate at the threshold is deferred until the
    compacted request has been counted, and after that while it has grown by no more
    than max(4,096, 5 % of the threshold) since the last estimate whose request
    the provider counted under the threshold (which then moves up to it)."""

    threshold_tokens: int = 0
    awaiting_real_usage_after_compression: bool = False
    last_compression_rough_tokens: int = 0
    last_real_prompt_tokens: int = 0
    last_rough_tokens_when_real_prompt_fit: int = 0

    def should_defer_preflight_to_real_usage(self, rough_tokens: int) -> bool:
        threshold = self.threshold_tokens
        if threshold <= 0 or not isinstance(rough_tokens, int) or rough_tokens < threshold:
            return False
        if self.awaiting_real_usage_after_compression:
            return True  # the compacted request has no count yet
        if not 0 < self.last_real_prompt_tokens < threshold:
            return False  # no count, or the last one did not fit
        fitted = self.last_rough_tokens_when_real_prompt_fit or self.last_compression_rough_tokens
        if fitted <= 0 or rough_tokens - fitted > max(4_096, threshold // 20):
            return False
        self.last_rough_tokens_when_real_prompt_fit = max(fitted, rough_tokens)
        return True

    def _real_prompt(self, prompt: int) -> None:
        """The provider counted a request (``update_from_response``): under the
        threshold right after a compaction, Hermes's estimate of the compacted request
        is the one known to fit; at or over it, none is."""
        compacted = self.last_compression_rough_tokens
        if prompt > 0:
            self.last_real_prompt_tokens = prompt
            if prompt >= self.threshold_tokens:
                self.last_rough_tokens_when_real_prompt_fit = 0
            elif self.awaiting_real_usage_after_compression and compacted > 0:
                self.last_rough_tokens_when_real_prompt_fit = compacted
        self.awaiting_real_usage_after_compression = False

    def _forget_real_usage(self) -> None:
        """Another model (its counts judged another window), a session's end, a reset."""
        self.awaiting_real_usage_after_compression = False
        self.last_compression_rough_tokens = self.last_real_prompt_tokens = 0
        self.last_rough_tokens_when_real_prompt_fit = 0


def compression_on() -> bool:
    """Whether Hermes compacts at all: ``compression.enabled`` in its config, read as its
    agent reads it (off: it never asks the engine, nor calls ``compress`` but for the
    user's ``/compress``). Outside Hermes, or its config unreadable (its defaults): yes."""
    try:
        from hermes_cli.config import load_config_readonly
    except ImportError:
        return True
    try:
        section = load_config_readonly().get("compression")
    except Exception:  # Hermes's agent takes its defaults then: compression on
        section = None
    enabled = section.get("enabled", True) if isinstance(section, dict) else True
    return str(enabled).lower() in {"true", "1", "yes"}  # (as Hermes reads it)


def compaction_answers(reason: str, error: Any) -> bool:
    """Whether Hermes 0.19.0 answers a refusal for the request's size (its classified
    `reason`; `error`: the hook's ``{"message": ...}``) by compacting: not with its
    compression off (:func:`compression_on`: it tells the user to run ``/compress``),
    nor a context-length error about the output cap (it lowers ``max_tokens`` or gives
    the turn up). Outside Hermes: yes."""
    if not compression_on():
        return False
    try:
        from agent.model_metadata import (
            is_output_cap_error,
            parse_available_output_tokens_from_error,
        )
    except ImportError:
        return True
    said = str(error.get("message") or "").lower() if isinstance(error, dict) else ""
    return reason != "context_overflow" or not (
        is_output_cap_error(said) or parse_available_output_tokens_from_error(said) is not None
    )


def agent_token() -> str:
    """A new name for one Hermes agent's engine (its own copy, a session's end, a reset):
    Hermes counts ineffective compressions in the agent's memory, so the ledger's strikes
    for the host's own decisions last as long as the name (``host_compress(agent=)``)."""
    return uuid.uuid4().hex[:12]


#: a session's view as the engine last took it: its length and last message id
ViewKey = tuple[int, "str | None"]


def view_key(svc: ContextService, session_id: str) -> ViewKey:
    """The view of `session_id` as a key: another writer's append or withdrawal in that
    session changes it (a withdrawal takes the view's last ids, ids are never reused)."""
    live = svc.ledger.transcript.session(session_id).live
    return len(live), (live[-1] if live else None)


def grown(key: ViewKey, appended: list[str]) -> ViewKey:
    """`key` after the engine's own append of `appended` (ids) and nothing else: the
    key it remembers, not the view's as read after the append, which would take in
    another writer's write made meanwhile (the host never sees it; session 45's review)."""
    return (key[0] + len(appended), appended[-1]) if appended else key


def moved(svc: ContextService, root: str, seen: str | None, key: ViewKey | None) -> bool:
    """Whether the host's view (`seen`'s, as taken at `key`) is no longer the chain's:
    another writer moved the tip (``ctxledger compress`` / ``undo``, a model switch's
    preflight) or wrote into `seen` itself (a Python caller's ``append``, with or without
    ``withdraw=``; session 45: that was not followed, the host's list and the ledger's
    view parting silently)."""
    return seen is not None and (svc.tip(root) != seen or view_key(svc, seen) != key)


def measured(value: Any) -> int | None:
    """The request size Hermes passed with ``compress`` (``current_tokens``), when it is a
    count the ledger takes (else None: the ledger's own estimate stands in)."""
    try:
        return check_token_count(value, "current_tokens") if value else None
    except InvalidInput:
        return None


def head_compacts(
    svc: ContextService, tip: str, head: list[JSON], focus: str | None, context_length: int
) -> bool:
    """Whether a branch holding `head` (the strict prefix of its list Hermes handed for
    ``/compress here N``) would compact, forced as ``/compress`` is: the planner's
    decision on the tip's system part and `head` as the branch will hold it (the
    parent's system prompt, the window the branch takes, no pins, no compaction in
    effect), before anything is written. Hermes keeps its list when nothing compacts; a
    branch then ended the tip and recorded the conversation again. A head message that
    is one of the view's as Hermes holds it takes its stored count; a merged one is
    counted (session 46: a head counted in the view's messages was one message short
    after a merge)."""
    inp = compaction_input(svc.ledger, tip)
    offset = len(inp.messages) - len(svc.ledger.transcript.session(tip).live)
    counts = token_counts(inp, svc.config)
    if svc.config.estimator == "rough":
        fresh = rough_counts(head)
    else:
        fresh = head_counts(
            live_messages(svc, tip),
            counts[offset:],
            head,
            same=lambda a, b: said(a) == said(b),
            count=lambda m: count_message(m, inp.encoding),
        )
    decision = plan(
        [*inp.messages[:offset], *head],
        svc.config,
        counts[:offset] + fresh,
        context_length=context_length or inp.context_length,
        focus=focus,
        force=True,
    )
    return decision.action == "compress"


async def resumed_chain(
    svc: ContextService, messages: list[JSON], titles: set[str], model: str, context_length: int
) -> tuple[str, list[JSON], int] | None:
    """The ledger chain a resumed Hermes conversation goes on (``CtxLedgerEngine._resume``):
    the latest titled with one of `titles` whose live tip's view the host's list starts
    with, compared as a conversation (:func:`said`: without the bookkeeping keys Hermes's
    session store adds or drops, ``timestamp``, ``reasoning``, ...). Returns its root,
    the messages the ledger holds of it (a host's list shorter than the view, the
    gateway's ``/compress here`` on a temporary agent, is a strict prefix of them: a
    branch follows) and its compaction count; the tip takes the agent's model and window
    if they changed meanwhile (:func:`follow_model`). The view is read as Hermes held it
    when the engine handed it back (:func:`as_hermes_holds`: another writer's user note
    merged with Hermes's next ask; compared as recorded, such a chain was not found and
    the resume recorded the whole history again under a new root), else as recorded."""
    svc.ledger.refresh()
    for lineage in chains_titled(svc.ledger.chains, titles):
        tip = svc.tip(lineage.session_id)
        if svc.ledger.transcript.session(tip).ended:
            continue
        recorded = live_messages(svc, tip)
        for view in (as_hermes_holds(recorded), recorded):
            if (
                view
                and messages
                and all(said(a) == said(b) for a, b in zip(view, messages, strict=False))
            ):
                known = copy.deepcopy(messages[: len(view)] + view[len(messages) :])
                count = await follow_model(svc, tip, model, context_length)
                return lineage.session_id, known, count
    return None


async def follow_model(svc: ContextService, tip: str, model: str, context_length: int) -> int:
    """A resumed chain written under another model or window switches to the agent's
    (the service takes its thresholds from the session's window); returns the chain's
    compaction count (Hermes's ``compression_count``)."""
    session = svc.ledger.transcript.session(tip)
    if context_length and (session.model, session.context_length) != (model, context_length):
        tip = (await svc.switch_model(tip, model, context_length)).session_id
    return compactions(svc.ledger.chains, tip)


def failure_report(result: TurnResult) -> dict[str, Any]:
    """What Hermes's ``/compress`` reads to report a failed summary (its
    ``summarize_manual_compression``, its gateway), as the engine's attributes to set: an
    abandoned compaction (``_last_compress_aborted``, nothing removed) or a fallback
    summary and how many messages it replaced, each with its reason
    (``_last_summary_error``, redacted)."""
    out: dict[str, Any] = {}
    for outcome in result.compactions:
        if outcome.fallback:
            # stored redacted (at the source): one-lined, not redacted again
            said = reason_line(outcome.failure or "", redacted=True)
            out["_last_summary_fallback_used"] = True
            out["_last_summary_error"] = said or outcome.failure_class
            out["_last_summary_dropped_count"] = outcome.removed
    if result.aborted is not None:
        out["_last_compress_aborted"] = True
        out["_last_summary_error"] = result.aborted
    return out


async def branch_tip(
    svc: ContextService, root: str, model: str, context_length: int | None, held: str | None
) -> str:
    """A branch of chain `root`'s tip (``CtxLedgerEngine._branch``): a new session with
    the tip's system prompt and role, going on as recorded, titled as the chain; the old
    tip ends, superseded. Returns the branch's id. With `held` (a session of the chain
    before the tip, whose view the host holds: it never took the tip's) the branch is
    `held`'s: a resume counts the compactions in effect there, as the agent did."""
    tip = svc.tip(root)
    parent = svc.ledger.transcript.session(held or tip)
    with taking_as_recorded(parent.system_prompt):  # goes on as recorded
        branch = await svc.start_session(
            model=model,
            context_length=context_length or parent.context_length,
            system_prompt=parent.system_prompt,
            system_role=parent.system_role,
            parent_session_id=parent.session_id,
            reason="branch",
            title=svc.ledger.chains.lineage(root).title,
        )
    if not svc.ledger.transcript.session(tip).ended:
        await svc.end_session(tip, "branched")
    return branch
