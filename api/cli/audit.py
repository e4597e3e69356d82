"""`mlog audit ...`: audit queries and the independent state replay, run in PySpark.

Local Spark (`local[*]`) by default; `--master URL` and `--conf k=v` for a cluster, where the
log directory must be on a filesystem every executor sees. PySpark is imported only when an
audit command runs (it is the optional `audit` extra).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.common import EXIT_DAMAGED, EXIT_OK, CliError, offset_arg
from api.cli.output import print_table
from metadata_log.reader import LogReader
from replay.timetravel import parse_time

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from api.service.settings import Settings

AUDIT_OUTPUTS = ("table", "json", "parquet")


def _conf_arg(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not a Spark setting; give KEY=VALUE")
    return key.strip(), value


def _output(args: argparse.Namespace) -> tuple[str, Path | None]:
    given: list[str] = args.audit_output or ["table"]
    kind = given[0]
    if kind not in AUDIT_OUTPUTS:
        raise CliError(f"--output must be one of {', '.join(AUDIT_OUTPUTS)}, not {kind!r}")
    if kind == "parquet":
        if len(given) != 2:
            raise CliError("--output parquet needs a directory to write: --output parquet PATH")
        return kind, Path(given[1])
    if len(given) != 1:
        raise CliError(f"--output {kind} takes no path")
    return kind, None


def _log_dir(args: argparse.Namespace, settings: Settings) -> Path:
    path = Path(args.log_dir) if args.log_dir else settings.log_dir
    if not path.is_dir():
        raise CliError(
            f"there is no log at {path}; give --data-dir (the log is <data-dir>/log) or --log-dir"
        )
    with LogReader.open(path):
        pass  # fails here, with a clear message, on a damaged log
    return path


def _session(args: argparse.Namespace, settings: Settings) -> SparkSession:
    """The audit's SparkSession, with one transient progress line on a terminal meanwhile.

    The JVM's own stderr is shown only with --debug: its errors reach the user as the Python
    exception they cause, in one line.
    """
    try:
        from replay.audit.session import LOCAL_MASTER, audit_session, check_master
    except ImportError as exc:  # pragma: no cover - the audit extra is installed in tests
        raise CliError(
            f"mlog audit needs PySpark and pyarrow ({exc}); install metadata-log[audit]"
        ) from None
    master = args.master or LOCAL_MASTER
    check_master(master)  # a bad --master is one line, before any progress is shown
    with SparkStart(master, sys.stderr):
        return audit_session(
            master=master,
            conf=dict(args.conf or []),
            jvm_log=sys.stderr if settings.debug else None,
        )


class SparkStart:
    """Shows `mlog: starting Spark (MASTER) ...` on a terminal until the session is up.

    The line is erased when Spark is up (or fails), so a terminal keeps only what follows;
    anything but a terminal gets nothing.
    """

    def __init__(self, master: str, stream: TextIO) -> None:
        self.master = master
        self.stream = stream

    def __enter__(self) -> SparkStart:
        if self.stream.isatty():
            self.stream.write(f"mlog: starting Spark ({self.master}) ...")
            self.stream.flush()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.stream.isatty():
            self.stream.write("\r\033[K")
            self.stream.flush()


def _report_time(started: float, spark_start: float) -> None:
    """One line on stderr with the time the audit took (stdout stays the result alone)."""
    total = time.monotonic() - started
    print(f"mlog: audit took {total:.1f} s (Spark start {spark_start:.1f} s)", file=sys.stderr)


def _cell(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat(timespec="milliseconds")
    if isinstance(value, list):
        return [_cell(v) for v in value]
    if isinstance(value, dict):
        return {k: _cell(v) for k, v in value.items()}
    if hasattr(value, "asDict"):
        return _cell(value.asDict())
    return value


def _shown(value: Any) -> str:
    value = _cell(value)
    if value is None:
        return "-"
    if isinstance(value, list | dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def emit(frame: DataFrame, args: argparse.Namespace, out: TextIO, name: str = "") -> int:
    """Print (table, JSON lines) or write (parquet) a query's result; returns rows shown."""
    kind, path = _output(args)
    if kind == "parquet":
        target = path if not name or path is None else path / name
        frame.write.mode("overwrite").parquet(str(target))
        out.write(f"wrote {target}\n")
        return 0
    rows = frame.collect()
    columns = frame.columns
    if kind == "json":
        for row in rows:
            out.write(json.dumps({c: _cell(row[c]) for c in columns}, default=str) + "\n")
    else:
        print_table([[_shown(row[c]) for c in columns] for row in rows], columns, out)
    return len(rows)


