"""The state replay's check against the image, in process (`replay/audit/state.py`).

`state.image_tables` shaped as the Spark rows, the comparison and its report, a trimmed log
refused before Spark, and the documented columns.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import REPO

pytest.importorskip("pyspark")

from pyspark.errors import PySparkRuntimeError

from metadata_log import MetadataLog
from records.model import (
    ConfigRecord,
    ConfigResourceType,
    DeleteTopicPartitionsRecord,
    Mode,
    NamespaceRecord,
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
)
from records.uuids import Uuid
from replay.audit.state import (
    PARTITION_COLUMNS,
    TOPIC_COLUMNS,
    StateDifference,
    _compare,
    image_tables,
)
from replay.loader import load_image

A = Uuid(bytes(range(1, 17)))
B = Uuid(bytes(range(2, 18)))
NS = Uuid(bytes(range(3, 19)))


def test_image_tables_are_shaped_as_the_spark_rows(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path / "log") as log:
        log.append(
            [
                NamespaceRecord(namespace_id=NS, name="team"),
                TopicRecord(name="orders", topic_id=A),
                *[
                    PartitionRecord(
                        partition_id=p,
                        topic_id=A,
                        replicas=(1, 2, 3),
                        isr=(1, 2),
                        leader=1,
                        leader_epoch=4,
                        partition_epoch=5,
                    )
                    for p in range(3)
                ],
                TopicRecord(name="pay", topic_id=B, namespace="team"),
                PartitionRecord(partition_id=0, topic_id=B, replicas=(2,), isr=(2,), leader=2),
            ]
        )
        log.append(
            [
                DeleteTopicPartitionsRecord(
                    topic_id=A, partition_count=1, delete_after_ms=500, created_ms=400
                ),
                PartitionChangeRecord(partition_id=2, topic_id=A, mode=Mode.READ_ONLY),
            ]
        )
        image = load_image(log)
    topics, partitions = image_tables(image)
    assert topics == {
        str(A): {
            "topic_id": str(A),
            "topic_name": "orders",
            "namespace": "",
            "partitions": 3,
            "pending_partition_count": 1,
            "pending_delete_after_ms": 500,
            "pending_created_ms": 400,
        },
        str(B): {
            "topic_id": str(B),
            "topic_name": "pay",
            "namespace": "team",
            "partitions": 1,
            "pending_partition_count": None,
            "pending_delete_after_ms": None,
            "pending_created_ms": None,
        },
    }
    assert sorted(partitions) == [(str(A), 0), (str(A), 1), (str(A), 2), (str(B), 0)]
    # Keyed in the order of `state_at`'s columns, as docs/audit.md lists them.
    assert {tuple(row) for row in topics.values()} == {TOPIC_COLUMNS}
    assert {tuple(row) for row in partitions.values()} == {PARTITION_COLUMNS}
    assert partitions[(str(A), 2)] == {
        "topic_id": str(A),
        "topic_name": "orders",
        "namespace": "",
        "partition_id": 2,
        "replicas": [1, 2, 3],
        "isr": [1, 2],
        "removing_replicas": [],
        "adding_replicas": [],
        "leader": 1,
        "leader_epoch": 4,
        "partition_epoch": 6,
        "mode": "READ_ONLY",
    }
    assert partitions[(str(B), 0)]["namespace"] == "team"
    assert partitions[(str(B), 0)]["mode"] == "READ_WRITE"


def test_compare_reports_each_difference_once_in_key_order() -> None:
    spark = {
        "t1": {"topic_id": "t1", "topic_name": "a", "partitions": 2},
        "t2": {"topic_id": "t2", "topic_name": "b", "partitions": 1},
        "t4": {"topic_id": "t4", "topic_name": "d", "partitions": 1},
    }
    image = {
        "t1": {"topic_id": "t1", "topic_name": "a", "partitions": 3},
        "t3": {"topic_id": "t3", "topic_name": "c", "partitions": 1},
        "t4": {"topic_id": "t4", "topic_name": "d", "partitions": 1},
    }
    assert _compare("topic", spark, image) == [
        StateDifference(entity="topic t1", field="partitions", spark=2, image=3),
        StateDifference(entity="topic t2", field="exists", spark=True, image=False),
        StateDifference(entity="topic t3", field="exists", spark=False, image=True),
    ]
    assert _compare("topic", spark, spark) == []
    assert _compare("topic", {}, {}) == []


def test_compare_names_a_partition_by_topic_and_number() -> None:
    ours: dict[Any, dict[str, Any]] = {("t", 1): {"leader": 1, "isr": [1]}}
    theirs: dict[Any, dict[str, Any]] = {("t", 1): {"leader": 2, "isr": [1]}, ("t", 0): {}}
    assert _compare("partition", ours, theirs) == [
        StateDifference(entity="partition t-0", field="exists", spark=False, image=True),
        StateDifference(entity="partition t-1", field="leader", spark=1, image=2),
    ]
    # A field the Spark row lacks differs from the image's value.
    assert _compare("partition", {("t", 1): {}}, {("t", 1): {"leader": None, "isr": [1]}}) == [
        StateDifference(entity="partition t-1", field="isr", spark=None, image=[1])
    ]


def test_a_difference_reads_as_one_line() -> None:
    difference = StateDifference(entity="partition t-1", field="isr", spark=[1], image=[1, 2])
    assert difference.text() == "partition t-1: isr: spark=[1] image=[1, 2]"


# The queries refuse arguments they cannot use before building any Spark plan.
NO_LOG: Any = object()


class _Planned(Exception):
    """The query got past its checks and used the log."""


class _Log:
    """A stand-in log: any use of it means the query is being planned."""

    def __getattr__(self, name: str) -> Any:
        raise _Planned(name)


def _accepted(call: Any) -> None:
    """`call` gets past its argument checks, to planning (which fails: there is no session)."""
    with pytest.raises((_Planned, PySparkRuntimeError, AssertionError)):
        # AssertionError, PySparkRuntimeError: pyspark's own "no SparkContext" checks.
        call()


def test_the_state_of_a_trimmed_log_is_refused_before_spark(tmp_path: Path) -> None:
    from metadata_log import LogConfig
    from replay.audit.state import state_at
    from replay.errors import TrimmedLogError

    # A first entry bigger than a segment, alone in it: the log can start at offset 1, the
    # smallest trim there is. The writer stays open: the check only reads the log.
    config = LogConfig(segment_bytes=4096)
    with MetadataLog.open(tmp_path / "log", config=config) as log:
        log.append(
            [
                ConfigRecord(
                    resource_type=ConfigResourceType.TOPIC,
                    resource_name="t0",
                    name="cleanup.policy",
                    value="x" * 5000,
                )
            ]
        )
        for i in range(3):
            log.append([TopicRecord(name=f"t{i}", topic_id=Uuid(bytes([i + 5] * 16)))])
        assert log.trim_before(1)
        assert log.log_start_offset == 1
        no_spark: Any = None  # refused before any Spark call
        with pytest.raises(TrimmedLogError) as caught:
            state_at(no_spark, tmp_path / "log", 3)
    assert (caught.value.log_start, caught.value.needed) == (1, 0)
    assert "starts at offset 1 " in str(caught.value)


def test_the_state_columns_are_the_documented_ones() -> None:
    text = " ".join((REPO / "docs" / "audit.md").read_text().split())
    described = re.search(r"computes the live topics \((.*?)\) and partitions \((.*?)\)", text)
    assert described is not None
    topics, partitions = (re.findall(r"`(\w+)`", group) for group in described.groups())
    assert (tuple(topics), tuple(partitions)) == (TOPIC_COLUMNS, PARTITION_COLUMNS)
