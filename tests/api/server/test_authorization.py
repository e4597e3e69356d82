"""Authorization in every API: what each one checks, its codes, and that a refusal writes nothing.

Most tests drive `KafkaApis` and `PrivateApis` in process with a `Session` of the principal and
host under test (authentication is another part of issue #20): every answer is encoded and
checked against kio's own writer, then decoded as a client reads it. The last ones run
`mlog serve`'s server with the authorizer on and talk to it with kafka-python and our
`AdminClient`, as `User:ANONYMOUS` (a PLAINTEXT listener's principal).
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import NewTopic
from kafka import errors as kerrors
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic

from api.client.admin import AdminClient
from api.client.connection import RemoteError
from api.protocol import codec, private
from api.protocol.connection import Connection, Request
from api.server.broker_bindings import parse_broker_principals
from api.server.kafka.base import Listener, Session
from api.server.kafka.dispatch import KafkaApis
from api.server.private_apis import PrivateApis
from api.service.service import MetadataService
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    ConfigResourceType,
    PatternType,
    RemoveAccessControlEntryRecord,
    ResourceType,
)
from records.uuids import Uuid
from replay.controller.authorizer import CLUSTER_NAME, Authorizer, AuthorizerConfig
from replay.controller.commands import (
    AlterConfig,
    AlterConfigOp,
    BrokerAction,
    CancelPartitionDeletion,
    ConfigResource,
    ControllerResult,
    CreatableTopic,
    CreateNamespace,
    DeleteNamespace,
    DeletePartitionsTopic,
    MoveTopic,
    RegisterBroker,
    TopicRef,
)
from replay.controller.errors import ApiError, ErrorCode
from tests.support.server_thread import running_server

Op = AclOperation
TOPIC, NAMESPACE, CLUSTER = ResourceType.TOPIC, ResourceType.NAMESPACE, ResourceType.CLUSTER
ALICE = Session(principal="User:alice", host="10.0.0.1")
BOB = Session(principal="User:bob", host="10.0.0.2")
ROOT = Session(principal="User:root", host="10.0.0.9")
TOPIC_DENIED, CLUSTER_DENIED = 29, 31
TIMEOUT = datetime.timedelta(seconds=30)


def acl(
    kind: ResourceType,
    name: str,
    op: AclOperation,
    *,
    principal: str = "User:alice",
    deny: bool = False,
    host: str = "*",
    prefixed: bool = False,
) -> AccessControlEntryRecord:
    """An ACL record with a fresh id."""
    return AccessControlEntryRecord(
        id=Uuid.random(),
        resource_type=kind,
        resource_name=name,
        pattern_type=PatternType.PREFIXED if prefixed else PatternType.LITERAL,
        principal=principal,
        host=host,
        operation=op,
        permission_type=AclPermissionType.DENY if deny else AclPermissionType.ALLOW,
    )


class Cluster:
    """A service with two brokers and the APIs in front of it, with or without an authorizer."""

    def __init__(self, path: Path, config: AuthorizerConfig | None) -> None:
        self.service = MetadataService.open(path)
        for broker_id in (1, 2):
            request = RegisterBroker(broker_id=broker_id)
            self.service.execute(partial(self.controller.register_broker, request=request))
        authorizer = None if config is None else Authorizer(config)
        listener = Listener(host="127.0.0.1", port=9092, node_id=0, cluster_id="c")
        self.kafka = KafkaApis(self.service, listener, authorizer)
        # User:alice registers broker 7 in the broker tests: its id is bound to it.
        self.private = PrivateApis(
            self.service, authorizer, bindings=parse_broker_principals("User:alice=7")
        )

    @property
    def controller(self) -> Any:
        return self.service.controller

    def run(self, command: Any) -> Any:
        """Run a controller command as the operator (no authorization): the test's set-up."""
        return self.service.execute(command)

    def grant(self, *acls: AccessControlEntryRecord) -> None:
        self.run(lambda image: ControllerResult(records=acls, response=None))

    def revoke(self, *acls: AccessControlEntryRecord) -> None:
        removals = tuple(RemoveAccessControlEntryRecord(id=a.id) for a in acls)
        self.run(lambda image: ControllerResult(records=removals, response=None))

    def topics(self, *names: str, partitions: int = 1) -> None:
        wanted = [
            CreatableTopic(name=n, num_partitions=partitions, replication_factor=1) for n in names
        ]
        results = self.run(lambda image: self.controller.create_topics(image, wanted))
        assert all(r.outcome.ok for r in results), results

    def namespace(self, name: str) -> None:
        self.run(lambda image: self.controller.create_namespace(image, CreateNamespace(name=name)))

    @property
    def end(self) -> int:
        return self.service.log.end_offset

    def ask(
        self,
        api_key: int,
        version: int,
        session: Session,
        write_id: bytes | None = None,
        **values: Any,
    ) -> Any:
        """A Kafka request from `session`, answered, written (checked against kio) and read."""
        entity = codec.build(codec.request_class(api_key, version), **values)
        frame = codec.encode_request(entity, correlation_id=7, client_id="test", write_id=write_id)
        (event,) = Connection().receive(frame)
        assert isinstance(event, Request)
        answer = asyncio.run(self.kafka.handle(event.request, session))
        data = codec.encode_response(7, answer)
        assert data == codec.encode_response_with_kio(7, answer)
        return codec.decode_response(api_key, version, data[4:])[1]

    def call(self, handler: Any, request: Any, session: Session) -> Any:
        """A private API's handler, called as the server calls it."""
        return asyncio.run(handler(request, session))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path / "log", AuthorizerConfig(super_users=frozenset({"User:root"})))
    yield made
    made.service.close()


