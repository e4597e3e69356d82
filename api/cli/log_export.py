"""`mlog log export` / `mlog log import`: a copy of a log that keeps what it copies.

`log dump --output json | log append` re-appends the records: new offsets' timestamps and
epochs, one block. An export is one JSON line per stored block, with the block's first
offset, epoch and timestamp and its entries' principals; an import writes the same blocks
into a data directory with no log yet, so offsets, epochs, timestamps, principals and batch
boundaries (what replay checks as a unit, and what `log truncate` cuts at) are the source's.
Without --with-secrets credentials' salts and keys are replaced (and stderr says so, since
the copy then differs from the original); an import writes the hash chain and Merkle index
with the blocks, so a faithful copy has the original's digests at once.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.common import EXIT_OK, CliError, add_global_options
from api.cli.created_paths import removed_on_failure
from api.progress import Progress
from api.targets import open_reader
from api.write_interrupts import writes_finish
from records.errors import MetadataLogError, RecordError
from records.json_form import record_from_json, record_to_json
from replay.timetravel.security import SECRET_RECORD_TYPES, redacted

if TYPE_CHECKING:
    from api.service.settings import Settings
    from metadata_log.replica import ReplicaBlock
    from metadata_log.replica_log import ReplicaLog
    from records.codec import RecordBlock
    from records.model import Record

EXPORT_FORMAT = "mlog-log-export/1"
"""The first line of an export: what the file is, so an import refuses anything else."""

REDACTED_WARNING = (
    "mlog: warning: the export replaced the salts and keys of {count} credential record(s) "
    "with placeholders: a log imported from it will not match the original's digests "
    "(`mlog log verify --digest` says DOES NOT MATCH) and its users cannot log in; for a "
    "faithful copy export with --with-secrets (the file then holds those secrets: keep it "
    "as safe as the log)"
)
"""Said on stderr by an export without --with-secrets that redacted any record."""


def block_to_json(block: RecordBlock, *, secrets: bool) -> dict[str, Any]:
    """One stored block as a line of an export: offset, epoch, timestamp, principal runs."""
    batches: list[dict[str, Any]] = []
    for record, principal in zip(block.records, block.principals, strict=True):
        shown = record_to_json(record if secrets else redacted(record))
        if batches and batches[-1]["principal"] == principal:
            batches[-1]["records"].append(shown)
        else:
            batches.append({"principal": principal, "records": [shown]})
    return {
        "first_offset": block.first_offset,
        "epoch": block.epochs[0],
        "timestamp": block.timestamps[0],
        "batches": batches,
    }


def cmd_log_export(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Write the log as blocks, one JSON line each (to stdout or --file)."""
    target: TextIO = out
    opened = None
    if args.file != "-":
        opened = target = open(args.file, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    blocks = redacted_count = 0
    try:
        with open_reader(settings) as log:
            head = {"format": EXPORT_FORMAT, "log_start_offset": log.log_start_offset}
            target.write(json.dumps(head) + "\n")
            for block in log.read_records():
                line = json.dumps(block_to_json(block, secrets=args.with_secrets))
                target.write(line + "\n")
                blocks += 1
                if not args.with_secrets:
                    redacted_count += sum(
                        r.RECORD_TYPE in SECRET_RECORD_TYPES for r in block.records
                    )
    finally:
        if opened is not None:
            opened.close()
    if opened is not None:
        print(f"exported {blocks} block(s) to {args.file}", file=sys.stderr)
    if redacted_count:
        # Only when something was replaced: a log without credentials copies faithfully.
        print(REDACTED_WARNING.format(count=redacted_count), file=sys.stderr)
    return EXIT_OK


def _blocks_of(stream: TextIO, source: str, log: ReplicaLog) -> list[ReplicaBlock]:
    """The blocks of an export, encoded for `log` (nothing written); one-line errors."""
    try:
        lines = iter(enumerate(list(stream), 1))
    except UnicodeDecodeError as exc:
        raise CliError(
            f"{source} is not UTF-8 text (byte {exc.start}); give a file `mlog log export` wrote"
        ) from None
    first = next(lines, None)
    try:
        head = json.loads(first[1]) if first is not None else None
    except json.JSONDecodeError:
        head = None
    if not isinstance(head, dict) or head.get("format") != EXPORT_FORMAT:
        raise CliError(
            f"{source} is not an export of `mlog log export` (its first line names "
            f"{EXPORT_FORMAT}); JSON records go to `mlog log append`"
        )
    if head.get("log_start_offset", 0) != 0:
        raise CliError(
            f"{source} is the export of a trimmed log (it starts at offset "
            f"{head['log_start_offset']}): its state before that is in the snapshots only, so "
            "it cannot be replayed from nothing"
        )
    blocks = []
    for number, line in lines:
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            batches: list[tuple[list[Record], str | None]] = [
                ([record_from_json(r) for r in batch["records"]], batch["principal"])
                for batch in obj["batches"]
            ]
            blocks.append(
                log.encode_block(
                    batches,
                    first_offset=int(obj["first_offset"]),
                    epoch=int(obj["epoch"]),
                    timestamp=int(obj["timestamp"]),
                )
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise CliError(f"{source} line {number} is not a block of an export ({exc})") from None
        except (RecordError, MetadataLogError) as exc:
            raise CliError(f"{source} line {number}: {exc}") from None
    return blocks


def cmd_log_import(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Write an export's blocks into a data directory without a log, if they replay.

    The blocks are written to a new directory beside the log's and renamed into place once
    they are durable and replay: an import is all there or not at all.
    """
    log_dir = settings.log_dir
    if log_dir.exists() and any(log_dir.iterdir()):
        raise CliError(
            f"{log_dir} already holds a log: import into a new data directory (--data-dir)"
        )
    with removed_on_failure(log_dir) as keep:  # a failed import leaves no directory it made
        return _import(args, settings, out, keep)


def _import(
    args: argparse.Namespace, settings: Settings, out: TextIO, keep: Callable[[], None]
) -> int:
    """`cmd_log_import` once the target is checked; `keep` once the log is in place.

    The copy is written with its hash chain and Merkle index, so `mlog log digest` works on it
    at once; a copy of an export made --with-secrets has the original's digests.
    """
    from metadata_log.epoch import EPOCH_CHECKPOINT_NAME
    from metadata_log.merkle import MerkleIndex
    from metadata_log.replica_log import ReplicaLog
    from replay.loader import load_image

    log_dir = settings.log_dir
    staging = log_dir.with_name(log_dir.name + ".importing")
    shutil.rmtree(staging, ignore_errors=True)
    staging.parent.mkdir(parents=True, exist_ok=True)
    progress = Progress("checking the imported log")
    try:
        # The chain is kept from the first block, so the copy can be digested (and checked
        # against the original's digests) at once.
        log = ReplicaLog.open(staging, config=settings.log, chained=True)
        try:
            if args.file == "-":
                blocks = _blocks_of(sys.stdin, "standard input", log)
            else:
                try:
                    with open(args.file, encoding="utf-8") as stream:
                        blocks = _blocks_of(stream, args.file, log)
                except OSError as exc:
                    raise CliError(f"cannot read {args.file}: {exc.strerror}") from None
            if not blocks:
                raise CliError("the export holds no blocks: nothing to import")
            log.write_blocks(blocks, check=True)
            end = log.flush()
            load_image(log, progress=progress.advance)  # a log that does not replay stays out
        finally:
            log.close()
        with MerkleIndex(staging) as index:  # what a v2 digest and `log prove` read
            index.extend(log.storage.segments, end)
        # The epoch cache is a quorum node's (its presence marks one's log); a standalone
        # log's writer takes its epoch from the entries.
        (staging / EPOCH_CHECKPOINT_NAME).unlink(missing_ok=True)
        with writes_finish():
            if log_dir.exists():
                log_dir.rmdir()  # empty (checked above)
            staging.rename(log_dir)
            keep()
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        progress.finish()
    if settings.output == "json":
        out.write(json.dumps({"blocks": len(blocks), "end_offset": end}) + "\n")
    else:
        out.write(f"imported {len(blocks)} block(s), offsets 0..{end - 1}, into {log_dir}\n")
    return EXIT_OK


def add_export_verbs(verbs: Any) -> None:
    """`log export` and `log import`, on the `log` noun's subparsers."""
    export = verbs.add_parser(
        "export",
        help="write the log as blocks (offsets, epochs, timestamps, principals kept) for "
        "`log import`",
    )
    add_global_options(export)
    export.add_argument("--file", default="-", help="where to write (default: stdout)")
    export.add_argument(
        "--with-secrets",
        action="store_true",
        help="keep credentials' salts and keys (else replaced: the copy's users cannot log "
        "in and it does not match the original's digests)",
    )
    export.set_defaults(handler=cmd_log_export)
    imported = verbs.add_parser(
        "import", help="write an export into a data directory that has no log yet"
    )
    add_global_options(imported)
    imported.add_argument("--file", default="-", help="the export (default: stdin)")
    imported.set_defaults(handler=cmd_log_import)
