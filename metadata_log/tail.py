"""Torn or damaged? Judging the first bad block of the newest segment from its bytes.

A crash can leave only two things at the end of the newest segment (blocks are written one at a
time, each fsynced before the next is written): a last block the file ends inside, or a last
block some of whose 512-byte sectors never reached the disk and read as zeros (etcd's WAL tells
a torn write from a CRC mismatch the same way, in `isTornEntry`). Anything else is damage, and
in particular what a single flipped bit makes of a complete block:

- a complete block ends with the header's sync marker, so a file that ends with it did not end
  inside a block, whatever a damaged size field claims;
- a flipped bit inside the sync marker leaves the block's length intact: it is not incomplete;
- no flipped bit turns 16 or more bytes into zeros.

A torn block is also never followed by a valid one. Memory stays bounded: the region after the
bad block is read in windows, and a candidate block is loaded only once its sync marker matches.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from metadata_log.container import (
    MIN_BLOCK_BYTES,
    SYNC_SIZE,
    BlockDamage,
    TruncatedBlock,
    block_frame,
    read_block,
)
from records.varint import read_long

SECTOR_SIZE = 512
MIN_ZERO_RUN = SYNC_SIZE
"""A sector chunk counts as "never written" only if it holds at least this many zero bytes: a
shorter chunk (the edges of the block) can hold a single set bit, which one flip would clear."""
BRUTE_FORCE_BYTES = 64 * 1024
"""How far past a bad block every position is tried as the start of a valid block."""
_WINDOW = 1 << 20


@dataclass(frozen=True, slots=True)
class TailVerdict:
    """What the bytes from the first bad block to the end of the file are."""

    torn: bool
    why: str
    """Why: what makes it torn (to log) or what shows it is damage (to add to the error)."""
    entries: int | None
    """Entries the torn block claims (its count field), when that was written."""

    def dropped(self) -> str:
        """The entries a truncation drops, in words."""
        if self.entries is None:
            return "an incomplete block whose entry count was never written"
        noun = "entry" if self.entries == 1 else "entries"
        return f"{self.entries} {noun}, never acknowledged"


def judge_tail(path: Path, sync: bytes, position: int, file_size: int) -> TailVerdict:
    """Whether the data from `position` (the first bad block) to `file_size` is torn."""
    fd = os.open(path, os.O_RDONLY)
    try:
        head = os.pread(fd, 32, position)
        ends_with_sync = (
            file_size - position >= SYNC_SIZE
            and os.pread(fd, SYNC_SIZE, file_size - SYNC_SIZE) == sync
        )
        zero_at = _zero_sector(fd, position, file_size)
        incomplete = _incomplete(head, position, file_size)
        count = _count(head)
        if zero_at is not None:
            why = f"the sector at byte {zero_at} was never written (all zeros)"
        elif incomplete and not ends_with_sync:
            why = "the file ends inside the block"
        elif incomplete:
            return TailVerdict(
                torn=False,
                why="the file ends with a sync marker, so the block was written whole",
                entries=count,
            )
        else:
            return TailVerdict(
                torn=False,
                why="the block is complete, so it was not torn by a crash",
                entries=count,
            )
        after = _valid_block_after(fd, sync, position, file_size)
        if after is not None:
            return TailVerdict(
                torn=False, why=f"a valid block follows at byte {after}", entries=count
            )
        return TailVerdict(torn=True, why=why, entries=count)
    finally:
        os.close(fd)


def _count(head: bytes) -> int | None:
    try:
        count, _ = read_long(head, 0)
    except (IndexError, ValueError):
        return None
    return count if count >= 1 else None


def _incomplete(head: bytes, position: int, file_size: int) -> bool:
    """True if the block at `position` does not fit in the file by its own framing."""
    if file_size - position < MIN_BLOCK_BYTES:
        return True  # shorter than any complete block
    try:
        _, _, end = block_frame(head, 0)
    except TruncatedBlock:
        return True
    except BlockDamage:
        return False
    return position + end > file_size


def _zero_sector(fd: int, position: int, file_size: int) -> int | None:
    """File position of an all-zero sector chunk of at least MIN_ZERO_RUN bytes, or None.

    The region is split at 512-byte file positions, as etcd splits a torn entry.
    """
    at = position
    while at < file_size:
        window_end = min(file_size, (at // SECTOR_SIZE) * SECTOR_SIZE + _WINDOW)
        data = os.pread(fd, window_end - at, at)
        if not data:
            return None
        chunk_start = at
        while chunk_start < at + len(data):
            chunk_end = min((chunk_start // SECTOR_SIZE + 1) * SECTOR_SIZE, at + len(data))
            chunk = data[chunk_start - at : chunk_end - at]
            if len(chunk) >= MIN_ZERO_RUN and not chunk.strip(b"\0"):
                return chunk_start
            chunk_start = chunk_end
        at += len(data)
    return None


def _valid_block_after(fd: int, sync: bytes, position: int, file_size: int) -> int | None:
    """Position of a verifiable block after the bad one at `position`, or None.

    Candidates: where the bad block claims to end, after every later sync marker and, in case
    the bad block's size and its sync marker are both hit, every position of the next 64 KiB.
    A torn tail has no valid block after it; a sync marker makes a false match practically
    impossible.
    """
    head = os.pread(fd, 32, position)
    candidates: set[int] = set()
    try:
        _, _, end = block_frame(head, 0)
        candidates.add(position + end)
    except (TruncatedBlock, BlockDamage):
        pass
    at = position
    while at < file_size:
        data = os.pread(fd, min(_WINDOW, file_size - at), at)
        if not data:
            break
        found = data.find(sync)
        while found != -1:
            candidates.add(at + found + SYNC_SIZE)
            found = data.find(sync, found + 1)
        if at + len(data) >= file_size:
            break
        at += len(data) - (SYNC_SIZE - 1)  # overlap: a marker may straddle two windows
    for start in sorted(candidates):
        if position < start < file_size and _block_at(fd, sync, start, file_size):
            return start
    window = os.pread(fd, min(BRUTE_FORCE_BYTES + 32, file_size - position), position)
    for offset in range(1, min(len(window), BRUTE_FORCE_BYTES)):
        start = position + offset
        if start in candidates:
            continue
        try:
            _, _, end = block_frame(window, offset)
        except (TruncatedBlock, BlockDamage):
            continue
        block_end = position + end
        if block_end > file_size:
            continue
        if end <= len(window):
            marker = window[end - SYNC_SIZE : end]
        else:
            marker = os.pread(fd, SYNC_SIZE, block_end - SYNC_SIZE)
        if marker == sync and _block_at(fd, sync, start, file_size):
            return start
    return None


def _block_at(fd: int, sync: bytes, start: int, file_size: int) -> bool:
    """True if a whole, verified block starts at `start` (loaded only if its sync matches)."""
    head = os.pread(fd, 32, start)
    try:
        _, _, end = block_frame(head, 0)
    except (TruncatedBlock, BlockDamage):
        return False
    if start + end > file_size or os.pread(fd, SYNC_SIZE, start + end - SYNC_SIZE) != sync:
        return False
    try:
        read_block(os.pread(fd, end, start), 0, sync)
    except (TruncatedBlock, BlockDamage):
        return False
    return True
