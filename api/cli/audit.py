"""`mlog audit ...`: audit queries and the independent state replay, run in PySpark.

Local Spark (`local[*]`) by default; `--master URL` and `--conf k=v` for a cluster, where the
log directory must be on a filesystem every executor sees. PySpark is imported only when an
audit command runs (it is the optional `audit` extra). An audit says what it is doing on
stderr from its first second (`StatusLine`), shows Spark's stage progress while a query runs,
checks a SQL statement before Spark starts, and stops on Ctrl-C with one line (exit 130);
`mlog audit shell` keeps one Spark session for any number of queries.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.common import EXIT_DAMAGED, EXIT_ERROR, EXIT_OK, CliError, offset_arg
from api.cli.output import print_table
from metadata_log.reader import LogReader
from records.errors import MetadataLogError
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


def _session(
    args: argparse.Namespace,
    settings: Settings,
    status: StatusLine,
    *,
    parse_first: tuple[str, ...] = (),
) -> SparkSession:
    """The audit's SparkSession; `status` says it is starting meanwhile.

    The JVM's own stderr is shown only with --debug: its errors reach the user as the Python
    exception they cause, in one line. `parse_first` statements are parsed by Spark's parser
    as soon as the JVM runs, before the rest of the start.
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
        conf=dict(args.conf or []),
        jvm_log=sys.stderr if settings.debug else None,
        parse_first=parse_first,
    )
    if threading.current_thread() is threading.main_thread():
        # PySpark's SIGINT handler cancels the jobs through py4j from inside the signal
        # handler, on the connection the interrupted call is using, which fails and logs
        # tracebacks; ours only notes the Ctrl-C and raises KeyboardInterrupt.
        signal.signal(signal.SIGINT, _on_ctrl_c)
    return spark


_CTRL_C = threading.Event()
"""Set by Ctrl-C (SIGINT): an error that follows it is the interrupted call's, not a fault."""


def _on_ctrl_c(signum: int, frame: object) -> None:
    _CTRL_C.set()
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
    kind, _ = _output(args)
    columns = answer.columns
    if kind == "json":
        for row in answer.rows:
            out.write(json.dumps({c: _cell(row[c]) for c in columns}, default=str) + "\n")
    else:
        print_table([[_shown(row[c]) for c in columns] for row in answer.rows], columns, out)
    return len(answer.rows)


def emit(frame: DataFrame, args: argparse.Namespace, out: TextIO, name: str = "") -> int:
    """Print (table, JSON lines) or write (parquet) a query's result; returns rows shown."""
    kind, path = _output(args)
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