def _create(
    c: Cluster, session: Session, *names: str, version: int = 7, write_id: bytes | None = None
) -> Any:
    topics = [
        {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
        for n in names
    ]
    return c.ask(
        19, version, session, write_id, topics=topics, timeout=TIMEOUT, validate_only=False
    )


def _codes(topics: Any) -> dict[str, int]:
    return {t.name: int(t.error_code) for t in topics}


# ---------------------------------------------------------------------- no authorizer


def test_without_an_authorizer_everything_is_allowed_and_acl_apis_are_disabled(
    tmp_path: Path,
) -> None:
    c = Cluster(tmp_path / "log", None)
    c.grant(acl(TOPIC, "*", Op.ALL, deny=True, principal="User:*"))  # ignored: no authorizer
    assert _codes(_create(c, BOB, "t").topics) == {"t": 0}
    described = c.ask(
        3,
        12,
        BOB,
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=True,
    )
    assert [t.name for t in described.topics] == ["t"]
    assert described.topics[0].topic_authorized_operations == -(2**31)  # not computed
    acls = c.ask(
        29,
        3,
        BOB,
        resource_type_filter=1,
        resource_name_filter=None,
        pattern_type_filter=1,
        principal_filter=None,
        host_filter=None,
        operation=1,
        permission_type=1,
    )
    assert int(acls.error_code) == 54 and "authorizer.class.name" in acls.error_message
    c.service.close()


# ---------------------------------------------------------------------- CreateTopics


def test_create_topics_needs_create_on_the_cluster_or_the_topic(cluster: Cluster) -> None:
    c = cluster
    start = c.end
    assert _codes(_create(c, ALICE, "a", "b").topics) == {"a": TOPIC_DENIED, "b": TOPIC_DENIED}
    assert c.end == start and c.service.image.topics.get_by_name("a") is None
    # a replay of the refused request is refused again, and still writes nothing
    assert _codes(_create(c, ALICE, "a", "b").topics) == {"a": TOPIC_DENIED, "b": TOPIC_DENIED}
    assert c.end == start
    c.grant(acl(TOPIC, "a", Op.CREATE))
    answer = _create(c, ALICE, "a", "b")
    assert _codes(answer.topics) == {"a": 0, "b": TOPIC_DENIED}
    assert "User:alice may not Create topic 'b'" in answer.topics[1].error_message
    assert c.service.image.topics.get_by_name("b") is None
    c.grant(acl(CLUSTER, CLUSTER_NAME, Op.CREATE, principal="User:bob"))
    assert _codes(_create(c, BOB, "b", "c").topics) == {"b": 0, "c": 0}
    # a super user needs no ACL
    assert _codes(_create(c, ROOT, "d").topics) == {"d": 0}


def test_create_topics_answers_duplicates_before_authorizing(cluster: Cluster) -> None:
    assert _codes(_create(cluster, ALICE, "x", "x").topics) == {"x": 42}


def test_create_topics_hides_configs_without_describe_configs(cluster: Cluster) -> None:
    c = cluster
    c.grant(
        acl(TOPIC, "a", Op.CREATE), acl(TOPIC, "b", Op.CREATE), acl(TOPIC, "b", Op.ALTER_CONFIGS)
    )
    hidden, shown = _create(c, ALICE, "a", "b").topics
    assert int(hidden.error_code) == 0 and hidden.topic_config_error_code == TOPIC_DENIED
    assert hidden.configs is None and (hidden.num_partitions, hidden.replication_factor) == (-1, -1)
    assert int(shown.topic_config_error_code) == 0 and shown.configs
    assert (shown.num_partitions, shown.replication_factor) == (1, 1)
    # and the older versions, which have no such field, still answer
    c.grant(acl(TOPIC, "old", Op.CREATE))
    assert _codes(_create(c, ALICE, "old", version=4).topics) == {"old": 0}


def test_a_retried_create_topics_hides_configs_as_a_fresh_answer_does(cluster: Cluster) -> None:
    c = cluster
    b_configs = acl(TOPIC, "b", Op.ALTER_CONFIGS)
    c.grant(acl(TOPIC, "a", Op.CREATE), acl(TOPIC, "b", Op.CREATE), b_configs)
    write_id = codec.write_id_bytes(bytes(16), 1)
    first = _create(c, ALICE, "a", "b", write_id=write_id)
    end = c.end
    retried = _create(c, ALICE, "a", "b", write_id=write_id)
    assert c.end == end  # answered from the stored answer: nothing appended
    assert retried == first
    hidden, shown = retried.topics
    assert hidden.configs is None and hidden.topic_config_error_code == TOPIC_DENIED
    assert (hidden.num_partitions, hidden.replication_factor) == (-1, -1)
    assert shown.configs and (shown.num_partitions, shown.replication_factor) == (1, 1)
    # Filtered by the ACLs of the answer's time, as a fresh answer is: now b's are hidden.
    c.revoke(b_configs)
    c.grant(acl(TOPIC, "a", Op.DESCRIBE_CONFIGS))
    again = _create(c, ALICE, "a", "b", write_id=write_id)
    assert c.end == end + 2  # the two ACL changes only
    a, b = again.topics
    assert a.configs and a.topic_config_error_code == 0 and a.num_partitions == 1
    assert b.configs is None and b.topic_config_error_code == TOPIC_DENIED
    assert a.topic_id == hidden.topic_id and b.topic_id == shown.topic_id


def test_the_namespace_gate_refuses_a_create_the_topic_acl_allows(cluster: Cluster) -> None:
    c = cluster
    c.namespace("org:apache")
    c.grant(acl(TOPIC, "org:apache:t", Op.CREATE), acl(NAMESPACE, "org", Op.CREATE, deny=True))
    assert _codes(_create(c, ALICE, "org:apache:t").topics) == {"org:apache:t": TOPIC_DENIED}
    # an ALLOW on the namespace grants every topic below it
    c.grant(acl(NAMESPACE, "org", Op.CREATE, principal="User:bob"))
    assert _codes(_create(c, BOB, "org:apache:u", "org:v", "w").topics) == {
        "org:apache:u": 0,
        "org:v": 0,
        "w": TOPIC_DENIED,
    }


def test_an_acl_for_another_host_does_not_apply(cluster: Cluster) -> None:
    c = cluster
    c.grant(acl(TOPIC, "t", Op.CREATE, host="10.0.0.2"))
    assert _codes(_create(c, ALICE, "t").topics) == {"t": TOPIC_DENIED}
    assert _codes(_create(c, Session(principal="User:alice", host="10.0.0.2"), "t").topics) == {
        "t": 0
    }


def test_allow_everyone_if_no_acl_found_both_ways(tmp_path: Path) -> None:
    open_ = Cluster(tmp_path / "open", AuthorizerConfig(allow_everyone_if_no_acl_found=True))
    assert _codes(_create(open_, BOB, "t").topics) == {"t": 0}
    # once a resource has an ACL (for anyone), the rule no longer applies to it: with one on
    # the cluster, bob's CREATE there is refused, then each topic decides
    open_.grant(acl(CLUSTER, CLUSTER_NAME, Op.CREATE), acl(TOPIC, "u", Op.CREATE))
    assert _codes(_create(open_, BOB, "u", "v").topics) == {"u": TOPIC_DENIED, "v": 0}
    open_.service.close()
    closed = Cluster(tmp_path / "closed", AuthorizerConfig())
    assert _codes(_create(closed, BOB, "t").topics) == {"t": TOPIC_DENIED}
    closed.service.close()


HOSTILE_NAMES = ["", ":", "t\x00\n", "a" * 30_000, "org:" * 5_000 + "t", "*", "User:*"]


def test_hostile_names_are_refused_like_any_other(cluster: Cluster) -> None:
    c = cluster
    c.grant(acl(NAMESPACE, "org", Op.DESCRIBE, prefixed=True))
    start = c.end
    answer = _create(c, ALICE, *HOSTILE_NAMES)
    # ":" has an empty namespace tier: invalid (17) before any ACL is asked (issue #31)
    expected = [17 if n == ":" else TOPIC_DENIED for n in HOSTILE_NAMES]
    assert [int(t.error_code) for t in answer.topics] == expected
    assert c.end == start
    asked = [{"name": n, "topic_id": None} for n in HOSTILE_NAMES]
    codes = [int(t.error_code) for t in _metadata(c, ALICE, asked).topics]
    # only the name under `org` is describable (and, as no such topic exists, unknown)
    assert codes == [TOPIC_DENIED] * 4 + [3] + [TOPIC_DENIED] * 2
    # principals and hosts of any shape are only strings to match
    odd = Session(principal="User:*", host="*")
    assert _codes(_create(c, odd, "t").topics) == {"t": TOPIC_DENIED}


# ------------------------------------------------------------- Metadata, DescribeTopicPartitions


def _metadata(c: Cluster, session: Session, topics: Any, operations: bool = False) -> Any:
    return c.ask(
        3,
        12,
        session,
        topics=topics,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=operations,
    )


def test_metadata_lists_only_describable_topics_and_hides_existence(cluster: Cluster) -> None:
    c = cluster
    c.topics("seen", "hidden", "read-only")
    c.grant(acl(TOPIC, "seen", Op.DESCRIBE), acl(TOPIC, "read-only", Op.READ))
    assert [t.name for t in _metadata(c, ALICE, None).topics] == ["read-only", "seen"]
    asked = [{"name": n, "topic_id": None} for n in ("seen", "hidden", "never-was")]
    answer = _metadata(c, ALICE, asked)
    assert _codes(answer.topics) == {"seen": 0, "hidden": TOPIC_DENIED, "never-was": TOPIC_DENIED}
    hidden, missing = answer.topics[1:]
    # the same answer whether the topic exists or not
    assert (hidden.topic_id, hidden.partitions) == (missing.topic_id, missing.partitions)
    assert hidden.topic_id is None and hidden.partitions == ()  # the zero id, as kio reads it
    # describable and missing: UNKNOWN_TOPIC_OR_PARTITION
    c.grant(acl(TOPIC, "never-was", Op.DESCRIBE))
    assert _codes(_metadata(c, ALICE, [{"name": "never-was", "topic_id": None}]).topics) == {
        "never-was": 3
    }


def test_metadata_by_topic_id_refuses_without_the_name(cluster: Cluster) -> None:
    c = cluster
    c.topics("secret")
    topic = c.service.image.topics.get_by_name("secret")
    assert topic is not None
    (entry,) = _metadata(
        c, ALICE, [{"name": None, "topic_id": uuid.UUID(bytes=topic.topic_id.bytes)}]
    ).topics
    assert (int(entry.error_code), entry.name) == (TOPIC_DENIED, None)
    (entry,) = _metadata(c, ALICE, [{"name": None, "topic_id": uuid.uuid4()}]).topics
    assert int(entry.error_code) == 100  # UNKNOWN_TOPIC_ID: ids are not secret


def test_metadata_reports_authorized_operations(cluster: Cluster) -> None:
    c = cluster
    c.topics("t")
    c.grant(acl(TOPIC, "t", Op.READ), acl(TOPIC, "t", Op.ALTER_CONFIGS))
    (entry,) = _metadata(c, ALICE, None, operations=True).topics
    wanted = {Op.READ, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS}
    assert entry.topic_authorized_operations == sum(1 << op for op in wanted)


def test_describe_topic_partitions_as_metadata(cluster: Cluster) -> None:
    c = cluster
    c.topics("a", "b", "c", partitions=2)
    c.grant(acl(TOPIC, "a", Op.DESCRIBE), acl(TOPIC, "c", Op.DESCRIBE))

    def ask(names: list[str]) -> Any:
        return c.ask(
            75,
            0,
            ALICE,
            topics=[{"name": n} for n in names],
            response_partition_limit=100,
            cursor=None,
        )

    listed = ask([])
    assert [t.name for t in listed.topics] == ["a", "c"]
    assert listed.topics[0].topic_authorized_operations == 1 << Op.DESCRIBE
    assert _codes(ask(["a", "b", "zz"]).topics) == {"a": 0, "b": TOPIC_DENIED, "zz": TOPIC_DENIED}


# ------------------------------------------------------------- DeleteTopics, CreatePartitions


def test_delete_topics_needs_delete_by_name_and_by_id(cluster: Cluster) -> None:
    c = cluster
    c.topics("a", "b", "c")
    ids = {n: c.service.image.topics.get_by_name(n).topic_id for n in "abc"}  # type: ignore[union-attr]
    c.grant(acl(TOPIC, "a", Op.DELETE), acl(TOPIC, "c", Op.DELETE))
    start = c.end
    refused = c.ask(20, 6, ALICE, topics=[{"name": "b", "topic_id": None}], timeout=TIMEOUT)
    assert _codes(refused.responses) == {"b": TOPIC_DENIED} and c.end == start
    by_id = [{"name": None, "topic_id": uuid.UUID(bytes=ids[n].bytes)} for n in "bc"] + [
        {"name": None, "topic_id": uuid.uuid4()}
    ]
    answer = c.ask(20, 6, ALICE, topics=[{"name": "a", "topic_id": None}, *by_id], timeout=TIMEOUT)
    assert [int(r.error_code) for r in answer.responses] == [0, TOPIC_DENIED, 0, 100]
    assert sorted(c.service.image.topics.by_name) == ["b"]
    c.grant(acl(CLUSTER, CLUSTER_NAME, Op.DELETE, principal="User:bob"))
    assert _codes(
        c.ask(20, 6, BOB, topics=[{"name": "b", "topic_id": None}], timeout=TIMEOUT).responses
    ) == {"b": 0}


def test_create_partitions_needs_alter(cluster: Cluster) -> None:
    c = cluster
    c.topics("a", "b")
    c.grant(acl(TOPIC, "a", Op.ALTER))
    start = c.end
    topics = [{"name": n, "count": 3, "assignments": None} for n in ("b", "a")]
    answer = c.ask(37, 3, ALICE, topics=topics, timeout=TIMEOUT, validate_only=False)
    assert _codes(answer.results) == {"b": TOPIC_DENIED, "a": 0}
    assert len(c.service.image.topics.get_by_name("b").partitions) == 1  # type: ignore[union-attr]
    assert c.end > start


# ---------------------------------------------------------------------- configs


def _describe_configs(c: Cluster, session: Session, kind: int, name: str) -> Any:
    resources = [{"resource_type": kind, "resource_name": name, "configuration_keys": None}]
    (result,) = c.ask(
        32, 4, session, resources=resources, include_synonyms=False, include_documentation=False
    ).results
    return result


def _alter_configs(c: Cluster, session: Session, kind: int, name: str) -> int:
    resources = [
        {
            "resource_type": kind,
            "resource_name": name,
            "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1000"}],
        }
    ]
    (result,) = c.ask(44, 1, session, resources=resources, validate_only=False).responses
    return int(result.error_code)


