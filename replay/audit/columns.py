"""The audit table's columns, and decoding of verified log blocks straight into Arrow batches.

Pure pyarrow, no Spark: the data source (`replay.audit.source`) calls `BlockConverter` inside
its Python workers. Blocks are decoded by the compiled block decoder when it is built, with each
record branch "decoded" into a list `[type index, *Avro values]` instead of a record object;
rows are then grouped by record type, each group's fields are turned into Arrow arrays at once
(`zip(*rows)`), and one `take` puts the rows back into log order. Without the compiled decoder
(or for a segment whose writer schema it cannot read) the codec decodes records, which are
turned back into Avro values: slower, same result.

The column layout is documented in `docs/audit.md`; `SCHEMA_DDL` is its Spark form.
"""

from __future__ import annotations

import base64
import json
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from records.codec import DEFAULT_CODEC, RecordCodec
from records.errors import RecordError
from records.fast_decode import FieldColumn, TypeColumns, column_plan, fast_decoder
from records.model import (
    LEADER_UNCHANGED,
    AclOperation,
    AclPermissionType,
    ConfigResourceType,
    ControlledShutdownChange,
    FencingChange,
    Mode,
    PatternType,
    ResourceType,
    ScramMechanism,
)
from records.schemas import UUID_TYPE, RecordSchema

# (column, Arrow type, Spark DDL type); every column is nullable except the entry's own fields.
_INT_LIST = pa.list_(pa.field("element", pa.int32()))
COLUMNS: tuple[tuple[str, pa.DataType, str], ...] = (
    ("offset", pa.int64(), "BIGINT"),
    ("epoch", pa.int32(), "INT"),
    ("timestamp", pa.timestamp("us", tz="UTC"), "TIMESTAMP"),
    ("principal", pa.string(), "STRING"),
    ("record_type", pa.string(), "STRING"),
    ("record_version", pa.int32(), "INT"),
    ("topic_id", pa.string(), "STRING"),
    ("topic_name", pa.string(), "STRING"),
    ("namespace", pa.string(), "STRING"),
    ("namespace_id", pa.string(), "STRING"),
    ("parent_namespace_id", pa.string(), "STRING"),
    ("partition_id", pa.int32(), "INT"),
    ("replicas", _INT_LIST, "ARRAY<INT>"),
    ("isr", _INT_LIST, "ARRAY<INT>"),
    ("removing_replicas", _INT_LIST, "ARRAY<INT>"),
    ("adding_replicas", _INT_LIST, "ARRAY<INT>"),
    ("leader", pa.int32(), "INT"),
    ("leader_epoch", pa.int32(), "INT"),
    ("partition_epoch", pa.int32(), "INT"),
    ("mode", pa.string(), "STRING"),
    ("partition_count", pa.int32(), "INT"),
    ("delete_after_ms", pa.int64(), "BIGINT"),
    ("created_ms", pa.int64(), "BIGINT"),
    ("resource_type", pa.string(), "STRING"),
    ("resource_name", pa.string(), "STRING"),
    ("config_name", pa.string(), "STRING"),
    ("config_value", pa.string(), "STRING"),
    ("broker_id", pa.int32(), "INT"),
    ("broker_epoch", pa.int64(), "BIGINT"),
    ("incarnation_id", pa.string(), "STRING"),
    ("rack", pa.string(), "STRING"),
    ("fenced", pa.bool_(), "BOOLEAN"),
    ("in_controlled_shutdown", pa.bool_(), "BOOLEAN"),
    ("fencing_change", pa.string(), "STRING"),
    ("controlled_shutdown_change", pa.string(), "STRING"),
    ("feature_name", pa.string(), "STRING"),
    ("feature_level", pa.int32(), "INT"),
    ("acl_id", pa.string(), "STRING"),
    ("pattern_type", pa.string(), "STRING"),
    ("acl_principal", pa.string(), "STRING"),
    ("acl_host", pa.string(), "STRING"),
    ("operation", pa.string(), "STRING"),
    ("permission_type", pa.string(), "STRING"),
    ("user_name", pa.string(), "STRING"),
    ("mechanism", pa.string(), "STRING"),
    ("iterations", pa.int32(), "INT"),
    ("voters", _INT_LIST, "ARRAY<INT>"),
    ("granting_voters", _INT_LIST, "ARRAY<INT>"),
    ("client_id", pa.string(), "STRING"),
    ("sequence", pa.int64(), "BIGINT"),
    ("api_key", pa.int32(), "INT"),
    ("payload", pa.string(), "STRING"),
)
_NOT_NULL = frozenset(("offset", "epoch", "timestamp", "record_type", "record_version"))

