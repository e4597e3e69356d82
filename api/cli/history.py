"""`mlog history`: every log entry that touched a topic, topic id, namespace, broker or user."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, TextIO

from api.cli.common import (
    EXIT_OK,
    CliError,
    add_archive_options,
    add_global_options,
    add_range_options,
    broker_id_arg,
)
from api.cli.output import format_time, print_table
from api.cli.targets import open_target
from records.uuids import Uuid
from replay.image import qualified_name
from replay.timetravel import Entity

if TYPE_CHECKING:
    from api.service.settings import Settings
    from api.targets import Target


def _entity(args: argparse.Namespace) -> Entity:
    topic_id = None
    if args.topic_id is not None:
        try:
            topic_id = Uuid.parse(args.topic_id)
        except ValueError as exc:
            raise CliError(f"--topic-id: {exc}") from None
    topic, namespace = args.topic, args.namespace
    if topic is not None and namespace is not None:
        # As in `topics describe`: --namespace qualifies --topic (org:apache + t = org:apache:t).
        topic, namespace = qualified_name(namespace, topic), None
    given = [v for v in (topic, topic_id, namespace, args.broker, args.user) if v is not None]
    if len(given) != 1:
        raise CliError(
            "name one entity: --topic NAME [--namespace NS], --topic-id ID, --namespace NS, "
            "--broker ID or --user NAME"
        )
    if args.user is not None and not args.user:
        raise CliError("--user needs a user name, e.g. --user alice")
    return Entity(
        topic=topic, topic_id=topic_id, namespace=namespace, broker=args.broker, user=args.user
    )


def _never_named(target: Target, entity: Entity, *, ranged: bool) -> bool:
    """Whether no entry of the whole log touched `entity` and the image does not hold it.

    The image covers what a trimmed log's snapshot holds but no entry after it touched.
    A user is never "unknown": its history is its credentials and the ACLs naming it.
    """
    if entity.user is not None:
        return False
    if ranged and target.history(entity, gt=None, lte=None, limit=1):
        return False
    image = target.image(at_offset=None, at_time=None)
    if entity.topic is not None:
        return image.topics.get_by_name(entity.topic) is None
    if entity.topic_id is not None:
        return image.topics.get(entity.topic_id) is None
    if entity.namespace is not None:
        return image.namespaces.get(entity.namespace) is None
    return entity.broker is None or image.cluster.get(entity.broker) is None


def _nothing_found(entity: Entity, *, unknown: bool, ranged: bool) -> str:
    """What an empty history says: a name never seen, or one untouched in the range."""
    if unknown:
        if entity.topic is not None:
            return f"no topic had that name ({entity.topic}); `mlog topics list` lists them"
        if entity.topic_id is not None:
            return f"no topic had that id ({entity.topic_id}); `mlog topics list` lists them"
        if entity.namespace is not None:
            return (
                f"no namespace had that name ({entity.namespace}); "
                "`mlog namespaces list` lists them"
            )
        return f"no broker had that id ({entity.broker}); `mlog brokers list` lists them"
    return "no entry touched it in that range" if ranged else "no entry touched it"


def cmd_history(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Every log entry that touched a topic, topic id, namespace, broker or user."""
    entity = _entity(args)
    ranged = args.gt is not None or args.lte is not None or args.limit is not None
    with open_target(settings, args) as target:
        items = target.history(entity, gt=args.gt, lte=args.lte, limit=args.limit)
        unknown = not items and _never_named(target, entity, ranged=ranged)
    if settings.output == "json":
        out.write(
            json.dumps(
                [
                    {
                        "offset": h.offset,
                        "timestamp": h.timestamp,
                        "principal": h.principal,
                        "record_type": h.record_type,
                        "topic_id": h.topic_id,
                        "description": h.description,
                    }
                    for h in items
                ]
            )
            + "\n"
        )
        return EXIT_OK
    show_ids = (
        entity.topic is not None or entity.topic_id is not None or entity.namespace is not None
    )
    headers = ("offset", "time", "principal", *(("topic id",) if show_ids else ()), "change")
    rows = [
        (
            h.offset,
            format_time(h.timestamp),
            h.principal or "-",
            *((h.topic_id or "-",) if show_ids else ()),
            h.description,
        )
        for h in items
    ]
    if not rows:
        out.write(_nothing_found(entity, unknown=unknown, ranged=ranged) + "\n")
        return EXIT_OK
    print_table(rows, headers, out)
    return EXIT_OK


def add_verbs(hist: argparse.ArgumentParser) -> None:
    """The flags of `mlog history`, on its parser."""
    add_global_options(hist)
    hist.add_argument(
        "--topic", help="a topic name (every incarnation of it); --namespace qualifies it"
    )
    hist.add_argument("--topic-id", help="one incarnation of a topic, by id")
    hist.add_argument("--namespace", help="a namespace (alone), or the namespace of --topic")
    hist.add_argument("--broker", type=broker_id_arg, help="a broker id")
    hist.add_argument(
        "--user", help="a user: its SCRAM credentials and the ACLs for it (or for User:*)"
    )
    add_range_options(hist)
    add_archive_options(hist)
    hist.set_defaults(handler=cmd_history)
