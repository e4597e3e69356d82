"""`mlog topics`: create, delete, describe, list, add-partitions, alter, move, purge-pending...

The verbs also include cancel-deletion (a pending partition deletion, before its purge time).

Embedded mode: a command that writes opens the data directory's service (replaying the log into
the image), runs one command through it (its records appended and fsynced) and prints the
answer; a command that only reads opens the log read-only, so it works beside a running writer.
With `--bootstrap-server` the same commands run against a server.

There is no long-running process in embedded mode, so every command that opens the service for
writing first runs one check of pending partition deletions (`MetadataService.purge_due`) and
notes on stderr what it moved on; `mlog topics purge-pending` runs just that check.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.common import (
    EXIT_OK,
    CliError,
    add_global_options,
    add_writer_options,
    broker_id_list,
    check,
    count_arg,
    integer_arg,
    parse_pairs,
    shorten,
)
from api.cli.output import emit, format_time, ints, print_table
from api.cli.targets import fetch_image, open_target
from api.cli.topic_options import (
    add_namespace_option,
    add_topic_options,
    optional_topic_ref,
    topic_name,
    topic_ref,
)
from api.targets import purge_text
from records.model import ConfigResourceType, mode_name
from replay.controller.states import partition_state, replica_state
from replay.image import NAMESPACE_SEPARATOR, qualified_name

if TYPE_CHECKING:
    from api.service.settings import Settings
    from replay.image import MetadataImage, TopicImage

KEY_ORDERING_WARNING = (
    "WARNING: If partitions are increased for a topic that has a key, the partition logic or "
    "ordering of the messages will be affected"
)
"""What Kafka's `kafka-topics.sh --alter --partitions` prints."""

KEY_MOVE_WARNING = (
    "WARNING: If partitions are decreased for a topic that has a key, messages with a key will "
    "change partition: the partition logic maps keys over fewer partitions"
)
"""What a partition reduction prints."""


def parse_assignment(text: str) -> list[tuple[int, ...]]:
    """Kafka's `--replica-assignment`: partitions split by ',', replicas by ':'."""
    partitions = []
    for number, part in enumerate(text.split(",")):
        try:
            replicas = broker_id_list(part, ":")
        except ValueError:
            raise CliError(
                f"--replica-assignment: partition {number} is {shorten(part)!r}; give broker ids "
                "separated by ':' and partitions by ',', e.g. 0:1,1:2"
            ) from None
        partitions.append(replicas)
    return partitions


