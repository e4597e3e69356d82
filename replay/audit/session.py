"""SparkSessions for audits: local by default (`local[*]`), or any cluster by master URL."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from typing import IO, TYPE_CHECKING, Any, TextIO

from replay.audit.errors import AuditSessionError, AuditSqlError
from replay.audit.sql_check import spark_parse_error

if TYPE_CHECKING:
    from pyspark import SparkConf
    from pyspark.sql import DataFrame, SparkSession

LOCAL_MASTER = "local[*]"
LOCAL_SHUFFLE_PARTITIONS = "4"
LOCAL_DRIVER_MEMORY = "4g"
"""Shuffle partitions for local runs: Spark's default of 200 costs seconds on small logs."""
"""(driver memory) A local run is one JVM: the cached scan of a 10M-entry log needs more than 1g."""

MASTER_CONNECT_TIMEOUT = 5.0
"""Seconds to wait for a TCP connection to a `spark://` master before giving up.

Spark itself retries registration for about a minute (3 tries of 20 s) against a master it
cannot reach; an audit checks the address first and fails in this time instead."""

MASTER_REGISTRATION_TIMEOUT = 30.0
"""Seconds a `spark://` master may take to register the audit once the JVM runs.

A master registers an application in well under a second; something that accepts the
connection but never answers (not a Spark master, a proxy) would otherwise hold the start for
Spark's own 3 tries of 20 s."""

SPARK_BANNERS = (
    "WARNING: Using incubator modules:",
    "Setting default log level to ",
    "To adjust logging level use sc.setLogLevel(",
)
"""Lines the JVM and Spark print at every start whatever the log settings: never shown."""

_LOCAL = re.compile(r"local(\[(\*|[1-9][0-9]*)(,[1-9][0-9]*)?\])?")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[[1-9][0-9]*,[1-9][0-9]*,[1-9][0-9]*\]")
_HOST_PORT = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[^:/\[\],]+):(?P<port>[0-9]{1,5})")
_MASTER_FORMS = "local[*], local[N], spark://HOST:PORT[,HOST:PORT...], yarn or k8s://URL"


def check_master(master: str) -> list[tuple[str, int]]:
    """Refuse a master URL Spark would refuse; the (host, port) of each `spark://` master.

    Spark answers a bad master with a Java stack trace after starting a JVM; this says what is
    wrong in one line, before anything starts.
    """
    if _LOCAL.fullmatch(master) or _LOCAL_CLUSTER.fullmatch(master):
        return []
    if master == "yarn":
        if not (os.environ.get("HADOOP_CONF_DIR") or os.environ.get("YARN_CONF_DIR")):
            raise AuditSessionError(
                "--master yarn needs HADOOP_CONF_DIR or YARN_CONF_DIR set to the cluster's "
                "Hadoop configuration directory"
            )
        return []
    if master.startswith("k8s://") and len(master) > len("k8s://"):
        return []
    if master.startswith("spark://"):
        addresses = []
        for part in master[len("spark://") :].split(","):
            found = _HOST_PORT.fullmatch(part)
            if found is None or not 0 < int(found["port"]) < 65536:
                raise AuditSessionError(
                    f"--master {master!r}: {part!r} is not HOST:PORT; give spark://HOST:PORT "
                    "(a standalone master listens on 7077 by default)"
                )
            addresses.append((found["host"].strip("[]"), int(found["port"])))
        return addresses
    raise AuditSessionError(f"--master {master!r} is not a Spark master URL; give {_MASTER_FORMS}")


def reach_masters(
    addresses: list[tuple[str, int]], *, timeout: float = MASTER_CONNECT_TIMEOUT
) -> None:
    """Fail unless one of the standalone masters accepts a TCP connection within `timeout`."""
    if not addresses:
        return
    reasons = []
    for host, port in addresses:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except TimeoutError:
            reasons.append(f"{host}:{port} did not answer within {timeout:g} s")
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or exc}")
    raise AuditSessionError(
        f"cannot reach the Spark master ({'; '.join(reasons)}); check that it is running and "
        "that --master names it"
    )


