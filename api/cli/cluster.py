"""`mlog brokers|topics|configs|leaders|partitions|image ...`: the metadata service from the CLI.

Embedded mode: each command opens the data directory, replays the log into the image, runs one
command through the service (its records appended and fsynced) and prints the answer. Commands
that only read open the log read-only, so they work beside a running writer.

There is no long-running process in embedded mode, so every command that opens the service for
writing first runs one check of pending partition deletions (`MetadataService.purge_due`) and
notes on stderr what it moved on; `mlog topics purge-pending` runs just that check.
"""

from __future__ import annotations

import argparse
import getpass
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from api.cli.common import (
    EXIT_OK,
    CliError,
    add_global_options,
    count_arg,
    format_time,
    offset_arg,
    print_table,
)
from api.cli.image_tree import Directory, PathError, lookup, walk
from api.cli.targets import LocalTarget, RemoteTarget, Target, purge_text
from api.controller.commands import (
    AlterConfig,
    AlterConfigOp,
    BrokerAction,
    ConfigResource,
    CreatableTopic,
    CreatePartitionsTopic,
    DeletePartitionsTopic,
    ElectionType,
    MoveTopic,
    Outcome,
    Reassignment,
    RegisterBroker,
    TopicPartition,
    TopicRef,
)
from api.controller.config_defs import ConfigSource, ResolvedConfig
from api.controller.controller import Controller
from api.controller.errors import ApiError
from api.controller.namespaces import require_namespace, validate_namespace_name
from api.controller.states import partition_state, replica_state
from api.service.settings import Settings
from records.model import BrokerEndpoint, ConfigResourceType, Mode
from records.uuids import Uuid
from replay.image import NAMESPACE_SEPARATOR, MetadataImage, TopicImage, qualified_name

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


# ---------------------------------------------------------------------- plumbing


def _principal(args: argparse.Namespace) -> str:
    given: str | None = getattr(args, "principal", None)
    return given or f"User:{getpass.getuser()}"


@contextmanager
def _target(
    settings: Settings, args: argparse.Namespace, *, check_pending: bool = True
) -> Iterator[Target]:
    """The data directory, or the server of `--bootstrap-server` / MLOG_BOOTSTRAP_SERVER."""
    target: Target
    if settings.bootstrap_server:
        if getattr(args, "principal", None):
            raise CliError(
                "--principal applies to the data directory only: a server records the "
                "principal of its connection; drop --principal or --bootstrap-server"
            )
        target = RemoteTarget(settings.bootstrap_server)
    else:
        target = LocalTarget(settings, _principal(args), check_pending=check_pending)
    try:
        yield target
    finally:
        target.close()


def _read_image(
    settings: Settings,
    args: argparse.Namespace,
    *,
    at_offset: int | None = None,
    at_time: str | None = None,
) -> MetadataImage:
    with _target(settings, args) as target:
        return target.image(at_offset=at_offset, at_time=at_time)


def _check(outcome: Outcome) -> None:
    """Turn a failed per-item outcome into the command's error (exit 2, one line)."""
    if not outcome.ok:
        raise ApiError(outcome.error_code, outcome.error_message or outcome.error_code.name)


def _emit(settings: Settings, out: TextIO, data: Any, text: str) -> None:
    if settings.output == "json":
        out.write(json.dumps(data, separators=(",", ":")) + "\n")
    else:
        out.write(text + "\n")


def _topic_ref(args: argparse.Namespace) -> TopicRef:
    ref = _optional_topic_ref(args)
    if ref is None:
        raise CliError("name the topic with --topic NAME or --topic-id ID")
    return ref


