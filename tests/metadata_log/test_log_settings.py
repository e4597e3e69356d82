"""The log's settings, its persisted leader epoch, and the errors it reports."""

from __future__ import annotations

import fcntl
import os
import re
from pathlib import Path

import pytest

from metadata_log.config import MIN_SEGMENT_BYTES, LogConfig
from metadata_log.epoch import (
    EPOCH_CHECKPOINT_NAME,
    EPOCH_NAME,
    EpochCheckpointDamage,
    bump_epoch,
    decode_epoch_checkpoint,
    encode_epoch_checkpoint,
    read_epoch,
    read_epoch_checkpoint,
)
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


def test_the_epoch_cache_is_kafkas_text_format_both_ways(tmp_path: Path) -> None:
    epochs = [(1, 0), (3, 120), (9_999_999_999_999_999_999, 9_999_999_999_999_999_999)]
    data = encode_epoch_checkpoint(epochs)
    assert data == b"0\n3\n1 0\n3 120\n9999999999999999999 9999999999999999999\n"
    assert decode_epoch_checkpoint(data) == epochs
    assert decode_epoch_checkpoint(b"0\n0\n") == []
    # Without the final newline, or with leading zeros, it says the same.
    assert decode_epoch_checkpoint(b"0\n2\n1 0\n3 120") == epochs[:2]
    assert decode_epoch_checkpoint(b"0\n01\n0001 0\n") == [(1, 0)]
    assert read_epoch_checkpoint(tmp_path) is None
    (tmp_path / EPOCH_CHECKPOINT_NAME).write_bytes(data)
    assert read_epoch_checkpoint(tmp_path) == epochs


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "its version line is '', not '0'"),
        (b"\n", "its version line is '', not '0'"),
        (b"1\n0\n", "its version line is '1', not '0'"),
        (b"\xff\n0\n", "it is not ASCII text"),
        (b"x" * 50 + b"\n0\n", f"its version line is {'x' * 40!r}, not '0'"),
        (b"0\n", "its second line is not a count"),
        (b"0", "its second line is not a count"),
        (b"0\nx\n", "its second line is not a count"),
        (b"0\n-1\n", "its second line is not a count"),
        (b"0\n" + b"1" * 20 + b"\n", "its second line is not a count"),
        (b"0\n2\n1 0\n", "it announces 2 lines but holds 1"),
        (b"0\n0\n1 0\n", "it announces 0 lines but holds 1"),
        (b"0\n1\n1 0\n\n", "it announces 1 lines but holds 2"),
        (b"0\n1\n10\n", "it has a line '10', not 'epoch offset'"),
        (b"0\n1\n1 \n", "it has a line '1 ', not 'epoch offset'"),
        (b"0\n1\n 0\n", "it has a line ' 0', not 'epoch offset'"),
        (b"0\n1\n1 -2\n", "it has a line '1 -2', not 'epoch offset'"),
        (b"0\n1\n1 0 \n", "it has a line '1 0 ', not 'epoch offset'"),
        (b"0\n1\n1 " + b"2" * 20 + b"\n", "it has a line '1 " + "2" * 20 + "', not"),
        (b"0\n1\n1 " + b"7" * 70 + b"\n", f"it has a line {'1 ' + '7' * 58!r}, not"),
        (b"0\n2\n1 0\n1 5\n", "its epochs or offsets do not increase ((1, 0) then (1, 5))"),
        (b"0\n2\n1 5\n2 5\n", "its epochs or offsets do not increase ((1, 5) then (2, 5))"),
        (b"0\n2\n2 0\n1 5\n", "its epochs or offsets do not increase ((2, 0) then (1, 5))"),
        (b"0\n2\n1 5\n2 4\n", "its epochs or offsets do not increase ((1, 5) then (2, 4))"),
    ],
)
def test_a_damaged_epoch_cache_says_why(tmp_path: Path, data: bytes, message: str) -> None:
    with pytest.raises(EpochCheckpointDamage) as caught:
        decode_epoch_checkpoint(data)
    assert str(caught.value).startswith(message)
    (tmp_path / EPOCH_CHECKPOINT_NAME).write_bytes(data)
    with pytest.raises(EpochCheckpointDamage, match="^" + re.escape(message)):
        read_epoch_checkpoint(tmp_path)


def test_an_epoch_cache_over_64_mib_is_damage_without_parsing_it(tmp_path: Path) -> None:
    """The bound is 64 MiB: a file of exactly that size is parsed, one byte more is not."""
    path = tmp_path / EPOCH_CHECKPOINT_NAME
    path.write_bytes(b"y" * (64 << 20))
    with pytest.raises(EpochCheckpointDamage, match=f"^its version line is {'y' * 40!r}"):
        read_epoch_checkpoint(tmp_path)
    with open(path, "ab") as f:
        f.write(b"y")
    with pytest.raises(EpochCheckpointDamage, match=r"^it is larger than 67108864 bytes$"):
        read_epoch_checkpoint(tmp_path)


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