def _interruptible(
    handler: Callable[[argparse.Namespace, Settings, TextIO, StatusLine], int],
) -> Callable[[argparse.Namespace, Settings, TextIO], int]:
    """A command handler that answers Ctrl-C with one line and exit 130, no traceback.

    Python's own SIGINT handler raises KeyboardInterrupt, in the JVM's start or in a py4j call
    (`_session` puts it back in place of PySpark's); the JVM itself ignores SIGINT, and ends
    with this process. py4j's own log records of the interrupted call are dropped.
    """

    def run(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
        status = StatusLine(sys.stderr)
        quiet = None if settings.debug else _WithoutPy4JRecords()
        if quiet is not None:
            logging.getLogger().addFilter(quiet)
            logging.getLogger("py4j").setLevel(logging.CRITICAL + 1)
        _CTRL_C.clear()
        try:
            return handler(args, settings, out, status)
        except Exception:
            # PySpark's cleanup after an interrupted py4j call (resetting the call site on
            # a new connection) can fail in its turn and replace the KeyboardInterrupt.
            if not _CTRL_C.is_set():
                raise
        except KeyboardInterrupt:
            pass
        finally:
            status.clear()
            if quiet is not None:
                logging.getLogger().removeFilter(quiet)
        # The process ends here, and the JVM with it (its jobs too): nothing to cancel.
        print("mlog: interrupted: the audit was stopped (Ctrl-C)", file=sys.stderr)
        return EXIT_INTERRUPTED

    return run


def _one_line(exc: Exception) -> CliError:
    """A PySpark error (a bad statement, a failed job) as the CLI's one-line error."""
    text = str(exc).strip()
    return CliError(text.splitlines()[0] if text else type(exc).__name__)


def _answer(
    spark: SparkSession,
    log_dir: Path,
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
    kind, path = _output(args)
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
        _output(args)  # a bad --output fails before Spark starts
        statements = _sql_statement(args)
        log_dir = _log_dir(args, settings)
        spark_start = time.monotonic()
        spark = _session(args, settings, status, parse_first=statements)
        spark_seconds = time.monotonic() - spark_start
        _answer(spark, log_dir, query, args, out, status=status)
        _report_time(started, spark_seconds)
        return EXIT_OK

    return _interruptible(handler)


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


def _state_offset(log_dir: Path, at_offset: int) -> None:
    with LogReader.open(log_dir) as log:
        end = log.end_offset
    if not 0 <= at_offset < end:
        raise CliError(
            f"--at-offset {at_offset} is not in the log; its offsets are 0..{end - 1}"
            if end
            else "the log is empty"
        )


def _state(
    spark: SparkSession, log_dir: Path, args: argparse.Namespace, out: TextIO, status: StatusLine
) -> int:
    """Write the Spark replay at `--at-offset` (or, with `--check`, its differences)."""
    from pyspark.errors import PySparkException

    from replay.audit.state import compare_with_image, state_at

    _state_offset(log_dir, args.at_offset)
    started = time.monotonic()
    status.say(f"replaying the log to offset {args.at_offset} ...")
    try:
        with _progress(spark, status, started):
            if args.check:
                from replay.audit.chain import audit_chain

                chain = audit_chain(spark, log_dir, args.at_offset)
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
                differences = compare_with_image(spark, log_dir, args.at_offset)
                status.clear()
                for difference in differences:
                    out.write(difference.text() + "\n")
                if differences:
                    print(
                        f"mlog: {len(differences)} differences between the Spark replay and "
                        f"the image at offset {args.at_offset}",
                        file=sys.stderr,
                    )
                    return EXIT_DAMAGED
                out.write(f"state at offset {args.at_offset}: the Spark replay matches the image\n")
                return EXIT_OK
            state = state_at(spark, log_dir, args.at_offset)
            try:
                kind, path = _output(args)
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


def _cmd_state(
    args: argparse.Namespace, settings: Settings, out: TextIO, status: StatusLine
) -> int:
    """The Spark replay of topics and partitions at an offset; `--check` compares with the image."""
    _output(args)
    log_dir = _log_dir(args, settings)
    _state_offset(log_dir, args.at_offset)
    started = time.monotonic()
    spark = _session(args, settings, status)
    spark_seconds = time.monotonic() - started
    code = _state(spark, log_dir, args, out, status)
    if code == EXIT_OK:
        _report_time(started, spark_seconds)
    return code


cmd_state = _interruptible(_cmd_state)


# ---------------------------------------------------------------------- mlog audit shell

SHELL_HELP = """\
Each line is one query, with the flags it takes on the command line:
  who-changed [--principal P] [--since T] [--until T]
  access-changes [--principal P] [--user U] [--since T] [--until T]
  topic-lifecycle --topic NAME
  partition-modes [--topic NAME]
  churn [--by hour|day]
  state --at-offset N [--check]
  sql "SELECT ..."   (or the statement alone: SELECT ... FROM metadata_log ...)
Every query takes --output table|json|parquet PATH and --include-internal.
help shows this; quit, exit or Ctrl-D ends the shell; Ctrl-C stops the running query.
"""


class _ShellParser(argparse.ArgumentParser):
    """The verbs' parser inside the shell: a bad line is an error to show, not an exit.

    It takes no abbreviated flag, as `mlog`'s own parsers.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> Any:
        raise CliError(message)

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        if message:
            raise CliError(message.strip())
        raise _ShellHelpShown


class _ShellHelpShown(Exception):
    """`QUERY --help` in the shell printed its help; nothing to run."""


def _shell_parser() -> argparse.ArgumentParser:
    parser = _ShellParser(prog="", add_help=False)
    add_verbs(parser, session_flags=False, parser_class=_ShellParser)
    return parser


def _shell_line(parser: argparse.ArgumentParser, line: str) -> argparse.Namespace | None:
    """The parsed query of one shell line (None: a blank line); raises CliError if bad."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    from replay.audit.sql_check import STATEMENT_WORDS

    first = text.split(None, 1)[0]
    if first.upper() in STATEMENT_WORDS or first.startswith("("):
        return parser.parse_args(["sql", text])
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise CliError(f"cannot split the line into words: {exc}") from None
    return parser.parse_args(words)


def _cmd_shell(
    args: argparse.Namespace, settings: Settings, out: TextIO, status: StatusLine
) -> int:
    """`mlog audit shell`: one Spark session, any number of queries read from stdin."""
    log_dir = _log_dir(args, settings)
    started = time.monotonic()
    spark = _session(args, settings, status)
    status.clear()
    interactive = sys.stdin.isatty()
    print(
        f"mlog: audit shell on {log_dir}: Spark ready in {time.monotonic() - started:.1f} s; "
        "type help for the queries, Ctrl-D to end",
        file=sys.stderr,
    )
    parser = _shell_parser()
    failed = False
    while (line := _read_line(interactive)) is not None:
        if line.strip() in ("quit", "exit"):
            break
        if line.strip() in ("help", "?"):
            out.write(SHELL_HELP)
            out.flush()
            continue
        failed = not _shell_query(spark, log_dir, parser, line, out, status=status) or failed
    # Queries piped in are a script: a failed one makes the exit code say so.
    return EXIT_ERROR if failed and not interactive else EXIT_OK


def _read_line(interactive: bool) -> str | None:
    """The next line typed (or piped) into the shell; None at its end (Ctrl-D, end of input)."""
    if not interactive:
        line = sys.stdin.readline()
        return line if line else None
    while True:
        try:
            return input("audit> ")
        except EOFError:
            print(file=sys.stderr)
            return None
        except KeyboardInterrupt:  # at the prompt: a fresh prompt, as Python's own REPL does
            print(file=sys.stderr)


def _shell_query(
    spark: SparkSession,
    log_dir: Path,
    parser: argparse.ArgumentParser,
    line: str,
    out: TextIO,
    *,
    status: StatusLine,
) -> bool:
    """Run one shell line; False if it failed (its error already shown in one line)."""
    started = time.monotonic()
    try:
        query = _shell_line(parser, line)
        if query is None:
            return True
        _output(query)
        if query.verb == "state":
            code = _state(spark, log_dir, query, out, status)
            rows = None
        else:
            from replay.audit.sql_check import precheck

            if query.verb == "sql":
                precheck(query.statement)
            rows = _answer(spark, log_dir, query.query, query, out, status=status)
            code = EXIT_OK
    except _ShellHelpShown:
        return True
    except KeyboardInterrupt:
        return _interrupted(spark, status)
    except (MetadataLogError, OSError) as exc:
        if _CTRL_C.is_set():  # the interrupted call's cleanup failed in its turn
            return _interrupted(spark, status)
        status.clear()
        message = str(exc) if not isinstance(exc, OSError) else f"{exc.strerror}: {exc.filename}"
        print(f"mlog: error: {message}", file=sys.stderr)
        return False
    out.flush()
    counted = "" if rows is None else f"{rows} rows, "
    print(f"mlog: ({counted}{time.monotonic() - started:.1f} s)", file=sys.stderr)
    return code == EXIT_OK


def _interrupted(spark: SparkSession, status: StatusLine) -> bool:
    """Cancel a query stopped by Ctrl-C (its Spark jobs, so the next query has the cores)."""
    status.clear()
    _CTRL_C.clear()
    try:
        spark.sparkContext.cancelAllJobs()
    except Exception as exc:  # the JVM is gone: the next query says so
        print(f"mlog: could not cancel the query's Spark jobs: {exc}", file=sys.stderr)
    print("mlog: query interrupted (Ctrl-C)", file=sys.stderr)
    return False


cmd_shell = _interruptible(_cmd_shell)


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
        shell.set_defaults(handler=cmd_shell)
