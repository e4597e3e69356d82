"""The quorum wire's errors and error codes: Kafka's on the wire, the core's in messages."""

from __future__ import annotations

from collections.abc import Mapping

from api.protocol.codec import ProtocolError
from api.protocol.quorum.messages import ErrorCode


class RaftWireError(ProtocolError):
    """A quorum frame that cannot be mapped: malformed, truncated or out of range (one line)."""


class RaftWireRefusal(RaftWireError):
    """A request refused as a whole, or an answer with an error code the core does not know."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


# Kafka error codes this module answers with itself.
INVALID_REQUEST = 42
CLUSTER_AUTHORIZATION_FAILED = 31
INCONSISTENT_CLUSTER_ID = 104
INVALID_VOTER_KEY = 125
_WIRE_INCONSISTENT_VOTER_SET = 94


_TO_WIRE: Mapping[ErrorCode, int] = {
    ErrorCode.NONE: 0,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: 6,
    ErrorCode.FENCED_LEADER_EPOCH: 74,
    ErrorCode.UNKNOWN_LEADER_EPOCH: 75,
    ErrorCode.INCONSISTENT_VOTER_SET: _WIRE_INCONSISTENT_VOTER_SET,
    ErrorCode.SNAPSHOT_NOT_FOUND: 98,
    ErrorCode.POSITION_OUT_OF_RANGE: 99,
    ErrorCode.REQUEST_TIMED_OUT: 7,
    ErrorCode.UNSUPPORTED_VERSION: 35,
    ErrorCode.INVALID_REQUEST: INVALID_REQUEST,
    ErrorCode.DUPLICATE_VOTER: 126,
    ErrorCode.VOTER_NOT_FOUND: 127,
}
_FROM_WIRE: Mapping[int, ErrorCode] = {wire: core for core, wire in _TO_WIRE.items()}

_WIRE_NAMES: Mapping[int, str] = {
    -1: "UNKNOWN_SERVER_ERROR",
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    8: "BROKER_NOT_AVAILABLE",
    31: "CLUSTER_AUTHORIZATION_FAILED",
    35: "UNSUPPORTED_VERSION",
    42: "INVALID_REQUEST",
    98: "SNAPSHOT_NOT_FOUND",
    99: "POSITION_OUT_OF_RANGE",
    104: "INCONSISTENT_CLUSTER_ID",
    125: "INVALID_VOTER_KEY",
    **{wire: core.name for core, wire in _TO_WIRE.items()},
}


def wire_error_code(code: ErrorCode) -> int:
    """The Kafka error code on the wire of a core error code."""
    return _TO_WIRE[code]


def core_error_code(code: int, *, what: str) -> ErrorCode:
    """The core's error code of a wire one; `RaftWireRefusal` if the core has no such code."""
    core = _FROM_WIRE.get(int(code))
    if core is None:
        raise RaftWireRefusal(int(code), f"{what} answered {error_name(int(code))}")
    return core


def error_name(code: int) -> str:
    """A Kafka error code as `NAME (n)` (just `error n` for one this module does not name)."""
    name = _WIRE_NAMES.get(code)
    return f"{name} ({code})" if name is not None else f"error {code}"