COLUMN_NAMES: tuple[str, ...] = tuple(name for name, _, _ in COLUMNS)
_DDL = {
    name: f"`{name}` {ddl}{' NOT NULL' if name in _NOT_NULL else ''}" for name, _, ddl in COLUMNS
}
SCHEMA_DDL: str = ", ".join(_DDL.values())
"""The Spark schema of the table, as DDL."""


def schema_ddl(columns: Sequence[str]) -> str:
    """The Spark DDL of some of the table's columns, in the order given (KeyError: unknown)."""
    return ", ".join(_DDL[name] for name in columns)


ARROW_SCHEMA: pa.Schema = pa.schema(
    [pa.field(name, kind, nullable=name not in _NOT_NULL) for name, kind, _ in COLUMNS]
)
"""The Arrow schema of the batches (what Spark derives from `SCHEMA_DDL`, timezone UTC)."""

_INDEX = {name: i for i, name in enumerate(COLUMN_NAMES)}

# Record field -> column, where the column name differs from the field name.
_RENAMED: dict[str, dict[str, str | None]] = {
    "FeatureLevelRecord": {"name": "feature_name"},
    "RegisterBrokerRecord": {"end_points": None, "features": None},
    "BrokerRegistrationChangeRecord": {
        "fenced": "fencing_change",
        "in_controlled_shutdown": "controlled_shutdown_change",
    },
    "NamespaceRecord": {"name": "namespace", "parent_id": "parent_namespace_id"},
    "TopicRecord": {"name": "topic_name"},
    "ConfigRecord": {"name": "config_name", "value": "config_value"},
    # An ACL's principal and host are whom it is for; `principal` is who wrote the entry.
    "AccessControlEntryRecord": {"id": "acl_id", "principal": "acl_principal", "host": "acl_host"},
    "RemoveAccessControlEntryRecord": {"id": "acl_id"},
    "UserScramCredentialRecord": {
        "name": "user_name",
        "salt": None,
        "stored_key": None,
        "server_key": None,
    },
    "RemoveUserScramCredentialRecord": {"name": "user_name"},
    # The quorum's new leader goes in `leader`, as a partition's leader does.
    "LeaderChangeRecord": {"leader_id": "leader"},
    # The entry's `principal` is the writer's already; the stored answer is opaque bytes.
    "ClientWriteRecord": {"principal": None, "response": None},
    # The quorum's voter set and kraft.version are read from the payload.
    "VotersRecord": {"voters": None},
    "KRaftVersionRecord": {"kraft_version": None},
}
"""Fields whose column has another name; None: the field is in `payload` only."""

SECRET_FIELDS: dict[str, frozenset[str]] = {
    "UserScramCredentialRecord": frozenset({"salt", "stored_key", "server_key"}),
    "ClientWriteRecord": frozenset({"response"}),
}
"""Fields never shown: no column, and "(hidden)" in `payload`. Every bytes field of a record
must be listed here (a new one fails `_TypePlan`), so no salt or key reaches the audit table."""

HIDDEN = "(hidden)"
"""What `payload` holds for a secret field."""

_ENUM_NAMES: dict[type[IntEnum], dict[int, str]] = {
    enum: {int(m): m.name for m in enum}
    for enum in (
        Mode,
        ConfigResourceType,
        FencingChange,
        ControlledShutdownChange,
        ResourceType,
        PatternType,
        AclOperation,
        AclPermissionType,
        ScramMechanism,
    )
}


def _enum_name(enum: type[IntEnum] | None) -> dict[int, str]:
    if enum is None:  # pragma: no cover - callers pass enum fields only
        raise ValueError("not an enum field")
    return _ENUM_NAMES.get(enum) or {int(m): m.name for m in enum}