def _topic_name(args: argparse.Namespace) -> str | None:
    """--topic, qualified by --namespace when that is given."""
    name: str | None = getattr(args, "topic", None)
    namespace: str | None = getattr(args, "namespace", None)
    if namespace is None:
        return name
    validate_namespace_name(namespace)
    if name is None:
        raise CliError("--namespace qualifies --topic NAME; give the topic by name")
    if NAMESPACE_SEPARATOR in name:
        raise CliError(
            f"--topic {name!r} already names a namespace; give the namespace either in --topic "
            "(namespace:name) or with --namespace"
        )
    return qualified_name(namespace, name)


def _optional_topic_ref(args: argparse.Namespace) -> TopicRef | None:
    name = _topic_name(args)
    raw_id: str | None = getattr(args, "topic_id", None)
    topic_id = None
    if raw_id is not None:
        try:
            topic_id = Uuid.parse(raw_id)
        except ValueError as exc:
            raise CliError(f"--topic-id: {exc}") from None
    if name is None and topic_id is None:
        return None
    return TopicRef(name=name, topic_id=topic_id)


def _parse_assignment(text: str) -> list[tuple[int, ...]]:
    """Kafka's `--replica-assignment`: partitions split by ',', replicas by ':'."""
    partitions = []
    for number, part in enumerate(text.split(",")):
        try:
            replicas = tuple(int(b) for b in part.split(":"))
        except ValueError:
            raise CliError(
                f"--replica-assignment: partition {number} is {part!r}; give broker ids "
                "separated by ':' and partitions by ',', e.g. 0:1,1:2"
            ) from None
        partitions.append(replicas)
    return partitions


def _parse_pairs(values: Sequence[str] | None, flag: str) -> list[tuple[str, str]]:
    pairs = []
    for item in values or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"{flag} takes KEY=VALUE, got {item!r}")
        pairs.append((key.strip(), value))
    return pairs


def _endpoint(text: str) -> BrokerEndpoint:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise CliError(f"--endpoint takes HOST:PORT, got {text!r}")
    return BrokerEndpoint(name="PLAINTEXT", host=host, port=int(port))


def _broker_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a broker id (an integer)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is not a broker id (must be >= 0)")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    return value


# ---------------------------------------------------------------------- brokers


