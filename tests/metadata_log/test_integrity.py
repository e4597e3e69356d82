"""No acknowledged entry is ever lost to a flipped bit, a short write or a missing file.

The bit-flip sweeps run on real files: each flip is made in place, the log is verified, read
read-only and opened by a writer, and the byte is put back. A flip may be harmless (every entry
still decodes to what was written); otherwise `verify` must report it, reads must raise
`LogCorruptionError` rather than return anything that differs from what was written, and a
writer must refuse to open, changing nothing. The newest segment is swept exhaustively (its
blocks and sync marker through all three, every header bit in memory, a sample of header bits
through all three), an older one by a sample. The log is left as a writer killed right after
its last appends leaves it: the checkpoints predate the newest segment's blocks, so nothing but
the bytes themselves tells a torn write from damage.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import subprocess
import sys
import tempfile
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from metadata_log import LogConfig, LogCorruptionError, LogError, MetadataLog, verify_log
from metadata_log.checkpoint import Checkpoint, write_checkpoint
from metadata_log.container import (
    SYNC_SIZE,
    BlockDamage,
    RawBlock,
    TruncatedBlock,
    decode_header,
)
from metadata_log.reader import LogReader
from metadata_log.segment import Segment, segment_name
from records import ConfigRecord, ConfigResourceType, LogEntry, Record, TopicRecord, Uuid
from records.json_form import record_to_json
from records.varint import encode_long, read_long
from tests.support.paths import DATA, REPO
from tests.support.sweeps import swept

CONFIG = LogConfig(segment_bytes=64 * 1024, segment_ms=1000)
T0 = 1_700_000_000_000


class FakeClock:
    """A `clock_ms` the test moves: a jump of `segment_ms` rolls the active segment."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def config(tag: str, i: int, value: str = "v") -> ConfigRecord:
    """A small record naming its batch and position."""
    return ConfigRecord(
        resource_type=ConfigResourceType.TOPIC, resource_name=tag, name=str(i), value=value
    )


def scan_blocks(path: Path, base_offset: int) -> list[RawBlock]:
    """Every block of a segment file, each checked."""
    segment = Segment.open_header(path, base_offset)
    return list(segment.iter_blocks(segment.header.size, path.stat().st_size))


@dataclass(frozen=True, slots=True)
class SmallLog:
    """Two segments: an older, sealed one and the newest, five blocks of five records each."""

    directory: Path
    entries: list[LogEntry]
    older: Path
    newest: Path
    newest_blocks: list[RawBlock]


def build_small_log(directory: Path) -> SmallLog:
    """The log the sweeps flip bits in, its newest segment's blocks written after a checkpoint."""
    clock = FakeClock()
    with MetadataLog.open(directory, config=CONFIG, clock_ms=clock) as log:
        for n in range(4):
            records: list[Record] = [config(f"old{n}", i, "x" * 40) for i in range(3)]
            records.append(TopicRecord(name=f"t{n}", topic_id=Uuid(bytes(range(n, n + 16)))))
            log.append(records, principal=None if n % 2 else f"User:u{n}")
        clock.now += CONFIG.segment_ms  # the next append rolls: the newest segment starts
        log.append([config("roll", 0)], principal="User:roll")
    with MetadataLog.open(directory, config=CONFIG, clock_ms=clock) as log:
        for n in range(4):  # with the roll's block, five blocks of five or fewer records
            log.append([config(f"new{n}", i) for i in range(5)], principal=f"User:n{n}")
        entries = list(log.read())
        older, newest = (s.path for s in log.segments())
    # As a writer killed now leaves it: the checkpoints are those written at the roll.
    base = int(newest.stem)
    write_checkpoint(
        directory, Checkpoint(log_start_offset=0, recovery_point=base, newest_segment=base)
    )
    return SmallLog(directory, entries, older, newest, scan_blocks(newest, base))


@contextmanager
def no_log_warnings() -> Iterator[None]:
    """Silence the log's warnings (the sweeps open thousands of damaged logs)."""
    logger = logging.getLogger("metadata_log")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