def test_configs_are_checked_on_the_topic_the_cluster_or_the_namespace(cluster: Cluster) -> None:
    c = cluster
    c.topics("t")
    c.namespace("org")
    start = c.end
    assert int(_describe_configs(c, ALICE, 2, "t").error_code) == TOPIC_DENIED
    assert int(_describe_configs(c, ALICE, 4, "0").error_code) == CLUSTER_DENIED
    assert int(_describe_configs(c, ALICE, 64, "org").error_code) == TOPIC_DENIED
    assert _alter_configs(c, ALICE, 2, "t") == TOPIC_DENIED
    assert _alter_configs(c, ALICE, 4, "") == CLUSTER_DENIED
    assert _alter_configs(c, ALICE, 64, "org") == TOPIC_DENIED
    assert c.end == start
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    c.grant(
        acl(TOPIC, "t", Op.ALTER_CONFIGS),
        acl(CLUSTER, CLUSTER_NAME, Op.ALTER_CONFIGS),
        acl(NAMESPACE, "org", Op.ALTER_CONFIGS),
    )
    assert int(_describe_configs(c, ALICE, 2, "t").error_code) == 0
    assert int(_describe_configs(c, ALICE, 4, "0").error_code) == 0
    assert _alter_configs(c, ALICE, 2, "t") == 0
    assert _alter_configs(c, ALICE, 64, "org") == 0
    # the legacy AlterConfigs checks the same
    resources = [
        {
            "resource_type": 2,
            "resource_name": "t",
            "configs": [{"name": "retention.ms", "value": "5"}],
        }
    ]
    (result,) = c.ask(33, 2, BOB, resources=resources, validate_only=False).responses
    assert int(result.error_code) == TOPIC_DENIED


