"""The compiled builder of a topic's PartitionRecords from its snapshot rows.

It must build exactly what the Python path builds, and hand back to it (None) any rows it is
not sure of, so that the Python path names what is wrong.
"""

from __future__ import annotations

import gc
import marshal
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from records.model import PARTITION_FIELDS, Mode, PartitionRecord
from records.uuids import Uuid
from replay.sql import topic_builder

compiled: Any = pytest.importorskip("replay.sql._partition_rows")

TOPIC = Uuid.random()
TID = str(TOPIC)


def _rows(count: int) -> list[tuple[Any, ...]]:
    return [
        (TID, p, f"[{p % 3},{(p + 1) % 3}]", "[1]", "[]", "[]", p % 3, 4, 5, "READ_ONLY")
        for p in range(count)
    ]


def _arrays(rows: list[tuple[Any, ...]]) -> Any:
    arrays = topic_builder._ArrayValues()
    for row in rows:
        for text in row[2:6]:
            arrays[text]  # parsed into the cache, as the Python path does
    return arrays


def test_it_builds_what_the_python_path_builds() -> None:
    rows = _rows(50)
    arrays = _arrays(rows)
    built = compiled.build(rows, TOPIC, arrays, topic_builder.MODES)
    expected = topic_builder._partitions_in_python(TOPIC, rows, arrays)
    assert built == expected
    assert all(type(p) is PartitionRecord for p in built)
    # Out of the collector's view (they can be in no cycle), unlike the Python path's.
    assert compiled.build(_rows(4), TOPIC, {}, topic_builder.MODES) is None  # a plain dict
    fresh = topic_builder._ArrayValues()
    assert compiled.build(rows, TOPIC, fresh, topic_builder.MODES) == expected  # lists parsed
    assert fresh["[1,2]"] is fresh["[1,2]"] and len(fresh) == len(arrays)
    assert not any(gc.is_tracked(p) for p in built) and all(gc.is_tracked(p) for p in expected)
    assert built[7].replicas is arrays["[1,2]"]  # the shared tuple, not a copy
    assert built[0].mode is Mode.READ_ONLY
    assert [getattr(built[3], name) for name in PARTITION_FIELDS] == [
        3, TOPIC, (0, 1), (1,), (), (), 0, 4, 5, Mode.READ_ONLY
    ]  # fmt: skip


def test_its_records_hold_and_release_their_values() -> None:
    rows = _rows(20)
    arrays = _arrays(rows)
    before = sys.getrefcount(TOPIC)
    built = compiled.build(rows, TOPIC, arrays, topic_builder.MODES)
    assert sys.getrefcount(TOPIC) == before + 20
    del built  # untracked, they are freed by their count, as any record
    assert sys.getrefcount(TOPIC) == before


@pytest.mark.parametrize(
    "change",
    [
        lambda rows: rows.__setitem__(3, (*rows[3][:9], "SIDEWAYS")),  # unknown mode
        lambda rows: rows.__setitem__(3, (*rows[3][:2], "[9,x]", *rows[3][3:])),  # no list
        lambda rows: rows.__setitem__(3, (rows[3][0], 4, *rows[3][2:])),  # a gap
        lambda rows: rows.__setitem__(3, (rows[3][0], True, *rows[3][2:])),  # not an int
        lambda rows: rows.__setitem__(3, list(rows[3])),  # not a tuple
        lambda rows: rows.__setitem__(3, rows[3][:9]),  # a column short
    ],
)
def test_rows_it_is_not_sure_of_go_to_the_python_path(change: Any) -> None:
    rows = _rows(6)
    arrays = _arrays(rows)
    change(rows)
    assert compiled.build(rows, TOPIC, arrays, topic_builder.MODES) is None


def test_only_a_class_of_object_slots_is_taken() -> None:
    with pytest.raises(TypeError, match="is not a slot"):
        compiled.prepare(PartitionRecord, ("RECORD_TYPE", *PARTITION_FIELDS[1:]))
    with pytest.raises(ValueError, match="ten values"):
        compiled.prepare(PartitionRecord, PARTITION_FIELDS[:9])
    compiled.prepare(PartitionRecord, PARTITION_FIELDS)  # as topic_builder.py left it


VALUES = st.none() | st.integers() | st.text() | st.booleans() | st.binary()


@given(st.lists(st.tuples() | st.lists(VALUES, max_size=12).map(tuple), max_size=12))
def test_the_checksum_bytes_are_marshal_version_0s(rows: list[tuple[Any, ...]]) -> None:
    # The checksum hashes these bytes: any difference would fail every stored snapshot.
    data = compiled.marshal_rows(rows)
    if data is not None:
        assert data == marshal.dumps(rows, 0)


def test_the_checksum_bytes_of_partition_rows_are_made_in_c() -> None:
    rows = [*_rows(10), (TID, 10, "[]", "[]", "[]", "[]", -(2**31), 2**31 - 1, None, "NONE")]
    assert compiled.marshal_rows(rows) == marshal.dumps(rows, 0)
    for odd in (2**31, -(2**31) - 1, True, "é", b"x", 1.5):
        assert compiled.marshal_rows([(TID, odd)]) is None  # left to marshal
