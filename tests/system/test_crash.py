"""Crash safety on real files and real processes: SIGKILL mid-append, torn tails, zeroed sectors."""

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
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from metadata_log import LogConfig, LogCorruptionError, MetadataLog
from metadata_log.container import RawBlock, body_prefix
from metadata_log.reader import LogReader
from metadata_log.segment import Segment
from metadata_log.stored_log import StoredLog
from records import ConfigRecord, ConfigResourceType, LogEntry
from tests.support.paths import REPO

CRASH_CONFIG = LogConfig(segment_bytes=64 * 1024)
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
def opened(directory: Path, *, read_only: bool = False) -> Iterator[Any]:
    """Open a log and close it afterwards, whatever happens."""
    log = (LogReader if read_only else MetadataLog).open(directory, config=CONFIG)
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


def build_log(
    directory: Path, batch_sizes: list[int], *, fill_segments: int = 0, unsynced: int = 0
) -> Built:
    """A log with one block per batch size (one sync append each).

    With `fill_segments`, big records are appended first until that many segments are sealed,
    so the batches land in a segment that does not start at offset 0. The last `unsynced`
    batches are left as a writer killed right after appending them leaves them: appended and
    fsynced, but after the checkpoints were last written (so a crash could have torn them).
    """
    rng = random.Random(7)
    split = len(batch_sizes) - unsynced
    with opened(directory) as log:
        while len(log.segments()) <= fill_segments:
            log.append(make_batch("filler", 4, rng, value_bytes=2048), principal="p")
        for n, size in enumerate(batch_sizes[:split]):
            log.append(make_batch(f"b{n}", size, rng), principal="p")
    checkpoints = (directory / "checkpoints").read_bytes()
    with opened(directory) as log:
        for n, size in enumerate(batch_sizes[split:], split):
            log.append(make_batch(f"b{n}", size, rng), principal="p")
        entries = list(log.read())
        last = log.segments()[-1]
    if unsynced:
        (directory / "checkpoints").write_bytes(checkpoints)
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
            [sys.executable, "-m", "tests.support.crash_writer", str(directory), str(seed)],
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


def blocks_with_several_batches(log: StoredLog, batch_starts: set[int]) -> int:
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
    with LogReader.open(directory, config=CRASH_CONFIG) as log:
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


def test_every_truncation_point_of_the_last_two_blocks_recovers_to_the_last_whole_block(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A crash can leave the file ending anywhere in the blocks written since the checkpoint."""
    source = tmp_path / "source"
    # Enough data to roll once, so the torn tail is in a segment that does not start at 0.
    built = build_log(source, [5, 3, 8], fill_segments=1, unsynced=2)
    assert built.segment_name != f"{0:020d}.avro"
    second, last = built.blocks[-2], built.blocks[-1]
    segment_size = (source / built.segment_name).stat().st_size
    assert last.end == segment_size and second.end == last.position
    extra = make_batch("extra", 4, random.Random(1))

    for p in range(second.position, segment_size):
        torn = last if p >= last.position else second
        before = built.entries[: len(built.entries) - last.count - (torn is second) * second.count]
        copy = tmp_path / f"p{p}"
        shutil.copytree(source, copy)
        segment = copy / built.segment_name
        os.truncate(segment, p)
        with opened(copy, read_only=True) as log:
            assert list(log.read()) == before, p
            assert (log.torn_tail is not None) == (p > torn.position), p
            assert log.verify().ok, p
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="metadata_log"), opened(copy) as log:
            assert list(log.read()) == before, p
            assert log.end_offset == len(before)
            assert segment.stat().st_size == torn.position, p
            warnings = metadata_log_warnings(caplog)
            if p > torn.position:
                assert len(warnings) == 1, (p, warnings)
                assert str(segment) in warnings[0]
                assert f"byte {torn.position}" in warnings[0]
                # The count is the block's first byte: once written, the warning gives it.
                assert f"{torn.count} entries, never acknowledged dropped" in warnings[0], warnings
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


def test_a_torn_tail_under_the_recovery_point_is_damage(tmp_path: Path) -> None:
    """The checkpoints say the last block was durable: losing it is not a crash's doing."""
    built = build_log(tmp_path / "log", [5, 3, 8])  # closed cleanly: checkpoints cover all
    segment = tmp_path / "log" / built.segment_name
    last = built.blocks[-1]
    os.truncate(segment, last.position + 10)
    cut = segment.read_bytes()
    for read_only in (True, False):
        with pytest.raises(LogCorruptionError) as info:
            opened(tmp_path / "log", read_only=read_only).__enter__()
        assert info.value.segment == segment
        assert info.value.position == last.position
        assert "checkpoints say offsets up to" in str(info.value)
        assert f"--after-offset {len(built.entries) - last.count - 1}" in str(info.value)
    assert segment.read_bytes() == cut


@pytest.mark.parametrize("how", ["middle-sector", "tail-sectors", "zero-extended"])
def test_zeroed_sectors_of_the_last_block_are_a_torn_write(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    """Sectors of the last write that never reached the disk read as zeros (etcd's torn entry)."""
    source = tmp_path / "log"
    rng = random.Random(3)
    with opened(source) as log:
        log.append(make_batch("a", 3, rng), principal="p")
    checkpoints = (source / "checkpoints").read_bytes()
    with opened(source) as log:
        # A block of about 3 KB spans several 512-byte sectors.
        log.append(make_batch("big", 20, rng, value_bytes=80), principal="p")
        entries = list(log.read())
        path = log.segments()[-1].path
    (source / "checkpoints").write_bytes(checkpoints)
    block = scan_blocks(path, 0)[-1]
    data = bytearray(path.read_bytes())
    first_sector = (block.position // 512 + 1) * 512
    if how == "middle-sector":  # the file ends with the sync marker, yet one sector is zeros
        data[first_sector + 512 : first_sector + 1024] = bytes(512)
    elif how == "tail-sectors":
        data[first_sector:] = bytes(len(data) - first_sector)
    else:  # the size reached the disk, no byte of the block did
        data[block.position :] = bytes(len(data) - block.position)
    path.write_bytes(bytes(data))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="metadata_log"), opened(source) as log:
        assert list(log.read()) == entries[:3]
        (warning,) = metadata_log_warnings(caplog)
        assert "was never written (all zeros)" in warning
    assert path.stat().st_size == block.position
