"""`mlog audit shell`: one Spark session for any number of audit queries, typed or piped.

Each line is one query with the flags it takes on the command line (`api.cli.audit`'s verbs,
without the flags that choose the log and start Spark, given once on the shell's command line),
or a SQL statement alone. A SQL line gets the checks of `mlog audit sql`: the instant ones
(`did you mean SELECT?`, an open quote or parenthesis), then Spark's own parser in the running
JVM (`SQL error: [PARSE_SYNTAX_ERROR] ...`), before anything runs.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.audit import (
    CTRL_C,
    StatusLine,
    add_verbs,
    answer_query,
    answer_state,
    check_query_flags,
    describe_source,
    interruptible,
    log_source,
    output_kind,
    start_session,
)
from api.cli.common import EXIT_ERROR, EXIT_OK, CliError
from records.errors import MetadataLogError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from api.service.settings import Settings

VERBS = (
    "who-changed",
    "access-changes",
    "topic-lifecycle",
    "partition-modes",
    "churn",
    "state",
    "sql",
)
"""The queries a shell line may start with."""

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
    from replay.audit.sql_check import STATEMENT_WORDS, precheck

    first = text.split(None, 1)[0]
    if first.upper() in STATEMENT_WORDS or first.startswith("("):
        return parser.parse_args(["sql", text])
    if first not in VERBS and not first.startswith("-"):
        # Neither a query nor a statement: a mistyped statement (`SELEC ...`) gets the hint
        # `mlog audit sql` gives; anything else argparse's list of the queries.
        try:
            precheck(text)
        except MetadataLogError as exc:
            if "did you mean" in str(exc):
                raise
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise CliError(f"cannot split the line into words: {exc}") from None
    return parser.parse_args(words)


def _cmd_shell(
    args: argparse.Namespace, settings: Settings, out: TextIO, status: StatusLine
) -> int:
    """`mlog audit shell`: one Spark session, any number of queries read from stdin."""
    log_dir = log_source(args, settings)
    started = time.monotonic()
    spark = start_session(args, settings, status, source=log_dir)
    status.clear()
    interactive = sys.stdin.isatty()
    print(
        f"mlog: audit shell on {describe_source(log_dir)}: Spark ready in "
        f"{time.monotonic() - started:.1f} s; type help for the queries, Ctrl-D to end",
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
    log_dir: str | Path,
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
        output_kind(query)
        check_query_flags(query)
        if query.verb == "state":
            code = answer_state(spark, log_dir, query, out, status)
            rows = None
        else:
            from replay.audit.session import parse_in_jvm
            from replay.audit.sql_check import precheck

            if query.verb == "sql":
                precheck(query.statement)
                parse_in_jvm(spark.sparkContext._jvm, query.statement)
            rows = answer_query(spark, log_dir, query.query, query, out, status=status)
            code = EXIT_OK
    except _ShellHelpShown:
        return True
    except KeyboardInterrupt:
        return _interrupted(spark, status)
    except (MetadataLogError, OSError) as exc:
        if CTRL_C.is_set():  # the interrupted call's cleanup failed in its turn
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
    CTRL_C.clear()
    try:
        spark.sparkContext.cancelAllJobs()
    except Exception as exc:  # the JVM is gone: the next query says so
        print(f"mlog: could not cancel the query's Spark jobs: {exc}", file=sys.stderr)
    print("mlog: query interrupted (Ctrl-C)", file=sys.stderr)
    return False


cmd_shell = interruptible(_cmd_shell)