def cmd_brokers_register(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Register a broker (unfenced unless --fenced)."""
    request = RegisterBroker(
        broker_id=args.id,
        rack=args.rack,
        endpoints=tuple(_endpoint(e) for e in args.endpoint or ()),
        fenced=args.fenced,
    )
    with _target(settings, args) as target:
        result = target.register_broker(request)
    _emit(
        settings,
        out,
        {
            "broker_id": result.broker_id,
            "broker_epoch": result.broker_epoch,
            "partitions_changed": result.partitions_changed,
        },
        f"registered broker {result.broker_id} (epoch {result.broker_epoch})",
    )
    return EXIT_OK


_BROKER_STATE_AFTER = {
    BrokerAction.FENCE: "fenced",
    BrokerAction.UNFENCE: "unfenced",
    BrokerAction.CONTROLLED_SHUTDOWN: "in controlled shutdown",
    BrokerAction.UNREGISTER: "unregistered",
}


def _broker_action(action: BrokerAction, verb: str) -> Callable[..., int]:
    def handler(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
        with _target(settings, args) as target:
            result = target.change_broker(args.id, action)
        if result.changed:
            text = (
                f"{verb} broker {result.broker_id}; {result.partitions_changed} partition(s) "
                "changed leader or ISR"
            )
        else:
            state = _BROKER_STATE_AFTER[action]
            text = f"broker {result.broker_id} is already {state}; nothing to do"
        _emit(
            settings,
            out,
            {
                "broker_id": result.broker_id,
                "changed": result.changed,
                "partitions_changed": result.partitions_changed,
            },
            text,
        )
        return EXIT_OK

    handler.__doc__ = f"{verb.capitalize()} a broker."
    return handler


def cmd_brokers_list(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """List registered brokers."""
    image = _read_image(settings, args)
    brokers = image.cluster.sorted()
    if settings.output == "json":
        items = [
            {
                "broker_id": b.broker_id,
                "epoch": b.broker_epoch,
                "incarnation_id": str(b.incarnation_id),
                "rack": b.rack,
                "fenced": b.fenced,
                "in_controlled_shutdown": b.in_controlled_shutdown,
                "endpoints": [f"{e.host}:{e.port}" for e in b.end_points],
            }
            for b in brokers
        ]
        out.write(json.dumps(items) + "\n")
        return EXIT_OK
    rows = [
        (
            b.broker_id,
            b.rack or "-",
            "fenced" if b.fenced else "shutting down" if b.in_controlled_shutdown else "active",
            b.broker_epoch,
            ",".join(f"{e.host}:{e.port}" for e in b.end_points) or "-",
        )
        for b in brokers
    ]
    print_table(rows, ("id", "rack", "state", "epoch", "endpoints"), out)
    return EXIT_OK


# ---------------------------------------------------------------------- topics


def cmd_topics_create(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Create a topic (KIP-4 semantics)."""
    assignments: tuple[tuple[int, tuple[int, ...]], ...] = ()
    partitions = args.partitions if args.partitions is not None else -1
    replication = args.replication_factor if args.replication_factor is not None else -1
    if args.replica_assignment:
        if args.partitions is not None or args.replication_factor is not None:
            raise CliError(
                "--replica-assignment sets partitions and replicas; drop --partitions and "
                "--replication-factor"
            )
        assignments = tuple(enumerate(_parse_assignment(args.replica_assignment)))
    topic_name = _topic_name(args)
    assert topic_name is not None  # --topic is required
    request = CreatableTopic(
        name=topic_name,
        num_partitions=partitions,
        replication_factor=replication,
        assignments=assignments,
        configs=tuple(_parse_pairs(args.config, "--config")),
    )
    with _target(settings, args) as target:
        (result,) = target.create_topics([request], validate_only=args.validate_only)
    _check(result.outcome)
    verb = "would create" if args.validate_only else "created"
    _emit(
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
    ref = _topic_ref(args)
    with _target(settings, args) as target:
        (result,) = target.delete_topics([ref])
    _check(result.outcome)
    _emit(
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
        "replication_factor": len(topic.partitions[0].replicas) if topic.partitions else 0,
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
                "mode": Mode(p.mode).name,
                "state": partition_state(p, image.cluster).value,
                "replica_states": {
                    str(b): replica_state(p, b, image.cluster).value for b in p.replicas
                },
            }
            for p in topic.partitions
        ],
    }


def _ints(values: Sequence[int]) -> str:
    return ",".join(str(v) for v in values)


def _describe_text(image: MetadataImage, topic: TopicImage, out: TextIO) -> None:
    overrides = image.configs.get(ConfigResourceType.TOPIC, topic.qualified_name)
    configs = ",".join(f"{k}={v}" for k, v in sorted(overrides.items()))
    rf = len(topic.partitions[0].replicas) if topic.partitions else 0
    out.write(
        f"Topic: {topic.qualified_name}\tTopicId: {topic.topic_id}\t"
        f"PartitionCount: {len(topic.partitions)}\tReplicationFactor: {rf}\tConfigs: {configs}\n"
    )
    if topic.pending_deletion is not None:
        pending = topic.pending_deletion
        removed = _ints(range(pending.partition_count, len(topic.partitions)))
        out.write(
            f"\tPendingDeletion: partitions {removed} (PartitionCount {len(topic.partitions)} -> "
            f"{pending.partition_count})\tPurgeAt: {format_time(pending.delete_after_ms)}\t"
            f"RequestedAt: {format_time(pending.created_ms)}\n"
        )
    for p in topic.partitions:
        extra = ""
        if p.adding_replicas:
            extra += f"\tAdding Replicas: {_ints(p.adding_replicas)}"
        if p.removing_replicas:
            extra += f"\tRemoving Replicas: {_ints(p.removing_replicas)}"
        out.write(
            f"\tTopic: {topic.qualified_name}\tPartition: {p.partition_id}\tLeader: "
            f"{p.leader if p.leader >= 0 else 'none'}\tReplicas: {_ints(p.replicas)}\t"
            f"Isr: {_ints(p.isr)}{extra}\tMode: {Mode(p.mode).name}\t"
            f"State: {partition_state(p, image.cluster).value}\n"
        )