def _run(
    query: Callable[[SparkSession, DataFrame, argparse.Namespace], DataFrame],
) -> Callable[[argparse.Namespace, Settings, TextIO], int]:
    def handler(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
        started = time.monotonic()
        _output(args)  # a bad --output fails before Spark starts
        log_dir = _log_dir(args, settings)
        spark_start = time.monotonic()
        spark = _session(args, settings)
        spark_seconds = time.monotonic() - spark_start
        from pyspark.errors import PySparkException

        from replay.audit.session import read_log

        try:
            frame = query(spark, read_log(spark, log_dir), args)
            emit(frame, args, out)
        except PySparkException as exc:  # a bad statement, a failed job: one line
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CliError(first) from None
        _report_time(started, spark_seconds)
        return EXIT_OK

    return handler


def _times(args: argparse.Namespace) -> tuple[int | None, int | None]:
    since = parse_time(args.since) if args.since else None
    until = parse_time(args.until) if args.until else None
    return since, until


def _lifecycle(spark: SparkSession, log: DataFrame, args: argparse.Namespace) -> DataFrame:
    from replay.audit.queries import topic_lifecycle

    return topic_lifecycle(log, args.topic)


def _who(spark: SparkSession, log: DataFrame, args: argparse.Namespace) -> DataFrame:
    from replay.audit.queries import who_changed

    since, until = _times(args)
    return who_changed(log, principal=args.principal, since_ms=since, until_ms=until)


def _access(spark: SparkSession, log: DataFrame, args: argparse.Namespace) -> DataFrame:
    from replay.audit.access import access_changes

    since, until = _times(args)
    return access_changes(
        log, principal=args.principal, user=args.user, since_ms=since, until_ms=until
    )


def _modes(spark: SparkSession, log: DataFrame, args: argparse.Namespace) -> DataFrame:
    from replay.audit.queries import partition_modes

    return partition_modes(log, topic=args.topic)


def _churn(spark: SparkSession, log: DataFrame, args: argparse.Namespace) -> DataFrame:
    from replay.audit.queries import churn

    return churn(log, by=args.by)


def _sql(spark: SparkSession, log: DataFrame, args: argparse.Namespace) -> DataFrame:
    from replay.audit.queries import sql

    return sql(spark, log, args.statement)


def cmd_state(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """The Spark replay of topics and partitions at an offset; `--check` compares with the image."""
    _output(args)
    log_dir = _log_dir(args, settings)
    with LogReader.open(log_dir) as log:
        end = log.end_offset
    if not 0 <= args.at_offset < end:
        raise CliError(
            f"--at-offset {args.at_offset} is not in the log; its offsets are 0..{end - 1}"
            if end
            else "the log is empty"
        )
    started = time.monotonic()
    spark = _session(args, settings)
    spark_seconds = time.monotonic() - started
    from replay.audit.state import compare_with_image, state_at

    if args.check:
        from replay.audit.chain import audit_chain

        chain = audit_chain(spark, log_dir, args.at_offset)
        out.write(chain.text() + "\n")
        if chain.digest is not None:
            out.write(f"digest at offset {chain.digest.offset}: {chain.digest.token()}\n")
        if not chain.ok:
            print(
                f"mlog: the log's hash chain is broken at offset {chain.first_break}",
                file=sys.stderr,
            )
            return EXIT_DAMAGED
        differences = compare_with_image(spark, log_dir, args.at_offset)
        for difference in differences:
            out.write(difference.text() + "\n")
        if differences:
            print(
                f"mlog: {len(differences)} differences between the Spark replay and the image "
                f"at offset {args.at_offset}",
                file=sys.stderr,
            )
            return EXIT_DAMAGED
        out.write(f"state at offset {args.at_offset}: the Spark replay matches the image\n")
        _report_time(started, spark_seconds)
        return EXIT_OK
    state = state_at(spark, log_dir, args.at_offset)
    try:
        kind, _ = _output(args)
        if kind == "table":
            out.write(f"topics at offset {args.at_offset}:\n")
        emit(state.topics.orderBy("namespace", "topic_name"), args, out, "topics")
        if kind == "table":
            out.write(f"\npartitions at offset {args.at_offset}:\n")
        emit(
            state.partitions.orderBy("namespace", "topic_name", "partition_id"),
            args,
            out,
            "partitions",
        )
    finally:
        state.release()
    _report_time(started, spark_seconds)
    return EXIT_OK


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        default=argparse.SUPPRESS,
        help="data directory (default ./mlog-data, env MLOG_DATA_DIR); the log is <data-dir>/log",
    )
    parser.add_argument("--log-dir", help="the log directory itself (e.g. on a shared filesystem)")
    parser.add_argument(
        "--master", help="Spark master URL (default local[*], a local Spark in this process)"
    )
    parser.add_argument(
        "--conf",
        action="append",
        type=_conf_arg,
        metavar="KEY=VALUE",
        help="a Spark setting (repeatable), e.g. --conf spark.executor.memory=4g",
    )
    parser.add_argument(
        "--output",
        dest="audit_output",
        nargs="+",
        metavar="FORMAT [PATH]",
        help="table (default), json (one object per line) or parquet PATH",
    )
    parser.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks"
    )