def _uuid_text(value: bytes) -> str:
    return base64.urlsafe_b64encode(value).rstrip(b"=").decode("ascii")


_OFFSETS_24: dict[int, pa.Buffer] = {}


def uuid_strings(values: Sequence[bytes]) -> pa.Array:
    """Kafka's 22-char text of many 16-byte ids in one base64 call.

    Each id is padded with two zero bytes to 18 (a multiple of 3), so the ids encode
    independently, 24 characters each; the first 22 are exactly the unpadded text of the id.
    """
    n = len(values)
    encoded = base64.urlsafe_b64encode(b"\0\0".join(values) + b"\0\0")
    offsets = _OFFSETS_24.get(n)
    if offsets is None:
        offsets = pa.py_buffer(array("i", range(0, 24 * n + 1, 24)))
        if len(_OFFSETS_24) < 64:
            _OFFSETS_24[n] = offsets
    padded = pa.StringArray.from_buffers(n, offsets, pa.py_buffer(encoded))
    return pc.utf8_slice_codeunits(padded, 0, 22)


_STR_LIST = pa.list_(pa.string())
# Literals as Arrow scalars: compute functions given Python strings convert them on every call,
# and that conversion tries (and, without numpy, fails) an import each time.
_Q, _EMPTY, _NULL = pa.scalar('"'), pa.scalar(""), pa.scalar("null")
_OPEN, _CLOSE, _COMMA = pa.scalar("["), pa.scalar("]"), pa.scalar(",")
_BRACE = pa.scalar("}")
_UNSAFE = r"[^ !#-\[\]-~]"
"""Characters a JSON string must escape, and non-ASCII (left to `json.dumps` as well)."""


def _quoted(values: pa.Array) -> pa.Array:
    """JSON text of a string array (null -> "null"), escaping in Python only when needed."""
    if values.null_count == len(values):
        return pa.repeat(_NULL, len(values))
    if pc.any(pc.match_substring_regex(values, _UNSAFE)).as_py():
        text = [json.dumps(v) for v in values.to_pylist()]
        return pa.array(text, pa.string())
    return pc.fill_null(pc.binary_join_element_wise(_Q, values, _Q, _EMPTY), _NULL)


def _json_text(kind: str, typed: pa.Array | None, raw: Sequence[Any]) -> pa.Array:
    """JSON text of each value of one field (as `records.json_form` writes it)."""
    if kind in ("uuid", "uuid?", "enum", "enum?") or (
        kind == "plain" and typed is not None and pa.types.is_string(typed.type)
    ):
        if typed is None:  # pragma: no cover - these kinds always have a column
            raise ValueError(kind)
        return _quoted(typed)
    if kind == "leader":
        return pa.array(raw, pa.int32()).cast(pa.string())
    if kind == "list":
        if typed is None:  # pragma: no cover
            raise ValueError(kind)
        joined = pc.binary_join(typed.cast(_STR_LIST), _COMMA)
        return pc.fill_null(pc.binary_join_element_wise(_OPEN, joined, _CLOSE, _EMPTY), _NULL)
    if kind == "structs":
        return pa.array([_structs_json(v) for v in raw], pa.string())
    if kind == "secret":
        return pc.if_else(pa.array([v is None for v in raw]), _NULL, _HIDDEN)
    if typed is None:
        typed = pa.array(raw)
    return pc.fill_null(typed.cast(pa.string()), _NULL)


@dataclass(frozen=True, slots=True)
class _FieldPlan:
    """How one Avro field of a record type becomes a column and a JSON member."""

    name: str
    column: str | None
    kind: str
    """plain, uuid, uuid?, enum, enum?, list, structs, secret (bytes: never shown), or leader
    (PartitionChange: -2 = null)."""
    enum_names: dict[int, str] | None