def cmd_topics_describe(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Describe one topic (or all): id, partitions, leaders, ISRs, modes and states."""
    ref = _optional_topic_ref(args) if args.topic or args.topic_id else None
    image = _read_image(settings, args)
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
    image = _read_image(settings, args)
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
    require_namespace(image, namespace)
    return [t for t in image.topics.sorted() if t.namespace == namespace]


def cmd_topics_add_partitions(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Raise a topic's partition count."""
    ref = _topic_ref(args)
    assignments = None
    if args.replica_assignment:
        assignments = tuple(_parse_assignment(args.replica_assignment))
    request = CreatePartitionsTopic(topic=ref, count=args.partitions, assignments=assignments)
    with _target(settings, args) as target:
        (result,) = target.create_partitions([request], validate_only=args.validate_only)
    _check(result.outcome)
    _emit(
        settings,
        out,
        {"topic": result.name, "partitions": args.partitions, "warning": KEY_ORDERING_WARNING},
        f"{KEY_ORDERING_WARNING}\n{'Would raise' if args.validate_only else 'Raised'} the "
        f"partition count of {result.name} to {args.partitions}",
    )
    return EXIT_OK


def cmd_topics_alter(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Raise or lower a topic's partition count (a decrease deletes the highest partitions)."""
    ref = _topic_ref(args)
    delay = args.delete_partitions_delay
    with _target(settings, args) as target:
        current = len(Controller.resolve_topic(target.image(), ref).partitions)
        if args.partitions >= current:
            if delay is not None:
                raise CliError(
                    "--delete-partitions-delay applies to a decrease only; drop it to add "
                    "partitions"
                )
            assignments = None
            if args.replica_assignment:
                assignments = tuple(_parse_assignment(args.replica_assignment))
            increase = CreatePartitionsTopic(
                topic=ref, count=args.partitions, assignments=assignments
            )
            (added,) = target.create_partitions([increase], validate_only=args.validate_only)
            _check(added.outcome)
            _emit(
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
    _check(result.outcome)
    removed = _ints(result.removed)
    if args.validate_only:
        text = f"Would remove partition(s) {removed} of {result.name}"
    elif result.immediate:
        text = f"Removed partition(s) {removed} of {result.name} at once (mode NONE, then deleted)"
    else:
        text = (
            f"Partition(s) {removed} of {result.name} are READ_ONLY until "
            f"{format_time(result.purge_at_ms)}, then go to NONE and are removed"
        )
    _emit(
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
    with _target(settings, args) as target:
        result = target.move_topic(request)
    _emit(
        settings,
        out,
        {"topic_id": str(result.topic_id), "from": result.from_name, "to": result.to_name},
        f"moved topic {result.from_name} to {result.to_name} (id {result.topic_id} unchanged)",
    )
    return EXIT_OK


def cmd_topics_purge_pending(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Run one check of pending partition deletions now, and list those still pending."""
    with _target(settings, args, check_pending=False) as target:
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
                    _ints([p["partition"] for p in info["partitions"]]),
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
            {"partition": p.partition_id, "mode": Mode(p.mode).name}
            for p in topic.partitions[pending.partition_count :]
        ],
    }


# ---------------------------------------------------------------------- configs


def _resource(args: argparse.Namespace) -> ConfigResource:
    namespace = args.namespace if args.topic is None else None
    chosen = [
        x for x in (args.topic, namespace, args.broker, args.cluster or None) if x is not None
    ]
    if len(chosen) != 1:
        raise CliError(
            "name one resource: --topic NAME (with --namespace NS for a topic in NS), "
            "--namespace NS, --broker ID or --cluster"
        )
    if args.topic is not None:
        name = _topic_name(args)
        assert name is not None  # --topic is given
        return ConfigResource(type=ConfigResourceType.TOPIC, name=name)
    if namespace is not None:
        validate_namespace_name(namespace)
        return ConfigResource(type=ConfigResourceType.NAMESPACE, name=namespace)
    if args.broker is not None:
        return ConfigResource(type=ConfigResourceType.BROKER, name=str(args.broker))
    return ConfigResource(type=ConfigResourceType.BROKER, name="")


def _config_json(config: ResolvedConfig) -> dict[str, Any]:
    return {
        "name": config.name,
        "value": None if config.sensitive else config.value,
        "source": config.source.name,
        "source_name": config.source_name,
        "read_only": config.read_only,
        "sensitive": config.sensitive,
    }


def cmd_configs_describe(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Every known key of a resource, with its value and where it comes from."""
    resource = _resource(args)
    image = _read_image(settings, args)
    configs = Controller().describe_configs(image, resource)
    if not args.all:
        configs = [c for c in configs if c.source != ConfigSource.DEFAULT_CONFIG]
    if settings.output == "json":
        out.write(json.dumps([_config_json(c) for c in configs]) + "\n")
        return EXIT_OK
    if not configs:
        out.write("no overrides; every key has its default (--all shows them)\n")
        return EXIT_OK
    rows = [
        (
            c.name,
            "<sensitive>" if c.sensitive else c.value,
            c.source.name + (f" ({c.source_name})" if c.source_name else ""),
        )
        for c in configs
    ]
    print_table(rows, ("name", "value", "source"), out)
    return EXIT_OK


def cmd_configs_alter(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Set, delete, append to or subtract from config keys of one resource."""
    resource = _resource(args)
    ops = [
        AlterConfig(name=k, op=AlterConfigOp.SET, value=v)
        for k, v in _parse_pairs(args.set, "--set")
    ]
    ops += [AlterConfig(name=k, op=AlterConfigOp.DELETE) for k in args.delete or ()]
    ops += [
        AlterConfig(name=k, op=AlterConfigOp.APPEND, value=v)
        for k, v in _parse_pairs(args.append, "--append")
    ]
    ops += [
        AlterConfig(name=k, op=AlterConfigOp.SUBTRACT, value=v)
        for k, v in _parse_pairs(args.subtract, "--subtract")
    ]
    if not ops:
        raise CliError(
            "nothing to alter: give --set K=V, --delete K, --append K=V or --subtract K=V"
        )
    with _target(settings, args) as target:
        result = target.alter_configs(resource, ops, validate_only=args.validate_only)
    _check(result.outcome)
    name = resource.name or "<cluster default>"
    _emit(
        settings,
        out,
        {"resource_type": resource.type.name, "resource": resource.name, "changes": len(ops)},
        f"{'validated' if args.validate_only else 'altered'} {len(ops)} config(s) of "
        f"{resource.type.name.lower()} {name}",
    )
    return EXIT_OK


# ---------------------------------------------------------------------- leaders, partitions


def cmd_leaders_elect(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Preferred (or unclean) leader election for one partition or all."""
    ref = _optional_topic_ref(args)
    partitions = None
    if ref is not None:
        if args.partition is None:
            raise CliError("--topic needs --partition N (or name neither to elect everywhere)")
        partitions = [TopicPartition(topic=ref, partition=args.partition)]
    election = ElectionType[args.type.upper()]
    with _target(settings, args) as target:
        results = target.elect_leaders(partitions, election)
    if partitions is not None:
        _check(results[0].outcome)
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
        return EXIT_OK
    if not results:
        out.write("every partition already has its preferred leader\n")
    for r in results:
        status = "elected" if r.outcome.ok else f"failed: {r.outcome.error_message}"
        out.write(f"{r.topic}-{r.partition}: {status}\n")
    return EXIT_OK


def cmd_partitions_reassign(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Move a partition to new replicas, or cancel its reassignment."""
    ref = _topic_ref(args)
    if (args.replicas is None) == (not args.cancel):
        raise CliError("give --replicas 1,2,3 or --cancel")
    replicas = None
    if args.replicas is not None:
        try:
            replicas = tuple(int(b) for b in args.replicas.split(","))
        except ValueError:
            raise CliError(
                f"--replicas takes broker ids like 1,2,3, got {args.replicas!r}"
            ) from None
    request = Reassignment(
        partition=TopicPartition(topic=ref, partition=args.partition), replicas=replicas
    )
    with _target(settings, args) as target:
        (result,) = target.reassign([request])
        partition = None
        topic = target.image().topics.get_by_name(result.topic) if result.outcome.ok else None
        if topic is not None and args.partition < len(topic.partitions):
            partition = topic.partitions[args.partition]
    _check(result.outcome)
    state = (
        ""
        if partition is None
        else (
            f"; replicas now {_ints(partition.replicas)}, isr {_ints(partition.isr)}, leader "
            f"{partition.leader}"
            + (" (reassignment in progress)" if partition.adding_replicas else "")
        )
    )
    _emit(
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
    image = _read_image(settings, args)
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
            _ints(p.replicas),
            _ints(p.adding_replicas) or "-",
            _ints(p.removing_replicas) or "-",
        )
        for t, p in items
    ]
    print_table(rows, ("topic", "partition", "replicas", "adding", "removing"), out)
    return EXIT_OK


# ---------------------------------------------------------------------- image


def cmd_image_show(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Print the image (or the subtree at PATH) like Kafka's metadata shell."""
    image = _read_image(settings, args, at_offset=args.at_offset, at_time=args.at_time)
    try:
        node = lookup(image, args.path)
    except PathError as exc:
        raise CliError(str(exc)) from None
    prefix = "/" + "/".join(p for p in args.path.split("/") if p)
    prefix = "" if prefix == "/" else prefix
    leaves = list(walk(node, prefix))
    if settings.output == "json":
        out.write(json.dumps({path: value for path, value in leaves}) + "\n")
        return EXIT_OK
    if not isinstance(node, Directory) and leaves:
        out.write(json.dumps(leaves[0][1], indent=2) + "\n")
        return EXIT_OK
    for path, value in leaves:
        shown = "" if value is None else json.dumps(value, separators=(",", ":"))
        out.write(f"{path}  {shown}".rstrip() + "\n")
    return EXIT_OK


# ---------------------------------------------------------------------- parser


def _writer_options(parser: argparse.ArgumentParser) -> None:
    add_global_options(parser)
    parser.add_argument(
        "--principal", help="who is asking, stored with each record (default User:<login>)"
    )


def _topic_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", help="topic name (namespace:name outside the default one)")
    parser.add_argument("--topic-id", help="topic id (22-char base64, as describe shows)")
    _namespace_option(parser)


def _namespace_option(parser: argparse.ArgumentParser, text: str | None = None) -> None:
    parser.add_argument(
        "--namespace",
        help=text or 'namespace of --topic, e.g. org:apache (default: the default namespace "")',
    )


def add_commands(nouns: Any) -> None:
    """Register the brokers, topics, configs, leaders, partitions and image commands."""
    _add_broker_commands(nouns)
    _add_topic_commands(nouns)
    _add_config_commands(nouns)
    _add_partition_commands(nouns)


def _add_broker_commands(nouns: Any) -> None:
    brokers = nouns.add_parser("brokers", help="register and manage brokers")
    verbs = brokers.add_subparsers(dest="verb", metavar="VERB", required=True)
    register = verbs.add_parser("register", help="register a broker (a new incarnation)")
    _writer_options(register)
    register.add_argument("--id", type=_broker_id, required=True, help="broker id")
    register.add_argument("--rack", help="rack name (rack-aware placement)")
    register.add_argument("--endpoint", action="append", help="listener HOST:PORT (repeatable)")
    register.add_argument(
        "--fenced", action="store_true", help="register fenced (default: unfenced, usable)"
    )
    register.set_defaults(handler=cmd_brokers_register)
    for name, action, verb, text in (
        ("unregister", BrokerAction.UNREGISTER, "unregistered", "remove a broker"),
        ("fence", BrokerAction.FENCE, "fenced", "fence a broker (no leadership, out of ISRs)"),
        ("unfence", BrokerAction.UNFENCE, "unfenced", "unfence a broker"),
        (
            "shutdown",
            BrokerAction.CONTROLLED_SHUTDOWN,
            "started controlled shutdown of",
            "controlled shutdown: move leadership off a broker",
        ),
    ):
        sub = verbs.add_parser(name, help=text)
        _writer_options(sub)
        sub.add_argument("--id", type=_broker_id, required=True, help="broker id")
        sub.set_defaults(handler=_broker_action(action, verb))
    listing = verbs.add_parser("list", help="list registered brokers")
    add_global_options(listing)
    listing.set_defaults(handler=cmd_brokers_list)


def _add_topic_commands(nouns: Any) -> None:
    topics = nouns.add_parser("topics", help="create, delete, describe and list topics")
    verbs = topics.add_subparsers(dest="verb", metavar="VERB", required=True)
    create = verbs.add_parser("create", help="create a topic")
    _writer_options(create)
    create.add_argument("--topic", required=True, help="topic name")
    _namespace_option(create)
    create.add_argument(
        "--partitions", type=_positive, help="partition count (default num.partitions)"
    )
    create.add_argument(
        "--replication-factor",
        type=_positive,
        help="replicas per partition (default default.replication.factor)",
    )
    create.add_argument(
        "--replica-assignment", help="manual placement, e.g. 0:1,1:2 (partition 0 on 0 and 1, ...)"
    )
    create.add_argument("--config", action="append", help="topic config KEY=VALUE (repeatable)")
    create.add_argument("--validate-only", action="store_true", help="check, change nothing")
    create.set_defaults(handler=cmd_topics_create)

    delete = verbs.add_parser("delete", help="delete a topic (by name or id)")
    _writer_options(delete)
    _topic_options(delete)
    delete.set_defaults(handler=cmd_topics_delete)

    describe = verbs.add_parser("describe", help="describe one topic, or all")
    add_global_options(describe)
    _topic_options(describe)
    describe.set_defaults(handler=cmd_topics_describe)

    listing = verbs.add_parser("list", help="list topics")
    add_global_options(listing)
    _namespace_option(listing, "list only the topics directly in this namespace")
    listing.set_defaults(handler=cmd_topics_list)

    add = verbs.add_parser("add-partitions", help="raise a topic's partition count")
    _writer_options(add)
    _topic_options(add)
    add.add_argument("--partitions", type=_positive, required=True, help="the new total count")
    add.add_argument("--replica-assignment", help="placement of the new partitions only")
    add.add_argument("--validate-only", action="store_true", help="check, change nothing")
    add.set_defaults(handler=cmd_topics_add_partitions)

    alter = verbs.add_parser("alter", help="raise or lower a topic's partition count")
    _writer_options(alter)
    _topic_options(alter)
    alter.add_argument("--partitions", type=_positive, required=True, help="the new total count")
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
    _writer_options(purge)
    purge.set_defaults(handler=cmd_topics_purge_pending)


def add_move_options(parser: argparse.ArgumentParser) -> None:
    """The options of a topic move (`topics move` and `namespaces move`)."""
    _writer_options(parser)
    parser.add_argument("--topic", required=True, help="topic name, without namespace")
    parser.add_argument(
        "--from-namespace", default="", help='namespace the topic is in (default "")'
    )
    parser.add_argument(
        "--to-namespace", required=True, help='namespace to move it to ("" = the default)'
    )
    parser.set_defaults(handler=cmd_topics_move)


def _add_config_commands(nouns: Any) -> None:
    configs = nouns.add_parser("configs", help="describe and alter configs")
    verbs = configs.add_subparsers(dest="verb", metavar="VERB", required=True)
    for name, handler, text in (
        ("describe", cmd_configs_describe, "show configs with their sources"),
        ("alter", cmd_configs_alter, "set or delete configs"),
    ):
        sub = verbs.add_parser(name, help=text)
        (_writer_options if name == "alter" else add_global_options)(sub)
        sub.add_argument("--topic", help="a topic's configs")
        _namespace_option(sub, "a namespace's configs (with --topic: the topic's namespace)")
        sub.add_argument("--broker", type=_broker_id, help="a broker's configs")
        sub.add_argument("--cluster", action="store_true", help="cluster-wide defaults")
        sub.set_defaults(handler=handler)
    verbs.choices["describe"].add_argument(
        "--all", action="store_true", help="include keys left at their defaults"
    )
    alter = verbs.choices["alter"]
    alter.add_argument("--set", action="append", help="KEY=VALUE (repeatable)")
    alter.add_argument("--delete", action="append", help="KEY to reset to its default")
    alter.add_argument("--append", action="append", help="KEY=V1,V2 added to a list key")
    alter.add_argument("--subtract", action="append", help="KEY=V1 removed from a list key")
    alter.add_argument("--validate-only", action="store_true", help="check, change nothing")


def _add_partition_commands(nouns: Any) -> None:
    leaders = nouns.add_parser("leaders", help="leader election")
    verbs = leaders.add_subparsers(dest="verb", metavar="VERB", required=True)
    elect = verbs.add_parser("elect", help="elect preferred (or unclean) leaders")
    _writer_options(elect)
    _topic_options(elect)
    elect.add_argument("--partition", type=_positive, help="partition id (with --topic)")
    elect.add_argument(
        "--type", choices=("preferred", "unclean"), default="preferred", help="election type"
    )
    elect.set_defaults(handler=cmd_leaders_elect)

    partitions = nouns.add_parser("partitions", help="partition reassignment")
    verbs = partitions.add_subparsers(dest="verb", metavar="VERB", required=True)
    reassign = verbs.add_parser("reassign", help="move a partition's replicas")
    _writer_options(reassign)
    _topic_options(reassign)
    reassign.add_argument("--partition", type=_positive, required=True, help="partition id")
    reassign.add_argument("--replicas", help="target replicas, e.g. 1,2,3 (first = preferred)")
    reassign.add_argument("--cancel", action="store_true", help="cancel the reassignment")
    reassign.set_defaults(handler=cmd_partitions_reassign)
    listing = verbs.add_parser("list-reassignments", help="reassignments in progress")
    add_global_options(listing)
    listing.set_defaults(handler=cmd_partitions_list_reassignments)

    image = nouns.add_parser("image", help="the metadata image")
    verbs = image.add_subparsers(dest="verb", metavar="VERB", required=True)
    show = verbs.add_parser("show", help="print the image tree (or the subtree at PATH)")
    add_global_options(show)
    show.add_argument("path", nargs="?", default="/", help="e.g. /topics/byName/orders/0")
    when = show.add_mutually_exclusive_group()
    when.add_argument("--at-offset", type=offset_arg, help="the image after the entry at N")
    when.add_argument("--at-time", metavar="T", help="the image at a time (ISO-8601 or epoch ms)")
    show.set_defaults(handler=cmd_image_show)
