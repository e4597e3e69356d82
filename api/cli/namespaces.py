"""`mlog namespaces create|list|delete|move`: the namespace tree from the CLI (embedded mode)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.common import EXIT_OK, add_global_options, add_writer_options
from api.cli.output import emit, print_table
from api.cli.targets import fetch_image, open_target
from api.cli.topics import add_move_options
from replay.controller.commands import CreateNamespace, DeleteNamespace
from replay.controller.controller import Controller

if TYPE_CHECKING:
    from api.service.settings import Settings


def cmd_namespaces_create(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Create a namespace and every missing tier above it."""
    request = CreateNamespace(name=args.namespace)
    with open_target(settings, args) as target:
        result = target.create_namespace(request)
    emit(
        settings,
        out,
        {
            "namespace": result.name,
            "namespace_id": str(result.namespace_id),
            "created": list(result.created),
        },
        f"created namespace(s) {', '.join(result.created)} (id of {result.name}: "
        f"{result.namespace_id})",
    )
    return EXIT_OK


def cmd_namespaces_list(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """The namespaces directly under one (or all below it), with topic counts."""
    image = fetch_image(settings, args)
    infos = Controller.list_namespaces(image, args.namespace, recursive=args.recursive)
    if settings.output == "json":
        items: list[dict[str, Any]] = [
            {
                "namespace": i.name,
                "namespace_id": str(i.namespace_id),
                "topics": i.topics,
                "total_topics": i.total_topics,
                "children": i.children,
            }
            for i in infos
        ]
        out.write(json.dumps(items) + "\n")
        return EXIT_OK
    if not infos:
        where = f"under {args.namespace!r}" if args.namespace else "yet"
        out.write(f"no namespaces {where}; create one with `mlog namespaces create`\n")
        return EXIT_OK
    rows = [(i.name, i.topics, i.total_topics, i.children, i.namespace_id) for i in infos]
    print_table(rows, ("namespace", "topics", "topics (subtree)", "children", "id"), out)
    return EXIT_OK


def cmd_namespaces_delete(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Delete a namespace and its topics (refused if it has children, unless --recursive)."""
    request = DeleteNamespace(name=args.namespace, recursive=args.recursive)
    with open_target(settings, args) as target:
        result = target.delete_namespace(request)
    emit(
        settings,
        out,
        {
            "namespace": result.name,
            "deleted_namespaces": list(result.namespaces),
            "deleted_topics": list(result.topics),
        },
        f"deleted namespace(s) {', '.join(result.namespaces)} and {len(result.topics)} "
        f"topic(s){': ' + ', '.join(result.topics) if result.topics else ''}",
    )
    return EXIT_OK


def add_verbs(namespaces: argparse.ArgumentParser) -> None:
    """The verbs of `mlog namespaces` and their flags, on the noun's parser."""
    verbs = namespaces.add_subparsers(dest="verb", metavar="VERB", required=True)

    create = verbs.add_parser("create", help="create a namespace (and its missing parents)")
    add_writer_options(create)
    create.add_argument("--namespace", required=True, help="full name, e.g. org:apache:kafka")
    create.set_defaults(handler=cmd_namespaces_create)

    listing = verbs.add_parser("list", help="namespaces under one, with topic counts")
    add_global_options(listing)
    listing.add_argument(
        "--namespace", default="", help='list the children of this one (default "": top level)'
    )
    listing.add_argument("--recursive", action="store_true", help="every namespace below it")
    listing.set_defaults(handler=cmd_namespaces_list)

    delete = verbs.add_parser("delete", help="delete a namespace and its topics")
    add_writer_options(delete)
    delete.add_argument("--namespace", required=True, help="full name of the namespace")
    delete.add_argument(
        "--recursive", action="store_true", help="also delete every namespace below it"
    )
    delete.set_defaults(handler=cmd_namespaces_delete)

    move = verbs.add_parser("move", help="move a topic between namespaces (as `topics move`)")
    add_move_options(move)
