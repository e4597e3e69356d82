"""Idempotent writes: a retried write (same client id and sequence) is not applied twice.

A client that wants it sends each write with its instance id (a random UUID) and a sequence
number (one per write; a retry reuses the write's), in the request header's tagged field
`WRITE_ID_TAG` (`api.protocol.codec`; Kafka APIs) or the private request header v2 (ours). The
server hands them to the service as a `PendingWrite` in the `CURRENT_WRITE` context variable,
set only around such a request, so a request without one costs the service one
context-variable read.

The service (`MetadataService.submit`, `ReplicatedService.submit`) then:
- finds the client's last write in the working image's `client_writes` table; a client id
  belongs to the principal that first used it: another principal's write with it, whatever
  its sequence, is INVALID_REQUEST;
- same sequence: answers with the stored answer (`PendingWrite.decode`), appending
  nothing, once that write is committed; an older sequence: DUPLICATE_SEQUENCE_NUMBER (its
  answer is no longer kept); the same sequence through another API: INVALID_REQUEST;
- a newer sequence (or an unknown client): runs the command; if it writes records, a
  `ClientWriteRecord` with the answer (`PendingWrite.encode`) joins the same atomic batch.

Answers are stored as the controller's result (what the handler turns into the wire answer),
in a per-API form the server defines (`api.server.write_ids`), so the stored form does not
depend on the request's version and a retry may come in another version.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from records.model import ClientWriteRecord
from records.uuids import Uuid
from replay.controller.commands import ControllerResult
from replay.controller.errors import ApiError, ErrorCode
from replay.image import MetadataImage

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class WriteId:
    """A client instance's id and a write's sequence number within it."""

    client_id: Uuid
    sequence: int


@dataclass(frozen=True, slots=True)
class PendingWrite:
    """An idempotent write under way: its id, the API it came through, and who asks.

    `encode` and `decode` turn the API's answer (the controller's result) into its stored
    form and back; the server, which knows the APIs, gives them (`api.server.write_ids`).
    """

    write_id: WriteId
    api_key: int
    principal: str | None
    encode: Callable[[Any], bytes]
    decode: Callable[[bytes], Any]


CURRENT_WRITE: contextvars.ContextVar[PendingWrite | None] = contextvars.ContextVar(
    "mlog_current_write", default=None
)
"""Set by the server around an idempotent request's handler; read once by the service."""


def require_owner(found: ClientWriteRecord, write: PendingWrite) -> None:
    """INVALID_REQUEST unless `write` comes from the principal that first used its client id.

    Checked whatever the sequence: another principal's newer sequence would otherwise take
    over the slot, and with it the first principal's retries (issue #31, finding 7).
    """
    if found.principal != write.principal:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"client id {write.write_id.client_id} belongs to another principal; every client "
            "instance must use its own random id",
        )


def stored_answer(found: ClientWriteRecord, write: PendingWrite) -> Any:
    """The answer a retry gets from its client's last write, or the refusal of a bad one.

    `found` has the retry's sequence or a newer one (the caller checks which).
    """
    write_id = write.write_id
    require_owner(found, write)
    if found.sequence > write_id.sequence:
        raise ApiError(
            ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
            f"write {write_id.sequence} of client {write_id.client_id} is older than its last "
            f"write ({found.sequence}): it was answered already and its answer is no longer "
            "kept; look at the current state instead of retrying it",
        )
    if found.api_key != write.api_key:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"write {write_id.sequence} of client {write_id.client_id} was a request of API "
            f"{found.api_key}, not {write.api_key}: a new write needs a new sequence number",
        )
    return write.decode(found.response)


def client_write_record(write: PendingWrite, response: Any) -> ClientWriteRecord:
    """The record that notes a write's id and answer, for the write's own batch."""
    return ClientWriteRecord(
        client_id=write.write_id.client_id,
        sequence=write.write_id.sequence,
        principal=write.principal,
        api_key=write.api_key,
        response=write.encode(response),
    )


def noting_write(
    command: Callable[[MetadataImage], ControllerResult[T]], write: PendingWrite
) -> Callable[[MetadataImage], ControllerResult[T]]:
    """`command`, whose records (if any) are followed by the note of the write's answer."""

    def noted(image: MetadataImage) -> ControllerResult[T]:
        result = command(image)
        if not result.records:
            return result  # nothing changed: a retry runs it again, as the first attempt
        note = client_write_record(write, result.response)
        return ControllerResult(
            records=(*result.records, note), response=result.response, more=result.more
        )

    return noted
