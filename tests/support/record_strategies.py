"""Hypothesis strategies for records and log entries, shared by the codec and audit tests."""

from __future__ import annotations

import io
from typing import Any

import fastavro
from hypothesis import strategies as st

from records.codec import EntryTuple
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    CancelTopicPartitionsDeletionRecord,
    ClientWriteRecord,
    ConfigRecord,
    ConfigResourceType,
    ControlledShutdownChange,
    DeleteTopicPartitionsRecord,
    FeatureLevelRecord,
    FencingChange,
    KRaftVersionRecord,
    LeaderChangeRecord,
    Mode,
    MoveTopicRecord,
    NamespaceRecord,
    PartitionChangeRecord,
    PartitionRecord,
    PatternType,
    PurgeTopicPartitionsRecord,
    QuorumVoter,
    Record,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveNamespaceRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    ResourceType,
    ScramMechanism,
    TopicRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
    VotersRecord,
)
from records.uuids import Uuid
from records.varint import encode_long

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


int32s: st.SearchStrategy[int] = st.integers(INT32_MIN, INT32_MAX)


int64s: st.SearchStrategy[int] = st.integers(INT64_MIN, INT64_MAX)


texts: st.SearchStrategy[str] = st.text()


uuids: st.SearchStrategy[Uuid] = st.builds(Uuid, st.binary(min_size=16, max_size=16))


replica_lists: st.SearchStrategy[tuple[int, ...]] = st.lists(int32s, max_size=8).map(tuple)


endpoints: st.SearchStrategy[BrokerEndpoint] = st.builds(
    BrokerEndpoint, name=texts, host=texts, port=int32s, security_protocol=int32s
)


features: st.SearchStrategy[BrokerFeature] = st.builds(
    BrokerFeature,
    name=texts,
    min_supported_version=int32s,
    max_supported_version=int32s,
)


feature_level_records: st.SearchStrategy[FeatureLevelRecord] = st.builds(
    FeatureLevelRecord, name=texts, feature_level=int32s
)


register_broker_records: st.SearchStrategy[RegisterBrokerRecord] = st.builds(
    RegisterBrokerRecord,
    broker_id=int32s,
    incarnation_id=uuids,
    broker_epoch=int64s,
    end_points=st.lists(endpoints, max_size=4).map(tuple),
    features=st.lists(features, max_size=4).map(tuple),
    rack=st.none() | texts,
    fenced=st.booleans(),
    in_controlled_shutdown=st.booleans(),
)


unregister_broker_records: st.SearchStrategy[UnregisterBrokerRecord] = st.builds(
    UnregisterBrokerRecord, broker_id=int32s, broker_epoch=int64s
)


broker_registration_change_records: st.SearchStrategy[BrokerRegistrationChangeRecord] = st.builds(
    BrokerRegistrationChangeRecord,
    broker_id=int32s,
    broker_epoch=int64s,
    fenced=st.sampled_from(FencingChange),
    in_controlled_shutdown=st.sampled_from(ControlledShutdownChange),
)


namespace_records: st.SearchStrategy[NamespaceRecord] = st.builds(
    NamespaceRecord, namespace_id=uuids, name=texts, parent_id=st.none() | uuids
)


remove_namespace_records: st.SearchStrategy[RemoveNamespaceRecord] = st.builds(
    RemoveNamespaceRecord, namespace_id=uuids
)


topic_records: st.SearchStrategy[TopicRecord] = st.builds(
    TopicRecord, name=texts, topic_id=uuids, namespace=texts
)


partition_records: st.SearchStrategy[PartitionRecord] = st.builds(
    PartitionRecord,
    partition_id=int32s,
    topic_id=uuids,
    replicas=replica_lists,
    isr=replica_lists,
    removing_replicas=replica_lists,
    adding_replicas=replica_lists,
    leader=int32s,
    leader_epoch=int32s,
    partition_epoch=int32s,
    mode=st.sampled_from(Mode),
)


partition_change_records: st.SearchStrategy[PartitionChangeRecord] = st.builds(
    PartitionChangeRecord,
    partition_id=int32s,
    topic_id=uuids,
    isr=st.none() | replica_lists,
    leader=int32s,
    replicas=st.none() | replica_lists,
    removing_replicas=st.none() | replica_lists,
    adding_replicas=st.none() | replica_lists,
    leader_epoch=st.none() | int32s,
    partition_epoch=st.none() | int32s,
    mode=st.none() | st.sampled_from(Mode),
)


remove_topic_records: st.SearchStrategy[RemoveTopicRecord] = st.builds(
    RemoveTopicRecord, topic_id=uuids
)


delete_topic_partitions_records: st.SearchStrategy[DeleteTopicPartitionsRecord] = st.builds(
    DeleteTopicPartitionsRecord,
    topic_id=uuids,
    partition_count=int32s,
    delete_after_ms=int64s,
    created_ms=int64s,
)


config_records: st.SearchStrategy[ConfigRecord] = st.builds(
    ConfigRecord,
    resource_type=st.sampled_from(ConfigResourceType),
    resource_name=texts,
    name=texts,
    value=st.none() | texts,
)


