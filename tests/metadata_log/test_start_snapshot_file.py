"""The `log-start-snapshot` file's own checks: what `StartSnapshot.decode` refuses, and why.

`tests/metadata_log/test_log_start_snapshot.py` writes and reads the file through the log; these
pin each refusal by its message, so a check that stops refusing (or refuses for another reason)
shows.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from metadata_log.start_snapshot import (
    START_SNAPSHOT_NAME,
    StartSnapshot,
    StartSnapshotDamage,
    read_start_snapshot,
    write_start_snapshot,
)

MAGIC = "mlog-log-start-snapshot 1"
SNAP = StartSnapshot(offset=12, epoch=3, timestamp=1_700_000_000_000, checksum="ab" * 32)


def framed(*lines: str) -> bytes:
    """`lines` with a correct crc32 line: only the check under test can refuse them."""
    text = "\n".join(lines) + "\n"
    return f"{text}crc32 {zlib.crc32(text.encode()):08x}\n".encode()


def test_a_snapshot_reads_back_from_its_encoding() -> None:
    assert StartSnapshot.decode(SNAP.encode()) == SNAP
    assert framed(
        MAGIC, "offset 12", "epoch 3", "timestamp 1700000000000", "checksum " + "ab" * 32
    ) == (SNAP.encode())


@pytest.mark.parametrize(
    "data",
    [
        b"",
        f"{MAGIC}\noffset 12\n".encode(),  # a newline, but the last line is no crc32
        b"crc32 00000000",  # no newline at all
    ],
)
def test_a_file_without_a_crc32_line_says_so(data: bytes) -> None:
    with pytest.raises(StartSnapshotDamage, match="no crc32 line"):
        StartSnapshot.decode(data)


def test_a_changed_byte_fails_the_crc32() -> None:
    data = bytearray(SNAP.encode())
    data[len(MAGIC) + 8] ^= 1  # a digit of the offset
    with pytest.raises(StartSnapshotDamage, match="CRC32 does not match"):
        StartSnapshot.decode(bytes(data))


def test_another_first_line_is_quoted_up_to_40_characters() -> None:
    first = "x" * 39 + "yz"
    data = framed(first, "offset 12", "epoch 3", "timestamp 1", "checksum ab")
    with pytest.raises(StartSnapshotDamage) as caught:
        StartSnapshot.decode(data)
    assert str(caught.value) == f"its first line is {'x' * 39 + 'y'!r}, not {MAGIC!r}"


@pytest.mark.parametrize(
    "lines",
    [
        ("offset 12", "epoch 3", "timestamp 1"),  # no checksum
        ("offset 12", "epoch 3", "timestamp 1", "checksum ab", "extra 1"),  # one too many
        ("offset 12", "epoch x3", "timestamp 1", "checksum ab"),  # every name, a bad value
        ("offset -12", "epoch 3", "timestamp 1", "checksum ab"),  # negative: not digits
    ],
)
def test_lines_other_than_the_four_fields_are_refused(lines: tuple[str, ...]) -> None:
    with pytest.raises(StartSnapshotDamage, match="its lines are not offset, epoch, timestamp"):
        StartSnapshot.decode(framed(MAGIC, *lines))


def snapshot_of_size(size: int) -> bytes:
    """A valid file of exactly `size` bytes (the checksum field pads it)."""
    base = len(StartSnapshot(offset=1, epoch=1, timestamp=1, checksum="").encode())
    data = StartSnapshot(offset=1, epoch=1, timestamp=1, checksum="c" * (size - base)).encode()
    assert len(data) == size
    return data


def test_a_file_of_4096_bytes_is_read_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    path = tmp_path / START_SNAPSHOT_NAME
    path.write_bytes(snapshot_of_size(4096))
    snapshot = read_start_snapshot(tmp_path)
    assert snapshot is not None and len(snapshot.checksum) > 4000
    path.write_bytes(snapshot_of_size(4097))
    with pytest.raises(StartSnapshotDamage, match="larger than 4096 bytes"):
        read_start_snapshot(tmp_path)


def test_no_file_is_no_snapshot_and_a_written_one_reads_back(tmp_path: Path) -> None:
    assert read_start_snapshot(tmp_path) is None
    write_start_snapshot(tmp_path, SNAP)
    assert read_start_snapshot(tmp_path) == SNAP
    assert (tmp_path / START_SNAPSHOT_NAME).read_bytes() == SNAP.encode()