def _kind(avro_type: Any, enum: type[IntEnum] | None) -> str:
    optional = isinstance(avro_type, list) and avro_type[0] == "null"
    inner = avro_type[1] if optional else avro_type
    if inner == "bytes":
        return "secret"
    if inner == UUID_TYPE:
        return "uuid?" if optional else "uuid"
    if enum is not None:
        return "enum?" if optional else "enum"
    if isinstance(inner, dict) and inner.get("type") == "array":
        return "list" if inner["items"] == "int" else "structs"
    return "plain"


def _avro_arrow_type(avro_type: Any) -> pa.DataType:
    inner = avro_type[1] if isinstance(avro_type, list) else avro_type
    if not isinstance(inner, str):
        return pa.string()  # arrays of structs: payload only
    return {"int": pa.int32(), "long": pa.int64(), "boolean": pa.bool_()}.get(inner, pa.string())


class _TypePlan:
    """A record type's fields as columns and as the members of its JSON payload."""

    def __init__(self, schema: RecordSchema) -> None:
        self.schema = schema
        self.type_name = schema.name
        renamed = _RENAMED.get(schema.name, {})
        self.fields: list[_FieldPlan] = []
        self.arrow_types: list[pa.DataType] = []
        secrets = SECRET_FIELDS.get(schema.name, frozenset())
        for f in schema.fields:
            column = renamed.get(f.name, f.name)
            if column is not None and column not in _INDEX:
                raise ValueError(f"{schema.name}.{f.name} has no column {column!r}")
            kind = _kind(f.type, f.enum)
            if (kind == "secret") != (f.name in secrets) or (kind == "secret" and column):
                raise ValueError(
                    f"{schema.name}.{f.name}: bytes fields, and only they, are secret fields "
                    "(listed in SECRET_FIELDS, without a column)"
                )
            if schema.name == "PartitionChangeRecord" and f.name == "leader":
                kind = "leader"
            names = _enum_name(f.enum) if f.enum is not None else None
            self.fields.append(_FieldPlan(f.name, column, kind, names))
            self.arrow_types.append(
                COLUMNS[_INDEX[column]][1] if column is not None else _avro_arrow_type(f.type)
            )
        # The literal text around each member: '{"a":', ',"b":', ..., '}'.
        self.literals = [
            pa.scalar(("{" if i == 0 else ",") + json.dumps(f.name) + ":")
            for i, f in enumerate(self.fields)
        ]
        self.empty = pa.scalar("{}")

    def payload(self, texts: list[pa.Array], size: int) -> pa.Array:
        """The JSON payload of `size` rows from the JSON text of each field."""
        if not texts:
            return pa.repeat(self.empty, size)
        pieces: list[Any] = []
        for literal, text in zip(self.literals, texts, strict=True):
            pieces.append(literal)
            pieces.append(text)
        pieces.append(_BRACE)
        return pc.binary_join_element_wise(*pieces, _EMPTY)


_HIDDEN_JSON = json.dumps(HIDDEN)
_HIDDEN = pa.scalar(_HIDDEN_JSON)


def _structs_json(values: Sequence[Any] | None) -> str:
    """JSON text of a field read as a Python value: an array of structs, or a secret."""
    if values is None:
        return "null"
    if isinstance(values, bytes | bytearray | memoryview):
        return _HIDDEN_JSON
    return json.dumps([dict(v) for v in values], separators=(",", ":"))


def _column_array(kind: str, values: Sequence[Any], names: dict[int, str] | None) -> pa.Array:
    """The Arrow array of one field's values for rows of one record type."""
    if kind == "uuid":
        return uuid_strings(values)
    if kind == "uuid?":
        return pa.array([None if v is None else _uuid_text(v) for v in values], pa.string())
    if kind in ("enum", "enum?"):
        table = names or {}
        return pa.array([None if v is None else table.get(v, str(v)) for v in values], pa.string())
    if kind == "leader":
        return pa.array([None if v == LEADER_UNCHANGED else v for v in values], pa.int32())
    if kind == "list":
        return pa.array(values, _INT_LIST)
    raise ValueError(f"no column for {kind}")  # pragma: no cover


