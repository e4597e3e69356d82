"""Block and header framing at each bound: the smallest and largest accepted, one past refused."""

from __future__ import annotations

import errno
import os
import struct
import zlib
from pathlib import Path

import cramjam
import pytest

from metadata_log import container
from metadata_log.container import (
    MAGIC,
    MAX_BLOCK_BODY,
    MAX_HEADER_BYTES,
    MIN_BLOCK_BYTES,
    SNAPPY_MAX_RATIO,
    SYNC_SIZE,
    BlockDamage,
    Header,
    TruncatedBlock,
    block_frame,
    decode_header,
    encode_block,
    read_block,
    snappy_length,
    write_all,
)
from records.varint import encode_long

SYNC = bytes(range(16))


def _framed(count: int, compressed: bytes, body_for_crc: bytes) -> bytes:
    crc = struct.pack(">I", zlib.crc32(body_for_crc))
    return encode_long(count) + encode_long(len(compressed) + 4) + compressed + crc + SYNC


def test_the_documented_bounds() -> None:
    assert MIN_BLOCK_BYTES == 1 + 1 + 1 + 4 + SYNC_SIZE == 23
    assert MAX_BLOCK_BODY == 1 << 30
    assert MAX_HEADER_BYTES == 1 << 20
    assert SNAPPY_MAX_RATIO == 22


def test_block_frame_reads_count_and_size_and_refuses_impossible_ones() -> None:
    smallest = encode_long(1) + encode_long(5) + bytes(5) + SYNC
    assert len(smallest) == MIN_BLOCK_BYTES
    assert block_frame(smallest, 0) == (1, 2, MIN_BLOCK_BYTES)
    assert block_frame(b"xx" + smallest, 2) == (1, 4, 2 + MIN_BLOCK_BYTES)
    biggest = encode_long(7) + encode_long(MAX_BLOCK_BODY)
    assert block_frame(biggest, 0) == (7, len(biggest), len(biggest) + MAX_BLOCK_BODY + SYNC_SIZE)
    for count in (0, -1):
        with pytest.raises(BlockDamage, match=f"block claims {count} entries"):
            block_frame(encode_long(count) + encode_long(5), 0)
    for size in (4, 0, -5, MAX_BLOCK_BODY + 1):
        with pytest.raises(BlockDamage, match=f"block claims {size} bytes"):
            block_frame(encode_long(1) + encode_long(size), 0)
    with pytest.raises(TruncatedBlock):
        block_frame(encode_long(1), 0)
    with pytest.raises(BlockDamage):
        block_frame(b"\x80" * 11, 0)


