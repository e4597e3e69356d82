"""Checking an archive's objects against its manifest, end to end.

`check_archive` fetches every object the manifest names (into the cache), compares each with
the size and SHA-256 its entry names, checks that each entry's chain ends are its chain file's
and that each segment's chain starts where the previous one's ends, and recomputes the Merkle
leaves of every archived entry from the segment's blocks against the archived leaf file. What
the segments themselves hold (CRCs, dense offsets, the chain recomputed from the bodies, a
digest) is then checked by the log's own `verify` over a view of the archive
(`ArchiveCache.open_view`), as `mlog archive verify` does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

from metadata_log.archive.errors import ArchiveDamage
from metadata_log.archive.manifest import Manifest, ManifestEntry
from metadata_log.archive.view import ArchiveCache
from metadata_log.chain import ChainDamage, read_chain_file
from metadata_log.container import BlockDamage
from metadata_log.errors import LogCorruptionError
from metadata_log.merkle import block_leaves
from metadata_log.segment import Segment
from records.codec import DEFAULT_CODEC

_HASH = 32


@dataclass(slots=True)
class ArchiveCheck:
    """What `check_archive` found: each problem one line naming the object or offsets."""

    entries: int = 0
    bytes: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether nothing was found."""
        return not self.problems


def check_archive(
    cache: ArchiveCache,
    manifest: Manifest,
    progress: Callable[[int], None] | None = None,
) -> ArchiveCheck:
    """Check every entry of `manifest` (its run and any redundant entry) and its objects."""
    report = ArchiveCheck(problems=list(manifest.damaged))
    for start, end in manifest.gaps:
        report.problems.append(
            f"offsets {start}..{end - 1} are missing from the archive: no manifest entry holds them"
        )
    previous: ManifestEntry | None = None
    in_run = {id(e) for e in manifest.run}
    for entry in manifest.entries:
        report.entries += 1
        report.bytes += entry.size_bytes
        problem = _check_entry(cache, entry)
        if problem is not None:
            report.problems.append(problem)
        if id(entry) in in_run:
            if previous is not None and previous.chain_after != entry.chain_before:
                report.problems.append(
                    f"offsets {entry.base_offset}..{entry.next_offset - 1}: the chain does not "
                    f"go on from the previous entry's (offsets {previous.base_offset}.."
                    f"{previous.next_offset - 1}): a segment was replaced"
                )
            previous = entry
        if progress is not None:
            progress(entry.next_offset)
    return report


def _check_entry(cache: ArchiveCache, entry: ManifestEntry) -> str | None:
    where = f"offsets {entry.base_offset}..{entry.next_offset - 1}"
    try:
        segment_path, chain_path = cache.fetch(entry)
        leaves = cache.location.read(entry.objects["leaves"].name)
    except ArchiveDamage as exc:
        return str(exc)
    if leaves is None:
        return f"{cache.location.describe(entry.objects['leaves'].name)} is missing ({where})"
    held = entry.objects["leaves"]
    if (len(leaves), hashlib.sha256(leaves).hexdigest()) != (held.size, held.sha256):
        return (
            f"{cache.location.describe(held.name)} differs from what the manifest says it "
            f"holds ({where})"
        )
    try:
        chain = read_chain_file(chain_path)
    except (ChainDamage, OSError) as exc:
        return f"{where}: the chain file cannot be read: {exc}"
    if chain is None or (chain.previous.hex(), chain.head.hex()) != (
        entry.chain_before,
        entry.chain_after,
    ):
        return f"{where}: the chain file's ends are not the ones the manifest names"
    try:
        segment = Segment.open_header(segment_path, entry.base_offset)
        problem = segment.recover_scan(segment_path.stat().st_size, 4096, DEFAULT_CODEC)
        if problem is not None:
            return f"{where}: the segment is damaged: {problem.reason}"
        computed = b"".join(b"".join(h) for h, _ in block_leaves(segment, entry.base_offset))
    except (BlockDamage, LogCorruptionError, OSError) as exc:
        return f"{where}: the segment cannot be read: {exc}"
    if segment.next_offset != entry.next_offset or computed != leaves:
        first = next(
            (
                entry.base_offset + i // _HASH
                for i in range(0, min(len(computed), len(leaves)), _HASH)
                if computed[i : i + _HASH] != leaves[i : i + _HASH]
            ),
            entry.base_offset + min(len(computed), len(leaves)) // _HASH,
        )
        return f"{where}: the Merkle leaves archived differ from the entries from offset {first}"
    return None
