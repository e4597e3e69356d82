"""server.properties keys of operations: `metrics.listen`, retention, snapshot cadence, segments."""

from __future__ import annotations

import pytest

from api.server.config import ServerConfigError, server_config
from api.service.archiving import DEFAULT_INTERVAL_MS, ArchiveConfig
from api.service.retention import RetentionConfig


def test_without_the_keys_no_metrics_and_no_retention() -> None:
    config = server_config({})
    assert config.metrics_listen is None
    assert config.retention == RetentionConfig()
    assert not config.retention.bounded
    assert (config.segment_bytes, config.segment_ms) == (None, None)


def test_the_kafka_keys_are_read_and_not_reported_unused() -> None:
    config = server_config(
        {
            "metrics.listen": "[::1]:9308",
            "metadata.max.retention.bytes": "262144",
            "metadata.max.retention.ms": "-1",
            "metadata.log.max.record.bytes.between.snapshots": "65536",
            "metadata.log.max.snapshot.interval.ms": "0",
            "metadata.log.segment.bytes": "65536",
            "metadata.log.segment.ms": "3600000",
        }
    )
    assert config.metrics_listen == ("::1", 9308)
    assert config.retention == RetentionConfig(
        max_bytes=262144, max_ms=-1, snapshot_bytes=65536, snapshot_interval_ms=0
    )
    assert (config.segment_bytes, config.segment_ms) == (65536, 3600000)
    assert config.notes == ()


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("metrics.listen", "9308", "is not HOST:PORT"),
        ("metrics.listen", "host:70000", "is not HOST:PORT"),
        ("metadata.max.retention.bytes", "-2", "outside -1.."),
        ("metadata.max.retention.ms", "soon", "is not an integer"),
        ("metadata.log.max.record.bytes.between.snapshots", "0", "outside 1.."),
        ("metadata.log.segment.bytes", "1000", "outside 4096.."),
        ("metadata.log.segment.ms", "0", "outside 1.."),
    ],
)
def test_bad_values_are_one_line_errors_naming_the_key(key: str, value: str, message: str) -> None:
    with pytest.raises(ServerConfigError) as caught:
        server_config({key: value})
    text = str(caught.value)
    assert text.startswith(key) and message in text and "\n" not in text


def test_the_archive_keys_are_read_with_a_default_interval() -> None:
    config = server_config({"metadata.log.archive.url": "file:///var/lib/mlog-archive"})
    assert config.archive == ArchiveConfig(url="file:///var/lib/mlog-archive")
    assert config.archive.interval_ms == DEFAULT_INTERVAL_MS
    assert not config.notes
    timed = server_config(
        {
            "metadata.log.archive.url": "/var/lib/mlog-archive",
            "metadata.log.archive.interval.ms": "500",
        }
    )
    assert timed.archive == ArchiveConfig(url="/var/lib/mlog-archive", interval_ms=500)
    assert server_config({}).archive is None


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"metadata.log.archive.url": "ftp://host/x"}, "scheme 'ftp' is not one of"),
        ({"metadata.log.archive.url": "file://relative/x"}, "needs an absolute path"),
        ({"metadata.log.archive.url": "s3://"}, "names no bucket"),
        ({"metadata.log.archive.url": "memory://x"}, "memory only"),
        (
            {"metadata.log.archive.url": "/a", "metadata.log.archive.interval.ms": "0"},
            "outside 100..",
        ),
        ({"metadata.log.archive.interval.ms": "1000"}, "set without metadata.log.archive.url"),
    ],
)
def test_a_bad_archive_key_is_one_line_naming_it(values: dict[str, str], message: str) -> None:
    with pytest.raises(ServerConfigError, match=message) as raised:
        server_config(values)
    assert "\n" not in str(raised.value)
    assert "metadata.log.archive" in str(raised.value)
