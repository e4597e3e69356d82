"""The independent audit replay: live topics and partitions at an offset, computed in Spark.

Nothing is collected to the driver and looped over: the state is derived with aggregates, a
window and joins over the `metadata_log` table, following `replay.delta` rule by rule. The
topic records are read once (only the columns the rules use), shuffled by topic id and sorted
by partition and offset once, and cached; every step reads them in place.

- A topic id is live at N if its last TopicRecord is not followed by a RemoveTopicRecord; its
  namespace is that of its last MoveTopicRecord after the creation, else the creation's (one
  aggregation per topic id gives these and the pending reduction).
- A partition's state is its events from its last PartitionRecord (the base, which states
  every field) on, merged as `replay.delta.merge_partition_change` (Kafka's
  `PartitionRegistration.merge`) merges them: each field is its last stated value (a
  PartitionChangeRecord leaves null what it keeps; a leader of -2 is null in the table); the
  leader epoch is the last stated one plus the changes after it that name a leader, the
  partition epoch the last stated one plus the changes after it.
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
from pyspark.sql.window import Window

from metadata_log.reader import LogReader
from records.model import PARTITION_STATE_FIELDS, mode_name
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
    # One scan of the log (only the topic records, only the columns the rules read), grouped
    # by topic and sorted by partition and offset once, and kept: every step below reads it in
    # place, with no further shuffle of the entries.
    log = _kept(
        read_log(spark, log_dir, payload=False, internal=True, columns=_STATE_INPUT)
        .where((F.col("offset") <= at_offset) & F.col("record_type").isin(*_TOPIC_RECORDS))
        .repartition("topic_id")
        .sortWithinPartitions("topic_id", "partition_id", "offset")
    )
    kind = F.col("record_type")

    def last(record_type: str | tuple[str, ...], *columns: str) -> Any:
        """The (offset, *columns) struct of the topic's last record of `record_type`."""
        types = (record_type,) if isinstance(record_type, str) else record_type
        return F.max(F.when(kind.isin(*types), F.struct("offset", *columns)))

    # Every topic-level rule in one aggregation per topic id: the last creation, removal,
    # move, reduction, and purge or cancel (the last move or reduction counts only if it
    # follows the creation: then it is the last of those that do).
    topic_events = (
        log.where(~kind.isin("PartitionRecord", "PartitionChangeRecord"))
        .groupBy("topic_id")
        .agg(
            last("TopicRecord", "topic_name", "namespace").alias("t"),
            F.max(F.when(kind == "RemoveTopicRecord", F.col("offset"))).alias("removed"),
            last("MoveTopicRecord", "namespace").alias("m"),
            last(
                "DeleteTopicPartitionsRecord", "partition_count", "delete_after_ms", "created_ms"
            ).alias("d"),
            F.max(
                F.when(
                    kind.isin("PurgeTopicPartitionsRecord", "CancelTopicPartitionsDeletionRecord"),
                    F.col("offset"),
                )
            ).alias("settled"),
        )
        .where(
            F.col("t").isNotNull()
            & (F.col("removed").isNull() | (F.col("removed") < F.col("t.offset")))
        )
    )
    created = F.col("t.offset")
    reduction = F.col("d.offset")
    pending = (reduction > created) & (F.col("settled").isNull() | (F.col("settled") < reduction))
    topics = topic_events.select(
        "topic_id",
        F.col("t.topic_name").alias("topic_name"),
        F.when(F.col("m.offset") > created, F.col("m.namespace"))
        .otherwise(F.col("t.namespace"))
        .alias("namespace"),
        created.alias("created"),
        F.when(pending, F.col("d.partition_count")).alias("pending_partition_count"),
        F.when(pending, F.col("d.delete_after_ms")).alias("pending_delete_after_ms"),
        F.when(pending, F.col("d.created_ms")).alias("pending_created_ms"),
    )
    purges = log.where(kind == "PurgeTopicPartitionsRecord").select(
        "topic_id", F.col("offset").alias("purged"), F.col("partition_count").alias("kept")
    )

    # Each partition's events, already in offset order, folded as `replay.delta` replays them
    # (`merge_partition_change`, Kafka's `PartitionRegistration.merge`) without a fold: from
    # the last PartitionRecord (the base: it states every field) on, each field is its last
    # stated value; the leader epoch is the last stated one plus the changes after it that
    # name a leader, the partition epoch the last stated one plus the changes after it.
    # (Without a PartitionRecord the first event is the base, as the fold took it.)
    by_partition = Window.partitionBy("topic_id", "partition_id")
    stated = {c: F.when(F.col(c).isNotNull(), F.col("offset")) for c in _MERGED}
    events = (
        log.where(kind.isin("PartitionRecord", "PartitionChangeRecord"))
        # One select: one window operator computes the three.
        .select(
            "*",
            F.coalesce(
                F.max(F.when(kind == "PartitionRecord", F.col("offset"))).over(by_partition),
                F.min("offset").over(by_partition),
            ).alias("base"),
            F.max(stated["leader_epoch"]).over(by_partition).alias("epoch_at"),
            F.max(stated["partition_epoch"]).over(by_partition).alias("version_at"),
        )
        .where(F.col("offset") >= F.col("base"))
    )
    folded = events.groupBy("topic_id", "partition_id").agg(
        F.first("base").alias("base"),
        *[F.max_by(c, stated[c]).alias(c) for c in (*_FIELDS, "leader")],
        (
            F.max_by("leader_epoch", stated["leader_epoch"])
            + F.count(
                F.when((F.col("offset") > F.col("epoch_at")) & F.col("leader").isNotNull(), 1)
            )
        ).alias("leader_epoch"),
        (
            F.max_by("partition_epoch", stated["partition_epoch"])
            + F.count(F.when(F.col("offset") > F.col("version_at"), 1))
        ).alias("partition_epoch"),
    )
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
    # Kept: both tables read it (the topics count their partitions).
    partitions = _kept(merged.select(*PARTITION_COLUMNS))
    counts = partitions.groupBy("topic_id").agg(F.count("*").alias("partitions"))
    topic_table = (
        topics.join(counts, "topic_id", "left")
        .withColumn("partitions", F.coalesce(F.col("partitions"), F.lit(0)))
        .select(*TOPIC_COLUMNS)
    )
    return StateTables(topics=topic_table, partitions=partitions, cached=(log, partitions))