# ---------------------------------------------------------------------- cluster operations


def test_cluster_operations_need_their_cluster_acl(cluster: Cluster) -> None:
    c = cluster
    c.topics("t", partitions=2)
    start = c.end
    elect = c.ask(
        43,
        2,
        ALICE,
        election_type=0,
        topic_partitions=[{"topic": "t", "partitions": [0]}],
        timeout=TIMEOUT,
    )
    assert int(elect.error_code) == CLUSTER_DENIED
    assert int(elect.replica_election_results[0].partition_result[0].error_code) == CLUSTER_DENIED
    moved = c.ask(
        45,
        0,
        ALICE,
        timeout=TIMEOUT,
        topics=[{"name": "t", "partitions": [{"partition_index": 0, "replicas": [2]}]}],
    )
    assert int(moved.error_code) == CLUSTER_DENIED and c.end == start
    listed = c.ask(46, 0, ALICE, timeout=TIMEOUT, topics=None)
    assert int(listed.error_code) == CLUSTER_DENIED
    described = c.ask(60, 1, ALICE, include_cluster_authorized_operations=True, endpoint_type=1)
    assert int(described.error_code) == CLUSTER_DENIED and described.brokers == ()
    assert described.cluster_authorized_operations == 0
    c.grant(acl(CLUSTER, CLUSTER_NAME, Op.ALTER))  # ALTER implies DESCRIBE
    assert int(c.ask(46, 0, ALICE, timeout=TIMEOUT, topics=None).error_code) == 0
    described = c.ask(60, 1, ALICE, include_cluster_authorized_operations=True, endpoint_type=1)
    assert int(described.error_code) == 0
    assert described.cluster_authorized_operations == (1 << Op.ALTER) | (1 << Op.DESCRIBE)
    moved = c.ask(
        45,
        0,
        ALICE,
        timeout=TIMEOUT,
        topics=[{"name": "t", "partitions": [{"partition_index": 0, "replicas": [2]}]}],
    )
    assert int(moved.error_code) == 0 and c.end > start


