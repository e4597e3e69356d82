"""The records layer's support modules: value sharing, upcaster chains, errors, log entries."""

from __future__ import annotations

import io
import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from records import avro_array, fast_decode
from records.avro_array import AvroArray
from records.codec import DEFAULT_CODEC
from records.entry import LogEntry, make_entry
from records.errors import (
    MetadataLogError,
    RecordError,
    UnknownRecordTypeError,
    UnsupportedRecordVersionError,
)
from records.interning import CACHE_LIMIT, INTS, UUIDS, shared_ints, shared_uuid
from records.model import FeatureLevelRecord
from records.upcasting import UPCASTERS, UpcasterRegistry
from records.uuids import Uuid


def test_equal_replica_lists_are_one_tuple() -> None:
    first = shared_ints([1, 2, 3])
    assert first == (1, 2, 3)
    assert shared_ints((1, 2, 3)) is first
    assert shared_ints([1, 2, 3]) is first
    assert shared_ints([]) == ()


def test_equal_ids_are_one_uuid() -> None:
    raw = bytes(range(16))
    first = shared_uuid(raw)
    assert first == Uuid(raw) and hash(first) == hash(Uuid(raw))
    assert str(first) == str(Uuid(raw))
    assert shared_uuid(bytes(range(16))) is first


def test_a_full_ints_cache_starts_over_and_stays_correct() -> None:
    INTS.clear()
    for i in range(CACHE_LIMIT):
        shared_ints((i, -i))
    assert len(INTS) == CACHE_LIMIT
    value = shared_ints((-1, -1))
    assert len(INTS) == 1  # emptied, then the new value
    assert shared_ints([-1, -1]) is value
    assert shared_ints((0, 0)) == (0, 0)
    INTS.clear()


def test_a_full_uuid_cache_starts_over_and_stays_correct() -> None:
    UUIDS.clear()
    for i in range(CACHE_LIMIT):
        shared_uuid(i.to_bytes(16, "big"))
    assert len(UUIDS) == CACHE_LIMIT
    value = shared_uuid(b"\xff" * 16)
    assert len(UUIDS) == 1
    assert shared_uuid(b"\xff" * 16) is value
    assert shared_uuid(bytes(16)) == Uuid.ZERO
    UUIDS.clear()


def test_the_cache_limit_bounds_memory() -> None:
    assert CACHE_LIMIT == 65_536


def test_an_upcaster_chain_runs_every_step_in_order() -> None:
    def step(n: int) -> Any:
        return lambda v: {**v, "path": [*v.get("path", []), n]}

    registry = UpcasterRegistry(
        {(7, 0): step(0), (7, 1): step(1), (7, 2): step(2), (8, 0): step(9)}
    )
    steps = registry.chain(7, 0, 3)
    value: dict[str, Any] = {}
    for s in steps:
        value = s(value)
    assert value == {"path": [0, 1, 2]}
    assert len(registry.chain(7, 1, 3)) == 2
    assert registry.chain(7, 2, 2) == []
    with pytest.raises(UnsupportedRecordVersionError) as info:
        registry.chain(7, 0, 4)
    assert (info.value.record_type, info.value.version) == (7, 0)
    assert "no upcaster leads from version 0 to the current version 4" in str(info.value)
    with pytest.raises(UnsupportedRecordVersionError):
        registry.chain(8, 0, 2)
    assert UPCASTERS.chain(1, 0, 0) == []


def test_registries_copy_what_they_are_given() -> None:
    given: dict[tuple[int, int], Any] = {}
    registry = UpcasterRegistry(given)
    given[(1, 0)] = dict
    with pytest.raises(UnsupportedRecordVersionError):
        registry.chain(1, 0, 1)
    with pytest.raises(UnsupportedRecordVersionError):
        UpcasterRegistry().chain(1, 0, 1)


def test_errors_say_what_to_do_and_share_one_root() -> None:
    unknown = UnknownRecordTypeError("mlog.FutureRecordV3")
    assert unknown.name == "mlog.FutureRecordV3"
    assert isinstance(unknown, RecordError) and isinstance(unknown, MetadataLogError)
    assert str(unknown) == (
        "unknown record type 'mlog.FutureRecordV3': the log was written by a newer "
        "metadata-log; upgrade metadata-log to read it"
    )
    old = UnsupportedRecordVersionError(12, 1, 3)
    assert (old.record_type, old.version) == (12, 1)
    assert isinstance(old, RecordError)
    assert str(old).startswith("record type 12 version 1 cannot be read")


