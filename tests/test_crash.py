"""Crash safety on real files and real processes: SIGKILL mid-append, torn tails, bit flips."""

from __future__ import annotations

import logging
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from metadata_log import LogConfig, LogCorruptionError, MetadataLog
from metadata_log.container import SYNC_SIZE, RawBlock, body_prefix
from metadata_log.segment import Segment
from records import ConfigRecord, ConfigResourceType, LogEntry
from records.varint import read_long

REPO = Path(__file__).resolve().parent.parent
WRITER = Path(__file__).resolve().with_name("crash_writer.py")
CRASH_CONFIG = LogConfig(segment_bytes=256 * 1024)
"""The writer script's config: the checking open must use the same one, as the next run would."""
CONFIG = LogConfig(segment_bytes=64 * 1024)
THREADS = 2


# ------------------------------------------------------------------------------------ helpers


def make_batch(tag: str, size: int, rng: random.Random, value_bytes: int = 4) -> list[ConfigRecord]:
    """`size` records of batch `tag`, with incompressible values so blocks have a real size."""
    return [
        ConfigRecord(
            resource_type=ConfigResourceType.TOPIC,
            resource_name=tag,
            name=str(i),
            value=rng.randbytes(value_bytes).hex(),
        )
        for i in range(size)
    ]


def scan_blocks(path: Path, base_offset: int) -> list[RawBlock]:
    """Every block of a segment file, each checked (framing, sync marker, CRC32)."""
    segment = Segment.open_header(path, base_offset)
    return list(segment.iter_blocks(segment.header.size, path.stat().st_size))


def flip_bit(path: Path, bit: int) -> None:
    """Flip bit `bit` (counted from the start of the file, low bit of each byte first)."""
    with open(path, "r+b") as f:
        f.seek(bit // 8)
        (byte,) = f.read(1)
        f.seek(bit // 8)
        f.write(bytes([byte ^ (1 << (bit % 8))]))


def metadata_log_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Messages of the WARNING records logged on the "metadata_log" logger."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "metadata_log" and r.levelno == logging.WARNING
    ]


@contextmanager
def opened(directory: Path, *, read_only: bool = False) -> Iterator[MetadataLog]:
    """Open a log and close it afterwards, whatever happens."""
    log = MetadataLog.open(directory, config=CONFIG, read_only=read_only)
    try:
        yield log
    finally:
        log.close()


@dataclass(frozen=True, slots=True)
class Built:
    """A log built for damage tests: its entries and the blocks of its last segment."""

    entries: list[LogEntry]
    segment_name: str
    blocks: list[RawBlock]


def build_log(directory: Path, batch_sizes: list[int], *, fill_segments: int = 0) -> Built:
    """A log with one block per batch size (one sync append each).

    With `fill_segments`, big records are appended first until that many segments are sealed,
    so the batches land in a segment that does not start at offset 0.
    """
    rng = random.Random(7)
    with opened(directory) as log:
        while len(log.segments()) <= fill_segments:
            log.append(make_batch("filler", 4, rng, value_bytes=2048), principal="p")
        for n, size in enumerate(batch_sizes):
            log.append(make_batch(f"b{n}", size, rng), principal="p")
        entries = list(log.read())
        last = log.segments()[-1]
    assert [e.offset for e in entries] == list(range(len(entries)))
    blocks = scan_blocks(last.path, last.base_offset)
    assert [b.count for b in blocks[-len(batch_sizes) :]] == batch_sizes
    return Built(entries, last.path.name, blocks)


# ------------------------------------------------------------------------- SIGKILL crashes


@dataclass(frozen=True, slots=True)
class Ack:
    """A batch the writer acknowledged: it returned from append with these offsets."""

    batch_id: str
    first: int
    last: int


def parse_acks(output: bytes) -> list[Ack]:
    """The complete `ACK` lines of the writer's output (a line cut by the kill is ignored)."""
    acks = []
    for line in output.split(b"\n")[:-1]:
        word, batch_id, first, last = line.decode().split()
        assert word == "ACK", line
        acks.append(Ack(batch_id, int(first), int(last)))
    return acks


def read_available(fd: int, out: bytearray, deadline: float, *, until_line: bool) -> bool:
    """Read the pipe into `out` until `deadline` (or a full line); False at end of file."""
    while not (until_line and b"\n" in out):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return False
            out += chunk
    return True


def run_writer_and_kill(
    directory: Path, seed: int, delay: float, *, wait_for_ack: bool, stderr_path: Path
) -> list[Ack]:
    """Start the writer, optionally wait for its first ACK, SIGKILL it after `delay` seconds."""
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, str(WRITER), str(directory), str(seed)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=REPO,
        )
    assert proc.stdout is not None
    out = bytearray()
    try:
        fd = proc.stdout.fileno()
        if wait_for_ack:
            alive = read_available(fd, out, time.monotonic() + 30, until_line=True)
            assert alive and b"\n" in out, (
                f"writer gave no ACK: {stderr_path.read_text(errors='replace')}"
            )
        read_available(fd, out, time.monotonic() + delay, until_line=False)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        out += proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL, (
        f"writer exited by itself ({proc.returncode}): {stderr_path.read_text(errors='replace')}"
    )
    return parse_acks(bytes(out))


