"""Audit in PySpark: the data source, the named queries, the Spark state replay, the CLI.

One real local SparkSession for the module. The log is written record by record with a test
clock (an hour per append), so every row the queries return is known in advance.
"""

from __future__ import annotations

import base64
import io
import json
import os
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from api.cli.main import main
from metadata_log import LogConfig, MetadataLog
from metadata_log.archive import ArchiveLocation, SegmentArchiver
from metadata_log.reader import LogReader
from records.json_form import record_to_json
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    ClientWriteRecord,
    ConfigRecord,
    ConfigResourceType,
    DeleteTopicPartitionsRecord,
    FeatureLevelRecord,
    Mode,
    MoveTopicRecord,
    NamespaceRecord,
    PartitionChangeRecord,
    PatternType,
    PurgeTopicPartitionsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    ResourceType,
    ScramMechanism,
    TopicRecord,
    UserScramCredentialRecord,
)
from records.uuids import Uuid
from replay.audit import queries
from replay.audit.access import ACCESS_COLUMNS, access_changes
from replay.audit.errors import AuditSqlError
from replay.audit.session import _log4j_config, audit_session, parse_in_jvm, read_log
from replay.audit.sql_check import STATEMENT_WORDS, precheck
from replay.audit.state import PARTITION_COLUMNS, TOPIC_COLUMNS, compare_with_image, state_at
from tests.support.record_gen import partition_record
from tests.support.sql_backends import write_generated_log
from tests.support.timetravel_logs import acl

# One local Spark session for the module: every test here needs the JVM. A per-test timeout
# (`make mutate`) times the test, not the module's session start: the first test of a run starts
# the JVM (tens of seconds on a busy machine), whichever test that is.
pytestmark = [pytest.mark.spark, pytest.mark.timeout(func_only=True)]

T0 = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
HOUR = 3_600_000
A = Uuid(bytes(range(1, 17)))  # orders, first incarnation
B = Uuid(bytes(range(2, 18)))  # orders, second incarnation
P = Uuid(bytes(range(3, 19)))  # team:payments
NS = Uuid(bytes(range(4, 20)))


# (principal, records); append i happens at T0 + i hours.
STORY: list[tuple[str, list[Record]]] = [
    (
        "admin",
        [
            FeatureLevelRecord(name="metadata.version", feature_level=1),
            *[
                RegisterBrokerRecord(
                    broker_id=b,
                    incarnation_id=Uuid(bytes([b + 1] * 16)),
                    broker_epoch=b,
                    fenced=False,
                )
                for b in range(3)
            ],
        ],
    ),
    ("admin", [NamespaceRecord(namespace_id=NS, name="team")]),
    (
        "alice",
        [
            TopicRecord(name="orders", topic_id=A),
            *[partition_record(A, p, (1, 0)) for p in range(3)],
        ],
    ),
    (
        "bob",
        [
            TopicRecord(name="payments", topic_id=P, namespace="team"),
            *[partition_record(P, p, (1, 2)) for p in range(2)],
        ],
    ),
    ("alice", [PartitionChangeRecord(partition_id=0, topic_id=A, isr=(1,))]),
    ("controller", [PartitionChangeRecord(partition_id=0, topic_id=A, leader=1)]),
    (
        "alice",
        [
            ConfigRecord(
                resource_type=ConfigResourceType.TOPIC,
                resource_name="orders",
                name="retention.ms",
                value="1000",
            )
        ],
    ),
    ("bob", [RemoveTopicRecord(topic_id=A)]),
    (
        "carol",
        [
            TopicRecord(name="orders", topic_id=B),
            *[partition_record(B, p, (2, 0)) for p in range(4)],
        ],
    ),
    (
        "carol",
        [
            DeleteTopicPartitionsRecord(
                topic_id=B,
                partition_count=2,
                delete_after_ms=T0 + 20 * HOUR,
                created_ms=T0 + 9 * HOUR,
            ),
            *[
                PartitionChangeRecord(partition_id=p, topic_id=B, mode=Mode.READ_ONLY)
                for p in (2, 3)
            ],
        ],
    ),
    (
        "controller",
        [PartitionChangeRecord(partition_id=p, topic_id=B, mode=Mode.NONE) for p in (2, 3)],
    ),
    ("controller", [PurgeTopicPartitionsRecord(topic_id=B, partition_count=2)]),
    ("carol", [partition_record(B, 2, (0, 1))]),
    ("bob", [MoveTopicRecord(topic_id=P, namespace="")]),
    ("bob", [PartitionChangeRecord(partition_id=1, topic_id=P, partition_epoch=7)]),
    ("bob", [PartitionChangeRecord(partition_id=1, topic_id=P, isr=(2,), leader=2)]),
]


