"""`mlog db|snapshot|history|shell` and `mlog image diff`: snapshots in SQL and time travel.

The snapshot database is `--db URL` (env MLOG_DATABASE_URL), by default the SQLite file
`<data-dir>/snapshots.db`. Snapshot and time-travel commands read the log read-only, so they run
beside a writer.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from api.cli.cluster import _target
from api.cli.common import (
    EXIT_DAMAGED,
    EXIT_ERROR,
    EXIT_OK,
    CliError,
    add_global_options,
    count_arg,
    format_time,
    offset_arg,
    print_table,
)
from api.cli.progress import Progress
from api.cli.shell import ImageShell, ShellError, ShellExit
from api.service.settings import Settings
from api.service.snapshots import open_store
from metadata_log import MetadataLog
from records.errors import MetadataLogError
from records.uuids import Uuid
from replay.sql.schema import SchemaState
from replay.sql.store import SnapshotInfo, SnapshotStore
from replay.timetravel import Entity, point_offset, snapshot_matches_log, travel


@contextmanager
def _store(settings: Settings, *, create: bool = True) -> Iterator[SnapshotStore]:
    store = open_store(settings, create=create)
    try:
        yield store
    finally:
        store.close()


@contextmanager
def _log(settings: Settings) -> Iterator[MetadataLog]:
    with MetadataLog.open(settings.log_dir, config=settings.log, read_only=True) as log:
        yield log


def _emit(settings: Settings, out: TextIO, data: Any, text: str) -> None:
    if settings.output == "json":
        out.write(json.dumps(data, separators=(",", ":")) + "\n")
    else:
        out.write(text + "\n")


def _info_json(info: SnapshotInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "offset": info.offset,
        "epoch": info.epoch,
        "log_timestamp": info.timestamp,
        "created_at": info.created_at.isoformat(timespec="milliseconds"),
        "record_count": info.record_count,
        "checksum": info.checksum,
        "format_version": info.format_version,
    }


# ---------------------------------------------------------------------- db


def cmd_db_upgrade(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Create or migrate the snapshot tables up to this code's head revision."""
    with _store(settings) as store:
        path = store.sqlite_path()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        before, after = store.upgrade()
    if before.revision == after.revision:
        text = f"{store.shown_url}: already at head revision {after.revision}"
    else:
        text = f"{store.shown_url}: upgraded from {before.revision or 'empty'} to {after.revision}"
    _emit(settings, out, {"from": before.revision, "to": after.revision}, text)
    return EXIT_OK