def test_describe_acls_needs_describe_on_the_cluster(cluster: Cluster) -> None:
    c = cluster

    def ask(session: Session) -> Any:
        return c.ask(
            29,
            3,
            session,
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        )

    assert int(ask(ALICE).error_code) == CLUSTER_DENIED
    c.grant(acl(CLUSTER, CLUSTER_NAME, Op.DESCRIBE))
    assert int(ask(ALICE).error_code) == 0


ACL_AND_CREDENTIAL_REQUESTS: list[tuple[int, int, dict[str, Any]]] = [
    (
        30,
        3,
        {
            "creations": [
                {
                    "resource_type": 2,
                    "resource_name": "t",
                    "resource_pattern_type": 3,
                    "principal": "User:alice",
                    "host": "*",
                    "operation": 3,
                    "permission_type": 3,
                }
            ]
            * 2
        },
    ),
    (
        31,
        3,
        {
            "filters": [
                {
                    "resource_type_filter": 1,
                    "resource_name_filter": None,
                    "pattern_type_filter": 1,
                    "principal_filter": None,
                    "host_filter": None,
                    "operation": 1,
                    "permission_type": 1,
                }
            ]
        },
    ),
    (50, 0, {"users": [{"name": "alice"}]}),
    (
        51,
        0,
        {
            "deletions": [{"name": "alice", "mechanism": 1}],
            "upsertions": [
                {
                    "name": n,
                    "mechanism": 1,
                    "iterations": 4096,
                    "salt": b"s",
                    "salted_password": b"p",
                }
                for n in ("alice", "bob")
            ],
        },
    ),
]


