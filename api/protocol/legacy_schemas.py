"""Schemas of API versions Kafka 3.9 serves that `kio` (the schema library) does not ship.

kio is generated from Kafka 4's message definitions, which dropped CreateTopics v0-1,
DeleteTopics v0, DescribeConfigs v0 and CreateAcls, DescribeAcls and DeleteAcls v0; Kafka 3.9
still serves them and clients still send them (Go's Sarama: DescribeConfigs v0, the ACL APIs
v0). These classes are
written from Kafka 3.9's JSON definitions (`clients/src/main/resources/common/message/`) in
kio's form (`_kio_form` sets the class constants kio's generated classes spell out), so the
generated readers and writers (`generated_reader`, `generated_writer`) and kio's own
serialisers handle them as they handle kio's classes. Nested entities that are the same in the
next version kio has are kio's own. None of these versions is flexible: request header v1,
response header v0.
"""

# No `from __future__ import annotations`: kio reads the field types at run time.
import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, dataclass_transform

from kio.schema.create_acls.v1.response import AclCreationResult
from kio.schema.create_topics.v2.request import CreatableTopic
from kio.schema.describe_configs.v1.request import DescribeConfigsResource
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader
from kio.schema.types import TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32Timedelta

_DEFAULT_TIMEOUT = i32Timedelta.parse(datetime.timedelta(milliseconds=60000))

_Entity = TypeVar("_Entity")


@dataclass_transform(kw_only_default=True, frozen_default=True)
def _kio_form(
    kind: EntityType, *, api_key: int, version: int, in_request: bool = False
) -> Callable[[type[_Entity]], type[_Entity]]:
    """A frozen, slotted, keyword-only dataclass with the class constants kio's classes carry.

    Those are `__type__`, `__version__`, `__flexible__` (False: none of these versions is),
    `__api_key__` and `__header_schema__`: request header v1 for a request and the entities
    nested in one (`in_request`), response header v0 for a response and its nested entities.
    """

    def make(cls: type[_Entity]) -> type[_Entity]:
        entity = dataclass(frozen=True, slots=True, kw_only=True)(cls)
        constants = {
            "__type__": kind,
            "__version__": i16(version),
            "__flexible__": False,
            "__api_key__": i16(api_key),
            "__header_schema__": RequestHeader
            if kind is EntityType.request or in_request
            else ResponseHeader,
        }
        for name, value in constants.items():
            setattr(entity, name, value)
        return entity

    return make


# ---------------------------------------------------------------------- CreateTopics (19) v0-1


@_kio_form(EntityType.request, api_key=19, version=0)
class CreateTopicsRequestV0:
    """CreateTopics v0: v1 without `validate_only`."""

    topics: tuple[CreatableTopic, ...]
    timeout: i32Timedelta = field(
        metadata={"kafka_type": "timedelta_i32"}, default=_DEFAULT_TIMEOUT
    )


@_kio_form(EntityType.request, api_key=19, version=1)
class CreateTopicsRequestV1:
    """CreateTopics v1: the same fields as v2."""

    topics: tuple[CreatableTopic, ...]
    timeout: i32Timedelta = field(
        metadata={"kafka_type": "timedelta_i32"}, default=_DEFAULT_TIMEOUT
    )
    validate_only: bool = field(metadata={"kafka_type": "bool"}, default=False)


