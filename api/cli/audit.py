"""`mlog audit ...`: audit queries and the independent state replay, run in PySpark.

Local Spark (`local[*]`) by default; `--master URL` and `--conf k=v` for a cluster, which
reads an archive (`--archive-url`: each executor fetches its segments itself, with the
store's credentials passed as `spark.executorEnv.*`) or a log directory on a filesystem every
executor sees. PySpark is imported only when an
audit command runs (it is the optional `audit` extra). An audit says what it is doing on
stderr from its first second (`StatusLine`), shows Spark's stage progress while a query runs,
checks a SQL statement before Spark starts, and stops on Ctrl-C with one line (exit 130);
`mlog audit shell` (`api.cli.audit_shell`) keeps one Spark session for any number of queries.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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
EXIT_INTERRUPTED = 130
"""Exit code of an audit stopped by Ctrl-C (128 + SIGINT, as shells report it)."""

PLAIN_PROGRESS_INTERVAL = 5.0
"""Seconds between two progress lines when stderr is not a terminal (each is a new line)."""


def _conf_arg(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not a Spark setting; give KEY=VALUE")
    return key.strip(), value


def output_kind(args: argparse.Namespace) -> tuple[str, Path | None]:
    """The answer's format and (parquet) directory, from `--output`; a bad one is refused."""
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


def log_source(args: argparse.Namespace, settings: Settings) -> str | Path:
    """The log an audit reads: `--archive-url` (checked: its manifest read), else the directory.

    Everything is checked here, before Spark starts: a bad URL, an unreachable or empty
    archive, a missing or damaged log are one line.
    """
    url = getattr(args, "archive_url", None)
    if url is not None:
        if args.log_dir:
            raise CliError(
                "give --archive-url (the archive) or --log-dir (a log directory), not both"
            )
        from replay.audit.archived import open_archive

        location, manifest = open_archive(url)
        for start, end in manifest.gaps:
            print(
                f"mlog: warning: the archive has no entry for offsets {start}..{end - 1}: the "
                f"audit reads its history up to offset {manifest.end_offset}",
                file=sys.stderr,
            )
            break
        return location.url
    path = Path(args.log_dir) if args.log_dir else settings.log_dir
    if not path.is_dir():
        raise CliError(
            f"there is no log at {path}; give --data-dir (the log is <data-dir>/log), --log-dir "
            "or --archive-url"
        )
    with LogReader.open(path):
        pass  # fails here, with a clear message, on a damaged log
    return path


def describe_source(source: str | Path) -> str:
    """How messages name the log an audit reads."""
    return f"the archive {source}" if isinstance(source, str) else str(source)


ARCHIVE_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_CA_BUNDLE",
    "GOOGLE_APPLICATION_CREDENTIALS",
)
"""Environment variables of the object stores' clients (boto for s3fs, google-auth for gcsfs)
that executors on a cluster get from the driver (`spark.executorEnv.*`) when an audit reads
an archive: they read its objects themselves. Spark redacts the secret ones (its default
`spark.redaction.regex` matches `secret` and `token`) in its UI and logs."""


def executor_env(master: str, source: str | Path) -> dict[str, str]:
    """`spark.executorEnv.*` settings that give a cluster's executors the archive's credentials.

    None for a directory, or a local master (its executors are threads of the driver's JVM,
    their Python workers children of it, with this process's environment).
    """
    if not isinstance(source, str) or master.startswith("local"):
        return {}
    return {
        f"spark.executorEnv.{name}": os.environ[name] for name in ARCHIVE_ENV if name in os.environ
    }


