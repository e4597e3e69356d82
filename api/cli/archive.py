"""`mlog archive list|verify|upload`: the archive of sealed segments (docs/archive.md).

`list` shows the manifest: the run (the history the archive holds), the entries outside it
(redundant, or beyond a gap), the gaps and any entry that cannot be read. `verify` checks
every archived object against the manifest (`check_archive`), then the archive's segments
as a log with `mlog log verify`'s own checks (`api.cli.log_verify`) over a view of the
archive alone, and a digest with `--digest`. `upload` uploads a data directory's sealed
segments now (before `mlog log trim`, say), reading the log with a `LogReader`, so beside a
running `mlog serve` too.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.common import (
    EXIT_DAMAGED,
    EXIT_OK,
    CliError,
    add_archive_options,
    add_global_options,
)
from api.cli.output import format_time, print_table
from api.cli.targets import archive_of
from api.history_dir import ARCHIVE_URL_ENV, HistoryDir
from api.progress import Progress

if TYPE_CHECKING:
    from api.history_dir import ArchiveSource
    from api.service.settings import Settings
    from metadata_log.archive import Manifest, ManifestEntry

META_PROPERTIES = "meta.properties"
"""The data directory's identity file (`mlog serve`, `mlog quorum format`): its cluster.id."""


def _archive(settings: Settings, args: argparse.Namespace) -> ArchiveSource:
    archive = archive_of(settings, args)
    if archive is None:
        raise CliError(
            f"`mlog archive {args.verb}` needs the archive: give --archive-url URL (or "
            f"{ARCHIVE_URL_ENV}), e.g. --archive-url file:///var/lib/mlog-archive"
        )
    return archive


def _entry_json(entry: ManifestEntry) -> dict[str, Any]:
    return {
        "base_offset": entry.base_offset,
        "last_offset": entry.next_offset - 1,
        "entries": entry.entries,
        "bytes": entry.size_bytes,
        "max_timestamp": entry.max_timestamp,
    }


def _outside(manifest: Manifest) -> tuple[list[ManifestEntry], list[ManifestEntry]]:
    """(redundant entries: inside the run's offsets, entries past a gap)."""
    in_run = {id(e) for e in manifest.run}
    end = manifest.end_offset or 0
    others = [e for e in manifest.entries if id(e) not in in_run]
    return [e for e in others if e.base_offset < end], [e for e in others if e.base_offset >= end]


