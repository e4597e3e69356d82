"""The `mlog` command: noun-verb subcommands over a data directory (embedded mode)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from api.progress import Progress
from api.settings import OUTPUT_FORMATS, Settings, load_settings
from metadata_log import MetadataLog
from records.entry import LogEntry
from records.errors import MetadataLogError, RecordError
from records.json_form import record_from_json, record_to_json
from records.model import Record

EXIT_OK = 0
EXIT_DAMAGED = 1
EXIT_ERROR = 2


class CliError(MetadataLogError):
    """A command-line usage problem; the message says how to fix it."""


def _format_time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def entry_to_json(entry: LogEntry) -> dict[str, Any]:
    """The JSON form of a log entry (one line of `mlog log dump --output json`)."""
    return {
        "offset": entry.offset,
        "epoch": entry.epoch,
        "timestamp": entry.timestamp,
        "principal": entry.principal,
        "record": record_to_json(entry.record),
    }


def _print_table(rows: Sequence[Sequence[object]], headers: Sequence[str], out: TextIO) -> None:
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")


def _open_reader(settings: Settings) -> MetadataLog:
    return MetadataLog.open(settings.log_dir, config=settings.log, read_only=True)


# ------------------------------------------------------------------------- log commands


def cmd_log_dump(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Print entries, one line each, like Kafka's dump-log tool with its metadata decoder."""
    with _open_reader(settings) as log:
        entries: Iterator[LogEntry] = log.read(gt=args.gt, lte=args.lte, limit=args.limit)
        for entry in entries:
            if settings.output == "json":
                out.write(json.dumps(entry_to_json(entry), separators=(",", ":")) + "\n")
            else:
                payload = json.dumps(record_to_json(entry.record), separators=(",", ":"))
                out.write(
                    f"offset: {entry.offset} epoch: {entry.epoch} "
                    f"timestamp: {_format_time(entry.timestamp)} "
                    f"principal: {entry.principal or '-'} payload: {payload}\n"
                )
    return EXIT_OK


def cmd_log_verify(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Check every block of every segment; exit 0 if clean, 1 if damaged."""
    with _open_reader(settings) as log:
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
        _print_table(rows, ("segment", "entries", "bytes", "status"), out)
        if report.torn_tail:
            out.write(f"torn tail (the next writer open truncates it): {report.torn_tail}\n")
        verdict = "clean" if report.ok else "DAMAGED"
        out.write(f"{verdict}: {report.entries} entries in {len(report.segments)} segments\n")
    return EXIT_OK if report.ok else EXIT_DAMAGED


def cmd_log_segments(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """List the segments with their offset ranges, sizes and newest timestamps."""
    with _open_reader(settings) as log:
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
                _format_time(i.max_timestamp) if i.max_timestamp >= 0 else "-",
            )
            for i in infos
        ]
        _print_table(rows, ("segment", "first", "last", "bytes", "newest"), out)
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
    """Append JSON records (one per line) as one atomic batch: a low-level repair/import tool."""
    if args.file == "-":
        records = _read_records(sys.stdin, "standard input")
    else:
        try:
            with open(args.file, encoding="utf-8") as f:
                records = _read_records(f, args.file)
        except OSError as exc:
            raise CliError(f"cannot read {args.file}: {exc.strerror}") from None
    with MetadataLog.open(settings.log_dir, config=settings.log) as log:
        first, last = log.append(records, principal=args.principal)
    if settings.output == "json":
        out.write(json.dumps({"first_offset": first, "last_offset": last}) + "\n")
    else:
        out.write(f"appended {last - first + 1} records at offsets {first}..{last}\n")
    return EXIT_OK


# ------------------------------------------------------------------------- parser


def _offset(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an offset (an integer)") from None
    if value < -1:
        raise argparse.ArgumentTypeError(f"{value} is not an offset (must be >= -1)")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count (an integer)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is not a count (must be >= 0)")
    return value


def _global_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "--data-dir",
        default=default,
        help="data directory (default ./mlog-data, env MLOG_DATA_DIR)",
    )
    parser.add_argument(
        "--output",
        choices=OUTPUT_FORMATS,
        default=default,
        help="output format (default table, env MLOG_OUTPUT)",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="show tracebacks and debug logging",
    )


Handler = Callable[[argparse.Namespace, Settings, TextIO], int]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `mlog`."""
    parser = argparse.ArgumentParser(
        prog="mlog", description="metadata-log: an event-sourced metadata log service"
    )
    _global_options(parser, suppress=False)
    nouns = parser.add_subparsers(dest="noun", metavar="COMMAND", required=True)

    log = nouns.add_parser("log", help="inspect and maintain the log itself")
    verbs = log.add_subparsers(dest="verb", metavar="VERB", required=True)

    dump = verbs.add_parser("dump", help="print entries, one line each")
    _global_options(dump, suppress=True)
    dump.add_argument("--gt", type=_offset, help="only entries with offset > N")
    dump.add_argument("--lte", type=_offset, help="only entries with offset <= N")
    dump.add_argument("--limit", type=_count, help="at most N entries")
    dump.set_defaults(handler=cmd_log_dump)

    verify = verbs.add_parser("verify", help="check every block (exit 0 clean, 1 damaged)")
    _global_options(verify, suppress=True)
    verify.set_defaults(handler=cmd_log_verify)

    segments = verbs.add_parser("segments", help="list the segments")
    _global_options(segments, suppress=True)
    segments.set_defaults(handler=cmd_log_segments)

    append = verbs.add_parser(
        "append",
        help="append JSON records (one per line, as `log dump --output json` prints) atomically",
    )
    _global_options(append, suppress=True)
    append.add_argument("--file", default="-", help="file of JSON lines (default: stdin)")
    append.add_argument("--principal", help="who is appending (stored with each entry)")
    append.set_defaults(handler=cmd_log_append)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run `mlog`; returns the exit code (0 ok, 1 verify found damage, 2 error)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    out = out or sys.stdout
    debug = bool(getattr(args, "debug", False))
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        settings = load_settings(data_dir=args.data_dir, output=args.output, debug=debug)
        handler: Handler = args.handler
        return handler(args, settings, out)
    except BrokenPipeError:
        # The reader went away (`mlog log dump | head`): not an error. Point stdout at
        # /dev/null so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except (MetadataLogError, OSError) as exc:
        if debug:
            traceback.print_exc()
        message = str(exc) if not isinstance(exc, OSError) else f"{exc.strerror}: {exc.filename}"
        print(f"mlog: error: {message}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