_ADAPTIVE = "spark.sql.adaptive.enabled"


def _kept(frame: DataFrame) -> DataFrame:
    """`frame` cached (memory, then disk), planned so that its readers know its layout.

    An adaptive plan hides the layout of what it caches: each reader of the cached scan would
    shuffle and sort it again (two more shuffles of every partition event). `persist` plans
    the cache; it is planned statically here, so the scan is shuffled by topic id and sorted
    once, and every step reads it where it lies. The session's setting is restored after.
    """
    conf = frame.sparkSession.conf
    before = conf.get(_ADAPTIVE, None)
    conf.set(_ADAPTIVE, "false")
    try:
        return frame.persist(StorageLevel.MEMORY_AND_DISK)
    finally:
        if before is None:
            conf.unset(_ADAPTIVE)
        else:
            conf.set(_ADAPTIVE, before)


@dataclass(frozen=True, slots=True, kw_only=True)
class StateTables:
    """The state at an offset: lazy DataFrames over one cached scan of the log."""

    topics: DataFrame
    partitions: DataFrame
    cached: tuple[DataFrame, ...]
    """The cached scan and partitions (computed by the first query); `release()` frees them."""

    def release(self) -> None:
        """Drop the cached scan of the log and the cached partitions."""
        for frame in self.cached:
            frame.unpersist()


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
                "mode": mode_name(p.mode),
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
