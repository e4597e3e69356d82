"""Sparse segment indexes: floor lookups, and index files trusted only when whole and sorted."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metadata_log.index import OFFSET_MAGIC, TIME_MAGIC, IndexFooter, SparseIndex

FOOTER = IndexFooter(covered_bytes=4096, next_offset=77, max_timestamp=1_700_000_000_000)


def _index(pairs: list[tuple[int, int]]) -> SparseIndex:
    index = SparseIndex()
    for key, value in pairs:
        index.add(key, value)
    return index


def test_floor_entry_and_last_below() -> None:
    index = _index([(10, 100), (20, 200), (20, 250), (30, 300)])
    assert len(index) == 4
    assert index.floor_entry(9) is None
    assert index.floor_entry(10) == (10, 100)
    assert index.floor_entry(19) == (10, 100)
    assert index.floor_entry(20) == (20, 250)  # the last of equal keys
    assert index.floor_entry(10**9) == (30, 300)
    assert index.last_below(10) is None
    assert index.last_below(11) == 100
    assert index.last_below(20) == 100  # strictly below
    assert index.last_below(21) == 250
    assert SparseIndex().floor_entry(5) is None and SparseIndex().last_below(5) is None


@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=30), st.integers(-(2**63), 2**63 - 1))
def test_lookups_match_a_scan(keys: list[int], probe: int) -> None:
    keys.sort()
    index = _index([(k, i) for i, k in enumerate(keys)])
    at_or_below = [(k, i) for i, k in enumerate(keys) if k <= probe]
    assert index.floor_entry(probe) == (at_or_below[-1] if at_or_below else None)
    below = [i for i, k in enumerate(keys) if k < probe]
    assert index.last_below(probe) == (below[-1] if below else None)


@pytest.mark.parametrize("magic", [OFFSET_MAGIC, TIME_MAGIC])
def test_an_index_round_trips_through_its_file(tmp_path: Path, magic: bytes) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = _index([(0, 100), (5, 900), (9, -1)])
    index.save(path, magic, FOOTER)
    assert not path.with_name(path.name + ".tmp").exists()
    data = path.read_bytes()
    assert data.startswith(magic)
    assert len(data) == len(magic) + 3 * 16 + 28
    assert struct.unpack(">I", data[-4:])[0] == zlib.crc32(data[:-4])
    loaded = SparseIndex.load(path, magic)
    assert loaded is not None
    got, footer = loaded
    assert (got.keys, got.values) == ([0, 5, 9], [100, 900, -1])
    assert footer == FOOTER
    empty = tmp_path / "empty.index"
    SparseIndex().save(empty, magic, FOOTER)
    loaded = SparseIndex.load(empty, magic)
    assert loaded is not None and len(loaded[0]) == 0 and loaded[1] == FOOTER


def test_a_damaged_index_file_is_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / "i.index"
    _index([(0, 100), (5, 900)]).save(path, OFFSET_MAGIC, FOOTER)
    good = path.read_bytes()
    assert SparseIndex.load(tmp_path / "missing.index", OFFSET_MAGIC) is None
    assert SparseIndex.load(path, TIME_MAGIC) is None  # the other kind of index
    for bad in (
        good[:-1],  # cut
        good + b"\x00",  # longer
        good[: len(OFFSET_MAGIC) + 16] + good[len(OFFSET_MAGIC) + 32 :],  # an entry dropped
        b"",
        good[: len(OFFSET_MAGIC) + 27],  # shorter than a footer
    ):
        path.write_bytes(bad)
        assert SparseIndex.load(path, OFFSET_MAGIC) is None
    for i in range(len(good)):
        flipped = bytearray(good)
        flipped[i] ^= 0x01
        path.write_bytes(bytes(flipped))
        assert SparseIndex.load(path, OFFSET_MAGIC) is None, i


def test_an_index_whose_keys_are_out_of_order_is_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / "i.index"
    _index([(5, 1), (0, 2)]).save(path, OFFSET_MAGIC, FOOTER)  # the CRC holds, the order not
    assert SparseIndex.load(path, OFFSET_MAGIC) is None
    _index([(0, 1), (0, 2)]).save(path, OFFSET_MAGIC, FOOTER)  # equal keys are sorted
    assert SparseIndex.load(path, OFFSET_MAGIC) is not None
