"""The compiled block decoder and encoder, when they are built, and the programs they run.

`records._fastdecode` (Cython, built by `setup.py` when a C compiler is there) reads a block
body in one pass straight into records: no dict per entry or per record, no tagged union
tuples. It reads what the segment's writer schema says, so this module compiles that schema
into a program for it, and gives each record branch a positional decoder: the same field
conversions as `records.codec`'s dict decoders, reading a list in writer field order.

A branch this code cannot read positionally (an older version, upcast through the dict path,
or fields in another order) goes through the dict decoder; an unknown branch raises
`UnknownRecordTypeError` when an entry uses it, as the fastavro path does. A writer schema
whose entry is not shaped as this code writes it gets no fast decoder at all: the caller then
uses fastavro. Without the extension, `AVAILABLE` is False and everything uses fastavro.

The encoder (`fast_encoder`) runs the same programs the other way for the schema this code
writes: each record's checked values (the codec's generated `values(record)`) straight into a
block body, byte for byte what fastavro writes, without a dict per entry or per record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MemberDescriptorType
from typing import Any, NoReturn, TypeVar

from records.entry import LogEntry
from records.errors import RecordError, UnknownRecordTypeError
from records.model import Record
from records.schemas import RecordSchema

logger = logging.getLogger(__name__)

try:
    from records import _fastdecode  # type: ignore[attr-defined]  # optional C extension
except ImportError:  # no compiler at install time: the fastavro path is used
    _fastdecode = None

AVAILABLE: bool = _fastdecode is not None
"""Whether the compiled decoder is built in this installation."""

DictDecoder = Callable[[dict[str, Any]], Record]
ListDecoder = Callable[[list[Any]], Record]
Block = tuple[list[int], list[int], list[int], list[str | None], list[Record]]

_PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))
_ENTRY_HEAD = (("offset", "long"), ("epoch", "int"), ("timestamp", "long"))


class _Programs:
    """Compiles Avro schemas into the decoder's programs, resolving named types."""

    def __init__(self) -> None:
        self.named: dict[str, tuple[Any, ...]] = {}

    def compile(self, schema: Any, namespace: str = "") -> tuple[Any, ...]:
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return (schema,)
            found = self.named.get(schema) or self.named.get(f"{namespace}.{schema}")
            if found is None:
                raise ValueError(f"unknown named type {schema!r}")
            return found
        if isinstance(schema, list):
            branches = [self.compile(s, namespace) for s in schema]
            names = [self._record_name(s, namespace) for s in schema]
            return ("union", tuple(branches), tuple(names))
        if not isinstance(schema, dict):
            raise ValueError(f"not an Avro schema: {schema!r}")
        kind = schema["type"]
        if kind in _PRIMITIVES:
            return (kind,)
        if kind == "array":
            return ("array", self.compile(schema["items"], namespace))
        if kind == "map":
            return ("map", self.compile(schema["values"], namespace))
        name, namespace = self._full_name(schema, namespace)
        if kind == "fixed":
            program: tuple[Any, ...] = ("fixed", int(schema["size"]))
        elif kind == "enum":
            program = ("enum", tuple(schema["symbols"]))
        elif kind == "record":
            fields = schema["fields"]
            program = (
                "record",
                tuple(f["name"] for f in fields),
                tuple(self.compile(f["type"], namespace) for f in fields),
            )
        else:
            raise ValueError(f"unknown Avro type {kind!r}")
        self.named[name] = program
        return program

    @staticmethod
    def _full_name(schema: Mapping[str, Any], namespace: str) -> tuple[str, str]:
        name = str(schema["name"])
        if "." in name:
            return name, name.rsplit(".", 1)[0]
        namespace = str(schema.get("namespace", namespace))
        return (f"{namespace}.{name}" if namespace else name), namespace

    def _record_name(self, schema: Any, namespace: str) -> str | None:
        """The full name fastavro tags a record chosen in a union with; None for the rest."""
        if isinstance(schema, dict) and schema.get("type") == "record":
            return self._full_name(schema, namespace)[0]
        if isinstance(schema, str) and schema not in _PRIMITIVES:
            full = schema if "." in schema else f"{namespace}.{schema}"
            if self.named.get(full, ("",))[0] == "record":
                return full
        return None