def _last_offsets() -> list[int]:
    """The offset of the last entry of each append of STORY."""
    out, end = [], -1
    for _, records in STORY:
        end += len(records)
        out.append(end)
    return out


LAST = _last_offsets()


def write_story(log_dir: Path, appends: int | None = None) -> None:
    now = [T0]

    def clock() -> int:
        return now[0]

    with MetadataLog.open(log_dir, clock_ms=clock) as log:
        for i, (principal, records) in enumerate(STORY[:appends]):
            now[0] = T0 + i * HOUR
            log.append(records, principal=principal)


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    session = audit_session(master="local[2]")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("audit")
    write_story(data_dir / "log")
    return data_dir


# ---------------------------------------------------------------------- the session


def test_the_session_is_set_up_for_audits(spark: Any) -> None:
    """What `audit_session` promises (docs/audit.md): UTC, few shuffle partitions, quiet, ..."""
    assert spark.sparkContext.master == "local[2]"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"
    assert spark.conf.get("spark.sql.python.filterPushdown.enabled") == "true"
    started = spark.sparkContext.getConf()
    assert started.get("spark.app.name") == "mlog audit"
    assert started.get("spark.ui.enabled") == "false"
    assert started.get("spark.ui.showConsoleProgress") == "false"
    assert started.get("spark.driver.memory") == "4g"
    assert started.get("spark.sql.inMemoryColumnarStorage.compressed") == "false"
    for side in ("driver", "executor"):
        options = started.get(f"spark.{side}.extraJavaOptions")
        assert "-Dlog4j2.configurationFile=file:" + _log4j_config() in options.split()
    # The JVM was started here with its stderr piped (to drop Spark's banners), not by PySpark.
    assert spark.sparkContext._gateway.proc.stderr is not None
    # The workers run this interpreter, on the loopback interface.
    assert os.environ["PYSPARK_PYTHON"] and os.environ["PYSPARK_DRIVER_PYTHON"]
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"
    # `conf` entries come last: they override the defaults (the same session, reconfigured),
    # and a running JVM whose logging was turned up logs errors only again.
    root = spark.sparkContext._jvm.org.apache.logging.log4j.LogManager.getRootLogger()
    spark.sparkContext.setLogLevel("INFO")
    assert root.getLevel().toString() == "INFO"
    again = audit_session(master="local[2]", conf={"spark.sql.shuffle.partitions": "3"})
    try:
        assert again.conf.get("spark.sql.shuffle.partitions") == "3"
        assert root.getLevel().toString() == "ERROR"
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "4")
        spark.sparkContext.setLogLevel("ERROR")


# ---------------------------------------------------------------------- the data source


def test_every_entry_has_its_columns_and_payload(spark: Any, story: Path) -> None:
    rows = read_log(spark, story / "log").orderBy("offset").collect()
    with LogReader.open(story / "log") as log:
        entries = list(log.read())
    assert [r["offset"] for r in rows] == [e.offset for e in entries]
    for row, entry in zip(rows, entries, strict=True):
        assert row["record_type"] == type(entry.record).__name__
        assert json.loads(row["payload"]) == record_to_json(entry.record)["data"]
        assert row["principal"] == entry.principal
        assert int(row["timestamp"].timestamp() * 1000) == entry.timestamp
    topic = rows[LAST[1] + 1]
    assert (topic["topic_id"], topic["topic_name"], topic["namespace"]) == (str(A), "orders", "")
    change = rows[LAST[4]]
    assert change["isr"] == [1] and change["leader"] is None and change["mode"] is None
    leader = rows[LAST[5]]
    assert leader["leader"] == 1 and leader["isr"] is None
    unpaid = read_log(spark, story / "log", payload=False).where("offset < 3").collect()
    assert [r["payload"] for r in unpaid] == [None] * 3 and unpaid[0]["feature_level"] == 1
    config = rows[LAST[6]]
    assert (config["resource_type"], config["resource_name"], config["config_name"]) == (
        "TOPIC",
        "orders",
        "retention.ms",
    )
    assert config["config_value"] == "1000"


def test_offset_filters_are_pushed_down_and_exact(spark: Any, story: Path) -> None:
    frame = read_log(spark, story / "log")
    assert [r[0] for r in frame.where("offset > 3 AND offset <= 6").select("offset").collect()] == [
        4,
        5,
        6,
    ]
    assert frame.where("offset = 0").count() == 1
    assert frame.count() == LAST[-1] + 1  # the pushed bounds do not stick to the frame
    plan = frame.where("offset < 5")._jdf.queryExecution().executedPlan().toString()
    assert "offset" in plan
    since = datetime.fromtimestamp((T0 + 9 * HOUR) / 1000, tz=UTC)
    assert frame.where(frame.timestamp >= since).count() == LAST[-1] - LAST[8]


