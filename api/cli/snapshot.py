"""`mlog snapshot create|list|show|verify|delete`: snapshots of the image in SQL.

The snapshot database is `--db URL` (env MLOG_DATABASE_URL), by default the SQLite file
`<data-dir>/snapshots.db`. These commands read the log read-only, so they run beside a writer.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.common import (
    EXIT_DAMAGED,
    EXIT_OK,
    CliError,
    add_global_options,
    add_range_options,
    bounded_int,
    offset_arg,
)
from api.cli.output import emit, format_time, print_table
from api.progress import Progress
from api.service.snapshots import open_store
from api.targets import QUORUM_STATE, open_reader
from api.write_interrupts import committed, writes_finish
from metadata_log.epoch import EPOCH_CHECKPOINT_NAME
from records.fields import INT32_MAX
from replay.loader import load_image
from replay.timetravel import batch_end, snapshot_matches_log, travel

if TYPE_CHECKING:
    from api.service.settings import Settings
    from metadata_log.stored_log import StoredLog
    from replay.image import MetadataImage
    from replay.sql.store import SnapshotInfo


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
        "base_id": info.base_id,
        "chain_length": info.chain_length,
        "content_bytes": info.content_bytes,
    }


def cmd_snapshot_create(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Write a snapshot of the image at the end of the log (or at --at-offset)."""
    if (settings.data_dir / QUORUM_STATE).exists() or (
        settings.log_dir / EPOCH_CHECKPOINT_NAME
    ).exists():
        # Its log's tail may hold entries the quorum never committed, and its snapshots are
        # offered to other nodes (FetchSnapshot) and trimmed below: committed state only.
        raise CliError(
            f"{settings.data_dir} belongs to a node of a controller quorum: its snapshots are "
            "taken by the running node, of committed state only (metadata.log.max.snapshot."
            "interval.ms, metadata.log.max.record.bytes.between.snapshots)"
        )
    with open_reader(settings) as log, open_store(settings) as store:
        store.ensure_schema()
        progress = Progress("building the image")
        try:
            # A snapshot holds a committed state: a point inside a batch means its end.
            at_offset = None if args.at_offset is None else batch_end(log, args.at_offset)
            result = travel(log, store, at_offset=at_offset, progress=progress.advance)
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
            emit(
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
            committed()  # a Ctrl-C rolls a snapshot's write back; once written, it stands
        finally:
            progress.finish()
        deleted = store.retain(
            settings.snapshot_retention, max_bytes=settings.snapshot_retention_bytes
        )
    emit(
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
    with open_store(settings, create=False) as store:
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
            "full" if i.base_id is None else f"on {i.base_id}",
            "?" if i.content_bytes is None else i.content_bytes,
        )
        for i in infos
    ]
    print_table(
        rows,
        ("id", "offset", "epoch", "log time", "created", "records", "checksum", "kind", "bytes"),
        out,
    )
    return EXIT_OK


def cmd_snapshot_show(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Show one snapshot: its row and the rows of each content table."""
    with open_store(settings, create=False) as store:
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
    """Check snapshots (one or all): checksums, and each image against the log replayed to it.

    An increment is checked as its chain loads (its base's rows with the increments laid
    over). With the log at hand, each snapshot's image is compared with the log replayed to
    its offset, one pass through the log for all of them (`--checksums-only` skips it).
    """
    results = []
    with open_store(settings, create=False) as store:
        infos = [store.get(args.id)] if args.id is not None else store.snapshots()
        log = None
        if settings.log_dir.is_dir():
            log = open_reader(settings)
        try:
            replay = _Replay(log) if log is not None and not args.checksums_only else None
            for info in sorted(infos, key=lambda i: (i.offset, i.id)):
                result = store.verify(info.id)
                of_log = None if log is None else snapshot_matches_log(log, result.info)
                replayed = None
                if replay is not None and of_log and result.image is not None:
                    replayed = replay.matches(result.image)
                results.append((result, of_log, replayed))
        finally:
            if log is not None:
                log.close()
    ok = all(r.ok and replayed is not False for r, _, replayed in results)
    if settings.output == "json":
        out.write(
            json.dumps(
                [
                    {
                        "id": r.info.id,
                        "offset": r.info.offset,
                        "base_id": r.info.base_id,
                        "ok": r.ok and replayed is not False,
                        "error": r.error,
                        "matches_log": of_log,
                        "matches_replay": replayed,
                    }
                    for r, of_log, replayed in results
                ]
            )
            + "\n"
        )
        return EXIT_OK if ok else EXIT_DAMAGED
    for r, of_log, replayed in results:
        status = "ok" if r.ok else f"DAMAGED: {r.error or 'checksum mismatch'}"
        if r.ok and replayed is False:
            status = "DIFFERS from the log replayed to its offset"
        kind = "" if r.info.base_id is None else f", increment on {r.info.base_id}"
        note = "" if of_log is not False else " (not taken from this data directory's log)"
        if replayed:
            note = ", equal to the log replayed to it"
        out.write(f"snapshot {r.info.id} (offset {r.info.offset}{kind}): {status}{note}\n")
    if not results:
        out.write("no snapshots\n")
    return EXIT_OK if ok else EXIT_DAMAGED


class _Replay:
    """The log replayed forward through the snapshots' offsets, in one pass."""

    def __init__(self, log: StoredLog) -> None:
        self._log = log
        self._image: MetadataImage | None = None

    def matches(self, image: MetadataImage) -> bool | None:
        """Whether `image` is the log replayed to its offset (None: the log does not reach)."""
        offset = image.provenance.offset
        if self._log.log_start_offset > 0:
            return None  # a trimmed log: its first entries are in no image to replay from
        base = self._image
        if base is None or base.provenance.offset > offset:
            self._image = load_image(self._log, lte=offset)
        else:
            self._image = load_image(self._log, lte=offset, base=base)
        return self._image == image


def cmd_snapshot_delete(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Delete one snapshot (the log still holds everything it held)."""
    with open_store(settings, create=False) as store, writes_finish():
        info = store.delete(args.id)
    emit(settings, out, _info_json(info), f"deleted snapshot {info.id} (offset {info.offset})")
    return EXIT_OK


def _snapshot_id(text: str) -> int:
    """Argument type: a snapshot id (1 ..= 2^31-1, the id column's range)."""
    return bounded_int(text, "a snapshot id", low=1, high=INT32_MAX, hint=f"ids are 1..{INT32_MAX}")


def add_verbs(snapshot: argparse.ArgumentParser) -> None:
    """The verbs of `mlog snapshot` and their flags, on the noun's parser."""
    verbs = snapshot.add_subparsers(dest="verb", metavar="VERB", required=True)
    create = verbs.add_parser("create", help="snapshot the image now (end of the log)")
    add_global_options(create)
    create.add_argument("--at-offset", type=offset_arg, help="snapshot the image at offset N")
    create.add_argument("--force", action="store_true", help="even if one holds that offset")
    create.set_defaults(handler=cmd_snapshot_create)
    listing = verbs.add_parser("list", help="list snapshots")
    add_global_options(listing)
    add_range_options(listing)
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
    verify.add_argument(
        "--checksums-only",
        action="store_true",
        help="check the rows' checksums only, not each image against the log replayed to it",
    )
    verify.set_defaults(handler=cmd_snapshot_verify)
