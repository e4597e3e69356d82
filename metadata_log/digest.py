"""Digests: the hash chain's value at an offset, as a token an auditor keeps outside the log.

A token reads `mlog-digest:v2:<offset>:<chain value>:<Merkle root>` (64 hex digits each; `v1`
has no root): the log's entries up to and including `<offset>` (the last offset of a block)
hash to that value along the chain (metadata_log.chain), and the Merkle tree over entries
0..`<offset>` (metadata_log.merkle) has that root. `mlog log verify --digest TOKEN`
recomputes the chain over the blocks as they are and compares; any change to an entry at or
before the offset, or to the chain's carried start, makes them differ, whatever was done to
the stored values.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from metadata_log.chain import (
    HEADER_SIZE,
    RECORD_SIZE,
    ChainDamage,
    ChainRecord,
    chain_path,
    decode_chain_file,
    decode_record,
    hash_blocks,
)
from metadata_log.errors import LogError
from metadata_log.segment import Segment
from metadata_log.start_snapshot import CarriedChain

DIGEST_PREFIX = "mlog-digest"
_TOKEN = re.compile(
    r"^mlog-digest:(?:v1:(0|[1-9][0-9]{0,18}):([0-9a-f]{64})"
    r"|v2:(0|[1-9][0-9]{0,18}):([0-9a-f]{64}):([0-9a-f]{64}))$"
)


class DigestError(LogError):
    """A digest that cannot be taken or read; the message says why and what to do."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LogDigest:
    """The chain value after the block ending at `offset`."""

    offset: int
    """The last offset the digest covers (-1 would be an empty log: never taken)."""
    chain: bytes
    root: bytes | None = None
    """The Merkle tree's root over entries 0..offset (metadata_log.merkle), when known."""

    @property
    def end_offset(self) -> int:
        """One past the last offset covered."""
        return self.offset + 1

    def token(self) -> str:
        """The self-describing text form: v2 with the Merkle root, v1 without."""
        if self.root is not None:
            return f"{DIGEST_PREFIX}:v2:{self.offset}:{self.chain.hex()}:{self.root.hex()}"
        return f"{DIGEST_PREFIX}:v1:{self.offset}:{self.chain.hex()}"

    def to_json(self) -> dict[str, object]:
        """The digest as JSON values."""
        return {
            "token": self.token(),
            "offset": self.offset,
            "chain": self.chain.hex(),
            "tree_size": self.offset + 1,
            "merkle_root": None if self.root is None else self.root.hex(),
        }


def parse_digest(token: str) -> LogDigest:
    """Read a token; raises DigestError naming what is wrong with it."""
    text = token.strip()
    match = _TOKEN.match(text)
    if match is None:
        raise DigestError(
            f"{text[:100]!r} is not a digest token: expected "
            "mlog-digest:v2:<offset>:<64 hex digits>:<64 hex digits> (or v1 without the "
            "second), as `mlog log digest` prints"
        )
    if match.group(1) is not None:
        return LogDigest(offset=int(match.group(1)), chain=bytes.fromhex(match.group(2)))
    return LogDigest(
        offset=int(match.group(3)),
        chain=bytes.fromhex(match.group(4)),
        root=bytes.fromhex(match.group(5)),
    )


def _stored_value(segment: Segment, end_offset: int) -> tuple[bytes | None, ChainRecord | None]:
    """(stored value at `end_offset` or None, last stored record) from the segment's file.

    Records are fixed-size and in offset order: found by binary search with a few reads.
    """
    path = chain_path(segment.path)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        if segment.header.hash_chained:
            raise DigestError(
                f"segment {segment.path.name} was written with the hash chain, but its chain "
                f"file {path.name} is missing: run `mlog log verify`"
            ) from None
        raise DigestError(
            f"segment {segment.path.name} has no chain file: the log was written before the "
            "hash chain; open it once with a writer (e.g. `mlog serve` or `mlog log append`) "
            "to start it"
        ) from None
    try:
        size = os.fstat(fd).st_size
        try:
            head = decode_chain_file(os.pread(fd, HEADER_SIZE, 0))
        except ChainDamage as exc:
            raise DigestError(f"{path}: {exc}; run `mlog log verify`") from None
        if end_offset == segment.base_offset:
            return head.previous, None
        count = (size - HEADER_SIZE) // RECORD_SIZE

        def record(i: int) -> ChainRecord:
            return decode_record(os.pread(fd, RECORD_SIZE, HEADER_SIZE + i * RECORD_SIZE))

        lo, hi = 0, count - 1
        while lo <= hi:
            mid = (lo + hi) // 2
            found = record(mid)
            if found.end_offset == end_offset:
                return found.value, found
            if found.end_offset < end_offset:
                lo = mid + 1
            else:
                hi = mid - 1
        return None, record(count - 1) if count else None
    finally:
        os.close(fd)