def _item_codes(api_key: int, response: Any) -> list[Any]:
    """The error codes of an ACL or credential API's answer, item by item."""
    if api_key == 30:
        return [int(x.error_code) for x in response.results]
    if api_key == 31:
        return [int(x.error_code) for x in response.filter_results]
    if api_key == 50:
        return [int(response.error_code)]
    return [(x.user, int(x.error_code)) for x in response.results]


@pytest.mark.parametrize(("api_key", "version", "values"), ACL_AND_CREDENTIAL_REQUESTS)
def test_acl_and_credential_apis_are_checked_on_the_cluster_before_their_handler(
    tmp_path: Path, api_key: int, version: int, values: dict[str, Any]
) -> None:
    # Their handlers come with the ACL APIs; a stand-in shows the check runs before them.
    c = Cluster(tmp_path / "log", AuthorizerConfig())
    called: list[Session] = []

    async def stand_in(request: Any, session: Session) -> Any:
        called.append(session)
        raise AssertionError("reached")

    c.kafka._handlers[api_key] = stand_in
    entity = codec.build(codec.request_class(api_key, version), **values)
    header = codec.RequestHeader(
        api_key=api_key, api_version=version, correlation_id=3, client_id=None
    )
    answer = asyncio.run(c.kafka.handle(codec.KafkaRequest(header=header, body=entity), ALICE))
    data = codec.encode_response(3, answer)
    assert data == codec.encode_response_with_kio(3, answer)
    response = codec.decode_response(api_key, version, data[4:])[1]
    codes = _item_codes(api_key, response)
    expected: dict[int, list[Any]] = {
        30: [CLUSTER_DENIED] * 2,
        31: [CLUSTER_DENIED],
        50: [CLUSTER_DENIED],
        51: [("alice", CLUSTER_DENIED), ("bob", CLUSTER_DENIED)],  # each user once
    }
    assert codes == expected[api_key] and not called
    c.service.close()


@pytest.mark.parametrize(("api_key", "version", "values"), ACL_AND_CREDENTIAL_REQUESTS)
def test_without_an_authorizer_acl_apis_are_disabled_and_credential_apis_run(
    tmp_path: Path, api_key: int, version: int, values: dict[str, Any]
) -> None:
    c = Cluster(tmp_path / "log", None)

    class Reached(Exception):
        pass

    async def stand_in(request: Any, session: Session) -> Any:
        raise Reached

    c.kafka._handlers[api_key] = stand_in
    entity = codec.build(codec.request_class(api_key, version), **values)
    header = codec.RequestHeader(
        api_key=api_key, api_version=version, correlation_id=3, client_id=None
    )
    request = codec.KafkaRequest(header=header, body=entity)
    if api_key in (50, 51):  # credentials are managed whether or not ACLs are enforced
        with pytest.raises(Reached):
            asyncio.run(c.kafka.handle(request, ALICE))
    else:
        answer = asyncio.run(c.kafka.handle(request, ALICE))
        response = codec.decode_response(api_key, version, codec.encode_response(3, answer)[4:])[1]
        items = response.results if api_key == 30 else response.filter_results
        assert [int(x.error_code) for x in items] == [54] * len(items)
    c.service.close()


def test_an_acl_created_through_the_api_decides_the_next_request(cluster: Cluster) -> None:
    c = cluster
    c.grant(acl(CLUSTER, CLUSTER_NAME, Op.ALTER))  # alice administers the ACLs
    creation = {
        "resource_type": int(TOPIC),
        "resource_name": "bobs-",
        "resource_pattern_type": int(PatternType.PREFIXED),
        "principal": "User:bob",
        "host": "*",
        "operation": int(Op.CREATE),
        "permission_type": int(AclPermissionType.ALLOW),
    }
    assert [int(r.error_code) for r in c.ask(30, 3, BOB, creations=[creation]).results] == [31]
    assert _codes(_create(c, BOB, "bobs-1").topics) == {"bobs-1": TOPIC_DENIED}
    assert [int(r.error_code) for r in c.ask(30, 3, ALICE, creations=[creation]).results] == [0]
    assert _codes(_create(c, BOB, "bobs-1", "other").topics) == {"bobs-1": 0, "other": 29}


