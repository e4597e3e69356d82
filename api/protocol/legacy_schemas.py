"""Schemas of API versions Kafka 3.9 serves that `kio` (the schema library) does not ship.

kio is generated from Kafka 4's message definitions, which dropped CreateTopics v0-1,
DeleteTopics v0, DescribeConfigs v0 and DescribeAcls v0; Kafka 3.9 still serves them and
clients still send them (Go's Sarama: DescribeConfigs v0, DescribeAcls v0). These classes are
written from Kafka 3.9's JSON definitions (`clients/src/main/resources/common/message/`) in
kio's form, so the generated readers and writers (`fast_reader`, `fast_writer`) and kio's own
serialisers handle them as they handle kio's classes. Nested entities that are the same in the
next version kio has are kio's own. None of these versions is flexible: request header v1,
response header v0.
"""

# No `from __future__ import annotations`: kio reads the field types at run time.
import datetime
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kio.schema.create_topics.v2.request import CreatableTopic
from kio.schema.describe_configs.v1.request import DescribeConfigsResource
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader
from kio.schema.types import TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32Timedelta

_DEFAULT_TIMEOUT = i32Timedelta.parse(datetime.timedelta(milliseconds=60000))

# ---------------------------------------------------------------------- CreateTopics (19) v0-1


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicsRequestV0:
    """CreateTopics v0: v1 without `validate_only`."""

    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(19)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topics: tuple[CreatableTopic, ...]
    timeout: i32Timedelta = field(
        metadata={"kafka_type": "timedelta_i32"}, default=_DEFAULT_TIMEOUT
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicsRequestV1:
    """CreateTopics v1: the same fields as v2."""

    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(19)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topics: tuple[CreatableTopic, ...]
    timeout: i32Timedelta = field(
        metadata={"kafka_type": "timedelta_i32"}, default=_DEFAULT_TIMEOUT
    )
    validate_only: bool = field(metadata={"kafka_type": "bool"}, default=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopicResultV0:
    """A topic's result in CreateTopics v0: name and error code only."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(19)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicsResponseV0:
    """CreateTopics v0 answer: no throttle time."""

    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(19)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topics: tuple[CreatableTopicResultV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopicResultV1:
    """A topic's result in CreateTopics v1: with the error message."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(19)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicsResponseV1:
    """CreateTopics v1 answer: no throttle time (from v2)."""

    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(19)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topics: tuple[CreatableTopicResultV1, ...]


# ---------------------------------------------------------------------- DeleteTopics (20) v0


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicsRequestV0:
    """DeleteTopics v0: the same fields as v1."""

    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(20)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_names: tuple[TopicName, ...] = field(metadata={"kafka_type": "string"}, default=())
    timeout: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletableTopicResultV0:
    """A topic's result in DeleteTopics v0."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(20)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicsResponseV0:
    """DeleteTopics v0 answer: no throttle time."""

    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(20)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    responses: tuple[DeletableTopicResultV0, ...]


# ---------------------------------------------------------------------- DescribeConfigs (32) v0


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsRequestV0:
    """DescribeConfigs v0: v1 without `include_synonyms`."""

    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(32)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    resources: tuple[DescribeConfigsResource, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResourceResultV0:
    """A config in DescribeConfigs v0: `is_default` where v1+ has a source and synonyms."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(32)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: str = field(metadata={"kafka_type": "string"})
    value: str | None = field(metadata={"kafka_type": "string"})
    read_only: bool = field(metadata={"kafka_type": "bool"})
    is_default: bool = field(metadata={"kafka_type": "bool"})
    is_sensitive: bool = field(metadata={"kafka_type": "bool"})


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResultV0:
    """A resource's result in DescribeConfigs v0."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(32)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"})
    resource_type: i8 = field(metadata={"kafka_type": "int8"})
    resource_name: str = field(metadata={"kafka_type": "string"})
    configs: tuple[DescribeConfigsResourceResultV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResponseV0:
    """DescribeConfigs v0 answer."""

    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(32)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    results: tuple[DescribeConfigsResultV0, ...]


# ---------------------------------------------------------------------- DescribeAcls (29) v0


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeAclsRequestV0:
    """DescribeAcls v0: v1 without `pattern_type_filter` (v0 filters are LITERAL)."""

    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(29)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    resource_type_filter: i8 = field(metadata={"kafka_type": "int8"})
    resource_name_filter: str | None = field(metadata={"kafka_type": "string"})
    principal_filter: str | None = field(metadata={"kafka_type": "string"})
    host_filter: str | None = field(metadata={"kafka_type": "string"})
    operation: i8 = field(metadata={"kafka_type": "int8"})
    permission_type: i8 = field(metadata={"kafka_type": "int8"})


@dataclass(frozen=True, slots=True, kw_only=True)
class AclDescriptionV0:
    """One ACL in a DescribeAcls v0 answer."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(29)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    principal: str = field(metadata={"kafka_type": "string"})
    host: str = field(metadata={"kafka_type": "string"})
    operation: i8 = field(metadata={"kafka_type": "int8"})
    permission_type: i8 = field(metadata={"kafka_type": "int8"})


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeAclsResourceV0:
    """A resource in a DescribeAcls v0 answer: no pattern type."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(29)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    resource_type: i8 = field(metadata={"kafka_type": "int8"})
    resource_name: str = field(metadata={"kafka_type": "string"})
    acls: tuple[AclDescriptionV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeAclsResponseV0:
    """DescribeAcls v0 answer."""

    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(29)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"})
    resources: tuple[DescribeAclsResourceV0, ...]


LEGACY_PAYLOADS: dict[tuple[int, int, EntityType], type[Any]] = {
    (19, 0, EntityType.request): CreateTopicsRequestV0,
    (19, 0, EntityType.response): CreateTopicsResponseV0,
    (19, 1, EntityType.request): CreateTopicsRequestV1,
    (19, 1, EntityType.response): CreateTopicsResponseV1,
    (20, 0, EntityType.request): DeleteTopicsRequestV0,
    (20, 0, EntityType.response): DeleteTopicsResponseV0,
    (32, 0, EntityType.request): DescribeConfigsRequestV0,
    (32, 0, EntityType.response): DescribeConfigsResponseV0,
    (29, 0, EntityType.request): DescribeAclsRequestV0,
    (29, 0, EntityType.response): DescribeAclsResponseV0,
}
"""(API key, version, request or response) → the class, for `codec`'s payload lookup."""
