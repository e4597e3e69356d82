"""Errors of the API layer; protocol-facing ones carry the Kafka error code clients see."""

from __future__ import annotations

from enum import IntEnum

from records.errors import MetadataLogError


class ErrorCode(IntEnum):
    """Kafka protocol error codes (`org.apache.kafka.common.protocol.Errors`) this service uses."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    REQUEST_TIMED_OUT = 7
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_TOPIC_EXCEPTION = 17
    TOPIC_AUTHORIZATION_FAILED = 29
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_SASL_MECHANISM = 33
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    DUPLICATE_SEQUENCE_NUMBER = 46
    SECURITY_DISABLED = 54
    KAFKA_STORAGE_ERROR = 56
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    STALE_BROKER_EPOCH = 77
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INVALID_UPDATE_VERSION = 95
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    INELIGIBLE_REPLICA = 107
    UNSUPPORTED_ENDPOINT_TYPE = 115


class ApiError(MetadataLogError):
    """A request was refused; `error_code` is what a Kafka client receives."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        message = shorten(message)
        super().__init__(f"{error_code.name} ({int(error_code)}): {message}")
        self.error_code = error_code
        self.message = message


MAX_MESSAGE = 600
"""Characters of an error message a client receives; longer ones lose their middle."""


def shorten(message: str) -> str:
    """`message`, its middle cut out if it is too long (it may quote a 10^6-character name).

    The start (what was refused) and the end (what to do next) are kept.
    """
    if len(message) <= MAX_MESSAGE:
        return message
    head, tail = MAX_MESSAGE * 2 // 3, MAX_MESSAGE // 3
    cut = len(message) - head - tail
    return f"{message[:head]}... [{cut} characters omitted] ...{message[-tail:]}"


class StorageError(ApiError):
    """A write was refused because the log's storage failed (KAFKA_STORAGE_ERROR, 56).

    Kafka answers a produce to a partition on a failed log directory with this code; clients
    treat it as retriable. The service re-opens the log in the background and takes writes
    again once that succeeds, so the same request may succeed a few seconds later.
    """

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.KAFKA_STORAGE_ERROR, message)


class IllegalStateTransitionError(MetadataLogError):
    """The controller was about to move a partition or replica through an illegal transition.

    Kafka's controller state machines forbid these; hitting one is a bug in a command, so the
    command fails and nothing is appended.
    """
