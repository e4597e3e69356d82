"""Edges of the SQL snapshot store: hand-edited rows, schema states, progress, dialect paths.

A small image that has every area (a broker with listeners and features, nested namespaces,
topics with partitions in every mode, a pending partition deletion, configs, ACLs, SCRAM
credentials, clients' writes) is written, changed by hand in the database, and read back: what
a damaged or edited snapshot gives is a SnapshotContentError that names the row, never a wrong
image or a Python error.
"""

from __future__ import annotations

import gc
import logging
import random
import re
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.exc import OperationalError

from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    BrokerEndpoint,
    BrokerFeature,
    ClientWriteRecord,
    ConfigRecord,
    ConfigResourceType,
    DeleteTopicPartitionsRecord,
    FeatureLevelRecord,
    Mode,
    NamespaceRecord,
    PartitionRecord,
    PatternType,
    Record,
    RegisterBrokerRecord,
    ResourceType,
    ScramMechanism,
    TopicRecord,
    UserScramCredentialRecord,
)
from records.uuids import Uuid
from replay.delta import replay_records
from replay.image import EMPTY_IMAGE, MetadataImage, Provenance
from replay.sql import content, increments, row_io
from replay.sql import schema as schema_module
from replay.sql import store as store_module
from replay.sql.errors import (
    SchemaAheadError,
    SchemaBehindError,
    SchemaError,
    SnapshotChecksumError,
    SnapshotContentError,
    SnapshotDatabaseDamagedError,
    SnapshotNotFoundError,
    SnapshotStoreError,
    StoreUnavailableError,
)
from replay.sql.models import CONTENT_TABLES
from replay.sql.revision import HEAD_REVISION as HEAD
from replay.sql.schema import SchemaState
from replay.sql.store import SnapshotStore
from tests.support.sql_backends import execute_sql, libpq


def _id(n: int) -> Uuid:
    return Uuid(bytes([n] * 16))


ORG, APACHE = _id(1), _id(2)
T1, T2 = _id(3), _id(4)
ACL = _id(5)
CLIENT_A, CLIENT_B = _id(7), _id(6)  # A writes first: the id order is not the eviction order
INCARNATION = _id(8)

RECORDS: list[Record] = [
    FeatureLevelRecord(name="metadata.version", feature_level=3),
    FeatureLevelRecord(name="kraft.version", feature_level=1),
    RegisterBrokerRecord(
        broker_id=1,
        incarnation_id=INCARNATION,
        broker_epoch=10,
        end_points=(
            BrokerEndpoint(name="SSL", host="h1", port=9093, security_protocol=1),
            BrokerEndpoint(name="PLAINTEXT", host="h1", port=9092, security_protocol=0),
        ),
        features=(
            BrokerFeature(
                name="metadata.version", min_supported_version=1, max_supported_version=9
            ),
            BrokerFeature(name="kraft.version", min_supported_version=0, max_supported_version=1),
        ),
        rack="r1",
        fenced=False,
        in_controlled_shutdown=True,
    ),
    RegisterBrokerRecord(broker_id=2, incarnation_id=_id(9), broker_epoch=11),
    NamespaceRecord(namespace_id=ORG, name="org"),
    NamespaceRecord(namespace_id=APACHE, name="org:apache", parent_id=ORG),
    TopicRecord(name="t", topic_id=T1, namespace="org:apache"),
    *(
        PartitionRecord(
            partition_id=p,
            topic_id=T1,
            replicas=(1, 2),
            isr=(1,) if p else (1, 2),
            removing_replicas=(2,) if p == 1 else (),
            adding_replicas=(2,) if p == 2 else (),
            leader=1,
            leader_epoch=p,
            partition_epoch=p + 1,
            mode=mode,
        )
        for p, mode in enumerate((Mode.READ_WRITE, Mode.READ_ONLY, Mode.NONE))
    ),
    TopicRecord(name="u", topic_id=T2),
    PartitionRecord(partition_id=0, topic_id=T2, replicas=(2,), isr=(2,), leader=2),
    PartitionRecord(partition_id=1, topic_id=T2, replicas=(2,), isr=(2,), leader=2),
    DeleteTopicPartitionsRecord(topic_id=T2, partition_count=1, delete_after_ms=5, created_ms=2),
    ConfigRecord(resource_type=ConfigResourceType.TOPIC, resource_name="u", name="a.b", value="1"),
    ConfigRecord(resource_type=ConfigResourceType.BROKER, resource_name="", name="c", value="2"),
    AccessControlEntryRecord(
        id=ACL,
        resource_type=ResourceType.TOPIC,
        resource_name="u",
        pattern_type=PatternType.LITERAL,
        principal="User:alice",
        host="*",
        operation=AclOperation.READ,
        permission_type=AclPermissionType.ALLOW,
    ),
    UserScramCredentialRecord(
        name="alice",
        mechanism=ScramMechanism.SCRAM_SHA_256,
        salt=b"salt",
        stored_key=b"k" * 32,
        server_key=b"s" * 32,
        iterations=4096,
    ),
    ClientWriteRecord(
        client_id=CLIENT_A, sequence=3, principal="User:alice", api_key=19, response=b"\x00a"
    ),
    ClientWriteRecord(client_id=CLIENT_B, sequence=0, principal=None, api_key=20, response=b"b"),
]

IMAGE = replay_records(EMPTY_IMAGE, RECORDS, Provenance(offset=41, epoch=2, timestamp=1_000))


@pytest.fixture
def store(database_url: str) -> Iterator[SnapshotStore]:
    with SnapshotStore(database_url) as opened:
        yield opened


def _sqlite(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'edges.db'}"


# ---------------------------------------------------------------------------- ids


