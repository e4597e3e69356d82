"""`mlog users scram-set|list|delete`: users' SCRAM credentials from the CLI.

`scram-set` reads the password from a file (`--password-file`, one trailing newline dropped)
or from stdin (`--password-stdin`), never from the command line, where other users of the
machine could read it. The CLI draws a random salt and salts the password itself, so only
the salted password is handed on (to the controller on a data directory, over the wire with
`--bootstrap-server`), as Kafka's admin client does; the log stores the salt, the iteration
count and the derived keys only. On a data directory this needs no login: whoever can write
the data directory owns it (as `kafka-storage format --add-scram`).
"""

from __future__ import annotations

import argparse
import secrets
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.common import (
    EXIT_OK,
    CliError,
    add_global_options,
    add_writer_options,
    bounded_int,
    check,
)
from api.cli.output import emit, print_table
from api.cli.targets import open_target
from api.targets import LocalTarget, Target
from records.model import ScramMechanism
from replay.controller.commands import (
    AlterScramResult,
    DescribeScramResult,
    ScramDeletion,
    ScramUpsertion,
)
from replay.security.scram_keys import salted_password
from replay.security.scram_rules import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    mechanism_by_name,
)

if TYPE_CHECKING:
    from api.service.settings import Settings

SALT_BYTES = 32
"""Bytes of the random salt of a new credential (Kafka's admin client draws as many)."""

MAX_PASSWORD_BYTES = 1 << 20
"""The longest password read: far above any real one, and a bound on what is read."""


def mechanism_arg(text: str) -> ScramMechanism:
    """Argument type: SCRAM-SHA-256 or SCRAM-SHA-512."""
    try:
        return mechanism_by_name(text.strip().upper())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"unknown SCRAM mechanism {text!r}; use SCRAM-SHA-256 or SCRAM-SHA-512"
        ) from None


def iterations_arg(text: str) -> int:
    """Argument type: a PBKDF2 iteration count Kafka accepts (4096..16384)."""
    return bounded_int(
        text,
        "an iteration count",
        low=MIN_ITERATIONS,
        high=MAX_ITERATIONS,
        hint=f"Kafka accepts {MIN_ITERATIONS}..{MAX_ITERATIONS}",
    )


class _RefusePassword(argparse.Action):
    """`--password`: refused at once, a password on the command line is visible to others."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        """Stop with a usage error that says where a password goes instead."""
        parser.error(
            "a password on the command line can be read by every user of this machine; "
            "use --password-file FILE or --password-stdin"
        )


def _strip_newline(data: bytes) -> bytes:
    if data.endswith(b"\r\n"):
        return data[:-2]
    if data.endswith(b"\n"):
        return data[:-1]
    return data


def read_password(args: argparse.Namespace) -> str:
    """The password of `--password-file` or `--password-stdin`, one trailing newline dropped."""
    if args.password_file is not None:
        where = f"the password file {args.password_file}"
        with Path(args.password_file).open("rb") as f:
            data = f.read(MAX_PASSWORD_BYTES + 1)
    else:
        where = "stdin"
        stream = sys.stdin.buffer if hasattr(sys.stdin, "buffer") else None
        if stream is not None:
            data = stream.read(MAX_PASSWORD_BYTES + 1)
        else:  # a text stream (tests, embedding): its text as UTF-8
            data = sys.stdin.read(MAX_PASSWORD_BYTES + 1).encode("utf-8")
    if len(data) > MAX_PASSWORD_BYTES:
        raise CliError(f"the password read from {where} is longer than {MAX_PASSWORD_BYTES} bytes")
    data = _strip_newline(data)
    if not data:
        raise CliError(f"the password read from {where} is empty; give a non-empty password")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise CliError(
            f"the password read from {where} is not UTF-8 text; SCRAM clients send passwords "
            "as UTF-8"
        ) from None


def alter(
    target: Target, deletions: list[ScramDeletion], upsertions: list[ScramUpsertion]
) -> list[AlterScramResult]:
    """AlterUserScramCredentials on the data directory or through the server."""
    if isinstance(target, LocalTarget):
        return target.run(
            lambda ctl, image: ctl.alter_user_scram_credentials(image, deletions, upsertions)
        )
    remote = target
    return remote.write(lambda: remote.client.alter_user_scram_credentials(deletions, upsertions))


def describe(target: Target, users: list[str] | None) -> list[DescribeScramResult]:
    """DescribeUserScramCredentials on the data directory's image or through the server."""
    if isinstance(target, LocalTarget):
        from replay.controller.controller import Controller

        return Controller.describe_user_scram_credentials(target.image(), users)
    remote = target
    return remote.wait(lambda: remote.client.describe_user_scram_credentials(users))


