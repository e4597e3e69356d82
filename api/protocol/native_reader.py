"""Request bodies read by compiled code: the server's fast path, beside the generated readers.

`api.protocol._native_reader` (Cython, built by `setup.py` when a C compiler is there) reads an
entity from a plan made here from `generated_reader_codegen.layout`, the same description the
generated readers are written from, so both read the same bytes into the same values. It
reads only the plain case (tags the schema declares, no null where a value is due, every
length and count within the bytes) and raises on anything else; `codec` then reads the frame
with the generated readers, which read it or refuse it as they always did. A request body
read here costs a fifth of the generated reader's time (`bench/decode_bench.py`).

Without the extension (no C compiler at install, or `MLOG_NO_EXTENSION=1`) `native_reader`
gives None and the generated readers read everything.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from functools import cache
from typing import Any

from api.protocol.generated_reader_codegen import (
    Array,
    Kind,
    Nested,
    Primitive,
    Unsupported,
    layout,
    min_size,
)
from api.protocol.generated_reader_runtime import generated_namespace

try:
    from api.protocol import _native_reader  # type: ignore[attr-defined]  # optional C extension
except ImportError:  # pragma: no cover - built wherever a C compiler is
    _native_reader = None

AVAILABLE: bool = _native_reader is not None

GiveUp: type[Exception] = Exception if _native_reader is None else _native_reader.GiveUp
"""What a compiled reader raises where it does not read the bytes plainly."""

NativeReader = Callable[[bytes, int], tuple[Any, int]]
"""`(buffer, offset) -> (entity, bytes read)`; raises where the generated readers must read."""

if _native_reader is not None:
    _native_reader.set_helpers(uuid.UUID, uuid.SafeUUID.unknown, generated_namespace()["_ERROR"])


@cache
def native_reader(entity_class: type[Any]) -> NativeReader | None:
    """The compiled reader of a class, or None (no extension, or a type it does not read)."""
    if _native_reader is None:
        return None
    try:
        return _native_reader.Reader(_entity(entity_class))  # type: ignore[arg-type,no-any-return]  # classes are hashable
    except Unsupported:
        return None


@cache
def _entity(entity_class: type[Any]) -> Any:
    """The plan of an entity class (`_native_reader.Entity`); `Unsupported` if it has none."""
    found = layout(entity_class)  # type: ignore[arg-type]  # classes are hashable
    plan = _native_reader.Entity(entity_class, found.flexible)
    for name, kind, required in found.fields:
        plan.add(_slot(entity_class, name), _value(kind, required))
    for name, default, tag, kind in found.tagged:
        # A tagged field is optional by its absence (`missing_required` passes it by).
        plan.add_tagged(_slot(entity_class, name), default, tag, _value(kind, False))
    return plan


def _value(kind: Kind, required: bool) -> Any:
    """How one value of a kind is read (`_native_reader.Value`)."""
    if isinstance(kind, Primitive):
        if kind.kafka_type not in _native_reader.KINDS:
            raise Unsupported(f"kafka type {kind.kafka_type!r}")
        return _native_reader.Value(kind.kafka_type, kind.nullable, kind.flexible)
    if isinstance(kind, Nested):
        entity = _entity(kind.entity_class)  # type: ignore[arg-type]  # classes are hashable
        return _native_reader.Value("entity", kind.nullable, True, entity=entity)
    if isinstance(kind, Array):
        # A null array where the field is required is `missing_required`'s refusal: given up.
        item = _value(kind.item, True)
        return _native_reader.Value(
            "array", not required, kind.flexible, min_size=min_size(kind.item), item=item
        )
    raise Unsupported(repr(kind))  # pragma: no cover - the codegen has no other kind


def _slot(entity_class: type[Any], name: str) -> Any:
    """The slot a field is stored in (as attribute lookup finds it); `Unsupported` if none."""
    for klass in entity_class.__mro__:
        found = vars(klass).get(name)
        if found is not None:
            if type(found).__name__ != "member_descriptor":
                break
            return found
    raise Unsupported(f"{entity_class.__name__}.{name} is not a slot")