@pytest.mark.parametrize(
    "bad",
    [
        "AAAAAAAAAAAAAAAAAAAAA!",  # 21 base64 characters: not a whole number of bytes
        "AAAAAAAAAAAAAAAAAAAA!!",  # 20: 15 bytes, one short of an id
        "AAAAAAAAAAAAAAAAAAAAA",  # 21 characters
        "AAAAAAAAAAAAAAAAAAAAAB",  # the last one's spare bits set: another text of an id
        "AAAAAAAAAAAA+AAAAAAAAA",  # standard base64's letter, which a lax decode took
    ],
)
def test_an_id_that_is_not_22_base64_characters_of_16_bytes_is_refused(
    store: SnapshotStore, database_url: str, bad: str
) -> None:
    info = store.write(IMAGE)
    execute_sql(database_url, "UPDATE snapshot_acls SET acl_id = :bad", bad=bad)
    with pytest.raises(SnapshotContentError, match="is not a 22-character id"):
        store.load(info.id)
    verified = store.verify(info.id)
    assert not verified.ok and repr(bad) in (verified.error or "")


def test_an_id_stored_as_bytes_is_refused(tmp_path: Path) -> None:
    # SQLite keeps a BLOB in a text column as it is: 22 bytes are not 22 characters.
    url = _sqlite(tmp_path)
    with SnapshotStore(url) as store:
        info = store.write(IMAGE)
        execute_sql(
            url,
            "UPDATE snapshot_namespaces SET namespace_id = :raw WHERE name = 'org'",
            raw=b"A" * 22,
        )
        with pytest.raises(SnapshotContentError, match=r"namespace id b'A+' is not a 22-char"):
            store.load(info.id)


# ---------------------------------------------------------------------------- schema states


def test_each_schema_state_is_described_with_what_to_do(database_url: str) -> None:
    with SnapshotStore(database_url) as store:
        empty = store.status()
        assert empty.describe() == f"no schema yet (head is {HEAD}); `mlog db upgrade` creates it"
        store.upgrade("0003")
        assert (
            store.status().describe() == f"revision 0003, behind head {HEAD}; run `mlog db upgrade`"
        )
        _, current = store.upgrade()
        assert current.describe() == f"revision {HEAD} (head): up to date"
        assert store.status() == current
        store.downgrade("base")
    execute_sql(database_url, "CREATE TABLE snapshots (id INTEGER PRIMARY KEY)")
    with SnapshotStore(database_url) as store:
        unmanaged = store.status()
        assert unmanaged.state is SchemaState.UNMANAGED
        assert "carry no Alembic revision" in unmanaged.describe()
        assert "point --db at another database" in unmanaged.describe()


def test_two_revisions_at_once_are_a_schema_from_elsewhere(database_url: str) -> None:
    # A branched history (two heads) is not this code's: refused like one ahead of it.
    with SnapshotStore(database_url) as store:
        store.upgrade()
    execute_sql(database_url, "INSERT INTO alembic_version VALUES ('0003')")
    with SnapshotStore(database_url) as store:
        status = store.status()
        assert status.state is SchemaState.AHEAD
        assert sorted(status.revision.split(",")) == ["0003", HEAD]  # type: ignore[union-attr]
        with pytest.raises(SchemaAheadError, match="is unknown to this metadata-log"):
            store.ensure_schema()


def test_a_column_of_another_type_is_drift(postgres_url: str) -> None:
    with SnapshotStore(postgres_url) as store:
        store.upgrade()
    execute_sql(postgres_url, "ALTER TABLE snapshot_topics ALTER COLUMN name TYPE varchar(300)")
    with SnapshotStore(postgres_url) as store:
        drift = store.drift()
    assert any("modify_type" in d and "snapshot_topics" in d for d in drift), drift


def test_the_image_has_every_area() -> None:
    # The fixture above is only worth its rows if each area holds something.
    checksum = content.ContentChecksum()
    for rows in content.image_rows(IMAGE, checksum).values():
        list(rows)
    assert all(checksum.count(t) for t in content.COLUMNS), {
        t: checksum.count(t) for t in content.COLUMNS
    }


# ---------------------------------------------------------------------------- content rows


def test_the_image_round_trips_with_its_orders_and_counts(store: SnapshotStore) -> None:
    info = store.write(IMAGE)
    loaded = store.load(info.id)
    assert loaded == IMAGE
    broker = loaded.cluster.brokers[1]
    assert [e.name for e in broker.end_points] == ["SSL", "PLAINTEXT"]
    assert [f.name for f in broker.features] == ["metadata.version", "kraft.version"]
    assert [w.client_id for w in loaded.client_writes.ordered()] == [CLIENT_A, CLIENT_B]
    assert dict(loaded.namespaces.topic_counts) == {"org:apache": 1}
    assert loaded.namespaces.by_name["org:apache"].parent_id == ORG
    assert loaded.namespaces.by_name["org"].parent_id is None
    assert info.record_count == len(list(IMAGE.write()))


def test_a_loaded_snapshot_knows_which_partitions_each_broker_holds(
    store: SnapshotStore,
) -> None:
    # Topics sharing a replica layout and topics of their own: the index a load builds is the
    # one replay keeps, so fencing a broker after a start from a snapshot moves the same ones.
    layouts = [((1, 2), (2, 3)), ((1, 2), (2, 3)), ((3, 1), (3, 4), (4, 1)), ((2, 3), (1, 2))]
    records: list[Record] = [FeatureLevelRecord(name="metadata.version", feature_level=1)]
    records += [
        RegisterBrokerRecord(broker_id=b, incarnation_id=_id(100 + b), broker_epoch=b)
        for b in range(1, 5)
    ]
    for n, layout in enumerate(layouts):
        topic_id = _id(50 + n)
        records.append(TopicRecord(name=f"layout-{n}", topic_id=topic_id))
        records += [
            PartitionRecord(partition_id=p, topic_id=topic_id, replicas=r, isr=r, leader=r[0])
            for p, r in enumerate(layout)
        ]
    image = replay_records(
        EMPTY_IMAGE, records, Provenance(offset=len(records) - 1, epoch=1, timestamp=1)
    )
    loaded = store.load(store.write(image).id)
    assert loaded.topics.by_broker == image.topics.by_broker
    held = {
        b: [(t.name, p.partition_id) for t, p in loaded.topics.partitions_of(b)]
        for b in range(1, 5)
    }
    assert sorted(held[1]) == [
        ("layout-0", 0),
        ("layout-1", 0),
        ("layout-2", 0),
        ("layout-2", 2),
        ("layout-3", 1),
    ]
    assert sorted(held[4]) == [("layout-2", 1), ("layout-2", 2)]


