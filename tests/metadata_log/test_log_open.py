"""What a log's open, close, roll and checkpoints do that only a crash, damage or a clock shows."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path

import pytest

from metadata_log import LogClosedError, LogConfig, LogCorruptionError, LogError, MetadataLog
from metadata_log.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from metadata_log.container import RawBlock
from metadata_log.reader import LogReader
from metadata_log.segment import Segment, segment_name
from records import ConfigRecord, ConfigResourceType, Record, TopicRecord, Uuid
from records.errors import RecordError

CONFIG = LogConfig(segment_ms=1000)
T0 = 1_700_000_000_000


def config(tag: str, i: int) -> ConfigRecord:
    """A small record naming its batch and position."""
    return ConfigRecord(
        resource_type=ConfigResourceType.TOPIC, resource_name=tag, name=str(i), value="v"
    )


def batch(tag: str, n: int) -> list[Record]:
    return [config(tag, i) for i in range(n)]


def build(directory: Path, segments: int = 2) -> None:
    """`segments` segments (0, 9, ...) of three batches of three records each."""
    now = [T0]
    with MetadataLog.open(directory, config=CONFIG, clock_ms=lambda: now[0]) as log:
        for n in range(3 * segments):
            if n and n % 3 == 0:
                now[0] += CONFIG.segment_ms
            log.append(batch(f"b{n}", 3))


def blocks(path: Path) -> list[RawBlock]:
    segment = Segment.open_header(path, int(path.stem))
    return list(segment.iter_blocks(segment.header.size, path.stat().st_size))


def tear(directory: Path, *, recovery_point: int) -> tuple[Path, RawBlock]:
    """Cut the newest segment (9) inside its last block (offsets 15..17)."""
    newest = directory / segment_name(9)
    last = blocks(newest)[-1]
    write_checkpoint(
        directory, Checkpoint(log_start_offset=0, recovery_point=recovery_point, newest_segment=9)
    )
    os.truncate(newest, last.position + 7)
    return newest, last


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "metadata_log"]


def test_a_torn_tail_is_reported_read_only_and_cut_by_a_writer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "log"
    build(directory)
    newest, last = tear(directory, recovery_point=15)  # the torn block starts at it
    size = newest.stat().st_size
    with LogReader.open(directory, config=CONFIG) as log:
        assert log.end_offset == 15 and len(list(log.read())) == 15
        assert log.torn_tail is not None
        assert log.torn_tail.startswith(f"segment {newest}: torn tail at byte {last.position} (")
        assert log.torn_tail.endswith("3 entries, never acknowledged dropped")
        report = log.verify()  # bounded to what this open serves: the tail is the open's
        assert report.ok and report.torn_tail == log.torn_tail
    assert newest.stat().st_size == size  # a read-only open changes nothing
    fds = len(os.listdir("/proc/self/fd"))
    with (
        caplog.at_level(logging.WARNING, logger="metadata_log"),
        MetadataLog.open(directory, config=CONFIG) as log,
    ):
        assert log.end_offset == 15 and log.torn_tail is None
        assert log.append(batch("after", 1)) == (15, 15)
    assert len(os.listdir("/proc/self/fd")) == fds
    assert newest.stat().st_size == last.position  # cut where the torn block began
    (warning,) = warnings_of(caplog)
    assert warning.startswith(
        f"truncating torn tail of segment {newest}: torn tail at byte {last.position} ("
    )
    assert warning.endswith(
        "the file ends inside the block); 3 entries, never acknowledged dropped"
    )


def test_a_torn_tail_below_the_recovery_point_refuses_every_open(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    build(directory)
    newest, last = tear(directory, recovery_point=16)
    cut = newest.read_bytes()
    for read_only in (True, False):
        with pytest.raises(LogCorruptionError) as info:
            (LogReader if read_only else MetadataLog).open(directory, config=CONFIG)
        assert info.value.position == last.position and info.value.first_offset == 15
        assert "but the checkpoints say offsets up to 15 were durable" in str(info.value)
    assert newest.read_bytes() == cut


def test_a_damaged_checkpoint_file_refuses_an_open_or_is_read_past(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "log"
    build(directory)
    (directory / "checkpoints").write_bytes(b"mlog-checkpoints 1\n")
    with pytest.raises(LogCorruptionError) as info:
        LogReader.open(directory, config=CONFIG)
    assert info.value.segment == directory / "checkpoints" and info.value.position == 0
    assert "the checkpoint file is damaged: it has no crc32 line" in str(info.value)
    with (
        caplog.at_level(logging.WARNING, logger="metadata_log"),
        LogReader.open_up_to_damage(directory, config=CONFIG) as log,
    ):
        assert log.damage is not None and "checkpoint file is damaged" in str(log.damage)
        assert len(list(log.read())) == 18
    assert any("reading up to the damage" in w for w in warnings_of(caplog))


def test_a_damaged_header_stops_an_up_to_damage_read_before_it(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    build(directory, segments=3)
    middle = directory / segment_name(9)
    data = bytearray(middle.read_bytes())
    data[30] ^= 0x10
    middle.write_bytes(bytes(data))
    with LogReader.open_up_to_damage(directory, config=CONFIG) as log:
        assert log.damage is not None and log.damage.position == 0
        assert "bad segment header" in str(log.damage)
        assert [s.base_offset for s in log.segments()] == [0]
        assert log.end_offset == 9


def test_damage_in_a_block_serves_the_range_before_it(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    build(directory)
    newest = directory / segment_name(9)
    second = blocks(newest)[1]  # offsets 12..14
    data = bytearray(newest.read_bytes())
    data[(second.position + second.end) // 2] ^= 0x10
    newest.write_bytes(bytes(data))
    with LogReader.open_up_to_damage(directory, config=CONFIG) as log:
        assert [e.offset for e in log.read(lte=11)][-1] == 11  # before the damage: no error
        with pytest.raises(LogCorruptionError):
            list(log.read(lte=12))  # reaches it
        with pytest.raises(LogCorruptionError):
            log.read_spans()
        assert log.end_offset == 12


def test_a_writer_open_removes_interrupted_writes_a_reader_leaves_them(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    build(directory, segments=1)
    leftover = directory / f"{segment_name(9)}.tmp"  # a roll killed before its rename
    leftover.write_bytes(b"half")
    with LogReader.open(directory, config=CONFIG):
        pass
    assert leftover.exists()
    with MetadataLog.open(directory, config=CONFIG):
        pass
    assert not leftover.exists()


def test_a_log_that_starts_past_zero_keeps_its_start(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    directory.mkdir()
    write_checkpoint(
        directory, Checkpoint(log_start_offset=50, recovery_point=50, newest_segment=50)
    )
    with MetadataLog.open(directory, config=CONFIG) as log:
        assert log.end_offset == 50
        assert log.append(batch("a", 2)) == (50, 51)
    assert read_checkpoint(directory) == Checkpoint(
        log_start_offset=50, recovery_point=52, newest_segment=50
    )
    with MetadataLog.open(directory, config=CONFIG) as log:
        assert log.append(batch("b", 1)) == (52, 52)


def test_an_empty_directory_opened_read_only_is_an_empty_log(tmp_path: Path) -> None:
    with LogReader.open(tmp_path, config=CONFIG) as log:
        assert log.end_offset == 0 and list(log.read()) == [] and log.segments() == []
        assert log.offset_for_time(0) is None


def test_a_roll_names_the_new_segment_in_the_checkpoints_and_leaks_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "log"
    now = [T0]
    fds = len(os.listdir("/proc/self/fd"))
    with (
        caplog.at_level(logging.INFO, logger="metadata_log"),
        MetadataLog.open(directory, config=CONFIG, clock_ms=lambda: now[0]) as log,
    ):
        log.append(batch("a", 2))
        for n in range(3):
            now[0] += CONFIG.segment_ms
            log.append(batch(f"r{n}", 1))
            assert read_checkpoint(directory) == Checkpoint(
                log_start_offset=0, recovery_point=2 + n, newest_segment=2 + n
            )
    assert len(os.listdir("/proc/self/fd")) == fds
    assert f"rolled to segment {segment_name(4)}" in warnings_of(caplog)


def test_a_rebuilt_index_is_saved_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "log"
    build(directory)
    index = (directory / segment_name(0)).with_suffix(".index")
    index.unlink()
    with (
        caplog.at_level(logging.INFO, logger="metadata_log"),
        MetadataLog.open(directory, config=CONFIG),
    ):
        assert index.exists()
    assert f"rebuilt the indexes of segment {directory / segment_name(0)}" in warnings_of(caplog)


def test_checkpoints_follow_appends_at_their_interval(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    with MetadataLog.open(directory, config=CONFIG) as log:  # every 60 s: not after one append
        log.append(batch("a", 2))
        assert read_checkpoint(directory) == Checkpoint(
            log_start_offset=0, recovery_point=0, newest_segment=0
        )
    often = LogConfig(segment_ms=1000, checkpoint_interval_ms=1)
    with MetadataLog.open(directory, config=often) as log:
        time.sleep(0.01)
        log.append(batch("b", 1))
        assert read_checkpoint(directory) == Checkpoint(
            log_start_offset=0, recovery_point=3, newest_segment=0
        )


def test_a_checkpoint_that_cannot_be_written_after_an_append_is_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "log"
    often = LogConfig(segment_ms=1000, checkpoint_interval_ms=1)
    log = MetadataLog.open(directory, config=often)

    def full_disk(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("metadata_log.storage.write_checkpoint", full_disk)
    with caplog.at_level(logging.WARNING, logger="metadata_log"):
        time.sleep(0.01)
        assert log.append(batch("a", 1)) == (0, 0)  # the block is durable all the same
        log.close()
    assert warnings_of(caplog) == [
        "could not write the log checkpoints: [Errno 28] No space left on device",
        "could not save the index or checkpoints: [Errno 28] No space left on device",
    ]
    monkeypatch.undo()
    with LogReader.open(directory, config=often) as reader:
        assert reader.end_offset == 1


def test_the_default_clock_is_the_wall_clock_in_milliseconds(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path / "log", config=CONFIG) as log:
        before = time.time_ns() // 1_000_000
        log.append(batch("now", 1))
        after = time.time_ns() // 1_000_000
        (entry,) = log.read()
    assert before <= entry.timestamp <= after


def test_what_an_append_refuses(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    with MetadataLog.open(directory, config=CONFIG) as log:
        with pytest.raises(RecordError, match="is not a metadata record"):
            log.append([config("a", 0), "text"])  # type: ignore[list-item]
        with pytest.raises(LogError, match="an append needs at least one batch"):
            log.append_batches([])
        bad: list[Record] = [TopicRecord(name=123, topic_id=Uuid.random())]  # type: ignore[arg-type]
        with pytest.raises(RecordError):
            log.append_batches([(batch("good", 2), "p"), (bad, "q")])
        assert log.end_offset == 0  # all or nothing
    reader = LogReader.open(directory, config=CONFIG)
    reader.close()
    assert not hasattr(reader, "append")  # a reader is a role without appends
    with pytest.raises(LogClosedError):
        reader.verify()
    closed = MetadataLog.open(directory, config=CONFIG)
    closed.close()
    with pytest.raises(LogClosedError):
        closed.append(batch("late", 1))


async def test_aclose_waits_for_appends_in_flight(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path / "log", config=CONFIG)
    tasks = [asyncio.ensure_future(log.append_async(batch(f"t{i}", 2))) for i in range(3)]
    await asyncio.sleep(0)  # the appends are queued, a flush is under way
    await log.aclose()
    assert all(t.done() for t in tasks)
    assert sorted(t.result()[0] for t in tasks) == [0, 2, 4]
    with LogReader.open(tmp_path / "log", config=CONFIG) as reader:
        assert reader.end_offset == 6


def test_a_failed_append_is_logged_as_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = MetadataLog.open(tmp_path / "log", config=CONFIG)

    def failing_disk(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("metadata_log.log.os.fdatasync", failing_disk)
    with caplog.at_level(logging.ERROR, logger="metadata_log"), pytest.raises(LogError):
        log.append(batch("a", 1))
    monkeypatch.undo()
    log.close()
    assert warnings_of(caplog) == [
        "append failed, the log stops accepting writes: [Errno 5] Input/output error"
    ]
