"""Adapters that plug ctxledger into agent frameworks people already run.

Each adapter is an optional extra and imports its framework only in its own module:

* :mod:`ctxledger.integrations.hermes` — a Hermes Agent ``ContextEngine`` plugin
  (``pip install 'ctxledger[hermes]'``, entry point group ``hermes_agent.plugins``);
* :mod:`ctxledger.integrations.openai_agents` — ``CtxLedgerSession``, an OpenAI Agents
  SDK session (``ctxledger[agents]``), with :mod:`ctxledger.importers.responses`
  converting Responses input items to chat messages and back, and
  :mod:`ctxledger.integrations.openai_agents_hooks`'s ``CtxLedgerRunHooks`` recording
  the agent's system prompt of each model call;
* :mod:`ctxledger.integrations.langchain` — ``CtxLedgerMiddleware``, a LangChain v1
  agent middleware (``ctxledger[langchain]``).

All three drive :class:`~ctxledger.ContextService`; none has compaction logic of its
own. :mod:`ctxledger.integrations.common` holds what they share (the private event
loop synchronous hosts call through, the view without its system message).
"""
