"""The answer to a request refused as a whole: its error code on every item.

The service refuses a whole request when the log's storage failed (KAFKA_STORAGE_ERROR, 56, a
code Kafka clients retry) or when the records it would write cannot be stored (INVALID_REQUEST);
authorization refuses one when a cluster-wide check fails (CLUSTER_AUTHORIZATION_FAILED, 31)
or an ACL API is asked of a server without an authorizer (SECURITY_DISABLED, 54). A Kafka
client expects a per-item answer, not a closed connection, so each API gets the same error on
every topic, partition, resource, ACL or user it named.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from api.protocol import codec
from api.protocol.codec import KafkaRequest, response_class
from records.uuids import Uuid
from replay.controller.errors import ApiError


def _item(error: ApiError, **values: Any) -> dict[str, Any]:
    return {**values, "error_code": int(error.error_code), "error_message": error.message}


def _create_topics(body: Any, error: ApiError) -> dict[str, Any]:
    return {
        "topics": [
            _item(
                error,
                name=t.name,
                topic_id=Uuid.ZERO.bytes,
                num_partitions=-1,
                replication_factor=-1,
                configs=None,
            )
            for t in body.topics
        ]
    }


def _delete_topics(body: Any, error: ApiError) -> dict[str, Any]:
    topics = getattr(body, "topics", None)
    if topics:
        items = [
            _item(error, name=t.name, topic_id=(t.topic_id or Uuid.ZERO).bytes) for t in topics
        ]
    else:
        items = [_item(error, name=name, topic_id=Uuid.ZERO.bytes) for name in body.topic_names]
    return {"responses": items}


def _create_partitions(body: Any, error: ApiError) -> dict[str, Any]:
    return {"results": [_item(error, name=t.name) for t in body.topics]}


def _alter_configs(body: Any, error: ApiError) -> dict[str, Any]:
    return {
        "responses": [
            _item(
                error,
                resource_type=int(r.resource_type),
                resource_name=r.resource_name,
            )
            for r in body.resources
        ]
    }


def _elect_leaders(body: Any, error: ApiError) -> dict[str, Any]:
    topics = body.topic_partitions or []
    return {
        "error_code": int(error.error_code),
        "replica_election_results": [
            {
                "topic": t.topic,
                "partition_result": [_item(error, partition_id=int(p)) for p in t.partitions],
            }
            for t in topics
        ],
    }


def _alter_reassignments(body: Any, error: ApiError) -> dict[str, Any]:
    return {
        "allow_replication_factor_change": getattr(body, "allow_replication_factor_change", True),
        "error_code": int(error.error_code),
        "error_message": error.message,
        "responses": [
            {
                "name": t.name,
                "partitions": [
                    _item(error, partition_index=int(p.partition_index)) for p in t.partitions
                ],
            }
            for t in body.topics
        ],
    }


def _describe_acls(body: Any, error: ApiError) -> dict[str, Any]:
    return {"error_code": int(error.error_code), "error_message": error.message, "resources": []}


def _create_acls(body: Any, error: ApiError) -> dict[str, Any]:
    return {"results": [_item(error) for _ in body.creations]}


def _delete_acls(body: Any, error: ApiError) -> dict[str, Any]:
    return {"filter_results": [_item(error, matching_acls=[]) for _ in body.filters]}


def _describe_credentials(body: Any, error: ApiError) -> dict[str, Any]:
    return {"error_code": int(error.error_code), "error_message": error.message, "results": []}


def _alter_credentials(body: Any, error: ApiError) -> dict[str, Any]:
    users = dict.fromkeys(c.name for c in (*body.deletions, *body.upsertions))
    return {"results": [_item(error, user=name) for name in users]}


def _update_features(body: Any, error: ApiError) -> dict[str, Any]:
    return {
        "error_code": int(error.error_code),
        "error_message": error.message,
        "results": [_item(error, feature=u.feature) for u in body.feature_updates],
    }


def _top_level(**values: Any) -> Callable[[Any, ApiError], dict[str, Any]]:
    """A builder of an answer with one top-level error code (the broker-facing APIs)."""

    def build(body: Any, error: ApiError) -> dict[str, Any]:
        return {"error_code": int(error.error_code), **values}

    return build


def _unregister_broker(body: Any, error: ApiError) -> dict[str, Any]:
    return {"error_code": int(error.error_code), "error_message": error.message}


_BUILDERS: dict[int, Callable[[Any, ApiError], dict[str, Any]]] = {
    62: _top_level(broker_epoch=-1),
    63: _top_level(is_caught_up=False, is_fenced=True, should_shut_down=False),
    64: _unregister_broker,
    56: _top_level(topics=[]),
    19: _create_topics,
    20: _delete_topics,
    37: _create_partitions,
    33: _alter_configs,
    44: _alter_configs,
    43: _elect_leaders,
    45: _alter_reassignments,
    29: _describe_acls,
    30: _create_acls,
    31: _delete_acls,
    50: _describe_credentials,
    51: _alter_credentials,
    57: _update_features,
}
"""APIs a refusal as a whole can answer, by key: the write APIs, and the ACL and credential
APIs (refused as a whole when the cluster check fails, or with no authorizer). Every other
read answers from the committed image and puts a refusal in its own answer."""


def refusal(request: KafkaRequest, error: ApiError) -> codec.Answer | None:
    """The answer carrying `error` on every item of `request`; None if its API has no builder."""
    build = _BUILDERS.get(request.header.api_key)
    if build is None:
        return None
    header = request.header
    values = {"throttle_time": 0, **build(request.body, error)}
    return codec.Answer(response_class(header.api_key, header.api_version), values)
