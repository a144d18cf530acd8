"""The write path: the synchronous :class:`Ledger` facade, compaction and import.

* :mod:`~ctxledger.ledger.facade`: :class:`Ledger` — open a store, start sessions, append
  messages and usage, views; ``Ledger.append`` is the one checked write path;
* :mod:`~ctxledger.ledger.compaction`: :func:`compact` — run one compaction against a
  ledger (read the view, plan, summarize, one atomic append);
* :mod:`~ctxledger.ledger.importing`: :func:`import_sessions` — parsed files into events;
* :mod:`~ctxledger.ledger.spec`: :class:`SessionSpec` — how a session starts, named once;
* :mod:`~ctxledger.ledger.carried`: :func:`withdrawn_carried` — the carried replies a
  continuation withdrew, which ended sessions' views still hold.
"""

from ctxledger.eventstore.opening import default_db_path
from ctxledger.ledger.compaction import CompactionOutcome, compact
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.importing import import_sessions
from ctxledger.ledger.spec import SessionSpec

__all__ = [
    "CompactionOutcome",
    "Ledger",
    "SessionSpec",
    "compact",
    "default_db_path",
    "import_sessions",
]