def _forward_jvm_output(stream: IO[bytes], sink: TextIO | None) -> None:
    """Copy the JVM's stderr to `sink` (None: drop it), without Spark's start-up banners."""
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace")
        if sink is None or line.startswith(SPARK_BANNERS):
            continue
        try:
            sink.write(line)
            sink.flush()
        except (OSError, ValueError):  # the sink was closed: keep draining the pipe
            sink = None


def java_option(text: str) -> str:
    """`text` as one word of a Spark `extraJavaOptions` value.

    Spark splits the value at whitespace: a word holding whitespace, a quote or a backslash (a
    home directory with a space) goes in double quotes, its own quotes and backslashes escaped.
    """
    if not re.search(r"[\s\"'\\]", text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _log4j_config() -> str:
    return str(resources.files("replay.audit").joinpath("log4j2.properties"))


def audit_session(
    *,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    jvm_log: TextIO | None = sys.__stderr__,
    registration_timeout: float = MASTER_REGISTRATION_TIMEOUT,
    parse_first: Sequence[str] = (),
    class_sharing: str | None = None,
) -> SparkSession:
    """A SparkSession with the `metadata_log` source registered.

    Local masters (the default `local[*]`) get `PYSPARK_PYTHON` = this interpreter and
    `SPARK_LOCAL_IP` = 127.0.0.1 (unless already set: the workers must import this package, and
    a local run needs no network), a few shuffle partitions and quiet logging. `conf` entries
    (`--conf k=v`) are applied last, so they override every default here.

    A bad master URL, or `spark://` masters none of which accepts a connection within
    `MASTER_CONNECT_TIMEOUT`, raise `AuditSessionError` before a JVM starts; a `spark://`
    master that has not registered the application `registration_timeout` seconds after the
    JVM is up raises it too (the stuck start is left to Spark, which gives up by itself about
    a minute later; a CLI run exits, which ends the JVM). When this call
    starts the JVM, its stderr goes to `jvm_log` (default: this process's own stderr, where it
    went before; None: nowhere) without Spark's start-up banners (`SPARK_BANNERS`).

    `parse_first` statements are parsed by Spark's SQL parser before the SparkContext starts:
    when this call starts the JVM, in a small JVM of its own launched at the same time
    (`parser_jvm`), else (or when that one cannot run) in Spark's JVM (`parse_in_jvm`). A
    syntax error raises `AuditSqlError` as soon as that parse ends, well before the start does.

    A driver JVM this call launches maps the class-data-sharing archive of Spark's classes
    (`driver_archive`), or starts its build for the next audits; the build's own training
    drivers give their `class_sharing` JVM options instead.
    """
    chosen = master or LOCAL_MASTER
    reach_masters(check_master(chosen))
    local = chosen.startswith("local")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    log4j = java_option(f"-Dlog4j2.configurationFile=file:{_log4j_config()}")
    if class_sharing is None and SparkContext._gateway is None:
        from replay.audit.driver_archive import sharing_options

        class_sharing = sharing_options()
    driver_options = f"{log4j} {class_sharing or ''}".rstrip()
    settings = {
        "spark.master": chosen,
        "spark.app.name": "mlog audit",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.python.filterPushdown.enabled": "true",
        "spark.driver.extraJavaOptions": driver_options,
        "spark.executor.extraJavaOptions": log4j,
    }
    if local:
        settings["spark.sql.shuffle.partitions"] = LOCAL_SHUFFLE_PARTITIONS
        settings["spark.driver.memory"] = LOCAL_DRIVER_MEMORY
        # Local runs are CPU-bound on few cores: compressing cached columns costs more
        # (building the state replay's cached scan: 37 s -> 29 s at 10M entries) than the
        # memory it saves.
        settings["spark.sql.inMemoryColumnarStorage.compressed"] = "false"
    settings.update(conf or {})
    spark_conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    timeout = registration_timeout if chosen.startswith("spark://") else None
    try:
        # PySpark has no public way to ask whether its JVM runs already (a session stopped in
        # this process keeps it, and a new one reuses it); only a first start launches one,
        # here, with its stderr piped so the banners can be dropped.
        gateway, parsed = None, False
        if SparkContext._gateway is None and parse_first:
            gateway, parsed = _launch_checking(spark_conf, jvm_log, parse_first)
        elif SparkContext._gateway is None:
            gateway = _launch_jvm(spark_conf, jvm_log)
        for statement in () if parsed else parse_first:
            parse_in_jvm(gateway.jvm if gateway is not None else SparkContext._jvm, statement)
        _bounded(
            lambda: (
                SparkContext.getOrCreate(spark_conf)
                if gateway is None
                else SparkContext(conf=spark_conf, gateway=gateway)
            ),
            timeout,
            chosen,
        )
        spark = SparkSession.builder.config(conf=spark_conf).getOrCreate()
    except (AuditSessionError, AuditSqlError):
        raise
    except Exception as exc:
        raise AuditSessionError(f"Spark did not start: {_first_line(exc)}") from exc
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def parse_in_jvm(jvm: Any, statement: str) -> None:
    """Parse `statement` with Spark's own parser in a running JVM (no SparkContext needed).

    Raises `AuditSqlError` with Spark's message (first line) on a syntax error.
    """
    from pyspark.errors import PySparkException

    parser = jvm.org.apache.spark.sql.execution.SparkSqlParser()
    try:
        parser.parsePlan(statement)
    except Exception as exc:
        # A bare gateway raises Py4JJavaError; once a SparkContext runs, PySpark converts it
        # to its own ParseException. Anything else (the JVM gone) is not about the statement.
        java = getattr(exc, "java_exception", None)
        if java is not None:
            message = str(java.getMessage() or java.toString())
        elif isinstance(exc, PySparkException):
            message = str(exc)
        else:
            raise
        raise spark_parse_error(message) from None


def _launch_checking(
    spark_conf: SparkConf, jvm_log: TextIO | None, statements: Sequence[str]
) -> tuple[Any, bool]:
    """Launch Spark's JVM while a parser JVM checks `statements`: (gateway, whether checked).

    The parse is waited for first: a refused statement raises `AuditSqlError` without waiting
    for the launch, whose gateway is then shut down in the background once it is up.
    """
    from replay.audit.parser_jvm import check_statements

    launch = _Background(lambda: _launch_jvm(spark_conf, jvm_log))
    try:
        checked = check_statements(statements, log4j_config=_log4j_config())
    except BaseException:
        launch.discard(shut_down_gateway)
        raise
    return launch.result(), checked


class _Background:
    """A call run on a daemon thread (an exit never waits for it), its outcome kept."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self._call = call
        self._outcome: list[Any] = []
        self._failure: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, name="spark-jvm-launch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._outcome.append(self._call())
        except BaseException as exc:  # handed to the thread that asks for the result
            self._failure.append(exc)

    def result(self) -> Any:
        """The call's value once it returns; its exception raised here if it failed."""
        self._thread.join()
        if self._failure:
            raise self._failure[0]
        return self._outcome[0]

    def discard(self, release: Callable[[Any], None]) -> None:
        """Nobody wants the value: `release` it once the call returns (on a daemon thread)."""

        def wait_and_release() -> None:
            self._thread.join()
            if self._outcome:
                release(self._outcome[0])

        threading.Thread(target=wait_and_release, name="spark-jvm-release", daemon=True).start()


def shut_down_gateway(gateway: Any) -> None:
    """End a PySpark gateway, its session stopped or never used: its JVM exits at end of input."""
    with contextlib.suppress(Exception):  # the JVM may already be gone
        gateway.shutdown()
    with contextlib.suppress(Exception):
        gateway.proc.stdin.close()


def _launch_jvm(spark_conf: SparkConf, jvm_log: TextIO | None) -> Any:
    """PySpark's JVM gateway for `spark_conf`, its stderr forwarded by a daemon thread."""
    from pyspark.java_gateway import launch_gateway

    popen = {"stderr": subprocess.PIPE}
    try:
        gateway = launch_gateway(spark_conf, popen_kwargs=popen)  # type: ignore[no-untyped-call]  # pyspark leaves it untyped
    except Exception:
        from replay.audit.driver_archive import drop_unusable

        kept = drop_unusable(spark_conf.get("spark.driver.extraJavaOptions") or "")
        if kept is None:
            raise
        spark_conf.set("spark.driver.extraJavaOptions", kept)  # the start again, without it
        gateway = launch_gateway(spark_conf, popen_kwargs=popen)  # type: ignore[no-untyped-call]  # as above
    threading.Thread(
        target=_forward_jvm_output,
        args=(gateway.proc.stderr, jvm_log),
        name="spark-jvm-stderr",
        daemon=True,
    ).start()
    return gateway


def _bounded(create: Callable[[], object], timeout: float | None, master: str) -> None:
    """Run `create` (the SparkContext's start), giving up after `timeout` seconds if not None."""
    if timeout is None:
        create()
        return
    failure: list[BaseException] = []

    def start() -> None:
        try:
            create()
        except BaseException as exc:  # handed to the waiting thread, which raises it
            failure.append(exc)

    thread = threading.Thread(target=start, name="spark-context-start", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise AuditSessionError(
            f"the Spark master at {master} accepted a connection but did not register this "
            f"application within {timeout:g} s; check that --master names a Spark master "
            "(standalone masters listen on 7077)"
        )
    if failure:
        raise failure[0]


def _first_line(exc: BaseException) -> str:
    """The Java exception's own one-line text if there is one, else the first line of `exc`."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            return str(java.toString()).splitlines()[0]
        except Exception:  # the JVM may be gone: fall back to the Python text
            pass
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def register(spark: SparkSession) -> None:
    """Register the `metadata_log` data source (and enable Python filter pushdown) in `spark`."""
    from replay.audit.source import MetadataLogDataSource

    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(MetadataLogDataSource)


INTERNAL_RECORD_TYPES = ("ClientWriteRecord",)
"""Record types that are the service's bookkeeping, not changes anyone made.

A ClientWriteRecord stores the answer to an idempotent write beside the write's own records
(so a retry is answered, not applied twice): counting it as a change would count every such
write twice. `read_log` leaves these out unless asked (`internal=True`, `--include-internal`).
"""


def read_log(
    spark: SparkSession,
    log_dir: str | os.PathLike[str],
    *,
    payload: bool = True,
    internal: bool = False,
    columns: Sequence[str] | None = None,
) -> DataFrame:
    """The entries of the log in `log_dir` as a DataFrame (checked to open on the driver first).

    `log_dir` may be an archive URL (`s3://bucket/prefix`, `file:///path`): the archive's run
    is read, each executor fetching its segments through fsspec (`replay.audit.archived`).

    The DataFrame carries the always-true filter `offset >= 0`. Spark (4.1) caches a Python
    source's planned read on the relation and, for a query with no filter to push, reuses the
    plan left by the last pushdown; with a filter in every query, each query plans afresh.
    `payload=False` leaves the `payload` column null, for scans that do not read it.
    `columns` (with `offset` and `record_type`) reads only those columns: the source's batches
    carry nothing else, so Spark converts no column the scan does not use.
    Entries of `INTERNAL_RECORD_TYPES` are left out unless `internal` is true.
    """
    from pyspark.sql import functions as F

    from metadata_log.reader import LogReader
    from replay.audit.archived import is_archive_url, open_archive
    from replay.audit.columns import COLUMN_NAMES, schema_ddl
    from replay.audit.source import SOURCE_NAME

    if columns is not None:
        missing = sorted({"offset", "record_type"} - set(columns))
        unknown = [c for c in columns if c not in COLUMN_NAMES]
        if missing or unknown:
            raise ValueError(
                "read_log's columns must be the table's and include offset and record_type: "
                f"unknown {unknown}, missing {missing}"
            )
    source = os.fspath(log_dir)
    if is_archive_url(source):
        open_archive(source)  # a bad URL, an empty or damaged manifest fail here, in one line
    else:
        with LogReader.open(log_dir) as log:
            log.read_spans()  # a damaged log fails here, with the segment and position
    reader = spark.read.format(SOURCE_NAME)
    if columns is not None:
        reader = reader.schema(schema_ddl(columns))
    if not payload:
        reader = reader.option("payload", "false")
    frame = reader.load(source).where(F.col("offset") >= 0)
    if not internal:
        frame = frame.where(~F.col("record_type").isin(*INTERNAL_RECORD_TYPES))
    return frame
