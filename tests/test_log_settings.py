"""The log's settings, its persisted leader epoch, and the errors it reports."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from metadata_log.config import MIN_SEGMENT_BYTES, LogConfig
from metadata_log.epoch import EPOCH_NAME, bump_epoch, read_epoch
from metadata_log.errors import LogConfigError, LogCorruptionError, LogError, LogLockedError
from metadata_log.lock import LOCK_NAME, DirectoryLock


def test_kafkas_defaults() -> None:
    config = LogConfig()
    assert config.segment_bytes == 64 * 1024 * 1024
    assert config.segment_ms == 7 * 24 * 60 * 60 * 1000
    assert config.index_interval_bytes == 4096
    assert config.checkpoint_interval_ms == 60_000
    assert MIN_SEGMENT_BYTES == 4096


def test_each_setting_takes_its_smallest_value() -> None:
    config = LogConfig(
        segment_bytes=MIN_SEGMENT_BYTES,
        segment_ms=1,
        index_interval_bytes=0,
        checkpoint_interval_ms=1,
    )
    assert (config.segment_bytes, config.segment_ms) == (MIN_SEGMENT_BYTES, 1)


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("segment_bytes", MIN_SEGMENT_BYTES - 1, "segment.bytes must be at least 4096, got 4095"),
        ("segment_ms", 0, "segment.ms must be at least 1, got 0"),
        (
            "checkpoint_interval_ms",
            0,
            "log.flush.offset.checkpoint.interval.ms must be at least 1, got 0",
        ),
        ("index_interval_bytes", -1, "index.interval.bytes must be 0 or more, got -1"),
    ],
)
def test_a_setting_below_its_range_is_refused(setting: str, value: int, message: str) -> None:
    with pytest.raises(LogConfigError) as info:
        LogConfig(**{setting: value})
    assert str(info.value) == message
    assert isinstance(info.value, LogError)


def test_the_epoch_starts_at_zero_and_each_bump_persists_the_next(tmp_path: Path) -> None:
    assert read_epoch(tmp_path) == 0
    assert bump_epoch(tmp_path) == 1
    assert read_epoch(tmp_path) == 1
    assert (tmp_path / EPOCH_NAME).read_text() == "1\n"
    assert bump_epoch(tmp_path) == 2
    assert bump_epoch(tmp_path, at_least=10) == 11
    assert bump_epoch(tmp_path, at_least=3) == 12
    assert read_epoch(tmp_path) == 12
    assert not (tmp_path / (EPOCH_NAME + ".tmp")).exists()


def test_the_epoch_never_overflows_the_int32_field(tmp_path: Path) -> None:
    assert bump_epoch(tmp_path, at_least=2**31 - 2) == 2**31 - 1
    with pytest.raises(LogError, match="overflow the int32"):
        bump_epoch(tmp_path)
    assert read_epoch(tmp_path) == 2**31 - 1


@pytest.mark.parametrize("text", ["", "-1", "x", "1.5", "0x10"])
def test_a_damaged_epoch_file_says_how_to_repair_it(tmp_path: Path, text: str) -> None:
    (tmp_path / EPOCH_NAME).write_text(text)
    with pytest.raises(LogError, match="should hold a non-negative integer") as info:
        read_epoch(tmp_path)
    assert "mlog log dump" in str(info.value)
    with pytest.raises(LogError):
        bump_epoch(tmp_path)


def test_a_long_damaged_epoch_file_is_quoted_by_its_first_40_characters(tmp_path: Path) -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(100))
    (tmp_path / EPOCH_NAME).write_text(text)
    with pytest.raises(LogError) as info:
        read_epoch(tmp_path)
    assert f"found {text[:40]!r};" in str(info.value)


def test_an_epoch_that_cannot_be_written_is_one_line_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / (EPOCH_NAME + ".tmp")).mkdir()  # open() for writing fails: a directory
    with pytest.raises(LogError, match="cannot write the leader epoch to") as info:
        bump_epoch(tmp_path)
    assert "Is a directory [EISDIR]; free space or fix the disk" in str(info.value)
    assert read_epoch(tmp_path) == 0


def test_corruption_names_the_file_byte_offset_and_repair() -> None:
    error = LogCorruptionError(Path("d/00000000000000000010.avro"), 77, "bad CRC", first_offset=12)
    assert str(error) == (
        "log segment d/00000000000000000010.avro is damaged at byte 77: bad CRC; offsets from 12 "
        "on are affected. Run `mlog log verify` for a full report; restore it from a replica or "
        "backup, or cut the log before the damage with `mlog log truncate --after-offset 11` "
        "(the removed bytes are kept in the log's quarantine/ directory)"
    )
    assert (error.position, error.first_offset, error.repairable) == (77, 12, True)
    whole = LogCorruptionError(Path("d/index.json"), -1, "missing")
    assert str(whole).startswith("log file d/index.json is not as expected: missing. ")
    assert "`mlog log verify` shows N" in str(whole)
    at_zero = LogCorruptionError(Path("d/0.avro"), 0, "bad magic")
    assert "d/0.avro is damaged at byte 0: bad magic." in str(at_zero)
    lost = LogCorruptionError(Path("d/0.avro"), 0, "gone", first_offset=0, repairable=False)
    assert str(lost).endswith("restore it from a replica or backup")


def test_a_locked_log_says_who_holds_it() -> None:
    error = LogLockedError(Path("d"), "pid 42")
    assert error.holder == "pid 42" and error.directory == Path("d")
    assert str(error).startswith("log directory d is already open for writing by pid 42;")


def test_the_directory_lock_names_its_holder_and_is_released(tmp_path: Path) -> None:
    first = DirectoryLock(tmp_path)
    first.acquire()
    text = (tmp_path / LOCK_NAME).read_text()
    assert text == f"pid {os.getpid()} on {os.uname().nodename}\n"
    second = DirectoryLock(tmp_path)
    with pytest.raises(LogLockedError) as info:  # flock is per open file: refused in-process too
        second.acquire()
    assert info.value.holder == text.strip()
    first.release()
    first.release()  # twice is harmless
    second.acquire()
    second.release()


def test_a_lock_file_left_empty_names_another_process(tmp_path: Path) -> None:
    (tmp_path / LOCK_NAME).write_text("")
    fd = os.open(tmp_path / LOCK_NAME, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(LogLockedError) as info:
            DirectoryLock(tmp_path).acquire()
        assert info.value.holder == "another process"
    finally:
        os.close(fd)
    (tmp_path / LOCK_NAME).write_text("x" * 300)
    lock = DirectoryLock(tmp_path)
    lock.acquire()  # a stale, longer holder text is replaced whole
    assert (tmp_path / LOCK_NAME).read_text() == f"pid {os.getpid()} on {os.uname().nodename}\n"
    lock.release()


def test_a_long_holder_text_is_quoted_by_its_first_256_bytes(tmp_path: Path) -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(300))
    (tmp_path / LOCK_NAME).write_text(text)
    fd = os.open(tmp_path / LOCK_NAME, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(LogLockedError) as info:
            DirectoryLock(tmp_path).acquire()
        assert info.value.holder == text[:256]
    finally:
        os.close(fd)


def test_a_refused_lock_leaks_no_descriptor(tmp_path: Path) -> None:
    holder = DirectoryLock(tmp_path)
    holder.acquire()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        with pytest.raises(LogLockedError):
            DirectoryLock(tmp_path).acquire()
    assert len(os.listdir("/proc/self/fd")) == before
    holder.release()