def test_split_spans_read_the_same_rows(spark: Any, tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    with MetadataLog.open(log_dir) as log:
        for i in range(300):
            log.append([TopicRecord(name=f"t{i}", topic_id=Uuid.random())], principal="p")
    from pyspark.sql import functions as F

    with LogReader.open(log_dir) as log:
        assert len(log.read_spans(split_bytes=2048)) > 1
    frame = spark.read.format("metadata_log").option("splitBytes", "2048").load(str(log_dir))
    assert frame.select(F.spark_partition_id()).distinct().count() > 1
    assert sorted(r[0] for r in frame.select("offset").collect()) == list(range(300))


def test_reads_a_log_being_appended_to(spark: Any, tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    stop = threading.Event()
    with MetadataLog.open(log_dir) as log:
        log.append([TopicRecord(name="first", topic_id=Uuid.random())])

        def writer() -> None:
            i = 0
            while not stop.is_set():
                log.append([TopicRecord(name=f"t{i}", topic_id=Uuid.random()) for _ in range(1)])
                i += 1

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            for _ in range(3):
                offsets = [r[0] for r in read_log(spark, log_dir).select("offset").collect()]
                # Whatever was committed when the read was planned, densely from 0.
                assert sorted(offsets) == list(range(len(offsets)))
        finally:
            stop.set()
            thread.join()
        end = log.end_offset
    # A torn tail (half-written block) is not read: only complete, CRC-checked blocks are.
    segment = sorted(log_dir.glob("*.avro"))[-1]
    with open(segment, "ab") as f:
        f.write(b"\x02\x80\x01" + os.urandom(40))
    assert read_log(spark, log_dir).count() == end


# ---------------------------------------------------------------------- named queries


def test_topic_lifecycle(spark: Any, story: Path) -> None:
    rows = queries.topic_lifecycle(read_log(spark, story / "log"), "orders").collect()
    assert [r["topic_id"] for r in rows] == [str(A), str(B)]
    first, second = rows
    assert (first["created_by"], first["deleted_by"]) == ("alice", "bob")
    assert first["created"] == datetime(2026, 1, 1, 2, tzinfo=UTC).replace(tzinfo=None) or (
        first["created"].hour == 2
    )
    # One entry per command: the create's three PartitionRecords share its timestamp.
    assert [p["partitions"] for p in first["partition_counts"]] == [3]
    assert second["deleted"] is None and second["created_by"] == "carol"
    # 4 partitions, reduced to 2, then one added back.
    assert [p["partitions"] for p in second["partition_counts"]] == [4, 2, 3]


def test_topic_lifecycle_matches_a_plain_reference_on_a_generated_log(
    spark: Any, tmp_path: Path
) -> None:
    # Several names per namespace, re-created names, moves: each name's incarnations are its
    # TopicRecords (of that name, in that namespace) and their removals, nothing else.
    write_generated_log(tmp_path / "log", seed=21, batches=250)
    created: dict[tuple[str, str], list[str]] = {}
    deleted: set[str] = set()
    with LogReader.open(tmp_path / "log") as log:
        for entry in log.read():
            record = entry.record
            if isinstance(record, TopicRecord):
                key = (record.namespace, record.name)
                created.setdefault(key, []).append(str(record.topic_id))
            elif isinstance(record, RemoveTopicRecord):
                deleted.add(str(record.topic_id))
    frame = read_log(spark, tmp_path / "log")
    busiest = max(created, key=lambda k: (len(created[k]), k))
    namesakes = [k for k in created if k[0] == busiest[0]]
    assert len(created[busiest]) >= 2 and len(namesakes) >= 2
    for namespace, name in {busiest, *namesakes[:2]}:
        topic = f"{namespace}:{name}" if namespace else name
        rows = queries.topic_lifecycle(frame, topic).collect()
        assert [(r["topic_id"], r["namespace"], r["deleted"] is not None) for r in rows] == [
            (tid, namespace, tid in deleted) for tid in created[(namespace, name)]
        ], topic


def test_who_changed(spark: Any, story: Path) -> None:
    log = read_log(spark, story / "log")
    bob = queries.who_changed(log, principal="bob").collect()
    assert [r["record_type"] for r in bob] == [
        "TopicRecord",
        "PartitionRecord",
        "PartitionRecord",
        "RemoveTopicRecord",
        "MoveTopicRecord",
        "PartitionChangeRecord",
        "PartitionChangeRecord",
    ]
    assert bob[3]["entity"] == "topic orders" and bob[3]["description"] == "deleted topic orders"
    assert bob[-1]["description"] == "partition team:payments-1: leader -> 2, isr -> [2]"
    window = queries.who_changed(log, since_ms=T0 + 4 * HOUR, until_ms=T0 + 6 * HOUR).collect()
    assert [r["offset"] for r in window] == [LAST[4], LAST[5], LAST[6]]
    assert window[2]["description"] == "config topic orders: retention.ms=1000"


def test_partition_modes(spark: Any, story: Path) -> None:
    rows = queries.partition_modes(read_log(spark, story / "log"), topic="orders").collect()
    events = [(r["topic_id"] == str(B), r["event"], r["partition_id"], r["mode"]) for r in rows]
    b_events = [e[1:] for e in events if e[0]]
    # The first incarnation's ISR and leader changes set no mode: not events here.
    assert [e[1:] for e in events if not e[0]] == [("mode", p, "READ_WRITE") for p in range(3)]
    assert b_events == [
        ("mode", 0, "READ_WRITE"),
        ("mode", 1, "READ_WRITE"),
        ("mode", 2, "READ_WRITE"),
        ("mode", 3, "READ_WRITE"),
        ("reduce", None, None),
        ("mode", 2, "READ_ONLY"),
        ("mode", 3, "READ_ONLY"),
        ("mode", 2, "NONE"),
        ("mode", 3, "NONE"),
        ("purge", None, None),
        ("mode", 2, "READ_WRITE"),
    ]
    reduce = next(r for r in rows if r["event"] == "reduce")
    assert reduce["partition_count"] == 2 and reduce["purge_at"].hour == 20


def test_churn(spark: Any, story: Path) -> None:
    rows = queries.churn(read_log(spark, story / "log"), by="day").collect()
    got = {r["namespace"]: (r["creates"], r["deletes"], r["partition_changes"]) for r in rows}
    assert got == {"": (2, 1, 6), "team": (1, 0, 2)}
    hourly = queries.churn(read_log(spark, story / "log"), by="hour").collect()
    assert sum(r["creates"] for r in hourly) == 3 and len(hourly) > len(rows)
    with pytest.raises(queries.AuditQueryError):
        queries.churn(read_log(spark, story / "log"), by="week")


# ---------------------------------------------------------------------- state replay


@pytest.mark.parametrize(
    "append", [5, 7, 8, 9, 11, len(STORY) - 1], ids=lambda i: f"after-append-{i}"
)
def test_state_matches_the_image(spark: Any, story: Path, append: int) -> None:
    assert compare_with_image(spark, story / "log", LAST[append]) == []


def _cached_rdds(spark: Any) -> int:
    return int(spark.sparkContext._jsc.getPersistentRDDs().size())


def test_state_matches_the_image_on_a_generated_log(spark: Any, tmp_path: Path) -> None:
    """Random valid histories (moves, purges, namespace removals, re-creations) agree too.

    With a writer holding the log open (the audit only reads it), and leaving no cached scan.
    """
    end = write_generated_log(tmp_path / "log", seed=21, batches=250)
    cached = _cached_rdds(spark)
    with MetadataLog.open(tmp_path / "log"):
        for offset in (end // 3, end - 1):
            assert compare_with_image(spark, tmp_path / "log", offset) == []
    assert _cached_rdds(spark) == cached


def test_state_over_an_archive_matches_the_image(spark: Any, tmp_path: Path) -> None:
    """`state_at` reads an archive URL as it reads the log directory (one sorted scan)."""
    end = write_generated_log(tmp_path / "log", seed=21, batches=250)
    time.sleep(0.01)
    with MetadataLog.open(tmp_path / "log", config=LogConfig(segment_ms=1)) as log:
        log.append([FeatureLevelRecord(name="test.sealed", feature_level=1)])  # seals the rest
    url = (tmp_path / "archive").as_uri()
    archiver = SegmentArchiver(
        ArchiveLocation.open(url), cluster_id="state-test", work_dir=tmp_path / "work"
    )
    with LogReader.open(tmp_path / "log") as log:
        assert archiver.archive(log, committed_end=log.end_offset).archived_end == end
    for offset in (end // 3, end - 1):
        assert compare_with_image(spark, url, offset, image_from=tmp_path / "log") == []


def test_state_matches_the_image_with_cancelled_deletions(spark: Any, tmp_path: Path) -> None:
    """A cancelled partition deletion is no longer pending, and its partitions stay."""
    end = write_generated_log(tmp_path / "log", seed=21, batches=250, cancels=True)
    with LogReader.open(tmp_path / "log") as log:
        kinds = {type(e.record).__name__ for e in log.read()}
    assert "CancelTopicPartitionsDeletionRecord" in kinds
    for offset in (end // 3, end - 1):
        assert compare_with_image(spark, tmp_path / "log", offset) == []


def test_state_content(spark: Any, story: Path) -> None:
    state = state_at(spark, story / "log", LAST[-1])
    assert (state.topics.columns, state.partitions.columns) == (
        list(TOPIC_COLUMNS),
        list(PARTITION_COLUMNS),
    )
    topics = {r["topic_id"]: r for r in state.topics.collect()}
    parts = {(r["topic_id"], r["partition_id"]): r for r in state.partitions.collect()}
    assert all(frame.is_cached for frame in state.cached)
    state.release()
    assert not any(frame.is_cached for frame in state.cached)
    assert set(topics) == {str(B), str(P)}
    assert topics[str(P)]["namespace"] == "" and topics[str(B)]["partitions"] == 3
    p1 = parts[(str(P), 1)]
    assert (p1["isr"], p1["leader"], p1["leader_epoch"], p1["partition_epoch"]) == ([2], 2, 1, 8)
    assert parts[(str(B), 2)]["mode"] == "READ_WRITE" and (str(B), 3) not in parts


def test_a_topic_before_its_partitions_has_none(spark: Any, story: Path) -> None:
    # At the offset of the second incarnation's TopicRecord, before its command's
    # PartitionRecords: a live topic with 0 partitions (not null), as the image has it.
    created = LAST[7] + 1
    state = state_at(spark, story / "log", created)
    try:
        row = next(r for r in state.topics.collect() if r["topic_id"] == str(B))
    finally:
        state.release()
    assert row["partitions"] == 0
    assert compare_with_image(spark, story / "log", created) == []


# ---------------------------------------------------------------------- CLI


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def test_cli_queries(spark: Any, story: Path, tmp_path: Path) -> None:
    d = str(story)
    code, text = run("audit", "topic-lifecycle", "--topic", "orders", "--data-dir", d)
    assert code == 0 and str(A) in text and str(B) in text
    code, text = run(
        "audit", "who-changed", "--principal", "carol", "--data-dir", d, "--output", "json"
    )
    lines = [json.loads(line) for line in text.splitlines()]
    assert code == 0 and {row["principal"] for row in lines} == {"carol"} and len(lines) == 9
    code, text = run(
        "audit", "partition-modes", "--data-dir", d, "--output", "parquet", str(tmp_path / "m")
    )
    assert code == 0 and spark.read.parquet(str(tmp_path / "m")).count() > 0
    code, text = run("audit", "churn", "--by", "hour", "--data-dir", d)
    assert code == 0 and "creates" in text.splitlines()[0]
    code, text = run(
        "audit",
        "sql",
        "SELECT count(*) AS n FROM metadata_log",
        "--data-dir",
        d,
        "--output",
        "json",
    )
    assert code == 0 and json.loads(text) == {"n": LAST[-1] + 1}


def test_cli_state(spark: Any, story: Path) -> None:
    code, text = run(
        "audit", "state", "--at-offset", str(LAST[9]), "--check", "--data-dir", str(story)
    )
    assert code == 0 and "matches the image" in text
    code, text = run("audit", "state", "--at-offset", str(LAST[9]), "--data-dir", str(story))
    assert code == 0 and "orders" in text and "partitions at offset" in text


def test_cli_errors(
    spark: Any, story: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("audit", "churn", "--data-dir", str(tmp_path / "nowhere"))[0] == 2
    assert "there is no log" in capsys.readouterr().err
    assert run("audit", "who-changed", "--since", "yesterday", "--data-dir", str(story))[0] == 2
    assert "is not a time" in capsys.readouterr().err
    assert run("audit", "sql", "SELEC nonsense", "--data-dir", str(story))[0] == 2
    err = capsys.readouterr().err
    assert err.startswith("mlog: error:") and len(err.strip().splitlines()) == 1
    assert run("audit", "sql", "SELECT nope FROM metadata_log", "--data-dir", str(story))[0] == 2
    assert "nope" in capsys.readouterr().err
    assert run("audit", "state", "--at-offset", "999", "--data-dir", str(story))[0] == 2
    assert "not in the log" in capsys.readouterr().err
    assert run("audit", "churn", "--output", "parquet", "--data-dir", str(story))[0] == 2
    assert "needs a directory" in capsys.readouterr().err


# ---------------------------------------------------------------------- access changes

X1 = Uuid(bytes(range(9, 25)))
X2 = Uuid(bytes(range(10, 26)))
SECRET_SALT = b"\x00never-in-the-audit\xff"
SECRET_KEY = bytes(range(100, 132))


def _acl(acl_id: Uuid, **fields: object) -> AccessControlEntryRecord:
    """User:alice's ACL on topic orders, but for `fields`."""
    return acl(acl_id, **{"principal": "User:alice", **fields})


def _credential(name: str, mechanism: ScramMechanism, size: int) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(
        name=name,
        mechanism=mechanism,
        salt=SECRET_SALT,
        stored_key=SECRET_KEY[:size] * (size // 32),
        server_key=SECRET_KEY[:size] * (size // 32),
        iterations=4096 if size == 32 else 8192,
    )


# (principal, records); append i happens at T0 + i hours.
ACCESS_STORY: list[tuple[str, list[Record]]] = [
    (
        "User:admin",
        [
            FeatureLevelRecord(name="metadata.version", feature_level=1),
            _credential("alice", ScramMechanism.SCRAM_SHA_256, 32),
            _acl(X1),
        ],
    ),
    (
        "User:admin",
        [
            _acl(
                X2,
                resource_type=ResourceType.NAMESPACE,
                resource_name="team",
                pattern_type=PatternType.PREFIXED,
                principal="User:*",
                operation=AclOperation.WRITE,
                permission_type=AclPermissionType.DENY,
            ),
            _credential("bob", ScramMechanism.SCRAM_SHA_512, 64),
        ],
    ),
    ("User:secadmin", [RemoveAccessControlEntryRecord(id=X1)]),
    (
        "User:secadmin",
        [
            # The same id again, for another ACL: a later revoke names this one.
            _acl(
                X1,
                resource_type=ResourceType.CLUSTER,
                resource_name="kafka-cluster",
                principal="User:bob",
                operation=AclOperation.DESCRIBE,
            ),
        ],
    ),
    (
        "User:admin",
        [
            RemoveUserScramCredentialRecord(name="alice", mechanism=ScramMechanism.SCRAM_SHA_256),
            RemoveAccessControlEntryRecord(id=X1),
        ],
    ),
]


@pytest.fixture(scope="module")
def access_story(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("access")
    now = [T0]
    with MetadataLog.open(data_dir / "log", clock_ms=lambda: now[0]) as log:
        for i, (principal, records) in enumerate(ACCESS_STORY):
            now[0] = T0 + i * HOUR
            log.append(records, principal=principal)
    return data_dir


def test_access_changes(spark: Any, access_story: Path) -> None:
    log = read_log(spark, access_story / "log")
    rows = [r.asDict() for r in access_changes(log).collect()]
    assert [(r["offset"], r["principal"], r["action"]) for r in rows] == [
        (1, "User:admin", "credential-set"),
        (2, "User:admin", "grant"),
        (3, "User:admin", "grant"),
        (4, "User:admin", "credential-set"),
        (5, "User:secadmin", "revoke"),
        (6, "User:secadmin", "grant"),
        (7, "User:admin", "credential-removed"),
        (8, "User:admin", "revoke"),
    ]
    assert list(rows[0]) == list(ACCESS_COLUMNS)
    acl = ("resource_type", "resource_name", "pattern_type", "acl_principal", "operation")
    # A revoke shows the ACL its id named then: the first X1, later the second.
    assert [tuple(rows[i][c] for c in acl) for i in (1, 4, 7)] == [
        ("TOPIC", "orders", "LITERAL", "User:alice", "READ"),
        ("TOPIC", "orders", "LITERAL", "User:alice", "READ"),
        ("CLUSTER", "kafka-cluster", "LITERAL", "User:bob", "DESCRIBE"),
    ]
    assert rows[4]["acl_id"] == str(X1) and rows[4]["permission_type"] == "ALLOW"
    assert rows[2]["permission_type"] == "DENY" and rows[2]["acl_host"] == "*"
    assert (rows[3]["user_name"], rows[3]["mechanism"], rows[3]["iterations"]) == (
        "bob",
        "SCRAM-SHA-512",
        8192,
    )
    assert rows[6]["mechanism"] == "SCRAM-SHA-256" and rows[6]["iterations"] is None
    assert rows[0]["timestamp"].hour == 0 and rows[7]["timestamp"].hour == 4
    # Nothing of a salt or a key in any row of the query or of the table.
    everything = repr(rows) + repr([r.asDict() for r in log.collect()])
    for secret in (SECRET_SALT, SECRET_KEY):
        assert base64.b64encode(secret).decode() not in everything
        assert secret.hex() not in everything and repr(secret) not in everything


def test_access_changes_filters(spark: Any, access_story: Path) -> None:
    log = read_log(spark, access_story / "log")

    def offsets(**filters: Any) -> list[int]:
        return [r["offset"] for r in access_changes(log, **filters).collect()]

    assert offsets(principal="User:secadmin") == [5, 6]
    assert offsets(principal="User:nobody") == []
    # alice's credential, ACLs for User:alice (granted, then revoked) and for User:*.
    assert offsets(user="alice") == [1, 2, 3, 5, 7]
    assert offsets(user="bob") == [3, 4, 6, 8]
    assert offsets(since_ms=T0 + 2 * HOUR, until_ms=T0 + 3 * HOUR) == [5, 6]
    # A revoke in range names an ACL granted before the range.
    (late,) = access_changes(log, since_ms=T0 + 2 * HOUR, until_ms=T0 + 2 * HOUR).collect()
    assert late["acl_principal"] == "User:alice"
    with pytest.raises(queries.AuditQueryError, match="--since is after --until"):
        access_changes(log, since_ms=T0 + HOUR, until_ms=T0)
    with pytest.raises(queries.AuditQueryError, match="--user needs a user name"):
        access_changes(log, user="")


def test_who_changed_describes_access_changes(spark: Any, access_story: Path) -> None:
    rows = queries.who_changed(read_log(spark, access_story / "log")).collect()
    shown = [(r["entity"], r["description"]) for r in rows[1:]]
    assert shown[:2] == [
        ("user alice", "set SCRAM-SHA-256 credential of user alice (4096 iterations)"),
        (
            f"acl {X1}",
            "added ACL: ALLOW User:alice READ on topic orders (LITERAL) from host *",
        ),
    ]
    assert shown[4] == (f"acl {X1}", f"removed ACL {X1}")
    assert shown[6] == ("user alice", "removed SCRAM-SHA-256 credential of user alice")


def test_the_table_hides_salts_and_keys(spark: Any, access_story: Path) -> None:
    rows = read_log(spark, access_story / "log").orderBy("offset").collect()
    with LogReader.open(access_story / "log") as log:
        entries = list(log.read())
    for row, entry in zip(rows, entries, strict=True):
        expected = record_to_json(entry.record)["data"]
        if isinstance(entry.record, UserScramCredentialRecord):
            expected.update(salt="(hidden)", stored_key="(hidden)", server_key="(hidden)")
        assert json.loads(row["payload"]) == expected


def test_cli_access_changes(spark: Any, access_story: Path, capsys: Any) -> None:
    d = str(access_story)
    code, text = run("audit", "access-changes", "--data-dir", d, "--output", "json")
    lines = [json.loads(line) for line in text.splitlines()]
    assert code == 0 and [row["action"] for row in lines][:2] == ["credential-set", "grant"]
    assert len(lines) == 8 and "salt" not in text
    code, text = run("audit", "access-changes", "--user", "bob", "--data-dir", d)
    assert code == 0 and "kafka-cluster" in text and "User:alice" not in text
    assert run("audit", "access-changes", "--since", "soon", "--data-dir", d)[0] == 2
    assert "is not a time" in capsys.readouterr().err


def _reference_access_changes(log_dir: Path) -> list[tuple[Any, ...]]:
    """access-changes computed plainly, entry by entry, from the records themselves."""
    rows: list[tuple[Any, ...]] = []
    acls: dict[Uuid, AccessControlEntryRecord] = {}
    with LogReader.open(log_dir) as log:
        for entry in log.read():
            record = entry.record
            acl: AccessControlEntryRecord | None = None
            if isinstance(record, AccessControlEntryRecord):
                acls[record.id] = acl = record
                action, acl_id = "grant", record.id
            elif isinstance(record, RemoveAccessControlEntryRecord):
                acl, action, acl_id = acls[record.id], "revoke", record.id
            elif isinstance(record, UserScramCredentialRecord | RemoveUserScramCredentialRecord):
                removed = isinstance(record, RemoveUserScramCredentialRecord)
                iterations = (
                    record.iterations if isinstance(record, UserScramCredentialRecord) else None
                )
                rows.append(
                    (
                        entry.offset,
                        entry.principal,
                        "credential-removed" if removed else "credential-set",
                        None,
                        None,
                        record.name,
                        record.mechanism.mechanism_name,
                        iterations,
                    )
                )
                continue
            else:
                continue
            fields = (
                acl.resource_type.name,
                acl.resource_name,
                acl.pattern_type.name,
                acl.principal,
                acl.host,
                acl.operation.name,
                acl.permission_type.name,
            )
            rows.append(
                (entry.offset, entry.principal, action, str(acl_id), fields, None, None, None)
            )
    return rows


def test_access_changes_match_a_plain_reference_on_a_generated_log(
    spark: Any, tmp_path: Path
) -> None:
    write_generated_log(tmp_path / "log", seed=33, batches=400, security=True)
    expected = _reference_access_changes(tmp_path / "log")
    assert sum(1 for r in expected if r[2] == "revoke") > 5
    got = [
        (
            r["offset"],
            r["principal"],
            r["action"],
            r["acl_id"],
            None if r["acl_id"] is None else tuple(r[c] for c in ACCESS_COLUMNS[5:12]),
            r["user_name"],
            r["mechanism"],
            r["iterations"],
        )
        for r in access_changes(read_log(spark, tmp_path / "log")).collect()
    ]
    assert got == expected


# ---------------------------------------------------------------------- bookkeeping records


def _client_write(principal: str) -> ClientWriteRecord:
    return ClientWriteRecord(
        client_id=Uuid(bytes(range(16))),
        sequence=0,
        principal=principal,
        api_key=19,
        response=b"\x00answer",
    )


def test_bookkeeping_records_are_left_out_unless_asked(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with MetadataLog.open(tmp_path / "log") as log:
        log.append([FeatureLevelRecord(name="metadata.version", feature_level=1)])
        topic = TopicRecord(name="orders", topic_id=Uuid(bytes(range(1, 17))))
        log.append([topic, _client_write("User:alice")], principal="User:alice")
    per_principal = "SELECT principal, count(*) AS n FROM metadata_log GROUP BY principal"
    code, text = run("audit", "sql", per_principal, "--data-dir", str(tmp_path), "--output", "json")
    assert code == 0
    assert {"principal": "User:alice", "n": 1} in [json.loads(line) for line in text.splitlines()]
    code, text = run(
        "audit", "sql", per_principal, "--data-dir", str(tmp_path), "--output", "json",
        "--include-internal",
    )  # fmt: skip
    assert code == 0
    assert {"principal": "User:alice", "n": 2} in [json.loads(line) for line in text.splitlines()]
    code, text = run("audit", "who-changed", "--data-dir", str(tmp_path), "--output", "json")
    kinds = [json.loads(line)["record_type"] for line in text.splitlines()]
    assert code == 0 and "ClientWriteRecord" not in kinds and "TopicRecord" in kinds
    assert read_log(spark, tmp_path / "log", internal=True).count() == 3
    assert read_log(spark, tmp_path / "log").count() == 2


# ---------------------------------------------------------------------- SQL checked first


def test_every_first_word_refused_before_spark_is_refused_by_spark(spark: Any) -> None:
    """No false alarm: a keyword outside STATEMENT_WORDS cannot start a Spark statement."""
    jvm = spark.sparkContext._jvm
    vocabulary = jvm.org.apache.spark.sql.catalyst.parser.SqlBaseLexer.VOCABULARY
    words = set()
    for token in range(1, vocabulary.getMaxTokenType() + 1):
        literal = vocabulary.getLiteralName(token)
        if literal and literal.strip("'").replace("_", "").isalpha():
            words.add(literal.strip("'").upper())
    assert len(words) > 300  # Spark's keywords were found
    refused = [*sorted(words - STATEMENT_WORDS), "SELEC", "orders"]
    for word in refused:
        with pytest.raises(AuditSqlError):
            precheck(f"{word} x")
        with pytest.raises(AuditSqlError) as caught:
            parse_in_jvm(jvm, f"{word} x")
        assert "(line 1, pos 0)" in str(caught.value), (word, str(caught.value))
    for statement in ("SELECT 1", "WITH t AS (SELECT 1) SELECT * FROM t", "SHOW TABLES"):
        parse_in_jvm(jvm, statement)
    with pytest.raises(AuditSqlError, match=r"SQL error: \[PARSE_SYNTAX_ERROR\] .* near '\('"):
        parse_in_jvm(jvm, "SELECT principal count(*) FROM metadata_log")


# ---------------------------------------------------------------------- the shell


def test_the_shell_answers_queries_on_one_session(
    spark: Any, story: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        "who-changed --principal carol --output json",
        "SELECT count(*) AS n FROM metadata_log",
        "churn --by week",
        "sql 'SELEC 1'",
        "",
        "help",
        "state --at-offset 0 --check",
        'sql "SELECT count(*) AS n FROM metadata_log" --output json',
    ]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    code, text = run("audit", "shell", "--data-dir", str(story))
    err = capsys.readouterr().err
    # Queries piped in are a script: one failed, so the exit code says so; the rest answered.
    assert code == 2
    carol = [json.loads(line) for line in text.splitlines() if line.startswith('{"offset"')]
    assert len(carol) == 9 and {row["principal"] for row in carol} == {"carol"}
    assert f"n\n{LAST[-1] + 1}\n" in text.replace(" ", "")
    assert "argument --by: invalid choice: 'week'" in err
    assert "at 'SELEC', the statement's first word: did you mean SELECT?" in err
    assert "Each line is one query" in text
    assert "state at offset 0: the Spark replay matches the image" in text
    assert json.dumps({"n": LAST[-1] + 1}) in text
    assert "audit shell on" in err and "Traceback" not in err
