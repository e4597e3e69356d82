"""What every `mlog` command shares: exit codes, the usage error, argument types, global options."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from api.service.settings import OUTPUT_FORMATS
from records.errors import MetadataLogError
from records.fields import INT32_MAX
from replay.controller.errors import ApiError

if TYPE_CHECKING:
    from api.service.settings import Settings
    from replay.controller.commands import Outcome

EXIT_OK = 0
EXIT_DAMAGED = 1
EXIT_ERROR = 2

Handler = Callable[[argparse.Namespace, "Settings", TextIO], int]
"""A command: parsed arguments, settings and stdout in; exit code out."""


class CliError(MetadataLogError):
    """A command-line usage problem; the message says how to fix it."""


def check(outcome: Outcome) -> None:
    """Turn a failed per-item outcome into the command's error (exit 2, one line)."""
    if not outcome.ok:
        raise ApiError(outcome.error_code, outcome.error_message or outcome.error_code.name)


# ---------------------------------------------------------------------- argument types


INT64_MAX = 2**63 - 1
"""The largest value of an Avro/Kafka long (offsets, times, counts)."""


def bounded_int(text: str, what: str, *, low: int, high: int, hint: str) -> int:
    """`text` as an integer in low..high, or an argparse error that says what fits."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what} (an integer)") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"{shorten(text)} is not {what} ({hint})")
    return value


def offset_arg(text: str) -> int:
    """Argument type: an offset (integer -1 ..= 2^63-1)."""
    return bounded_int(text, "an offset", low=-1, high=INT64_MAX, hint=f"must be -1..{INT64_MAX}")


def count_arg(text: str) -> int:
    """Argument type: a count (integer 0 ..= 2^63-1)."""
    return bounded_int(text, "a count", low=0, high=INT64_MAX, hint=f"must be 0..{INT64_MAX}")


def integer_arg(text: str) -> int:
    """Argument type: a 32-bit integer (the command checks its own range and says why)."""
    return bounded_int(
        text,
        "a 32-bit integer",
        low=-INT32_MAX - 1,
        high=INT32_MAX,
        hint=f"must be {-INT32_MAX - 1}..{INT32_MAX}",
    )


def broker_id_arg(text: str) -> int:
    """Argument type: a broker id (integer 0 ..= 2^31-1)."""
    return bounded_int(text, "a broker id", low=0, high=INT32_MAX, hint=f"must be 0..{INT32_MAX}")


def shorten(text: str, limit: int = 60) -> str:
    """`text` for an error message: cut to `limit` characters, saying how long it was."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def broker_id_list(text: str, sep: str) -> tuple[int, ...]:
    """Broker ids separated by `sep` (`1,2,3`); ValueError if one is not a 32-bit integer."""
    ids = tuple(int(b) for b in text.split(sep))
    if any(not -INT32_MAX - 1 <= b <= INT32_MAX for b in ids):
        raise ValueError(f"a broker id is outside {-INT32_MAX - 1}..{INT32_MAX}")
    return ids


def parse_pairs(values: Sequence[str] | None, flag: str) -> list[tuple[str, str]]:
    """`KEY=VALUE` arguments of a repeatable flag as (key, value) pairs."""
    pairs = []
    for item in values or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"{flag} takes KEY=VALUE, got {item!r}")
        pairs.append((key.strip(), value))
    return pairs


# ---------------------------------------------------------------------- shared options


def add_global_options(parser: argparse.ArgumentParser, *, suppress: bool = True) -> None:
    """Add the global options; subcommands accept them too (suppress=True there).

    --data-dir, --output, --db, --bootstrap-server, --command-config and --debug.
    """
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "--data-dir",
        default=default,
        help="data directory (default ./mlog-data, env MLOG_DATA_DIR)",
    )
    parser.add_argument(
        "--output",
        choices=OUTPUT_FORMATS,
        default=default,
        help="output format (default table, env MLOG_OUTPUT)",
    )
    parser.add_argument(
        "--db",
        default=default,
        metavar="URL",
        help="snapshot database URL (default sqlite:///<data-dir>/snapshots.db, env "
        "MLOG_DATABASE_URL)",
    )
    parser.add_argument(
        "--bootstrap-server",
        default=default,
        metavar="HOST:PORT[,HOST:PORT...]",
        help="run against `mlog serve` there instead of the data directory; several are "
        "tried in turn until one answers (env MLOG_BOOTSTRAP_SERVER)",
    )
    parser.add_argument(
        "--command-config",
        default=default,
        metavar="FILE",
        help="client security config for --bootstrap-server: a properties file with Kafka's "
        "or librdkafka's keys (security.protocol, sasl.mechanism, sasl.username, "
        "sasl.password or sasl.jaas.config, ssl.ca.location, ...) (env MLOG_COMMAND_CONFIG)",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="show tracebacks and debug logging",
    )


def add_archive_options(parser: argparse.ArgumentParser, *, reads: bool = True) -> None:
    """`--archive-url URL` and `--archive-cache DIR`: read the history through an archive.

    On a command that reads the data directory's history (`reads`), and on its noun
    (`reads=False`), so they are taken between noun and verb as the global options are;
    `main` refuses them for a verb that does not read the history.
    """
    parser.add_argument(
        "--archive-url",
        default=argparse.SUPPRESS,
        metavar="URL",
        help="read the history below the local log start from this archive (file:///DIR, "
        "s3://BUCKET/PREFIX, ...; env MLOG_ARCHIVE_URL)",
    )
    parser.add_argument(
        "--archive-cache",
        default=argparse.SUPPRESS,
        metavar="DIR",
        help="where archived segments are kept once downloaded (default <data-dir>/archive-cache)",
    )
    if reads:
        parser.set_defaults(reads_history=True)


def add_range_options(parser: argparse.ArgumentParser) -> None:
    """`--gt N`, `--lte N`, `--limit N`: the keyword-only range of every listing of offsets."""
    parser.add_argument("--gt", type=offset_arg, help="only offsets > N")
    parser.add_argument("--lte", type=offset_arg, help="only offsets <= N")
    parser.add_argument("--limit", type=count_arg, help="at most N rows")


def add_writer_options(parser: argparse.ArgumentParser) -> None:
    """The global options plus `--principal`: for commands that append to the log."""
    add_global_options(parser)
    parser.add_argument(
        "--principal", help="who is asking, stored with each record (default User:<login>)"
    )


def given_principal(args: argparse.Namespace) -> str | None:
    """`--principal`, if the command has it and it was given."""
    given: str | None = getattr(args, "principal", None)
    return given or None
