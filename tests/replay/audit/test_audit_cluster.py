"""Audits on a real Spark standalone cluster, reading an archive served over S3.

A master and two workers started from PySpark's own launch classes on 127.0.0.1
(tests/support/spark_cluster.py), executors in processes of their own, and moto's S3 server
(tests/support/s3_endpoint.py): `mlog audit shell --archive-url s3://... --master spark://...`
must answer as `mlog audit shell --data-dir ... --master local[2]` does on the log directory
the archive was made from. The workers are given no S3 credentials: the executors get them
from the audit (`spark.executorEnv.*`), and read the objects themselves, with no mount.

Spark starts three times in all (the cluster's daemons, then one driver per shell), each
`mlog` a child process as a user runs it; the queries share each shell's session.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from metadata_log import LogConfig, MetadataLog
from metadata_log.archive import ArchiveLocation, SegmentArchiver
from metadata_log.reader import LogReader
from records.model import (
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from records.uuids import Uuid
from tests.support.archives import SMALL_SEGMENTS
from tests.support.paths import REPO
from tests.support.s3_endpoint import S3Endpoint, environment
from tests.support.spark_cluster import SparkCluster, group_alive

pytestmark = [pytest.mark.process, pytest.mark.spark]

WAIT = 900.0
"""Seconds a shell may take for all its queries (JVM starts on a loaded 2-core machine)."""
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
HOUR = 3_600_000
TOPICS = 30


def write_story(directory: Path) -> None:
    """Topics created, changed and some deleted over three days, by alice and bob.

    Small segments: the log is a few dozen segments, so the archive is too.
    """
    now = [T0]
    with MetadataLog.open(directory, config=SMALL_SEGMENTS, clock_ms=lambda: now[0]) as log:
        log.append([FeatureLevelRecord(name="metadata.version", feature_level=1)])
        for n in range(TOPICS):
            now[0] = T0 + n * 3 * HOUR
            topic_id = Uuid(bytes([n + 1]) * 16)
            principal = "User:alice" if n % 2 else "User:bob"
            log.append(
                [
                    TopicRecord(name=f"t{n}", topic_id=topic_id),
                    *(
                        PartitionRecord(
                            partition_id=p, topic_id=topic_id, replicas=(1, 2), isr=(1, 2), leader=1
                        )
                        for p in range(3)
                    ),
                ],
                principal=principal,
            )
            for p in range(3):
                log.append(
                    [PartitionChangeRecord(partition_id=p, topic_id=topic_id, isr=(1,))],
                    principal="User:controller",
                )
            log.append(
                [
                    ConfigRecord(
                        resource_type=ConfigResourceType.TOPIC,
                        resource_name=f"t{n}",
                        name="retention.ms",
                        value=random.Random(n).randbytes(300).hex(),  # many segments
                    )
                ],
                principal=principal,
            )
            if n % 5 == 4:
                log.append([RemoveTopicRecord(topic_id=topic_id)], principal="User:alice")


@pytest.fixture(scope="module")
def cluster() -> Iterator[SparkCluster]:
    started = SparkCluster.start(workers=2)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def story(
    tmp_path_factory: pytest.TempPathFactory, s3_endpoint: S3Endpoint
) -> tuple[Path, str, int]:
    """(data directory, S3 archive URL of the same entries, the log's last offset).

    The archive is made from a copy of the log whose last segment was sealed by one more
    entry (archives hold sealed segments only): it holds exactly the data directory's entries.
    """
    base = tmp_path_factory.mktemp("audit-cluster")
    write_story(base / "data" / "log")
    sealed = base / "sealed"
    shutil.copytree(base / "data" / "log", sealed)
    time.sleep(0.01)
    with MetadataLog.open(sealed, config=LogConfig(segment_ms=1)) as log:
        log.append([FeatureLevelRecord(name="test.sealed", feature_level=1)])
    url = s3_endpoint.archive_url("audit-cluster")
    with environment(s3_endpoint.env):
        archiver = SegmentArchiver(
            ArchiveLocation.open(url), cluster_id="audit-cluster", work_dir=base / "work"
        )
        with LogReader.open(sealed) as log:
            report = archiver.archive(log, committed_end=log.end_offset)
    with LogReader.open(base / "data" / "log") as log:
        end = log.end_offset
    assert report.archived_end == end and len(report.uploaded) > 10
    return base / "data", url, end - 1


def _shell(script: str, *argv: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """`mlog audit shell ARGV` started with `script` on its stdin (read it with `_outcome`)."""
    with tempfile.TemporaryFile("w+") as stdin:
        stdin.write(script)
        stdin.seek(0)
        return subprocess.Popen(
            [sys.executable, "-m", "api.cli", "audit", "shell", *argv],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )


def _outcome(child: subprocess.Popen[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of a shell once it ends."""
    try:
        out, err = child.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        pytest.fail(f"the audit shell did not end within {WAIT:g} s: {err[-3000:]}")
    return child.returncode, out, err


def test_the_cluster_reading_the_archive_on_s3_answers_as_local_spark_on_the_directory(
    cluster: SparkCluster, story: tuple[Path, str, int], s3_endpoint: S3Endpoint
) -> None:
    data_dir, url, last = story
    script = "\n".join(
        [
            "who-changed --principal User:alice",
            "topic-lifecycle --topic t4",
            "churn --by day",
            f"state --at-offset {last} --check",
            "SELECT count(*) AS entries, min(offset), max(offset) FROM metadata_log",
            "SELECT principal, count(*) FROM metadata_log GROUP BY principal ORDER BY principal",
            "SELECT no_such_column FROM metadata_log",
        ]
    )
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SPARK_LOCAL_IP"))}
    base_env.update(PYTHONPATH=str(REPO), SPARK_LOCAL_IP="127.0.0.1")
    # Both at once: each mostly waits on its JVM's start and its Spark jobs.
    local_shell = _shell(script, "--data-dir", str(data_dir), "--master", "local[2]", env=base_env)
    remote_shell = _shell(
        script,
        "--archive-url",
        url,
        "--master",
        cluster.master_url,
        *(arg for k, v in cluster.conf.items() for arg in ("--conf", f"{k}={v}")),
        env={**base_env, **s3_endpoint.env},
    )
    local, remote = _outcome(local_shell), _outcome(remote_shell)
    for code, _, err in (local, remote):
        # The unknown column is the one failed line (exit 2 for a script with a failure):
        # Spark's message in one line, no JVM stack, no Python traceback.
        assert code == 2, err[-3000:]
        errors = [line for line in err.splitlines() if line.startswith("mlog: error:")]
        assert len(errors) == 1 and "UNRESOLVED_COLUMN" in errors[0], err[-3000:]
        assert "\tat " not in err and "Traceback" not in err, err[-3000:]
    assert remote[1] == local[1]
    answer = remote[1]
    assert "the Spark replay matches the image" in answer
    assert "hash chain: intact" in answer
    assert f"{last + 1}" in answer and "User:alice" in answer and "t4" in answer
    assert "on the archive s3://" in remote[2]
    # The executors were processes the workers started, not threads of the driver.
    assert cluster.executor_logs()


def test_the_cluster_stops_whole(cluster: SparkCluster) -> None:
    groups = cluster.process_groups
    assert all(group_alive(g) for g in groups)
    cluster.stop()
    assert not any(group_alive(g) for g in groups)
