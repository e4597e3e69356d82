"""Where metadata is kept: a segmented, Avro-encoded, crash-safe append-only log."""

from metadata_log.config import LogConfig
from metadata_log.errors import (
    LogClosedError,
    LogConfigError,
    LogCorruptionError,
    LogError,
    LogFailedError,
    LogLockedError,
    ReadOnlyLogError,
)
from metadata_log.log import AppendResult, MetadataLog
from metadata_log.repair import RepairRefusedError, RepairReport, truncate_after
from metadata_log.segment import SegmentInfo
from metadata_log.verify import SegmentReport, VerifyReport, verify_log

__all__ = [
    "AppendResult",
    "LogClosedError",
    "LogConfig",
    "LogConfigError",
    "LogCorruptionError",
    "LogError",
    "LogFailedError",
    "LogLockedError",
    "MetadataLog",
    "ReadOnlyLogError",
    "RepairRefusedError",
    "RepairReport",
    "SegmentInfo",
    "SegmentReport",
    "VerifyReport",
    "truncate_after",
    "verify_log",
]
