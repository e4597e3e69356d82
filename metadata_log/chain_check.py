"""Checking the hash chain (metadata_log.chain) while `verify` reads every block.

Two values are followed along the log: the chain recomputed from its origin (or from the
state carried across a trimmed start) over the blocks as they are now, which a digest is
compared with, and the stored values, each of which must be the hash of the stored value
before it and its block's bytes. The first block whose stored value does not follow is the
first break; checking goes on from its stored value, so each edited block is named once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from metadata_log.chain import ZERO, ChainDamage, ChainFile, chain_path, link, read_chain_file
from metadata_log.container import RawBlock
from metadata_log.segment import Segment


@dataclass(frozen=True, slots=True, kw_only=True)
class ChainBreak:
    """A block whose stored chain value does not follow from the one before and its bytes."""

    segment: Path
    position: int
    first_offset: int
    last_offset: int
    reason: str

    def __str__(self) -> str:
        return (
            f"the block at offsets {self.first_offset}..{self.last_offset} (segment "
            f"{self.segment.name}, byte {self.position}) does not follow the hash chain: "
            f"{self.reason}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ChainReport:
    """What `verify` found of the hash chain."""

    origin: int | None
    """Offset of the block the chain started at (from 32 zero bytes); None: no chain files."""
    stored_from: int | None
    """First offset whose block has a stored chain value."""
    log_start: int
    breaks: tuple[ChainBreak, ...] = ()
    unrecorded_blocks: int = 0
    """Blocks at the newest segment's end without a stored value yet (a writer open adds them)."""
    end_offset: int = 0
    """One past the last block checked."""
    head: bytes = ZERO
    """The chain value recomputed over every block checked."""
    values_at: tuple[tuple[int, bytes], ...] = ()
    """(end offset, recomputed value) at the end offsets asked for (digests to check)."""
    lost_at: int | None = None
    """Offset from which the chain could not be recomputed (damage made blocks unreadable)."""
    missing: tuple[Path, ...] = ()
    """Chain files gone from segments born with the chain (their headers say so)."""

    @property
    def ok(self) -> bool:
        """True if every stored value follows and no chain file is missing."""
        return not self.breaks and not self.missing

    def value_at(self, end_offset: int) -> bytes | None:
        """The recomputed value at `end_offset` (one past a block's last offset), if asked for."""
        return dict(self.values_at).get(end_offset)

    def describe(self) -> str:
        """One line saying where the chain starts and whether it holds."""
        if self.missing:
            names = ", ".join(path.name for path in self.missing)
            broken = f"; {len(self.breaks)} block(s) do not follow" if self.breaks else ""
            return (
                f"hash chain: MISSING, {len(self.missing)} segment(s) were written with the "
                f"hash chain but have no chain file ({names}){broken}: deleted files leave "
                "nothing to check the blocks against; check the log against a digest you kept "
                "(--digest TOKEN)"
            )
        if self.origin is None:
            return (
                "hash chain: none (a log written before it gets it on its next writer open; "
                "a quorum node's, once metadata.version is 2)"
            )
        if self.origin < self.log_start:
            start = (
                f"from offset {self.origin}, carried across the trimmed start at {self.log_start}"
            )
        elif self.stored_from is not None and self.stored_from > self.log_start:
            start = (
                f"from offset {self.stored_from} (blocks before it were written before the "
                "chain and are checked by CRC only)"
            )
        else:
            start = f"from offset {self.origin}"
        pending = (
            f"; {self.unrecorded_blocks} newest block(s) not yet recorded (the next writer "
            "open records them)"
            if self.unrecorded_blocks
            else ""
        )
        if self.breaks:
            return (
                f"hash chain {start}: BROKEN, {len(self.breaks)} block(s) do not follow; the "
                f"first: {self.breaks[0]}{pending}"
            )
        return f"hash chain {start}: intact up to offset {self.end_offset - 1}{pending}"