def add_verbs(audit: argparse.ArgumentParser) -> None:
    """The verbs of `mlog audit` and their flags, on the noun's parser."""
    verbs = audit.add_subparsers(dest="verb", metavar="QUERY", required=True)

    lifecycle = verbs.add_parser(
        "topic-lifecycle", help="every incarnation of a topic name: created, deleted, partitions"
    )
    _common(lifecycle)
    lifecycle.add_argument("--topic", required=True, help="topic name (namespace:name allowed)")
    lifecycle.set_defaults(handler=_run(_lifecycle))

    who = verbs.add_parser("who-changed", help="every change with principal, time, entity")
    _common(who)
    who.add_argument("--principal", help="only changes by this principal")
    who.add_argument("--since", help="from this time (ISO-8601 or epoch ms)")
    who.add_argument("--until", help="up to this time (ISO-8601 or epoch ms)")
    who.set_defaults(handler=_run(_who))

    access = verbs.add_parser(
        "access-changes",
        help="ACLs granted and revoked, credentials set and removed: by whom, for whom, when",
    )
    _common(access)
    access.add_argument("--principal", help="only changes made by this principal")
    access.add_argument(
        "--user", help="only changes for this user (its credentials, ACLs for it or User:*)"
    )
    access.add_argument("--since", help="from this time (ISO-8601 or epoch ms)")
    access.add_argument("--until", help="up to this time (ISO-8601 or epoch ms)")
    access.set_defaults(handler=_run(_access))

    modes = verbs.add_parser(
        "partition-modes", help="partition mode timeline and partition deletions"
    )
    _common(modes)
    modes.add_argument("--topic", help="only this topic (namespace:name allowed)")
    modes.set_defaults(handler=_run(_modes))

    churn = verbs.add_parser("churn", help="creates, deletes, partition changes per period")
    _common(churn)
    churn.add_argument("--by", choices=("hour", "day"), default="day", help="period (day)")
    churn.set_defaults(handler=_run(_churn))

    sql = verbs.add_parser("sql", help="Spark SQL over the view metadata_log")
    _common(sql)
    sql.add_argument("statement", help='e.g. "SELECT record_type, count(*) FROM metadata_log ..."')
    sql.set_defaults(handler=_run(_sql))

    state = verbs.add_parser(
        "state", help="topics and partitions at an offset, replayed in Spark (--check: vs image)"
    )
    _common(state)
    state.add_argument("--at-offset", type=offset_arg, required=True, help="the offset N")
    state.add_argument(
        "--check", action="store_true", help="compare with the in-process image; exit 1 if differ"
    )
    state.set_defaults(handler=cmd_state)