def blocks_with_several_batches(log: MetadataLog, batch_starts: set[int]) -> int:
    """How many blocks of the log hold more than one batch (written by one group commit)."""
    grouped = 0
    for segment in log.segments():
        for block in scan_blocks(segment.path, segment.base_offset):
            first, _, _ = body_prefix(block.body)
            starts = sum(1 for o in range(first, first + block.count) if o in batch_starts)
            grouped += starts > 1
    return grouped


@dataclass(frozen=True, slots=True)
class Recovered:
    """What the checks of a crashed log found."""

    entries: int
    batch_starts: set[int]


def check_recovered(directory: Path, acked: dict[str, Ack]) -> Recovered:
    """Open the crashed log as the next writer would and check it."""
    log = MetadataLog.open(directory, config=CRASH_CONFIG)
    try:
        entries = list(log.read())
        assert [e.offset for e in entries] == list(range(len(entries))), "offsets are not dense"
        assert log.end_offset == len(entries)
        batches: dict[str, list[LogEntry]] = {}
        for entry in entries:
            assert isinstance(entry.record, ConfigRecord)
            batches.setdefault(entry.record.resource_name.removeprefix("b"), []).append(entry)
        for batch_id, batch in batches.items():
            records = [e.record for e in batch]
            assert isinstance(records[0], ConfigRecord) and records[0].value is not None
            size = int(records[0].value)
            assert [(r.name, r.value) for r in records if isinstance(r, ConfigRecord)] == [
                (str(i), str(size)) for i in range(size)
            ], f"batch {batch_id} is partial or out of order"
            first = batch[0].offset
            assert [e.offset for e in batch] == list(range(first, first + size)), batch_id
            # One batch, one block: a single epoch, timestamp and principal.
            assert len({(e.epoch, e.timestamp, e.principal) for e in batch}) == 1, batch_id
        for ack in acked.values():
            assert ack.batch_id in batches, f"acknowledged batch {ack} is lost"
            batch = batches[ack.batch_id]
            assert (batch[0].offset, batch[-1].offset) == (ack.first, ack.last), ack
        report = log.verify()
        assert report.ok, [s.error for s in report.segments]
        assert report.entries == len(entries)
        assert report.torn_tail is None
        return Recovered(len(entries), {batch[0].offset for batch in batches.values()})
    finally:
        log.close()


@dataclass(frozen=True, slots=True)
class CrashResult:
    """What happened to one directory."""

    acknowledged: int
    entries: int
    grouped_blocks: int


def crash_directory(directory: Path, first_seed: int, runs: int) -> CrashResult:
    """Kill the writer `runs` times on one directory, checking after each kill."""
    rng = random.Random(first_seed)
    acked: dict[str, Ack] = {}
    recovered = Recovered(0, set())
    for run in range(runs):
        seed = first_seed + run
        # Some runs are killed without waiting for an ACK: during start-up, creation or recovery.
        acks = run_writer_and_kill(
            directory,
            seed,
            rng.uniform(0.05, 0.4),
            wait_for_ack=run % 4 != 1,
            stderr_path=directory.parent / f"{directory.name}-{seed}.stderr",
        )
        for ack in acks:
            assert ack.batch_id.startswith(f"{seed}."), ack
            acked[ack.batch_id] = ack
        recovered = check_recovered(directory, acked)
        assert recovered.entries >= sum(a.last - a.first + 1 for a in acked.values())
    with MetadataLog.open(directory, config=CRASH_CONFIG, read_only=True) as log:
        grouped = blocks_with_several_batches(log, recovered.batch_starts)
    return CrashResult(len(acked), recovered.entries, grouped)