def cmd_users_scram_set(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Set (or replace) a user's SCRAM credential for one mechanism."""
    if not args.name:
        raise CliError("--name cannot be empty")
    password = read_password(args)
    mechanism: ScramMechanism = args.mechanism
    salt = secrets.token_bytes(SALT_BYTES)
    upsertion = ScramUpsertion(
        name=args.name,
        mechanism=mechanism,
        iterations=args.iterations,
        salt=salt,
        salted_password=salted_password(mechanism, password.encode("utf-8"), salt, args.iterations),
    )
    with open_target(settings, args) as target:
        (result,) = alter(target, [], [upsertion])
    check(result.outcome)
    emit(
        settings,
        out,
        {"user": args.name, "mechanism": mechanism.mechanism_name, "iterations": args.iterations},
        f"set the {mechanism.mechanism_name} credential of user {args.name} "
        f"({args.iterations} iterations)",
    )
    return EXIT_OK


def cmd_users_list(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Users with SCRAM credentials: mechanism and iterations (never salts or keys)."""
    with open_target(settings, args) as target:
        results = describe(target, args.name or None)
    for result in results:
        check(result.outcome)
    rows = [
        (r.user, _mechanism_name(c.mechanism), c.iterations) for r in results for c in r.credentials
    ]
    if settings.output == "json":
        import json

        items: list[dict[str, Any]] = [
            {"user": user, "mechanism": mechanism, "iterations": iterations}
            for user, mechanism, iterations in rows
        ]
        out.write(json.dumps(items, separators=(",", ":")) + "\n")
        return EXIT_OK
    if not rows:
        out.write("no users with SCRAM credentials; add one with `mlog users scram-set`\n")
        return EXIT_OK
    print_table(rows, ("user", "mechanism", "iterations"), out)
    return EXIT_OK


def _mechanism_name(code: int) -> str:
    try:
        return ScramMechanism(code).mechanism_name
    except ValueError:
        return str(code)


def cmd_users_delete(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Delete a user's SCRAM credential for one mechanism."""
    mechanism: ScramMechanism = args.mechanism
    with open_target(settings, args) as target:
        (result,) = alter(target, [ScramDeletion(name=args.name, mechanism=mechanism)], [])
    check(result.outcome)
    emit(
        settings,
        out,
        {"user": args.name, "mechanism": mechanism.mechanism_name, "deleted": True},
        f"deleted the {mechanism.mechanism_name} credential of user {args.name}",
    )
    return EXIT_OK


def add_verbs(users: argparse.ArgumentParser) -> None:
    """The verbs of `mlog users` and their flags, on the noun's parser."""
    verbs = users.add_subparsers(dest="verb", metavar="VERB", required=True)

    scram_set = verbs.add_parser("scram-set", help="set a user's SCRAM credential")
    add_writer_options(scram_set)
    scram_set.add_argument("--name", required=True, help="the user name (principal User:NAME)")
    scram_set.add_argument(
        "--mechanism", type=mechanism_arg, required=True, help="SCRAM-SHA-256 or SCRAM-SHA-512"
    )
    scram_set.add_argument(
        "--iterations",
        type=iterations_arg,
        default=DEFAULT_ITERATIONS,
        help=f"PBKDF2 iterations, {MIN_ITERATIONS}..{MAX_ITERATIONS} (default "
        f"{DEFAULT_ITERATIONS})",
    )
    scram_set.add_argument("--password", action=_RefusePassword, help=argparse.SUPPRESS)
    source = scram_set.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--password-file", metavar="FILE", help="read the password from FILE (one line)"
    )
    source.add_argument(
        "--password-stdin", action="store_true", help="read the password from stdin"
    )
    scram_set.set_defaults(handler=cmd_users_scram_set)

    listing = verbs.add_parser("list", help="users with SCRAM credentials")
    add_global_options(listing)
    listing.add_argument("--name", action="append", help="only this user (repeatable)")
    listing.set_defaults(handler=cmd_users_list)

    delete = verbs.add_parser("delete", help="delete a user's SCRAM credential")
    add_writer_options(delete)
    delete.add_argument("--name", required=True, help="the user name")
    delete.add_argument(
        "--mechanism", type=mechanism_arg, required=True, help="SCRAM-SHA-256 or SCRAM-SHA-512"
    )
    delete.set_defaults(handler=cmd_users_delete)
