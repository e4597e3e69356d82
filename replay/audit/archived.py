"""An archive as the audit's log: planned from its manifest, read by executors through fsspec.

`spark.read.format("metadata_log").load("s3://bucket/prefix")` (any archive URL, or the option
`archive`) reads the archive's run (docs/archive.md): the driver reads the manifest only and
plans one input partition per archived segment; each executor reads its segment object
through fsspec (no mount: `s3://` with s3fs takes its credentials and endpoint from the
executor's environment), checks the object's size and SHA-256 against the manifest before a
row of it is used, then reads its blocks as from a log directory (each block's CRC, dense
offsets). A changed or missing object fails the query with `ArchiveDamage`, never a silent
gap.

A segment larger than `splitBytes` is split into byte ranges of about that size without any
index: each split's task reads the whole object (one GET) and checks its SHA-256 as every
task does, walks the blocks' framing (two varints each, nothing decompressed) to the first
block that starts in its range, and decodes the blocks that start there. The object is
checked whole by every task that uses it, so a split reads nothing the manifest does not
vouch for; it costs each split one read and one hash of the object (about 0.4 s for 64 MiB
from a local disk), far less than decoding the entries it gives up to the other splits.

Timestamps never decrease along the log, so a segment's entries are no older than the
previous segment's newest: with each entry's `max_timestamp`, time filters prune whole
segments as the sparse time index does for a directory.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from metadata_log.archive import (
    ArchiveCache,
    ArchiveDamage,
    ArchiveError,
    ArchiveLocation,
    HistoryView,
    Manifest,
    read_manifest,
)
from metadata_log.archive.manifest import build_manifest
from metadata_log.container import (
    BlockDamage,
    RawBlock,
    TruncatedBlock,
    block_frame,
    decode_header,
    read_block,
)
from replay.errors import TrimmedLogError

_NO_LIMIT = 1 << 62


def is_archive_url(text: str) -> bool:
    """Whether a `load()` path names an archive (a URL with a scheme) rather than a directory."""
    return "://" in text


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchivedSegment:
    """One archived segment as an executor reads it: where it is and what it must hash to."""

    url: str
    """The archive's URL (executors open it themselves)."""
    name: str
    size: int
    sha256: str
    first_offset: int
    next_offset: int
    min_timestamp: int
    """No entry is older (the previous segment's newest; timestamps never decrease)."""
    max_timestamp: int
    split_start: int = 0
    """Only the blocks that start at or after this byte are read (a split of the segment)."""
    split_end: int | None = None
    """... and before this byte (None: to the end)."""

    @property
    def entries(self) -> int:
        """Entries in the segment."""
        return self.next_offset - self.first_offset

    @property
    def whole(self) -> bool:
        """Whether this reads the whole segment (not one of its splits)."""
        return self.split_start == 0 and self.split_end is None

    def splits(self, split_bytes: int) -> list[ArchivedSegment]:
        """The segment cut into byte ranges of about `split_bytes` (itself if it is smaller)."""
        count = max(1, -(-self.size // max(1, split_bytes)))
        if count == 1:
            return [self]
        step = -(-self.size // count)
        return [
            replace(
                self,
                split_start=k * step,
                split_end=None if k == count - 1 else (k + 1) * step,
            )
            for k in range(count)
        ]


def open_archive(url: str) -> tuple[ArchiveLocation, Manifest]:
    """The archive at `url` and its manifest, checked to be readable as one history.

    `ArchiveError` (one line) for a bad URL, an archive that holds no segment, or manifest
    entries that cannot be read (an audit of a run that ends early would miss their history).
    """
    location = ArchiveLocation.open(url)
    manifest = read_manifest(location)
    if manifest.damaged:
        raise ArchiveDamage(
            f"{manifest.damaged[0]}; `mlog archive verify` lists what else is damaged"
        )
    if not manifest.run:
        raise ArchiveError(
            f"the archive at {location.url} holds no archived segment (no manifest entry); "
            "check the URL (the one in metadata.log.archive.url)"
        )
    return location, manifest


def archived_segments(location: ArchiveLocation, manifest: Manifest) -> list[ArchivedSegment]:
    """The run's segments in offset order (whole; `ArchivedSegment.splits` cuts them)."""
    out = []
    previous_newest = -_NO_LIMIT
    for entry in manifest.run:
        segment = entry.objects["segment"]
        out.append(
            ArchivedSegment(
                url=location.url,
                name=segment.name,
                size=segment.size,
                sha256=segment.sha256,
                first_offset=entry.base_offset,
                next_offset=entry.next_offset,
                min_timestamp=previous_newest,
                max_timestamp=entry.max_timestamp,
            )
        )
        previous_newest = max(previous_newest, entry.max_timestamp)
    return out


def read_archived(segment: ArchivedSegment) -> tuple[str, Iterator[RawBlock]]:
    """(writer schema JSON, verified blocks) of an archived segment, read through fsspec.

    The object is read whole and checked against the manifest's size and SHA-256 first;
    `ArchiveDamage` if it is missing, differs, or a block in it is damaged.
    """
    location = ArchiveLocation.open(segment.url)
    where = location.describe(segment.name)
    data = location.read(segment.name)
    if data is None:
        raise ArchiveDamage(
            f"{where} is missing: the manifest names it for offsets {segment.first_offset}.."
            f"{segment.next_offset - 1}; `mlog archive verify` lists what else is"
        )
    if len(data) != segment.size or hashlib.sha256(data).hexdigest() != segment.sha256:
        raise ArchiveDamage(
            f"{where} differs from what the manifest says it holds (offsets "
            f"{segment.first_offset}..{segment.next_offset - 1}): it was changed after it "
            "was archived; it is not read"
        )
    try:
        header = decode_header(data)
    except (BlockDamage, TruncatedBlock) as exc:
        raise ArchiveDamage(f"{where}: bad segment header: {exc}") from None

    stop = len(data) if segment.split_end is None else min(segment.split_end, len(data))

    def blocks() -> Iterator[RawBlock]:
        pos = header.size
        while pos < stop:
            try:
                if pos < segment.split_start:
                    # Another split's block: its framing only (the object's hash vouches
                    # for its bytes; that split checks its CRC).
                    pos = block_frame(data, pos)[2]
                    continue
                block = read_block(data, pos, header.sync)
            except (BlockDamage, TruncatedBlock) as exc:
                raise ArchiveDamage(f"{where}: the block at byte {pos} is damaged: {exc}") from None
            yield block
            pos = block.end

    return header.schema_json, blocks()


def archive_start(url: str) -> int:
    """The first offset the archive's run holds."""
    _, manifest = open_archive(url)
    start = manifest.start_offset
    return 0 if start is None else start


def refuse_trimmed_archive(url: str) -> None:
    """Refuse (`TrimmedLogError`) an archive whose run does not start at offset 0.

    A state replay needs every topic record from the first entry on.
    """
    start = archive_start(url)
    if start > 0:
        raise TrimmedLogError(start, 0)


def download_view(url: str, cache_dir: Path, *, lte: int | None = None) -> HistoryView:
    """A local log directory of the archive's run (up to the segment holding `lte`), checked.

    For what the driver itself reads (the in-process image `state --check` compares with):
    the segments are downloaded into `cache_dir` and checked by SHA-256
    (`ArchiveCache.open_view`); close the view after.
    """
    location, manifest = open_archive(url)
    run = manifest.run
    if lte is not None:
        run = tuple(entry for entry in run if entry.base_offset <= lte)
    return ArchiveCache(location, cache_dir).open_view(None, build_manifest(run))