def test_make_entry_builds_the_same_entry_as_its_constructor() -> None:
    record = FeatureLevelRecord(name="metadata.version", feature_level=7)
    made = make_entry(4, 2, 1000, "User:alice", record)
    assert made == LogEntry(
        offset=4, epoch=2, timestamp=1000, principal="User:alice", record=record
    )
    assert (made.offset, made.epoch, made.timestamp) == (4, 2, 1000)
    assert made.principal == "User:alice" and made.record is record
    assert make_entry(0, 0, 0, None, record).principal is None


@pytest.mark.parametrize(
    "garbage",
    [
        "A" * 21 + "!",  # base64 that does not decode at all
        "urn:" + "0" * 32,  # 36 characters Python's uuid reads, but not a UUID's text
        "0000-0000-0000-0000-0000000000000000",  # hyphens in the wrong places
        "{{" + "0" * 32 + "}}",
    ],
)
def test_an_id_is_only_its_canonical_text(garbage: str) -> None:
    with pytest.raises(ValueError, match="is not a topic id"):
        Uuid.parse(garbage)


def test_random_ids_have_122_random_bits() -> None:
    """Version 4, RFC 4122 variant; every other bit varies, independently of its neighbours."""
    ids = [Uuid.random().bytes for _ in range(2000)]
    fixed = {6: 0xF0, 8: 0xC0}  # the version nibble and the variant bits
    for byte in range(16):
        varying = 0
        for raw in ids:
            varying |= raw[byte] ^ ids[0][byte]
        assert varying == 0xFF & ~fixed.get(byte, 0), byte
    assert any(raw[6] & 0x0F != raw[7] & 0x0F for raw in ids)
    assert any(raw[8] & 0x3F != raw[9] & 0x3F for raw in ids)


def test_the_public_fastavro_path_writes_and_reads_what_the_internals_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where fastavro's compiled internals change, the public API gives the same bytes."""
    assert avro_array.fast_internals() is not None  # this build: the compiled internals
    entries = [
        (i, 1, 2, "User:u", FeatureLevelRecord(name=f"f{i}", feature_level=i)) for i in range(3)
    ]
    values = [
        {
            "offset": o,
            "epoch": e,
            "timestamp": t,
            "principal": p,
            "record": DEFAULT_CODEC.encode_record(r),
        }
        for o, e, t, p, r in entries
    ]
    fast = AvroArray(DEFAULT_CODEC.entry_schema)
    fast_bytes = fast.write(values)
    assert fast.read(io.BytesIO(fast_bytes)) == values
    monkeypatch.setattr(avro_array, "fast_internals", lambda: None)
    public = AvroArray(DEFAULT_CODEC.entry_schema)
    assert public.write(values) == fast_bytes
    stream = io.BytesIO(fast_bytes + b"tail")
    assert public.read(stream) == values
    assert stream.tell() == len(fast_bytes)


def test_the_compiled_internals_are_used_only_while_they_match_the_public_api(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The self-check runs once per process: this build passes it, a changed internal fails it."""
    import fastavro._write

    avro_array.fast_internals.cache_clear()
    try:
        internals = avro_array.fast_internals()
        assert internals is not None
        avro_array.fast_internals.cache_clear()
        real_write = internals[1]

        def off_by_one(out: bytearray, *args: Any) -> None:
            real_write(out, *args)
            out[-1] ^= 1

        monkeypatch.setattr(fastavro._write, "write_data", off_by_one)
        assert avro_array.fast_internals() is None
        avro_array.fast_internals.cache_clear()

        def broken(*args: Any) -> None:
            raise RuntimeError("changed signature")

        monkeypatch.setattr(fastavro._write, "write_data", broken)
        with caplog.at_level(logging.DEBUG, logger="records.avro_array"):
            assert avro_array.fast_internals() is None
        assert "fastavro internals unusable (changed signature)" in caplog.text
    finally:
        monkeypatch.undo()
        avro_array.fast_internals.cache_clear()
    assert avro_array.fast_internals() is not None


@given(st.binary(min_size=16, max_size=16))
def test_an_id_hashes_as_its_bytes_wherever_it_is_hashed(raw: bytes) -> None:
    # In C where the decoder's extension is built (`Uuid.__hash__`), in Python otherwise:
    # the same value, for an id, an id made without `__init__`, and a subclass's.
    class Named(Uuid):
        __slots__ = ()

    made = Uuid.of_16_bytes(raw)
    assert hash(Uuid(raw)) == hash(made) == hash(Named(raw)) == hash(raw)
    assert {Uuid(raw): 1}[made] == 1


def test_ids_are_hashed_in_c_where_the_extension_is_built() -> None:
    if not fast_decode.AVAILABLE:
        pytest.skip("the compiled decoder is not built here")
    assert type(Uuid.__dict__["__hash__"]).__name__ == "cython_function_or_method"
