"""What Kafka's tools share: their connection flags, refusals, tables and topic patterns."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.common import EXIT_ERROR, CliError, add_global_options

if TYPE_CHECKING:
    from api.service.settings import Settings

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
"""Kafka's internal topics (`Topic.isInternal`), which `--exclude-internal` leaves out."""


class Refuse(argparse.Action):
    """A flag of Kafka's tool that mlog does not support: one line naming it, exit 2."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        self.why: str = kwargs.pop("why")
        kwargs.setdefault("help", f"not supported: {self.why}")
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        """Stop: the flag is Kafka's, and mlog does not do what it asks."""
        parser.exit(
            EXIT_ERROR, f"{parser.prog}: error: {option_string} is not supported: {self.why}\n"
        )


def refuse(
    parser: argparse.ArgumentParser, flag: str, why: str, *, takes_value: bool = True
) -> None:
    """Add Kafka's `flag` to `parser` as refused, saying `why` (and what to do instead)."""
    parser.add_argument(flag, action=Refuse, nargs=None if takes_value else 0, why=why)


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """`--bootstrap-server`, `--command-config` (mlog's global ones) and `--bootstrap-controller`.

    A quorum node answers Kafka's admin APIs itself, so `--bootstrap-controller` names the
    same servers as `--bootstrap-server`.
    """
    add_global_options(parser)
    parser.add_argument(
        "--bootstrap-controller",
        dest="bootstrap_server",
        default=argparse.SUPPRESS,
        metavar="HOST:PORT[,HOST:PORT...]",
        help="the quorum's nodes (the same as --bootstrap-server: they serve Kafka's APIs)",
    )


def require_target(settings: Settings, tool: str) -> None:
    """Refuse early, naming `--bootstrap-server`, when neither a server nor a log is given.

    Kafka's tools need a server; mlog's also run on a data directory, which must hold a log.
    """
    if not settings.bootstrap_server and not settings.log_dir.exists():
        raise CliError(
            f"{tool} needs --bootstrap-server HOST:PORT (or --data-dir of an mlog data "
            f"directory; {settings.data_dir} has no log)"
        )


def require_server(settings: Settings, tool: str) -> None:
    """Refuse to run without a server, as Kafka's tools do."""
    if not settings.bootstrap_server:
        raise CliError(
            f"{tool} needs a running server: give --bootstrap-server HOST:PORT (or "
            "MLOG_BOOTSTRAP_SERVER)"
        )


def print_kafka_table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], out: TextIO
) -> None:
    """Kafka's `ToolsUtils.prettyPrintTable`: each cell padded to its column, then a tab."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        out.write("".join(c.ljust(w) + "\t" for c, w in zip(row, widths, strict=True)) + "\n")


def topic_pattern(text: str) -> re.Pattern[str]:
    """Kafka's `IncludeList`: `--topic` is a regular expression (`,` as `|`), matched whole."""
    try:
        return re.compile(text.strip().replace(",", "|"))
    except re.error as exc:
        raise CliError(f"--topic {text!r} is not a regular expression ({exc})") from None


def matching_topics(
    names: Sequence[str], pattern: str | None, *, exclude_internal: bool
) -> list[str]:
    """The topic names `--topic` (a pattern) selects, sorted, internal ones kept or left out."""
    chosen = sorted(n for n in names if not (exclude_internal and n in INTERNAL_TOPICS))
    if pattern is None:
        return chosen
    regex = topic_pattern(pattern)
    return [n for n in chosen if regex.fullmatch(n)]