def _edited_sqlite(tmp_path: Path, *statements: str, **params: object) -> tuple[str, int]:
    """A SQLite snapshot of IMAGE, then `statements` with its CHECK constraints ignored.

    SQLite's `ignore_check_constraints` stands for any edit the tables would refuse (an old
    copy, a hand-made table): the reader must refuse such rows all the same.
    """
    url = _sqlite(tmp_path)
    with SnapshotStore(url) as store:
        info = store.write(IMAGE)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("PRAGMA ignore_check_constraints = ON")
            for statement in statements:
                conn.execute(text(statement), params)
    finally:
        engine.dispose()
    return url, info.id


def _refused(url: str, snapshot_id: int, message: str) -> None:
    with SnapshotStore(url) as store:
        with pytest.raises(SnapshotContentError, match=message):
            store.load(snapshot_id)
        verified = store.verify(snapshot_id)
        assert not verified.ok and verified.computed is None
        assert verified.error is not None and re.search(message, verified.error)


T1_TEXT, T2_TEXT = str(T1), str(T2)


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        # replica lists
        ("UPDATE snapshot_partitions SET isr = '[1,'", r"'\[1,' is not a JSON array of broker"),
        ("UPDATE snapshot_partitions SET isr = '5'", "'5' is not a JSON array"),
        ("UPDATE snapshot_partitions SET isr = 'null'", "'null' is not a JSON array"),
        ("UPDATE snapshot_partitions SET replicas = '[1,\"2\"]'", "is not a JSON array"),
        ("UPDATE snapshot_partitions SET adding_replicas = '[true]'", r"'\[true\]' is not a"),
        ("UPDATE snapshot_partitions SET removing_replicas = '[1.5]'", "is not a JSON array"),
        # partitions and their topics
        (
            f"UPDATE snapshot_partitions SET partition_id = 3 "
            f"WHERE topic_id = '{T1_TEXT}' AND partition_id = 2",
            f"topic id {T1_TEXT} has partition 3 where partition 2 belongs",
        ),
        (
            f"DELETE FROM snapshot_partitions WHERE topic_id = '{T1_TEXT}' AND partition_id = 0",
            f"topic id {T1_TEXT} has partition 1 where partition 0 belongs",
        ),
        (
            f"DELETE FROM snapshot_topics WHERE topic_id = '{T1_TEXT}'",
            f"partition [0-9] of topic id {T1_TEXT} without a topic",
        ),
        (
            f"UPDATE snapshot_partitions SET mode = 'WRITE_ONLY' WHERE topic_id = '{T2_TEXT}'",
            f"partition {T2_TEXT}-[01] has unknown mode 'WRITE_ONLY'",
        ),
        (
            f"DELETE FROM snapshot_topics WHERE topic_id = '{T2_TEXT}'",
            "without a topic",
        ),
        # brokers
        (
            "UPDATE snapshot_broker_endpoints SET broker_id = 7 WHERE position = 1",
            r"endpoints or features of unknown brokers \[7\]",
        ),
        (
            "UPDATE snapshot_broker_features SET broker_id = 8 WHERE position = 0",
            r"endpoints or features of unknown brokers \[8\]",
        ),
        ("UPDATE snapshot_brokers SET incarnation_id = 'x'", "incarnation id 'x' is not a"),
        # namespaces, configs, clients' writes
        (
            "UPDATE snapshot_namespaces SET parent_id = 'nope' WHERE parent_id IS NOT NULL",
            "parent namespace id 'nope' is not a 22-character id",
        ),
        (
            "UPDATE snapshot_configs SET resource_type = 'GROUP' WHERE name = 'c'",
            "unknown config resource type 'GROUP'",
        ),
        (
            "UPDATE snapshot_client_writes SET client_id = 'c' WHERE position = 1",
            "client id 'c' is not a",
        ),
        (
            "UPDATE snapshot_client_writes SET sequence = 'x' WHERE position = 1",
            "has a non-integer column",
        ),
        (
            "UPDATE snapshot_client_writes SET position = 'first' WHERE position = 1",
            "has a non-integer column",
        ),
        ("UPDATE snapshot_client_writes SET api_key = 1.5", "has a non-integer column"),
        (
            "UPDATE snapshot_client_writes SET response = 'text' WHERE position = 0",
            "has a column of the wrong type",
        ),
        (
            "UPDATE snapshot_client_writes SET principal = X'00' WHERE position = 0",
            "has a column of the wrong type",
        ),
    ],
)
def test_rows_that_form_no_image_are_refused_by_name(
    tmp_path: Path, statement: str, message: str
) -> None:
    url, snapshot_id = _edited_sqlite(tmp_path, statement)
    _refused(url, snapshot_id, message)