def cmd_archive_list(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """The archive's manifest: its run, the entries outside it, gaps, the cluster id."""
    from metadata_log.archive import claim, read_manifest

    archive = _archive(settings, args)
    cluster = claim(archive.location, None)
    manifest = read_manifest(archive.location)
    redundant, beyond = _outside(manifest)
    gaps = manifest.gaps
    if settings.output == "json":
        document = {
            "url": archive.location.url,
            "cluster_id": cluster,
            "start_offset": manifest.start_offset,
            "end_offset": manifest.end_offset,
            "run": [_entry_json(e) for e in manifest.run],
            "redundant": [_entry_json(e) for e in redundant],
            "beyond_gap": [_entry_json(e) for e in beyond],
            "gaps": [{"first_offset": a, "last_offset": b - 1} for a, b in gaps],
            "damaged": list(manifest.damaged),
        }
        out.write(json.dumps(document) + "\n")
        return EXIT_OK
    of = f" of cluster {cluster}" if cluster is not None else ""
    if not manifest.run:
        out.write(f"the archive at {archive.location.url}{of} holds no segment yet\n")
    else:
        size = sum(e.size_bytes for e in manifest.run)
        out.write(
            f"the archive at {archive.location.url}{of} holds offsets {manifest.start_offset}.."
            f"{(manifest.end_offset or 0) - 1} in {len(manifest.run)} segment(s), {size} bytes\n"
        )
        print_table([_row(e) for e in manifest.run], _HEADERS, out)
    for entry in redundant:
        out.write(
            f"redundant: offsets {entry.base_offset}..{entry.next_offset - 1} (another "
            "replica's cut; the run holds them)\n"
        )
    for first, end in gaps:
        out.write(f"gap: offsets {first}..{end - 1} are in no entry\n")
    for entry in beyond:
        out.write(
            f"beyond a gap: offsets {entry.base_offset}..{entry.next_offset - 1} (not read "
            "until the gap is filled)\n"
        )
    for line in manifest.damaged:
        out.write(f"DAMAGED: {line}\n")
    return EXIT_OK


_HEADERS = ("first", "last", "entries", "bytes", "newest")


def _row(entry: ManifestEntry) -> tuple[object, ...]:
    newest = format_time(entry.max_timestamp) if entry.max_timestamp >= 0 else "-"
    return (entry.base_offset, entry.next_offset - 1, entry.entries, entry.size_bytes, newest)


def cmd_archive_verify(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Every archived object against the manifest, then the archive's segments as a log.

    Exit 0 when clean (and the digest, if given, matches), 1 naming each problem.
    """
    from api.cli.log_verify import parsed_digest, write_outcome
    from api.history_checks import check_history
    from metadata_log.archive import check_archive, read_manifest

    digest = parsed_digest(args.digest)
    archive = _archive(settings, args)
    manifest = read_manifest(archive.location)
    # Every object is read from the archive itself, not from copies cached by earlier reads:
    # a fresh cache, removed after.
    archive.cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="verify-", dir=archive.cache_dir) as scratch:
        fresh = dataclasses.replace(archive, cache_dir=Path(scratch))
        progress = Progress("checking the archive", total=manifest.end_offset or None)
        try:
            found = check_archive(fresh.cache(), manifest, progress=_advance_to(progress))
        finally:
            progress.finish()
        log = None
        if found.ok and manifest.run:
            history = HistoryDir(settings, fresh, with_local=False)
            try:
                log = check_history(history, digest)
            finally:
                history.close()
        elif not manifest.run and not found.problems:
            found.problems.append("the archive holds no segment")
    ok = found.ok and (log is None or log.ok)
    if settings.output == "json":
        document = {
            "ok": ok,
            "url": archive.location.url,
            "entries": found.entries,
            "bytes": found.bytes,
            "problems": found.problems,
            "log": None if log is None else log.to_json(),
        }
        out.write(json.dumps(document) + "\n")
    else:
        out.write(
            f"archive {archive.location.url}: {found.entries} entries, {found.bytes} bytes "
            "checked against the manifest\n"
        )
        for problem in found.problems:
            out.write(f"DAMAGED: {problem}\n")
        if log is not None:
            write_outcome(log, out)
        elif digest is not None:
            out.write(f"digest {digest.token()}: NOT CHECKED: the archive is damaged\n")
    return EXIT_OK if ok else EXIT_DAMAGED


def _advance_to(progress: Progress) -> Any:
    """`check_archive`'s progress (the offset reached) as `Progress.advance`'s amounts."""

    def advance(offset: int) -> None:
        progress.advance(max(0, offset - progress.done))

    return advance


def cmd_archive_upload(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Upload the data directory's sealed segments past the archive's end, now."""
    from api.targets import QUORUM_STATE
    from metadata_log.archive import SegmentArchiver
    from metadata_log.epoch import EPOCH_CHECKPOINT_NAME
    from metadata_log.reader import LogReader

    archive = _archive(settings, args)
    if not settings.log_dir.is_dir():
        raise CliError(f"there is no log at {settings.log_dir}; check --data-dir")
    if (settings.data_dir / QUORUM_STATE).exists() or (
        settings.log_dir / EPOCH_CHECKPOINT_NAME
    ).exists():
        raise CliError(
            f"{settings.data_dir} is a quorum node's: its active controller uploads the "
            "committed segments (metadata.log.archive.url in server.properties)"
        )
    archiver = SegmentArchiver(
        archive.location,
        cluster_id=_cluster_id(settings),
        work_dir=archive.cache_dir / "upload-work",
    )
    # A reader sees what a running writer made durable: every entry of a standalone log.
    with LogReader.open(settings.log_dir, config=settings.log) as log:
        report = archiver.archive(log, committed_end=log.end_offset)
    if report.waiting is not None:
        print(f"mlog: warning: {report.waiting}", file=sys.stderr)
    if settings.output == "json":
        document = {
            "uploaded": [_entry_json(e) for e in report.uploaded],
            "bytes": report.uploaded_bytes,
            "archived_end": report.archived_end,
            "waiting": report.waiting,
        }
        out.write(json.dumps(document) + "\n")
        return EXIT_OK
    if report.uploaded:
        first, last = report.uploaded[0], report.uploaded[-1]
        out.write(
            f"uploaded {len(report.uploaded)} segment(s), offsets {first.base_offset}.."
            f"{last.next_offset - 1} ({report.uploaded_bytes} bytes)\n"
        )
    else:
        out.write("nothing to upload: every sealed segment is archived\n")
    if report.archived_end:
        out.write(f"the archive holds the log up to offset {report.archived_end - 1}\n")
    return EXIT_OK if report.waiting is None else EXIT_DAMAGED


def _cluster_id(settings: Settings) -> str | None:
    """The data directory's cluster.id (its meta.properties), or None for a bare log."""
    path = settings.data_dir / META_PROPERTIES
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and key.strip() == "cluster.id" and value.strip():
            return value.strip()
    return None


def add_verbs(archive: argparse.ArgumentParser) -> None:
    """The verbs of `mlog archive` and their flags, on the noun's parser."""
    add_archive_options(archive, reads=False)
    verbs = archive.add_subparsers(dest="verb", metavar="VERB", required=True)

    listing = verbs.add_parser(
        "list", help="the archived segments (the run), redundant entries, gaps, the cluster id"
    )
    add_global_options(listing)
    add_archive_options(listing)
    listing.set_defaults(handler=cmd_archive_list)

    verify = verbs.add_parser(
        "verify",
        help="check every archived object, then its segments as `log verify` does (exit 1 "
        "naming each problem)",
    )
    add_global_options(verify)
    add_archive_options(verify)
    verify.add_argument(
        "--digest",
        metavar="TOKEN",
        help="also check the archived history against a digest kept outside (`log digest`)",
    )
    verify.set_defaults(handler=cmd_archive_verify)

    upload = verbs.add_parser(
        "upload",
        help="upload the data directory's sealed segments now (e.g. before `log trim`); safe "
        "beside a running server",
    )
    add_global_options(upload)
    add_archive_options(upload)
    upload.set_defaults(handler=cmd_archive_upload)
