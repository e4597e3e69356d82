"""Uploading a log's sealed, committed segments to its archive, each once, checked by hash.

One round (`SegmentArchiver.archive`) reads the manifest, then uploads, oldest first, every
sealed segment of the log that holds only committed entries and lies past the archive's run:
the segment file, its chain file and its entries' Merkle leaves, each read back and compared
by SHA-256 with what was sent, then the manifest entry, which is what makes it archived. A
writer killed mid-upload leaves objects without an entry, replaced by the next round; a
controller that finds the entry already written by another (a failover mid-upload) takes it
as archived when it is byte-identical, and refuses to go on when it differs.

Replicas cut their segments at their own offsets (time-based rolls, a snapshot install): a
segment that straddles the archive's end is cut at it, its blocks from there written to a new
segment in a work directory (a `ReplicaLog` reset to that offset with the chain's state
there), so the archive's run stays dense without any entry archived twice.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from metadata_log.archive.errors import ArchiveDamage, ArchiveError
from metadata_log.archive.location import ArchiveLocation, file_sha256
from metadata_log.archive.manifest import (
    ArchivedObject,
    ManifestEntry,
    claim,
    entry_name,
    object_name,
    read_manifest,
)
from metadata_log.chain import ChainDamage, chain_path, read_chain_file
from metadata_log.config import LogConfig
from metadata_log.errors import LogError
from metadata_log.merkle import block_leaves
from metadata_log.replica_log import ReplicaLog
from metadata_log.segment import Segment, segment_name
from metadata_log.start_snapshot import StartSnapshot
from metadata_log.stored_log import StoredLog

_CUT_READ_BYTES = 8 << 20
_NEVER = 1 << 62


@dataclass(slots=True)
class UploadReport:
    """What one round did."""

    uploaded: list[ManifestEntry] = field(default_factory=list)
    archived_end: int | None = None
    """One past the last offset the archive's run holds after the round (None: empty)."""
    waiting: str | None = None
    """Why a sealed segment could not be archived (one line), or None."""

    @property
    def uploaded_bytes(self) -> int:
        """The bytes of the objects uploaded."""
        return sum(e.size_bytes for e in self.uploaded)


class SegmentArchiver:
    """Uploads one log directory's sealed segments to the archive at `location`."""

    def __init__(self, location: ArchiveLocation, *, cluster_id: str | None, work_dir: Path):
        self.location = location
        self.cluster_id = cluster_id
        self.work_dir = work_dir
        self._claimed = False

    def archive(self, log: StoredLog, *, committed_end: int) -> UploadReport:
        """Upload every sealed segment of `log` below `committed_end` past the archive's run.

        `ArchiveUnreachable` if the archive cannot be read or written (nothing is marked
        archived that was not checked); `ArchiveError` if it belongs to another cluster.
        """
        if not self._claimed:
            claim(self.location, self.cluster_id)
            self._claimed = True
        manifest = read_manifest(self.location)
        report = UploadReport(archived_end=manifest.end_offset)
        segments = list(log.storage.segments)
        for segment in segments[:-1]:
            if segment.is_empty or segment.next_offset > committed_end:
                break
            end = report.archived_end
            if end is not None and segment.next_offset <= end:
                continue
            if end is not None and segment.base_offset > end:
                report.waiting = (
                    f"the log continues at offset {segment.base_offset}, past the archive's "
                    f"end at {end}: offsets {end}..{segment.base_offset - 1} were trimmed "
                    "before they were archived"
                )
                break
            start = segment.base_offset if end is None else max(end, segment.base_offset)
            entry = self._upload(log, segment, start)
            report.uploaded.append(entry)
            report.archived_end = entry.next_offset
        return report

    # ---------------------------------------------------------------- one segment

    def _upload(self, log: StoredLog, segment: Segment, start: int) -> ManifestEntry:
        if start == segment.base_offset:
            return self._upload_files(segment, segment.path, start)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        cut_dir = Path(tempfile.mkdtemp(prefix="cut-", dir=self.work_dir))
        try:
            cut = _cut(log, segment, start, cut_dir)
            return self._upload_files(segment, cut, start)
        finally:
            shutil.rmtree(cut_dir, ignore_errors=True)

    def _upload_files(self, segment: Segment, path: Path, start: int) -> ManifestEntry:
        stem = entry_name(start, segment.next_offset)
        chain = _complete_chain(path, start, segment.next_offset)
        leaves = b"".join(
            b"".join(hashes[max(0, start - first) :])
            for hashes, first in block_leaves(segment, start)
        )
        if len(leaves) != 32 * (segment.next_offset - start):
            raise ArchiveError(f"segment {segment.path}: its entries could not all be hashed")
        objects = {
            "segment": self._put_file(object_name(stem, "segment"), path),
            "chain": self._put_file(object_name(stem, "chain"), chain_path(path)),
            "leaves": self._put_bytes(object_name(stem, "leaves"), leaves),
        }
        entry = ManifestEntry(
            base_offset=start,
            next_offset=segment.next_offset,
            max_timestamp=segment.max_timestamp,
            chain_before=chain[0].hex(),
            chain_after=chain[1].hex(),
            objects=objects,
        )
        self._put_entry(entry)
        return entry

    def _put_file(self, name: str, source: Path) -> ArchivedObject:
        size, sha = file_sha256(source)
        self.location.upload(name, source)
        return self._checked(name, size, sha)

    def _put_bytes(self, name: str, data: bytes) -> ArchivedObject:
        self.location.write(name, data)
        return self._checked(name, len(data), hashlib.sha256(data).hexdigest())

    def _checked(self, name: str, size: int, sha: str) -> ArchivedObject:
        stored = self.location.sha256(name)
        if stored != (size, sha):
            raise ArchiveDamage(
                f"{self.location.describe(name)} read back differs from what was uploaded "
                f"({stored} != {(size, sha)}); the next round uploads it again"
            )
        return ArchivedObject(name=name, size=size, sha256=sha)

    def _put_entry(self, entry: ManifestEntry) -> None:
        data = entry.encode()
        held = self.location.read(entry.manifest_name)
        if held is not None:
            if held == data:
                return  # another controller archived the same segment: nothing twice
            raise ArchiveDamage(
                f"{self.location.describe(entry.manifest_name)} already names other objects "
                "for these offsets; `mlog archive verify` checks which are sound"
            )
        self.location.write(entry.manifest_name, data)
        if self.location.read(entry.manifest_name) != data:
            raise ArchiveDamage(
                f"{self.location.describe(entry.manifest_name)} read back differs from what "
                "was written; the next round writes it again"
            )