def test_two_texts_of_one_topic_id_are_refused_not_merged(tmp_path: Path) -> None:
    # T2's rows under a text a lax decode took for T1's id (the spare bits of its last
    # character set): the load kept one topic of the two without a word.
    alias = T1_TEXT[:21] + chr(ord(T1_TEXT[21]) + 1)
    assert T1_TEXT[21] in "AQgw"  # its spare bits are clear, so the alias differs in them only
    url, snapshot_id = _edited_sqlite(
        tmp_path,
        "UPDATE snapshot_topics SET topic_id = :alias WHERE topic_id = :t2",
        "UPDATE snapshot_partitions SET topic_id = :alias WHERE topic_id = :t2",
        alias=alias,
        t2=T2_TEXT,
    )
    _refused(url, snapshot_id, f"topic id '{alias}' is not a 22-character id")


def test_a_pending_deletion_of_a_missing_topic_is_refused(tmp_path: Path) -> None:
    url, snapshot_id = _edited_sqlite(
        tmp_path, "UPDATE snapshot_pending_deletions SET topic_id = :other", other=str(ACL)
    )
    _refused(url, snapshot_id, f"pending deletions of unknown topics \\['{ACL}'\\]")


def test_a_clients_second_last_write_is_refused(tmp_path: Path) -> None:
    # The primary key keeps a client once per snapshot; a table without it must not matter.
    url, snapshot_id = _edited_sqlite(
        tmp_path,
        "CREATE TABLE cw AS SELECT * FROM snapshot_client_writes",
        "DROP TABLE snapshot_client_writes",
        "ALTER TABLE cw RENAME TO snapshot_client_writes",
        "INSERT INTO snapshot_client_writes SELECT snapshot_id, client_id, 5, sequence + 1,"
        " principal, api_key, response FROM snapshot_client_writes WHERE position = 0",
    )
    _refused(url, snapshot_id, f"client {CLIENT_A} has two last writes")


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        (
            "UPDATE snapshot_acls SET resource_type = 'ANY'",
            f"ACL {ACL} breaks rule acl.resource-type: an ACL cannot be stored with resource type",
        ),
        ("UPDATE snapshot_acls SET resource_type = 'TOPICS'", "has unknown ResourceType 'TOPICS'"),
        ("UPDATE snapshot_acls SET pattern_type = 'MATCH'", "breaks rule acl.pattern"),
        ("UPDATE snapshot_acls SET pattern_type = 'EXACT'", "has unknown PatternType 'EXACT'"),
        ("UPDATE snapshot_acls SET operation = 'READS'", "has unknown AclOperation 'READS'"),
        ("UPDATE snapshot_acls SET permission_type = 'allow'", "unknown AclPermissionType 'allow'"),
        ("UPDATE snapshot_acls SET resource_name = X'75'", f"ACL {ACL} has a bytes where text is"),
        ("UPDATE snapshot_acls SET principal = X'75'", "has a bytes where text is"),
        ("UPDATE snapshot_acls SET host = X'2a'", "has a bytes where text is"),
        (
            "UPDATE snapshot_scram_credentials SET name = X'61'",
            "a SCRAM credential has a user name b'a' that is not text",
        ),
        (
            "UPDATE snapshot_scram_credentials SET mechanism = 'SCRAM_SHA_1'",
            "the SCRAM credential of user 'alice' has unknown ScramMechanism 'SCRAM_SHA_1'",
        ),
        ("UPDATE snapshot_scram_credentials SET salt = 'salt'", "has a salt or key that is not"),
        ("UPDATE snapshot_scram_credentials SET stored_key = 'k'", "has a salt or key that is not"),
        ("UPDATE snapshot_scram_credentials SET server_key = 's'", "has a salt or key that is not"),
        (
            "UPDATE snapshot_scram_credentials SET iterations = 'many'",
            "of user 'alice' has an iteration count that is not a number",
        ),
        ("UPDATE snapshot_scram_credentials SET iterations = 4096.5", "is not a number"),
    ],
)
def test_security_rows_no_record_could_hold_are_refused_by_name(
    tmp_path: Path, statement: str, message: str
) -> None:
    url, snapshot_id = _edited_sqlite(tmp_path, statement)
    _refused(url, snapshot_id, message)


# ---------------------------------------------------------------------------- the store