def start_session(
    args: argparse.Namespace,
    settings: Settings,
    status: StatusLine,
    *,
    parse_first: tuple[str, ...] = (),
    source: str | Path | None = None,
) -> SparkSession:
    """The audit's SparkSession; `status` says it is starting meanwhile.

    The JVM's own stderr is shown only with --debug: its errors reach the user as the Python
    exception they cause, in one line. `parse_first` statements are parsed by Spark's parser
    as soon as the JVM runs, before the rest of the start. For an archive `source` on a
    cluster, the executors get the object store's environment (`executor_env`); `--conf`
    settings come last and override it.
    """
    try:
        from replay.audit.session import LOCAL_MASTER, audit_session, check_master
    except ImportError as exc:  # pragma: no cover - the audit extra is installed in tests
        raise CliError(
            f"mlog audit needs PySpark and pyarrow ({exc}); install metadata-log[audit]"
        ) from None
    master = args.master or LOCAL_MASTER
    check_master(master)  # a bad --master is one line, before any progress is shown
    status.say(f"starting Spark ({master}) ...")
    spark = audit_session(
        master=master,
        conf={**executor_env(master, source or ""), **dict(args.conf or [])},
        jvm_log=sys.stderr if settings.debug else None,
        parse_first=parse_first,
    )
    if not settings.debug:
        _quiet_query_context_loggers()
    if threading.current_thread() is threading.main_thread():
        # PySpark's SIGINT handler cancels the jobs through py4j from inside the signal
        # handler, on the connection the interrupted call is using, which fails and logs
        # tracebacks; ours only notes the Ctrl-C and raises KeyboardInterrupt.
        signal.signal(signal.SIGINT, _on_ctrl_c)
    return spark


def _quiet_query_context_loggers() -> None:
    """Silence PySpark's loggers that print a failed query's error as JSON on stderr.

    An analysis error (an unknown column or table) is logged by PySpark as it is raised
    (`SQLQueryContextLogger`, `DataFrameQueryContextLogger`), then shown by the audit in one
    line: without --debug, only that line.
    """
    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)


CTRL_C = threading.Event()
"""Set by Ctrl-C (SIGINT): an error that follows it is the interrupted call's, not a fault."""


def _on_ctrl_c(signum: int, frame: object) -> None:
    CTRL_C.set()
    raise KeyboardInterrupt


class _WithoutPy4JRecords(logging.Filter):
    """Drops py4j's log records, which Ctrl-C must not show.

    py4j logs an interrupted call on the root logger, traceback and all ("KeyboardInterrupt
    while sending command."); its own loggers (`py4j.*`) are silenced by level.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return "py4j" not in Path(record.pathname).parts


class StatusLine:
    """What an audit is doing, on stderr (stdout holds only results).

    On a terminal one line `mlog: ...` is rewritten in place and erased by `clear()`, so the
    terminal keeps only what follows. Elsewhere (a pipe, a file, CI) each `say` is a line of
    its own, and `progress` lines come at most every `PLAIN_PROGRESS_INTERVAL` seconds.
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.terminal = stream.isatty()
        self.shown = False
        self.last_plain = 0.0

    def say(self, text: str) -> None:
        """Show `text` now (a phase: starting Spark, running the query)."""
        if self.terminal:
            self.stream.write(f"\r\033[Kmlog: {text}")
            self.shown = True
        else:
            self.stream.write(f"mlog: {text}\n")
            self.last_plain = time.monotonic()
        self.stream.flush()

    def progress(self, text: str) -> None:
        """Show `text` (Spark's stage progress): always on a terminal, rate-limited elsewhere."""
        if self.terminal or time.monotonic() - self.last_plain >= PLAIN_PROGRESS_INTERVAL:
            self.say(text)

    def clear(self) -> None:
        """Erase the terminal's status line (nothing to do elsewhere)."""
        if self.terminal and self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False


@contextmanager
def _progress(spark: SparkSession, status: StatusLine, started: float) -> Iterator[None]:
    """Spark's stage progress on `status` while the block runs (a query and its output)."""
    from replay.audit.progress import StageProgress

    def report(summary: str) -> None:
        status.progress(f"running: {summary} ({time.monotonic() - started:.0f} s)")

    with StageProgress(spark.sparkContext, report):
        yield


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Collected:
    """A query's answer once Spark has run it: its rows, or the parquet directory written."""

    columns: list[str]
    rows: list[Any]
    written: Path | None