_T = TypeVar("_T")


def _entry_branches(
    writer_entry_schema: Any,
) -> list[tuple[tuple[Any, ...], str, tuple[str, ...]]] | None:
    """(compiled program, full name, field names) of each record branch of an entry schema.

    None for an entry not shaped as this code writes it (offset, epoch, timestamp, principal,
    record union) or a branch that is not a record. Malformed schemas raise KeyError,
    TypeError, ValueError or IndexError.
    """
    fields = writer_entry_schema["fields"]
    head = tuple((f["name"], f["type"]) for f in fields[:3])
    if (
        len(fields) != 5
        or head != _ENTRY_HEAD
        or fields[3]["name"] != "principal"
        or fields[3]["type"] != ["null", "string"]
        or fields[4]["name"] != "record"
        or not isinstance(fields[4]["type"], list)
    ):
        return None
    programs = _Programs()
    namespace = str(writer_entry_schema.get("namespace", ""))
    branches = []
    for branch_schema in fields[4]["type"]:
        program = programs.compile(branch_schema, namespace)
        if program[0] != "record":
            return None
        name = programs._full_name(branch_schema, namespace)[0]
        branches.append((program[2], name, program[1]))
    return branches


def _is_current(current: Mapping[str, RecordSchema], name: str, names: tuple[str, ...]) -> bool:
    """Whether a written branch has today's schema's fields, in today's order."""
    schema = current.get(name)
    return schema is not None and names == tuple(f.name for f in schema.fields)


def _by_name(
    names: tuple[str, ...], convert: Callable[[dict[str, Any]], _T]
) -> Callable[[list[Any]], _T]:
    """A decoder of a branch's positional values through its by-name (dict) decoder."""

    def decode_by_name(values: list[Any]) -> _T:
        return convert(dict(zip(names, values, strict=True)))

    return decode_by_name


def _unknown(branch: str) -> Callable[[list[Any]], NoReturn]:
    """A decoder that refuses a branch this code cannot read."""

    def refuse(values: list[Any]) -> NoReturn:
        raise UnknownRecordTypeError(branch)

    return refuse


PLAIN, LOOKUP, INTS = 0, 1, 2
"""A field's conversion in a `Maker` (`records._fastdecode`'s C_PLAIN, C_LOOKUP, C_INTS)."""

Maker = tuple[type, list[tuple[str, int, Any, bool]]]
"""A record class and, per field in schema order: its slot, conversion, table, optional."""

Branch = tuple[tuple[Any, ...], ListDecoder] | tuple[tuple[Any, ...], ListDecoder, Maker | None]
"""A record branch of the entry union: its fields' programs, its positional decoder, and the
`Maker` that makes the same record in C where its conversions allow (None: the decoder)."""


def maker_of(schema: RecordSchema) -> Maker | None:
    """How the compiled decoder makes `schema`'s record itself, if every conversion is a lookup.

    Each field is stored as it is read (no codec), or through its codec's `Lookup`; a field
    whose codec is something else (an array of structs) leaves the record to the positional
    decoder. The record is the same object that decoder makes (`tests/records` compares them).
    """
    cls = schema.python_class
    if cls is None or cls.__new__ is not object.__new__:
        return None
    fields: list[tuple[str, int, Any, bool]] = []
    for f in schema.fields:
        if not isinstance(cls.__dict__.get(f.name), MemberDescriptorType):
            return None  # not a slot of the class itself: the decoder stores it
        if f.codec is None:
            fields.append((f.name, PLAIN, None, False))
            continue
        lookup = f.codec.compiled
        if lookup is None:
            return None
        fields.append((f.name, INTS if lookup.ints else LOOKUP, lookup.table, lookup.optional))
    return cls, fields


