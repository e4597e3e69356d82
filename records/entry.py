"""The log entry: one record with where, when and by whom it was appended."""

from __future__ import annotations

from dataclasses import dataclass

from records.model import Record
from records.slots import new_instance, slot_setter


@dataclass(frozen=True, slots=True, kw_only=True)
class LogEntry:
    """One entry of the metadata log."""

    offset: int
    """Dense position in the log, starting at 0."""
    epoch: int
    """Leader epoch of the writer incarnation that appended the entry."""
    timestamp: int
    """Append time in milliseconds since the Unix epoch."""
    principal: str | None
    """Who asked for the change; None if unknown."""
    record: Record


_set_offset = slot_setter(LogEntry, "offset")
_set_epoch = slot_setter(LogEntry, "epoch")
_set_timestamp = slot_setter(LogEntry, "timestamp")
_set_principal = slot_setter(LogEntry, "principal")
_set_record = slot_setter(LogEntry, "record")


def make_entry(
    offset: int, epoch: int, timestamp: int, principal: str | None, record: Record
) -> LogEntry:
    """Build a LogEntry from decoded, trusted values, skipping the frozen `__init__`."""
    entry: LogEntry = new_instance(LogEntry)
    _set_offset(entry, offset)
    _set_epoch(entry, epoch)
    _set_timestamp(entry, timestamp)
    _set_principal(entry, principal)
    _set_record(entry, record)
    return entry
