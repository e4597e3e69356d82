"""ACLs and SCRAM credentials in SQL snapshots, on SQLite and PostgreSQL.

Round trips byte for byte (every byte value in salts and keys), hand-edited rows are refused
with the rule they break, the tables refuse values no stored ACL can have, and a snapshot of
the format before ACLs existed is skipped rather than trusted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.exc import IntegrityError

from metadata_log import MetadataLog
from metadata_log.reader import LogReader
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    FeatureLevelRecord,
    PatternType,
    Record,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    ResourceType,
    ScramMechanism,
    UserScramCredentialRecord,
)
from records.uuids import Uuid
from replay.delta import replay_records
from replay.image import EMPTY_IMAGE, MetadataImage, Provenance
from replay.loader import load_image
from replay.sql.content import ACLS, SCRAM
from replay.sql.errors import SnapshotChecksumError, SnapshotContentError
from replay.sql.store import SnapshotStore
from replay.timetravel import travel
from tests.support.sql_backends import execute_sql, write_generated_log

SALT = bytes(range(256))  # every byte value, NUL and 0xff included
STORED = bytes(reversed(range(32)))
SERVER = b"\x00" * 31 + b"\xff"
KEY_512 = bytes(range(64, 128))


def _acl(n: int, **changes: object) -> AccessControlEntryRecord:
    fields: dict[str, object] = {
        "id": Uuid(bytes([n] * 16)),
        "resource_type": ResourceType.TOPIC,
        "resource_name": "org:apache:t",
        "pattern_type": PatternType.LITERAL,
        "principal": "User:alice",
        "host": "*",
        "operation": AclOperation.WRITE,
        "permission_type": AclPermissionType.ALLOW,
        **changes,
    }
    return AccessControlEntryRecord(**fields)  # type: ignore[arg-type]  # test keywords


RECORDS: list[Record] = [
    FeatureLevelRecord(name="metadata.version", feature_level=1),
    _acl(1),
    _acl(
        2,
        resource_type=ResourceType.NAMESPACE,
        resource_name="org",
        pattern_type=PatternType.PREFIXED,
        principal="User:*",
        permission_type=AclPermissionType.DENY,
        operation=AclOperation.ALL,
    ),
    _acl(3, resource_type=ResourceType.CLUSTER, resource_name="kafka-cluster", host="::1"),
    _acl(4, resource_name="caf\u00e9 \u2603", principal="User:J\u00fcrgen O'Brien"),
    UserScramCredentialRecord(
        name="alice",
        mechanism=ScramMechanism.SCRAM_SHA_256,
        salt=SALT,
        stored_key=STORED,
        server_key=SERVER,
        iterations=4096,
    ),
    UserScramCredentialRecord(
        name="alice",
        mechanism=ScramMechanism.SCRAM_SHA_512,
        salt=b"\x00",
        stored_key=KEY_512,
        server_key=KEY_512,
        iterations=16384,
    ),
    UserScramCredentialRecord(
        name="bob 'quoted'",
        mechanism=ScramMechanism.SCRAM_SHA_256,
        salt=b"\\x00\n",
        stored_key=STORED,
        server_key=STORED,
        iterations=8192,
    ),
]

IMAGE = replay_records(EMPTY_IMAGE, RECORDS, Provenance(offset=7, epoch=1, timestamp=1000))


@pytest.fixture
def store(database_url: str) -> Iterator[SnapshotStore]:
    with SnapshotStore(database_url) as opened:
        yield opened


def test_acls_and_credentials_round_trip_byte_for_byte(store: SnapshotStore) -> None:
    info = store.write(IMAGE)
    assert info.record_count == len(list(IMAGE.write()))
    loaded = store.load(info.id)
    assert loaded == IMAGE
    credential = loaded.scram.get("alice", ScramMechanism.SCRAM_SHA_256)
    assert credential is not None and type(credential.salt) is bytes
    assert credential.salt == SALT and credential.server_key == SERVER
    assert store.count_rows(info.id)[ACLS] == 4
    assert store.count_rows(info.id)[SCRAM] == 3
    assert store.verify(info.id).ok


def test_the_checksum_does_not_depend_on_the_backend_or_the_snapshot(
    store: SnapshotStore, tmp_path: Path
) -> None:
    first = store.write(IMAGE)
    second = store.write(IMAGE.with_timestamp(2000))
    with SnapshotStore(f"sqlite:///{tmp_path / 'other.db'}") as other:
        third = other.write(IMAGE)
    assert first.checksum == second.checksum == third.checksum


@pytest.mark.parametrize(
    ("sql", "params", "message"),
    [
        (
            f"UPDATE {ACLS} SET principal = 'alice' WHERE acl_id = :acl",
            {"acl": str(Uuid(bytes([1] * 16)))},
            "breaks rule acl.principal",
        ),
        (
            f"UPDATE {ACLS} SET host = '' WHERE acl_id = :acl",
            {"acl": str(Uuid(bytes([1] * 16)))},
            "breaks rule acl.host",
        ),
        (
            f"UPDATE {ACLS} SET resource_name = :name WHERE acl_id = :acl",
            {"acl": str(Uuid(bytes([1] * 16))), "name": "t\x1b[2J"},
            "breaks rule acl.no-control-characters",
        ),
        (
            f"UPDATE {ACLS} SET resource_name = 'x' WHERE resource_type = 'CLUSTER'",
            {},
            "breaks rule acl.cluster-resource",
        ),
        (
            f"UPDATE {ACLS} SET acl_id = 'short' WHERE resource_type = 'CLUSTER'",
            {},
            "'short' is not a 22-character id",
        ),
        (f"UPDATE {SCRAM} SET iterations = 1", {}, "breaks rule scram.iterations"),
        (f"UPDATE {SCRAM} SET stored_key = :key", {"key": b"k"}, "breaks rule scram.key-size"),
        (f"UPDATE {SCRAM} SET salt = :salt", {"salt": b""}, "breaks rule scram.salt"),
        (f"UPDATE {SCRAM} SET name = '' WHERE iterations = 8192", {}, "breaks rule scram.name"),
    ],
)
def test_a_hand_edited_row_is_refused_with_the_rule_it_breaks(
    store: SnapshotStore, database_url: str, sql: str, params: dict[str, object], message: str
) -> None:
    info = store.write(IMAGE)
    execute_sql(database_url, sql, **params)
    with pytest.raises(SnapshotContentError, match=message) as caught:
        store.load(info.id)
    # Errors name users and ACLs, never a salt or a key.
    assert "\\x00\\x01\\x02" not in str(caught.value) and SALT.hex()[:16] not in str(caught.value)
    result = store.verify(info.id)
    assert not result.ok and result.error is not None and message in result.error


def test_a_changed_salt_or_key_fails_the_checksum(store: SnapshotStore, database_url: str) -> None:
    info = store.write(IMAGE)
    execute_sql(database_url, f"UPDATE {SCRAM} SET salt = :salt WHERE iterations = 4096", salt=b"x")
    with pytest.raises(SnapshotChecksumError):
        store.load(info.id)
    assert SALT.hex() not in str(store.verify(info.id).error)


def test_a_deleted_acl_row_fails_the_checksum(store: SnapshotStore, database_url: str) -> None:
    info = store.write(IMAGE)
    execute_sql(database_url, f"DELETE FROM {ACLS} WHERE resource_type = 'NAMESPACE'")
    with pytest.raises(SnapshotChecksumError):
        store.load(info.id)


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("resource_type", "ANY"),
        ("resource_type", "UNKNOWN"),
        ("resource_type", "topic"),
        ("pattern_type", "MATCH"),
        ("pattern_type", "ANY"),
        ("operation", "ANY"),
        ("operation", "UNKNOWN"),
        ("permission_type", "ANY"),
    ],
)
def test_the_acl_table_refuses_values_no_stored_acl_has(
    store: SnapshotStore, database_url: str, column: str, value: str
) -> None:
    store.write(IMAGE)
    with pytest.raises(IntegrityError):
        execute_sql(database_url, f"UPDATE {ACLS} SET {column} = :value", value=value)


def test_the_credential_table_refuses_an_unknown_mechanism(
    store: SnapshotStore, database_url: str
) -> None:
    store.write(IMAGE)
    with pytest.raises(IntegrityError):
        execute_sql(database_url, f"UPDATE {SCRAM} SET mechanism = 'UNKNOWN'")


def test_removals_are_snapshotted_and_time_travel_sees_them(
    tmp_path: Path, store: SnapshotStore
) -> None:
    ticks = iter(range(1_000, 100_000, 10))
    with MetadataLog.open(tmp_path / "log", clock_ms=lambda: next(ticks)) as log:
        log.append(RECORDS, principal="User:admin")
        log.append(
            [
                RemoveAccessControlEntryRecord(id=Uuid(bytes([2] * 16))),
                RemoveUserScramCredentialRecord(
                    name="alice", mechanism=ScramMechanism.SCRAM_SHA_512
                ),
            ],
            principal="User:admin",
        )
    with LogReader.open(tmp_path / "log") as log:
        before = load_image(log, lte=len(RECORDS) - 1)
        after = load_image(log)
        store.write(before)
        result = travel(log, store)
        assert result.snapshot is not None and result.replayed == 2
        assert result.image == after
        assert Uuid(bytes([2] * 16)) not in result.image.acls.by_id
        assert result.image.scram.get("alice", ScramMechanism.SCRAM_SHA_512) is None
        snapshot = store.write(after)
        assert store.load(snapshot.id) == after


def test_a_snapshot_of_the_format_before_acls_is_skipped(
    tmp_path: Path, store: SnapshotStore, database_url: str
) -> None:
    write_generated_log(tmp_path / "log", seed=9, batches=200, security=True)
    with LogReader.open(tmp_path / "log") as log:
        image = load_image(log)
        old = store.write(load_image(log, lte=100))
        execute_sql(database_url, f"UPDATE snapshots SET format_version = 1 WHERE id = {old.id}")
        with pytest.raises(SnapshotContentError, match="format version 1, older than 3"):
            store.load(old.id)
        verified = store.verify(old.id)
        assert not verified.ok and "snapshot delete" in (verified.error or "")
        result = travel(log, store)
        assert result.snapshot is None
        assert any("may lack ACLs" in reason for reason in result.skipped)
        assert result.image == image
        newer = store.write(image)
        assert travel(log, store).snapshot == newer


def test_a_snapshot_of_a_newer_format_says_to_upgrade(
    store: SnapshotStore, database_url: str
) -> None:
    info = store.write(IMAGE)
    execute_sql(database_url, f"UPDATE snapshots SET format_version = 4 WHERE id = {info.id}")
    result = store.verify(info.id)
    assert not result.ok and "a newer metadata-log wrote it" in (result.error or "")


def _image(records: list[Record]) -> MetadataImage:
    return replay_records(EMPTY_IMAGE, records, Provenance(offset=0, epoch=1, timestamp=1))


def test_an_image_of_only_acls_is_snapshotted(store: SnapshotStore) -> None:
    image = _image([_acl(9)])
    assert not image.is_empty
    assert store.load(store.write(image).id) == image