# ---------------------------------------------------------------------- our own APIs


def test_namespace_create_and_delete(cluster: Cluster) -> None:
    c = cluster
    create = CreateNamespace(name="org:apache")
    # creating org:apache creates org too: CREATE on both
    c.grant(acl(NAMESPACE, "org:apache", Op.CREATE))
    start = c.end
    with pytest.raises(ApiError, match="may not Create namespace 'org'") as refused:
        c.call(c.private.create_namespace, create, ALICE)
    assert refused.value.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED and c.end == start
    c.grant(acl(NAMESPACE, "org", Op.CREATE, prefixed=True))
    assert c.call(c.private.create_namespace, create, ALICE).created == ("org", "org:apache")
    # deleting takes DELETE on the namespace and on all it holds: a DENY on one topic refuses
    c.topics("org:apache:t", "org:u")
    c.grant(acl(NAMESPACE, "org", Op.DELETE), acl(TOPIC, "org:apache:t", Op.DELETE, deny=True))
    before = c.end
    with pytest.raises(ApiError, match="may not Delete topic 'org:apache:t'"):
        c.call(c.private.delete_namespace, DeleteNamespace(name="org", recursive=True), ALICE)
    assert c.end == before and c.service.image.namespaces.exists("org:apache")
    with pytest.raises(ApiError, match="may not Delete namespace"):
        c.call(c.private.delete_namespace, DeleteNamespace(name="org:apache"), BOB)
    c.call(c.private.delete_namespace, DeleteNamespace(name="org", recursive=True), ROOT)
    assert not c.service.image.namespaces.exists("org")


def test_moving_a_topic_needs_alter_on_it_and_create_where_it_goes(cluster: Cluster) -> None:
    c = cluster
    c.namespace("org")
    c.namespace("com")
    c.topics("org:t")
    c.grant(acl(NAMESPACE, "org", Op.ALL))
    move = MoveTopic(topic=TopicRef(name="org:t"), to_namespace="com")
    with pytest.raises(ApiError, match="may not Create topic 'com:t'"):
        c.call(c.private.move_topic, move, ALICE)
    assert [t.name for t in _metadata(c, ALICE, None).topics] == ["org:t"]
    c.grant(acl(NAMESPACE, "com", Op.CREATE))
    assert c.call(c.private.move_topic, move, ALICE).to_name == "com:t"
    # the topic left `org`: org's ACLs no longer apply to it, com's DESCRIBE is not granted
    assert [t.name for t in _metadata(c, ALICE, None).topics] == []
    back = MoveTopic(topic=TopicRef(name="com:t"), to_namespace="org")
    with pytest.raises(ApiError, match="may not Alter topic 'com:t'"):
        c.call(c.private.move_topic, back, ALICE)


def test_partition_deletion_cancel_and_purge_need_alter_on_the_topic(cluster: Cluster) -> None:
    c = cluster
    c.topics("a", "b", partitions=3)
    enable = AlterConfig(name="delete.topic.partition.enable", op=AlterConfigOp.SET, value="true")
    cluster_configs = [(ConfigResource(type=ConfigResourceType.BROKER, name=""), [enable])]
    c.run(lambda image: c.controller.incremental_alter_configs(image, cluster_configs))
    c.grant(acl(TOPIC, "a", Op.ALTER))
    topics = tuple(
        DeletePartitionsTopic(topic=TopicRef(name=n), count=1, delay_ms=600_000) for n in "ab"
    )
    answer = c.call(c.private.delete_partitions, private.DeletePartitions(topics=topics), ALICE)
    assert [int(r.outcome.error_code) for r in answer.results] == [0, TOPIC_DENIED]
    cancels = tuple(CancelPartitionDeletion(topic=TopicRef(name=n)) for n in "ba")
    answer = c.call(
        c.private.cancel_partition_deletions, private.CancelPartitionDeletions(topics=cancels), BOB
    )
    assert [int(r.outcome.error_code) for r in answer.results] == [TOPIC_DENIED, TOPIC_DENIED]
    # a purge steps every pending deletion: ALTER on each of those topics, or on the cluster
    with pytest.raises(ApiError, match="may not Alter topic 'a'"):
        c.call(c.private.purge_pending, private.PurgePending(), BOB)
    assert c.call(c.private.purge_pending, private.PurgePending(), ALICE).results == ()


