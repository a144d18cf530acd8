"""Pure compaction: config, prune, layout, plan, assemble; the summarizers; recording.

Nothing in this package touches the store: the planner takes an API message list and
returns a :class:`~ctxledger.compressor.planner.CompactionPlan`;
:mod:`~ctxledger.compressor.recording` turns a plan plus a summary into events that
the ledger appends. ``facts``, ``factmatch``, ``toolcalls`` and ``redact`` are the
knowledge the summarizers and the audit share.
"""

from ctxledger.compressor.assemble import AssembledTranscript, apply
from ctxledger.compressor.config import CompressionConfig, load_config
from ctxledger.compressor.planner import CompactionPlan, plan
from ctxledger.compressor.prune import prune_messages
from ctxledger.compressor.redact import redact, redact_message

__all__ = [
    "AssembledTranscript",
    "CompactionPlan",
    "CompressionConfig",
    "apply",
    "load_config",
    "plan",
    "prune_messages",
    "redact",
    "redact_message",
]