_ENTRY_MAKER: Any = (
    None
    if _fastdecode is None
    else _fastdecode.EntryMaker(LogEntry, ("offset", "epoch", "timestamp", "principal", "record"))
)
"""Makes `LogEntry` objects of a decoded block's lists in C (`FastBlockDecoder.entries`)."""


class FastBlockDecoder:
    """The compiled decoder for one writer schema, with a decoder per record branch."""

    def __init__(self, branches: list[Branch], names: Sequence[str] = ()) -> None:
        if _fastdecode is None:  # pragma: no cover - built only with the extension
            raise RuntimeError("the compiled decoder is not built")
        self._decoder = _fastdecode.BlockDecoder(branches)
        self.branch_names: tuple[str, ...] = tuple(names)
        """The writer schema's record branches, in union order (their full Avro names)."""

    def decode(self, count: int, body: bytes) -> Block:
        """(offsets, epochs, timestamps, principals, records) of a block body of `count` entries."""
        try:
            block: Block = self._decoder.decode(body, count)
        except RecordError:
            raise
        except (ValueError, TypeError, KeyError, IndexError, UnicodeDecodeError) as exc:
            raise RecordError(f"block body does not decode: {exc}") from exc
        return block

    def entries(self, count: int, body: bytes) -> list[LogEntry]:
        """The `count` entries of a block body as log entries (`decode`'s lists, made in C)."""
        entries: list[LogEntry] = _ENTRY_MAKER.make(*self.decode(count, body))
        return entries

    def branches_in(self, count: int, body: bytes) -> list[str]:
        """The full names of the record branches that the `count` entries of `body` hold.

        The entries are walked and checked as `decode` checks them (apart from the text of
        strings), without making their values.
        """
        try:
            seen: bytes = self._decoder.branches(body, count)
        except (ValueError, TypeError, IndexError) as exc:
            raise RecordError(f"block body does not decode: {exc}") from exc
        names = self.branch_names
        return [names[i] for i, held in enumerate(seen) if held]


def entry_walker(writer_entry_schema: Any) -> Callable[[bytes, int], None] | None:
    """A check that `count` entries fill a body exactly, making no values; None without one.

    The compiled walk of `FastBlockDecoder.branches_in` (raising ValueError, TypeError or
    IndexError when they do not), for a writer schema shaped as this code writes entries: what
    splits a block into its entries' bytes fast (metadata_log.merkle).
    """
    if _fastdecode is None:
        return None
    try:
        compiled = _entry_branches(writer_entry_schema)
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    if compiled is None:
        return None
    walker = _fastdecode.BlockDecoder([(program, None) for program, _, _ in compiled])
    check: Callable[[bytes, int], None] = walker.branches
    return check


def fast_decoder(
    writer_entry_schema: Any,
    current: Mapping[str, RecordSchema],
    positional: Mapping[str, ListDecoder],
    by_dict: Mapping[str, DictDecoder],
    *,
    records: bool = False,
) -> FastBlockDecoder | None:
    """The compiled decoder for segments written with `writer_entry_schema`, if it can be made.

    `current` maps today's branch names to their schemas, `positional` their list decoders and
    `by_dict` every readable branch (today's and upcast older ones) to its dict decoder. With
    `records` (the positional decoders make today's records, as the codec's do) a branch whose
    conversions allow it makes its record in C instead (`maker_of`); a caller whose decoders
    make something else (the audit's rows) leaves it False.
    """
    if _fastdecode is None:
        return None
    try:
        compiled = _entry_branches(writer_entry_schema)
        if compiled is None:
            return None
        branches: list[Branch] = []
        for program, name, names in compiled:
            if _is_current(current, name, names):
                maker = maker_of(current[name]) if records else None
                branches.append((program, positional[name], maker))
                continue
            decode = _by_name(names, by_dict[name]) if name in by_dict else _unknown(name)
            branches.append((program, decode))
        return FastBlockDecoder(branches, [name for _, name, _ in compiled])
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        logger.debug("no compiled decoder for this writer schema: %s", exc)
        return None