move_topic_records: st.SearchStrategy[MoveTopicRecord] = st.builds(
    MoveTopicRecord, topic_id=uuids, namespace=texts
)


purge_topic_partitions_records: st.SearchStrategy[PurgeTopicPartitionsRecord] = st.builds(
    PurgeTopicPartitionsRecord, topic_id=uuids, partition_count=int32s
)


cancel_topic_partitions_deletion_records: st.SearchStrategy[CancelTopicPartitionsDeletionRecord] = (
    st.builds(CancelTopicPartitionsDeletionRecord, topic_id=uuids, partition_count=int32s)
)


scram_mechanisms = st.sampled_from(list(ScramMechanism))


user_scram_credential_records: st.SearchStrategy[UserScramCredentialRecord] = st.builds(
    UserScramCredentialRecord,
    name=texts,
    mechanism=scram_mechanisms,
    salt=st.binary(max_size=64),
    stored_key=st.binary(max_size=64),
    server_key=st.binary(max_size=64),
    iterations=int32s,
)


remove_user_scram_credential_records: st.SearchStrategy[RemoveUserScramCredentialRecord] = (
    st.builds(RemoveUserScramCredentialRecord, name=texts, mechanism=scram_mechanisms)
)


access_control_entry_records: st.SearchStrategy[AccessControlEntryRecord] = st.builds(
    AccessControlEntryRecord,
    id=uuids,
    resource_type=st.sampled_from(list(ResourceType)),
    resource_name=texts,
    pattern_type=st.sampled_from(list(PatternType)),
    principal=texts,
    host=texts,
    operation=st.sampled_from(list(AclOperation)),
    permission_type=st.sampled_from(list(AclPermissionType)),
)


remove_access_control_entry_records: st.SearchStrategy[RemoveAccessControlEntryRecord] = st.builds(
    RemoveAccessControlEntryRecord, id=uuids
)


leader_change_records: st.SearchStrategy[LeaderChangeRecord] = st.builds(
    LeaderChangeRecord, leader_id=int32s, voters=replica_lists, granting_voters=replica_lists
)


quorum_voters: st.SearchStrategy[QuorumVoter] = st.builds(
    QuorumVoter,
    voter_id=int32s,
    voter_directory_id=st.text(max_size=36),
    listener=st.text(max_size=12),
    host=st.text(max_size=20),
    port=int32s,
    min_kraft_version=int32s,
    max_kraft_version=int32s,
)
voters_records: st.SearchStrategy[VotersRecord] = st.builds(
    VotersRecord, voters=st.lists(quorum_voters, max_size=5).map(tuple)
)
kraft_version_records: st.SearchStrategy[KRaftVersionRecord] = st.builds(
    KRaftVersionRecord, kraft_version=int32s
)


client_write_records: st.SearchStrategy[ClientWriteRecord] = st.builds(
    ClientWriteRecord,
    client_id=uuids,
    sequence=st.integers(0, 2**63 - 1),
    principal=st.none() | st.text(max_size=20),
    api_key=int32s,
    response=st.binary(max_size=64),
)


RECORD_STRATEGIES: dict[type[Record], st.SearchStrategy[Record]] = {
    FeatureLevelRecord: feature_level_records,
    RegisterBrokerRecord: register_broker_records,
    UnregisterBrokerRecord: unregister_broker_records,
    BrokerRegistrationChangeRecord: broker_registration_change_records,
    NamespaceRecord: namespace_records,
    RemoveNamespaceRecord: remove_namespace_records,
    TopicRecord: topic_records,
    PartitionRecord: partition_records,
    PartitionChangeRecord: partition_change_records,
    RemoveTopicRecord: remove_topic_records,
    DeleteTopicPartitionsRecord: delete_topic_partitions_records,
    ConfigRecord: config_records,
    MoveTopicRecord: move_topic_records,
    PurgeTopicPartitionsRecord: purge_topic_partitions_records,
    CancelTopicPartitionsDeletionRecord: cancel_topic_partitions_deletion_records,
    UserScramCredentialRecord: user_scram_credential_records,
    RemoveUserScramCredentialRecord: remove_user_scram_credential_records,
    AccessControlEntryRecord: access_control_entry_records,
    RemoveAccessControlEntryRecord: remove_access_control_entry_records,
    LeaderChangeRecord: leader_change_records,
    ClientWriteRecord: client_write_records,
    VotersRecord: voters_records,
    KRaftVersionRecord: kraft_version_records,
}


any_record: st.SearchStrategy[Record] = st.one_of(*RECORD_STRATEGIES.values())


entry_tuples: st.SearchStrategy[EntryTuple] = st.tuples(
    int64s, int32s, int64s, st.none() | texts, any_record
)


def _strip_array_framing(raw: bytes, count: int) -> bytes:
    prefix = encode_long(count)
    assert raw.startswith(prefix)
    assert raw.endswith(b"\x00")
    return raw[len(prefix) : -1]


def write_body(writer_entry_schema: dict[str, Any], values: list[dict[str, Any]]) -> bytes:
    out = io.BytesIO()
    parsed = fastavro.parse_schema({"type": "array", "items": writer_entry_schema})
    fastavro.schemaless_writer(out, parsed, values)
    return _strip_array_framing(out.getvalue(), len(values))
