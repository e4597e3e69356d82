"""Naming a topic on the command line: `--topic`, `--topic-id`, `--namespace`.

Shared by the nouns that act on one topic or partition (topics, configs, leaders, partitions).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from api.cli.common import CliError
from records.uuids import Uuid
from replay.image import NAMESPACE_SEPARATOR, qualified_name

if TYPE_CHECKING:
    from replay.controller.commands import TopicRef


def add_topic_options(parser: argparse.ArgumentParser) -> None:
    """`--topic NAME`, `--topic-id ID` and `--namespace NS`."""
    parser.add_argument("--topic", help="topic name (namespace:name outside the default one)")
    parser.add_argument("--topic-id", help="topic id (22-char base64, as describe shows)")
    add_namespace_option(parser)


def add_namespace_option(parser: argparse.ArgumentParser, text: str | None = None) -> None:
    """`--namespace NS`, by default the namespace of `--topic`."""
    parser.add_argument(
        "--namespace",
        help=text or 'namespace of --topic, e.g. org:apache (default: the default namespace "")',
    )


def topic_name(args: argparse.Namespace) -> str | None:
    """--topic, qualified by --namespace when that is given."""
    name: str | None = getattr(args, "topic", None)
    namespace: str | None = getattr(args, "namespace", None)
    if namespace is None:
        return name
    from replay.controller.namespaces import validate_namespace_name

    validate_namespace_name(namespace)
    if name is None:
        raise CliError("--namespace qualifies --topic NAME; give the topic by name")
    if NAMESPACE_SEPARATOR in name:
        raise CliError(
            f"--topic {name!r} already names a namespace; give the namespace either in --topic "
            "(namespace:name) or with --namespace"
        )
    return qualified_name(namespace, name)


def optional_topic_ref(args: argparse.Namespace) -> TopicRef | None:
    """The topic named by --topic (and --namespace) or --topic-id; None if neither is given."""
    name = topic_name(args)
    raw_id: str | None = getattr(args, "topic_id", None)
    topic_id = None
    if raw_id is not None:
        try:
            topic_id = Uuid.parse(raw_id)
        except ValueError as exc:
            raise CliError(f"--topic-id: {exc}") from None
    if name is None and topic_id is None:
        return None
    from replay.controller.commands import TopicRef

    return TopicRef(name=name, topic_id=topic_id)


def topic_ref(args: argparse.Namespace) -> TopicRef:
    """The topic named by --topic (and --namespace) or --topic-id, which must be given."""
    ref = optional_topic_ref(args)
    if ref is None:
        raise CliError("name the topic with --topic NAME or --topic-id ID")
    return ref
