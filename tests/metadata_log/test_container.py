"""The container format's checks, one by one: every header and block-framing bound is exercised.

Each test damages exactly one thing a check looks at and expects that check's error, so
deleting any check of `metadata_log.container` fails a test here (issue #22).
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import cramjam
import pytest

from metadata_log.container import (
    HEADER_CRC_KEY,
    MAGIC,
    MAX_BLOCK_BODY,
    SYNC_SIZE,
    BlockDamage,
    TruncatedBlock,
    decode_header,
    encode_block,
    encode_header,
    read_block,
    snappy_length,
    write_all,
)
from records import DEFAULT_CODEC
from records.varint import encode_long

SYNC = bytes(range(16))
SCHEMA = DEFAULT_CODEC.entry_schema_json


def meta_entry(key: str, value: bytes) -> bytes:
    """One key/value pair of the header's metadata map, as Avro encodes it."""
    return encode_long(len(key)) + key.encode() + encode_long(len(value)) + value


def legacy_header(entries: list[tuple[str, bytes]], *, count: int | None = None) -> bytes:
    """A header without the CRC, as written before it existed (or as a test wants it)."""
    body = b"".join(meta_entry(k, v) for k, v in entries)
    n = len(entries) if count is None else count
    return MAGIC + encode_long(n) + body + encode_long(0) + SYNC


GOOD = [("avro.schema", SCHEMA.encode()), ("avro.codec", b"snappy"), ("mlog.base_offset", b"0")]


def block_bytes(count: int = 2, body: bytes = b"\x02\x00\x02\x00\x00" * 2) -> bytes:
    """A whole block with the test sync marker."""
    return encode_block(count, body) + SYNC


# ------------------------------------------------------------------------------------ header


def test_a_header_round_trips_with_its_crc() -> None:
    data = encode_header(SCHEMA, SYNC, {"mlog.base_offset": b"7"})
    header = decode_header(data + b"trailing blocks")
    assert header.size == len(data)
    assert header.sync == SYNC
    assert header.checksummed
    assert header.schema_json == SCHEMA
    assert header.metadata["mlog.base_offset"] == b"7"
    legacy = decode_header(legacy_header(GOOD))
    assert not legacy.checksummed
    assert legacy.previous_last_offset is None and legacy.previous_sync is None


def test_bad_magic() -> None:
    data = encode_header(SCHEMA, SYNC, {})
    with pytest.raises(BlockDamage, match="bad magic"):
        decode_header(b"Obj\x02" + data[4:])


@pytest.mark.parametrize("cut", [0, 3, 4, 5, 20, 9000, -17, -1])
def test_truncated_header(cut: int) -> None:
    data = encode_header(SCHEMA, SYNC, {})
    with pytest.raises(TruncatedBlock):
        decode_header(data[:cut] if cut >= 0 else data[: len(data) + cut])


def test_a_non_snappy_codec_is_refused() -> None:
    entries = [GOOD[0], ("avro.codec", b"deflate"), GOOD[2]]
    with pytest.raises(BlockDamage, match="not snappy"):
        decode_header(legacy_header(entries))
    with pytest.raises(BlockDamage, match="not snappy"):
        decode_header(legacy_header([GOOD[0], GOOD[2]]))  # no codec: Avro's "null"


@pytest.mark.parametrize("schema", [b"{not json", b"\xff\xfe", None])
def test_a_schema_that_is_not_json_or_missing_is_refused(schema: bytes | None) -> None:
    entries = [e for e in GOOD if e[0] != "avro.schema"]
    if schema is not None:
        entries.append(("avro.schema", schema))
    with pytest.raises(BlockDamage, match=r"no valid avro\.schema"):
        decode_header(legacy_header(entries))


def test_negative_lengths_in_the_header_are_refused() -> None:
    for what, entry in (
        ("key", encode_long(-3) + b"abc" + encode_long(1) + b"x"),
        ("value", encode_long(3) + b"abc" + encode_long(-1) + b"x"),
    ):
        data = MAGIC + encode_long(1) + entry + encode_long(0) + SYNC
        with pytest.raises(BlockDamage, match=f"negative {what} length"):
            decode_header(data)


def test_negative_map_counts_carry_a_block_size_which_must_fit() -> None:
    body = b"".join(meta_entry(k, v) for k, v in GOOD)
    good = MAGIC + encode_long(-3) + encode_long(len(body)) + body + encode_long(0) + SYNC
    assert decode_header(good).metadata["avro.codec"] == b"snappy"
    negative = MAGIC + encode_long(-3) + encode_long(-5) + body + encode_long(0) + SYNC
    with pytest.raises(BlockDamage, match="negative map block length"):
        decode_header(negative)