@pytest.mark.parametrize("length", [0, 1, 127, 128, 200, 16_383, 16_384, 20_000, 3_000_000])
def test_blocks_of_every_preamble_length_read_back(length: int) -> None:
    body = os.urandom(length // 2) + bytes(length - length // 2)
    count = max(1, min(length, 5))
    if length == 0:
        with pytest.raises(BlockDamage, match="claims 1 entries in a body of 0 bytes"):
            read_block(encode_block(1, b"") + SYNC, 0, SYNC)
        return
    data = b"\x01\x02" + encode_block(count, body) + SYNC
    block = read_block(data, 2, SYNC, base=100)
    assert (block.count, block.body, block.position, block.end) == (
        count,
        body,
        102,
        100 + len(data),
    )
    assert read_block(data, 2, SYNC).position == 2  # base defaults to the buffer's start
    compressed = bytes(cramjam.snappy.compress_raw(body))
    assert snappy_length(compressed) == length


def test_as_many_entries_as_body_bytes_is_the_most_a_block_may_claim() -> None:
    body = b"\x00" * 10
    assert read_block(encode_block(10, body) + SYNC, 0, SYNC).count == 10
    with pytest.raises(BlockDamage, match="claims 11 entries in a body of 10 bytes"):
        read_block(encode_block(11, body) + SYNC, 0, SYNC)


@pytest.mark.parametrize("preamble_bytes", [1, 2, 3])
def test_a_preamble_claiming_more_than_snappy_can_expand_is_refused(preamble_bytes: int) -> None:
    """Whatever the preamble's length, a claim above 22 bytes per compressed byte is damage."""
    tail = b"\x00" * {1: 4, 2: 30, 3: 800}[preamble_bytes]
    for claim, ok in ((None, True), (1, False)):
        size = len(tail) + preamble_bytes
        length = SNAPPY_MAX_RATIO * size if claim is None else SNAPPY_MAX_RATIO * size + claim
        preamble = _varint(length)
        assert len(preamble) == preamble_bytes
        data = _framed(1, preamble + tail, b"x")
        if ok:
            # The claim is possible: the data then fails to decompress or its CRC, not its claim.
            with pytest.raises(BlockDamage) as info:
                read_block(data, 0, SYNC)
            assert "cannot" not in str(info.value)
            assert snappy_length(preamble + tail) == length
        else:
            with pytest.raises(BlockDamage, match="which it cannot"):
                read_block(data, 0, SYNC)
            with pytest.raises(BlockDamage, match="which it cannot"):
                snappy_length(preamble + tail)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def test_snappy_length_refuses_a_missing_preamble_or_an_impossible_length() -> None:
    with pytest.raises(BlockDamage, match="no valid length preamble"):
        snappy_length(b"\x80" * 5)
    with pytest.raises(BlockDamage, match="no valid length preamble"):
        snappy_length(b"")
    assert snappy_length(b"\x80\x80\x80\x80\x01" + bytes(2**28 // 22 + 1)) == 2**28
    big = _varint(MAX_BLOCK_BODY + 1)
    with pytest.raises(BlockDamage, match="which it cannot"):
        snappy_length(big + bytes(MAX_BLOCK_BODY // 22 + 1))


def test_read_block_refuses_bad_counts_and_sizes() -> None:
    good = encode_block(1, b"abc")
    for count in (0, -3):
        data = encode_long(count) + good[1:] + SYNC
        with pytest.raises(BlockDamage, match=f"block claims {count} entries"):
            read_block(data, 0, SYNC)
    for size in (4, MAX_BLOCK_BODY + 1):
        with pytest.raises(BlockDamage, match=f"block claims {size} bytes"):
            read_block(encode_long(1) + encode_long(size) + bytes(40), 0, SYNC)
    with pytest.raises(TruncatedBlock) as info:
        read_block(good + SYNC[:-1], 0, SYNC)
    assert info.value.needed == len(good) + SYNC_SIZE
    assert str(info.value) == "block data"


def test_truncated_block_says_what_and_where_it_ends() -> None:
    error = TruncatedBlock("header")
    assert str(error) == "header" and error.needed is None


def test_a_header_reads_whole_only() -> None:
    header = container.encode_header('"string"', SYNC, {})
    parsed = decode_header(header)
    assert parsed.size == len(header) and parsed.checksummed
    for cut in (0, 1, len(MAGIC) - 1, len(MAGIC), len(header) - 1):
        with pytest.raises(TruncatedBlock):
            decode_header(header[:cut])
    plain = Header(schema_json='"string"', sync=SYNC, size=10, metadata={})
    assert plain.checksummed is False
    assert plain.previous_last_offset is None and plain.previous_sync is None


def test_a_metadata_block_with_a_byte_count_reads_like_one_without() -> None:
    """Avro lets a map block give a negative count and its byte size: the size is skipped."""
    entries = b"".join(
        encode_long(len(k)) + k + encode_long(len(v)) + v
        for k, v in ((b"avro.schema", b'"string"'), (b"avro.codec", b"snappy"))
    )
    header = MAGIC + encode_long(-2) + encode_long(len(entries)) + entries + encode_long(0) + SYNC
    parsed = decode_header(header)
    assert parsed.schema_json == '"string"' and parsed.size == len(header)
    assert parsed.metadata["avro.codec"] == b"snappy"
    # A count larger than the bytes left could hold (two per entry) is a header cut short.
    too_many = MAGIC + encode_long(len(entries) // 2 + 1) + entries + encode_long(0) + SYNC
    with pytest.raises(TruncatedBlock):
        decode_header(too_many[: len(MAGIC) + 1 + len(entries)])
    with pytest.raises(BlockDamage, match="bad header: variable-length integer longer"):
        decode_header(MAGIC + encode_long(1) + b"\x80" * 11 + bytes(40))
    with pytest.raises(BlockDamage, match="negative key length"):
        decode_header(MAGIC + encode_long(1) + encode_long(-1) + bytes(40))
    exact = MAGIC + encode_long(1) + encode_long(3) + b"abc"  # the value length is missing
    with pytest.raises(TruncatedBlock):
        decode_header(exact)
    with pytest.raises(TruncatedBlock):
        decode_header(MAGIC + encode_long(1) + encode_long(4) + b"abc")


def test_write_all_retries_short_writes_and_refuses_no_progress(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real_write = os.write
    calls: list[int] = []

    def two_bytes_at_a_time(fd: int, data: memoryview) -> int:
        calls.append(len(data))
        return real_write(fd, bytes(data[:2]))

    path = tmp_path / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        monkeypatch.setattr(os, "write", two_bytes_at_a_time)
        write_all(fd, b"abcde")
        monkeypatch.setattr(os, "write", lambda fd, data: 0)
        with pytest.raises(OSError) as info:
            write_all(fd, b"x")
        assert info.value.errno == errno.ENOSPC
    finally:
        monkeypatch.undo()
        os.close(fd)
    assert path.read_bytes() == b"abcde" and calls == [5, 3, 1]


def test_fsync_directory_syncs_the_directory_and_leaks_no_descriptor(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    before = len(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(os, "fsync", spy)
    for _ in range(20):
        container.fsync_directory(tmp_path)
    monkeypatch.undo()
    assert len(synced) == 20
    assert len(os.listdir("/proc/self/fd")) == before
