"""Where metadata is kept: a segmented, Avro-encoded, crash-safe append-only log.

The public names are declared once, by the imports below; at run time they are imported from
their modules on first use (PEP 562), so that importing one module (`metadata_log.config`)
does not import the log and the codec. `__all__` and the lazy lookup are derived from these
imports, read from this file's source on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from metadata_log.config import LogConfig as LogConfig
    from metadata_log.errors import LogClosedError as LogClosedError
    from metadata_log.errors import LogConfigError as LogConfigError
    from metadata_log.errors import LogCorruptionError as LogCorruptionError
    from metadata_log.errors import LogError as LogError
    from metadata_log.errors import LogFailedError as LogFailedError
    from metadata_log.errors import LogLockedError as LogLockedError
    from metadata_log.errors import ReadOnlyLogError as ReadOnlyLogError
    from metadata_log.errors import ReplicaBlockError as ReplicaBlockError
    from metadata_log.log import MetadataLog as MetadataLog
    from metadata_log.memory import MemoryLog as MemoryLog
    from metadata_log.memory_replica import MemoryReplicaLog as MemoryReplicaLog
    from metadata_log.protocols import AppendLog as AppendLog
    from metadata_log.protocols import ReadLog as ReadLog
    from metadata_log.protocols import ReplicatedLog as ReplicatedLog
    from metadata_log.reader import LogReader as LogReader
    from metadata_log.repair import RepairRefusedError as RepairRefusedError
    from metadata_log.repair import RepairReport as RepairReport
    from metadata_log.repair import truncate_after as truncate_after
    from metadata_log.replica import ReplicaBlock as ReplicaBlock
    from metadata_log.replica_log import ReplicaLog as ReplicaLog
    from metadata_log.segment import SegmentInfo as SegmentInfo
    from metadata_log.stored_log import StoredLog as StoredLog
    from metadata_log.verify import SegmentReport as SegmentReport
    from metadata_log.verify import VerifyReport as VerifyReport
    from metadata_log.verify import verify_log as verify_log
    from metadata_log.writer import AppendResult as AppendResult


# mypy sees the names through the imports above; only the interpreter needs the hook.
if not TYPE_CHECKING:
    from records.exports import lazy_getattr

    __getattr__ = lazy_getattr(__name__, __file__)
