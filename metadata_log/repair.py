"""The explicit repair: cut the log after an offset, keeping what is removed in quarantine.

Never run implicitly: an open refuses damage, `mlog log verify` reports it, and an operator who
decides that the entries past some offset are lost (or restored elsewhere) runs
`mlog log truncate --after-offset N`. It takes the writer lock, checks that everything up to N
is sound and that N ends a block (a batch is never split), then:

1. writes `quarantine/<repair id>/NOTE.txt`: what will be removed and why, when, by whom;
2. copies the bytes of the cut segment past the cut into the quarantine, fsynced;
3. truncates that segment at the cut and moves every later segment file into the quarantine;
4. rewrites the checkpoints so that the shorter log is the expected one.

A crash in between leaves an error on the next open and the same command finishes the job. On
a healthy log it refuses unless forced: cutting a sound log drops acknowledged entries.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from metadata_log.checkpoint import (
    Checkpoint,
    CheckpointDamage,
    read_checkpoint,
    write_checkpoint,
)
from metadata_log.container import BlockDamage, fsync_directory
from metadata_log.errors import LogCorruptionError, LogError
from metadata_log.lock import DirectoryLock
from metadata_log.private_files import FILE_MODE, make_dirs
from metadata_log.segment import ScanProblem, Segment, segment_name
from metadata_log.verify import VerifyReport, segment_bases, verify_log
from records.codec import DEFAULT_CODEC, RecordCodec

logger = logging.getLogger("metadata_log")

QUARANTINE = "quarantine"


class RepairRefusedError(LogError):
    """The repair would not make the log sound, or would drop sound entries unasked."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RepairReport:
    """What a truncation did."""

    after_offset: int
    """The last offset the log keeps (-1: none)."""
    end_before: int
    """The end offset of the sound part of the log before the repair."""
    quarantine: Path
    """The directory holding the removed bytes and NOTE.txt."""
    moved: tuple[str, ...]
    """What was moved there, one line each."""
    problems: tuple[str, ...]
    """The damage found before the repair (empty if the log was healthy and forced)."""


@dataclass(frozen=True, slots=True)
class _Cut:
    """Where the log is cut: the segment kept last, the byte it ends at, what goes."""

    keep_until: int
    """Base offset of the last segment kept, -1 if none."""
    position: int
    """Byte at which that segment is cut (its size if it is kept whole)."""
    whole: tuple[int, ...]
    """Base offsets of the segments removed whole."""


def truncate_after(
    directory: str | os.PathLike[str],
    after_offset: int,
    *,
    force: bool = False,
    codec: RecordCodec = DEFAULT_CODEC,
    reason: str = "",
) -> RepairReport:
    """Cut the log in `directory` after `after_offset`, quarantining what is removed."""
    path = Path(directory)
    if not path.is_dir():
        raise LogError(f"there is no log at {path}; check --data-dir")
    if after_offset < -1:
        raise LogError(f"--after-offset must be -1 or more, got {after_offset}")
    lock = DirectoryLock(path)
    lock.acquire()
    try:
        report = verify_log(path, codec)
        cut, end_before = _plan(path, report, after_offset, force=force, codec=codec)
        return _execute(path, report, cut, after_offset, end_before, force=force, reason=reason)
    finally:
        lock.release()


def _sound_end(report: VerifyReport) -> int:
    """One past the last entry before the first problem (the whole log if healthy)."""
    end = 0
    for segment in report.segments:
        end = segment.info.base_offset + segment.entries
        if segment.error is not None:
            return end if segment.error.first_offset is None else segment.error.first_offset
    firsts = [p.first_offset for p in report.problems if p.first_offset is not None]
    return min([end, *firsts]) if firsts else end


def _plan(
    directory: Path, report: VerifyReport, after: int, *, force: bool, codec: RecordCodec
) -> tuple[_Cut, int]:
    """Where to cut for `after`, or RepairRefusedError saying why not and what would work."""
    for problem in report.problems:
        if not problem.repairable:
            raise RepairRefusedError(
                f"{problem}. Truncating cannot bring that back: restore the missing segments"
            )
    sound_end = _sound_end(report)
    healthy = report.ok and report.torn_tail is None
    last = sound_end - 1
    if after > last:
        what = "the log ends" if healthy else "the log is sound only up to"
        raise RepairRefusedError(
            f"{what} offset {last}: nothing after offset {after} can be kept; use "
            f"--after-offset {last} or lower"
        )
    if healthy and not force:
        if after == last:
            raise RepairRefusedError(f"the log is healthy and ends at offset {last}: nothing to do")
        raise RepairRefusedError(
            f"the log is healthy: truncating after offset {after} would remove the "
            f"acknowledged entries {after + 1}..{last}; add --force if that is what you want"
        )
    bases = segment_bases(directory)
    # The segment holding `after` is kept up to the end of its block; later ones go whole.
    keep = [b for b in bases if b <= after]
    if not keep:
        return _Cut(keep_until=-1, position=0, whole=tuple(bases)), sound_end
    base = keep[-1]
    whole = tuple(b for b in bases if b > base)
    position = _block_boundary(directory, base, after, codec)
    return _Cut(keep_until=base, position=position, whole=whole), sound_end