def test_counts_and_lengths_larger_than_the_buffer_never_size_anything() -> None:
    """A damaged count or length is checked against the bytes left, before it is used."""
    with pytest.raises(TruncatedBlock):
        decode_header(legacy_header(GOOD, count=1 << 60))
    huge_key = MAGIC + encode_long(1) + encode_long(1 << 40) + b"k"
    with pytest.raises(TruncatedBlock):
        decode_header(huge_key)
    overlong = MAGIC + b"\xff" * 11
    with pytest.raises(BlockDamage, match="longer than 10 bytes"):
        decode_header(overlong)


def test_a_duplicate_key_is_refused() -> None:
    with pytest.raises(BlockDamage, match="appears twice"):
        decode_header(legacy_header([*GOOD, ("avro.codec", b"snappy")]))


def test_the_crc_is_compared_as_written_so_a_flipped_case_bit_is_caught() -> None:
    data = encode_header(SCHEMA, bytes(16), {})
    crc_at = data.index(HEADER_CRC_KEY.encode()) + len(HEADER_CRC_KEY) + 1
    stored = data[crc_at : crc_at + 8]
    letters = [i for i, c in enumerate(stored) if chr(c) in "abcdef"]
    if not letters:  # a CRC of digits only: try another sync marker
        data = encode_header(SCHEMA, bytes(range(16)), {})
        stored = data[crc_at : crc_at + 8]
        letters = [i for i, c in enumerate(stored) if chr(c) in "abcdef"]
    assert letters
    upper = bytearray(data)
    upper[crc_at + letters[0]] ^= 0x20  # "a" -> "A": the same number
    with pytest.raises(BlockDamage, match="does not match"):
        decode_header(bytes(upper))


def test_every_byte_of_a_checksummed_header_is_covered_by_its_crc() -> None:
    data = encode_header(SCHEMA, SYNC, {"mlog.base_offset": b"0"})
    crc_at = data.index(HEADER_CRC_KEY.encode()) + len(HEADER_CRC_KEY) + 1
    for position in [*range(len(MAGIC), 60), *range(crc_at - 5, len(data))]:
        damaged = bytearray(data)
        damaged[position] ^= 0x04
        with pytest.raises((BlockDamage, TruncatedBlock)):
            decode_header(bytes(damaged))


def test_a_header_that_lost_its_crc_entry_is_not_taken_for_an_old_one() -> None:
    data = encode_header(SCHEMA, SYNC, {"mlog.base_offset": b"0", "mlog.previous_sync": b""})
    renamed = data.replace(HEADER_CRC_KEY.encode(), b"mlog.header_crc33")
    with pytest.raises(BlockDamage, match=r"but no mlog\.header_crc32"):
        decode_header(renamed)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("mlog.header_crc32", b"0123", "not 8"),
        ("mlog.header_crc32", b"zzzzzzzz", "does not match"),
    ],
)
def test_a_malformed_crc_value_is_refused(key: str, value: bytes, message: str) -> None:
    with pytest.raises(BlockDamage, match=message):
        decode_header(legacy_header([*GOOD, (key, value)]))


def test_chain_values_must_be_what_a_writer_puts_there() -> None:
    for extra, message in (
        ({"mlog.base_offset": b"12x"}, "not an integer"),
        ({"mlog.previous_last_offset": b"--"}, "not an integer"),
        ({"mlog.previous_sync": b"abcd"}, "not a sync marker"),
        ({"mlog.previous_sync": b"not hex at all!!"}, "not a sync marker"),
    ):
        with pytest.raises(BlockDamage, match=message):
            decode_header(encode_header(SCHEMA, SYNC, extra))
    header = decode_header(
        encode_header(
            SCHEMA,
            SYNC,
            {"mlog.previous_last_offset": b"41", "mlog.previous_sync": SYNC.hex().encode()},
        )
    )
    assert (header.previous_last_offset, header.previous_sync) == (41, SYNC)


# ------------------------------------------------------------------------------------ blocks


def test_a_block_round_trips() -> None:
    data = b"xx" + block_bytes()
    block = read_block(data, 2, SYNC, base=100)
    assert (block.position, block.end, block.count) == (102, 100 + len(data), 2)
    assert block.body == b"\x02\x00\x02\x00\x00" * 2


@pytest.mark.parametrize("count", [0, -1, -(1 << 40)])
def test_a_count_below_one_is_refused(count: int) -> None:
    data = block_bytes()
    damaged = encode_long(count) + data[1:]
    with pytest.raises(BlockDamage, match=f"claims {count} entries"):
        read_block(damaged, 0, SYNC)


