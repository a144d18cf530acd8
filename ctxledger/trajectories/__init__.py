"""Batch trajectory compression for training data (HERMES_SPEC §8).

``core`` holds the per-trajectory algorithm (pure planning + one summary turn);
``batch`` runs many trajectories from a JSONL file concurrently, resumably.
"""

from ctxledger.trajectories.batch import (
    AggregateReport,
    InputRecord,
    backoff_delay,
    compress_file,
    compress_file_sync,
    metrics_path_for,
    read_records,
    report_path_for,
    resume_state,
)
from ctxledger.trajectories.core import (
    DEFAULT_NOTICE,
    FATAL_FAILURES,
    SUMMARY_PREFIX,
    TrajectoryConfig,
    TrajectoryMetrics,
    TrajectoryPlan,
    clip_to_tokens,
    compress_trajectory,
    compress_turns,
    plan_trajectory,
    protected_bounds,
)

__all__ = [
    "DEFAULT_NOTICE",
    "FATAL_FAILURES",
    "SUMMARY_PREFIX",
    "AggregateReport",
    "InputRecord",
    "TrajectoryConfig",
    "TrajectoryMetrics",
    "TrajectoryPlan",
    "backoff_delay",
    "clip_to_tokens",
    "compress_file",
    "compress_file_sync",
    "compress_trajectory",
    "compress_turns",
    "metrics_path_for",
    "plan_trajectory",
    "protected_bounds",
    "read_records",
    "report_path_for",
    "resume_state",
]
