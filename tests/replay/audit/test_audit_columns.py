"""The compiled columnar decoder builds exactly the Arrow batches the row-by-row path builds."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("pyarrow")

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from records import fast_decode
from records.codec import DEFAULT_CODEC, EntryTuple, RecordCodec
from records.errors import RecordError, UnknownRecordTypeError
from records.json_form import record_to_json
from records.model import Record, ScramMechanism, UserScramCredentialRecord
from records.schemas import CURRENT_SCHEMAS
from replay.audit import columns
from replay.audit.columns import (
    ARROW_SCHEMA,
    HIDDEN,
    SCHEMA_DDL,
    SECRET_FIELDS,
    BatchBuilder,
    BlockConverter,
    _RowsBuilder,
)
from tests.support.record_gen import LogGenerator
from tests.support.record_strategies import any_record, int32s, int64s, texts, write_body

pytestmark = pytest.mark.skipif(
    not fast_decode.AVAILABLE, reason="the compiled decoder is not built here"
)

# Timestamps the table can hold as microseconds.
_MILLIS = st.integers(-(2**63) // 1000 + 1, (2**63 - 1) // 1000)
entries = st.tuples(int64s, int32s, _MILLIS, st.none() | texts, any_record)


def _batches(
    converter: BlockConverter, builder: BatchBuilder, blocks: list[tuple[int, bytes]]
) -> tuple[list[tuple[int, int]], pa.RecordBatch]:
    held = [builder.add(count, body) for count, body in blocks]
    return held, builder.finish()


def _same(schema_json: str, blocks: list[tuple[int, bytes]], *, payload: bool) -> pa.RecordBatch:
    converter = BlockConverter(schema_json, payload=payload)
    columnar = converter.builder()
    assert not isinstance(columnar, _RowsBuilder)
    held, ours = _batches(converter, columnar, blocks)
    rows_held, rows = _batches(converter, _RowsBuilder(converter), blocks)
    ours.validate(full=True)
    assert held == rows_held
    different = [n for n in ours.schema.names if not ours.column(n).equals(rows.column(n))]
    assert not different, (different, ours.to_pylist()[:3], rows.to_pylist()[:3])
    assert columnar.rows == 0
    return ours


@given(st.lists(st.lists(entries, min_size=1, max_size=8), min_size=1, max_size=3), st.booleans())
def test_every_record_type_and_edge_value_builds_the_same_batch(
    blocks: list[list[EntryTuple]], payload: bool
) -> None:
    encoded = [DEFAULT_CODEC.encode_entries(block) for block in blocks]
    batch = _same(DEFAULT_CODEC.entry_schema_json, encoded, payload=payload)
    flat = [e for block in blocks for e in block]
    assert batch.column("offset").to_pylist() == [e[0] for e in flat]
    assert batch.column("principal").to_pylist() == [e[3] for e in flat]
    if payload:
        assert [json.loads(p) for p in batch.column("payload").to_pylist()] == [
            _shown(e[4]) for e in flat
        ]
    else:
        assert batch.column("payload").null_count == len(flat)


def _shown(record: Record) -> dict[str, Any]:
    """A record's JSON form as the audit table's payload shows it: secrets hidden."""
    data: dict[str, Any] = record_to_json(record)["data"]
    for name in SECRET_FIELDS.get(type(record).__name__, ()):
        data[name] = HIDDEN
    return data


@pytest.mark.parametrize("security", [False, True])
def test_a_generated_log_builds_the_same_batches(security: bool) -> None:
    offset = 0
    blocks = []
    for batch in LogGenerator(seed=5, security=security).batches(300):
        block: list[EntryTuple] = []
        for record in batch:
            block.append((offset, 2, 1_700_000_000_000 + offset, f"User:p{offset % 3}", record))
            offset += 1
        blocks.append(DEFAULT_CODEC.encode_entries(block))
    for payload in (True, False):
        assert _same(DEFAULT_CODEC.entry_schema_json, blocks, payload=payload).num_rows == offset


def test_an_old_writer_schema_builds_the_same_batch() -> None:
    # A writer union without today's last two types: its branches are today's, read directly;
    # a renamed branch goes through the dict decoder, or is refused when nothing reads it.
    old = RecordCodec(list(CURRENT_SCHEMAS[:-2]))
    classes = {s.python_class for s in old.schemas}
    sample: list[EntryTuple] = [
        (i, 0, 5, None, r)
        for i, r in enumerate(r for b in LogGenerator(seed=3).batches(40) for r in b)
        if type(r) in classes
    ]
    block = old.encode_entries(sample)
    _same(old.entry_schema_json, [block], payload=True)

    schema = json.loads(old.entry_schema_json)
    branch = schema["fields"][4]["type"][0]
    branch["name"] = branch["name"][:-1] + "9"
    first = [e for e in sample if type(e[4]) is CURRENT_SCHEMAS[0].python_class][:1]
    assert first
    builder = BlockConverter(json.dumps(schema)).builder()
    with pytest.raises(UnknownRecordTypeError):
        builder.add(*old.encode_entries(first))
    assert builder.rows == 0


def _reads_back_by_name(writer: dict[str, Any], *, seed: int, batches: int) -> None:
    """Generated records written with `writer` (an edited entry schema) read back as written."""
    records = [r for b in LogGenerator(seed=seed).batches(batches) for r in b]
    values = []
    for i, record in enumerate(records):
        name, avro = DEFAULT_CODEC.encode_record(record)
        values.append(
            {"offset": i, "epoch": 1, "timestamp": 10 * i, "principal": "p", "record": (name, avro)}
        )
    body = write_body(writer, values)
    batch = _same(json.dumps(writer), [(len(values), body)], payload=True)
    assert [json.loads(p) for p in batch.column("payload").to_pylist()] == [
        record_to_json(r)["data"] for r in records
    ]


def test_a_branch_in_another_field_order_goes_through_the_record_decoder() -> None:
    # Same branch name, fields reversed: not readable positionally, so each of its entries is
    # decoded by name into a record and re-encoded as today's values (as an upcast one is).
    writer = json.loads(DEFAULT_CODEC.entry_schema_json)
    for branch in writer["fields"][4]["type"]:
        branch["fields"].reverse()
    _reads_back_by_name(writer, seed=8, batches=60)


@given(st.lists(entries, min_size=1, max_size=5), st.data())
def test_damaged_bodies_fail_with_record_error_and_leave_no_rows(
    block: list[EntryTuple], data: st.DataObject
) -> None:
    count, body = DEFAULT_CODEC.encode_entries(block)
    builder = BlockConverter(DEFAULT_CODEC.entry_schema_json).builder()
    cut = data.draw(st.integers(0, len(body) - 1))
    with pytest.raises(RecordError):
        builder.add(count, body[:cut])
    assert builder.rows == 0
    with pytest.raises(RecordError):
        builder.add(count, body + data.draw(st.binary(min_size=1, max_size=8)))
    assert builder.rows == 0
    assert builder.add(count, body) == (block[0][0], block[-1][0])
    assert builder.finish().num_rows == count


def test_no_salt_or_key_reaches_the_table() -> None:
    salt, key = b"\x01SALT-SECRET\xfe", bytes(range(32))
    record = UserScramCredentialRecord(
        name="alice",
        mechanism=ScramMechanism.SCRAM_SHA_256,
        salt=salt,
        stored_key=key,
        server_key=key,
        iterations=4096,
    )
    body = DEFAULT_CODEC.encode_entries([(0, 1, 1_700_000_000_000, "User:admin", record)])
    for payload in (True, False):
        batch = _same(DEFAULT_CODEC.entry_schema_json, [body], payload=payload)
        (row,) = batch.to_pylist()
        assert row["user_name"] == "alice" and row["mechanism"] == "SCRAM_SHA_256"
        assert row["iterations"] == 4096 and row["principal"] == "User:admin"
        text = repr(row)
        for secret in (salt, key):
            assert secret.hex() not in text and repr(secret) not in text
            assert record_to_json(record)["data"]["salt"] not in text
        if payload:
            assert json.loads(row["payload"])["salt"] == HIDDEN


# The columns each record field fills, as docs/audit.md documents them: a field not listed is in
# the column of its own name; None: in `payload` only.
DOCUMENTED_COLUMNS: dict[str, dict[str, str | None]] = {
    "TopicRecord": {"name": "topic_name"},
    "NamespaceRecord": {"name": "namespace", "parent_id": "parent_namespace_id"},
    "FeatureLevelRecord": {"name": "feature_name"},
    "RegisterBrokerRecord": {"end_points": None, "features": None},
    "BrokerRegistrationChangeRecord": {
        "fenced": "fencing_change",
        "in_controlled_shutdown": "controlled_shutdown_change",
    },
    "ConfigRecord": {"name": "config_name", "value": "config_value"},
    "AccessControlEntryRecord": {"id": "acl_id", "principal": "acl_principal", "host": "acl_host"},
    "RemoveAccessControlEntryRecord": {"id": "acl_id"},
    "UserScramCredentialRecord": {
        "name": "user_name",
        "salt": None,
        "stored_key": None,
        "server_key": None,
    },
    "RemoveUserScramCredentialRecord": {"name": "user_name"},
    "LeaderChangeRecord": {"leader_id": "leader"},
    "ClientWriteRecord": {"principal": None, "response": None},
    "VotersRecord": {"voters": None},
    "KRaftVersionRecord": {"kraft_version": None},
}


def _documented_row(entry: EntryTuple) -> dict[str, Any]:
    """The row docs/audit.md says an entry makes (its timestamp left out), from its JSON form."""
    offset, epoch, _, principal, record = entry
    name = type(record).__name__
    row: dict[str, Any] = dict.fromkeys(ARROW_SCHEMA.names)
    row.update(offset=offset, epoch=epoch, principal=principal, record_type=name, record_version=0)
    for field, value in record_to_json(record)["data"].items():
        column = DOCUMENTED_COLUMNS.get(name, {}).get(field, field)
        if column is None:
            continue
        unchanged = name == "PartitionChangeRecord" and field == "leader" and value == -2
        row[column] = None if unchanged else value  # a leader of -2: unchanged
    row.pop("timestamp")
    row.pop("payload")
    return row


def _check_documented(entries: list[EntryTuple], batch: pa.RecordBatch) -> None:
    got = batch.drop_columns(["timestamp", "payload"]).to_pylist()
    for row, entry in zip(got, entries, strict=True):
        assert row == _documented_row(entry), (type(entry[4]).__name__, row)
    micros = batch.column("timestamp").cast(pa.int64()).to_pylist()
    assert micros == [e[2] * 1000 for e in entries]


@given(st.lists(st.lists(entries, min_size=1, max_size=8), min_size=1, max_size=3), st.booleans())
def test_every_field_is_in_its_documented_column(
    blocks: list[list[EntryTuple]], payload: bool
) -> None:
    encoded = [DEFAULT_CODEC.encode_entries(block) for block in blocks]
    batch = _same(DEFAULT_CODEC.entry_schema_json, encoded, payload=payload)
    _check_documented([e for block in blocks for e in block], batch)


@pytest.mark.parametrize("kind", ["plain", "security", "quorum", "client_writes"])
def test_a_generated_log_fills_the_documented_columns(kind: str) -> None:
    generator = LogGenerator(seed=7, **({} if kind == "plain" else {kind: True}))
    flat: list[EntryTuple] = []
    blocks = []
    for batch in generator.batches(200):
        block = [
            (len(flat) + i, 3, 1_700_000_000_000 + len(flat), f"User:p{i % 2}", r)
            for i, r in enumerate(batch)
        ]
        flat.extend(block)
        blocks.append(DEFAULT_CODEC.encode_entries(block))
    kinds = {type(e[4]).__name__ for e in flat}
    assert len(kinds) > 5
    for payload in (True, False):
        converter = BlockConverter(DEFAULT_CODEC.entry_schema_json, payload=payload)
        for builder in (converter.builder(), _RowsBuilder(converter)):
            for count, body in blocks:
                builder.add(count, body)
            table = builder.finish()
            _check_documented(flat, table)
            if payload:
                shown = [json.loads(p) for p in table.column("payload").to_pylist()]
                assert shown == [_shown(e[4]) for e in flat]


def _generated_blocks(seed: int, batches: int) -> tuple[list[EntryTuple], list[tuple[int, bytes]]]:
    flat: list[EntryTuple] = []
    blocks = []
    for batch in LogGenerator(seed=seed, security=True).batches(batches):
        block = [(len(flat) + i, 1, 1_700_000_000_000, "User:p", r) for i, r in enumerate(batch)]
        flat.extend(block)
        blocks.append(DEFAULT_CODEC.encode_entries(block))
    return flat, blocks


def test_the_row_builder_counts_what_it_holds() -> None:
    _, blocks = _generated_blocks(4, 20)
    builder = _RowsBuilder(BlockConverter(DEFAULT_CODEC.entry_schema_json))
    assert builder.rows == 0
    (c0, b0), (c1, b1) = blocks[:2]
    builder.add(c0, b0)
    assert builder.rows == c0
    builder.add(c1, b1)
    assert builder.rows == c0 + c1
    assert builder.finish().num_rows == c0 + c1
    assert builder.rows == 0
    builder.add(c1, b1)
    assert builder.rows == c1 and builder.finish().num_rows == c1


def test_a_converter_fills_the_payload_unless_told_not_to() -> None:
    flat, blocks = _generated_blocks(4, 5)
    builder = BlockConverter(DEFAULT_CODEC.entry_schema_json).builder()
    for count, body in blocks:
        builder.add(count, body)
    payload = builder.finish().column("payload")
    assert payload.null_count == 0 and len(payload) == len(flat)


def test_without_a_columnar_plan_the_compiled_rows_build_the_same_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A writer schema the columnar decoder cannot plan for is read row by row by the compiled
    # block decoder (then by the codec if that cannot either): the same table.
    flat, blocks = _generated_blocks(6, 80)
    for payload in (True, False):
        columnar = BlockConverter(DEFAULT_CODEC.entry_schema_json, payload=payload)
        with monkeypatch.context() as patched:
            patched.setattr(columns, "column_plan", lambda *args, **kwargs: None)
            by_rows = BlockConverter(DEFAULT_CODEC.entry_schema_json, payload=payload)
        expected = _batches(columnar, columnar.builder(), blocks)
        rows_builder = by_rows.builder()
        assert isinstance(rows_builder, _RowsBuilder)
        got = _batches(by_rows, rows_builder, blocks)
        assert got[0] == expected[0]
        assert got[1].equals(expected[1])
        _check_documented(flat, got[1])
        with monkeypatch.context() as patched:
            patched.setattr(columns, "column_plan", lambda *args, **kwargs: None)
            patched.setattr(columns, "fast_decoder", lambda *args, **kwargs: None)
            by_codec = BlockConverter(DEFAULT_CODEC.entry_schema_json, payload=payload)
        assert _batches(by_codec, by_codec.builder(), blocks)[1].equals(expected[1])


def test_qualified_branch_names_read_like_bare_ones() -> None:
    # Branch names with their namespace (as Avro allows), fields reversed: read by name.
    writer = json.loads(DEFAULT_CODEC.entry_schema_json)
    namespace = writer["namespace"]
    for branch in writer["fields"][4]["type"]:
        branch["fields"].reverse()
        branch["name"] = f"{namespace}.{branch['name']}"
    _reads_back_by_name(writer, seed=9, batches=40)


def test_only_the_entrys_own_fields_are_never_null() -> None:
    own = {"offset", "epoch", "timestamp", "record_type", "record_version"}
    for field in ARROW_SCHEMA:
        assert field.nullable == (field.name not in own), field.name
        declared = f"`{field.name}` "
        (column,) = [c for c in SCHEMA_DDL.split(", ") if c.startswith(declared)]
        assert column.endswith(" NOT NULL") == (field.name in own), column
    assert SCHEMA_DDL.startswith("`offset` BIGINT NOT NULL, `epoch` INT NOT NULL, ")


def test_a_bytes_field_must_be_declared_secret_and_have_no_column(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refused(match: str) -> None:
        with pytest.raises(ValueError, match=match):
            BlockConverter(DEFAULT_CODEC.entry_schema_json)

    with monkeypatch.context() as patched:  # a bytes field not declared
        patched.setitem(SECRET_FIELDS, "UserScramCredentialRecord", frozenset({"salt"}))
        refused("bytes fields, and only they, are secret fields")
    with monkeypatch.context() as patched:  # a declared field that is not bytes
        patched.setitem(SECRET_FIELDS, "TopicRecord", frozenset({"name"}))
        refused("bytes fields, and only they, are secret fields")
    with monkeypatch.context() as patched:  # a secret given a column
        renamed = dict(columns._RENAMED["UserScramCredentialRecord"], salt="user_name")
        patched.setitem(columns._RENAMED, "UserScramCredentialRecord", renamed)
        refused("UserScramCredentialRecord.salt: bytes fields")
    with monkeypatch.context() as patched:  # a column the table does not have
        patched.setitem(columns._RENAMED, "TopicRecord", {"name": "no_such_column"})
        refused("TopicRecord.name has no column 'no_such_column'")
    BlockConverter(DEFAULT_CODEC.entry_schema_json)  # as shipped: accepted


def test_an_empty_batch_has_the_tables_schema() -> None:
    batch = columns.empty_batch()
    assert batch.num_rows == 0 and batch.schema == ARROW_SCHEMA


def test_a_branch_nothing_reads_is_refused_by_the_columnar_decoder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Without a by-name decoder for it, a renamed branch is refused when an entry uses it;
    # entries of the other branches still decode.
    old = RecordCodec(list(CURRENT_SCHEMAS))
    schema = json.loads(old.entry_schema_json)
    renamed = schema["fields"][4]["type"][0]
    renamed["name"] = renamed["name"][:-1] + "9"
    first_type = CURRENT_SCHEMAS[0].python_class
    sample = [r for b in LogGenerator(seed=3).batches(40) for r in b]
    unread: list[EntryTuple] = [(0, 0, 5, None, next(r for r in sample if type(r) is first_type))]
    others: list[EntryTuple] = [
        (i, 0, 5, None, r) for i, r in enumerate(r for r in sample if type(r) is not first_type)
    ]
    monkeypatch.setattr(BlockConverter, "_dict_decoders", lambda self, writer: {})
    builder = BlockConverter(json.dumps(schema)).builder()
    assert not isinstance(builder, _RowsBuilder)
    with pytest.raises(UnknownRecordTypeError):
        builder.add(*old.encode_entries(unread))
    assert builder.add(*old.encode_entries(others)) == (0, len(others) - 1)
    _check_documented(others, builder.finish())
