"""The compiled block decoder gives exactly what the fastavro path gives, and fails as it does."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from records import fast_decode
from records.avro_array import AvroArray
from records.codec import DEFAULT_CODEC, EntryTuple, RecordBlock, RecordCodec
from records.entry import LogEntry, make_entry
from records.errors import RecordError, UnknownRecordTypeError
from records.model import (
    Mode,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from records.schemas import CURRENT_SCHEMAS
from records.uuids import Uuid
from records.varint import encode_long
from tests.support.record_gen import LogGenerator
from tests.support.record_strategies import entry_tuples

pytestmark = pytest.mark.skipif(
    not fast_decode.AVAILABLE and not os.environ.get("CI"),
    reason="the compiled decoder is not built here (no C compiler at install)",
)


def test_ci_builds_the_compiled_decoder() -> None:
    # `make test` installs with Cython and gcc: CI must exercise the compiled path.
    assert fast_decode.AVAILABLE
    assert DEFAULT_CODEC.decoder_name == "compiled"


def _both_ways(
    codec: RecordCodec, schema_json: str, read: Callable[[AvroArray], Any]
) -> tuple[Any, Any]:
    """(compiled result or error, fastavro result or error) of `read(array)` for one schema."""
    array = codec.reader_array_schema(schema_json)
    assert array.fast is not None
    results: list[Any] = []
    for fast in (array.fast, None):
        saved, array.fast = array.fast, fast
        try:
            results.append(read(array))
        except RecordError as exc:
            results.append(type(exc))
        finally:
            array.fast = saved
    return results[0], results[1]


def _both(codec: RecordCodec, schema_json: str, count: int, body: bytes) -> tuple[Any, Any]:
    """`decode_block` (replay's path) through the compiled decoder and fastavro."""
    return _both_ways(codec, schema_json, lambda a: _plain(codec.decode_block(count, body, a)))


def _both_entries(codec: RecordCodec, schema_json: str, count: int, body: bytes) -> tuple[Any, Any]:
    """`decode_entries` (the public read path) through the compiled decoder and fastavro."""
    return _both_ways(codec, schema_json, lambda a: codec.decode_entries(count, body, a))


def _both_types(codec: RecordCodec, schema_json: str, count: int, body: bytes) -> tuple[Any, Any]:
    """`record_types_in` (FetchLog's search for credentials) compiled and through fastavro."""
    return _both_ways(codec, schema_json, lambda a: codec.record_types_in(count, body, a))


def _plain(block: RecordBlock) -> tuple[Any, ...]:
    return (
        block.first_offset,
        block.records,
        block.offsets,
        block.epochs,
        block.timestamps,
        block.principals,
    )


def test_a_generated_log_decodes_identically() -> None:
    generator = LogGenerator(seed=11)
    offset = 0
    for batch in generator.batches(400):
        entries: list[EntryTuple] = []
        for record in batch:
            entries.append((offset, 3, 1_700_000_000_000 + offset, f"User:p{offset % 3}", record))
            offset += 1
        count, body = DEFAULT_CODEC.encode_entries(entries)
        fast, slow = _both(DEFAULT_CODEC, DEFAULT_CODEC.entry_schema_json, count, body)
        assert fast == slow
        assert fast[1] == list(batch)
        fast_entries, slow_entries = _both_entries(
            DEFAULT_CODEC, DEFAULT_CODEC.entry_schema_json, count, body
        )
        assert fast_entries == slow_entries
        assert [e.record for e in fast_entries] == list(batch)


@given(st.lists(entry_tuples, min_size=1, max_size=20))
def test_every_record_type_and_edge_value_decodes_identically(entries: list[EntryTuple]) -> None:
    count, body = DEFAULT_CODEC.encode_entries(entries)
    fast, slow = _both(DEFAULT_CODEC, DEFAULT_CODEC.entry_schema_json, count, body)
    assert fast == slow
    assert fast[1] == [e[4] for e in entries]
    assert fast[5] == [e[3] for e in entries]
    fast_entries, slow_entries = _both_entries(
        DEFAULT_CODEC, DEFAULT_CODEC.entry_schema_json, count, body
    )
    assert fast_entries == slow_entries
    assert [(e.offset, e.epoch, e.timestamp, e.principal, e.record) for e in fast_entries] == [
        tuple(e) for e in entries
    ]
    fast_types, slow_types = _both_types(
        DEFAULT_CODEC, DEFAULT_CODEC.entry_schema_json, count, body
    )
    assert fast_types == slow_types == {type(e[4]).RECORD_TYPE for e in entries}


@given(st.lists(entry_tuples, min_size=1, max_size=5), st.data())
def test_damaged_bodies_fail_with_record_error(
    entries: list[EntryTuple], data: st.DataObject
) -> None:
    count, body = DEFAULT_CODEC.encode_entries(entries)
    array = DEFAULT_CODEC.reader_array_schema(DEFAULT_CODEC.entry_schema_json)
    cut = data.draw(st.integers(0, len(body) - 1))
    with pytest.raises(RecordError):
        DEFAULT_CODEC.decode_block(count, body[:cut], array)
    wrong_count = data.draw(st.integers(0, 2 * count + 2).filter(lambda n: n != count))
    with pytest.raises(RecordError):
        DEFAULT_CODEC.decode_block(wrong_count, body, array)
    extra = data.draw(st.binary(min_size=1, max_size=8))
    with pytest.raises(RecordError):
        DEFAULT_CODEC.decode_block(count, body + extra, array)
    # The public read path and the search for record types refuse the same bodies through
    # the compiled decoder.
    for wrong in ((count, body[:cut]), (wrong_count, body), (count, body + extra)):
        with pytest.raises(RecordError):
            DEFAULT_CODEC.decode_entries(*wrong, array)
        with pytest.raises(RecordError):
            DEFAULT_CODEC.record_types_in(*wrong, array)
    # Any single flipped byte: a record error or some decodable block, never another exception.
    at = data.draw(st.integers(0, len(body) - 1))
    flipped = body[:at] + bytes([body[at] ^ data.draw(st.integers(1, 255))]) + body[at + 1 :]
    with contextlib.suppress(RecordError):
        DEFAULT_CODEC.decode_block(count, flipped, array)
    with contextlib.suppress(RecordError):
        DEFAULT_CODEC.record_types_in(count, flipped, array)


def test_overlong_numbers_and_lengths_are_refused() -> None:
    array = DEFAULT_CODEC.reader_array_schema(DEFAULT_CODEC.entry_schema_json)
    for body in (b"\xff" * 11, b"\x00\x00\x00\x02\xff\xff\xff\xff\x0f", b"\x00\x00\x00\x04"):
        with pytest.raises(RecordError):
            DEFAULT_CODEC.decode_block(1, body, array)


def test_an_old_writer_schema_is_upcast_and_an_unknown_branch_refused() -> None:
    # A writer union without today's last two record types, in the same order: every branch it
    # has is today's, so it decodes positionally; a renamed branch is read by name or refused.
    old = RecordCodec(list(CURRENT_SCHEMAS[:-2]))
    entries: list[EntryTuple] = [
        (0, 0, 5, None, e[4]) for e in _sample(old, 30) if type(e[4]) in _classes(old)
    ]
    count, body = old.encode_entries(entries)
    fast, slow = _both(DEFAULT_CODEC, old.entry_schema_json, count, body)
    assert fast == slow and fast[1] == [e[4] for e in entries]
    assert (
        _both_types(DEFAULT_CODEC, old.entry_schema_json, count, body)
        == ({type(e[4]).RECORD_TYPE for e in entries},) * 2
    )
    assert (
        _both_entries(DEFAULT_CODEC, old.entry_schema_json, count, body)[0]
        == (_both_entries(DEFAULT_CODEC, old.entry_schema_json, count, body)[1])
    )

    schema = json.loads(old.entry_schema_json)
    branch = schema["fields"][4]["type"][0]
    branch["name"] = branch["name"][:-1] + "9"  # FeatureLevelRecordV0 -> ...V9
    renamed = json.dumps(schema)
    first_of_branch = [e for e in entries if type(e[4]) is CURRENT_SCHEMAS[0].python_class][:1]
    assert first_of_branch
    count, body = old.encode_entries(first_of_branch)
    array = DEFAULT_CODEC.reader_array_schema(renamed)
    assert array.fast is not None
    with pytest.raises(UnknownRecordTypeError):
        DEFAULT_CODEC.decode_block(count, body, array)
    with pytest.raises(UnknownRecordTypeError):
        DEFAULT_CODEC.decode_entries(count, body, array)
    with pytest.raises(UnknownRecordTypeError):
        DEFAULT_CODEC.record_types_in(count, body, array)


def _classes(codec: RecordCodec) -> set[type]:
    return {s.python_class for s in codec.schemas if s.python_class is not None}


def _sample(codec: RecordCodec, n: int) -> list[EntryTuple]:
    generator = LogGenerator(seed=3)
    out: list[EntryTuple] = []
    for batch in generator.batches(n):
        out.extend((0, 0, 0, None, r) for r in batch)
    return out


def test_a_writer_schema_of_another_shape_falls_back_to_fastavro() -> None:
    schema = json.loads(DEFAULT_CODEC.entry_schema_json)
    schema["fields"][3]["type"] = ["string", "null"]
    assert DEFAULT_CODEC.reader_array_schema(json.dumps(schema)).fast is None


def test_records_made_in_c_are_the_positional_decoders_own() -> None:
    # The records a `Maker` makes are those of the branch's positional decoder: the same class
    # and values, the same shared ids and broker lists, tracked by the collector the same way.
    generator = LogGenerator(seed=12)
    entries: list[EntryTuple] = []
    for batch in generator.batches(300):
        entries.extend((len(entries), 1, 5, None, record) for record in batch)
    count, body = DEFAULT_CODEC.encode_entries(entries)
    array = DEFAULT_CODEC.reader_array_schema(DEFAULT_CODEC.entry_schema_json)
    assert array.fast is not None
    saved = array.fast
    # Makers of their own: the codec's remember values earlier tests decoded, which are equal
    # but no longer the tables' objects once a table was cleared (`records.interning`).
    array.fast = fast_decode.FastBlockDecoder(_branches(DEFAULT_CODEC))
    try:
        made = DEFAULT_CODEC.decode_block(count, body, array).records
    finally:
        array.fast = saved
    array.fast = fast_decode.FastBlockDecoder(
        [(program, decode) for program, decode, *_ in _branches(DEFAULT_CODEC)]
    )
    try:
        positional = DEFAULT_CODEC.decode_block(count, body, array).records
    finally:
        array.fast = saved
    assert made == positional == [e[4] for e in entries]
    for a, b in zip(made, positional, strict=True):
        assert type(a) is type(b)
        assert gc.is_tracked(a) == gc.is_tracked(b)
        names: tuple[str, ...] = a.__slots__
        for name in names:
            value = getattr(a, name)
            if isinstance(value, (Uuid, tuple)) and value:
                assert value is getattr(b, name), name  # the shared object, not a copy
    kinds = {type(r) for r in made}
    assert {PartitionRecord, TopicRecord, PartitionChangeRecord, RemoveTopicRecord} <= kinds


def test_the_codec_makes_its_lookup_only_records_in_c() -> None:
    # The codec's compiled decoder makes these records without their positional decoders:
    # with those replaced by decoders that refuse, a block of them still decodes.
    codec = RecordCodec()
    hot = (PartitionRecord, TopicRecord, PartitionChangeRecord, RemoveTopicRecord)
    for cls in hot:
        codec._positional[_branch_name(cls)] = _never
    entries = [e for e in _sample(codec, 200) if type(e[4]) in hot]
    count, body = codec.encode_entries(entries)
    # Another spelling of the same writer schema: its compiled decoder is made now, on the
    # refusing decoders.
    respelled = json.dumps(json.loads(codec.entry_schema_json), indent=1)
    array = codec.reader_array_schema(respelled)
    assert array.fast is not None
    assert codec.decode_block(count, body, array).records == [e[4] for e in entries]
    # The audit's converter passes decoders of its own (rows): they are the ones called.
    current = {s.branch_name: s for s in codec.schemas}
    rows = fast_decode.fast_decoder(
        json.loads(respelled), current, codec._positional, codec._decoders
    )
    assert rows is not None
    with pytest.raises(AssertionError, match="refused"):
        rows.decode(count, body)


def _branches(codec: RecordCodec) -> list[Any]:
    """The compiled decoder's branches for today's writer schema (programs, decoders, makers)."""
    compiled = fast_decode._entry_branches(codec.entry_schema)
    assert compiled is not None
    return [
        (program, codec._positional[name], fast_decode.maker_of(codec._current[name]))
        for program, name, _ in compiled
    ]


def test_every_record_with_lookups_only_is_made_in_c() -> None:
    makers = {s.python_class: fast_decode.maker_of(s) for s in CURRENT_SCHEMAS}
    for cls in (PartitionRecord, TopicRecord, PartitionChangeRecord, RemoveTopicRecord):
        assert makers[cls] is not None, cls.__name__
    # A broker's endpoints are an array of structs: its positional decoder makes it.
    assert makers[RegisterBrokerRecord] is None


def test_a_class_whose_fields_are_not_its_own_slots_gets_no_maker() -> None:
    (schema,) = (s for s in CURRENT_SCHEMAS if s.python_class is TopicRecord)

    class Subclass(TopicRecord):  # its fields' slots are its base's
        __slots__ = ()

    assert fast_decode.maker_of(dataclasses.replace(schema, python_class=Subclass)) is None
    assert fast_decode.maker_of(dataclasses.replace(schema, python_class=None)) is None


def test_a_value_outside_its_table_fails_as_the_positional_decoder_fails() -> None:
    # A partition whose mode is a valid Avro int but no Mode: the lookup's KeyError is the
    # block's RecordError, through the C maker as through the generated decoder.
    partition = PartitionRecord(
        partition_id=0, topic_id=Uuid(bytes(range(16))), replicas=(1,), isr=(1,), leader=1
    )
    count, body = DEFAULT_CODEC.encode_entries([(0, 0, 0, None, partition)])
    tail = encode_long(int(Mode.READ_WRITE))
    assert body.endswith(tail)
    bad = body[: -len(tail)] + encode_long(99)
    array = DEFAULT_CODEC.reader_array_schema(DEFAULT_CODEC.entry_schema_json)
    assert fast_decode.maker_of(DEFAULT_CODEC._current[_branch_name(PartitionRecord)])
    with pytest.raises(RecordError, match="99"):
        DEFAULT_CODEC.decode_block(count, bad, array)


def _branch_name(cls: type) -> str:
    (schema,) = (s for s in CURRENT_SCHEMAS if s.python_class is cls)
    return schema.branch_name


class _OwnNew:
    __slots__ = ("a",)

    def __new__(cls) -> _OwnNew:
        return super().__new__(cls)


class _Plain:
    __slots__ = ("a",)
    b = 1


@pytest.mark.parametrize(
    ("kind", "fields", "error"),
    [
        (_OwnNew, [("a", fast_decode.PLAIN, None, False)], "__new__"),
        (_Plain, [("b", fast_decode.PLAIN, None, False)], "not a slot"),
        (_Plain, [("a", 7, None, False)], "conversion"),
    ],
)
def test_a_maker_refuses_what_it_cannot_store_into(
    kind: type, fields: list[Any], error: str
) -> None:
    program = (("int",),)
    with pytest.raises((TypeError, ValueError), match=error):
        fast_decode.FastBlockDecoder([(program, _never, (kind, fields))])


def _never(values: list[Any]) -> Any:
    raise AssertionError("a positional decoder was called where it was refused")


class _Held:
    __slots__ = ("id", "ids", "maybe")


class _CountingTable(dict[Any, Any]):
    """A lookup table that counts the lookups reaching it (each value maps to itself)."""

    def __init__(self, known: Any = None) -> None:
        super().__init__()
        self.lookups = 0
        self.known = known

    def __missing__(self, key: Any) -> Any:
        if self.known is not None and key not in self.known:
            raise KeyError(key)
        return key

    def __getitem__(self, key: Any) -> Any:
        self.lookups += 1
        return super().__getitem__(key)


_HELD_PROGRAM = (
    ("fixed", 16),
    ("array", ("int",)),
    ("union", [("null",), ("fixed", 16)], [None, None]),
)


def _held_decoder(
    ids: _CountingTable, lists: _CountingTable, maybe: _CountingTable
) -> fast_decode.FastBlockDecoder:
    fields = [
        ("id", fast_decode.LOOKUP, ids, False),
        ("ids", fast_decode.INTS, lists, False),
        ("maybe", fast_decode.LOOKUP, maybe, True),
    ]
    return fast_decode.FastBlockDecoder([(_HELD_PROGRAM, _never, (_Held, fields))])


def _held_body(rows: list[tuple[bytes, bytes, bytes | None]]) -> bytes:
    """Entries of `_Held` records: each field given as its encoded bytes (a list's whole form)."""
    body = bytearray()
    for offset, (raw_id, encoded_list, maybe) in enumerate(rows):
        body += encode_long(offset) + encode_long(0) + encode_long(0) + encode_long(0)
        body += encode_long(0) + raw_id + encoded_list
        body += encode_long(0) if maybe is None else encode_long(1) + maybe
    return bytes(body)


def _ints(values: list[int]) -> bytes:
    if not values:
        return encode_long(0)
    return encode_long(len(values)) + b"".join(encode_long(v) for v in values) + encode_long(0)


def _made(decoder: fast_decode.FastBlockDecoder, rows: list[Any]) -> list[tuple[Any, ...]]:
    records: list[Any] = decoder.decode(len(rows), _held_body(rows))[4]
    return [(r.id, r.ids, r.maybe) for r in records]


def test_a_maker_looks_a_repeated_value_up_once() -> None:
    # A topic's id on each of its partitions, the same replica list again and again: the
    # maker's memo answers from the bytes, the table is asked once per distinct value.
    ids, lists, maybe = _CountingTable(), _CountingTable(), _CountingTable()
    decoder = _held_decoder(ids, lists, maybe)
    one, other = bytes(range(16)), bytes(range(1, 17))
    rows = [
        (one if i % 10 else other, _ints([1, 2, 3]), None if i % 2 else one) for i in range(100)
    ]
    made = _made(decoder, rows)
    assert made == [(r[0], (1, 2, 3), r[2]) for r in rows]
    assert (ids.lookups, lists.lookups, maybe.lookups) == (2, 1, 1)
    assert made[1][1] is made[2][1]  # the table's own object, shared


def test_a_maker_memo_gives_each_value_its_own_answer_past_its_size() -> None:
    # More distinct values than the memo holds, then again in other orders: slots are
    # shared and replaced, and every record still holds its own value.
    decoder = _held_decoder(_CountingTable(), _CountingTable(), _CountingTable())
    values = [
        (
            i.to_bytes(16, "big"),
            (i % 97, 1000 + i % 89),
            None if i % 3 else i.to_bytes(16, "little"),
        )
        for i in range(5000)
    ]
    for order in (values, values[::-1], values[::7] + values):
        rows = [(raw, _ints(list(pair)), maybe) for raw, pair, maybe in order]
        assert _made(decoder, rows) == order


def test_a_maker_reads_other_spellings_and_long_values_as_the_reader_does() -> None:
    ids, lists, maybe = _CountingTable(), _CountingTable(), _CountingTable()
    decoder = _held_decoder(ids, lists, maybe)
    raw = bytes(16)
    # 0 written canonically and as an overlong varint, then a list past the memo's key size.
    canonical, overlong = _ints([0, 5]), encode_long(2) + b"\x80\x00" + encode_long(5) + b"\x00"
    long_list = _ints(list(range(1000, 1030)))
    assert len(long_list) > 40
    rows = [(raw, canonical, None), (raw, overlong, None), (raw, long_list, None)] * 2
    made = _made(decoder, rows)
    assert [m[1] for m in made] == [(0, 5), (0, 5), tuple(range(1000, 1030))] * 2
    # The long list is not remembered: looked up each time it is read.
    assert lists.lookups == 2 + 2


def test_a_failed_lookup_is_not_remembered() -> None:
    known = {bytes(16)}
    ids = _CountingTable(known)
    decoder = _held_decoder(ids, _CountingTable(), _CountingTable())
    stranger = bytes(range(16))
    rows = [(stranger, _ints([1]), None)]
    with pytest.raises(RecordError, match="does not decode"):
        _made(decoder, rows)
    known.add(stranger)
    assert _made(decoder, rows) == [(stranger, (1,), None)]


def test_entries_made_in_c_are_make_entrys_own() -> None:
    generator = LogGenerator(seed=13)
    entries: list[EntryTuple] = []
    for batch in generator.batches(50):
        entries.extend((len(entries), 2, 7 + len(entries), "User:x", record) for record in batch)
    count, body = DEFAULT_CODEC.encode_entries(entries)
    array = DEFAULT_CODEC.reader_array_schema(DEFAULT_CODEC.entry_schema_json)
    assert array.fast is not None
    made = array.fast.entries(count, body)
    expected = [make_entry(*e) for e in entries]
    assert made == expected
    assert all(type(m) is LogEntry and gc.is_tracked(m) for m in made)
    maker = fast_decode._ENTRY_MAKER
    with pytest.raises(ValueError, match="differ in length"):
        maker.make([1], [1], [1], [None], [])
    with pytest.raises(ValueError, match="5 slots"):
        type(maker)(LogEntry, ("offset",))


def test_a_warm_memo_reads_every_flipped_bit_as_the_positional_decoder_does() -> None:
    # A sweep: each bit of a block of the hot records flipped in turn, decoded by the codec's
    # decoder (its memos filled by the intact block) and by the positional decoders alone:
    # the same records or the same refusal, every time.
    hot = (PartitionRecord, TopicRecord, PartitionChangeRecord, RemoveTopicRecord)
    entries = [e for e in _sample(DEFAULT_CODEC, 120) if type(e[4]) in hot][:24]
    count, body = DEFAULT_CODEC.encode_entries(entries)
    array = DEFAULT_CODEC.reader_array_schema(DEFAULT_CODEC.entry_schema_json)
    warm = array.fast
    assert warm is not None
    positional = fast_decode.FastBlockDecoder(
        [(program, decode) for program, decode, *_ in _branches(DEFAULT_CODEC)]
    )

    def read(decoder: fast_decode.FastBlockDecoder, block: bytes) -> Any:
        try:
            return decoder.decode(count, block)
        except RecordError:
            return RecordError

    assert read(warm, body) == read(positional, body) != RecordError
    for at in range(len(body)):
        for bit in range(8):
            flipped = body[:at] + bytes([body[at] ^ (1 << bit)]) + body[at + 1 :]
            assert read(warm, flipped) == read(positional, flipped), (at, bit)