class BlockConverter:
    """Turns block bodies of one segment (one writer schema) into Arrow record batches."""

    def __init__(
        self, writer_schema_json: str, codec: RecordCodec = DEFAULT_CODEC, *, payload: bool = True
    ) -> None:
        self.codec = codec
        self.with_payload = payload
        """False: leave `payload` null (a third of the cost, for scans that do not read it)."""
        self.plans = [_TypePlan(s) for s in codec.schemas]
        self._by_branch = {s.branch_name: i for i, s in enumerate(codec.schemas)}
        self._names = [pa.scalar(p.type_name) for p in self.plans]
        self._versions = [s.version for s in codec.schemas]
        writer = json.loads(writer_schema_json)
        self._columns = self._make_columns(writer)
        self._fast = self._make_fast(writer) if self._columns is None else None
        self._array = codec.reader_array_schema(writer_schema_json)

    def builder(self) -> BatchBuilder:
        """An empty batch to add whole blocks to (one per scan: it holds the rows added)."""
        if self._columns is not None:
            return _ColumnarBuilder(self._columns.builder())
        return _RowsBuilder(self)

    def _make_columns(self, writer: Any) -> Any:
        """The compiled columnar plan for this writer schema, or None (then: rows, in Python)."""
        types: list[TypeColumns] = []
        for plan in self.plans:
            fields: list[FieldColumn] = []
            for f, literal in zip(plan.fields, plan.literals, strict=True):
                semantic = _semantic(f, plan.arrow_types[len(fields)])
                if semantic is None:
                    return None
                column = -1 if f.column is None else _INDEX[f.column]
                fields.append((semantic, column, str(literal.as_py()), f.enum_names))
            types.append((plan.type_name, self._versions[len(types)], fields))
        tags = {s.branch_name: i for i, s in enumerate(self.codec.schemas)}
        by_dict = self._dict_decoders(writer)
        if by_dict is None:
            return None
        return column_plan(
            writer,
            {s.branch_name: s for s in self.codec.schemas},
            tags,
            by_dict,
            kinds=[_COLUMN_KIND[kind] for _, kind, _ in COLUMNS],
            types=types,
            payload=self.with_payload,
            structs_json=_structs_json,
            json_dumps=json.dumps,
        )

    def _make_fast(self, writer: Any) -> Any:
        current = {s.branch_name: s for s in self.codec.schemas}
        taggers = {s.branch_name: [i].__add__ for i, s in enumerate(self.codec.schemas)}
        by_dict = self._dict_decoders(writer)
        if by_dict is None:
            return None
        return fast_decoder(writer, current, taggers, by_dict)  # type: ignore[arg-type]

    def _dict_decoders(
        self, writer: Any
    ) -> dict[str, Callable[[dict[str, Any]], list[Any]]] | None:
        """Per record branch of the writer schema, the dict path (None: not an entry schema)."""
        by_dict: dict[str, Callable[[dict[str, Any]], list[Any]]] = {}
        try:
            branches = writer["fields"][4]["type"]
            namespace = str(writer.get("namespace", ""))
            for branch in branches:
                name = str(branch["name"]) if isinstance(branch, dict) else str(branch)
                if "." not in name and namespace:
                    name = f"{namespace}.{name}"
                by_dict[name] = self._via_record(name)
        except (KeyError, IndexError, TypeError):
            return None
        return by_dict

    def _via_record(self, branch: str) -> Callable[[dict[str, Any]], list[Any]]:
        """For an older record version: decode (upcasting) and re-encode as today's values."""
        codec = self.codec

        def convert(value: dict[str, Any]) -> list[Any]:
            record = codec.decode_record(branch, value)
            current, avro = codec.encode_record(record)
            return [self._by_branch[current], *avro.values()]

        return convert

    def rows(
        self, count: int, body: bytes
    ) -> tuple[list[int], list[int], list[int], list[Any], list[list[Any]]]:
        """(offsets, epochs, timestamps, principals, [tag, *values] rows) of a block body."""
        if self._fast is not None:
            offsets, epochs, timestamps, principals, rows = self._fast.decode(count, body)
            return offsets, epochs, timestamps, principals, rows
        block = self.codec.decode_block(count, body, self._array)
        by_branch = self._by_branch
        encode = self.codec.encode_record
        out = []
        for record in block.records:
            branch, avro = encode(record)
            out.append([by_branch[branch], *avro.values()])
        return block.offsets, block.epochs, block.timestamps, block.principals, out

    def _add_group(self, tag: int, group: list[list[Any]], chunks: list[list[pa.Array]]) -> None:
        """Append the column chunks (record type onwards) of rows of one record type."""
        plan = self.plans[tag]
        size = len(group)
        fields = list(zip(*group, strict=True))
        filled = set()
        texts = []
        for i, f in enumerate(plan.fields, 1):
            typed: pa.Array | None = None
            if f.kind == "plain":
                typed = pa.array(fields[i], plan.arrow_types[i - 1])
            elif f.kind not in ("structs", "secret"):
                typed = _column_array(f.kind, fields[i], f.enum_names)
            if f.column is not None and typed is not None:
                index = _INDEX[f.column]
                chunks[index].append(typed)
                filled.add(index)
            if self.with_payload:
                texts.append(_json_text(f.kind, typed, fields[i]))
        for index in range(6, len(COLUMN_NAMES) - 1):
            if index not in filled:
                chunks[index].append(pa.nulls(size, COLUMNS[index][1]))
        chunks[4].append(pa.repeat(self._names[tag], size))
        chunks[5].append(pa.repeat(pa.scalar(self._versions[tag], pa.int32()), size))
        if self.with_payload:
            chunks[-1].append(plan.payload(texts, size))
        else:
            chunks[-1].append(pa.nulls(size, pa.string()))

    def batch(
        self,
        offsets: list[int],
        epochs: list[int],
        timestamps: list[int],
        principals: list[Any],
        rows: list[list[Any]],
    ) -> pa.RecordBatch:
        """One Arrow batch of decoded entries, in the order given."""
        n = len(rows)
        tags = [row[0] for row in rows]
        kinds = set(tags)
        if len(kinds) == 1:
            groups = [(tags[0], rows)]
            order = None
        else:
            order = sorted(range(n), key=tags.__getitem__)
            groups = []
            start = 0
            while start < n:
                tag = tags[order[start]]
                end = start
                while end < n and tags[order[end]] == tag:
                    end += 1
                groups.append((tag, [rows[i] for i in order[start:end]]))
                start = end
        chunks: list[list[pa.Array]] = [[] for _ in COLUMN_NAMES]
        for tag, group in groups:
            self._add_group(tag, group, chunks)
        if order is not None:
            # The groups are in type order: put the entry columns in the same order.
            offsets = [offsets[i] for i in order]
            epochs = [epochs[i] for i in order]
            timestamps = [timestamps[i] for i in order]
            principals = [principals[i] for i in order]
        columns: list[pa.Array] = [
            pa.array(offsets, pa.int64()),
            pa.array(epochs, pa.int32()),
            pa.array([t * 1000 for t in timestamps], pa.int64()).cast(COLUMNS[2][1]),
            pa.array(principals, pa.string()),
        ]
        for index in range(4, len(COLUMN_NAMES)):
            columns.append(_concat(chunks[index], COLUMNS[index][1]))
        result = pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
        if order is not None:
            inverse = [0] * n
            for position, i in enumerate(order):
                inverse[i] = position
            result = result.take(pa.array(inverse, pa.int32()))
        return result


