"""Pure runtime decisions an agent loop needs around each model call.

* :mod:`~ctxledger.runtime.overflow`: classify provider errors, decide recovery.
* :mod:`~ctxledger.runtime.caching`: Anthropic ``cache_control`` breakpoints.
* :mod:`~ctxledger.runtime.toolbudget`: keep huge tool outputs out of the context.
* :mod:`~ctxledger.runtime.pressure`: warnings, anti-thrashing, cooldown, hygiene.

Nothing in those four does I/O or reads a clock; ``service.py`` wires them to the
store. Three modules are not re-exported here because they sit above the ledger
(importing them from this package root would be circular):

* :mod:`~ctxledger.runtime.engine`: the ``ContextEngine`` protocol, the built-in
  engine, and ``RuntimeTracker`` (the chain's runtime state folded from events);
* :mod:`~ctxledger.runtime.outputs`: the tool-output budget applied to appends;
* :mod:`~ctxledger.runtime.results`: ``TurnResult`` and ``Recovery``.
"""

from ctxledger.runtime.caching import (
    CacheTTL,
    apply_cache_markers,
    count_cache_markers,
    supports_prompt_caching,
)
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
    "Cooldown",
    "HygieneDecision",
    "OverflowRecovery",
    "PersistDecision",
    "PressureDecision",
    "ProviderErrorClass",
    "RecoveryAction",
    "SliceResult",
    "ToolBudget",
    "ToolResult",
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
