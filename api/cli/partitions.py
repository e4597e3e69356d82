"""`mlog partitions reassign|list-reassignments`: move a partition's replicas."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, TextIO

from api.cli.common import (
    EXIT_OK,
    CliError,
    add_global_options,
    add_writer_options,
    broker_id_list,
    check,
    integer_arg,
    shorten,
)
from api.cli.output import emit, ints, print_table
from api.cli.targets import fetch_image, open_target
from api.cli.topic_options import add_topic_options, topic_ref
from replay.controller.commands import Reassignment, TopicPartition
from replay.controller.controller import Controller

if TYPE_CHECKING:
    from api.service.settings import Settings


def cmd_partitions_reassign(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Move a partition to new replicas, or cancel its reassignment."""
    ref = topic_ref(args)
    if (args.replicas is None) == (not args.cancel):
        raise CliError("give --replicas 1,2,3 or --cancel")
    replicas = None
    if args.replicas is not None:
        try:
            replicas = broker_id_list(args.replicas, ",")
        except ValueError:
            raise CliError(
                f"--replicas takes 32-bit broker ids like 1,2,3, got {shorten(args.replicas)!r}"
            ) from None
    request = Reassignment(
        partition=TopicPartition(topic=ref, partition=args.partition), replicas=replicas
    )
    with open_target(settings, args) as target:
        (result,) = target.reassign([request])
        partition = None
        topic = target.image().topics.get_by_name(result.topic) if result.outcome.ok else None
        if topic is not None and args.partition < len(topic.partitions):
            partition = topic.partitions[args.partition]
    check(result.outcome)
    state = (
        ""
        if partition is None
        else (
            f"; replicas now {ints(partition.replicas)}, isr {ints(partition.isr)}, leader "
            f"{partition.leader}"
            + (" (reassignment in progress)" if partition.adding_replicas else "")
        )
    )
    emit(
        settings,
        out,
        {
            "topic": result.topic,
            "partition": result.partition,
            "replicas": None if partition is None else list(partition.replicas),
            "in_progress": bool(
                partition and (partition.adding_replicas or partition.removing_replicas)
            ),
        },
        f"{'cancelled reassignment of' if args.cancel else 'reassigned'} "
        f"{result.topic}-{result.partition}{state}",
    )
    return EXIT_OK


def cmd_partitions_list_reassignments(
    args: argparse.Namespace, settings: Settings, out: TextIO
) -> int:
    """Partitions with a reassignment in progress."""
    image = fetch_image(settings, args)
    items = Controller().list_reassignments(image)
    if settings.output == "json":
        out.write(
            json.dumps(
                [
                    {
                        "topic": t.qualified_name,
                        "partition": p.partition_id,
                        "replicas": list(p.replicas),
                        "adding": list(p.adding_replicas),
                        "removing": list(p.removing_replicas),
                    }
                    for t, p in items
                ]
            )
            + "\n"
        )
        return EXIT_OK
    rows = [
        (
            t.qualified_name,
            p.partition_id,
            ints(p.replicas),
            ints(p.adding_replicas) or "-",
            ints(p.removing_replicas) or "-",
        )
        for t, p in items
    ]
    print_table(rows, ("topic", "partition", "replicas", "adding", "removing"), out)
    return EXIT_OK


def add_verbs(partitions: argparse.ArgumentParser) -> None:
    """The verbs of `mlog partitions` and their flags, on the noun's parser."""
    verbs = partitions.add_subparsers(dest="verb", metavar="VERB", required=True)
    reassign = verbs.add_parser("reassign", help="move a partition's replicas")
    add_writer_options(reassign)
    add_topic_options(reassign)
    reassign.add_argument("--partition", type=integer_arg, required=True, help="partition id")
    reassign.add_argument("--replicas", help="target replicas, e.g. 1,2,3 (first = preferred)")
    reassign.add_argument("--cancel", action="store_true", help="cancel the reassignment")
    reassign.set_defaults(handler=cmd_partitions_reassign)
    listing = verbs.add_parser("list-reassignments", help="reassignments in progress")
    add_global_options(listing)
    listing.set_defaults(handler=cmd_partitions_list_reassignments)
