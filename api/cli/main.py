"""The `mlog` command: the parser of nouns, each filled in by its module, and the dispatch.

Each noun's verbs, flags and handlers live in their own module (`api.cli.topics` for
`mlog topics ...`). A noun's parser is filled in by its module only when that noun is chosen
(or its help asked), so a command imports its own noun's module and what that needs, nothing
of the others: `mlog topics list` starts without the snapshot database's, the server's or
Spark's libraries. When a first pass over the global options finds the noun (`chosen_noun`),
only that noun's parser is built at all. This module then loads the settings and runs the
command, mapping errors to a one-line message and exit code 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO

from api.cli.common import (
    EXIT_DAMAGED,
    EXIT_ERROR,
    EXIT_OK,
    CliError,
    Handler,
    add_global_options,
)
from api.cli.interrupts import (
    EXIT_INTERRUPTED,
    FINISHED_AFTER_WRITE,
    INTERRUPTED,
    INTERRUPTED_AFTER_WRITE,
    quiet_teardown,
)
from api.cli.kafka_tools.vocabulary import KAFKA_TOOLS, kafka_flag_hint, tool_noun
from api.service.settings import Settings, load_settings
from api.write_interrupts import one_command
from metadata_log.errors import LogCorruptionError
from records.errors import MetadataLogError
from replay.sql.errors import SnapshotDatabaseDamagedError

NOUNS = (
    ("brokers", "register and manage brokers"),
    ("topics", "create, delete, describe and list topics"),
    ("configs", "describe and alter configs"),
    ("leaders", "leader election"),
    ("partitions", "partition reassignment"),
    ("image", "the metadata image"),
    ("log", "inspect and maintain the log itself"),
    ("namespaces", "create, list and delete namespaces"),
    ("acls", "add, list and remove ACLs (kafka-acls.sh's flags)"),
    ("users", "set, list and delete users' SCRAM credentials"),
    ("db", "the snapshot database's schema"),
    ("snapshot", "snapshots of the image in SQL"),
    ("history", "log entries that touched a topic/namespace/broker"),
    ("archive", "the archive of sealed segments: list, verify, upload"),
    ("shell", "interactive shell over the image tree"),
    ("console", "a read-only web console over the history (timeline, time travel)"),
    ("serve", "serve the Kafka admin protocol on a TCP port"),
    ("quorum", "format a controller quorum, add and remove controllers, describe it"),
    ("status", "whether running servers are ready (their /readyz)"),
    ("features", "describe, upgrade, downgrade feature levels (metadata.version, ...)"),
    ("audit", "audit queries and state replay in PySpark"),
    ("kafka-topics", "kafka-topics.sh, its flags and output (also as kafka-topics.sh)"),
    ("kafka-configs", "kafka-configs.sh, its flags and output"),
    ("kafka-acls", "kafka-acls.sh, its flags and output"),
    ("kafka-metadata-quorum", "kafka-metadata-quorum.sh, its flags and output"),
    ("kafka-features", "kafka-features.sh, its flags and output"),
)
"""Each noun (its module is `api.cli.<noun>`) and its help, in the order `mlog --help` lists."""

REMOTE_NOUNS = (
    *("brokers", "topics", "configs", "leaders", "partitions", "image", "namespaces", "history"),
    *("acls", "users", "quorum", "features", "console", *KAFKA_TOOLS),
)
"""Commands that run against a server with `--bootstrap-server` (the others need the data
directory: the log's files, the snapshot database, Spark, or the server itself)."""


def option_strings(parser: argparse.ArgumentParser) -> set[str]:
    """Every `--flag` `parser` takes, and those of its subcommands' parsers already filled in.

    argparse has no public way to list a parser's options: its `_actions` and
    `_SubParsersAction` are read here, in this one place.
    """
    found = {s for action in parser._actions for s in action.option_strings if s.startswith("--")}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                if not isinstance(sub, NounParser) or sub.filled:
                    found |= option_strings(sub)
    return found


def _command_parsers(
    parser: argparse.ArgumentParser, argv: Sequence[str]
) -> list[argparse.ArgumentParser]:
    """`parser` and the parsers of the noun and verb `argv` names below it, in turn."""
    found = [parser]
    for token in argv:
        if token == "--":
            break
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction) and token in action.choices:
                parser = action.choices[token]
                if isinstance(parser, NounParser):
                    parser.fill()
                found.append(parser)
    return found