def test_sigkill_never_loses_acknowledged_batches_nor_leaves_partial_ones(
    tmp_path: Path,
) -> None:
    directories, runs = 10, 5
    with ThreadPoolExecutor(THREADS) as pool:
        futures = [
            pool.submit(crash_directory, tmp_path / f"log{d}", 1000 * (d + 1), runs)
            for d in range(directories)
        ]
        results = [f.result() for f in futures]
    # The writer made real progress: every directory saw many acknowledged batches ...
    assert all(r.acknowledged >= 20 for r in results), results
    assert sum(r.acknowledged for r in results) >= 20 * directories
    # ... and concurrent appends were really committed together.
    assert all(r.grouped_blocks > 0 for r in results), results
    # And the logs grew past a segment, so recovery ran over rolled segments too.
    assert any(len(list(p.glob("*.avro"))) > 1 for p in tmp_path.glob("log*")), results


# ------------------------------------------------------------------------------- torn tails


def test_torn_tail_at_every_byte_is_truncated_and_the_log_continues(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = tmp_path / "source"
    # Enough data to roll once, so the torn tail is in a segment that does not start at 0.
    built = build_log(source, [5, 3, 8], fill_segments=1)
    assert built.segment_name != f"{0:020d}.avro"
    last_block = built.blocks[-1]
    before = built.entries[: -last_block.count]
    segment_size = (source / built.segment_name).stat().st_size
    assert last_block.end == segment_size
    extra = make_batch("extra", 4, random.Random(1))

    for p in range(last_block.position, segment_size):
        copy = tmp_path / f"p{p}"
        shutil.copytree(source, copy)
        segment = copy / built.segment_name
        os.truncate(segment, p)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="metadata_log"), opened(copy) as log:
            assert list(log.read()) == before, p
            assert log.end_offset == len(before)
            assert segment.stat().st_size == last_block.position, p
            warnings = metadata_log_warnings(caplog)
            if p > last_block.position:
                assert len(warnings) == 1, (p, warnings)
                assert str(segment) in warnings[0]
                assert f"byte {last_block.position}" in warnings[0]
                assert "dropped" in warnings[0]
            else:
                assert warnings == [], p
            assert log.append(extra, principal="after") == (len(before), len(before) + 3)
        with opened(copy, read_only=True) as log:
            entries = list(log.read())
            assert entries[: len(before)] == before
            assert [(e.offset, e.record, e.principal) for e in entries[len(before) :]] == [
                (len(before) + i, r, "after") for i, r in enumerate(extra)
            ]
            assert log.verify().ok
        shutil.rmtree(copy)


# -------------------------------------------------------------------------------- bit flips

FLIP_BATCHES = [5, 5, 5, 5, 5]
"""Five blocks of five small records (about 120 bytes a block)."""


def block_regions(path: Path, block: RawBlock) -> dict[str, range]:
    """The bits of a block's fields, by name.

    "count" is the entry count (the one field the block's CRC32 does not cover), "size-data-crc"
    the byte size, the snappy data and the CRC32, "sync" the 16-byte sync marker.
    """
    data = path.read_bytes()
    count, after_count = read_long(data, block.position)
    assert count == block.count
    sync_start = block.end - SYNC_SIZE
    return {
        "count": range(block.position * 8, after_count * 8),
        "size-data-crc": range(after_count * 8, sync_start * 8),
        "sync": range(sync_start * 8, block.end * 8),
    }


def flip_each_bit(source: Path, built: Built, bits: range, check: Callable[[Path], None]) -> None:
    """For every bit: copy the log, flip the bit in the copy, run `check`; report all failures."""
    assert len(bits) > 0
    failures = []
    for bit in bits:
        copy = source.with_name("copy")
        shutil.copytree(source, copy)
        flip_bit(copy / built.segment_name, bit)
        where = f"bit {bit % 8} of byte {bit // 8}"
        try:
            check(copy)
        except AssertionError as exc:
            failures.append(f"{where}: {str(exc).splitlines()[0]}")
        finally:
            shutil.rmtree(copy)
    assert not failures, f"{len(failures)} of {len(bits)} flips mishandled:\n" + "\n".join(
        failures[:10]
    )


