"""`mlog log ...`: inspect and maintain the log itself."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from api.cli.common import (
    EXIT_DAMAGED,
    EXIT_OK,
    CliError,
    add_global_options,
    count_arg,
    format_time,
    offset_arg,
    open_reader,
    print_table,
)
from api.cli.progress import Progress
from api.cli.targets import LocalTarget, RemoteTarget
from api.service.settings import Settings
from metadata_log import MetadataLog
from records.entry import LogEntry
from records.errors import RecordError
from records.json_form import record_from_json, record_to_json
from records.model import Record
from replay.append import append_replayed


def entry_to_json(entry: LogEntry) -> dict[str, Any]:
    """The JSON form of a log entry (one line of `mlog log dump --output json`)."""
    return {
        "offset": entry.offset,
        "epoch": entry.epoch,
        "timestamp": entry.timestamp,
        "principal": entry.principal,
        "record": record_to_json(entry.record),
    }


def cmd_log_dump(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Print entries, one line each, like Kafka's dump-log tool with its metadata decoder.

    Reads the data directory, or the server's log through FetchLog with --bootstrap-server;
    `--follow` keeps printing new entries until interrupted.
    """
    target: LocalTarget | RemoteTarget = (
        RemoteTarget(settings.bootstrap_server)
        if settings.bootstrap_server
        else LocalTarget(settings, principal="", check_pending=False)
    )
    try:
        entries = target.entries(gt=args.gt, lte=args.lte, limit=args.limit, follow=args.follow)
        for entry in entries:
            if settings.output == "json":
                out.write(json.dumps(entry_to_json(entry), separators=(",", ":")) + "\n")
            else:
                payload = json.dumps(record_to_json(entry.record), separators=(",", ":"))
                out.write(
                    f"offset: {entry.offset} epoch: {entry.epoch} "
                    f"timestamp: {format_time(entry.timestamp)} "
                    f"principal: {entry.principal or '-'} payload: {payload}\n"
                )
            if args.follow:
                out.flush()  # a follower's reader sees each entry as it comes
    except KeyboardInterrupt:
        if not args.follow:
            raise
    finally:
        target.close()
    return EXIT_OK


def cmd_log_verify(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Check every block of every segment; exit 0 if clean, 1 if damaged."""
    with open_reader(settings) as log:
        progress = Progress("verifying", total=log.end_offset)
        report = log.verify(progress=progress.advance)
        progress.finish()
    if settings.output == "json":
        out.write(
            json.dumps(
                {
                    "ok": report.ok,
                    "entries": report.entries,
                    "torn_tail": report.torn_tail,
                    "segments": [
                        {
                            "segment": s.info.path.name,
                            "base_offset": s.info.base_offset,
                            "entries_checked": s.entries,
                            "size_bytes": s.info.size_bytes,
                            "error": None if s.error is None else str(s.error),
                        }
                        for s in report.segments
                    ],
                }
            )
            + "\n"
        )
    else:
        rows = [
            (
                s.info.path.name,
                s.entries,
                s.info.size_bytes,
                "ok"
                if s.error is None
                else f"DAMAGED at byte {s.error.position}: {s.error.reason}",
            )
            for s in report.segments
        ]
        print_table(rows, ("segment", "entries", "bytes", "status"), out)
        if report.torn_tail:
            out.write(f"torn tail (the next writer open truncates it): {report.torn_tail}\n")
        verdict = "clean" if report.ok else "DAMAGED"
        out.write(f"{verdict}: {report.entries} entries in {len(report.segments)} segments\n")
    return EXIT_OK if report.ok else EXIT_DAMAGED


def cmd_log_segments(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """List the segments with their offset ranges, sizes and newest timestamps."""
    with open_reader(settings) as log:
        infos = log.segments()
    if settings.output == "json":
        items = [
            {
                "segment": i.path.name,
                "base_offset": i.base_offset,
                "next_offset": i.next_offset,
                "size_bytes": i.size_bytes,
                "max_timestamp": i.max_timestamp,
            }
            for i in infos
        ]
        out.write(json.dumps(items) + "\n")
    else:
        rows = [
            (
                i.path.name,
                i.base_offset,
                i.next_offset - 1 if i.next_offset > i.base_offset else "-",
                i.size_bytes,
                format_time(i.max_timestamp) if i.max_timestamp >= 0 else "-",
            )
            for i in infos
        ]
        print_table(rows, ("segment", "first", "last", "bytes", "newest"), out)
    return EXIT_OK


def _read_records(stream: TextIO, source: str) -> list[Record]:
    records: list[Record] = []
    for number, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CliError(f"{source} line {number} is not JSON: {exc.msg}") from None
        if isinstance(obj, dict) and "record" in obj:  # a line of `mlog log dump --output json`
            obj = obj["record"]
        try:
            records.append(record_from_json(obj))
        except RecordError as exc:
            raise CliError(f"{source} line {number}: {exc}") from None
    if not records:
        raise CliError(f"{source} holds no records; give one JSON record per line")
    return records


def cmd_log_append(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Append JSON records (one per line) as one atomic batch, if it replays: a repair tool."""
    if args.file == "-":
        records = _read_records(sys.stdin, "standard input")
    else:
        try:
            with open(args.file, encoding="utf-8") as f:
                records = _read_records(f, args.file)
        except OSError as exc:
            raise CliError(f"cannot read {args.file}: {exc.strerror}") from None
    progress = Progress("replaying the log")
    try:
        with MetadataLog.open(settings.log_dir, config=settings.log) as log:
            # Only a batch that replays onto the log's image is appended (else nothing is).
            first, last = append_replayed(
                log, records, principal=args.principal, progress=progress.advance
            )
    finally:
        progress.finish()
    if settings.output == "json":
        out.write(json.dumps({"first_offset": first, "last_offset": last}) + "\n")
    else:
        out.write(f"appended {last - first + 1} records at offsets {first}..{last}\n")
    return EXIT_OK


def add_commands(nouns: Any) -> None:
    """Register `mlog log ...` on the top-level subparsers."""
    log = nouns.add_parser("log", help="inspect and maintain the log itself")
    verbs = log.add_subparsers(dest="verb", metavar="VERB", required=True)

    dump = verbs.add_parser("dump", help="print entries, one line each")
    add_global_options(dump)
    dump.add_argument("--gt", type=offset_arg, help="only entries with offset > N")
    dump.add_argument("--lte", type=offset_arg, help="only entries with offset <= N")
    dump.add_argument("--limit", type=count_arg, help="at most N entries")
    dump.add_argument(
        "--follow",
        action="store_true",
        help="then wait for new entries and print each as it is committed (Ctrl-C stops)",
    )
    # The only `log` command that also runs through a server (FetchLog): the others read or
    # write the log's files.
    dump.set_defaults(handler=cmd_log_dump, remote=True)

    verify = verbs.add_parser("verify", help="check every block (exit 0 clean, 1 damaged)")
    add_global_options(verify)
    verify.set_defaults(handler=cmd_log_verify)

    segments = verbs.add_parser("segments", help="list the segments")
    add_global_options(segments)
    segments.set_defaults(handler=cmd_log_segments)

    append = verbs.add_parser(
        "append",
        help="append JSON records (one per line, as `log dump --output json` prints) atomically",
    )
    add_global_options(append)
    append.add_argument("--file", default="-", help="file of JSON lines (default: stdin)")
    append.add_argument("--principal", help="who is appending (stored with each entry)")
    append.set_defaults(handler=cmd_log_append)