def _semantic(f: _FieldPlan, arrow_type: pa.DataType) -> str | None:
    """How the columnar decoder treats a field (see `_fastdecode.ColumnPlan`); None: it cannot."""
    if f.kind in ("uuid", "uuid?"):
        return "uuid"
    if f.kind in ("enum", "enum?"):
        return "enum"
    if f.kind == "leader":
        return "leader"
    if f.kind == "list":
        return "intlist"
    if f.kind in ("structs", "secret"):
        # Read as a Python value and given to `structs_json`, which hides a secret.
        return None if f.column is not None else "py"
    if pa.types.is_integer(arrow_type):
        return "int"
    if pa.types.is_boolean(arrow_type):
        return "bool"
    if pa.types.is_string(arrow_type):
        return "str"
    return None


def _kind_name(dtype: pa.DataType) -> str:
    if pa.types.is_int32(dtype):
        return "i32"
    if pa.types.is_int64(dtype) or pa.types.is_timestamp(dtype):
        return "i64"
    if pa.types.is_boolean(dtype):
        return "bool"
    if pa.types.is_string(dtype):
        return "str"
    if pa.types.is_list(dtype):
        return "list"
    raise ValueError(f"no column kind for {dtype}")  # pragma: no cover


_COLUMN_KIND: dict[pa.DataType, str] = {kind: _kind_name(kind) for _, kind, _ in COLUMNS}
_INT32 = pa.int32()


