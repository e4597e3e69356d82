"""The API layer's errors: Kafka's error codes on the wire, and messages a client can read."""

from __future__ import annotations

import pytest

from records.errors import MetadataLogError
from replay.controller.errors import (
    MAX_MESSAGE,
    ApiError,
    ErrorCode,
    IllegalStateTransitionError,
    StorageError,
    shorten,
)

KAFKA_ERROR_CODES = {
    "UNKNOWN_SERVER_ERROR": -1,
    "NONE": 0,
    "OFFSET_OUT_OF_RANGE": 1,
    "UNKNOWN_TOPIC_OR_PARTITION": 3,
    "REQUEST_TIMED_OUT": 7,
    "INVALID_TOPIC_EXCEPTION": 17,
    "TOPIC_AUTHORIZATION_FAILED": 29,
    "GROUP_AUTHORIZATION_FAILED": 30,
    "CLUSTER_AUTHORIZATION_FAILED": 31,
    "UNSUPPORTED_SASL_MECHANISM": 33,
    "ILLEGAL_SASL_STATE": 34,
    "UNSUPPORTED_VERSION": 35,
    "TOPIC_ALREADY_EXISTS": 36,
    "INVALID_PARTITIONS": 37,
    "INVALID_REPLICATION_FACTOR": 38,
    "INVALID_REPLICA_ASSIGNMENT": 39,
    "INVALID_CONFIG": 40,
    "NOT_CONTROLLER": 41,
    "INVALID_REQUEST": 42,
    "POLICY_VIOLATION": 44,
    "DUPLICATE_SEQUENCE_NUMBER": 46,
    "SECURITY_DISABLED": 54,
    "KAFKA_STORAGE_ERROR": 56,
    "SASL_AUTHENTICATION_FAILED": 58,
    "TOPIC_DELETION_DISABLED": 73,
    "FENCED_LEADER_EPOCH": 74,
    "STALE_BROKER_EPOCH": 77,
    "PREFERRED_LEADER_NOT_AVAILABLE": 80,
    "ELIGIBLE_LEADERS_NOT_AVAILABLE": 83,
    "ELECTION_NOT_NEEDED": 84,
    "NO_REASSIGNMENT_IN_PROGRESS": 85,
    "RESOURCE_NOT_FOUND": 91,
    "DUPLICATE_RESOURCE": 92,
    "UNACCEPTABLE_CREDENTIAL": 93,
    "INVALID_UPDATE_VERSION": 95,
    "UNKNOWN_TOPIC_ID": 100,
    "DUPLICATE_BROKER_REGISTRATION": 101,
    "BROKER_ID_NOT_REGISTERED": 102,
    "INCONSISTENT_TOPIC_ID": 103,
    "INCONSISTENT_CLUSTER_ID": 104,
    "INELIGIBLE_REPLICA": 107,
    "UNSUPPORTED_ENDPOINT_TYPE": 115,
}
"""Kafka's `org.apache.kafka.common.protocol.Errors`: name -> code, for the codes we use."""


ANSWERED = (
    "UNKNOWN_SERVER_ERROR",
    "NONE",
    "OFFSET_OUT_OF_RANGE",
    "UNKNOWN_TOPIC_OR_PARTITION",
    "REQUEST_TIMED_OUT",
    "INVALID_TOPIC_EXCEPTION",
    "CLUSTER_AUTHORIZATION_FAILED",
    "UNSUPPORTED_VERSION",
    "TOPIC_ALREADY_EXISTS",
    "INVALID_PARTITIONS",
    "INVALID_REPLICATION_FACTOR",
    "INVALID_REPLICA_ASSIGNMENT",
    "INVALID_CONFIG",
    "NOT_CONTROLLER",
    "INVALID_REQUEST",
    "POLICY_VIOLATION",
    "DUPLICATE_SEQUENCE_NUMBER",
    "KAFKA_STORAGE_ERROR",
    "TOPIC_DELETION_DISABLED",
    "STALE_BROKER_EPOCH",
    "PREFERRED_LEADER_NOT_AVAILABLE",
    "ELIGIBLE_LEADERS_NOT_AVAILABLE",
    "ELECTION_NOT_NEEDED",
    "NO_REASSIGNMENT_IN_PROGRESS",
    "UNKNOWN_TOPIC_ID",
    "BROKER_ID_NOT_REGISTERED",
    "INCONSISTENT_TOPIC_ID",
    "UNSUPPORTED_ENDPOINT_TYPE",
    "FENCED_LEADER_EPOCH",
    "INVALID_UPDATE_VERSION",
    "DUPLICATE_BROKER_REGISTRATION",
    "INCONSISTENT_CLUSTER_ID",
    "INELIGIBLE_REPLICA",
)
"""The codes the server, the controller and the client use (the server answers a request it
cannot parse with UNSUPPORTED_VERSION or UNKNOWN_SERVER_ERROR, a follower with NOT_CONTROLLER)."""


def test_every_code_the_service_answers_with_exists() -> None:
    assert [name for name in ANSWERED if name not in ErrorCode.__members__] == []


def test_every_error_code_is_kafkas() -> None:
    unknown = [code.name for code in ErrorCode if code.name not in KAFKA_ERROR_CODES]
    assert unknown == [], "add them to KAFKA_ERROR_CODES from Kafka's Errors.java"
    assert {code.name: int(code) for code in ErrorCode} == {
        name: KAFKA_ERROR_CODES[name] for name in ErrorCode.__members__
    }


def test_an_api_error_names_its_code_and_keeps_the_message() -> None:
    error = ApiError(ErrorCode.INVALID_CONFIG, "bad value")
    assert isinstance(error, MetadataLogError)
    assert error.error_code is ErrorCode.INVALID_CONFIG
    assert error.message == "bad value"
    assert str(error) == "INVALID_CONFIG (40): bad value"


def test_a_storage_error_is_kafkas_retriable_storage_error() -> None:
    error = StorageError("the disk is full")
    assert isinstance(error, ApiError)
    assert error.error_code is ErrorCode.KAFKA_STORAGE_ERROR
    assert str(error) == "KAFKA_STORAGE_ERROR (56): the disk is full"


def test_an_illegal_transition_is_a_bug_not_a_refusal() -> None:
    error = IllegalStateTransitionError("x")
    assert isinstance(error, MetadataLogError) and not isinstance(error, ApiError)


@pytest.mark.parametrize("size", [0, 1, MAX_MESSAGE - 1, MAX_MESSAGE])
def test_a_message_up_to_the_limit_is_kept_whole(size: int) -> None:
    message = "m" * size
    assert shorten(message) == message
    assert ApiError(ErrorCode.INVALID_REQUEST, message).message == message


@pytest.mark.parametrize("size", [MAX_MESSAGE + 1, 10 * MAX_MESSAGE, 10**6])
def test_a_longer_message_keeps_its_start_and_end(size: int) -> None:
    message = "S" + "m" * (size - 2) + "E"
    short = shorten(message)
    head, tail = MAX_MESSAGE * 2 // 3, MAX_MESSAGE // 3
    cut = size - head - tail
    assert short == f"{message[:head]}... [{cut} characters omitted] ...{message[-tail:]}"
    assert short.startswith("S") and short.endswith("E")
    assert ApiError(ErrorCode.INVALID_REQUEST, message).message == short


def test_the_limit_is_what_clients_are_promised() -> None:
    assert MAX_MESSAGE == 600
