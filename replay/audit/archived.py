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
index: each split's task takes the whole object, checked against its SHA-256, walks the
blocks' framing (two varints each, nothing decompressed) to the first block that starts in
its range, and decodes the blocks that start there; a split reads nothing the manifest does
not vouch for. A Python worker keeps the objects it read and checked (`VerifiedObjects`, at
most `VERIFIED_BYTES`) while the store reports each unchanged (its ETag, time and size):
the other splits of a segment, and the next queries of an audit shell, take the kept copy
instead of reading and hashing the object again (about 0.4 s for 64 MiB from a local disk);
a changed or deleted object is read again, and refused.

Timestamps never decrease along the log, so a segment's entries are no older than the
previous segment's newest: with each entry's `max_timestamp`, time filters prune whole
segments as the sparse time index does for a directory.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
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

VERIFIED_BYTES = 256 << 20
"""At most this many bytes of checked segment objects are kept per process (four of the
default 64 MiB segments)."""


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


class VerifiedObjects:
    """Segment objects this process read and checked, kept while their version holds.

    The splits of one segment and the queries of one audit shell run in the same Python
    workers (Spark reuses them): each would read and hash the whole object again (about 0.4 s
    for 64 MiB). A kept copy is used only while the object's version (ETag, time, size, as
    the store reports them) is the one it had when it was read and checked: a changed or
    deleted object is read again, and refused. At most `limit_bytes` are kept, the least
    recently used dropped first.
    """

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self._kept: OrderedDict[tuple[str, str, str], tuple[str | None, bytes]] = OrderedDict()
        self._bytes = 0

    def get(self, location: ArchiveLocation, segment: ArchivedSegment) -> bytes | None:
        """The checked bytes of `segment`'s object, if kept and unchanged since."""
        key = (segment.url, segment.name, segment.sha256)
        kept = self._kept.get(key)
        if kept is None:
            return None
        if location.version(segment.name) != kept[0]:
            self._drop(key)
            return None
        self._kept.move_to_end(key)
        return kept[1]

    def put(self, segment: ArchivedSegment, version: str | None, data: bytes) -> None:
        """Keep `data`, just checked against the manifest, under the object's `version`.

        The version is the one read before the object was: a write between the two leaves
        the copy under a version the store no longer reports, so it is read again.
        """
        if len(data) > self.limit_bytes:
            return
        key = (segment.url, segment.name, segment.sha256)
        self._drop(key)
        self._kept[key] = (version, data)
        self._bytes += len(data)
        while self._bytes > self.limit_bytes:
            self._drop(next(iter(self._kept)))

    def _drop(self, key: tuple[str, str, str]) -> None:
        gone = self._kept.pop(key, None)
        if gone is not None:
            self._bytes -= len(gone[1])


_VERIFIED = VerifiedObjects(VERIFIED_BYTES)


def read_archived(segment: ArchivedSegment) -> tuple[str, Iterator[RawBlock]]:
    """(writer schema JSON, verified blocks) of an archived segment, read through fsspec.

    The object is read whole and checked against the manifest's size and SHA-256 first (or
    taken from this process's checked copies while unchanged: `VerifiedObjects`);
    `ArchiveDamage` if it is missing, differs, or a block in it is damaged.
    """
    location = ArchiveLocation.open(segment.url)
    where = location.describe(segment.name)
    data = _VERIFIED.get(location, segment)
    if data is None:
        version = location.version(segment.name)
        data = _read_checked(location, segment, where)
        _VERIFIED.put(segment, version, data)
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


def _read_checked(location: ArchiveLocation, segment: ArchivedSegment, where: str) -> bytes:
    """The object's bytes, read and checked against the manifest's size and SHA-256."""
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
    return data


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