class ChainChecker:
    """Follows the chain over the blocks `verify` reads, segment by segment, oldest first."""

    def __init__(self, log_start: int, want: frozenset[int] = frozenset()) -> None:
        self.log_start = log_start
        self.want = want
        self.origin: int | None = None
        self.stored_from: int | None = None
        self.recomputed = ZERO
        self.stored_head: bytes | None = None
        self.breaks: list[ChainBreak] = []
        self.unrecorded = 0
        self.end_offset = log_start
        self.values: dict[int, bytes] = {}
        self._segment: Segment | None = None
        self._records: dict[int, tuple[int, bytes]] = {}
        self._missing: list[tuple[int, int, int]] = []
        self._first_segment = True
        self.lost_at: int | None = None
        self.missing: list[Path] = []

    def unreadable(self, first_offset: int) -> None:
        """Damage stopped the reading at `first_offset`: no value after it can be recomputed."""
        if self.lost_at is None:
            self.lost_at = first_offset
        self._first_segment = False

    def begin_segment(self, segment: Segment) -> None:
        """Read `segment`'s chain file before its blocks are checked."""
        self._segment = segment
        self._missing = []
        try:
            chain: ChainFile | None = read_chain_file(chain_path(segment.path))
        except ChainDamage as exc:
            chain = None
            self.breaks.append(
                ChainBreak(
                    segment=segment.path,
                    position=segment.header.size,
                    first_offset=segment.base_offset,
                    last_offset=segment.base_offset,
                    reason=f"its chain file is damaged ({exc})",
                )
            )
        self._records = {}
        if chain is None:
            if segment.header.hash_chained and not chain_path(segment.path).exists():
                self.missing.append(chain_path(segment.path))
            if self._first_segment:
                self.end_offset = segment.base_offset
            self._first_segment = False
            return
        if self._first_segment:
            self.recomputed = chain.previous
            self.origin = chain.origin
            self.end_offset = segment.base_offset
            if segment.base_offset in self.want:
                self.values[segment.base_offset] = chain.previous
        elif self.origin is None:
            self.origin = chain.origin
        if self.stored_head is not None and chain.previous != self.stored_head:
            first = chain.records[0] if chain.records else None
            self.breaks.append(
                ChainBreak(
                    segment=segment.path,
                    position=segment.header.size,
                    first_offset=segment.base_offset,
                    last_offset=segment.base_offset + (first.count - 1 if first else 0),
                    reason="its chain file does not start from the previous segment's last value",
                )
            )
        self.stored_head = chain.previous
        self._first_segment = False
        self._records = {r.first_offset: (r.count, r.value) for r in chain.records}

    def block(self, block: RawBlock, first_offset: int) -> None:
        """Check one verified block of the current segment."""
        assert self._segment is not None
        end = first_offset + block.count
        before = self.recomputed
        self.recomputed = link(before, first_offset, block.count, block.body)
        if end in self.want and self.lost_at is None:
            self.values[end] = self.recomputed
        self.end_offset = end
        stored = self._records.get(first_offset)
        if stored is None or stored[0] != block.count:
            self._missing.append((first_offset, block.count, block.position))
            if self.stored_head is not None:
                self.stored_head = self.recomputed
            return
        if self.stored_from is None:
            self.stored_from = first_offset
        previous = before if self.stored_head is None else self.stored_head
        if link(previous, first_offset, block.count, block.body) != stored[1]:
            self.breaks.append(
                ChainBreak(
                    segment=self._segment.path,
                    position=block.position,
                    first_offset=first_offset,
                    last_offset=end - 1,
                    reason=(
                        "its stored chain value is not the hash of the value before it and its "
                        "bytes: the block (or its chain value) was changed after it was written"
                    ),
                )
            )
        self.stored_head = stored[1]

    def end_segment(self, *, newest: bool) -> None:
        """After the segment's last block: blocks without a stored value, once the chain began.

        The newest segment's chain file, missing while the segment holds no block, is one a
        crash kept its writer from creating (the next writer open does): not missing.
        """
        assert self._segment is not None
        segment = self._segment
        path = chain_path(segment.path)
        if newest and segment.is_empty and self.missing and self.missing[-1] == path:
            self.missing.pop()
        if self.stored_from is None or not self._missing:
            return
        if newest and self._missing[-1][0] + self._missing[-1][1] == self.end_offset:
            tail = [m for m in self._missing if m[0] >= self.stored_from]
            self.unrecorded = len(tail)
            return
        first, count, position = self._missing[0]
        self.breaks.append(
            ChainBreak(
                segment=self._segment.path,
                position=position,
                first_offset=first,
                last_offset=first + count - 1,
                reason="it has no stored chain value in a segment that is sealed",
            )
        )

    def report(self) -> ChainReport:
        """What was found."""
        return ChainReport(
            origin=self.origin,
            stored_from=self.stored_from,
            log_start=self.log_start,
            breaks=tuple(self.breaks),
            unrecorded_blocks=self.unrecorded,
            end_offset=self.end_offset,
            head=self.recomputed,
            values_at=tuple(sorted(self.values.items())),
            lost_at=self.lost_at,
            missing=tuple(self.missing),
        )