def test_broker_changes_need_cluster_action_or_alter(cluster: Cluster) -> None:
    c = cluster
    start = c.end
    with pytest.raises(ApiError, match="may not ClusterAction the cluster") as refused:
        c.call(c.private.register_broker, RegisterBroker(broker_id=7), ALICE)
    assert refused.value.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and c.end == start
    fence = private.ChangeBroker(broker_id=1, action=BrokerAction.FENCE)
    with pytest.raises(ApiError):
        c.call(c.private.change_broker, fence, ALICE)
    c.grant(
        acl(CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION),
        acl(CLUSTER, CLUSTER_NAME, Op.ALTER, principal="User:bob"),
    )
    assert c.call(c.private.register_broker, RegisterBroker(broker_id=7), ALICE).broker_id == 7
    assert c.call(c.private.change_broker, fence, BOB).broker_id == 1


def test_log_and_time_travel_reads_need_cluster_action(cluster: Cluster) -> None:
    c = cluster
    reads = [
        (c.private.fetch_log, private.FetchLog(offset=0, max_wait_ms=0)),
        (c.private.image_at, private.ImageAt(at_offset=0)),
        (c.private.history, private.History(entity=private.Entity(topic="t"))),
    ]
    for grant in (None, acl(CLUSTER, CLUSTER_NAME, Op.DESCRIBE)):
        if grant is not None:
            c.grant(grant)  # DESCRIBE is not enough: the log holds everything (issue #31)
        for handler, request in reads:
            with pytest.raises(ApiError) as refused:
                c.call(handler, request, ALICE)
            assert refused.value.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    c.grant(acl(CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION))
    for handler, request in reads:
        c.call(handler, request, ALICE)


def test_list_namespaces_shows_the_describable_ones(cluster: Cluster) -> None:
    c = cluster
    for name in ("org:a", "org:b", "com"):
        c.namespace(name)
    c.grant(acl(NAMESPACE, "org:a", Op.DESCRIBE), acl(NAMESPACE, "com", Op.READ))
    listed = c.call(c.private.list_namespaces, private.ListNamespaces(recursive=True), ALICE)
    assert [n.name for n in listed.namespaces] == ["com", "org:a"]


def test_an_acl_removal_takes_effect_on_the_next_request(cluster: Cluster) -> None:
    c = cluster
    grant = acl(TOPIC, "t", Op.CREATE)
    c.grant(grant)
    c.revoke(grant)
    assert _codes(_create(c, ALICE, "t").topics) == {"t": TOPIC_DENIED}


# ---------------------------------------------------------------------- through the server


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Any]:
    log = tmp_path / "log"
    setup = Cluster(log, None)
    setup.topics("theirs")
    anonymous = "User:ANONYMOUS"
    setup.grant(
        acl(TOPIC, "mine-", Op.ALL, principal=anonymous, prefixed=True),
        acl(CLUSTER, CLUSTER_NAME, Op.DESCRIBE, principal=anonymous),
    )
    setup.service.close()
    with running_server(log, authorizer=AuthorizerConfig()) as server:
        yield server


@pytest.mark.interop
def test_kafka_python_against_the_authorizer(served: Any) -> None:
    admin = KafkaAdminClient(bootstrap_servers=served.address, request_timeout_ms=10_000)
    try:
        admin.create_topics([KpNewTopic("mine-a", 1, 1)])
        start = served.service.log.end_offset
        with pytest.raises(kerrors.TopicAuthorizationFailedError):
            admin.create_topics([KpNewTopic("other", 1, 1)])
        with pytest.raises(kerrors.TopicAuthorizationFailedError):
            admin.delete_topics(["theirs"])
        assert served.service.log.end_offset == start
        assert admin.list_topics() == ["mine-a"]  # "theirs" exists, unlisted
        admin.delete_topics(["mine-a"])
        assert served.service.image.topics.get_by_name("mine-a") is None
    finally:
        admin.close()


@pytest.mark.interop
def test_confluent_kafka_against_the_authorizer(served: Any) -> None:
    admin = ConfluentAdmin({"bootstrap.servers": served.address})
    futures = admin.create_topics([NewTopic("mine-ck", 1, 1), NewTopic("other-ck", 1, 1)])
    futures["mine-ck"].result(timeout=20)
    with pytest.raises(KafkaException) as caught:
        futures["other-ck"].result(timeout=20)
    assert caught.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert set(admin.list_topics(timeout=20).topics) == {"mine-ck"}
    del futures, admin  # librdkafka's threads end now, before the server does


def test_our_client_gets_the_refusals_of_our_own_apis(served: Any) -> None:
    async def talk() -> None:
        async with await AdminClient.connect(served.address) as client:
            with pytest.raises(RemoteError, match="TOPIC_AUTHORIZATION_FAILED"):
                await client.create_namespace("org")
            with pytest.raises(RemoteError, match="CLUSTER_AUTHORIZATION_FAILED"):
                await client.image_at(at_offset=0)  # DESCRIBE is not CLUSTER_ACTION
            with pytest.raises(RemoteError, match="CLUSTER_AUTHORIZATION_FAILED"):
                await client.register_broker(RegisterBroker(broker_id=9))

    asyncio.run(talk())
