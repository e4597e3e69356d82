"""SparkSessions for audits: local by default (`local[*]`), or any cluster by master URL."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

LOCAL_MASTER = "local[*]"
LOCAL_SHUFFLE_PARTITIONS = "4"
LOCAL_DRIVER_MEMORY = "4g"
"""Shuffle partitions for local runs: Spark's default of 200 costs seconds on small logs."""
"""(driver memory) A local run is one JVM: the cached scan of a 10M-entry log needs more than 1g."""


def _log4j_config() -> str:
    return str(resources.files("replay.audit").joinpath("log4j2.properties"))


def audit_session(
    *, master: str | None = None, conf: Mapping[str, str] | None = None
) -> SparkSession:
    """A SparkSession with the `metadata_log` source registered.

    Local masters (the default `local[*]`) get `PYSPARK_PYTHON` = this interpreter and
    `SPARK_LOCAL_IP` = 127.0.0.1 (unless already set: the workers must import this package, and
    a local run needs no network), a few shuffle partitions and quiet logging. `conf` entries
    (`--conf k=v`) are applied last, so they override every default here.
    """
    chosen = master or LOCAL_MASTER
    local = chosen.startswith("local")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    log4j = f"-Dlog4j2.configurationFile=file:{_log4j_config()}"
    builder = (
        SparkSession.builder.master(chosen)
        .appName("mlog audit")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.driver.extraJavaOptions", log4j)
        .config("spark.executor.extraJavaOptions", log4j)
    )
    if local:
        builder = (
            builder.config("spark.sql.shuffle.partitions", LOCAL_SHUFFLE_PARTITIONS)
            .config("spark.driver.memory", LOCAL_DRIVER_MEMORY)
            # Local runs are CPU-bound on few cores: compressing cached columns costs more
            # (building the state replay's cached scan: 37 s -> 29 s at 10M entries) than the
            # memory it saves.
            .config("spark.sql.inMemoryColumnarStorage.compressed", "false")
        )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def register(spark: SparkSession) -> None:
    """Register the `metadata_log` data source (and enable Python filter pushdown) in `spark`."""
    from replay.audit.source import MetadataLogDataSource

    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(MetadataLogDataSource)


def read_log(
    spark: SparkSession, log_dir: str | os.PathLike[str], *, payload: bool = True
) -> DataFrame:
    """The entries of the log in `log_dir` as a DataFrame (checked to open on the driver first).

    The DataFrame carries the always-true filter `offset >= 0`. Spark (4.1) caches a Python
    source's planned read on the relation and, for a query with no filter to push, reuses the
    plan left by the last pushdown; with a filter in every query, each query plans afresh.
    `payload=False` leaves the `payload` column null, for scans that do not read it.
    """
    from pyspark.sql import functions as F

    from metadata_log.log import MetadataLog
    from replay.audit.source import SOURCE_NAME

    with MetadataLog.open(log_dir, read_only=True) as log:
        log.read_spans()  # a damaged log fails here, with the segment and position
    reader = spark.read.format(SOURCE_NAME)
    if not payload:
        reader = reader.option("payload", "false")
    frame = reader.load(str(log_dir))
    return frame.where(F.col("offset") >= 0)