def command_flags(parser: argparse.ArgumentParser, argv: Sequence[str]) -> set[str]:
    """The `--flag`s of the command `argv` names below `parser`: its own, its noun's, its verb's.

    A flag is looked up among its own command's flags: `log truncate --f` is near `--force`,
    not `log dump`'s `--follow`.
    """
    return {
        s
        for each in _command_parsers(parser, argv)
        for action in each._actions
        for s in action.option_strings
        if s.startswith("--")
    }


def command_prog(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str:
    """The name of the command `argv` names below `parser` (`mlog log truncate`), for its help."""
    return _command_parsers(parser, argv)[-1].prog


def mistyped_flag(argv: Sequence[str], known: set[str]) -> str | None:
    """The first `--flag` of `argv` that no parser takes, named with the nearest that one does.

    argparse reports a mistyped global flag by what follows it (`--data-dri foo` becomes
    "invalid choice: 'foo'"); naming the flag itself says what to fix.
    """
    import difflib

    for token in argv:
        if token == "--":
            return None
        flag = token.split("=", 1)[0]
        if not flag.startswith("--") or flag in known:
            continue
        # No abbreviations (as Kafka's tools): a prefix names the flags it starts.
        near = sorted(k for k in known if k.startswith(flag))[:3] or difflib.get_close_matches(
            flag, sorted(known), n=1, cutoff=0.6
        )
        hint = f"; did you mean {' or '.join(near)}?" if near else ""
        return f"unknown option {flag}{hint}"
    return None


class MlogParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr (exit 2), as every error.

    It takes no abbreviated flag (as Kafka's tools): `--f` is not `--force`. Its verbs'
    parsers are of its class, so none of them does either.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    argv: Sequence[str] = ()
    """The arguments being parsed (set by `main`), to name a mistyped flag in any error."""

    root: argparse.ArgumentParser | None = None
    """The parser of `mlog` last built (`build_parser`): where a command's flags are found."""

    def parse_known_args(  # type: ignore[override]  # same call, typeshed spells overloads
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse; the parser of `mlog` notes the arguments, for the errors to name a flag."""
        if self is MlogParser.root:
            MlogParser.argv = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        """Print `PROG: error: MESSAGE (see PROG --help)` and exit 2 (argparse adds usage).

        A mistyped `--flag` in the arguments is the likelier cause of any usage error, so it
        is named instead (with the nearest flag that exists).
        """
        known = command_flags(MlogParser.root or self, MlogParser.argv)
        typo = kafka_flag_hint(self.prog, MlogParser.argv, known)
        typo = typo or mistyped_flag(MlogParser.argv, known)
        if typo is not None:
            prog = self.prog.split(" ")[0]
            see = command_prog(MlogParser.root or self, MlogParser.argv)
            self.exit(EXIT_ERROR, f"{prog}: error: {typo} (see `{see} --help`)\n")
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


class NounParser(MlogParser):
    """The parser of one noun: its module adds the verbs and flags when it is first used."""

    def __init__(self, *args: Any, module: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._module = module

    @property
    def filled(self) -> bool:
        """Whether the noun's verbs and flags were added."""
        return self._module is None

    def fill(self) -> None:
        """Let the noun's module (imported now) add its verbs and flags, once."""
        if self._module is not None:
            module, self._module = self._module, None
            importlib.import_module(module).add_verbs(self)
            if "--data-dir" not in self._option_string_actions:
                # Before the verb too (`mlog topics --bootstrap-server B list`), as after it.
                add_global_options(self)

    def parse_known_args(  # type: ignore[override]  # same call, typeshed spells overloads
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Fill in the verbs, then parse (the top-level parser calls this for the noun)."""
        self.fill()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        """The usage line, verbs included."""
        self.fill()
        return super().format_usage()

    def format_help(self) -> str:
        """The help text, verbs included."""
        self.fill()
        return super().format_help()


DISTRIBUTION = "metadata-log"
"""The installed distribution whose version `mlog --version` prints."""


class VersionAction(argparse.Action):
    """`--version`: print `mlog <version>` and exit 0; the version is looked up only then."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(
            option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=kwargs.get("help")
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        """Print the version and exit (as argparse's own `version` action does)."""
        # importlib.metadata costs as much to import as the rest of a command's start-up.
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version(DISTRIBUTION)
        except PackageNotFoundError:
            parser.exit(
                EXIT_ERROR,
                f"mlog: error: the {DISTRIBUTION} distribution is not installed, so its version "
                "is unknown; install it (pip install .)\n",
            )
        sys.stdout.write(f"mlog {found}\n")
        parser.exit(EXIT_OK)


class _Unsettled(Exception):
    """The first pass cannot tell the noun; the parser of every noun decides."""


class _NounFinder(argparse.ArgumentParser):
    """The first pass over the arguments: the global options and the noun; never prints."""

    def error(self, message: str) -> NoReturn:
        """Give up quietly (argparse would print usage and exit)."""
        raise _Unsettled(message)


def chosen_noun(argv: Sequence[str]) -> str | None:
    """The noun `argv` names, if the global options alone settle it (else None).

    Building the parser of every noun costs more than some commands cost to run, so `main`
    builds only the chosen noun's. Whatever this pass cannot settle (help, --version, an
    unknown noun or option, a malformed value) goes to the parser of every noun, so every
    message stays as it is.
    """
    if "--" in argv:  # argparse treats it differently beside subcommands: leave it to them
        return None
    finder = _NounFinder(prog="mlog", add_help=False, allow_abbrev=False)
    add_global_options(finder, suppress=False)
    finder.add_argument("noun")
    finder.add_argument("rest", nargs=argparse.REMAINDER)
    try:
        found, unknown = finder.parse_known_args(argv)
    except _Unsettled:
        return None
    noun: str = tool_noun(found.noun)
    if unknown or noun not in dict(NOUNS):
        return None
    return noun


def build_parser(*, filled: bool = False, only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of `mlog`: of every noun, or of the noun `only`.

    With `filled`, the nouns' verbs are added now (else when a noun is parsed).
    """
    parser = MlogParser(
        prog="mlog", description="metadata-log: an event-sourced metadata log service"
    )
    parser.add_argument(
        "--version", action=VersionAction, help="print the version of mlog and exit"
    )
    add_global_options(parser, suppress=False)
    MlogParser.root = parser
    nouns = parser.add_subparsers(
        dest="noun", metavar="COMMAND", required=True, parser_class=NounParser
    )
    for noun, text in NOUNS:
        if only is not None and noun != only:
            continue
        module = KAFKA_TOOLS.get(noun, f"api.cli.{noun}")
        aliases = [f"{noun}.sh"] if noun in KAFKA_TOOLS else []
        sub = nouns.add_parser(noun, help=text, module=module, aliases=aliases)
        if noun in REMOTE_NOUNS:
            sub.set_defaults(remote=True)
        if filled:
            sub.fill()
    return parser


def _local_only(args: argparse.Namespace, settings: Settings) -> Settings:
    """Settings for a command that works on the data directory only (log, db, audit, ...).

    `--bootstrap-server` given to it is an error; MLOG_BOOTSTRAP_SERVER in the environment is
    ignored (it names the server for the commands that use one).
    """
    command = f"mlog {args.noun}" + (f" {args.verb}" if getattr(args, "verb", None) else "")
    if args.bootstrap_server:
        raise CliError(
            f"`{command}` works on the data directory only; drop --bootstrap-server (and "
            "give --data-dir)"
        )
    if args.noun == "shell" and not settings.log_dir.exists():
        # Otherwise the error is only "there is no log", while the user meant the server.
        # (Not for every local command: `mlog serve` makes a new data directory.)
        raise CliError(
            f"`{command}` works on the data directory only, not through the server in "
            f"MLOG_BOOTSTRAP_SERVER ({settings.bootstrap_server}), and there is no log in "
            f"{settings.data_dir}; give the data directory with --data-dir"
        )
    return dataclasses.replace(settings, bootstrap_server=None)


def _check_archive_flags(args: argparse.Namespace, settings: Settings) -> None:
    """Refuse `--archive-url` where no history is read; check its URL before anything is.

    `mlog audit` takes its own `--archive-url` (Spark's executors read the archive) and checks
    it itself before Spark starts.
    """
    if args.noun == "audit":
        return
    if getattr(args, "reads_history", False):
        from api.cli.targets import archive_of

        archive_of(settings, args)  # a bad URL or cache: one line, exit 2, nothing read
        return
    for flag in ("archive_url", "archive_cache"):
        if getattr(args, flag, None) is not None:
            command = f"mlog {args.noun}" + (f" {args.verb}" if getattr(args, "verb", None) else "")
            raise CliError(
                f"`{command}` does not read the log's history: drop --{flag.replace('_', '-')} "
                "(it is for history, image show/diff, log dump/verify/digest/prove/trim, shell, "
                "audit and archive)"
            )


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run `mlog`; returns the exit code (0 ok, 1 damaged log data, 2 error, 130 Ctrl-C)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    with one_command() as command:
        try:
            code = _main(argv, out)
        except KeyboardInterrupt:
            # Ctrl-C: one line, no traceback (writes hold it back until they end: interrupts.py).
            # On a terminal the cursor is after the echoed ^C (a prompt, a progress line).
            lead = "\n" if sys.stderr.isatty() else ""
            quiet_teardown()
            if command.settled:  # a second Ctrl-C after the write was answered
                print(f"{lead}{INTERRUPTED_AFTER_WRITE}", file=sys.stderr)
                return EXIT_OK
            print(f"{lead}{INTERRUPTED}", file=sys.stderr)
            return EXIT_INTERRUPTED
        if command.noted:
            print(FINISHED_AFTER_WRITE, file=sys.stderr)
        return code


def _main(argv: list[str], out: TextIO | None) -> int:
    """`main` without the Ctrl-C handling."""
    parser = build_parser(only=chosen_noun(argv))
    MlogParser.argv = argv
    args = parser.parse_args(argv)
    out = out or sys.stdout
    debug = bool(getattr(args, "debug", False))
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        settings = load_settings(
            data_dir=args.data_dir,
            output=args.output,
            debug=debug,
            database_url=args.db,
            bootstrap_server=args.bootstrap_server,
        )
        if settings.bootstrap_server and not getattr(args, "remote", False):
            settings = _local_only(args, settings)
        _check_archive_flags(args, settings)
        if args.command_config and not settings.bootstrap_server:
            raise CliError(
                "--command-config configures the connection to a server: give "
                "--bootstrap-server too, or drop --command-config for the data directory"
            )
        handler: Handler = args.handler
        return handler(args, settings, out)
    except BrokenPipeError:
        # The reader went away (`mlog log dump | head`): not an error. Point stdout at
        # /dev/null so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except (MetadataLogError, OSError) as exc:
        if debug:
            traceback.print_exc()
        message = str(exc) if not isinstance(exc, OSError) else f"{exc.strerror}: {exc.filename}"
        print(f"mlog: error: {message}", file=sys.stderr)
        # Damaged data exits 1, as `log verify` and `snapshot verify` do for it; others 2.
        damaged = isinstance(exc, LogCorruptionError | SnapshotDatabaseDamagedError)
        return EXIT_DAMAGED if damaged else EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
