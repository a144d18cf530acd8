"""Contract suites an out-of-tree implementation can run (needs pytest and hypothesis).

Each is an abstract test class; subclass it in a ``test_*.py`` module and implement
its factory method, and pytest runs the whole contract against your implementation:

* :class:`~ctxledger.testing.eventstore.EventStoreContract` — ``make_store(path)``: an
  :class:`~ctxledger.EventStore` backend (atomic multi-stream appends, expected
  versions, idempotent ids, hash chain and verify, blobs, checkpoints, ``follow()``);
* :class:`~ctxledger.testing.summarizer.SummarizerContract` — ``make_summarizer()``: a
  :class:`~ctxledger.Summarizer` (structured handoff, determinism, failures typed);
* :class:`~ctxledger.testing.engine.ContextEngineContract` — ``make_engine(ledger)``: a
  :class:`~ctxledger.ContextEngine` driven by :class:`~ctxledger.ContextService`
  (compactions keep the transcript invariants of DESIGN.md).

Import the submodule you need; this package root imports none of them, so importing
``ctxledger.testing`` never pulls pytest into an application.
"""

__all__: list[str] = []