def damage_before_tail_is_refused(built: Built, block: RawBlock) -> Callable[[Path], None]:
    """Check for a flip in `block`, which is not the last: nobody reads or writes past it."""

    def check(directory: Path) -> None:
        segment = directory / built.segment_name
        flipped = segment.read_bytes()

        def check_error(exc: LogCorruptionError) -> None:
            assert exc.segment == segment, exc.segment
            # The damaged block, or the one after it when its (unchecked) count was changed.
            assert block.position <= exc.position <= block.end, exc.position

        try:
            log = MetadataLog.open(directory, config=CONFIG, read_only=True)
        except LogCorruptionError as exc:
            check_error(exc)
        else:
            try:
                got: list[LogEntry] = []
                try:
                    got.extend(log.read())
                except LogCorruptionError as exc:
                    check_error(exc)
                else:
                    raise AssertionError(f"read-only read returned {len(got)} entries and no error")
                finally:
                    assert got == built.entries[: len(got)], "read returned altered entries"
                report = log.verify()
                assert not report.ok, "verify() says ok"
                errors = [s.error for s in report.segments if s.error is not None]
                assert [e.segment for e in errors] == [segment]
            finally:
                log.close()
        assert segment.read_bytes() == flipped, "a read-only open changed the segment"

        try:
            log = MetadataLog.open(directory, config=CONFIG)
        except LogCorruptionError as exc:
            check_error(exc)
        else:
            end, size = log.end_offset, segment.stat().st_size
            log.close()
            raise AssertionError(
                f"a writer opened the damaged log: end offset {end}, segment cut to {size} "
                f"bytes from {len(flipped)}"
            )
        assert segment.read_bytes() == flipped, "the writer changed the segment"

    return check


@pytest.mark.parametrize(
    ("target", "region"),
    [
        pytest.param(1, "count", id="block1-count"),
        pytest.param(1, "size-data-crc", id="block1-size-data-crc"),
        pytest.param(1, "sync", id="block1-sync"),
        pytest.param(3, "count", id="second-to-last-count"),
        pytest.param(3, "size-data-crc", id="second-to-last-size-data-crc"),
        pytest.param(3, "sync", id="second-to-last-sync"),
    ],
)
def test_bit_flip_before_the_last_block_is_refused_never_served(
    tmp_path: Path, target: int, region: str
) -> None:
    source = tmp_path / "source"
    built = build_log(source, FLIP_BATCHES)
    assert len(built.blocks) == len(FLIP_BATCHES)
    block = built.blocks[target]
    bits = block_regions(source / built.segment_name, block)[region]
    flip_each_bit(source, built, bits, damage_before_tail_is_refused(built, block))


def damaged_last_block_is_dropped(
    built: Built, caplog: pytest.LogCaptureFixture
) -> Callable[[Path], None]:
    """Check for a flip in the last block: read-only stops before it, a writer truncates it."""
    block = built.blocks[-1]
    before = built.entries[: -block.count]

    def check(directory: Path) -> None:
        segment = directory / built.segment_name
        flipped = segment.read_bytes()
        with opened(directory, read_only=True) as log:
            assert log.torn_tail is not None, f"read-only open saw no damage ({log.end_offset=})"
            assert list(log.read()) == before
            assert log.end_offset == len(before)
        assert segment.read_bytes() == flipped, "a read-only open changed the segment"

        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="metadata_log"), opened(directory) as log:
            assert log.end_offset == len(before), f"writer open: {log.end_offset=}"
            assert list(log.read()) == before
            assert segment.stat().st_size == block.position
            warnings = metadata_log_warnings(caplog)
            assert len(warnings) == 1 and str(segment) in warnings[0], warnings
            assert log.verify().ok

    return check


@pytest.mark.parametrize("region", ["count", "size-data-crc", "sync"])
def test_bit_flip_in_the_last_block_truncates_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, region: str
) -> None:
    source = tmp_path / "source"
    built = build_log(source, FLIP_BATCHES)
    block = built.blocks[-1]
    bits = block_regions(source / built.segment_name, block)[region]
    flip_each_bit(source, built, bits, damaged_last_block_is_dropped(built, caplog))