def emit_rows(answer: Collected, args: argparse.Namespace, out: TextIO) -> int:
    """Print an answer (table or JSON lines), or say where it was written; returns rows shown."""
    if answer.written is not None:
        out.write(f"wrote {answer.written}\n")
        return 0
    kind, _ = output_kind(args)
    columns = answer.columns
    if kind == "json":
        for row in answer.rows:
            out.write(json.dumps({c: _cell(row[c]) for c in columns}, default=str) + "\n")
    else:
        print_table([[_shown(row[c]) for c in columns] for row in answer.rows], columns, out)
    return len(answer.rows)


def emit(frame: DataFrame, args: argparse.Namespace, out: TextIO, name: str = "") -> int:
    """Print (table, JSON lines) or write (parquet) a query's result; returns rows shown."""
    kind, path = output_kind(args)
    if kind == "parquet":
        target = path if not name or path is None else path / name
        frame.write.mode("overwrite").parquet(str(target))
        out.write(f"wrote {target}\n")
        return 0
    return emit_rows(
        Collected(columns=list(frame.columns), rows=frame.collect(), written=None), args, out
    )


Query = Callable[["SparkSession", "DataFrame", argparse.Namespace], "DataFrame"]
"""A named query: the session, the log DataFrame and the command's flags give the answer."""


