"""The independent audit replay: live topics and partitions at an offset, computed in Spark.

Nothing is collected to the driver and looped over: the state is derived with joins,
aggregates and Spark's `aggregate` higher-order function over the `metadata_log` table,
following `replay.delta` rule by rule:

- A topic id is live at N if its last TopicRecord is not followed by a RemoveTopicRecord; its
  namespace is that of its last MoveTopicRecord after the creation, else the creation's.
- A partition's events are grouped (one shuffle) and folded in offset order inside Spark: a
  PartitionRecord states every field and becomes the base; a PartitionChangeRecord keeps each
  field it leaves null (a leader of -2 is null in the table), bumps the leader epoch when it
  names a leader without stating the epoch, and bumps the partition epoch unless it states it
  (`replay.delta.merge_partition_change`, Kafka's `PartitionRegistration.merge`).
- A partition is gone if its topic is not live, if its base predates the topic's creation
  (another incarnation), or if a PurgeTopicPartitionsRecord after its base cut the topic
  below its id. A DeleteTopicPartitionsRecord with no purge after it is the pending deletion.

`compare_with_image` checks the result against the in-process image (`replay.loader`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from metadata_log.reader import LogReader
from records.model import PARTITION_STATE_FIELDS, Mode
from replay.audit.archived import is_archive_url, refuse_trimmed_archive
from replay.audit.session import read_log
from replay.errors import TrimmedLogError
from replay.image import MetadataImage
from replay.loader import load_image

_TOPIC_RECORDS = (
    "TopicRecord",
    "RemoveTopicRecord",
    "MoveTopicRecord",
    "PartitionRecord",
    "PartitionChangeRecord",
    "DeleteTopicPartitionsRecord",
    "PurgeTopicPartitionsRecord",
    "CancelTopicPartitionsDeletionRecord",
)
_STATE_INPUT = (
    "offset",
    "record_type",
    "topic_id",
    "topic_name",
    "namespace",
    "partition_id",
    *PARTITION_STATE_FIELDS,
    "partition_count",
    "delete_after_ms",
    "created_ms",
)
_FIELDS = ("replicas", "isr", "removing_replicas", "adding_replicas", "mode")
_MERGED = (*_FIELDS, "leader", "leader_epoch", "partition_epoch")

# `state_at`'s tables, column by column (docs/audit.md names them; `image_tables` keys its rows
# the same way).
TOPIC_COLUMNS = (
    "topic_id",
    "topic_name",
    "namespace",
    "partitions",
    "pending_partition_count",
    "pending_delete_after_ms",
    "pending_created_ms",
)
PARTITION_COLUMNS = (
    "topic_id",
    "topic_name",
    "namespace",
    "partition_id",
    *PARTITION_STATE_FIELDS,
)


def state_at(spark: SparkSession, log_dir: str | os.PathLike[str], at_offset: int) -> StateTables:
    """The topics and partitions live after the entry at `at_offset`, as lazy DataFrames.

    It replays the topic records from the log's first entry, so a trimmed log (`mlog log
    trim`) is refused with `TrimmedLogError`: the topics created before its start are gone.
    """
    if is_archive_url(os.fspath(log_dir)):
        refuse_trimmed_archive(os.fspath(log_dir))
    else:
        with LogReader.open(log_dir) as whole:
            if whole.log_start_offset > 0:
                raise TrimmedLogError(whole.log_start_offset, 0)
    # One scan of the log, kept for the many joins below: only the topic records, and only the
    # columns the rules read.
    log = (
        read_log(spark, log_dir, payload=False, internal=True)
        .where((F.col("offset") <= at_offset) & F.col("record_type").isin(*_TOPIC_RECORDS))
        .select(*_STATE_INPUT)
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    kind = F.col("record_type")

    created = (
        log.where(kind == "TopicRecord")
        .groupBy("topic_id")
        .agg(F.max(F.struct("offset", "topic_name", "namespace")).alias("t"))
        .select(
            "topic_id",
            F.col("t.offset").alias("created"),
            F.col("t.topic_name").alias("topic_name"),
            F.col("t.namespace").alias("created_in"),
        )
    )
    removed = (
        log.where(kind == "RemoveTopicRecord")
        .groupBy("topic_id")
        .agg(F.max("offset").alias("removed"))
    )
    live = (
        created.join(removed, "topic_id", "left")
        .where(F.col("removed").isNull() | (F.col("removed") < F.col("created")))
        .drop("removed")
    )
    moves = (
        log.where(kind == "MoveTopicRecord")
        .select("topic_id", F.col("offset").alias("moved"), F.col("namespace").alias("moved_to"))
        .join(live.select("topic_id", "created"), "topic_id")
        .where(F.col("moved") > F.col("created"))
        .groupBy("topic_id")
        .agg(F.max(F.struct("moved", "moved_to")).alias("m"))
    )
    topics = live.join(moves, "topic_id", "left").select(
        "topic_id",
        "topic_name",
        F.coalesce(F.col("m.moved_to"), F.col("created_in")).alias("namespace"),
        "created",
    )

    purges = log.where(kind == "PurgeTopicPartitionsRecord").select(
        "topic_id", F.col("offset").alias("purged"), F.col("partition_count").alias("kept")
    )
    reductions = (
        log.where(kind == "DeleteTopicPartitionsRecord")
        .select("topic_id", "offset", "partition_count", "delete_after_ms", "created_ms")
        .join(topics.select("topic_id", "created"), "topic_id")
        .where(F.col("offset") > F.col("created"))
        .groupBy("topic_id")
        .agg(
            F.max(F.struct("offset", "partition_count", "delete_after_ms", "created_ms")).alias("d")
        )
        .select("topic_id", "d.*")
    )
    # A reduction stops being pending when a purge completes it or a cancel drops it; only a
    # purge removes partitions (below), a cancel's mode changes are partition events.
    settled = purges.select("topic_id", "purged").unionByName(
        log.where(kind == "CancelTopicPartitionsDeletionRecord").select(
            "topic_id", F.col("offset").alias("purged")
        )
    )
    pending = (
        reductions.join(settled, "topic_id", "left")
        .groupBy("topic_id", "offset", "partition_count", "delete_after_ms", "created_ms")
        .agg(F.max("purged").alias("purged"))
        .where(F.col("purged").isNull() | (F.col("purged") < F.col("offset")))
        .select(
            "topic_id",
            F.col("partition_count").alias("pending_partition_count"),
            F.col("delete_after_ms").alias("pending_delete_after_ms"),
            F.col("created_ms").alias("pending_created_ms"),
        )
    )

    events = log.where(kind.isin("PartitionRecord", "PartitionChangeRecord")).select(
        "topic_id",
        "partition_id",
        "offset",
        (kind == "PartitionRecord").alias("full"),
        *_FIELDS,
        "leader",
        "leader_epoch",
        "partition_epoch",
    )
    # Each partition's events in offset order, folded as `replay.delta` replays them: a
    # PartitionRecord sets every field (and is the new base), a PartitionChangeRecord merges
    # as `merge_partition_change` does. One aggregation over the events: no join of the events
    # with their bases and no window.
    history = events.groupBy("topic_id", "partition_id").agg(
        F.sort_array(F.collect_list(F.struct("offset", "full", *_MERGED))).alias("events")
    )

    def stated(event: Any) -> Any:
        return F.struct(event["offset"].alias("base"), *[event[c].alias(c) for c in _MERGED])

    def merge(state: Any, change: Any) -> Any:
        leader_epoch = F.when(change["leader"].isNotNull(), state["leader_epoch"] + 1).otherwise(
            state["leader_epoch"]
        )
        merged = F.struct(
            state["base"].alias("base"),
            *[F.coalesce(change[c], state[c]).alias(c) for c in (*_FIELDS, "leader")],
            F.coalesce(change["leader_epoch"], leader_epoch).alias("leader_epoch"),
            F.coalesce(change["partition_epoch"], state["partition_epoch"] + 1).alias(
                "partition_epoch"
            ),
        )
        return F.when(change["full"], stated(change)).otherwise(merged)

    folded = history.select(
        "topic_id",
        "partition_id",
        F.aggregate(
            F.slice("events", F.lit(2), F.size("events")), stated(F.col("events")[0]), merge
        ).alias("p"),
    ).select("topic_id", "partition_id", "p.*")
    # Live: of a live topic, created after the topic (not another incarnation's), and not cut
    # off by a purge after it.
    merged = (
        folded.join(topics.select("topic_id", "topic_name", "namespace", "created"), "topic_id")
        .where(F.col("base") > F.col("created"))
        .alias("m")
        .join(
            purges.alias("g"),
            (F.col("m.topic_id") == F.col("g.topic_id"))
            & (F.col("g.purged") > F.col("m.base"))
            & (F.col("m.partition_id") >= F.col("g.kept")),
            "left_anti",
        )
    )
    partitions = merged.select(*PARTITION_COLUMNS)
    counts = partitions.groupBy("topic_id").agg(F.count("*").alias("partitions"))
    topic_table = (
        topics.join(counts, "topic_id", "left")
        .join(pending, "topic_id", "left")
        .withColumn("partitions", F.coalesce(F.col("partitions"), F.lit(0)))
        .select(*TOPIC_COLUMNS)
    )
    return StateTables(topics=topic_table, partitions=partitions, source=log)


@dataclass(frozen=True, slots=True, kw_only=True)
class StateTables:
    """The state at an offset: lazy DataFrames over one cached scan of the log."""

    topics: DataFrame
    partitions: DataFrame
    source: DataFrame
    """The cached scan; `release()` frees it."""

    def release(self) -> None:
        """Drop the cached scan of the log."""
        self.source.unpersist()


@dataclass(frozen=True, slots=True, kw_only=True)
class StateDifference:
    """One way the Spark state and the in-process image disagree."""

    entity: str
    field: str
    spark: Any
    image: Any

    def text(self) -> str:
        """One line for humans."""
        return f"{self.entity}: {self.field}: spark={self.spark!r} image={self.image!r}"


def image_tables(
    image: MetadataImage,
) -> tuple[dict[str, dict[str, Any]], dict[tuple[str, int], dict[str, Any]]]:
    """The image's topics and partitions keyed and shaped as `state_at`'s rows."""
    topics: dict[str, dict[str, Any]] = {}
    partitions: dict[tuple[str, int], dict[str, Any]] = {}
    for topic in image.topics.by_id.values():
        tid = str(topic.topic_id)
        pending = topic.pending_deletion
        topics[tid] = {
            "topic_id": tid,
            "topic_name": topic.name,
            "namespace": topic.namespace,
            "partitions": len(topic.partitions),
            "pending_partition_count": None if pending is None else pending.partition_count,
            "pending_delete_after_ms": None if pending is None else pending.delete_after_ms,
            "pending_created_ms": None if pending is None else pending.created_ms,
        }
        for p in topic.partitions:
            partitions[(tid, p.partition_id)] = {
                "topic_id": tid,
                "topic_name": topic.name,
                "namespace": topic.namespace,
                "partition_id": p.partition_id,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "removing_replicas": list(p.removing_replicas),
                "adding_replicas": list(p.adding_replicas),
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "partition_epoch": p.partition_epoch,
                "mode": Mode(p.mode).name,
            }
    return topics, partitions


def _compare(
    what: str, spark_rows: dict[Any, dict[str, Any]], image_rows: dict[Any, dict[str, Any]]
) -> list[StateDifference]:
    out = []
    for key in sorted(spark_rows.keys() | image_rows.keys(), key=str):
        entity = f"{what} {key}" if not isinstance(key, tuple) else f"{what} {key[0]}-{key[1]}"
        ours, theirs = spark_rows.get(key), image_rows.get(key)
        if ours is None or theirs is None:
            out.append(
                StateDifference(
                    entity=entity,
                    field="exists",
                    spark=ours is not None,
                    image=theirs is not None,
                )
            )
            continue
        for name, value in theirs.items():
            if ours.get(name) != value:
                out.append(
                    StateDifference(entity=entity, field=name, spark=ours.get(name), image=value)
                )
    return out


def compare_with_image(
    spark: SparkSession,
    log_dir: str | os.PathLike[str],
    at_offset: int,
    *,
    image_from: str | os.PathLike[str] | None = None,
) -> list[StateDifference]:
    """Every difference between `state_at` and the in-process image at `at_offset`.

    The image is replayed in this process from `image_from` (default `log_dir`; for an
    archive URL, a local copy of it: `replay.audit.archived.download_view`).
    """
    if image_from is None and is_archive_url(os.fspath(log_dir)):
        raise ValueError("an archive's image needs a local copy: give image_from")
    state = state_at(spark, log_dir, at_offset)
    try:
        spark_topics = {r["topic_id"]: r.asDict() for r in state.topics.collect()}
        spark_partitions = {
            (r["topic_id"], r["partition_id"]): r.asDict() for r in state.partitions.collect()
        }
    finally:
        state.release()
    with LogReader.open(log_dir if image_from is None else image_from) as log:
        image = load_image(log, lte=at_offset)
    image_topics, image_partitions = image_tables(image)
    return _compare("topic", spark_topics, image_topics) + _compare(
        "partition", spark_partitions, image_partitions
    )