@_kio_form(EntityType.nested, api_key=19, version=0)
class CreatableTopicResultV0:
    """A topic's result in CreateTopics v0: name and error code only."""

    name: TopicName = field(metadata={"kafka_type": "string"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


@_kio_form(EntityType.response, api_key=19, version=0)
class CreateTopicsResponseV0:
    """CreateTopics v0 answer: no throttle time."""

    topics: tuple[CreatableTopicResultV0, ...]


@_kio_form(EntityType.nested, api_key=19, version=1)
class CreatableTopicResultV1:
    """A topic's result in CreateTopics v1: with the error message."""

    name: TopicName = field(metadata={"kafka_type": "string"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"})


@_kio_form(EntityType.response, api_key=19, version=1)
class CreateTopicsResponseV1:
    """CreateTopics v1 answer: no throttle time (from v2)."""

    topics: tuple[CreatableTopicResultV1, ...]


# ---------------------------------------------------------------------- DeleteTopics (20) v0


@_kio_form(EntityType.request, api_key=20, version=0)
class DeleteTopicsRequestV0:
    """DeleteTopics v0: the same fields as v1."""

    topic_names: tuple[TopicName, ...] = field(metadata={"kafka_type": "string"}, default=())
    timeout: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})


@_kio_form(EntityType.nested, api_key=20, version=0)
class DeletableTopicResultV0:
    """A topic's result in DeleteTopics v0."""

    name: TopicName = field(metadata={"kafka_type": "string"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


@_kio_form(EntityType.response, api_key=20, version=0)
class DeleteTopicsResponseV0:
    """DeleteTopics v0 answer: no throttle time."""

    responses: tuple[DeletableTopicResultV0, ...]


# ---------------------------------------------------------------------- DescribeConfigs (32) v0


@_kio_form(EntityType.request, api_key=32, version=0)
class DescribeConfigsRequestV0:
    """DescribeConfigs v0: v1 without `include_synonyms`."""

    resources: tuple[DescribeConfigsResource, ...]


@_kio_form(EntityType.nested, api_key=32, version=0)
class DescribeConfigsResourceResultV0:
    """A config in DescribeConfigs v0: `is_default` where v1+ has a source and synonyms."""

    name: str = field(metadata={"kafka_type": "string"})
    value: str | None = field(metadata={"kafka_type": "string"})
    read_only: bool = field(metadata={"kafka_type": "bool"})
    is_default: bool = field(metadata={"kafka_type": "bool"})
    is_sensitive: bool = field(metadata={"kafka_type": "bool"})


@_kio_form(EntityType.nested, api_key=32, version=0)
class DescribeConfigsResultV0:
    """A resource's result in DescribeConfigs v0."""

    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"})
    resource_type: i8 = field(metadata={"kafka_type": "int8"})
    resource_name: str = field(metadata={"kafka_type": "string"})
    configs: tuple[DescribeConfigsResourceResultV0, ...]


@_kio_form(EntityType.response, api_key=32, version=0)
class DescribeConfigsResponseV0:
    """DescribeConfigs v0 answer."""

    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    results: tuple[DescribeConfigsResultV0, ...]


# ---------------------------------------------------------------------- DescribeAcls (29) v0


@_kio_form(EntityType.request, api_key=29, version=0)
class DescribeAclsRequestV0:
    """DescribeAcls v0: v1 without `pattern_type_filter` (v0 filters are LITERAL)."""

    resource_type_filter: i8 = field(metadata={"kafka_type": "int8"})
    resource_name_filter: str | None = field(metadata={"kafka_type": "string"})
    principal_filter: str | None = field(metadata={"kafka_type": "string"})
    host_filter: str | None = field(metadata={"kafka_type": "string"})
    operation: i8 = field(metadata={"kafka_type": "int8"})
    permission_type: i8 = field(metadata={"kafka_type": "int8"})


@_kio_form(EntityType.nested, api_key=29, version=0)
class AclDescriptionV0:
    """One ACL in a DescribeAcls v0 answer."""

    principal: str = field(metadata={"kafka_type": "string"})
    host: str = field(metadata={"kafka_type": "string"})
    operation: i8 = field(metadata={"kafka_type": "int8"})
    permission_type: i8 = field(metadata={"kafka_type": "int8"})


@_kio_form(EntityType.nested, api_key=29, version=0)
class DescribeAclsResourceV0:
    """A resource in a DescribeAcls v0 answer: no pattern type."""

    resource_type: i8 = field(metadata={"kafka_type": "int8"})
    resource_name: str = field(metadata={"kafka_type": "string"})
    acls: tuple[AclDescriptionV0, ...]


@_kio_form(EntityType.response, api_key=29, version=0)
class DescribeAclsResponseV0:
    """DescribeAcls v0 answer."""

    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"})
    resources: tuple[DescribeAclsResourceV0, ...]


# ---------------------------------------------------------------------- CreateAcls (30) v0


@_kio_form(EntityType.nested, api_key=30, version=0, in_request=True)
class AclCreationV0:
    """An ACL to create in CreateAcls v0: no pattern type (v0 ACLs are LITERAL)."""

    resource_type: i8 = field(metadata={"kafka_type": "int8"})
    resource_name: str = field(metadata={"kafka_type": "string"})
    principal: str = field(metadata={"kafka_type": "string"})
    host: str = field(metadata={"kafka_type": "string"})
    operation: i8 = field(metadata={"kafka_type": "int8"})
    permission_type: i8 = field(metadata={"kafka_type": "int8"})


@_kio_form(EntityType.request, api_key=30, version=0)
class CreateAclsRequestV0:
    """CreateAcls v0."""

    creations: tuple[AclCreationV0, ...]


@_kio_form(EntityType.response, api_key=30, version=0)
class CreateAclsResponseV0:
    """CreateAcls v0 answer: the same fields as v1."""

    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    results: tuple[AclCreationResult, ...]


# ---------------------------------------------------------------------- DeleteAcls (31) v0


@_kio_form(EntityType.nested, api_key=31, version=0, in_request=True)
class DeleteAclsFilterV0:
    """A filter of DeleteAcls v0: no pattern type filter (v0 filters are LITERAL)."""

    resource_type_filter: i8 = field(metadata={"kafka_type": "int8"})
    resource_name_filter: str | None = field(metadata={"kafka_type": "string"})
    principal_filter: str | None = field(metadata={"kafka_type": "string"})
    host_filter: str | None = field(metadata={"kafka_type": "string"})
    operation: i8 = field(metadata={"kafka_type": "int8"})
    permission_type: i8 = field(metadata={"kafka_type": "int8"})


@_kio_form(EntityType.request, api_key=31, version=0)
class DeleteAclsRequestV0:
    """DeleteAcls v0."""

    filters: tuple[DeleteAclsFilterV0, ...]


@_kio_form(EntityType.nested, api_key=31, version=0)
class DeleteAclsMatchingAclV0:
    """An ACL a DeleteAcls v0 filter removed: no pattern type."""

    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"})
    resource_type: i8 = field(metadata={"kafka_type": "int8"})
    resource_name: str = field(metadata={"kafka_type": "string"})
    principal: str = field(metadata={"kafka_type": "string"})
    host: str = field(metadata={"kafka_type": "string"})
    operation: i8 = field(metadata={"kafka_type": "int8"})
    permission_type: i8 = field(metadata={"kafka_type": "int8"})


@_kio_form(EntityType.nested, api_key=31, version=0)
class DeleteAclsFilterResultV0:
    """A filter's result in DeleteAcls v0."""

    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"})
    matching_acls: tuple[DeleteAclsMatchingAclV0, ...]


@_kio_form(EntityType.response, api_key=31, version=0)
class DeleteAclsResponseV0:
    """DeleteAcls v0 answer."""

    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    filter_results: tuple[DeleteAclsFilterResultV0, ...]


_PAYLOADS: tuple[type[Any], ...] = (
    CreateTopicsRequestV0,
    CreateTopicsResponseV0,
    CreateTopicsRequestV1,
    CreateTopicsResponseV1,
    DeleteTopicsRequestV0,
    DeleteTopicsResponseV0,
    DescribeConfigsRequestV0,
    DescribeConfigsResponseV0,
    DescribeAclsRequestV0,
    DescribeAclsResponseV0,
    CreateAclsRequestV0,
    CreateAclsResponseV0,
    DeleteAclsRequestV0,
    DeleteAclsResponseV0,
)

LEGACY_PAYLOADS: dict[tuple[int, int, EntityType], type[Any]] = {
    (int(c.__api_key__), int(c.__version__), c.__type__): c for c in _PAYLOADS
}
"""(API key, version, request or response) → the class, for `codec`'s payload lookup."""
