"""The named audit queries: each takes the `metadata_log` DataFrame and returns a DataFrame.

Documented with their columns in `docs/audit.md`; `mlog audit <name>` runs them.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from records.errors import MetadataLogError
from replay.image import split_qualified_name

VIEW = "metadata_log"
"""The name `sql` registers the log under."""

CHURN_PERIODS = ("hour", "day")


class AuditQueryError(MetadataLogError):
    """An audit query was given arguments it cannot use; the message says which."""


def _qualified(namespace: Column, name: Column) -> Column:
    return F.when(namespace == "", name).otherwise(F.concat_ws(":", namespace, name))


def topic_names(log: DataFrame) -> DataFrame:
    """topic_id -> qualified name and namespace at creation (ids are never reused)."""
    return log.where(F.col("record_type") == "TopicRecord").select(
        "topic_id",
        _qualified(F.col("namespace"), F.col("topic_name")).alias("topic"),
        F.col("namespace").alias("topic_namespace"),
    )


def topic_lifecycle(log: DataFrame, topic: str) -> DataFrame:
    """Every incarnation of a topic name: id, namespace, created/deleted (when, by whom).

    `partition_counts` is the partition count over time: one entry each time it changed.
    """
    namespace, name = split_qualified_name(topic)
    if not name:
        raise AuditQueryError("--topic needs a topic name, e.g. orders or team:orders")
    created = log.where(
        (F.col("record_type") == "TopicRecord")
        & (F.col("topic_name") == name)
        & (F.col("namespace") == namespace)
    ).select(
        "topic_id",
        "namespace",
        F.col("timestamp").alias("created"),
        F.col("principal").alias("created_by"),
        F.col("offset").alias("created_offset"),
    )
    removed = log.where(F.col("record_type") == "RemoveTopicRecord").select(
        "topic_id",
        F.col("timestamp").alias("deleted"),
        F.col("principal").alias("deleted_by"),
        F.col("offset").alias("deleted_offset"),
    )
    # Partition count after each PartitionRecord (ids only grow) or purge (cuts to its count).
    events = log.where(
        F.col("record_type").isin("PartitionRecord", "PurgeTopicPartitionsRecord")
    ).select(
        "topic_id",
        F.struct(
            F.col("offset").alias("offset"),
            F.col("timestamp").alias("at"),
            (F.col("record_type") == "PurgeTopicPartitionsRecord").alias("purge"),
            F.coalesce(F.col("partition_count"), F.col("partition_id") + 1).alias("n"),
        ).alias("e"),
    )
    # One entry per change of the count; the records of one command share a timestamp (a
    # create of 4 partitions is 4 PartitionRecords), so a change at the same time as the last
    # entry replaces it: the count after the command, not each step within it.
    after = "IF(e.purge, e.n, greatest(acc.n, e.n))"
    point = f"named_struct('at', e.at, 'partitions', {after})"
    fold = F.expr(
        "aggregate(array_sort(events), named_struct('n', 0, 'h', "
        "CAST(array() AS ARRAY<STRUCT<at: TIMESTAMP, partitions: INT>>)), "
        f"(acc, e) -> CASE WHEN {after} = acc.n THEN acc "
        "WHEN size(acc.h) > 0 AND element_at(acc.h, -1).at = e.at "
        f"THEN named_struct('n', {after}, 'h', "
        f"concat(slice(acc.h, 1, size(acc.h) - 1), array({point}))) "
        f"ELSE named_struct('n', {after}, 'h', concat(acc.h, array({point}))) END, "
        "acc -> acc.h)"
    )
    counts = (
        events.join(created.select("topic_id"), "topic_id")
        .groupBy("topic_id")
        .agg(F.collect_list("e").alias("events"))
        .select("topic_id", fold.alias("partition_counts"))
    )
    return (
        created.join(removed, "topic_id", "left")
        .join(counts, "topic_id", "left")
        .orderBy("created_offset")
        .select(
            "topic_id",
            "namespace",
            "created",
            "created_by",
            "deleted",
            "deleted_by",
            "partition_counts",
        )
    )


def _ints(column: str) -> Column:
    return F.concat(F.lit("["), F.array_join(F.col(column), ","), F.lit("]"))


def _description(topic: Column) -> Column:
    """A one-line description per record type (names resolved through `topic`)."""
    kind = F.col("record_type")
    partition = F.concat_ws("-", topic, F.col("partition_id").cast("string"))
    change = F.concat_ws(
        ", ",
        F.when(F.col("leader").isNotNull(), F.concat(F.lit("leader -> "), F.col("leader"))),
        F.when(F.col("isr").isNotNull(), F.concat(F.lit("isr -> "), _ints("isr"))),
        F.when(F.col("replicas").isNotNull(), F.concat(F.lit("replicas -> "), _ints("replicas"))),
        F.when(F.col("mode").isNotNull(), F.concat(F.lit("mode -> "), F.col("mode"))),
        F.when(
            F.col("partition_epoch").isNotNull(),
            F.concat(F.lit("partition epoch -> "), F.col("partition_epoch")),
        ),
    )
    resource = F.concat_ws(" ", F.lower(F.col("resource_type")), F.col("resource_name"))
    return (
        F.when(kind == "TopicRecord", F.concat(F.lit("created topic "), topic))
        .when(kind == "RemoveTopicRecord", F.concat(F.lit("deleted topic "), topic))
        .when(
            kind == "MoveTopicRecord",
            F.concat(
                F.lit("moved topic "),
                topic,
                F.lit(" to namespace '"),
                F.col("namespace"),
                F.lit("'"),
            ),
        )
        .when(
            kind == "PartitionRecord",
            F.concat(
                F.lit("partition "),
                partition,
                F.lit(": replicas "),
                _ints("replicas"),
                F.lit(", isr "),
                _ints("isr"),
                F.lit(", leader "),
                F.col("leader"),
                F.lit(", mode "),
                F.col("mode"),
            ),
        )
        .when(
            kind == "PartitionChangeRecord",
            F.concat(F.lit("partition "), partition, F.lit(": "), change),
        )
        .when(
            kind == "DeleteTopicPartitionsRecord",
            F.concat(
                F.lit("reduce "),
                topic,
                F.lit(" to "),
                F.col("partition_count"),
                F.lit(" partitions (purge at "),
                F.timestamp_millis(F.col("delete_after_ms")).cast("string"),
                F.lit(")"),
            ),
        )
        .when(
            kind == "PurgeTopicPartitionsRecord",
            F.concat(
                F.lit("purged "),
                topic,
                F.lit(" down to "),
                F.col("partition_count"),
                F.lit(" partitions"),
            ),
        )
        .when(
            kind == "CancelTopicPartitionsDeletionRecord",
            F.concat(
                F.lit("cancelled the pending deletion of "),
                topic,
                F.lit(" to "),
                F.col("partition_count"),
                F.lit(" partitions"),
            ),
        )
        .when(
            kind == "ConfigRecord",
            F.when(
                F.col("config_value").isNull(),
                F.concat(F.lit("config "), resource, F.lit(": delete "), F.col("config_name")),
            ).otherwise(
                F.concat(
                    F.lit("config "),
                    resource,
                    F.lit(": "),
                    F.col("config_name"),
                    F.lit("="),
                    F.col("config_value"),
                )
            ),
        )
        .when(kind == "NamespaceRecord", F.concat(F.lit("created namespace "), F.col("namespace")))
        .when(
            kind == "RemoveNamespaceRecord",
            F.concat(F.lit("deleted namespace id "), F.col("namespace_id")),
        )
        .when(
            kind == "RegisterBrokerRecord",
            F.concat(F.lit("registered broker "), F.col("broker_id")),
        )
        .when(
            kind == "UnregisterBrokerRecord",
            F.concat(F.lit("unregistered broker "), F.col("broker_id")),
        )
        .when(
            kind == "BrokerRegistrationChangeRecord",
            F.concat(
                F.lit("broker "),
                F.col("broker_id"),
                F.lit(": fencing "),
                F.col("fencing_change"),
                F.lit(", shutdown "),
                F.col("controlled_shutdown_change"),
            ),
        )
        .when(
            kind == "FeatureLevelRecord",
            F.concat(
                F.lit("feature "), F.col("feature_name"), F.lit(" level "), F.col("feature_level")
            ),
        )
        .when(
            kind == "AccessControlEntryRecord",
            F.concat(
                F.lit("added ACL: "),
                F.col("permission_type"),
                F.lit(" "),
                F.col("acl_principal"),
                F.lit(" "),
                F.col("operation"),
                F.lit(" on "),
                resource,
                F.lit(" ("),
                F.col("pattern_type"),
                F.lit(") from host "),
                F.col("acl_host"),
            ),
        )
        .when(
            kind == "RemoveAccessControlEntryRecord",
            F.concat(F.lit("removed ACL "), F.col("acl_id")),
        )
        .when(
            kind == "UserScramCredentialRecord",
            F.concat(
                F.lit("set "),
                F.regexp_replace(F.col("mechanism"), "_", "-"),
                F.lit(" credential of user "),
                F.col("user_name"),
                F.lit(" ("),
                F.col("iterations"),
                F.lit(" iterations)"),
            ),
        )
        .when(
            kind == "LeaderChangeRecord",
            F.concat(
                F.lit("node "),
                F.col("leader"),
                F.lit(" leads the controller quorum (voters "),
                _ints("voters"),
                F.lit(", granted by "),
                _ints("granting_voters"),
                F.lit(")"),
            ),
        )
        .when(
            kind == "RemoveUserScramCredentialRecord",
            F.concat(
                F.lit("removed "),
                F.regexp_replace(F.col("mechanism"), "_", "-"),
                F.lit(" credential of user "),
                F.col("user_name"),
            ),
        )
        .otherwise(kind)
    )


def _entity(topic: Column) -> Column:
    return (
        F.when(F.col("topic_id").isNotNull(), F.concat(F.lit("topic "), topic))
        # ACL records have a resource type too: they are told apart first.
        .when(F.col("acl_id").isNotNull(), F.concat(F.lit("acl "), F.col("acl_id")))
        .when(F.col("user_name").isNotNull(), F.concat(F.lit("user "), F.col("user_name")))
        .when(
            F.col("resource_type").isNotNull(),
            F.concat(
                F.lit("config "),
                F.lower(F.col("resource_type")),
                F.lit(" "),
                F.col("resource_name"),
            ),
        )
        .when(F.col("broker_id").isNotNull(), F.concat(F.lit("broker "), F.col("broker_id")))
        .when(
            F.col("namespace_id").isNotNull(),
            F.concat(F.lit("namespace "), F.coalesce(F.col("namespace"), F.col("namespace_id"))),
        )
        .when(F.col("feature_name").isNotNull(), F.concat(F.lit("feature "), F.col("feature_name")))
        .when(F.col("record_type") == "LeaderChangeRecord", F.lit("controller quorum"))
        .otherwise(F.lit(""))
    )


def who_changed(
    log: DataFrame,
    *,
    principal: str | None = None,
    since_ms: int | None = None,
    until_ms: int | None = None,
) -> DataFrame:
    """Every change (optionally by one principal, in a time range) with who, when, what."""
    if since_ms is not None and until_ms is not None and since_ms > until_ms:
        raise AuditQueryError("--since is after --until; give the earlier time first")
    selected = log
    if principal is not None:
        selected = selected.where(F.col("principal") == principal)
    if since_ms is not None:
        selected = selected.where(F.col("timestamp") >= F.timestamp_millis(F.lit(since_ms)))
    if until_ms is not None:
        selected = selected.where(F.col("timestamp") <= F.timestamp_millis(F.lit(until_ms)))
    named = selected.join(F.broadcast(topic_names(log)), "topic_id", "left")
    topic = F.coalesce(F.col("topic"), F.col("topic_id"))
    return named.orderBy("offset").select(
        "offset",
        "timestamp",
        "principal",
        "record_type",
        _entity(topic).alias("entity"),
        _description(topic).alias("description"),
    )


def partition_modes(log: DataFrame, *, topic: str | None = None) -> DataFrame:
    """Mode timeline per partition (READ_WRITE / READ_ONLY / NONE) and partition deletions.

    `event` is `mode` (a partition's mode was set), `reduce` (a deletion was requested:
    `partition_count` partitions stay, the rest go at `purge_at`), `purge` (done) or `cancel`
    (the pending deletion was cancelled).
    """
    names = topic_names(log)
    if topic is not None:
        names = names.where(F.col("topic") == topic)
    rows = (
        log.where(
            (F.col("record_type") == "PartitionRecord")
            | ((F.col("record_type") == "PartitionChangeRecord") & F.col("mode").isNotNull())
            | F.col("record_type").isin(
                "DeleteTopicPartitionsRecord",
                "PurgeTopicPartitionsRecord",
                "CancelTopicPartitionsDeletionRecord",
            )
        )
        .join(F.broadcast(names), "topic_id")
        .select(
            "offset",
            "timestamp",
            "principal",
            "topic",
            "topic_id",
            "partition_id",
            F.when(F.col("record_type") == "DeleteTopicPartitionsRecord", F.lit("reduce"))
            .when(F.col("record_type") == "PurgeTopicPartitionsRecord", F.lit("purge"))
            .when(F.col("record_type") == "CancelTopicPartitionsDeletionRecord", F.lit("cancel"))
            .otherwise(F.lit("mode"))
            .alias("event"),
            "mode",
            "partition_count",
            F.timestamp_millis(F.col("delete_after_ms")).alias("purge_at"),
        )
    )
    return rows.orderBy("offset")


def churn(log: DataFrame, *, by: str) -> DataFrame:
    """Creates, deletes and partition changes per period (hour or day) and namespace."""
    if by not in CHURN_PERIODS:
        raise AuditQueryError(f"--by must be one of {', '.join(CHURN_PERIODS)}, not {by!r}")
    kind = F.col("record_type")
    relevant = log.where(
        kind.isin(
            "TopicRecord",
            "RemoveTopicRecord",
            "PartitionChangeRecord",
            "DeleteTopicPartitionsRecord",
            "PurgeTopicPartitionsRecord",
        )
    ).join(F.broadcast(topic_names(log)), "topic_id", "left")
    counted = relevant.groupBy(
        F.date_trunc(by, F.col("timestamp")).alias("period"),
        F.coalesce(F.col("topic_namespace"), F.lit("")).alias("namespace"),
    ).agg(
        F.sum((kind == "TopicRecord").cast("int")).alias("creates"),
        F.sum((kind == "RemoveTopicRecord").cast("int")).alias("deletes"),
        F.sum((kind == "PartitionChangeRecord").cast("int")).alias("partition_changes"),
        F.sum(
            kind.isin("DeleteTopicPartitionsRecord", "PurgeTopicPartitionsRecord").cast("int")
        ).alias("partition_reductions"),
    )
    return counted.orderBy("period", "namespace")


def sql(spark: SparkSession, log: DataFrame, statement: str) -> DataFrame:
    """Any Spark SQL statement over the log, registered as the view `metadata_log`."""
    if not statement.strip():
        raise AuditQueryError('sql needs a statement, e.g. "SELECT count(*) FROM metadata_log"')
    log.createOrReplaceTempView(VIEW)
    return spark.sql(statement)