ColumnKinds = list[str]
FieldColumn = tuple[str, int, str, Mapping[int, str] | None]
"""(semantic, column index or -1, JSON key text, enum names) of one field."""
TypeColumns = tuple[str, int, list[FieldColumn]]
"""(record type name, version, fields) of one of today's record types."""


def column_plan(
    writer_entry_schema: Any,
    current: Mapping[str, RecordSchema],
    tags: Mapping[str, int],
    by_dict: Mapping[str, Callable[[dict[str, Any]], list[Any]]],
    *,
    kinds: ColumnKinds,
    types: list[TypeColumns],
    payload: bool,
    structs_json: Callable[[Any], str],
    json_dumps: Callable[[str], str],
) -> Any:
    """The compiled columnar decoder's plan for `writer_entry_schema`, if it can be made.

    `tags` maps today's branch names to their index in `types` (see `_fastdecode.ColumnPlan`);
    `by_dict` maps every other readable branch to a function from its dict to
    `[type index, *today's Avro values]`. None without the extension or for an entry not shaped
    as this code writes it (the caller then decodes records and converts them).
    """
    if _fastdecode is None:
        return None
    try:
        compiled = _entry_branches(writer_entry_schema)
        if compiled is None:
            return None
        branches: list[tuple[tuple[Any, ...], int | None, Callable[[list[Any]], Any] | None]] = []
        for program, name, names in compiled:
            if _is_current(current, name, names):
                branches.append((program, tags[name], None))
            elif name in by_dict:
                branches.append((program, None, _by_name(names, by_dict[name])))
            else:
                branches.append((program, None, _unknown(name)))
        return _fastdecode.ColumnPlan(kinds, types, branches, payload, structs_json, json_dumps)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        logger.debug("no columnar decoder for this writer schema: %s", exc)
        return None


Values = Callable[[Record], tuple[Any, ...]]
"""A record's Avro values in its schema's field order, after the codec's checks."""


class FastBlockEncoder:
    """The compiled encoder for the entry schema this code writes."""

    def __init__(self, branches: dict[type[Record], tuple[int, tuple[Any, ...], Values]]) -> None:
        if _fastdecode is None:  # pragma: no cover - built only with the extension
            raise RuntimeError("the compiled encoder is not built")
        self._encoder = _fastdecode.BlockEncoder(branches)

    def encode(
        self,
        batches: Iterable[tuple[Sequence[Record], str | None]],
        *,
        first_offset: int,
        epoch: int,
        timestamp: int,
    ) -> tuple[int, bytes]:
        """(count, body) of the entries of `batches`, numbered from `first_offset`.

        Raises KeyError for a record of an unknown class, and TypeError, ValueError or
        OverflowError for a value that does not fit its schema.
        """
        encoded: tuple[int, bytes] = self._encoder.encode(batches, first_offset, epoch, timestamp)
        return encoded


def fast_encoder(
    entry_schema: Any,
    current: Mapping[str, RecordSchema],
    values: Mapping[str, Values],
) -> FastBlockEncoder | None:
    """The compiled encoder for `entry_schema` (this code's), if the extension can write it.

    `current` maps each branch name to its schema and `values` to its generated values
    function. None without the extension, or when a branch holds a union the encoder does not
    write (the caller then writes through fastavro).
    """
    if _fastdecode is None:
        return None
    try:
        compiled = _entry_branches(entry_schema)
        if compiled is None:
            return None
        branches: dict[type[Record], tuple[int, tuple[Any, ...], Values]] = {}
        for index, (program, name, names) in enumerate(compiled):
            schema = current.get(name)
            if schema is None or schema.python_class is None:
                return None
            if not _is_current(current, name, names):
                return None
            branches[schema.python_class] = (index, program, values[name])
        return FastBlockEncoder(branches)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        logger.debug("no compiled encoder for this schema: %s", exc)
        return None
