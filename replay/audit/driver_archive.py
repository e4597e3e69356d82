"""A class-data-sharing archive for Spark's driver JVM: an audit's Spark starts in half the time.

Every `mlog audit` launches a driver JVM that loads and verifies the same tens of thousands of
classes before its first answer (Spark's SQL engine, Hadoop's file systems, the Python data
source's planning). A dynamic class-data-sharing archive (JDK 13+) holds them parsed and
verified; a JVM started with `-XX:SharedArchiveFile` maps it instead. `mlog audit sql` on a
small log, idle 2-core machine, Java 17: Spark's start 9.7 s -> 5.9 s, the whole command
19.1 s -> 12.9 s (JVM defaults).

The archive is kept as the SQL parser's is (`parser_jvm.archive_path`: the cache directory, a
name digesting the java binary and every jar, so another Java or Spark gets another one). The
first audit that launches a driver without one starts a detached build and runs without it;
the build trains a driver on a small log of its own (a session started with
`-XX:ArchiveClassesAtExit`, one query, the JVM's exit writes the archive), then has a second
driver started with `-Xshare:on` (refuse rather than ignore) run the query again, and only then
renames the archive into place: a half-written one is never published. A JVM that cannot map
a published archive (a JVM update it missed) runs without it, silently (`-Xshare:auto`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from pyspark import SparkContext

from metadata_log.log import MetadataLog
from records.model import RegisterBrokerRecord
from records.uuids import Uuid
from replay.audit.parser_jvm import (
    ARCHIVE_BUILD_S,
    archive_path,
    build_archive_in_background,
    dump_and_publish,
    java_executable,
    spark_jars,
)
from replay.audit.session import audit_session, java_option, read_log, shut_down_gateway

ARCHIVE_FORMAT = "mlog-spark-driver-1"
"""Part of the archive's name: a new value when what the archive holds changes."""

ARCHIVE_NAME = "spark-driver"
"""The archive's file name starts so, beside the parser's (`spark-sql-parser-...`)."""

BUILD_NICENESS = 10
"""The build's (and its training drivers') niceness: the first audit, which started it, runs
beside it on the same cores."""

MODULE = "replay.audit.driver_archive"
"""This module's name, also when it runs as `python -m` (where `__name__` is `__main__`)."""

SHARED_ARCHIVE = "-XX:SharedArchiveFile="
VERIFY = "-XX:+VerifySharedSpaces"
CRASH_REPORT = f"-XX:ErrorFile={Path(tempfile.gettempdir()) / 'mlog-spark-driver-hs_err_%p.log'}"
"""Where a driver that crashed mapping an archive reports it: not the user's directory."""

TRAINING_QUERY_ENTRIES = 3
"""Entries of the log a training driver reads (what it loads does not depend on the size)."""


def archive() -> Path | None:
    """Where the driver's archive for this Java and this Spark is kept (None: nowhere to)."""
    jars = spark_jars()
    java = java_executable()
    if jars is None or java is None:
        return None
    return archive_path(jars, java, name=ARCHIVE_NAME, facts_of_use=(ARCHIVE_FORMAT,))


def sharing_options() -> str:
    """The driver's JVM options that map the archive, or "" (and a build started) if none.

    `-XX:+VerifySharedSpaces`: the JVM checks the archive's checksums as it maps it and runs
    without it if they fail (a flipped bit would crash it); the check costs no measurable
    part of the start. A crash report goes to the temporary directory (`CRASH_REPORT`).
    """
    path = archive()
    if path is None:
        return ""
    if path.is_file():
        return _options(path)
    build_archive_in_background(path, module=MODULE)
    return ""


def _options(path: Path) -> str:
    return " ".join(java_option(o) for o in (VERIFY, CRASH_REPORT, f"{SHARED_ARCHIVE}{path}"))


def drop_unusable(options: str) -> str | None:
    """`options` without this module's, its archive deleted, if they hold them; else None.

    For a driver that did not start with them: an archive cut short (a full disk, an edit)
    crashes the JVM that maps it, checksums or not. The next audit builds it anew. Options
    someone gave (`--conf spark.driver.extraJavaOptions`, an archive of their own) are not
    this module's: None, and nothing deleted.
    """
    path = archive()
    if path is None or (ours := _options(path)) not in options:
        return None
    path.unlink(missing_ok=True)
    return options.replace(f" {ours}", "").replace(ours, "").strip()


def build(path: Path) -> bool:
    """Build the archive at `path`: a training driver writes it, a second one must map it."""
    try:
        with tempfile.TemporaryDirectory(prefix="mlog-driver-archive-") as scratch:
            log_dir = Path(scratch) / "log"
            _training_log(log_dir)
            return dump_and_publish(
                path, lambda options: _train(log_dir, " ".join(map(java_option, options)))
            )
    except OSError:
        path.with_name(path.name + ".lock").unlink(missing_ok=True)
        return False


def _training_log(log_dir: Path) -> None:
    with MetadataLog.open(log_dir) as log:
        for broker in range(TRAINING_QUERY_ENTRIES):
            record = RegisterBrokerRecord(
                broker_id=broker, incarnation_id=Uuid.random(), broker_epoch=broker
            )
            log.append([record])


def _train(log_dir: Path, options: str) -> bool:
    """Run a training driver with `options` in a process of its own; whether all went well."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", MODULE, "--train", str(log_dir), options],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=ARCHIVE_BUILD_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def _train_here(log_dir: Path, options: str) -> bool:
    """A driver JVM with `options` answers a query on `log_dir`, then exits.

    It writes an archive it dumps as it exits; whether the query answered and the JVM exited
    cleanly.
    """
    spark = audit_session(master="local[1]", jvm_log=None, class_sharing=options)
    rows = read_log(spark, log_dir).groupBy("record_type").count().collect()
    spark.stop()
    gateway: Any = SparkContext._gateway  # the JVM this process launched
    process = gateway.proc
    shut_down_gateway(gateway)  # its stdin closed: the JVM exits, and writes an archive it dumps
    try:
        code = process.wait(ARCHIVE_BUILD_S)
    except subprocess.TimeoutExpired:
        process.kill()
        return False
    counted = sum(int(row["count"]) for row in rows)
    return code == 0 and counted == TRAINING_QUERY_ENTRIES


if __name__ == "__main__":
    if sys.argv[1:2] == ["--train"]:
        sys.exit(0 if _train_here(Path(sys.argv[2]), sys.argv[3]) else 1)
    os.nice(BUILD_NICENESS)  # the audit that started it runs meanwhile
    sys.exit(0 if build(Path(sys.argv[1])) else 1)
