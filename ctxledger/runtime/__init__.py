"""The runtime: the service an agent loop calls, and the pure decisions it wires to the ledger.

* :mod:`~ctxledger.runtime.overflow`: classify provider errors, decide recovery.
* :mod:`~ctxledger.runtime.caching`: Anthropic ``cache_control`` breakpoints.
* :mod:`~ctxledger.runtime.toolbudget`: keep huge tool outputs out of the context.
* :mod:`~ctxledger.runtime.pressure`: warnings, anti-thrashing, cooldown, hygiene.

Nothing in those four does I/O or reads a clock. Above them:

* :mod:`~ctxledger.runtime.service`: :class:`ContextService`, the async runtime an agent
  loop calls; it wires the decisions to the ledger;
* :mod:`~ctxledger.runtime.engine`: the ``ContextEngine`` protocol, the built-in
  engine, and ``RuntimeTracker`` (the chain's runtime state folded from events);
* :mod:`~ctxledger.runtime.outputs`: the tool-output budget applied to appends;
* :mod:`~ctxledger.runtime.service_io`: ``TurnResult`` and ``Recovery`` and the input
  checks the service runs before anything is appended.
"""

from ctxledger.runtime.caching import (
    CacheTTL,
    apply_cache_markers,
    count_cache_markers,
    supports_prompt_caching,
)
from ctxledger.runtime.engine import ContextEngine
from ctxledger.runtime.overflow import (
    OverflowRecovery,
    ProviderErrorClass,
    RecoveryAction,
    classify_provider_error,
    recovery_action,
)
from ctxledger.runtime.pressure import (
    AntiThrash,
    Cooldown,
    HygieneDecision,
    PressureDecision,
    hygiene_should_compress,
    pressure_check,
)
from ctxledger.runtime.service import ContextService
from ctxledger.runtime.service_io import Recovery, TurnResult
from ctxledger.runtime.toolbudget import (
    READ_PERSISTED_TOOL,
    PersistDecision,
    SliceResult,
    ToolBudget,
    ToolResult,
    plan_persistence,
    preview_block,
    read_persisted_tool,
    read_slice,
    safe_blob_name,
)

__all__ = [
    "READ_PERSISTED_TOOL",
    "AntiThrash",
    "CacheTTL",
    "ContextEngine",
    "ContextService",
    "Cooldown",
    "HygieneDecision",
    "OverflowRecovery",
    "PersistDecision",
    "PressureDecision",
    "ProviderErrorClass",
    "Recovery",
    "RecoveryAction",
    "SliceResult",
    "ToolBudget",
    "ToolResult",
    "TurnResult",
    "apply_cache_markers",
    "classify_provider_error",
    "count_cache_markers",
    "hygiene_should_compress",
    "plan_persistence",
    "pressure_check",
    "preview_block",
    "read_persisted_tool",
    "read_slice",
    "recovery_action",
    "safe_blob_name",
    "supports_prompt_caching",
]
