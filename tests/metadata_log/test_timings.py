"""The log's write and fsync timings: bucket counts as Prometheus reads them."""

from __future__ import annotations

from pathlib import Path

from metadata_log.log import MetadataLog
from metadata_log.timings import LATENCY_BUCKETS, LatencyCounts
from records import TopicRecord
from records.uuids import Uuid


def test_durations_land_in_their_buckets_cumulatively() -> None:
    counts = LatencyCounts()
    for seconds in (0.00005, 0.0001, 0.003, 7.0):
        counts.observe(seconds)
    buckets = dict(counts.cumulative())
    assert buckets["0.0001"] == 2  # an upper bound is inclusive
    assert buckets["0.0025"] == 2 and buckets["0.005"] == 3
    assert buckets[str(LATENCY_BUCKETS[-1])] == 3 and buckets["+Inf"] == 4
    assert counts.count == 4 and abs(counts.total_seconds - 7.00315) < 1e-9


def test_each_durable_append_is_one_write_and_one_fsync(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path / "log") as log:
        for name in ("a", "b", "c"):
            log.append([TopicRecord(name=name, topic_id=Uuid.random())])
        assert log.timings.append.count == 3
        assert log.timings.fsync.count == 3
        assert log.timings.fsync.total_seconds <= log.timings.append.total_seconds