def cmd_topics_create(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Create a topic (KIP-4 semantics)."""
    from replay.controller.commands import CreatableTopic

    assignments: tuple[tuple[int, tuple[int, ...]], ...] = ()
    partitions = args.partitions if args.partitions is not None else -1
    replication = args.replication_factor if args.replication_factor is not None else -1
    if args.replica_assignment:
        if args.partitions is not None or args.replication_factor is not None:
            raise CliError(
                "--replica-assignment sets partitions and replicas; drop --partitions and "
                "--replication-factor"
            )
        assignments = tuple(enumerate(parse_assignment(args.replica_assignment)))
    name = topic_name(args)
    assert name is not None  # --topic is required
    request = CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=replication,
        assignments=assignments,
        configs=tuple(parse_pairs(args.config, "--config")),
    )
    with open_target(settings, args) as target:
        (result,) = target.create_topics([request], validate_only=args.validate_only)
    check(result.outcome)
    verb = "would create" if args.validate_only else "created"
    emit(
        settings,
        out,
        {
            "topic": result.name,
            "topic_id": str(result.topic_id),
            "partitions": result.num_partitions,
            "replication_factor": result.replication_factor,
            "validate_only": args.validate_only,
        },
        f"{verb} topic {result.name} with id {result.topic_id} "
        f"({result.num_partitions} partition{'' if result.num_partitions == 1 else 's'}, "
        f"replication factor {result.replication_factor})",
    )
    return EXIT_OK


def cmd_topics_delete(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Delete a topic by name or id (immediately)."""
    ref = topic_ref(args)
    with open_target(settings, args) as target:
        (result,) = target.delete_topics([ref])
    check(result.outcome)
    emit(
        settings,
        out,
        {"topic": result.name, "topic_id": str(result.topic_id)},
        f"deleted topic {result.name} (id {result.topic_id})",
    )
    return EXIT_OK


def _topic_json(image: MetadataImage, topic: TopicImage) -> dict[str, Any]:
    overrides = image.configs.get(ConfigResourceType.TOPIC, topic.qualified_name)
    pending = topic.pending_deletion
    return {
        "topic": topic.qualified_name,
        "name": topic.name,
        "namespace": topic.namespace,
        "topic_id": str(topic.topic_id),
        "partition_count": len(topic.partitions),
        "replication_factor": topic.replication_factor,
        "configs": dict(sorted(overrides.items())),
        "pending_deletion": None
        if pending is None
        else {
            "partition_count": pending.partition_count,
            "purge_at": pending.delete_after_ms,
            "created": pending.created_ms,
        },
        "partitions": [
            {
                "partition": p.partition_id,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "partition_epoch": p.partition_epoch,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "adding_replicas": list(p.adding_replicas),
                "removing_replicas": list(p.removing_replicas),
                "mode": mode_name(p.mode),
                "state": partition_state(p, image.cluster).value,
                "replica_states": {
                    str(b): replica_state(p, b, image.cluster).value for b in p.replicas
                },
            }
            for p in topic.partitions
        ],
    }


def _describe_text(image: MetadataImage, topic: TopicImage, out: TextIO) -> None:
    overrides = image.configs.get(ConfigResourceType.TOPIC, topic.qualified_name)
    configs = ",".join(f"{k}={v}" for k, v in sorted(overrides.items()))
    rf = topic.replication_factor
    out.write(
        f"Topic: {topic.qualified_name}\tTopicId: {topic.topic_id}\t"
        f"PartitionCount: {len(topic.partitions)}\tReplicationFactor: {rf}\tConfigs: {configs}\n"
    )
    if topic.pending_deletion is not None:
        pending = topic.pending_deletion
        removed = ints(range(pending.partition_count, len(topic.partitions)))
        out.write(
            f"\tPendingDeletion: partitions {removed} (PartitionCount {len(topic.partitions)} -> "
            f"{pending.partition_count})\tPurgeAt: {format_time(pending.delete_after_ms)}\t"
            f"RequestedAt: {format_time(pending.created_ms)}\n"
        )
    for p in topic.partitions:
        extra = ""
        if p.adding_replicas:
            extra += f"\tAdding Replicas: {ints(p.adding_replicas)}"
        if p.removing_replicas:
            extra += f"\tRemoving Replicas: {ints(p.removing_replicas)}"
        out.write(
            f"\tTopic: {topic.qualified_name}\tPartition: {p.partition_id}\tLeader: "
            f"{p.leader if p.leader >= 0 else 'none'}\tReplicas: {ints(p.replicas)}\t"
            f"Isr: {ints(p.isr)}{extra}\tMode: {mode_name(p.mode)}\t"
            f"State: {partition_state(p, image.cluster).value}\n"
        )


def cmd_topics_describe(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Describe one topic (or all): id, partitions, leaders, ISRs, modes and states."""
    from replay.controller.controller import Controller

    ref = optional_topic_ref(args) if args.topic or args.topic_id else None
    image = fetch_image(settings, args)
    if ref is not None:
        topics = [Controller.resolve_topic(image, ref)]
    else:
        topics = _topics_in(image, args.namespace)
    if settings.output == "json":
        out.write(json.dumps([_topic_json(image, t) for t in topics]) + "\n")
    else:
        for topic in topics:
            _describe_text(image, topic, out)
    return EXIT_OK


def cmd_topics_list(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """List topic names (and ids), of every namespace or of one."""
    image = fetch_image(settings, args)
    topics = _topics_in(image, args.namespace)
    if settings.output == "json":
        items = [
            {
                "topic": t.qualified_name,
                "topic_id": str(t.topic_id),
                "partitions": len(t.partitions),
            }
            for t in topics
        ]
        out.write(json.dumps(items) + "\n")
    else:
        print_table(
            [(t.qualified_name, t.topic_id, len(t.partitions)) for t in topics],
            ("topic", "topic_id", "partitions"),
            out,
        )
    return EXIT_OK


def _topics_in(image: MetadataImage, namespace: str | None) -> list[TopicImage]:
    """Every topic, or those directly in `namespace` (which must exist)."""
    if namespace is None:
        return image.topics.sorted()
    from replay.controller.namespaces import require_namespace

    require_namespace(image, namespace)
    return [t for t in image.topics.sorted() if t.namespace == namespace]


def cmd_topics_add_partitions(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Raise a topic's partition count."""
    from replay.controller.commands import CreatePartitionsTopic

    ref = topic_ref(args)
    assignments = None
    if args.replica_assignment:
        assignments = tuple(parse_assignment(args.replica_assignment))
    request = CreatePartitionsTopic(topic=ref, count=args.partitions, assignments=assignments)
    with open_target(settings, args) as target:
        (result,) = target.create_partitions([request], validate_only=args.validate_only)
    check(result.outcome)
    emit(
        settings,
        out,
        {"topic": result.name, "partitions": args.partitions, "warning": KEY_ORDERING_WARNING},
        f"{KEY_ORDERING_WARNING}\n{'Would raise' if args.validate_only else 'Raised'} the "
        f"partition count of {result.name} to {args.partitions}",
    )
    return EXIT_OK


def cmd_topics_alter(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Raise or lower a topic's partition count (a decrease deletes the highest partitions)."""
    from replay.controller.commands import CreatePartitionsTopic, DeletePartitionsTopic
    from replay.controller.controller import Controller

    ref = topic_ref(args)
    delay = args.delete_partitions_delay
    with open_target(settings, args) as target:
        current = len(Controller.resolve_topic(target.image(), ref).partitions)
        if args.partitions >= current:
            if delay is not None:
                raise CliError(
                    "--delete-partitions-delay applies to a decrease only; drop it to add "
                    "partitions"
                )
            assignments = None
            if args.replica_assignment:
                assignments = tuple(parse_assignment(args.replica_assignment))
            increase = CreatePartitionsTopic(
                topic=ref, count=args.partitions, assignments=assignments
            )
            (added,) = target.create_partitions([increase], validate_only=args.validate_only)
            check(added.outcome)
            emit(
                settings,
                out,
                {
                    "topic": added.name,
                    "partitions": args.partitions,
                    "warning": KEY_ORDERING_WARNING,
                },
                f"{KEY_ORDERING_WARNING}\n{'Would raise' if args.validate_only else 'Raised'} the "
                f"partition count of {added.name} from {current} to {args.partitions}",
            )
            return EXIT_OK
        if args.replica_assignment:
            raise CliError("--replica-assignment places added partitions; drop it for a decrease")
        if delay is None:
            raise CliError(
                f"lowering the partition count from {current} to {args.partitions} needs "
                "--delete-partitions-delay MS: how long the removed partitions stay readable "
                "(0 removes them at once)"
            )
        decrease = DeletePartitionsTopic(topic=ref, count=args.partitions, delay_ms=delay)
        (result,) = target.delete_partitions([decrease], validate_only=args.validate_only)
    check(result.outcome)
    removed = ints(result.removed)
    if args.validate_only:
        text = f"Would remove partition(s) {removed} of {result.name}"
    elif result.immediate:
        text = f"Removed partition(s) {removed} of {result.name} at once (mode NONE, then deleted)"
    else:
        text = (
            f"Partition(s) {removed} of {result.name} are READ_ONLY until "
            f"{format_time(result.purge_at_ms)}, then go to NONE and are removed"
        )
    emit(
        settings,
        out,
        {
            "topic": result.name,
            "partitions": args.partitions,
            "removed": list(result.removed),
            "purge_at": result.purge_at_ms,
            "immediate": result.immediate,
            "validate_only": args.validate_only,
            "warning": KEY_MOVE_WARNING,
        },
        f"{KEY_MOVE_WARNING}\n{text}",
    )
    return EXIT_OK


def cmd_topics_move(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Move a topic to another namespace; it keeps its topic id, partitions and configs."""
    from replay.controller.commands import MoveTopic, TopicRef
    from replay.controller.namespaces import validate_namespace_name

    if NAMESPACE_SEPARATOR in args.topic:
        raise CliError(
            f"--topic {args.topic!r}: give the bare topic name and its namespace with "
            "--from-namespace"
        )
    validate_namespace_name(args.from_namespace)
    validate_namespace_name(args.to_namespace)
    request = MoveTopic(
        topic=TopicRef(name=qualified_name(args.from_namespace, args.topic)),
        to_namespace=args.to_namespace,
    )
    with open_target(settings, args) as target:
        result = target.move_topic(request)
    emit(
        settings,
        out,
        {"topic_id": str(result.topic_id), "from": result.from_name, "to": result.to_name},
        f"moved topic {result.from_name} to {result.to_name} (id {result.topic_id} unchanged)",
    )
    return EXIT_OK


def cmd_topics_cancel_deletion(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Cancel a topic's pending partition deletion before its purge time."""
    ref = topic_ref(args)
    with open_target(settings, args) as target:
        (result,) = target.cancel_partition_deletions([ref])
    check(result.outcome)
    emit(
        settings,
        out,
        {"topic": result.name, "restored": list(result.restored)},
        f"cancelled the pending partition deletion of {result.name}: partition(s) "
        f"{ints(result.restored)} are READ_WRITE again",
    )
    return EXIT_OK


def cmd_topics_purge_pending(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Run one check of pending partition deletions now, and list those still pending."""
    with open_target(settings, args, check_pending=False) as target:
        results = target.purge_pending()
        image = target.image()
    pending = [t for t in image.topics.sorted() if t.pending_deletion is not None]
    if settings.output == "json":
        data = {
            "steps": [
                {
                    "topic": r.name,
                    "topic_id": str(r.topic_id),
                    "step": r.step.name,
                    "partitions": list(r.partitions),
                }
                for r in results
            ],
            "pending": [_pending_json(t) for t in pending],
        }
        out.write(json.dumps(data) + "\n")
        return EXIT_OK
    for result in results:
        out.write(purge_text(result) + "\n")
    if not results:
        out.write("no pending partition deletion was due\n")
    if pending:
        rows = []
        for topic in pending:
            info = _pending_json(topic)
            modes = sorted({p["mode"] for p in info["partitions"]})
            rows.append(
                (
                    topic.qualified_name,
                    ints([p["partition"] for p in info["partitions"]]),
                    "/".join(modes),
                    format_time(info["purge_at"]),
                )
            )
        print_table(rows, ("pending topic", "partitions", "mode", "purge at"), out)
    return EXIT_OK


def _pending_json(topic: TopicImage) -> dict[str, Any]:
    pending = topic.pending_deletion
    assert pending is not None  # listed for its pending deletion
    return {
        "topic": topic.qualified_name,
        "partition_count": pending.partition_count,
        "purge_at": pending.delete_after_ms,
        "created": pending.created_ms,
        "partitions": [
            {"partition": p.partition_id, "mode": mode_name(p.mode)}
            for p in topic.partitions[pending.partition_count :]
        ],
    }


def add_verbs(topics: argparse.ArgumentParser) -> None:
    """The verbs of `mlog topics` and their flags, on the noun's parser."""
    verbs = topics.add_subparsers(dest="verb", metavar="VERB", required=True)
    create = verbs.add_parser("create", help="create a topic")
    add_writer_options(create)
    create.add_argument("--topic", required=True, help="topic name")
    add_namespace_option(create)
    create.add_argument(
        "--partitions", type=integer_arg, help="partition count (default num.partitions)"
    )
    create.add_argument(
        "--replication-factor",
        type=integer_arg,
        help="replicas per partition (default default.replication.factor)",
    )
    create.add_argument(
        "--replica-assignment", help="manual placement, e.g. 0:1,1:2 (partition 0 on 0 and 1, ...)"
    )
    create.add_argument("--config", action="append", help="topic config KEY=VALUE (repeatable)")
    create.add_argument("--validate-only", action="store_true", help="check, change nothing")
    create.set_defaults(handler=cmd_topics_create)

    delete = verbs.add_parser("delete", help="delete a topic (by name or id)")
    add_writer_options(delete)
    add_topic_options(delete)
    delete.set_defaults(handler=cmd_topics_delete)

    describe = verbs.add_parser("describe", help="describe one topic, or all")
    add_global_options(describe)
    add_topic_options(describe)
    describe.set_defaults(handler=cmd_topics_describe)

    listing = verbs.add_parser("list", help="list topics")
    add_global_options(listing)
    add_namespace_option(listing, "list only the topics directly in this namespace")
    listing.set_defaults(handler=cmd_topics_list)

    add = verbs.add_parser("add-partitions", help="raise a topic's partition count")
    add_writer_options(add)
    add_topic_options(add)
    add.add_argument("--partitions", type=integer_arg, required=True, help="the new total count")
    add.add_argument("--replica-assignment", help="placement of the new partitions only")
    add.add_argument("--validate-only", action="store_true", help="check, change nothing")
    add.set_defaults(handler=cmd_topics_add_partitions)

    alter = verbs.add_parser("alter", help="raise or lower a topic's partition count")
    add_writer_options(alter)
    add_topic_options(alter)
    alter.add_argument("--partitions", type=integer_arg, required=True, help="the new total count")
    alter.add_argument(
        "--delete-partitions-delay",
        type=count_arg,
        metavar="MS",
        help="for a decrease: ms the removed partitions stay READ_ONLY before they are purged "
        "(0 = remove at once); needs delete.topic.partition.enable=true",
    )
    alter.add_argument("--replica-assignment", help="for an increase: placement of new ones")
    alter.add_argument("--validate-only", action="store_true", help="check, change nothing")
    alter.set_defaults(handler=cmd_topics_alter)

    move = verbs.add_parser("move", help="move a topic to another namespace (keeps its id)")
    add_move_options(move)

    purge = verbs.add_parser(
        "purge-pending", help="check pending partition deletions now (each writer does too)"
    )
    add_writer_options(purge)
    purge.set_defaults(handler=cmd_topics_purge_pending)

    cancel = verbs.add_parser(
        "cancel-deletion",
        help="cancel a pending partition deletion (before its purge time)",
    )
    add_writer_options(cancel)
    add_topic_options(cancel)
    cancel.set_defaults(handler=cmd_topics_cancel_deletion)


def add_move_options(parser: argparse.ArgumentParser) -> None:
    """The options of a topic move (`topics move` and `namespaces move`)."""
    add_writer_options(parser)
    parser.add_argument("--topic", required=True, help="topic name, without namespace")
    parser.add_argument(
        "--from-namespace", default="", help='namespace the topic is in (default "")'
    )
    parser.add_argument(
        "--to-namespace", required=True, help='namespace to move it to ("" = the default)'
    )
    parser.set_defaults(handler=cmd_topics_move)