def _complete_chain(path: Path, start: int, next_offset: int) -> tuple[bytes, bytes]:
    """(value before, value after) of the chain file beside `path`, checked complete."""
    try:
        chain = read_chain_file(chain_path(path))
    except (ChainDamage, OSError) as exc:
        raise ArchiveError(f"segment {path}: its chain file cannot be read: {exc}") from None
    if chain is None:
        raise ArchiveError(
            f"segment {path} has no chain file: only a log that keeps the hash chain "
            "(metadata.version 2 or later) can be archived"
        )
    first = chain.records[0].first_offset if chain.records else None
    if first != start or chain.records[-1].end_offset != next_offset:
        raise ArchiveError(
            f"segment {path}: its chain file does not cover offsets {start}..{next_offset - 1}"
        )
    return chain.previous, chain.head


def _cut(log: StoredLog, segment: Segment, start: int, directory: Path) -> Path:
    """A segment of `segment`'s blocks from offset `start` (a block's first), in `directory`."""
    carried = log.chain_state(start - 1)
    config = LogConfig(segment_bytes=_NEVER, segment_ms=_NEVER)
    with ReplicaLog.open(directory, config=config, codec=log.codec, chained=True) as cut:
        first = log.replica_blocks(start=start, max_bytes=0, max_blocks=1)
        if not first:
            raise ArchiveError(f"segment {segment.path} holds no block at offset {start}")
        cut.reset_to_snapshot(
            StartSnapshot(
                offset=start - 1,
                epoch=first[0].epoch,
                timestamp=first[0].timestamp,
                checksum="archive-cut",
                chain=carried,
            )
        )
        position = start
        while position < segment.next_offset:
            try:
                blocks = log.replica_blocks(start=position, max_bytes=_CUT_READ_BYTES)
            except LogError as exc:
                raise ArchiveError(f"segment {segment.path}: {exc}") from None
            blocks = [b for b in blocks if b.first_offset < segment.next_offset]
            cut.write_blocks(blocks, check=False)
            position = blocks[-1].last_offset + 1
        cut.flush()
    path = directory / segment_name(start)
    chain = read_chain_file(chain_path(path))
    if chain is None or chain.head != log.chain_state(segment.next_offset - 1).value:
        raise ArchiveError(
            f"segment {segment.path}: its blocks from offset {start}, copied, do not give the "
            "log's chain value at its end (an older entry schema?); it is not archived"
        )
    return path
