"""Logs written before a record type existed stay readable, and new types land in new segments."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, cast

import fastavro
import pytest

from metadata_log import MetadataLog
from metadata_log.reader import LogReader
from records.codec import DEFAULT_CODEC, RecordCodec
from records.model import (
    RECORD_CLASSES,
    FeatureLevelRecord,
    MoveTopicRecord,
    NamespaceRecord,
    PurgeTopicPartitionsRecord,
    Record,
    TopicRecord,
)
from records.schemas import CURRENT_SCHEMAS
from records.uuids import Uuid

NEW_TYPES = (MoveTopicRecord, PurgeTopicPartitionsRecord)
"""The record types the namespaces issue added (RECORD_TYPE 103 and 104)."""

_FIRST_NEW = RECORD_CLASSES.index(NEW_TYPES[0])
OLD_CODEC = RecordCodec(
    [s for s in CURRENT_SCHEMAS if RECORD_CLASSES.index(s.python_class) < _FIRST_NEW]
)
"""The codec as it was before those types: the union without their branches (or later ones)."""

NS = Uuid.random()
TOPIC = Uuid.random()
OLD_RECORDS: list[Record] = [
    FeatureLevelRecord(name="metadata.version", feature_level=1),
    NamespaceRecord(namespace_id=NS, name="org"),
    TopicRecord(name="t", topic_id=TOPIC, namespace="org"),
]


def test_new_types_have_new_numbers_at_the_end_of_the_union() -> None:
    assert [c.RECORD_TYPE for c in NEW_TYPES] == [103, 104]
    assert RECORD_CLASSES[_FIRST_NEW : _FIRST_NEW + 2] == NEW_TYPES
    # Types added since come after them, with numbers of their own.
    assert [c.RECORD_TYPE for c in RECORD_CLASSES[_FIRST_NEW + 2 :]] == [
        105,
        11,
        22,
        23,
        24,
        106,
        107,
        108,
        109,
    ]
    old_branches = [s.branch_name for s in OLD_CODEC.schemas]
    assert [s.branch_name for s in DEFAULT_CODEC.schemas][: len(old_branches)] == old_branches


def test_an_old_log_is_read_and_appended_to_through_a_new_segment(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    with MetadataLog.open(directory, codec=OLD_CODEC) as old:
        old.append(OLD_RECORDS)
    first = directory / "00000000000000000000.avro"
    old_bytes = first.read_bytes()

    # Today's code reads the old segment with the schema in its header.
    with LogReader.open(directory) as reader:
        assert [e.record for e in reader.read()] == OLD_RECORDS

    # Writing a new type goes to a new segment, whose header carries today's schema.
    move = MoveTopicRecord(topic_id=TOPIC, namespace="")
    with MetadataLog.open(directory) as writer:
        writer.append([move])
    assert first.read_bytes() == old_bytes
    second = directory / "00000000000000000003.avro"
    assert second.exists()
    with LogReader.open(directory) as reader:
        assert [e.record for e in reader.read()] == [*OLD_RECORDS, move]

    # Any Avro tool reads both segments: each block is written with its file's own schema.
    assert [v["record"][1]["name"] for v in avro_values(first)][1:] == ["org", "t"]
    (value,) = avro_values(second)
    assert value["offset"] == 3 and value["record"][0] == "mlog.MoveTopicRecordV0"

    # A writer of today's schema does not roll again on the next open.
    with MetadataLog.open(directory) as writer:
        writer.append([PurgeTopicPartitionsRecord(topic_id=TOPIC, partition_count=1)])
    assert sorted(p.name for p in directory.glob("*.avro")) == [first.name, second.name]


def test_an_empty_old_segment_is_started_over_with_the_new_schema(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    with MetadataLog.open(directory, codec=OLD_CODEC):
        pass  # created the first segment, header only
    with MetadataLog.open(directory) as writer:
        writer.append([*OLD_RECORDS, MoveTopicRecord(topic_id=TOPIC, namespace="")])
    assert [p.name for p in directory.glob("*.avro")] == ["00000000000000000000.avro"]
    assert len(avro_values(directory / "00000000000000000000.avro")) == 4


def test_an_empty_old_segment_after_another_is_started_over_linked_to_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A writer of a newer schema rolls to an empty segment; one newer still starts it over."""
    older = RecordCodec(
        [s for s in CURRENT_SCHEMAS if RECORD_CLASSES.index(s.python_class) < _FIRST_NEW - 1]
    )
    directory = tmp_path / "log"
    with MetadataLog.open(directory, codec=older) as log:
        log.append(OLD_RECORDS[:1])
    with (
        caplog.at_level(logging.INFO, logger="metadata_log"),
        MetadataLog.open(directory, codec=OLD_CODEC),
    ):
        pass  # rolls: a second segment, empty, of OLD_CODEC's schema
    assert "the record schema changed; starting a new segment" in caplog.messages
    second = directory / "00000000000000000001.avro"
    assert avro_values(second) == []
    move = MoveTopicRecord(topic_id=TOPIC, namespace="")
    with MetadataLog.open(directory) as writer:
        writer.append([move])
    assert sorted(p.name for p in directory.glob("*.avro")) == [
        "00000000000000000000.avro",
        second.name,
    ]
    (value,) = avro_values(second)
    assert value["record"][0] == "mlog.MoveTopicRecordV0"
    with LogReader.open(directory) as reader:
        assert [e.record for e in reader.read()] == [OLD_RECORDS[0], move]
        assert reader.verify().ok  # the segment started over is chained to the one before


def avro_values(path: Path) -> list[dict[str, Any]]:
    """The entries of a segment as fastavro reads them, union branches named."""
    with path.open("rb") as f:
        return [cast(dict[str, Any], v) for v in fastavro.reader(f, return_record_name=True)]