@pytest.mark.parametrize("size", [-1, 0, 4, MAX_BLOCK_BODY + 1])
def test_sizes_out_of_bounds_are_refused(size: int) -> None:
    data = block_bytes()
    damaged = data[:1] + encode_long(size) + data[2:]
    with pytest.raises(BlockDamage, match=f"claims {size} bytes"):
        read_block(damaged, 0, SYNC)


def test_an_overlong_count_or_size_varint_is_damage_and_a_cut_one_is_truncation() -> None:
    with pytest.raises(BlockDamage, match="longer than 10 bytes"):
        read_block(b"\xff" * 12, 0, SYNC)
    with pytest.raises(TruncatedBlock):
        read_block(b"\x02\x80", 0, SYNC)


def test_truncated_data_says_where_the_block_would_end() -> None:
    data = block_bytes()
    for cut in range(2, len(data)):
        with pytest.raises(TruncatedBlock) as info:
            read_block(data[:cut], 0, SYNC)
        assert info.value.needed == len(data)


def test_a_wrong_sync_marker_is_refused() -> None:
    data = bytearray(block_bytes())
    data[-1] ^= 1
    with pytest.raises(BlockDamage, match="sync marker"):
        read_block(bytes(data), 0, SYNC)


def test_a_crc_mismatch_is_refused() -> None:
    data = bytearray(block_bytes())
    data[-SYNC_SIZE - 1] ^= 1
    with pytest.raises(BlockDamage, match="CRC32"):
        read_block(bytes(data), 0, SYNC)


def test_data_that_does_not_decompress_is_refused() -> None:
    body = b"\x02\x00\x02\x00\x00" * 2
    garbage = b"\x0a" + b"\xff" * 6  # declares 10 bytes, then an impossible copy
    framed = encode_long(2) + encode_long(len(garbage) + 4) + garbage
    data = framed + zlib.crc32(body).to_bytes(4, "big") + SYNC
    with pytest.raises(BlockDamage, match="does not decompress"):
        read_block(data, 0, SYNC)


def test_a_snappy_preamble_claiming_more_than_the_data_can_hold_is_refused_before_allocating() -> (
    None
):
    """cramjam allocates the declared length first, and aborts the process when it cannot."""
    compressed = bytes(cramjam.snappy.compress_raw(b"abc" * 100))
    for declared in (0xFFFFFFFF, 23 * len(compressed), MAX_BLOCK_BODY + 1):
        preamble = bytearray()
        n = declared
        while n >= 0x80:
            preamble.append(n & 0x7F | 0x80)
            n >>= 7
        preamble.append(n)
        with pytest.raises(BlockDamage, match="which it cannot"):
            snappy_length(bytes(preamble) + compressed[2:])
    with pytest.raises(BlockDamage, match="no valid length preamble"):
        snappy_length(b"\x80\x80\x80\x80\x80\x01")
    with pytest.raises(BlockDamage, match="no valid length preamble"):
        snappy_length(b"")
    assert snappy_length(compressed) == 300


def test_more_entries_than_body_bytes_is_refused() -> None:
    data = block_bytes(count=2)
    damaged = encode_long(11) + data[1:]
    with pytest.raises(BlockDamage, match="claims 11 entries in a body of 10 bytes"):
        read_block(damaged, 0, SYNC)


# ------------------------------------------------------------------------------------ writes


def test_write_all_finishes_short_writes_and_refuses_no_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = os.write
    calls: list[int] = []

    def short_write(fd: int, data: bytes | memoryview) -> int:
        calls.append(len(data))
        return real_write(fd, bytes(data)[:3])

    path = tmp_path / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        monkeypatch.setattr(os, "write", short_write)
        write_all(fd, b"0123456789")
        monkeypatch.setattr(os, "write", lambda fd, data: 0)
        with pytest.raises(OSError, match="made no progress"):
            write_all(fd, b"more")
    finally:
        monkeypatch.undo()
        os.close(fd)
    assert path.read_bytes() == b"0123456789"
    assert calls == [10, 7, 4, 1]


def test_a_one_byte_snappy_stream_with_a_continued_preamble_is_damage() -> None:
    framed = encode_long(1) + encode_long(1 + 4) + b"\x80" + bytes(4) + SYNC
    with pytest.raises(BlockDamage, match="no valid length preamble"):
        read_block(framed, 0, SYNC)


def test_a_bad_chain_value_is_quoted_up_to_40_bytes() -> None:
    with pytest.raises(BlockDamage) as info:
        decode_header(encode_header(SCHEMA, SYNC, {"mlog.base_offset": b"x" * 100}))
    assert str(info.value).endswith(f"({b'x' * 40!r})")
