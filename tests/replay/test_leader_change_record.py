"""LeaderChangeRecord: the quorum leader's marker, in the codec, replay, history, audit and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metadata_log import LogConfig
from metadata_log.reader import LogReader
from metadata_log.replica_log import ReplicaLog
from records.codec import DEFAULT_CODEC
from records.json_form import record_from_json, record_to_json
from records.model import (
    RECORD_CLASSES,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    LeaderChangeRecord,
    Record,
    RegisterBrokerRecord,
)
from records.uuids import Uuid
from replay.delta import MetadataDelta
from replay.image import EMPTY_IMAGE, MetadataImage, Provenance
from replay.loader import load_image
from replay.timetravel import Entity, history, image_at

T0 = 1_767_225_600_000
MARKER = LeaderChangeRecord(leader_id=1001, voters=(1000, 1001, 1002), granting_voters=(1001, 1002))


def test_it_has_a_new_type_number_and_version_zero() -> None:
    assert (LeaderChangeRecord.RECORD_TYPE, LeaderChangeRecord.VERSION) == (106, 0)
    others = [c.RECORD_TYPE for c in RECORD_CLASSES if c is not LeaderChangeRecord]
    assert LeaderChangeRecord.RECORD_TYPE not in others
    # New types go at the end of the union: older branches keep their positions.
    assert (
        RECORD_CLASSES.index(LeaderChangeRecord) == RECORD_CLASSES.index(RegisterBrokerRecord) + 18
    )


def test_its_schema_documents_every_field_as_kraft_names_them() -> None:
    schema = DEFAULT_CODEC.schema_for(106).to_avro()
    assert schema["doc"]
    assert [(f["name"], f["type"]) for f in schema["fields"]] == [
        ("leader_id", "int"),
        ("voters", {"type": "array", "items": "int"}),
        ("granting_voters", {"type": "array", "items": "int"}),
    ]
    assert all(f.get("doc") for f in schema["fields"])


@pytest.mark.parametrize(
    "record",
    [
        MARKER,
        LeaderChangeRecord(leader_id=0, voters=(), granting_voters=()),
        LeaderChangeRecord(leader_id=(1 << 31) - 1, voters=(-1, 1 << 30), granting_voters=(7,)),
    ],
)
def test_it_round_trips_through_the_codec_and_the_json_form(record: LeaderChangeRecord) -> None:
    count, body = DEFAULT_CODEC.encode_entries([(5, 3, T0, None, record)])
    array = DEFAULT_CODEC.reader_array_schema(DEFAULT_CODEC.entry_schema_json)
    (entry,) = DEFAULT_CODEC.decode_entries(count, body, array)
    assert (entry.offset, entry.epoch, entry.record) == (5, 3, record)
    assert DEFAULT_CODEC.decode_block(count, body, array).records == [record]
    form = record_to_json(record)
    assert form["type"] == "LEADER_CHANGE_RECORD" and form["version"] == 0
    assert form["data"] == {
        "leader_id": record.leader_id,
        "voters": list(record.voters),
        "granting_voters": list(record.granting_voters),
    }
    assert record_from_json(json.loads(json.dumps(form))) == record


def _image_with_content() -> MetadataImage:
    records: list[Record] = [
        FeatureLevelRecord(name="metadata.version", feature_level=1),
        RegisterBrokerRecord(
            broker_id=1, incarnation_id=Uuid(bytes(16)), broker_epoch=1, fenced=False
        ),
        ConfigRecord(
            resource_type=ConfigResourceType.BROKER, resource_name="1", name="a", value="b"
        ),
    ]
    delta = MetadataDelta(EMPTY_IMAGE)
    delta.replay_all(records)
    delta.finish_batch()
    return delta.apply(Provenance(offset=2, epoch=1, timestamp=T0))


def test_replay_changes_nothing_but_the_provenance() -> None:
    image = _image_with_content()
    delta = MetadataDelta(image)
    delta.replay(MARKER)
    delta.finish_batch()
    after = delta.apply(Provenance(offset=3, epoch=2, timestamp=T0 + 5))
    assert after.provenance == Provenance(offset=3, epoch=2, timestamp=T0 + 5)
    assert after.features is image.features
    assert after.cluster is image.cluster
    assert after.configs is image.configs
    assert list(after.write()) == list(image.write())
    # A snapshot never holds it: it is not state.
    assert not any(isinstance(r, LeaderChangeRecord) for r in after.write())
    assert MetadataDelta(EMPTY_IMAGE).handled_types() == frozenset(RECORD_CLASSES)


def _quorum_log(directory: Path) -> list[Record]:
    """A quorum-mode log: the first leader's marker, metadata, a second leader's marker."""
    content: list[Record] = [
        FeatureLevelRecord(name="metadata.version", feature_level=1),
        RegisterBrokerRecord(
            broker_id=1, incarnation_id=Uuid(bytes(16)), broker_epoch=1, fenced=False
        ),
    ]
    second = LeaderChangeRecord(leader_id=1000, voters=(1000, 1001, 1002), granting_voters=(1000,))
    config = ConfigRecord(
        resource_type=ConfigResourceType.BROKER, resource_name="1", name="a", value="b"
    )
    blocks: list[tuple[list[Record], int, str]] = [
        ([MARKER], 1, "controller"),
        (content, 1, "User:admin"),
        ([second], 4, "controller"),
        ([config], 4, "User:admin"),
    ]
    with ReplicaLog.open(directory, config=LogConfig()) as log:
        offset = 0
        for records, epoch, principal in blocks:
            block = log.encode_block(
                [(records, principal)], first_offset=offset, epoch=epoch, timestamp=T0 + offset
            )
            offset = log.write_blocks([block], check=True)
        log.flush()
        assert log.epoch_cache() == [(1, 0), (4, 3)]
    return [MARKER, *content, second, config]


def test_a_quorum_log_with_markers_replays_and_travels_in_time(tmp_path: Path) -> None:
    records = _quorum_log(tmp_path / "log")
    with LogReader.open(tmp_path / "log") as log:
        assert [e.record for e in log.read()] == records
        image = load_image(log)
        assert image.provenance.offset == 4 and image.provenance.epoch == 4
        without = load_image(log, lte=3)
        assert list(image.write())[:-1] == list(without.write())
        assert image_at(log, at_offset=3).cluster == image_at(log, at_offset=2).cluster
        assert image_at(log, at_offset=0).provenance.offset == 0
        # It belongs to no entity's history; the broker's history skips it.
        assert [e.offset for e in history(log, Entity(broker=1))] == [2, 4]


def test_history_describes_it_in_one_line() -> None:
    from replay.timetravel import Names, describe

    assert describe(MARKER, Names()) == (
        "node 1001 leads the controller quorum (voters [1000,1001,1002], granted by [1001,1002])"
    )


def test_the_audit_table_puts_it_in_leader_and_voter_columns(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    from replay.audit.columns import BlockConverter

    records = _quorum_log(tmp_path / "log")
    with LogReader.open(tmp_path / "log") as log:
        schema, count, body = log.block_bodies(start=0, last=log.end_offset - 1, max_entries=99)
    converter = BlockConverter(schema)
    builder = converter.builder()
    builder.add(count, body)
    rows = builder.finish().to_pylist()
    assert len(rows) == len(records)
    marker = rows[0]
    assert marker["record_type"] == "LeaderChangeRecord"
    assert (marker["leader"], marker["voters"], marker["granting_voters"]) == (
        1001,
        [1000, 1001, 1002],
        [1001, 1002],
    )
    assert json.loads(marker["payload"]) == record_to_json(MARKER)["data"]
    assert rows[1]["voters"] is None and rows[1]["leader"] is None


@pytest.mark.spark
def test_who_changed_describes_it(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    from replay.audit import queries
    from replay.audit.session import audit_session, read_log

    _quorum_log(tmp_path / "log")
    spark = audit_session(master="local[1]")
    try:
        rows = queries.who_changed(read_log(spark, tmp_path / "log")).collect()
    finally:
        spark.stop()
    markers = [r for r in rows if r["record_type"] == "LeaderChangeRecord"]
    assert [(r["offset"], r["entity"], r["description"]) for r in markers] == [
        (
            0,
            "controller quorum",
            "node 1001 leads the controller quorum (voters [1000,1001,1002], granted by "
            "[1001,1002])",
        ),
        (
            3,
            "controller quorum",
            "node 1000 leads the controller quorum (voters [1000,1001,1002], granted by [1000])",
        ),
    ]