def test_progress_counts_every_row_written_and_read(
    store: SnapshotStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The progress bar of `mlog snapshot create` and of a load: every row once, in steps.
    monkeypatch.setattr(row_io, "PROGRESS_EVERY", 2)
    rows = sum(1 for r in content.image_rows(IMAGE, content.ContentChecksum()).values() for _ in r)
    written: list[int] = []
    info = store.write(IMAGE, progress=written.append)
    assert sum(written) == rows
    assert max(written) == 2 and 0 not in written
    read: list[int] = []
    assert store.load(info.id, progress=read.append) == IMAGE
    assert sum(read) == rows and 0 not in read
    assert sum(store.count_rows(info.id).values()) == rows


def test_a_reader_of_an_empty_database_sees_no_snapshot_and_creates_nothing(
    database_url: str,
) -> None:
    with SnapshotStore(database_url, create=False) as reader:
        assert reader.ensure_schema() is False
        assert reader.snapshots() == []
        assert reader.newest() is None
        with pytest.raises(SnapshotNotFoundError, match="no snapshot 1 in"):
            reader.get(1)
        assert reader.status().state is SchemaState.EMPTY
    with SnapshotStore(database_url) as writer:
        assert writer.ensure_schema()
        assert writer.status().state is SchemaState.CURRENT


def test_an_unmanaged_schema_is_neither_used_nor_upgraded(database_url: str) -> None:
    execute_sql(database_url, "CREATE TABLE snapshot_topics (id INTEGER PRIMARY KEY)")
    with SnapshotStore(database_url) as store:
        with pytest.raises(SchemaError, match="carry no Alembic revision") as caught:
            store.ensure_schema()
        assert type(caught.value) is SchemaError
        with pytest.raises(SchemaError, match="carry no Alembic revision"):
            store.upgrade()
        assert store.status().state is SchemaState.UNMANAGED


def test_a_downgraded_schema_is_checked_again(database_url: str) -> None:
    # The store remembers a checked schema; a downgrade through it forgets that.
    with SnapshotStore(database_url) as store:
        store.write(IMAGE)
        assert store.downgrade("0003").state is SchemaState.BEHIND
        with pytest.raises(SchemaBehindError, match=f"behind head {HEAD}"):
            store.snapshots()
        before, after = store.upgrade()
        assert (before.revision, after.revision) == ("0003", HEAD)
        assert [s.offset for s in store.snapshots()] == [IMAGE.provenance.offset]


def test_the_generic_writer_writes_the_same_snapshot(
    store: SnapshotStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Databases other than SQLite and PostgreSQL/psycopg are written with SQLAlchemy Core,
    # in chunks.
    monkeypatch.setattr(store_module, "writer_for", lambda conn: row_io.core_rows)
    monkeypatch.setattr(row_io, "CHUNK", 2)
    info = store.write(IMAGE)
    assert store.load(info.id) == IMAGE
    assert store.verify(info.id).ok


def test_a_database_that_cannot_be_reached_says_what_to_check(tmp_path: Path) -> None:
    down = SnapshotStore("postgresql+psycopg://nobody@127.0.0.1:1/x")
    with pytest.raises(StoreUnavailableError, match="check that it is running") as caught:
        down.snapshots()
    assert "cannot reach the snapshot database postgresql+psycopg://nobody@127.0.0.1:1/x" in str(
        caught.value
    )
    nowhere = SnapshotStore(f"sqlite:///{tmp_path / 'no' / 'such' / 'dir.db'}")
    with pytest.raises(StoreUnavailableError, match="check that its directory exists"):
        nowhere.snapshots()


def test_verify_raises_for_a_database_it_cannot_reach_rather_than_blaming_the_snapshot(
    store: SnapshotStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = store.write(IMAGE)

    def unreachable(*args: object) -> None:
        raise StoreUnavailableError("cannot reach the snapshot database")

    monkeypatch.setattr(store, "_read", unreachable)
    with pytest.raises(StoreUnavailableError):
        store.verify(info.id)


def test_postgresql_data_corrupted_is_damage(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # XX001 (data_corrupted) is what a damaged heap page gives: a cache to rebuild, so the
    # service warns and replays (tests/system/test_snapshot_damage.py), not a failure.
    with SnapshotStore(postgres_url) as store:
        info = store.write(IMAGE)

        messages = ["invalid page in block 7 of relation base/1/2\nDETAIL: more", ""]

        def corrupted(*args: object, **options: object) -> None:
            raise psycopg.errors.DataCorrupted(messages.pop(0))

        monkeypatch.setattr(increments, "select_chunks", corrupted)
        with pytest.raises(
            SnapshotDatabaseDamagedError, match=r"damaged \(invalid page in "
        ) as hit:
            store.load(info.id)
        assert "DETAIL" not in str(hit.value)  # one line
        # A driver error without a message is named by its type.
        with pytest.raises(SnapshotDatabaseDamagedError, match=r"damaged \(DataCorrupted\)"):
            store.load(info.id)


def test_a_lost_connection_is_unavailable_not_damage(postgres_url: str) -> None:
    # The server ends the session (a restart, an admin) just before a statement runs.
    with SnapshotStore(postgres_url) as store:
        store.write(IMAGE)

        def terminate(conn: Any, *args: object) -> None:
            pid = conn.connection.dbapi_connection.info.backend_pid
            with psycopg.connect(libpq(postgres_url), autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

        event.listen(store.engine, "before_cursor_execute", terminate)
        with pytest.raises(
            StoreUnavailableError, match=r"lost the snapshot database .* while listing"
        ):
            store.snapshots()


def test_sqlite_urls_and_files(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SnapshotStore(store_module.sqlite_url(path))
    assert store.is_sqlite and store.sqlite_path() == path and store.missing()
    store.write(IMAGE)
    assert not store.missing()
    # WAL: readers go on while a snapshot is being written.
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()
    store.close()
    memory = SnapshotStore("sqlite://", create=False)
    assert memory.is_sqlite and memory.sqlite_path() is None and not memory.missing()
    assert SnapshotStore("sqlite:///:memory:").sqlite_path() is None
    other = SnapshotStore("postgresql+psycopg://u@h/db")
    assert not other.is_sqlite and other.sqlite_path() is None and not other.missing()


def test_a_write_that_fails_half_way_leaves_nothing(database_url: str) -> None:
    # As a kill -9 (tests/system/test_snapshot_crash.py), in process: one transaction or nothing.
    class Stop(Exception):
        pass

    def stop_after_some_rows(count: int) -> None:
        raise Stop

    with SnapshotStore(database_url) as store:
        with pytest.raises(Stop):
            store.write(IMAGE, progress=stop_after_some_rows)
        assert store.snapshots() == []
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            for table in CONTENT_TABLES:
                assert conn.execute(text(f"SELECT count(*) FROM {table.name}")).scalar() == 0
    finally:
        engine.dispose()


def test_a_store_upgraded_to_an_older_revision_refuses_to_use_it(database_url: str) -> None:
    with SnapshotStore(database_url) as store:
        _, after = store.upgrade("0003")
        assert after.state is SchemaState.BEHIND
        with pytest.raises(SchemaBehindError):
            store.snapshots()


def test_a_deleted_snapshot_leaves_no_row_behind(database_url: str) -> None:
    with SnapshotStore(database_url) as store:
        first = store.write(IMAGE)
        second = store.write(IMAGE.with_timestamp(2_000))
        third = store.write(IMAGE.with_timestamp(3_000))
        assert store.delete(third.id) == third
        assert store.retain(1) == [first]
        # SQLite may give the next snapshot a deleted one's id: no old row may join it.
        fourth = store.write(IMAGE.with_timestamp(4_000))
        assert store.load(fourth.id) == IMAGE.with_timestamp(4_000)
        assert [s.id for s in store.snapshots()] == [second.id, fourth.id]
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            for table in CONTENT_TABLES:
                ids = conn.execute(text(f"SELECT DISTINCT snapshot_id FROM {table.name}"))
                assert sorted(ids.scalars()) == sorted({second.id, fourth.id}), table.name
    finally:
        engine.dispose()


def test_a_missing_table_fails_each_operation_by_name(
    store: SnapshotStore, database_url: str
) -> None:
    info = store.write(IMAGE)
    other = store.write(IMAGE.with_timestamp(2_000))
    execute_sql(database_url, "DROP TABLE snapshot_acls")
    calls: list[tuple[str, Callable[[], object]]] = [
        ("reading snapshot", lambda: store.load(info.id)),
        ("counting rows", lambda: store.count_rows(info.id)),
        ("deleting a snapshot", lambda: store.delete(info.id)),
        ("deleting old snapshots", lambda: store.retain(1)),
        ("writing a snapshot", lambda: store.write(IMAGE)),
    ]
    for operation, call in calls:
        with pytest.raises(SnapshotStoreError, match=f"failed while {operation}"):
            call()
    assert [s.id for s in store.snapshots()] == [info.id, other.id]
    assert any("snapshot_acls" in d for d in store.drift())


def test_the_garbage_collector_is_as_it_was_after_a_load(store: SnapshotStore) -> None:
    info = store.write(IMAGE)
    assert gc.isenabled()
    store.load(info.id)
    assert gc.isenabled()
    gc.disable()
    try:
        store.load(info.id)
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize(
    ("table", "copy", "message"),
    [
        (
            "snapshot_acls",
            "snapshot_id, acl_id, resource_type, 'v', pattern_type, principal, host, operation,"
            " permission_type",
            f"ACL {ACL} appears twice",
        ),
        (
            "snapshot_scram_credentials",
            "snapshot_id, name, mechanism, salt, stored_key, server_key, iterations + 1",
            "user 'alice' has two SCRAM-SHA-256 credentials",
        ),
    ],
)
def test_a_second_acl_or_credential_under_one_key_is_refused(
    tmp_path: Path, table: str, copy: str, message: str
) -> None:
    # As for clients' writes: the primary key is not what keeps a key once.
    url, snapshot_id = _edited_sqlite(
        tmp_path,
        f"CREATE TABLE copied AS SELECT * FROM {table}",
        f"DROP TABLE {table}",
        f"ALTER TABLE copied RENAME TO {table}",
        f"INSERT INTO {table} SELECT {copy} FROM {table}",
    )
    _refused(url, snapshot_id, message)


def test_binary_columns_are_bytes_whatever_the_driver_gives() -> None:
    # A driver may read BLOB/bytea as memoryview or bytearray; the image holds bytes, and the
    # checksum is the one of the bytes written.
    written = content.ContentChecksum()
    tables = {name: list(rows) for name, rows in content.image_rows(IMAGE, written).items()}
    for name, wrap in ((content.CLIENT_WRITES, memoryview), (content.SCRAM, bytearray)):
        tables[name] = [tuple(wrap(v) if type(v) is bytes else v for v in r) for r in tables[name]]
    read = content.ContentChecksum()
    image = content.image_from_rows(IMAGE.provenance, tables, read)
    assert image == IMAGE
    assert read.hexdigest() == written.hexdigest()
    assert all(type(w.response) is bytes for w in image.client_writes.ordered())


def test_a_password_in_the_url_is_never_shown() -> None:
    store = SnapshotStore("postgresql+psycopg://mlog:s3cret@127.0.0.1:1/x")
    assert "s3cret" not in store.shown_url and "***" in store.shown_url
    with pytest.raises(StoreUnavailableError) as caught:
        store.status()
    assert "s3cret" not in str(caught.value) and "mlog:***@127.0.0.1:1/x" in str(caught.value)


def test_a_connection_the_server_closed_between_operations_is_replaced(postgres_url: str) -> None:
    # A PostgreSQL restart between two snapshots: the pool checks a connection before use.
    with SnapshotStore(postgres_url) as store:
        first = store.write(IMAGE)
        with store.engine.connect() as conn:
            pid = conn.connection.dbapi_connection.info.backend_pid  # type: ignore[union-attr]
        with psycopg.connect(libpq(postgres_url), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        assert store.snapshots() == [first]


@pytest.mark.parametrize(
    ("edit", "client", "message"),
    [
        ("api_key = 'x' WHERE position = 0", CLIENT_A, "has a non-integer column"),
        ("sequence = 2.5 WHERE position = 1", CLIENT_B, "has a non-integer column"),
        ("response = 'text' WHERE position = 1", CLIENT_B, "has a column of the wrong type"),
    ],
)
def test_a_clients_write_of_the_wrong_type_names_the_client(
    tmp_path: Path, edit: str, client: Uuid, message: str
) -> None:
    url, snapshot_id = _edited_sqlite(tmp_path, f"UPDATE snapshot_client_writes SET {edit}")
    _refused(url, snapshot_id, f"client {client} {message}")


def test_partition_rows_in_any_order_read_back_the_same_image(database_url: str) -> None:
    # A database returns rows in whatever order its pages hold them (after a VACUUM, an
    # update, a restore): here the partitions go back in reverse order.
    with SnapshotStore(database_url) as store:
        info = store.write(IMAGE)
        for sql in (
            "CREATE TABLE reversed AS SELECT * FROM snapshot_partitions"
            " ORDER BY topic_id DESC, partition_id DESC",
            "DELETE FROM snapshot_partitions",
            "INSERT INTO snapshot_partitions SELECT * FROM reversed",
            "DROP TABLE reversed",
        ):
            execute_sql(database_url, sql)
        assert store.load(info.id) == IMAGE
        assert store.verify(info.id).ok


def _many_topics(count: int) -> MetadataImage:
    # Random ids spread over every first character of their text (whose base64 alphabet is
    # not in ASCII order), every tenth topic with a pending partition deletion.
    rng = random.Random(7)
    records: list[Record] = [
        RegisterBrokerRecord(broker_id=1, incarnation_id=_id(9), broker_epoch=1)
    ]
    for t in range(count):
        tid = Uuid(rng.randbytes(16))
        records.append(TopicRecord(name=f"t{t}", topic_id=tid))
        records.extend(
            PartitionRecord(partition_id=p, topic_id=tid, replicas=(1,), isr=(1,), leader=1)
            for p in range(2)
        )
        if t % 10 == 0:
            records.append(
                DeleteTopicPartitionsRecord(
                    topic_id=tid, partition_count=1, delete_after_ms=5, created_ms=1
                )
            )
    return replay_records(EMPTY_IMAGE, records, Provenance(offset=9, epoch=1, timestamp=1))


def test_rows_keyed_by_topic_come_in_the_order_of_the_ids_text() -> None:
    # The primary key's order (index inserts are appends), for each of the three tables.
    image = _many_topics(500)
    rows = {n: list(r) for n, r in content.image_rows(image, content.ContentChecksum()).items()}
    ids = sorted(str(t) for t in image.topics.by_id)
    assert len({i[0] for i in ids}) > 40
    assert [r[0] for r in rows[content.TOPICS]] == ids
    assert [(r[0], r[1]) for r in rows[content.PARTITIONS]] == [(i, p) for i in ids for p in (0, 1)]
    assert [r[0] for r in rows[content.PENDING]] == [
        i for i in ids if image.topics.by_id[Uuid.parse(i)].pending_deletion is not None
    ]


def test_a_paced_write_is_the_same_snapshot_written_in_slices(database_url: str) -> None:
    # A serving process writes its snapshots in slices (`pace` between them); the rows, the
    # checksum and the image read back are those of a write in one go.
    image = _many_topics(300)
    paces = 0

    def pace() -> None:
        nonlocal paces
        paces += 1

    with SnapshotStore(database_url) as store:
        whole = store.write(image)
        sliced = store.write(image, pace=pace)
        assert (sliced.checksum, sliced.record_count) == (whole.checksum, whole.record_count)
        assert store.load(sliced.id) == image
    rows = sum(len(list(r)) for r in content.image_rows(image, content.ContentChecksum()).values())
    assert paces >= rows // store_module.PACE_ROWS >= 10


PINNED_CHECKSUM = "fad786372d557c66f3e398772153bb56312ffa2a3cd30718d12c58c3d334dfe5"
"""The checksum of IMAGE's rows under FORMAT_VERSION 3."""


def test_the_checksum_of_a_known_image_is_pinned() -> None:
    # Stored snapshots are checked against it on every load: a change to how it is computed
    # must come with a new FORMAT_VERSION, or every existing snapshot reads as damaged.
    checksum = content.ContentChecksum()
    for rows in content.image_rows(IMAGE, checksum).values():
        list(rows)
    assert checksum.hexdigest() == PINNED_CHECKSUM
    assert content.record_count(checksum) == len(list(IMAGE.write())) == 20
    # Read back, a topic's partitions are hashed as they stream in: the same checksum, so the
    # snapshots written before that still load.
    tables = {n: list(r) for n, r in content.image_rows(IMAGE, content.ContentChecksum()).items()}
    read = content.ContentChecksum()
    assert content.image_from_rows(IMAGE.provenance, tables, read) == IMAGE
    assert read.hexdigest() == PINNED_CHECKSUM


def test_closing_the_store_closes_its_connections(postgres_url: str) -> None:
    # A service or a command that closes its store leaves no session on the server. The
    # name is this test's alone: another run beside it (the same server) has sessions too.
    name = f"mlog_close_{uuid.uuid4().hex[:12]}"
    url = f"{postgres_url}&application_name={name}"
    with SnapshotStore(url) as store:
        store.write(IMAGE)
        assert store.snapshots()
        assert _sessions(postgres_url, name) >= 1
    _no_sessions_left(postgres_url, name)
    again = SnapshotStore(url)
    again.ensure_schema()
    again.close()
    again.close()  # twice is fine
    _no_sessions_left(postgres_url, name)


def _no_sessions_left(url: str, application: str) -> None:
    """Wait until the server lists no session of `application` (generous deadline).

    A closed connection's backend leaves `pg_stat_activity` once its process has exited, a
    moment after the client closed it: later still on a loaded host.
    """
    deadline = time.monotonic() + 60.0
    while (left := _sessions(url, application)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == 0, f"{left} session(s) of {application} still open after the store closed"


def _sessions(url: str, application: str) -> int:
    with psycopg.connect(libpq(url), autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (application,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_version_table_of_another_shape_is_an_error_that_says_so(database_url: str) -> None:
    execute_sql(database_url, "CREATE TABLE alembic_version (version integer)")
    with SnapshotStore(database_url) as store:
        with pytest.raises(SnapshotStoreError, match="failed while reading the schema revision"):
            store.status()
        with pytest.raises(SnapshotStoreError, match="failed while reading the schema revision"):
            store.snapshots()


def test_a_migration_that_fails_says_so_and_changes_nothing(database_url: str) -> None:
    with SnapshotStore(database_url) as store:
        store.upgrade("0003")
    execute_sql(database_url, "CREATE TABLE snapshot_client_writes (x integer)")
    with SnapshotStore(database_url) as store:
        with pytest.raises(SnapshotStoreError, match="failed while migrating"):
            store.upgrade()
        assert store.status().revision == "0003"
    execute_sql(database_url, "DROP TABLE snapshot_client_writes")
    execute_sql(database_url, "DROP TABLE snapshot_acls")
    with SnapshotStore(database_url) as store:
        with pytest.raises(SnapshotStoreError, match="failed while migrating"):
            store.downgrade("0002")
        assert store.status().revision == "0003"


def test_the_first_write_to_an_empty_database_says_it_creates_the_tables(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.INFO, logger="replay.sql.store"),
        SnapshotStore(database_url) as store,
    ):
        store.write(IMAGE)
        store.write(IMAGE)
    created = [
        r.getMessage() for r in caplog.records if "creating the snapshot tables" in r.message
    ]
    assert created == [f"creating the snapshot tables in {store.shown_url}"]


def test_a_database_at_head_is_recognised_without_alembic(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every start-up against an up-to-date database: one query, no Alembic (the status).
    with SnapshotStore(database_url) as store:
        store.ensure_schema()
    with SnapshotStore(database_url) as store:

        def no_alembic() -> None:
            raise AssertionError("Alembic was asked")

        monkeypatch.setattr(store, "status", no_alembic)
        assert store.ensure_schema()
        assert store.snapshots() == []


def test_a_missing_snapshots_table_fails_listing_and_reading_by_name(
    store: SnapshotStore, database_url: str
) -> None:
    info = store.write(IMAGE)
    execute_sql(database_url, "DROP TABLE snapshots")
    with pytest.raises(SnapshotStoreError, match="failed while listing snapshots"):
        store.snapshots()
    with pytest.raises(SnapshotStoreError, match="failed while reading a snapshot"):
        store.get(info.id)


def test_a_driver_with_another_parameter_style_is_refused_for_fast_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The bulk reads write their own SQL: `?` (sqlite3) or `%s` (psycopg). A driver of another
    # style is refused by name, not handed a query it would misread. (The store's own queries
    # were compiled by the first load, so only the bulk read meets the new style.)
    with SnapshotStore(_sqlite(tmp_path)) as store:
        info = store.write(IMAGE)
        store.load(info.id)
        monkeypatch.setattr(store.engine.dialect, "paramstyle", "named")
        with pytest.raises(SnapshotStoreError, match="paramstyle 'named' is not supported"):
            store.load(info.id)


def test_the_schema_is_checked_once_per_store(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SnapshotStore(database_url) as creator:  # creates the schema
        creator.write(IMAGE)

    def asked(*args: object) -> None:
        raise AssertionError("the schema was checked again")

    with SnapshotStore(database_url) as store:  # finds it at head
        assert len(store.snapshots()) == 1
        monkeypatch.setattr(store, "_at_head", asked)
        monkeypatch.setattr(store, "status", asked)
        assert len(store.snapshots()) == 1
        store.write(IMAGE)


def test_snapshots_are_listed_by_offset_whatever_the_write_order(store: SnapshotStore) -> None:
    late = store.write(IMAGE.with_timestamp(9))  # offset 41
    early_image = replay_records(
        EMPTY_IMAGE, RECORDS[:2], Provenance(offset=5, epoch=1, timestamp=1)
    )
    early = store.write(early_image)
    again = store.write(early_image)  # the same offset: by id
    assert store.snapshots() == [early, again, late]
    assert store.snapshots(desc=True) == [late, again, early]
    assert store.newest(lte=40) == again


def test_counting_the_rows_of_a_missing_snapshot_is_not_found(store: SnapshotStore) -> None:
    store.write(IMAGE)
    with pytest.raises(SnapshotNotFoundError, match="no snapshot 999"):
        store.count_rows(999)


def test_the_garbage_collector_is_paused_while_a_snapshot_is_read(store: SnapshotStore) -> None:
    # A load makes millions of long-lived objects and no cycles (as load_image).
    info = store.write(IMAGE)
    during: list[bool] = []
    store.load(info.id, progress=lambda _: during.append(gc.isenabled()))
    assert during and not any(during)
    assert gc.isenabled()


def test_a_damaged_sqlite_header_is_damage_found_while_opening(tmp_path: Path) -> None:
    path = tmp_path / "edges.db"
    with SnapshotStore(_sqlite(tmp_path)) as store:
        store.write(IMAGE)
    with path.open("r+b") as f:
        f.write(b"this is no database header")
    with SnapshotStore(_sqlite(tmp_path)) as store:
        damaged = r"is damaged \(file is not a database\), found while opening it"
        with pytest.raises(SnapshotDatabaseDamagedError, match=damaged):
            store.snapshots()


def test_a_checksum_mismatch_shows_both_checksums_short(
    store: SnapshotStore, database_url: str
) -> None:
    info = store.write(IMAGE)
    execute_sql(database_url, "UPDATE snapshot_configs SET value = '3' WHERE name = 'c'")
    with pytest.raises(SnapshotChecksumError) as caught:
        store.load(info.id)
    shown = re.search(r"\(stored (\w+)\.\.\., rows give (\w+)\.\.\.\)", str(caught.value))
    assert shown is not None and shown[1] == info.checksum[:12]
    assert len(shown[2]) == 12 and shown[2] != shown[1]


def test_a_failing_schema_comparison_is_an_error_that_says_so(
    store: SnapshotStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.ensure_schema()

    def failing(conn: object) -> list[str]:
        raise OperationalError("SELECT", {}, Exception("disk I/O error"))

    monkeypatch.setattr(schema_module, "drift", failing)
    with pytest.raises(SnapshotStoreError, match="failed while comparing the schema: disk I/O"):
        store.drift()