def cmd_db_current(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Show the database's schema revision and how it compares with this code."""
    with _store(settings, create=False) as store:
        status = store.status()
    _emit(
        settings,
        out,
        {"revision": status.revision, "head": status.head, "state": status.state.value},
        f"{store.shown_url}: {status.describe()}",
    )
    return EXIT_OK


def cmd_db_check(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Exit 0 if the schema is at head and matches the models, 1 otherwise."""
    with _store(settings, create=False) as store:
        status = store.status()
        drift = store.drift() if status.state is SchemaState.CURRENT else []
    ok = status.state is SchemaState.CURRENT and not drift
    text = f"{store.shown_url}: {status.describe()}"
    if drift:
        text += "; but the tables differ from the models: " + "; ".join(drift)
    _emit(
        settings,
        out,
        {"ok": ok, "state": status.state.value, "revision": status.revision, "drift": drift},
        text,
    )
    return EXIT_OK if ok else EXIT_DAMAGED


# ---------------------------------------------------------------------- snapshot


def cmd_snapshot_create(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Write a snapshot of the image at the end of the log (or at --at-offset)."""
    with _log(settings) as log, _store(settings) as store:
        store.ensure_schema()
        progress = Progress("building the image")
        try:
            result = travel(log, store, at_offset=args.at_offset, progress=progress.advance)
        finally:
            progress.finish()
        image = result.image
        if image.provenance.offset < 0:
            raise CliError("the log is empty; there is nothing to snapshot")
        existing = [
            s
            for s in store.snapshots(gt=image.provenance.offset - 1, lte=image.provenance.offset)
            if snapshot_matches_log(log, s)
        ]
        if existing and not args.force:
            info = existing[-1]
            _emit(
                settings,
                out,
                {**_info_json(info), "created": False},
                f"snapshot {info.id} already holds offset {info.offset}; nothing to do "
                "(--force writes another)",
            )
            return EXIT_OK
        progress = Progress("writing the snapshot", total=image.topics.partition_count())
        try:
            info = store.write(image, progress=progress.advance)
        finally:
            progress.finish()
        deleted = store.retain(settings.snapshot_retention)
    _emit(
        settings,
        out,
        {**_info_json(info), "created": True, "deleted": [s.id for s in deleted]},
        f"snapshot {info.id} at offset {info.offset}: {info.record_count} records, checksum "
        f"{info.checksum[:16]}"
        + (f"; deleted old snapshot(s) {', '.join(str(s.id) for s in deleted)}" if deleted else ""),
    )
    return EXIT_OK


def cmd_snapshot_list(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """List snapshots (oldest first; --desc for newest first)."""
    with _store(settings, create=False) as store:
        infos = store.snapshots(gt=args.gt, lte=args.lte, limit=args.limit, desc=args.desc)
    if settings.output == "json":
        out.write(json.dumps([_info_json(i) for i in infos]) + "\n")
        return EXIT_OK
    rows = [
        (
            i.id,
            i.offset,
            i.epoch,
            format_time(i.timestamp),
            i.created_at.isoformat(timespec="seconds"),
            i.record_count,
            i.checksum[:12],
        )
        for i in infos
    ]
    print_table(rows, ("id", "offset", "epoch", "log time", "created", "records", "checksum"), out)
    return EXIT_OK


def cmd_snapshot_show(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Show one snapshot: its row and the rows of each content table."""
    with _store(settings, create=False) as store:
        info = store.get(args.id)
        counts = store.count_rows(args.id)
    if settings.output == "json":
        out.write(json.dumps({**_info_json(info), "rows": counts}) + "\n")
        return EXIT_OK
    for key, value in _info_json(info).items():
        out.write(f"{key + ':':<16}{value}\n")
    out.write("rows:\n")
    for table, count in counts.items():
        out.write(f"  {table:<28}{count}\n")
    return EXIT_OK


def cmd_snapshot_verify(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Recompute checksums (one snapshot or all); exit 1 if any is damaged."""
    results = []
    with _store(settings, create=False) as store:
        ids = [args.id] if args.id is not None else [s.id for s in store.snapshots()]
        log = None
        if settings.log_dir.is_dir():
            log = MetadataLog.open(settings.log_dir, config=settings.log, read_only=True)
        try:
            for snapshot_id in ids:
                result = store.verify(snapshot_id)
                of_log = None if log is None else snapshot_matches_log(log, result.info)
                results.append((result, of_log))
        finally:
            if log is not None:
                log.close()
    ok = all(r.ok for r, _ in results)
    if settings.output == "json":
        out.write(
            json.dumps(
                [
                    {
                        "id": r.info.id,
                        "offset": r.info.offset,
                        "ok": r.ok,
                        "error": r.error,
                        "matches_log": of_log,
                    }
                    for r, of_log in results
                ]
            )
            + "\n"
        )
        return EXIT_OK if ok else EXIT_DAMAGED
    for r, of_log in results:
        status = "ok" if r.ok else f"DAMAGED: {r.error or 'checksum mismatch'}"
        note = "" if of_log is not False else " (not taken from this data directory's log)"
        out.write(f"snapshot {r.info.id} (offset {r.info.offset}): {status}{note}\n")
    if not results:
        out.write("no snapshots\n")
    return EXIT_OK if ok else EXIT_DAMAGED


def cmd_snapshot_delete(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Delete one snapshot (the log still holds everything it held)."""
    with _store(settings, create=False) as store:
        info = store.delete(args.id)
    _emit(settings, out, _info_json(info), f"deleted snapshot {info.id} (offset {info.offset})")
    return EXIT_OK


# ---------------------------------------------------------------------- history, diff


def _entity(args: argparse.Namespace) -> Entity:
    topic_id = None
    if args.topic_id is not None:
        try:
            topic_id = Uuid.parse(args.topic_id)
        except ValueError as exc:
            raise CliError(f"--topic-id: {exc}") from None
    given = [v for v in (args.topic, topic_id, args.namespace, args.broker) if v is not None]
    if len(given) != 1:
        raise CliError(
            "name one entity: --topic NAME, --topic-id ID, --namespace NS or --broker ID"
        )
    return Entity(topic=args.topic, topic_id=topic_id, namespace=args.namespace, broker=args.broker)


def cmd_history(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Every log entry that touched a topic, topic id, namespace or broker."""
    entity = _entity(args)
    with _target(settings, args) as target:
        items = target.history(entity, gt=args.gt, lte=args.lte, limit=args.limit)
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
        out.write("no entry touched it\n")
        return EXIT_OK
    print_table(rows, headers, out)
    return EXIT_OK


def cmd_image_diff(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """What changed between two points of the log (offsets or ISO-8601 times)."""
    with _target(settings, args) as target:
        start, end, changes = target.diff(args.from_, args.to)
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


# ---------------------------------------------------------------------- shell


def cmd_shell(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """An interactive shell over the image tree; -c runs commands and exits."""
    with _log(settings) as log, _store(settings, create=False) as store:
        offset = args.at_offset
        if args.at_time is not None:
            offset = point_offset(log, args.at_time)
        image = travel(log, store, at_offset=offset).image
        shell = ImageShell(log, store, image, out)
        if args.command is not None:
            return _run_lines(shell, args.command.split(";"), stop_on_error=True)
        interactive = sys.stdin.isatty()
        if interactive:
            out.write("metadata-log shell; `help` lists the commands\n")
        while True:
            if interactive:
                out.write(shell.prompt)
                out.flush()
            line = sys.stdin.readline()
            if not line:
                return EXIT_OK
            code = _run_lines(shell, [line], stop_on_error=not interactive)
            if code != EXIT_OK and not interactive:
                return code
            if code == -1:
                return EXIT_OK


def _run_lines(shell: ImageShell, lines: list[str], *, stop_on_error: bool) -> int:
    for line in lines:
        try:
            shell.run(line)
        except ShellExit:
            return -1 if not stop_on_error else EXIT_OK
        except (ShellError, MetadataLogError) as exc:
            print(f"mlog shell: {exc}", file=sys.stderr)
            if stop_on_error:
                return EXIT_ERROR
    return EXIT_OK


# ---------------------------------------------------------------------- parser


def _range_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gt", type=offset_arg, help="only offsets > N")
    parser.add_argument("--lte", type=offset_arg, help="only offsets <= N")
    parser.add_argument("--limit", type=count_arg, help="at most N rows")


def _snapshot_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a snapshot id (an integer)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a snapshot id (ids start at 1)")
    return value


def add_commands(nouns: Any) -> None:
    """Register db, snapshot, history and shell, and `diff` under the `image` noun."""
    db = nouns.add_parser("db", help="the snapshot database's schema")
    verbs = db.add_subparsers(dest="verb", metavar="VERB", required=True)
    for name, handler, text in (
        ("upgrade", cmd_db_upgrade, "create or migrate the snapshot tables to the head revision"),
        ("current", cmd_db_current, "show the schema revision"),
        ("check", cmd_db_check, "exit 0 if the schema is current and matches the code"),
    ):
        sub = verbs.add_parser(name, help=text)
        add_global_options(sub)
        sub.set_defaults(handler=handler)

    snapshot = nouns.add_parser("snapshot", help="snapshots of the image in SQL")
    verbs = snapshot.add_subparsers(dest="verb", metavar="VERB", required=True)
    create = verbs.add_parser("create", help="snapshot the image now (end of the log)")
    add_global_options(create)
    create.add_argument("--at-offset", type=offset_arg, help="snapshot the image at offset N")
    create.add_argument("--force", action="store_true", help="even if one holds that offset")
    create.set_defaults(handler=cmd_snapshot_create)
    listing = verbs.add_parser("list", help="list snapshots")
    add_global_options(listing)
    _range_options(listing)
    listing.add_argument("--desc", action="store_true", help="newest first")
    listing.set_defaults(handler=cmd_snapshot_list)
    for name, handler, text in (
        ("show", cmd_snapshot_show, "show one snapshot and its row counts"),
        ("delete", cmd_snapshot_delete, "delete one snapshot"),
    ):
        sub = verbs.add_parser(name, help=text)
        add_global_options(sub)
        sub.add_argument("id", type=_snapshot_id, help="snapshot id (see snapshot list)")
        sub.set_defaults(handler=handler)
    verify = verbs.add_parser("verify", help="check snapshot checksums (exit 1 if damaged)")
    add_global_options(verify)
    verify.add_argument("id", type=_snapshot_id, nargs="?", help="one snapshot (default all)")
    verify.set_defaults(handler=cmd_snapshot_verify)

    hist = nouns.add_parser("history", help="log entries that touched a topic/namespace/broker")
    add_global_options(hist)
    hist.add_argument("--topic", help="a topic name (every incarnation of it)")
    hist.add_argument("--topic-id", help="one incarnation of a topic, by id")
    hist.add_argument("--namespace", help="a namespace")
    hist.add_argument("--broker", type=offset_arg, help="a broker id")
    _range_options(hist)
    hist.set_defaults(handler=cmd_history)

    shell = nouns.add_parser("shell", help="interactive shell over the image tree")
    add_global_options(shell)
    shell.add_argument("-c", dest="command", help="run commands (';'-separated) and exit")
    when = shell.add_mutually_exclusive_group()
    when.add_argument("--at-offset", type=offset_arg, help="start at offset N")
    when.add_argument("--at-time", metavar="T", help="start at a time (ISO-8601 or epoch ms)")
    shell.set_defaults(handler=cmd_shell)

    image_verbs = _subcommands(nouns.choices["image"])
    image_diff = image_verbs.add_parser("diff", help="what changed between two points")
    add_global_options(image_diff)
    image_diff.add_argument("--from", dest="from_", required=True, help="offset or ISO-8601 time")
    image_diff.add_argument("--to", help="offset or ISO-8601 time (default: the end of the log)")
    image_diff.set_defaults(handler=cmd_image_diff)


def _subcommands(parser: argparse.ArgumentParser) -> Any:
    """The verbs of a noun registered by another module (argparse keeps them as an action)."""
    # argparse has no public accessor for a parser's subcommands.
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    raise RuntimeError(f"{parser.prog} has no subcommands")
