"""`mlog image show|diff`: the metadata image as a tree of paths, now or at a past point."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, TextIO

from api.cli.common import (
    EXIT_OK,
    CliError,
    add_archive_options,
    add_global_options,
    offset_arg,
)
from api.cli.image_tree import Directory, PathError, lookup, walk
from api.cli.targets import fetch_image, note_batch_end_at, open_target

if TYPE_CHECKING:
    from api.service.settings import Settings


def cmd_image_show(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Print the image (or the subtree at PATH) like Kafka's metadata shell."""
    image = fetch_image(settings, args, at_offset=args.at_offset, at_time=args.at_time)
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


def cmd_image_diff(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """What changed between two points of the log (offsets or ISO-8601 times)."""
    with open_target(settings, args) as target:
        start, end, changes = target.diff(args.from_, args.to)
    # As `image show --at-offset`: an offset inside an atomic batch is the batch's end.
    for asked, at in ((args.from_, start), (args.to, end)):
        if asked is not None and asked.strip().isdigit():
            note_batch_end_at(int(asked), at)
    if settings.output == "json":
        out.write(
            json.dumps({"from": start, "to": end, "changes": [c.to_json() for c in changes]}) + "\n"
        )
        return EXIT_OK
    out.write(f"changes from offset {start} to offset {end}:\n")
    for change in changes:
        out.write(change.text() + "\n")
    if not changes:
        out.write("no changes\n")
    return EXIT_OK


def add_verbs(image: argparse.ArgumentParser) -> None:
    """The verbs of `mlog image` and their flags, on the noun's parser."""
    add_archive_options(image, reads=False)
    verbs = image.add_subparsers(dest="verb", metavar="VERB", required=True)
    show = verbs.add_parser("show", help="print the image tree (or the subtree at PATH)")
    add_global_options(show)
    show.add_argument("path", nargs="?", default="/", help="e.g. /topics/byName/orders/0")
    when = show.add_mutually_exclusive_group()
    when.add_argument("--at-offset", type=offset_arg, help="the image after the entry at N")
    when.add_argument("--at-time", metavar="T", help="the image at a time (ISO-8601 or epoch ms)")
    add_archive_options(show)
    show.set_defaults(handler=cmd_image_show)
    image_diff = verbs.add_parser("diff", help="what changed between two points")
    add_global_options(image_diff)
    image_diff.add_argument("--from", dest="from_", required=True, help="offset or ISO-8601 time")
    image_diff.add_argument("--to", help="offset or ISO-8601 time (default: the end of the log)")
    add_archive_options(image_diff)
    image_diff.set_defaults(handler=cmd_image_diff)