def _arrow_column(dtype: pa.DataType, parts: tuple[Any, ...]) -> pa.Array:
    """An Arrow array over the buffers of one finished column of the columnar decoder."""
    size, nulls, validity, values, offsets = parts
    valid = None if validity is None else pa.py_buffer(validity)
    data = pa.py_buffer(values)
    if pa.types.is_list(dtype):
        child = pa.Array.from_buffers(_INT32, len(values) // 4, [None, data], 0)
        return pa.Array.from_buffers(
            dtype, size, [valid, pa.py_buffer(offsets)], nulls, children=[child]
        )
    if offsets is not None:
        return pa.Array.from_buffers(dtype, size, [valid, pa.py_buffer(offsets), data], nulls)
    return pa.Array.from_buffers(dtype, size, [valid, data], nulls)


class BatchBuilder:
    """Whole blocks in, one Arrow batch out (see `BlockConverter.builder`)."""

    @property
    def rows(self) -> int:
        """Entries added since the last `finish`."""
        raise NotImplementedError

    def add(self, count: int, body: bytes) -> tuple[int, int]:
        """Add a verified block body's entries; the first and last offset they hold."""
        raise NotImplementedError

    def finish(self) -> pa.RecordBatch:
        """The entries added since the last `finish`, as one batch in log order."""
        raise NotImplementedError


class _ColumnarBuilder(BatchBuilder):
    """Blocks decoded by the compiled decoder straight into Arrow buffers."""

    def __init__(self, builder: Any) -> None:
        self._builder = builder

    @property
    def rows(self) -> int:
        """Entries added since the last `finish`."""
        count: int = self._builder.rows
        return count

    def add(self, count: int, body: bytes) -> tuple[int, int]:
        try:
            first, last = self._builder.add(body, count)
        except RecordError:
            self._builder.clear()
            raise
        except (ValueError, TypeError, KeyError, IndexError, UnicodeDecodeError) as exc:
            self._builder.clear()
            raise RecordError(f"block body does not decode: {exc}") from exc
        return int(first), int(last)

    def finish(self) -> pa.RecordBatch:
        columns = [
            _arrow_column(kind, parts)
            for (_, kind, _), parts in zip(COLUMNS, self._builder.finish(), strict=True)
        ]
        return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


class _RowsBuilder(BatchBuilder):
    """Blocks decoded into rows (`BlockConverter.rows`), turned into columns per batch."""

    def __init__(self, converter: BlockConverter) -> None:
        self._converter = converter
        self._parts: list[list[Any]] = [[], [], [], [], []]
        self._rows = 0

    @property
    def rows(self) -> int:
        """Entries added since the last `finish`."""
        return self._rows

    def add(self, count: int, body: bytes) -> tuple[int, int]:
        decoded: tuple[list[Any], ...] = self._converter.rows(count, body)
        for column, values in zip(self._parts, decoded, strict=True):
            column.extend(values)
        self._rows += count
        offsets = decoded[0]
        return offsets[0], offsets[-1]

    def finish(self) -> pa.RecordBatch:
        parts, self._parts = self._parts, [[], [], [], [], []]
        self._rows = 0
        return self._converter.batch(*parts)


def _concat(chunks: list[pa.Array], dtype: pa.DataType) -> pa.Array:
    if len(chunks) == 1:
        return chunks[0]
    return pa.concat_arrays([c.cast(dtype) if c.type != dtype else c for c in chunks])


def empty_batch() -> pa.RecordBatch:
    """A batch with the table's schema and no rows."""
    return pa.RecordBatch.from_pylist([], schema=ARROW_SCHEMA)