def chain_value_at(segments: Sequence[Segment], end_offset: int) -> bytes:
    """The stored chain value after the block ending just before `end_offset`.

    Raises DigestError when `end_offset` is not a block's end or lies outside the log.
    """
    if not segments:
        raise DigestError("the log has no segments")
    start, end = segments[0].base_offset, segments[-1].next_offset
    if end_offset < start or end_offset > end:
        raise DigestError(
            f"offset {end_offset - 1} is outside the log, which holds offsets {start}.."
            f"{end - 1}"
            + (" (the entries before its start were trimmed)" if end_offset < start else "")
        )
    segment = next(s for s in reversed(segments) if s.base_offset <= end_offset)
    if end_offset == segment.base_offset and segment is not segments[0]:
        segment = segments[segments.index(segment) - 1]
    value, last = _stored_value(segment, end_offset)
    if value is not None:
        return value
    covered = segment.base_offset if last is None else last.end_offset
    if covered < end_offset and segment is segments[-1]:
        # The newest blocks are recorded by the next writer open: hash them from the last value.
        head = last.value if last is not None else _stored_value(segment, segment.base_offset)[0]
        assert head is not None
        for record in hash_blocks(segment, head, covered):
            if record.end_offset == end_offset:
                return record.value
    block, first = next(segment.blocks_with_offsets(end_offset - 1))
    raise DigestError(
        f"offset {end_offset - 1} is inside the block holding offsets {first}.."
        f"{first + block.count - 1}: a digest is taken at a block's last offset (use "
        f"--at-offset {first + block.count - 1} or {first - 1})"
    )


def chain_state_at(segments: Sequence[Segment], end_offset: int) -> CarriedChain:
    """The chain's origin and its value after the block ending just before `end_offset`.

    What a snapshot taken at offset `end_offset - 1` carries to a node that installs it (the
    new log's chain goes on from it). Raises DigestError as `chain_value_at` does.
    """
    value = chain_value_at(segments, end_offset)
    path = chain_path(segments[0].path)
    try:
        with open(path, "rb") as f:
            head = decode_chain_file(f.read(HEADER_SIZE))
    except (OSError, ChainDamage) as exc:
        raise DigestError(f"{path}: {exc}; run `mlog log verify`") from None
    return CarriedChain(origin=head.origin, value=value)


def block_end_at_or_before(segments: Sequence[Segment], offset: int) -> int:
    """One past the last offset of the last block ending at or before `offset` (its own end)."""
    segment = next((s for s in reversed(segments) if s.base_offset <= offset), None)
    if segment is None or offset >= segment.next_offset:
        return min(offset + 1, segments[-1].next_offset) if segments else 0
    block, first = next(segment.blocks_with_offsets(offset))
    return first + block.count if first + block.count == offset + 1 else first


def take_digest(
    segments: Sequence[Segment], at_offset: int | None = None, *, at_or_before: bool = False
) -> LogDigest:
    """The digest at `at_offset` (a block's last offset; default: the log's last offset).

    With `at_or_before` the digest is at the last block end at or before `at_offset`.
    """
    if not segments:
        raise DigestError("the log has no segments")
    end = segments[-1].next_offset
    target = end if at_offset is None else at_offset + 1
    if at_or_before and at_offset is not None:
        target = block_end_at_or_before(segments, min(at_offset, end - 1))
    if target <= 0:
        raise DigestError("the log is empty: there is nothing to take a digest of yet")
    return LogDigest(offset=target - 1, chain=chain_value_at(segments, target))