class Sweeper:
    """Flips bits of one file of a log in place and checks what every reader makes of it."""

    def __init__(self, log: SmallLog) -> None:
        self.log = log
        self.snapshot = {p.name: p.read_bytes() for p in log.directory.iterdir() if p.is_file()}
        self.outcomes: Counter[str] = Counter()
        self.failures: list[str] = []

    def restore(self) -> None:
        """Put every file back as it was (a writer that opened rewrote its checkpoints)."""
        for path in self.log.directory.iterdir():
            if path.is_file() and path.name not in self.snapshot:
                path.unlink()
        for name, data in self.snapshot.items():
            path = self.log.directory / name
            if path.read_bytes() != data:
                path.write_bytes(data)

    def flip(self, path: Path, bit: int) -> None:
        """Flip `bit` of `path`, run every check, restore; failures are collected."""
        original = self.snapshot[path.name]
        byte = original[bit // 8]
        damaged = bytearray(original)
        damaged[bit // 8] ^= 1 << (bit % 8)
        fd = os.open(path, os.O_WRONLY)
        try:
            os.pwrite(fd, bytes([damaged[bit // 8]]), bit // 8)
            outcome = self.check(path, bytes(damaged))
            self.outcomes[outcome] += 1
        except AssertionError as exc:
            self.failures.append(f"{path.name} bit {bit % 8} of byte {bit // 8}: {exc}")
            outcome = "failed"
        finally:
            os.pwrite(fd, bytes([byte]), bit // 8)
            os.close(fd)
        if outcome != "refused":  # a writer opened: it wrote its checkpoints, epoch, indexes
            self.restore()

    def check(self, path: Path, damaged: bytes) -> str:
        """Check one damaged log; returns how it was handled."""
        expected = self.log.entries
        directory = self.log.directory
        report = verify_log(directory)
        reader_saw_damage = False
        try:
            reader = LogReader.open(directory, config=CONFIG)
        except LogCorruptionError:
            reader_saw_damage = True
        else:
            got: list[LogEntry] = []
            try:
                got.extend(reader.read())
            except LogCorruptionError:
                reader_saw_damage = True
            finally:
                reader.close()
            assert got == expected[: len(got)], "a read returned entries that differ"
            if not reader_saw_damage:
                assert got == expected, f"a read returned {len(got)} entries and no error"
        assert path.read_bytes() == damaged, "a read-only open changed the file"
        try:
            writer = MetadataLog.open(directory, config=CONFIG)
        except LogCorruptionError:
            assert path.read_bytes() == damaged, "a writer that refused changed the file"
            writer_refused = True
        else:
            try:
                assert path.read_bytes() == damaged, "a writer cut the file"
                got = []
                try:
                    got.extend(writer.read())
                except LogCorruptionError:
                    reader_saw_damage = True
                assert got == expected[: len(got)], "a writer read entries that differ"
            finally:
                writer.close()
            writer_refused = False
        harmless = not reader_saw_damage and not writer_refused
        if report.ok:
            assert harmless, "verify says ok, but reading it fails"
            return "harmless (every entry decodes as written)"
        if harmless:
            # Verify decodes every block: it must not see damage that nobody else does,
            # except in a sealed segment's blocks, which opens trust through its index.
            assert path == self.log.older, "verify reports damage no read or open sees"
            return "sealed block damage: verify and reads reaching it raise"
        return "refused" if writer_refused else "reads raise"

    def assert_no_silent_loss(self) -> None:
        """Every flip was handled as it must be."""
        assert not self.failures, (
            f"{len(self.failures)} of {sum(self.outcomes.values()) + len(self.failures)} flips "
            "mishandled:\n" + "\n".join(self.failures[:10])
        )


@pytest.fixture
def small_log(tmp_path: Path) -> Iterator[SmallLog]:
    """A fresh small log for one sweep, on tmpfs when there is one.

    A sweep opens the log thousands of times; on a busy disk each writer open's lock-file
    truncation and checkpoint reads cost milliseconds of journal work, on tmpfs microseconds.
    The files and system calls are the same.
    """
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        directory = Path(tempfile.mkdtemp(prefix="mlog-sweep-", dir=shm))
        try:
            yield build_small_log(directory / "log")
        finally:
            shutil.rmtree(directory)
    else:
        yield build_small_log(tmp_path / "log")


def test_every_bit_of_the_newest_segments_blocks_and_sync_marker(small_log: SmallLog) -> None:
    """The exhaustive part on real files: ~5,000 flips, each through verify, reader and writer."""
    header = Segment.open_header(small_log.newest, int(small_log.newest.stem)).header
    first, last = small_log.newest_blocks[0], small_log.newest_blocks[-1]
    assert last.end == small_log.newest.stat().st_size
    bits = [*range((header.size - SYNC_SIZE) * 8, header.size * 8)]  # the header's sync marker
    bits += range(first.position * 8, last.end * 8)  # every block
    bits = swept(bits)  # `make test`: every one
    sweeper = Sweeper(small_log)
    with no_log_warnings():
        for bit in bits:
            sweeper.flip(small_log.newest, bit)
    sweeper.assert_no_silent_loss()
    # Every one of them is damage that a writer refuses: no flip passes for a torn write.
    assert sweeper.outcomes == Counter({"refused": len(bits)}), sweeper.outcomes


def test_every_bit_of_the_newest_segments_header_is_caught_by_its_crc(
    small_log: SmallLog,
) -> None:
    """All ~75,000 header flips, in memory: each makes the header unreadable, never another one."""
    data = small_log.newest.read_bytes()
    size = decode_header(data).size
    caught = 0
    for bit in range(size * 8):
        damaged = bytearray(data)
        damaged[bit // 8] ^= 1 << (bit % 8)
        try:
            decode_header(bytes(damaged))
        except (BlockDamage, TruncatedBlock):
            caught += 1
    assert caught == size * 8


def test_a_sample_of_the_newest_segments_header_bits_through_every_reader(
    small_log: SmallLog,
) -> None:
    """Header damage takes the same path through verify, readers and writers: a sample."""
    size = decode_header(small_log.newest.read_bytes()).size
    bits = random.Random(17).sample(range(size * 8), 300)
    sweeper = Sweeper(small_log)
    with no_log_warnings():
        for bit in bits:
            sweeper.flip(small_log.newest, bit)
    sweeper.assert_no_silent_loss()
    assert sweeper.outcomes == Counter({"refused": len(bits)}), sweeper.outcomes


def test_a_sample_of_an_older_segments_bits(small_log: SmallLog) -> None:
    """A sealed segment: header flips are refused on open, block flips wherever they are read."""
    data = small_log.older.read_bytes()
    size = decode_header(data).size
    rng = random.Random(23)
    bits = rng.sample(range(size * 8), 200) + rng.sample(range(size * 8, len(data) * 8), 300)
    sweeper = Sweeper(small_log)
    with no_log_warnings():
        for bit in bits:
            sweeper.flip(small_log.older, bit)
    sweeper.assert_no_silent_loss()
    assert set(sweeper.outcomes) <= {
        "refused",
        "reads raise",
        "sealed block damage: verify and reads reaching it raise",
    }, sweeper.outcomes


# ------------------------------------------------------------------------- files and writes


def open_fails(directory: Path, *, read_only: bool) -> LogCorruptionError:
    """The error an open of a damaged log raises (it must raise one)."""
    with pytest.raises(LogCorruptionError) as info:
        (LogReader if read_only else MetadataLog).open(directory, config=CONFIG).close()
    return info.value


def assert_refused_everywhere(directory: Path, *, naming: str) -> list[LogCorruptionError]:
    """Verify, a reader and a writer all report the damage, and the message names `naming`."""
    before = {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()}
    report = verify_log(directory)
    assert not report.ok
    errors = [open_fails(directory, read_only=True), open_fails(directory, read_only=False)]
    for error in [*errors, *report.errors[:1]]:
        assert naming in str(error), str(error)
        assert "\n" not in str(error)
    after = {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()}
    assert after == before, "a refused open changed the directory"
    return errors


def three_segments(directory: Path, tag: str = "b") -> list[LogEntry]:
    """A cleanly closed log of three segments (rolled by the clock)."""
    clock = FakeClock()
    with MetadataLog.open(directory, config=CONFIG, clock_ms=clock) as log:
        for n in range(9):
            if n in (3, 6):
                clock.now += CONFIG.segment_ms
            log.append([config(f"{tag}{n}", i) for i in range(3)], principal="User:a")
        assert [s.base_offset for s in log.segments()] == [0, 9, 18]
        return list(log.read())


@pytest.mark.parametrize("which", [0, 9, 18], ids=["first", "middle", "newest"])
def test_a_deleted_segment_is_an_error_not_a_shorter_log(tmp_path: Path, which: int) -> None:
    directory = tmp_path / "log"
    three_segments(directory)
    (directory / segment_name(which)).unlink()
    errors = assert_refused_everywhere(directory, naming=segment_name(which))
    assert "missing" in str(errors[0])
    if which == 0:
        assert "segments before it are missing" in str(errors[0])
    else:
        assert f"--after-offset {which - 1}" in str(errors[0])


def test_a_zero_length_newest_segment_is_an_error(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    three_segments(directory)
    os.truncate(directory / segment_name(18), 0)
    errors = assert_refused_everywhere(directory, naming="is empty (0 bytes)")
    assert errors[1].segment == directory / segment_name(18)
    assert "--after-offset 17" in str(errors[1])


def test_a_short_header_as_a_full_disk_left_it_is_an_error(tmp_path: Path) -> None:
    """The previous code wrote a header with one unchecked os.write: a short one was kept."""
    directory = tmp_path / "log"
    three_segments(directory)
    newest = directory / segment_name(18)
    header_size = Segment.open_header(newest, 18).header.size
    os.truncate(newest, header_size - 100)
    assert_refused_everywhere(directory, naming="the header is incomplete")


def test_a_log_that_ends_before_its_recovery_point_is_an_error(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    entries = three_segments(directory)
    newest = directory / segment_name(18)
    blocks = scan_blocks(newest, 18)
    os.truncate(newest, blocks[-1].position)  # a whole block gone, at a block boundary
    errors = assert_refused_everywhere(directory, naming="were durable and acknowledged")
    assert f"offsets up to {len(entries) - 1}" in str(errors[0])


def test_a_segment_from_another_copy_of_the_log_is_refused(tmp_path: Path) -> None:
    """Same offsets, another history: the sync markers tell them apart, and the hash chain
    does not join them (its first block does not follow the previous segment's content)."""
    three_segments(tmp_path / "a")
    three_segments(tmp_path / "b", tag="other")
    for suffix in (".avro", ".chain"):
        name = segment_name(9).replace(".avro", suffix)
        shutil.copyfile(tmp_path / "b" / name, tmp_path / "a" / name)
    for suffix in (".index", ".timeindex"):
        (tmp_path / "a" / segment_name(9)).with_suffix(suffix).unlink()
    assert_refused_everywhere(tmp_path / "a", naming="comes from another copy of the log")


def test_a_segment_from_another_copy_of_the_same_history_is_taken(tmp_path: Path) -> None:
    """Another replica's segment of the same entries: its chain follows the previous one."""
    entries = three_segments(tmp_path / "a")
    three_segments(tmp_path / "b")
    shutil.copyfile(tmp_path / "b" / segment_name(9), tmp_path / "a" / segment_name(9))
    for suffix in (".index", ".timeindex"):
        (tmp_path / "a" / segment_name(9)).with_suffix(suffix).unlink()
    with LogReader.open(tmp_path / "a", config=CONFIG) as log:
        assert list(log.read()) == entries
        assert log.verify().ok


@pytest.mark.parametrize("how", ["deleted", "damaged", "garbage"])
def test_checkpoint_file_problems_are_errors(tmp_path: Path, how: str) -> None:
    directory = tmp_path / "log"
    three_segments(directory)
    path = directory / "checkpoints"
    if how == "deleted":
        path.unlink()
    elif how == "damaged":
        data = bytearray(path.read_bytes())
        data[30] ^= 1
        path.write_bytes(bytes(data))
    else:
        path.write_bytes(b"\x00" * 100)
    assert_refused_everywhere(directory, naming=str(path))


def test_a_segment_is_born_complete_despite_short_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = os.write

    def short_write(fd: int, data: bytes | memoryview) -> int:
        return real_write(fd, bytes(data)[:1000])  # a kernel may write less than asked

    monkeypatch.setattr(os, "write", short_write)
    with MetadataLog.open(tmp_path / "log", config=CONFIG) as log:
        log.append([config("a", 0)])
    monkeypatch.undo()
    with LogReader.open(tmp_path / "log", config=CONFIG) as reader:
        assert [e.record for e in reader.read()] == [config("a", 0)]
    assert verify_log(tmp_path / "log").ok


def test_a_full_disk_while_creating_a_segment_leaves_no_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "log"
    clock = FakeClock()
    with MetadataLog.open(directory, config=CONFIG, clock_ms=clock) as log:
        log.append([config("a", 0)])
    real_write = os.write
    header_writes: list[int] = []

    def full_disk(fd: int, data: bytes | memoryview) -> int:
        if len(data) > 1000 or header_writes:  # a segment header: a part, then nothing
            header_writes.append(len(data))
            return real_write(fd, bytes(data)[:700]) if len(header_writes) == 1 else 0
        return real_write(fd, data)

    with MetadataLog.open(directory, config=CONFIG, clock_ms=clock) as log:
        clock.now += CONFIG.segment_ms
        monkeypatch.setattr(os, "write", full_disk)
        with pytest.raises(LogError, match="append failed"):
            log.append([config("b", 0)])
        monkeypatch.undo()
        assert len(header_writes) == 2
    assert sorted(p.name for p in directory.glob("*.avro*")) == [segment_name(0)]
    with MetadataLog.open(directory, config=CONFIG) as log:
        assert [e.record for e in log.read()] == [config("a", 0)]
        assert log.append([config("c", 0)]) == (1, 1)
    assert verify_log(directory).ok


# ------------------------------------------------------------------------------ up to damage


def test_up_to_damage_serves_the_entries_before_it_with_a_warning(
    small_log: SmallLog, caplog: pytest.LogCaptureFixture
) -> None:
    block = small_log.newest_blocks[2]
    data = bytearray(small_log.newest.read_bytes())
    data[(block.position + block.end) // 2] ^= 0x01
    small_log.newest.write_bytes(bytes(data))
    with pytest.raises(TypeError, match="up_to_damage"):  # a writer never opens past damage
        MetadataLog.open(small_log.directory, up_to_damage=True)  # type: ignore[call-arg]
    with caplog.at_level(logging.WARNING, logger="metadata_log"):
        log = LogReader.open_up_to_damage(small_log.directory)
    with log:
        assert log.damage is not None and log.damage.position == block.position
        (warning,) = [r.getMessage() for r in caplog.records if r.name == "metadata_log"]
        assert "reading up to the damage" in warning and str(small_log.newest) in warning
        first_damaged = log.damage.first_offset
        assert first_damaged is not None
        got: list[LogEntry] = []
        with pytest.raises(LogCorruptionError):
            got.extend(log.read())
        assert got == small_log.entries[:first_damaged]
        assert list(log.read(lte=first_damaged - 1)) == small_log.entries[:first_damaged]


# --------------------------------------------------------------------------- compatibility

LEGACY = DATA / "legacy-log"


def test_a_log_written_before_checkpoints_and_header_crcs_still_reads_and_grows(
    tmp_path: Path,
) -> None:
    """`tests/data/legacy-log`: written by the code before this change (three segments).

    No checkpoint file, headers without CRC or chain: read as they are, then a writer adds the
    checkpoints and its new segments get the new header; the old ones are never rewritten.
    """
    directory = tmp_path / "log"
    shutil.copytree(LEGACY, directory)
    expected = [
        json.loads(line)
        for line in (LEGACY.parent / "legacy-log.entries.jsonl").read_text().splitlines()
    ]

    def as_json(entry: LogEntry) -> dict[str, object]:
        return {
            "offset": entry.offset,
            "epoch": entry.epoch,
            "timestamp": entry.timestamp,
            "principal": entry.principal,
            "record": record_to_json(entry.record),
        }

    assert verify_log(directory).ok
    with LogReader.open(directory) as reader:
        assert [as_json(e) for e in reader.read()] == expected
    old = {p.name: p.read_bytes() for p in directory.glob("*.avro")}
    assert not any(
        Segment.open_header(p, int(p.stem)).header.checksummed for p in directory.glob("*.avro")
    )
    clock = FakeClock()
    clock.now = expected[-1]["timestamp"]
    with MetadataLog.open(directory, config=CONFIG, clock_ms=clock) as log:
        assert log.append([config("new", 0)]) == (len(expected), len(expected))
        clock.now += CONFIG.segment_ms
        log.append([config("new", 1)])
        assert [as_json(e) for e in log.read(lte=len(expected) - 1)] == expected
    assert (directory / "checkpoints").exists()
    newest = max(directory.glob("*.avro"))
    assert Segment.open_header(newest, int(newest.stem)).header.checksummed
    assert {p.name: p.read_bytes() for p in directory.glob("*.avro") if p.name in old} == {
        # The old active segment grew by one block; the sealed ones are untouched.
        name: (data if name != max(old) else (directory / name).read_bytes())
        for name, data in old.items()
    }
    assert verify_log(directory).ok


# ------------------------------------------------------------------------------ memory bound

MEMORY_CAP_MIB = 512
"""The child's whole address space: the interpreter and libraries take about 40 MiB of it."""


@pytest.mark.process
def test_schema_text_flips_decode_in_bounded_memory_in_a_capped_child(tmp_path: Path) -> None:
    """Flipped schema text, in a header without CRC and in one with it, under RLIMIT_AS.

    Without the checks, some flips made fastavro decode without end (23 GB before the kernel
    killed it), and a flipped snappy preamble makes cramjam abort the process on allocation.
    Here every flip must end in a LogCorruptionError or in entries identical to those written.
    """
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.support.schema_flip_child",
            str(tmp_path),
            str(MEMORY_CAP_MIB),
            "2000",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    for form in ("legacy", "checksummed"):
        counts = report["counts"][form]
        allowed = {"LogCorruptionError", "identical", "unflipped: identical"}
        assert set(counts) <= allowed, (form, counts)
        assert counts["LogCorruptionError"] > 0
    # A header with a CRC lets no flip through; one without it only those its schema survives.
    assert set(report["counts"]["checksummed"]) == {"LogCorruptionError", "unflipped: identical"}
    assert report["peak_rss_kib"] < MEMORY_CAP_MIB * 1024


def test_a_damaged_block_size_never_loads_more_than_a_chunk(tmp_path: Path) -> None:
    """Verify reads a block only after its sync marker matched: a size claiming 10 MiB of a
    12 MiB segment costs one small read, not 10 MiB of memory."""
    directory = tmp_path / "log"
    with MetadataLog.open(directory, config=CONFIG) as log:
        log.append([config("a", 0)])
        path = log.segments()[-1].path
    header_size = Segment.open_header(path, 0).header.size
    data = path.read_bytes()
    claimed = encode_long(1) + encode_long(10 << 20)  # count 1, a size of 10 MiB
    _, after_count = read_long(data, header_size)
    _, after_size = read_long(data, after_count)
    damaged = data[:header_size] + claimed + data[after_size:]
    path.write_bytes(damaged + random.Random(3).randbytes(12 << 20))
    tracemalloc.start()
    try:
        report = verify_log(directory)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not report.ok
    (error,) = report.errors
    assert "sync marker" in error.reason
    assert peak < 4 << 20, f"verify held {peak:,} bytes at once"
