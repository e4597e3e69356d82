"""The checkpoints file: its exact text, and every way it can be refused as damaged."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import pytest

from metadata_log.checkpoint import (
    CHECKPOINT_NAME,
    Checkpoint,
    CheckpointDamage,
    checkpoint_path,
    read_checkpoint,
    write_checkpoint,
)

POINT = Checkpoint(log_start_offset=3, recovery_point=1234, newest_segment=1200)


def _with_crc(text: str) -> bytes:
    return f"{text}crc32 {zlib.crc32(text.encode()):08x}\n".encode()


def test_the_file_is_the_documented_text() -> None:
    body = "mlog-checkpoints 1\nlog_start_offset 3\nrecovery_point 1234\nnewest_segment 1200\n"
    assert POINT.encode() == _with_crc(body)
    assert Checkpoint.decode(POINT.encode()) == POINT


def test_write_then_read(tmp_path: Path) -> None:
    assert checkpoint_path(tmp_path) == tmp_path / CHECKPOINT_NAME == tmp_path / "checkpoints"
    assert read_checkpoint(tmp_path) is None
    write_checkpoint(tmp_path, POINT)
    assert read_checkpoint(tmp_path) == POINT
    later = Checkpoint(log_start_offset=0, recovery_point=9, newest_segment=9)
    write_checkpoint(tmp_path, later, sync_directory=True)
    assert read_checkpoint(tmp_path) == later
    assert not (tmp_path / "checkpoints.tmp").exists()
    assert (tmp_path / "checkpoints").read_bytes() == later.encode()


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "it has no crc32 line"),
        (b"mlog-checkpoints 1\n", "it has no crc32 line"),
        (b"mlog-checkpoints 1\nnot a crc\n", "it has no crc32 line"),
        (b"mlog-checkpoints 1\ncrc32 xyz\n", "its crc32 line is not hexadecimal"),
        (POINT.encode().replace(b"1234", b"1235"), "its CRC32 does not match its lines"),
        (_with_crc("mlog-checkpoints 2\n"), "its first line is 'mlog-checkpoints 2'"),
        (
            _with_crc("mlog-checkpoints 1\nlog_start_offset 0\nrecovery_point 1\n"),
            "it lacks newest_segment",
        ),
        (_with_crc("mlog-checkpoints 1\n"), "it lacks log_start_offset, newest_segment, recovery"),
        (
            _with_crc("mlog-checkpoints 1\nlog_start_offset 0\nlog_start_offset 0\n"),
            "it has an unexpected line 'log_start_offset 0'",
        ),
        (
            _with_crc("mlog-checkpoints 1\nlog_start_offset -1\n"),
            "it has an unexpected line 'log_start_offset -1'",
        ),
        (_with_crc("mlog-checkpoints 1\ncolour 1\n"), "it has an unexpected line 'colour 1'"),
        # Long lines are quoted by their first 40 (magic) or 60 characters.
        (
            _with_crc("x" * 30 + "y" * 30 + "\n"),
            "its first line is '" + "x" * 30 + "y" * 10 + "', not",
        ),
        (
            _with_crc("mlog-checkpoints 1\ncolour " + "9" * 80 + "\n"),
            "it has an unexpected line 'colour " + "9" * 53 + "'",
        ),
        (
            _with_crc("mlog-checkpoints 1\nrecovery_point\n"),
            "it has an unexpected line 'recovery_point'",
        ),
    ],
)
def test_damage_is_refused_saying_why(data: bytes, reason: str) -> None:
    with pytest.raises(CheckpointDamage) as info:
        Checkpoint.decode(data)
    assert str(info.value).startswith(reason)


def test_every_flipped_bit_is_refused() -> None:
    good = POINT.encode()
    for i in range(len(good) * 8):
        flipped = bytearray(good)
        flipped[i // 8] ^= 1 << (i % 8)
        try:
            decoded = Checkpoint.decode(bytes(flipped))
        except CheckpointDamage:
            continue
        # Only a flip the CRC line's letters absorb (a hex digit's case) may still decode.
        assert decoded == POINT, i


def test_a_file_larger_than_4_kib_is_refused_unread(tmp_path: Path) -> None:
    (tmp_path / "checkpoints").write_bytes(POINT.encode().ljust(4096, b"\n"))
    assert read_checkpoint(tmp_path) == POINT
    (tmp_path / "checkpoints").write_bytes(POINT.encode().ljust(4097, b"\n"))
    with pytest.raises(CheckpointDamage, match="it is larger than 4096 bytes"):
        read_checkpoint(tmp_path)


def test_writing_checkpoints_leaks_no_descriptor(tmp_path: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    for i in range(20):
        write_checkpoint(tmp_path, POINT, sync_directory=i % 2 == 0)
    assert len(os.listdir("/proc/self/fd")) == before
