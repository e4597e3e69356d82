"""The stored form of each idempotent write API's answer, and the `PendingWrite` of a request.

A write that carries a write id (`RequestHeader.write_id`) through one of `IDEMPOTENT_APIS` is
handed to the service as a `PendingWrite` (`api.service.client_writes`) whose answer is stored
as the controller's result, Avro-encoded through `avro_bind` (lists as a record of one array),
so its stored form is the same whatever version of the API the request was. A write id on any
other API (the reads) is ignored. PurgePending is among the writes: a retried check whose
first attempt put partitions in mode NONE would otherwise remove them at once, skipping the
interval between the two steps.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from api.protocol.avro_bind import BindError, binding
from api.protocol.codec import RequestHeader
from api.service.client_writes import PendingWrite, WriteId
from records.uuids import Uuid
from replay.controller.commands import (
    AlterConfigsResult,
    AlterScramResult,
    BrokerResult,
    CancelPartitionDeletionResult,
    CreateAclResult,
    CreateNamespaceResult,
    CreatePartitionsResult,
    CreateTopicResult,
    DeleteAclsResult,
    DeleteNamespaceResult,
    DeletePartitionsResult,
    DeleteTopicResult,
    MoveTopicResult,
    PartitionResult,
    PurgeResult,
)
from replay.controller.errors import ApiError, ErrorCode


def _results(name: str, item: type[Any]) -> type[Any]:
    return dataclasses.make_dataclass(
        name,
        [("results", tuple[item, ...])],  # type: ignore[valid-type]  # a class made at import
        frozen=True,
        slots=True,
        kw_only=True,
    )


_LISTS: dict[int, type[Any]] = {
    19: _results("CreateTopicsAnswer", CreateTopicResult),
    20: _results("DeleteTopicsAnswer", DeleteTopicResult),
    37: _results("CreatePartitionsAnswer", CreatePartitionsResult),
    33: _results("AlterConfigsAnswer", AlterConfigsResult),
    44: _results("IncrementalAlterConfigsAnswer", AlterConfigsResult),
    43: _results("ElectLeadersAnswer", PartitionResult),
    45: _results("AlterPartitionReassignmentsAnswer", PartitionResult),
    30: _results("CreateAclsAnswer", CreateAclResult),
    31: _results("DeleteAclsAnswer", DeleteAclsResult),
    51: _results("AlterUserScramCredentialsAnswer", AlterScramResult),
    10004: _results("DeletePartitionsAnswer", DeletePartitionsResult),
    10005: _results("PurgePendingAnswer", PurgeResult),
    10008: _results("CancelPartitionDeletionsAnswer", CancelPartitionDeletionResult),
}
"""APIs whose controller result is a list: stored as a record of one array."""

_SINGLE: dict[int, type[Any]] = {
    10000: CreateNamespaceResult,
    10001: DeleteNamespaceResult,
    10003: MoveTopicResult,
    10006: BrokerResult,
    10007: BrokerResult,
}
"""APIs whose controller result is one dataclass: stored as that record."""

IDEMPOTENT_APIS: frozenset[int] = frozenset(_LISTS) | frozenset(_SINGLE)
"""The write APIs whose answers can be stored: a write id on any other API is ignored."""


def encode_answer(api_key: int, response: Any) -> bytes:
    """The stored form of a write's answer (the controller's result)."""
    wrapper = _LISTS.get(api_key)
    if wrapper is not None:
        return binding(wrapper).encode(wrapper(results=tuple(response)))
    return binding(_SINGLE[api_key]).encode(response)


def decode_answer(api_key: int, data: bytes) -> Any:
    """The controller's result a stored answer holds (lists come back as lists)."""
    try:
        wrapper = _LISTS.get(api_key)
        if wrapper is not None:
            return list(binding(wrapper).decode(data).results)
        return binding(_SINGLE[api_key]).decode(data)
    except (BindError, KeyError) as exc:
        raise ApiError(
            ErrorCode.UNKNOWN_SERVER_ERROR, f"a stored answer of API {api_key} is unreadable: {exc}"
        ) from None


def _encoder(api_key: int) -> Any:
    return lambda response: encode_answer(api_key, response)


def _decoder(api_key: int) -> Any:
    return lambda data: decode_answer(api_key, data)


_CODECS = {key: (_encoder(key), _decoder(key)) for key in IDEMPOTENT_APIS}


def pending_write(header: RequestHeader, principal: str | None) -> PendingWrite | None:
    """The idempotent write a request header carries, or None (no write id, or not a write)."""
    write_id = header.write_id
    codecs = _CODECS.get(header.api_key)
    if write_id is None or codecs is None:
        return None
    client_id, sequence = write_id
    return PendingWrite(
        write_id=WriteId(client_id=Uuid(client_id), sequence=sequence),
        api_key=header.api_key,
        principal=principal,
        encode=codecs[0],
        decode=codecs[1],
    )
