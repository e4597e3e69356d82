"""Request frames for the protocol tests: API versions and Metadata frames."""

from __future__ import annotations

from typing import Any

from api.protocol import codec


def _request(api_key: int, version: int, **values: Any) -> Any:
    return codec.build(codec.request_class(api_key, version), **values)


def ApiVersionsRequest(**values: Any) -> Any:  # noqa: N802 - reads as the kio class it builds
    return _request(18, 3, **values)


def MetadataRequest(**values: Any) -> Any:  # noqa: N802
    return _request(3, 12, **values)


def CreateTopicsRequest(**values: Any) -> Any:  # noqa: N802
    return _request(19, 7, **values)


def CreatableTopic(**values: Any) -> dict[str, Any]:  # noqa: N802
    return values


def _frame(body: object, correlation_id: int = 7) -> bytes:
    return codec.encode_request(body, correlation_id=correlation_id, client_id="test")


API_VERSIONS = _frame(ApiVersionsRequest(client_software_name="test", client_software_version="1"))


SEEDS = [
    API_VERSIONS,
    _frame(
        MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
    ),
    _frame(
        CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name="f", num_partitions=1, replication_factor=1, assignments=(), configs=()
                ),
            ),
            validate_only=True,
        )
    ),
]


def metadata_frame() -> bytes:
    body = codec.build(
        codec.request_class(3, 12),
        topics=[{"name": "x", "topic_id": bytes(16)}],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return codec.encode_request(body, correlation_id=9)[4:]
