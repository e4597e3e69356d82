r"""`mlog kafka-topics`: kafka-topics.sh's flags and output over mlog's topic calls.

One action of `--create`, `--list`, `--describe`, `--alter` (partitions only, as Kafka's:
configs are kafka-configs' job) or `--delete`; `--topic` is a regular expression for every
action but `--create`, as in Kafka. The answers are Kafka's: `Created topic t.`, one name a
line, `Topic: t\tTopicId: ...` with a tab-indented line per partition; `--alter` and
`--delete` print nothing. The calls are `mlog topics`' own (`api.cli.targets.open_target`).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from api.cli.common import EXIT_OK, CliError, check, integer_arg, parse_pairs
from api.cli.kafka_tools.flags import (
    INTERNAL_TOPICS,
    add_connection_options,
    matching_topics,
    refuse,
    require_target,
)
from api.cli.output import ints
from api.cli.targets import open_target
from api.cli.topics import parse_assignment
from records.model import ConfigResourceType
from replay.controller.errors import ErrorCode

if TYPE_CHECKING:
    from api.service.settings import Settings
    from api.targets import Target
    from records.model import PartitionRecord
    from replay.image import MetadataImage, TopicImage

ACTIONS = ("create", "list", "describe", "alter", "delete")
COLLISION_WARNING = (
    "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore "
    "('_') could collide. To avoid issues it is best to use either, but not both."
)
"""What kafka-topics.sh prints before creating a topic whose name has '.' or '_'."""


def _action(args: argparse.Namespace) -> str:
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise CliError(
            "Command must include exactly one action: --list, --describe, --create, --alter or "
            "--delete"
        )
    return chosen[0]


def _check_flags(args: argparse.Namespace, action: str) -> None:
    """kafka-topics.sh's `checkArgs`: which flags go with which action."""
    if action not in ("list", "describe") and not args.topic:
        raise CliError(f"--{action} needs --topic")
    allowed = {
        "config": ("create", "alter"),
        "partitions": ("create", "alter"),
        "replication_factor": ("create",),
        "replica_assignment": ("create", "alter"),
        "if_not_exists": ("create",),
        "if_exists": ("alter", "describe", "delete"),
        "under_replicated_partitions": ("describe",),
        "unavailable_partitions": ("describe",),
        "under_min_isr_partitions": ("describe",),
        "at_min_isr_partitions": ("describe",),
        "topics_with_overrides": ("describe",),
        "topic_id": ("describe",),
    }
    for dest, actions in allowed.items():
        value = getattr(args, dest)
        if value not in (None, False) and action not in actions:
            flag = "--" + dest.replace("_", "-")
            raise CliError(
                f'Option "[{flag}]" can\'t be used with option "[--{action}]"; it goes with '
                + " or ".join(f"--{a}" for a in actions)
            )
    if (
        action == "create"
        and args.replica_assignment
        and (args.partitions is not None or args.replication_factor is not None)
    ):
        raise CliError(
            'Option "[--replica-assignment]" can\'t be used with option "[--partitions]" or '
            '"[--replication-factor]": it sets both'
        )
    if action == "alter":
        if args.config:
            raise CliError(
                'Option "[--config]" can\'t be used with option "[--alter]" (To alter topic '
                "configurations, the kafka-configs tool can be used: `mlog kafka-configs`.)"
            )
        if args.partitions is None:
            raise CliError("--alter needs --partitions N (the new partition count)")


