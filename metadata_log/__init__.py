"""Where metadata is kept: a segmented, Avro-encoded, crash-safe append-only log.

The names below are imported from their modules on first use, so that importing one module
(`metadata_log.config`) does not import the log and the codec.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from metadata_log.config import LogConfig
    from metadata_log.errors import (
        LogClosedError,
        LogConfigError,
        LogCorruptionError,
        LogError,
        LogFailedError,
        LogLockedError,
        ReadOnlyLogError,
        ReplicaBlockError,
    )
    from metadata_log.log import AppendResult, MetadataLog
    from metadata_log.repair import RepairRefusedError, RepairReport, truncate_after
    from metadata_log.replica import ReplicaBlock
    from metadata_log.segment import SegmentInfo
    from metadata_log.verify import SegmentReport, VerifyReport, verify_log

_HOMES = {
    "LogConfig": "metadata_log.config",
    "LogClosedError": "metadata_log.errors",
    "LogConfigError": "metadata_log.errors",
    "LogCorruptionError": "metadata_log.errors",
    "LogError": "metadata_log.errors",
    "LogFailedError": "metadata_log.errors",
    "LogLockedError": "metadata_log.errors",
    "ReadOnlyLogError": "metadata_log.errors",
    "ReplicaBlockError": "metadata_log.errors",
    "AppendResult": "metadata_log.log",
    "MetadataLog": "metadata_log.log",
    "RepairRefusedError": "metadata_log.repair",
    "RepairReport": "metadata_log.repair",
    "truncate_after": "metadata_log.repair",
    "ReplicaBlock": "metadata_log.replica",
    "SegmentInfo": "metadata_log.segment",
    "SegmentReport": "metadata_log.verify",
    "VerifyReport": "metadata_log.verify",
    "verify_log": "metadata_log.verify",
}
"""Where each name of `metadata_log` is defined: imported from there on first use."""


# mypy sees the names through the imports above; only the interpreter needs the hook.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """`metadata_log.<name>`: import the module that defines it (PEP 562), once."""
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value
        return value


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
    "ReplicaBlock",
    "ReplicaBlockError",
    "SegmentInfo",
    "SegmentReport",
    "VerifyReport",
    "truncate_after",
    "verify_log",
]