def interruptible(
    handler: Callable[[argparse.Namespace, Settings, TextIO, StatusLine], int],
) -> Callable[[argparse.Namespace, Settings, TextIO], int]:
    """A command handler that answers Ctrl-C with one line and exit 130, no traceback.

    Python's own SIGINT handler raises KeyboardInterrupt, in the JVM's start or in a py4j call
    (`start_session` puts it back in place of PySpark's); the JVM itself ignores SIGINT, and ends
    with this process. py4j's own log records of the interrupted call are dropped.
    """

    def run(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
        status = StatusLine(sys.stderr)
        quiet = None if settings.debug else _WithoutPy4JRecords()
        if quiet is not None:
            logging.getLogger().addFilter(quiet)
            logging.getLogger("py4j").setLevel(logging.CRITICAL + 1)
        CTRL_C.clear()
        try:
            return handler(args, settings, out, status)
        except Exception:
            # PySpark's cleanup after an interrupted py4j call (resetting the call site on
            # a new connection) can fail in its turn and replace the KeyboardInterrupt.
            if not CTRL_C.is_set():
                raise
        except KeyboardInterrupt:
            pass
        finally:
            status.clear()
            if quiet is not None:
                logging.getLogger().removeFilter(quiet)
        # The process ends here, and the JVM with it (its jobs too): nothing to cancel.
        _exit_at_another_ctrl_c()
        print("mlog: interrupted: the audit was stopped (Ctrl-C)", file=sys.stderr)
        return EXIT_INTERRUPTED

    return run


def _exit_at_another_ctrl_c() -> None:
    """From here on, a Ctrl-C ends the process at once with exit 130.

    The command is ending (the JVM's teardown, at exit, takes a moment). A SIGINT whose handler
    runs in that stretch would raise KeyboardInterrupt outside every handler, and Python would
    end the process by SIGINT (exit -2, not 130): seen once, in a run of the suite beside
    another on two busy cores.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _exit_interrupted)


def _exit_interrupted(signum: int, frame: object) -> None:
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)


_RAISED = re.compile(r"^(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*(?:Error|Damage|Unreachable)): (.+)$")
"""The last line of a Python traceback: `module.ExceptionName: message`."""


def _one_line(exc: Exception) -> CliError:
    """A PySpark error (a bad statement, a failed job) as the CLI's one-line error.

    A job that failed in an executor's Python worker carries the worker's traceback: its
    exception (`ArchiveDamage: s3://... differs ...`) is the line shown, not Spark's preamble.
    """
    text = str(exc).strip()
    if "Traceback (most recent call last)" in text:
        python_part = text.split("JVM stacktrace:", 1)[0]
        raised = [m for line in python_part.splitlines() if (m := _RAISED.match(line.strip()))]
        if raised:
            return CliError(f"{raised[-1][1]}: {raised[-1][2]}")
    return CliError(text.splitlines()[0] if text else type(exc).__name__)


def answer_query(
    spark: SparkSession,
    log_dir: str | Path,
    query: Query,
    args: argparse.Namespace,
    out: TextIO,
    *,
    status: StatusLine,
) -> int:
    """Run a named query on the log and write its answer; returns the rows shown."""
    from pyspark.errors import PySparkException

    from replay.audit.session import read_log

    started = time.monotonic()
    status.say("running the query ...")
    try:
        with _progress(spark, status, started):
            log = read_log(spark, log_dir, internal=args.include_internal)
            frame = query(spark, log, args)
            rows = _collect(frame, args)
        status.clear()
        return emit_rows(rows, args, out)
    except PySparkException as exc:
        raise _one_line(exc) from None


def _collect(frame: DataFrame, args: argparse.Namespace) -> Collected:
    """Run the query: rows in memory (table, json) or written out (parquet)."""
    kind, path = output_kind(args)
    if kind == "parquet":
        frame.write.mode("overwrite").parquet(str(path))
        return Collected(columns=[], rows=[], written=path)
    return Collected(columns=list(frame.columns), rows=frame.collect(), written=None)


def _sql_statement(args: argparse.Namespace) -> tuple[str, ...]:
    statement: str | None = getattr(args, "statement", None)
    if statement is None:
        return ()
    from replay.audit.sql_check import precheck

    precheck(statement)  # instant: a typo in the first word, an open quote or parenthesis
    return (statement,)


def _run(query: Query) -> Callable[[argparse.Namespace, Settings, TextIO], int]:
    def handler(
        args: argparse.Namespace, settings: Settings, out: TextIO, status: StatusLine
    ) -> int:
        started = time.monotonic()
        output_kind(args)  # a bad --output fails before Spark starts
        statements = _sql_statement(args)
        check_query_flags(args)
        log_dir = log_source(args, settings)
        spark_start = time.monotonic()
        spark = start_session(args, settings, status, parse_first=statements, source=log_dir)
        spark_seconds = time.monotonic() - spark_start
        answer_query(spark, log_dir, query, args, out, status=status)
        _report_time(started, spark_seconds)
        return EXIT_OK

    return interruptible(handler)


def _times(args: argparse.Namespace) -> tuple[int | None, int | None]:
    since = parse_time(args.since) if getattr(args, "since", None) else None
    until = parse_time(args.until) if getattr(args, "until", None) else None
    return since, until


def check_query_flags(args: argparse.Namespace) -> None:
    """Refuse the flags a query would refuse, before Spark starts: times, empty names."""
    since, until = _times(args)
    if since is not None and until is not None and since > until:
        raise CliError("--since is after --until; give the earlier time first")
    if getattr(args, "user", None) == "":
        raise CliError("--user needs a user name, e.g. alice")
    topic = getattr(args, "topic", None)
    if topic is not None and not topic.rpartition(":")[2]:
        raise CliError("--topic needs a topic name, e.g. orders or team:orders")


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


def _state_offset(source: str | Path, at_offset: int) -> None:
    if isinstance(source, str):
        from replay.audit.archived import open_archive

        _, manifest = open_archive(source)
        start, end = manifest.start_offset or 0, manifest.end_offset or 0
        where = "the archive"
    else:
        with LogReader.open(source) as log:
            start, end = 0, log.end_offset
        where = "the log"
    if not start <= at_offset < end:
        raise CliError(
            f"--at-offset {at_offset} is not in {where}; its offsets are {start}..{end - 1}"
            if end
            else f"{where} is empty"
        )


def answer_state(
    spark: SparkSession,
    log_dir: str | Path,
    args: argparse.Namespace,
    out: TextIO,
    status: StatusLine,
) -> int:
    """Write the Spark replay at `--at-offset` (or, with `--check`, its differences)."""
    from pyspark.errors import PySparkException

    from replay.audit.state import state_at

    _state_offset(log_dir, args.at_offset)
    started = time.monotonic()
    status.say(f"replaying the log to offset {args.at_offset} ...")
    try:
        with _progress(spark, status, started):
            if args.check:
                return _check_state(spark, log_dir, args.at_offset, out, status)
            state = state_at(spark, log_dir, args.at_offset)
            try:
                kind, path = output_kind(args)
                topics = state.topics.orderBy("namespace", "topic_name")
                partitions = state.partitions.orderBy("namespace", "topic_name", "partition_id")
                if kind == "parquet" and path is not None:
                    emit(topics, args, out, "topics")
                    emit(partitions, args, out, "partitions")
                    return EXIT_OK
                answers = [_collect(topics, args), _collect(partitions, args)]
            finally:
                state.release()
        status.clear()
        if kind == "table":
            out.write(f"topics at offset {args.at_offset}:\n")
        emit_rows(answers[0], args, out)
        if kind == "table":
            out.write(f"\npartitions at offset {args.at_offset}:\n")
        emit_rows(answers[1], args, out)
        return EXIT_OK
    except PySparkException as exc:
        raise _one_line(exc) from None


def _check_state(
    spark: SparkSession, source: str | Path, at_offset: int, out: TextIO, status: StatusLine
) -> int:
    """`state --check`: the chain in Spark tasks, then the Spark replay against the image.

    For an archive the executors read it; the driver replays the image (and takes the
    digest) from a copy of the archived segments up to `at_offset`, downloaded into a
    temporary directory and checked by SHA-256 (`download_view`).
    """
    from replay.audit.chain import audit_chain
    from replay.audit.state import compare_with_image

    with contextlib.ExitStack() as stack:
        local: str | Path = source
        if isinstance(source, str):
            from replay.audit.archived import download_view

            cache = stack.enter_context(tempfile.TemporaryDirectory(prefix="mlog-audit-"))
            local = stack.enter_context(download_view(source, Path(cache), lte=at_offset)).path
        chain = audit_chain(spark, source, at_offset, digest_from=local)
        status.clear()
        out.write(chain.text() + "\n")
        if chain.digest is not None:
            out.write(f"digest at offset {chain.digest.offset}: {chain.digest.token()}\n")
        if not chain.ok:
            print(
                f"mlog: the log's hash chain is broken at offset {chain.first_break}",
                file=sys.stderr,
            )
            return EXIT_DAMAGED
        differences = compare_with_image(spark, source, at_offset, image_from=local)
    status.clear()
    for difference in differences:
        out.write(difference.text() + "\n")
    if differences:
        print(
            f"mlog: {len(differences)} differences between the Spark replay and "
            f"the image at offset {at_offset}",
            file=sys.stderr,
        )
        return EXIT_DAMAGED
    out.write(f"state at offset {at_offset}: the Spark replay matches the image\n")
    return EXIT_OK


def _cmd_state(
    args: argparse.Namespace, settings: Settings, out: TextIO, status: StatusLine
) -> int:
    """The Spark replay of topics and partitions at an offset; `--check` compares with the image."""
    output_kind(args)
    log_dir = log_source(args, settings)
    _state_offset(log_dir, args.at_offset)
    started = time.monotonic()
    spark = start_session(args, settings, status, source=log_dir)
    spark_seconds = time.monotonic() - started
    code = answer_state(spark, log_dir, args, out, status)
    if code == EXIT_OK:
        _report_time(started, spark_seconds)
    return code


cmd_state = interruptible(_cmd_state)


def _common(parser: argparse.ArgumentParser, *, session_flags: bool = True) -> None:
    if session_flags:
        parser.add_argument(
            "--data-dir",
            default=argparse.SUPPRESS,
            help="data directory (default ./mlog-data, env MLOG_DATA_DIR); the log is "
            "<data-dir>/log",
        )
        parser.add_argument(
            "--log-dir", help="the log directory itself (e.g. on a shared filesystem)"
        )
        parser.add_argument(
            "--archive-url",
            metavar="URL",
            help="read the history from this archive (metadata.log.archive.url: s3://BUCKET/"
            "PREFIX, file:///PATH, ...) instead of a log directory; executors read it "
            "themselves, no shared filesystem needed",
        )
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
            "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks"
        )
    parser.add_argument(
        "--output",
        dest="audit_output",
        nargs="+",
        metavar="FORMAT [PATH]",
        help="table (default), json (one object per line) or parquet PATH",
    )
    parser.add_argument(
        "--include-internal",
        action="store_true",
        help="include the service's bookkeeping records (ClientWriteRecord), left out by default",
    )


def _shell_handler(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    from api.cli.audit_shell import cmd_shell

    return cmd_shell(args, settings, out)


def add_verbs(
    audit: argparse.ArgumentParser,
    *,
    session_flags: bool = True,
    parser_class: type[argparse.ArgumentParser] | None = None,
) -> None:
    """The verbs of `mlog audit` and their flags, on the noun's parser.

    `session_flags=False` leaves out the flags that choose the log and start Spark, for the
    queries typed into `mlog audit shell` (which has them once, on its own command line).
    """
    # The shell's parser class turns a bad line into an error; the CLI keeps its parser's class.
    verbs = (
        audit.add_subparsers(dest="verb", metavar="QUERY", required=True)
        if parser_class is None
        else audit.add_subparsers(
            dest="verb", metavar="QUERY", required=True, parser_class=parser_class
        )
    )

    def verb(name: str, help_text: str, query: Query | None) -> argparse.ArgumentParser:
        parser = verbs.add_parser(name, help=help_text)
        _common(parser, session_flags=session_flags)
        if query is not None:
            parser.set_defaults(handler=_run(query), query=query)
        return parser

    lifecycle = verb(
        "topic-lifecycle",
        "every incarnation of a topic name: created, deleted, partitions",
        _lifecycle,
    )
    lifecycle.add_argument("--topic", required=True, help="topic name (namespace:name allowed)")

    who = verb("who-changed", "every change with principal, time, entity", _who)
    who.add_argument("--principal", help="only changes by this principal")
    who.add_argument("--since", help="from this time (ISO-8601 or epoch ms)")
    who.add_argument("--until", help="up to this time (ISO-8601 or epoch ms)")

    access = verb(
        "access-changes",
        "ACLs granted and revoked, credentials set and removed: by whom, for whom, when",
        _access,
    )
    access.add_argument("--principal", help="only changes made by this principal")
    access.add_argument(
        "--user", help="only changes for this user (its credentials, ACLs for it or User:*)"
    )
    access.add_argument("--since", help="from this time (ISO-8601 or epoch ms)")
    access.add_argument("--until", help="up to this time (ISO-8601 or epoch ms)")

    modes = verb("partition-modes", "partition mode timeline and partition deletions", _modes)
    modes.add_argument("--topic", help="only this topic (namespace:name allowed)")

    churn = verb("churn", "creates, deletes, partition changes per period", _churn)
    churn.add_argument("--by", choices=("hour", "day"), default="day", help="period (day)")

    sql = verb("sql", "Spark SQL over the view metadata_log", _sql)
    sql.add_argument("statement", help='e.g. "SELECT record_type, count(*) FROM metadata_log ..."')

    state = verb(
        "state", "topics and partitions at an offset, replayed in Spark (--check: vs image)", None
    )
    state.add_argument("--at-offset", type=offset_arg, required=True, help="the offset N")
    state.add_argument(
        "--check", action="store_true", help="compare with the in-process image; exit 1 if differ"
    )
    state.set_defaults(handler=cmd_state)

    if session_flags:
        shell = verbs.add_parser(
            "shell",
            help="one Spark session for many queries: type them (or pipe them) one per line",
        )
        _common(shell)
        shell.set_defaults(handler=_shell_handler)
