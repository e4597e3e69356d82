"""The stored format's numbers, frozen: an enum value or record type written to a log is forever.

A log stores enums and record types as numbers, and the Avro union by position. Changing one
of these makes every log written before unreadable (or read wrong); a new member or record
type is added beside them, with this table.
"""

from __future__ import annotations

from enum import IntEnum

from records import model

ENUMS: dict[type[IntEnum], dict[str, int]] = {
    model.Mode: {"READ_WRITE": 0, "READ_ONLY": 1, "NONE": -1},
    model.ConfigResourceType: {"UNKNOWN": 0, "TOPIC": 2, "BROKER": 4, "NAMESPACE": 64},
    model.FencingChange: {"UNFENCE": -1, "NONE": 0, "FENCE": 1},
    model.ControlledShutdownChange: {"NONE": 0, "IN_CONTROLLED_SHUTDOWN": 1},
    model.ResourceType: {
        "UNKNOWN": 0,
        "ANY": 1,
        "TOPIC": 2,
        "GROUP": 3,
        "CLUSTER": 4,
        "TRANSACTIONAL_ID": 5,
        "DELEGATION_TOKEN": 6,
        "USER": 7,
        "NAMESPACE": 64,
    },
    model.PatternType: {"UNKNOWN": 0, "ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4},
    model.AclOperation: {
        "UNKNOWN": 0,
        "ANY": 1,
        "ALL": 2,
        "READ": 3,
        "WRITE": 4,
        "CREATE": 5,
        "DELETE": 6,
        "ALTER": 7,
        "DESCRIBE": 8,
        "CLUSTER_ACTION": 9,
        "DESCRIBE_CONFIGS": 10,
        "ALTER_CONFIGS": 11,
        "IDEMPOTENT_WRITE": 12,
        "CREATE_TOKENS": 13,
        "DESCRIBE_TOKENS": 14,
    },
    model.AclPermissionType: {"UNKNOWN": 0, "ANY": 1, "DENY": 2, "ALLOW": 3},
    model.ScramMechanism: {"UNKNOWN": 0, "SCRAM_SHA_256": 1, "SCRAM_SHA_512": 2},
}

RECORD_TYPES = {
    "RegisterBrokerRecord": (0, 0),
    "UnregisterBrokerRecord": (1, 0),
    "TopicRecord": (2, 0),
    "PartitionRecord": (3, 0),
    "ConfigRecord": (4, 0),
    "PartitionChangeRecord": (5, 0),
    "RemoveTopicRecord": (9, 0),
    "UserScramCredentialRecord": (11, 0),
    "FeatureLevelRecord": (12, 0),
    "BrokerRegistrationChangeRecord": (17, 0),
    "RemoveUserScramCredentialRecord": (22, 0),
    "AccessControlEntryRecord": (23, 0),
    "RemoveAccessControlEntryRecord": (24, 0),
    "NamespaceRecord": (100, 0),
    "RemoveNamespaceRecord": (101, 0),
    "DeleteTopicPartitionsRecord": (102, 0),
    "MoveTopicRecord": (103, 0),
    "PurgeTopicPartitionsRecord": (104, 0),
    "CancelTopicPartitionsDeletionRecord": (105, 0),
    "LeaderChangeRecord": (106, 0),
    "ClientWriteRecord": (107, 0),
    "VotersRecord": (108, 0),
    "KRaftVersionRecord": (109, 0),
}
"""name -> (record type, version): Kafka's numbers for Kafka's records, 100 and up for ours."""

UNION_ORDER = (
    "FeatureLevelRecord",
    "RegisterBrokerRecord",
    "UnregisterBrokerRecord",
    "BrokerRegistrationChangeRecord",
    "NamespaceRecord",
    "RemoveNamespaceRecord",
    "TopicRecord",
    "PartitionRecord",
    "PartitionChangeRecord",
    "RemoveTopicRecord",
    "DeleteTopicPartitionsRecord",
    "ConfigRecord",
    "MoveTopicRecord",
    "PurgeTopicPartitionsRecord",
    "CancelTopicPartitionsDeletionRecord",
    "UserScramCredentialRecord",
    "RemoveUserScramCredentialRecord",
    "AccessControlEntryRecord",
    "RemoveAccessControlEntryRecord",
    "LeaderChangeRecord",
    "ClientWriteRecord",
    "VotersRecord",
    "KRaftVersionRecord",
)
"""The Avro union's branches by position: new record types go at the end."""


def test_enum_values_never_change() -> None:
    for enum, members in ENUMS.items():
        assert {m.name: int(m) for m in enum} == members, enum.__name__


def test_record_types_and_versions_never_change() -> None:
    assert {c.__name__: (c.RECORD_TYPE, c.VERSION) for c in model.RECORD_CLASSES} == RECORD_TYPES


def test_older_record_types_keep_their_union_position() -> None:
    names = tuple(c.__name__ for c in model.RECORD_CLASSES)
    assert names[: len(UNION_ORDER)] == UNION_ORDER


def test_leader_sentinels() -> None:
    assert (model.NO_LEADER, model.LEADER_UNCHANGED) == (-1, -2)


def test_scram_mechanisms_are_named_as_kafka_names_them() -> None:
    assert model.ScramMechanism.SCRAM_SHA_256.mechanism_name == "SCRAM-SHA-256"
    assert model.ScramMechanism.SCRAM_SHA_512.mechanism_name == "SCRAM-SHA-512"