def cmd_kafka_topics(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Run kafka-topics.sh's one action."""
    require_target(settings, "kafka-topics")
    action = _action(args)
    _check_flags(args, action)
    with open_target(settings, args) as target:
        if action == "create":
            _create(args, target, out)
        elif action == "list":
            names = _names(args, target.image())
            out.write("\n".join(names) + "\n")
        elif action == "describe":
            _describe(args, target.image(), out)
        elif action == "alter":
            _alter(args, target)
        else:
            _delete(args, target)
    return EXIT_OK


def _names(args: argparse.Namespace, image: MetadataImage) -> list[str]:
    """The topics `--topic` selects (every one without it), sorted by name."""
    names = [t.qualified_name for t in image.topics.sorted()]
    return matching_topics(names, args.topic, exclude_internal=args.exclude_internal)


def _existing(args: argparse.Namespace, image: MetadataImage) -> list[str]:
    """The topics `--topic` selects; none is an error unless `--if-exists`."""
    names = _names(args, image)
    if args.topic and not names and not args.if_exists:
        raise CliError(
            f"Topic '{args.topic}' does not exist as expected (`mlog kafka-topics --list` lists "
            "them; --if-exists makes this no error)"
        )
    return names


def _create(args: argparse.Namespace, target: Target, out: TextIO) -> None:
    from replay.controller.commands import CreatableTopic

    if args.replication_factor is not None and not 1 <= args.replication_factor <= 32767:
        raise CliError("The replication factor must be between 1 and 32767 inclusive")
    if args.partitions is not None and args.partitions < 1:
        raise CliError("The partitions must be greater than 0")
    assignments: tuple[tuple[int, tuple[int, ...]], ...] = ()
    if args.replica_assignment:
        assignments = tuple(enumerate(parse_assignment(args.replica_assignment)))
    configs = [(k.strip(), v.strip()) for k, v in parse_pairs(args.config, "--config")]
    if "." in args.topic or "_" in args.topic:
        out.write(COLLISION_WARNING + "\n")
    request = CreatableTopic(
        name=args.topic,
        num_partitions=args.partitions if args.partitions is not None else -1,
        replication_factor=args.replication_factor if args.replication_factor is not None else -1,
        assignments=assignments,
        configs=tuple(configs),
    )
    (result,) = target.create_topics([request], validate_only=False)
    if args.if_not_exists and result.outcome.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
        return
    check(result.outcome)
    out.write(f"Created topic {result.name}.\n")


def _alter(args: argparse.Namespace, target: Target) -> None:
    from replay.controller.commands import CreatePartitionsTopic, TopicRef

    image = target.image()
    names = _existing(args, image)
    requests = []
    for name in names:
        assignments = None
        if args.replica_assignment:
            # Kafka's: the list covers every partition; those past the current count are new.
            topic = image.topics.get_by_name(name)
            current = len(topic.partitions) if topic is not None else 0
            assignments = tuple(parse_assignment(args.replica_assignment)[current:])
        requests.append(
            CreatePartitionsTopic(
                topic=TopicRef(name=name), count=args.partitions, assignments=assignments
            )
        )
    if requests:
        for result in target.create_partitions(requests, validate_only=False):
            check(result.outcome)


def _delete(args: argparse.Namespace, target: Target) -> None:
    from replay.controller.commands import TopicRef

    names = _existing(args, target.image())
    if names:
        for result in target.delete_topics([TopicRef(name=n) for n in names]):
            check(result.outcome)


# ---------------------------------------------------------------------- --describe


def _describe(args: argparse.Namespace, image: MetadataImage, out: TextIO) -> None:
    from replay.controller.commands import ConfigResource
    from replay.controller.config_defs import ConfigSource
    from replay.controller.controller import Controller

    if args.topic_id:
        topics = [t for t in image.topics.sorted() if str(t.topic_id) == args.topic_id.strip()]
        if args.exclude_internal:
            topics = [t for t in topics if t.qualified_name not in INTERNAL_TOPICS]
        if not topics and not args.if_exists:
            raise CliError(f"TopicId '{args.topic_id}' does not exist as expected")
    else:
        names = set(_existing(args, image))
        topics = [t for t in image.topics.sorted() if t.qualified_name in names]
    reports = (
        args.under_replicated_partitions,
        args.unavailable_partitions,
        args.under_min_isr_partitions,
        args.at_min_isr_partitions,
    )
    live = {b.broker_id for b in image.cluster.sorted() if not b.fenced}
    controller = Controller()
    for topic in topics:
        resource = ConfigResource(type=ConfigResourceType.TOPIC, name=topic.qualified_name)
        configs = controller.describe_configs(image, resource)
        overrides = [c for c in configs if c.source != ConfigSource.DEFAULT_CONFIG]
        min_isr = next((int(c.value or 1) for c in configs if c.name == "min.insync.replicas"), 1)
        if not any(reports) and (not args.topics_with_overrides or overrides):
            _topic_line(topic, ",".join(f"{c.name}={c.value}" for c in overrides), out)
        if args.topics_with_overrides:
            continue
        for p in topic.partitions:
            leader = p.leader if p.leader >= 0 else None
            shown = not any(reports) or (
                (args.under_replicated_partitions and _rf(p) > len(p.isr))
                or (args.unavailable_partitions and (leader is None or leader not in live))
                or (args.under_min_isr_partitions and (leader is None or len(p.isr) < min_isr))
                or (args.at_min_isr_partitions and len(p.isr) == min_isr)
            )
            if shown:
                _partition_line(topic.qualified_name, p, out)


def _rf(partition: PartitionRecord) -> int:
    """Kafka's replication factor of a partition: its replicas less those being added."""
    return len(partition.replicas) - len(partition.adding_replicas)


def _topic_line(topic: TopicImage, configs: str, out: TextIO) -> None:
    out.write(
        f"Topic: {topic.qualified_name}\tTopicId: {topic.topic_id}\t"
        f"PartitionCount: {len(topic.partitions)}\t"
        f"ReplicationFactor: {_rf(topic.partitions[0]) if topic.partitions else 0}\t"
        f"Configs: {configs}\n"
    )


def _partition_line(name: str, p: PartitionRecord, out: TextIO) -> None:
    moving = ""
    if p.adding_replicas or p.removing_replicas:
        moving = (
            f"\tAdding Replicas: {ints(p.adding_replicas)}"
            f"\tRemoving Replicas: {ints(p.removing_replicas)}"
        )
    out.write(
        f"\tTopic: {name}\tPartition: {p.partition_id}\t"
        f"Leader: {p.leader if p.leader >= 0 else 'none'}\t"
        f"Replicas: {ints(p.replicas)}\tIsr: {ints(p.isr)}{moving}\tElr: N/A\tLastKnownElr: N/A\n"
    )


# ---------------------------------------------------------------------- the parser


def add_verbs(parser: argparse.ArgumentParser) -> None:
    """kafka-topics.sh's flags, on the noun's parser (it has no verbs: the action is a flag)."""
    add_connection_options(parser)
    for action, text in (
        ("list", "List all available topics."),
        ("create", "Create a new topic."),
        ("delete", "Delete a topic."),
        ("alter", "Alter the number of partitions and replica assignment."),
        ("describe", "List details for the given topics."),
    ):
        parser.add_argument(f"--{action}", action="store_true", help=text)
    parser.add_argument(
        "--topic",
        help="The topic to create, alter, describe or delete; a regular expression except "
        "with --create",
    )
    parser.add_argument("--topic-id", help="The topic-id to describe.")
    parser.add_argument(
        "--config",
        action="append",
        metavar="name=value",
        help="A topic configuration override for the topic being created (repeatable).",
    )
    parser.add_argument(
        "--partitions",
        type=integer_arg,
        metavar="# of partitions",
        help="The number of partitions for the topic being created or altered.",
    )
    parser.add_argument(
        "--replication-factor",
        type=integer_arg,
        metavar="replication factor",
        help="The replication factor for each partition in the topic being created.",
    )
    parser.add_argument(
        "--replica-assignment",
        metavar="broker_id_for_part1_replica1:broker_id_for_part1_replica2,...",
        help="A list of manual partition-to-broker assignments for the topic being created "
        "or altered.",
    )
    for flag, text in (
        ("--under-replicated-partitions", "only partitions whose ISR is short of replicas"),
        ("--unavailable-partitions", "only partitions whose leader is not available"),
        ("--under-min-isr-partitions", "only partitions whose ISR < min.insync.replicas"),
        ("--at-min-isr-partitions", "only partitions whose ISR = min.insync.replicas"),
        ("--topics-with-overrides", "only topics that have overridden configs"),
        ("--if-exists", "only if the topic exists (alter, describe, delete)"),
        ("--if-not-exists", "only if the topic does not exist yet (create)"),
        ("--exclude-internal", "leave out internal topics (__consumer_offsets, ...)"),
    ):
        parser.add_argument(flag, action="store_true", help=text)
    parser.add_argument(
        "--partition-size-limit-per-response",
        type=integer_arg,
        metavar="N",
        help="accepted; mlog answers every partition at once",
    )
    refuse(
        parser,
        "--delete-config",
        "Kafka dropped it in 4.0; use `mlog kafka-configs --entity-type topics --entity-name T "
        "--alter --delete-config K`",
    )
    parser.set_defaults(handler=cmd_kafka_topics)