def _block_boundary(directory: Path, base: int, after: int, codec: RecordCodec) -> int:
    """Byte where the block after offset `after` starts in segment `base`.

    Raises RepairRefusedError if `after` falls inside a block: one batch is never split.
    """
    path = directory / segment_name(base)
    try:
        segment = Segment.open_header(path, base)
    except BlockDamage as exc:  # the plan keeps only sound data, so this is not expected
        raise RepairRefusedError(f"segment {path} has a bad header ({exc})") from None
    expected = base
    array_schema = segment.array_schema(codec)
    try:
        for block in segment.iter_blocks(segment.header.size, path.stat().st_size):
            segment.decode(codec, block, array_schema, expected)
            last = expected + block.count - 1
            if last == after:
                return block.end
            if last > after:
                raise RepairRefusedError(
                    f"offset {after} is inside the block holding offsets {expected}..{last} "
                    "(one atomic batch, or batches committed together): use --after-offset "
                    f"{expected - 1} or {last}"
                )
            expected = last + 1
    except (ScanProblem, LogCorruptionError) as exc:
        raise RepairRefusedError(
            f"segment {path} is damaged before offset {after + 1} ({exc}); cut before the damage"
        ) from None
    raise RepairRefusedError(f"segment {path} ends before offset {after + 1}")


def _execute(
    directory: Path,
    report: VerifyReport,
    cut: _Cut,
    after: int,
    end_before: int,
    *,
    force: bool,
    reason: str,
) -> RepairReport:
    now = time.gmtime()
    repair_id = time.strftime("%Y%m%dT%H%M%SZ", now) + f"-after-{after}"
    quarantine = directory / QUARANTINE / repair_id
    suffix = 0
    while quarantine.exists():
        suffix += 1
        quarantine = directory / QUARANTINE / f"{repair_id}.{suffix}"
    make_dirs(quarantine)
    fsync_directory(quarantine.parent)
    fsync_directory(directory)
    problems = tuple(str(e) for e in report.errors)
    # A torn tail alone is not a healthy log (the cut needs no --force): the note names it.
    found = [*problems, *([report.torn_tail] if report.torn_tail else [])]
    moved: list[str] = []
    if cut.keep_until >= 0:
        path = directory / segment_name(cut.keep_until)
        size = path.stat().st_size
        if cut.position < size:
            target = quarantine / f"{path.name}.from-byte-{cut.position}"
            moved.append(f"{target.name}: bytes {cut.position}..{size - 1} of {path.name}")
    for base in cut.whole:
        moved.append(f"{segment_name(base)}: the whole segment")
    note = quarantine / "NOTE.txt"
    lines = [
        f"mlog log truncate --after-offset {after}{' --force' if force else ''}",
        f"when: {time.strftime('%Y-%m-%dT%H:%M:%SZ', now)}",
        f"by: pid {os.getpid()} on {socket.gethostname()}",
        f"log: {directory}",
        f"kept: offsets up to {after}; the sound part of the log ended before offset {end_before}",
        *([f"reason: {reason}"] if reason else []),
        "found before the repair:",
        *(f"  {p}" for p in found or ("nothing: the log was healthy (forced)",)),
        "moved here:",
        *(f"  {m}" for m in moved or ("nothing (only the checkpoints were rewritten)",)),
    ]
    _write_synced(note, ("\n".join(lines) + "\n").encode())
    if cut.keep_until >= 0:
        cut_segment(directory / segment_name(cut.keep_until), cut.position, quarantine)
    for base in cut.whole:
        move_segment(directory / segment_name(base), quarantine)
    fsync_directory(quarantine)
    fsync_directory(directory)
    checkpoint = read_checkpoint_or_none(directory)
    start = 0 if checkpoint is None else checkpoint.log_start_offset
    write_checkpoint(
        directory,
        Checkpoint(
            log_start_offset=start,
            recovery_point=after + 1 if cut.keep_until >= 0 else start,
            newest_segment=cut.keep_until if cut.keep_until >= 0 else start,
        ),
        # Here the new checkpoint lowers the bounds: the old one must not come back.
        sync_directory=True,
    )
    logger.warning(
        "truncated the log in %s after offset %d; removed data is in %s",
        directory,
        after,
        quarantine,
    )
    return RepairReport(
        after_offset=after,
        end_before=end_before,
        quarantine=quarantine,
        moved=tuple(moved),
        problems=problems,
    )


def read_checkpoint_or_none(directory: Path) -> Checkpoint | None:
    """The checkpoints, or None if the file is missing or damaged (a repair rewrites it)."""
    try:
        return read_checkpoint(directory)
    except CheckpointDamage:
        return None


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb", opener=_private_opener) as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _private_opener(path: str, flags: int) -> int:
    return os.open(path, flags, FILE_MODE)


def cut_segment(path: Path, position: int, quarantine: Path | None) -> None:
    """Truncate the segment at byte `position`, durably, and drop its now stale indexes.

    With a `quarantine` directory the bytes from `position` on are first copied there,
    fsynced (the explicit repair); without one they are simply removed (a quorum truncation).
    """
    size = path.stat().st_size
    if position < size:
        if quarantine is not None:
            target = quarantine / f"{path.name}.from-byte-{position}"
            with open(path, "rb") as src, open(target, "wb", opener=_private_opener) as dst:
                src.seek(position)
                shutil.copyfileobj(src, dst, 1 << 20)
                dst.flush()
                os.fsync(dst.fileno())
        fd = os.open(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, position)
            os.fsync(fd)
        finally:
            os.close(fd)
        # The indexes covered the old size: they are rebuilt on the next open.
        for suffix in (".index", ".timeindex"):
            path.with_suffix(suffix).unlink(missing_ok=True)


def move_segment(path: Path, quarantine: Path | None) -> None:
    """Move a segment and its indexes into the quarantine (same file system: a rename).

    Without a `quarantine` they are deleted. The caller fsyncs the directories.
    """
    for suffix in (".avro", ".index", ".timeindex", ".chain"):
        source = path.with_suffix(suffix)
        if quarantine is None:
            source.unlink(missing_ok=True)
        elif source.exists():
            os.replace(source, quarantine / source.name)
