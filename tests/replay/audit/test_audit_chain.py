"""The Spark audit's check of the hash chain: parallel over segments, the first break named."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from metadata_log import LogConfig, MetadataLog
from metadata_log.config import MIN_SEGMENT_BYTES
from metadata_log.segment import segment_name
from records import PartitionRecord, TopicRecord
from records.uuids import Uuid
from replay.audit.chain import audit_chain
from replay.audit.session import audit_session
from tests.support.chain_attacks import rename_topic, rewrite_entries
from tests.support.cli import mlog

pytestmark = [pytest.mark.spark, pytest.mark.timeout(func_only=True)]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    session = audit_session(master="local[2]")
    yield session
    session.stop()


def test_the_audit_checks_the_chain_and_names_the_first_break(spark: Any, tmp_path: Path) -> None:
    directory = tmp_path / "log"
    with MetadataLog.open(directory, config=LogConfig(segment_bytes=MIN_SEGMENT_BYTES)) as log:
        for i in range(8):
            log.append([TopicRecord(name=f"t{i}", topic_id=Uuid(uuid.uuid4().bytes))])
        expected = log.digest(5)
    clean = audit_chain(spark, directory, 5)
    assert clean.ok and clean.segments == 8 and clean.blocks == 8
    assert clean.digest == expected
    edited = tmp_path / "edited"
    shutil.copytree(directory, edited)
    rewrite_entries(edited / segment_name(3), rename_topic("t3", "zz"))
    rewrite_entries(edited / segment_name(6), rename_topic("t6", "yy"))
    broken = audit_chain(spark, edited)
    assert not broken.ok
    assert broken.first_break == 3
    assert "offsets 3..3" in broken.reason


def test_audit_state_check_reports_the_chain_and_the_digest(spark: Any, tmp_path: Path) -> None:
    with MetadataLog.open(
        tmp_path / "log", config=LogConfig(segment_bytes=MIN_SEGMENT_BYTES)
    ) as log:
        for i in range(4):
            topic_id = Uuid(uuid.uuid4().bytes)
            log.append(
                [
                    TopicRecord(name=f"t{i}", topic_id=topic_id),
                    PartitionRecord(
                        partition_id=0,
                        topic_id=topic_id,
                        replicas=(1,),
                        isr=(1,),
                        removing_replicas=(),
                        adding_replicas=(),
                    ),
                ]
            )
        token = log.digest(5).token()
    code, text = mlog(tmp_path, "audit", "state", "--at-offset", "5", "--check")
    assert code == 0, text
    assert "hash chain: intact over 4 blocks" in text
    assert f"digest at offset 5: {token}" in text
    rewrite_entries(tmp_path / "log" / segment_name(2), rename_topic("t1", "zz"))
    code, text = mlog(tmp_path, "audit", "state", "--at-offset", "5", "--check")
    assert code == 1 and "BROKEN at offset 2" in text
