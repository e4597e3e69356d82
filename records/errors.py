"""Errors of the records layer, and the root of every error metadata-log raises."""

from __future__ import annotations


class MetadataLogError(Exception):
    """Root of every error raised by metadata-log; catch this to catch them all."""


class RecordError(MetadataLogError):
    """A record could not be encoded, decoded or upcast."""


class UnknownRecordTypeError(RecordError):
    """A stored entry names a record type (or type and version) this code does not know."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"unknown record type {name!r}: the log was written by a newer metadata-log; "
            "upgrade metadata-log to read it"
        )
        self.name = name


class UnsupportedRecordVersionError(RecordError):
    """A record version has no upcaster path to the version this code understands."""

    def __init__(self, record_type: int, version: int, current: int) -> None:
        super().__init__(
            f"record type {record_type} version {version} cannot be read: no upcaster leads "
            f"from version {version} to the current version {current}; upgrade metadata-log"
        )
        self.record_type = record_type
        self.version = version
