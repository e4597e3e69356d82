"""One Avro array-of-entries schema, parsed once, encoded and decoded with one fastavro call.

fastavro's public `schemaless_writer` / `schemaless_reader` re-walk the whole schema on every
call to collect its named types (about 50 µs for the entry union), which dominates small
blocks such as group-committed single-record appends. Its compiled `write_data` / `_read_data`
take the named types resolved once. They are not public API, so they are used only after a
self-check at start-up shows they give exactly the public functions' results; otherwise the
public functions are used.

fastavro is imported, and the schema parsed, when an array is first encoded or decoded: a
reader whose blocks go through the compiled block decoder (`records.fast_decode`) never needs
it, and a command that only reads starts without it.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from functools import cache
from typing import Any

logger = logging.getLogger(__name__)

_READ_OPTIONS = {"return_record_name": True}

_CHECK_SCHEMA = {
    "type": "record",
    "name": "Check",
    "namespace": "mlog.selfcheck",
    "fields": [
        {"name": "n", "type": "long"},
        {"name": "id", "type": {"type": "fixed", "name": "Id", "size": 4}},
        {
            "name": "u",
            "type": [
                {"type": "record", "name": "A", "fields": [{"name": "x", "type": "Id"}]},
                {
                    "type": "record",
                    "name": "B",
                    "fields": [
                        {"name": "xs", "type": ["null", {"type": "array", "items": "int"}]},
                        {"name": "s", "type": ["null", "string"]},
                    ],
                },
            ],
        },
    ],
}
_CHECK_VALUES = [
    {"n": -3, "id": b"abcd", "u": ("mlog.selfcheck.A", {"x": b"wxyz"})},
    {"n": 1 << 40, "id": b"efgh", "u": ("mlog.selfcheck.B", {"xs": [1, -2, 3], "s": None})},
    {"n": 0, "id": b"ijkl", "u": ("mlog.selfcheck.B", {"xs": None, "s": "é"})},
]


FastRead = Callable[..., Any]
FastWrite = Callable[..., None]


@cache
def fast_internals() -> tuple[FastRead, FastWrite] | None:
    """The compiled (read, write) internals of fastavro if they match its public API (checked once).

    None means this process uses the public functions.
    """
    from fastavro import parse_schema, schemaless_reader, schemaless_writer

    try:  # compiled internals; see the module docstring
        from fastavro._read import (  # type: ignore[attr-defined]  # untyped Cython internal
            _read_data as _fast_read,
        )
        from fastavro._write import (  # type: ignore[attr-defined]  # untyped Cython internal
            write_data as _fast_write,
        )
    except ImportError:  # pragma: no cover - pure-Python fastavro build
        return None
    named: dict[str, Any] = {}
    schema = parse_schema({"type": "array", "items": _CHECK_SCHEMA}, named_schemas=named)
    try:
        public = io.BytesIO()
        schemaless_writer(public, schema, _CHECK_VALUES)
        fast = bytearray()
        _fast_write(fast, _CHECK_VALUES, schema, named, "", {})
        expected = schemaless_reader(
            io.BytesIO(public.getvalue()), schema, None, return_record_name=True
        )
        got = _fast_read(
            io.BytesIO(public.getvalue()),
            schema,
            {"writer": named, "reader": {}},
            None,
            _READ_OPTIONS,
        )
    except Exception as exc:  # any change of the internals: fall back
        logger.debug("fastavro internals unusable (%s); using the public API", exc)
        return None
    if bytes(fast) == public.getvalue() and got == expected == _CHECK_VALUES:
        return _fast_read, _fast_write
    return None


class AvroArray:
    """Encodes a list of values as an Avro array of `items_schema`, and decodes it back."""

    def __init__(self, items_schema: Any) -> None:
        self._items_schema = items_schema
        self._named: dict[str, Any] = {}
        self._reader_named = {"writer": self._named, "reader": {}}
        self._parsed: Any = None
        self.fast: Any = None
        """The compiled block decoder for this schema (`records.fast_decode`), if any."""

    @property
    def schema(self) -> Any:
        """The array schema as fastavro parsed it (parsed on first use)."""
        if self._parsed is None:
            from fastavro import parse_schema

            # Two threads may both parse: each into its own dict, published schema last.
            named: dict[str, Any] = {}
            parsed = parse_schema(
                {"type": "array", "items": self._items_schema}, named_schemas=named
            )
            self._named, self._reader_named = named, {"writer": named, "reader": {}}
            self._parsed = parsed
        return self._parsed

    def write(self, values: list[Any]) -> bytes:
        """The Avro encoding of `values` as one array (count, items, end marker)."""
        schema = self.schema
        internals = fast_internals()
        if internals is not None:
            out = bytearray()
            internals[1](out, values, schema, self._named, "", {})
            return bytes(out)
        from fastavro import schemaless_writer

        stream = io.BytesIO()
        schemaless_writer(stream, schema, values)
        return stream.getvalue()

    def read(self, stream: io.BytesIO) -> list[Any]:
        """Decode one array from `stream`, leaving it positioned after the array."""
        schema = self.schema
        internals = fast_internals()
        if internals is not None:
            values: list[Any] = internals[0](
                stream, schema, self._reader_named, None, _READ_OPTIONS
            )
            return values
        from fastavro import schemaless_reader

        result = schemaless_reader(stream, schema, None, return_record_name=True)
        if not isinstance(result, list):  # pragma: no cover - the schema is an array
            raise TypeError("an array schema decoded to a non-list")
        return result
