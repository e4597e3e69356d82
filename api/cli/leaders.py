"""`mlog leaders elect`: preferred (or unclean) leader election."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, TextIO

from api.cli.common import EXIT_OK, CliError, add_writer_options, check, integer_arg
from api.cli.targets import open_target
from api.cli.topic_options import add_topic_options, optional_topic_ref
from replay.controller.commands import ElectionType, PartitionResult, TopicPartition
from replay.controller.errors import ApiError

if TYPE_CHECKING:
    from api.service.settings import Settings


def cmd_leaders_elect(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Preferred (or unclean) leader election for one partition or all."""
    ref = optional_topic_ref(args)
    partitions = None
    if ref is not None:
        if args.partition is None:
            flag = "--topic-id" if args.topic is None else "--topic"
            raise CliError(
                f"{flag} needs --partition N (or name no topic to elect every partition)"
            )
        partitions = [TopicPartition(topic=ref, partition=args.partition)]
    elif args.partition is not None:
        raise CliError(
            "--partition needs --topic NAME or --topic-id ID (or name neither to elect every "
            "partition)"
        )
    election = ElectionType[args.type.upper()]
    with open_target(settings, args) as target:
        results = target.elect_leaders(partitions, election)
    if partitions is not None:
        check(results[0].outcome)
    failed = [r for r in results if not r.outcome.ok]
    if settings.output == "json":
        out.write(
            json.dumps(
                [
                    {
                        "topic": r.topic,
                        "partition": r.partition,
                        "error_code": int(r.outcome.error_code),
                        "error": r.outcome.error_message,
                    }
                    for r in results
                ]
            )
            + "\n"
        )
        return _failed(failed, len(results))
    if not results:
        out.write(
            "every partition already has its preferred leader\n"
            if election == ElectionType.PREFERRED
            else "every partition already has a live leader\n"
        )
    for r in results:
        status = "elected" if r.outcome.ok else f"failed: {r.outcome.error_message}"
        out.write(f"{r.topic}-{r.partition}: {status}\n")
    return _failed(failed, len(results))


def _failed(failed: list[PartitionResult], total: int) -> int:
    """EXIT_OK, or the error (exit 2) naming how many partitions failed; results are printed."""
    if not failed:
        return EXIT_OK
    first = failed[0].outcome
    raise ApiError(
        first.error_code,
        f"leader election failed for {len(failed)} of {total} partition(s), e.g. "
        f"{failed[0].topic}-{failed[0].partition}: {first.error_message}",
    )


def add_verbs(leaders: argparse.ArgumentParser) -> None:
    """The verbs of `mlog leaders` and their flags, on the noun's parser."""
    verbs = leaders.add_subparsers(dest="verb", metavar="VERB", required=True)
    elect = verbs.add_parser("elect", help="elect preferred (or unclean) leaders")
    add_writer_options(elect)
    add_topic_options(elect)
    elect.add_argument("--partition", type=integer_arg, help="partition id (with --topic)")
    elect.add_argument(
        "--type", choices=("preferred", "unclean"), default="preferred", help="election type"
    )
    elect.set_defaults(handler=cmd_leaders_elect)
