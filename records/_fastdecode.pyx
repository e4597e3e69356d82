# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled decoding of a log block body straight into records (see `records.fast_decode`).

fastavro turns every entry into dicts (the entry, the record) and every union into a tagged
tuple, then Python turns those into records. Here one pass over the bytes reads the entry's
offset, epoch, timestamp and principal into lists and each record's fields into a list that
the record's positional decoder (generated Python, the same conversions as the dict decoder)
turns into the record. A program, built in Python from the segment's writer schema, tells this
module what to read:

    ("null",) ("boolean",) ("int",) ("long",) ("float",) ("double",) ("bytes",) ("string",)
    ("fixed", size) ("enum", symbols) ("array", item) ("map", value)
    ("union", branches, names)  names[i] is the record name of branch i, or None
    ("record", field_names, field_programs)

Values are those fastavro returns with `return_record_name=True`: a record chosen in a union is
`(name, dict)`, anything else in a union is the bare value.

Malformed input raises ValueError (or UnicodeDecodeError) and never reads outside the body.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memcpy

DEF K_NULL = 0
DEF K_BOOLEAN = 1
DEF K_INT = 2
DEF K_LONG = 3
DEF K_FLOAT = 4
DEF K_DOUBLE = 5
DEF K_BYTES = 6
DEF K_STRING = 7
DEF K_FIXED = 8
DEF K_ENUM = 9
DEF K_ARRAY = 10
DEF K_MAP = 11
DEF K_UNION = 12
DEF K_RECORD = 13

_KINDS = {
    "null": K_NULL,
    "boolean": K_BOOLEAN,
    "int": K_INT,
    "long": K_LONG,
    "float": K_FLOAT,
    "double": K_DOUBLE,
    "bytes": K_BYTES,
    "string": K_STRING,
    "fixed": K_FIXED,
    "enum": K_ENUM,
    "array": K_ARRAY,
    "map": K_MAP,
    "union": K_UNION,
    "record": K_RECORD,
}


cdef class _Op:
    """One compiled program node."""

    cdef int kind
    cdef Py_ssize_t size
    cdef tuple symbols
    cdef _Op item
    cdef list branches
    cdef tuple names
    cdef tuple field_names
    cdef list fields


cdef _Op _compile(object program):
    cdef _Op op = _Op()
    kind = _KINDS.get(program[0])
    if kind is None:
        raise ValueError(f"unknown program node {program[0]!r}")
    op.kind = kind
    if kind == K_FIXED:
        op.size = program[1]
    elif kind == K_ENUM:
        op.symbols = tuple(program[1])
    elif kind == K_ARRAY or kind == K_MAP:
        op.item = _compile(program[1])
    elif kind == K_UNION:
        op.branches = [_compile(p) for p in program[1]]
        op.names = tuple(program[2])
    elif kind == K_RECORD:
        op.field_names = tuple(program[1])
        op.fields = [_compile(p) for p in program[2]]
    return op


cdef struct _Buf:
    const unsigned char* data
    Py_ssize_t pos
    Py_ssize_t end


cdef inline long long _read_long(_Buf* b) except? -1:
    cdef unsigned long long acc = 0
    cdef int shift = 0
    cdef unsigned char byte
    while True:
        if b.pos >= b.end:
            raise ValueError("body ends inside a number")
        if shift > 63:
            raise ValueError("a number is longer than 10 bytes")
        byte = b.data[b.pos]
        b.pos += 1
        acc |= (<unsigned long long>(byte & 0x7F)) << shift
        if not (byte & 0x80):
            break
        shift += 7
    return <long long>((acc >> 1) ^ (-(acc & 1)))


cdef inline long long _read_int(_Buf* b) except? -1:
    cdef long long value = _read_long(b)
    if value < -2147483648 or value > 2147483647:
        raise ValueError(f"int value {value} is out of range")
    return value


cdef inline Py_ssize_t _read_size(_Buf* b) except -1:
    cdef long long n = _read_long(b)
    if n < 0 or n > b.end - b.pos:
        raise ValueError(f"a length of {n} does not fit in the body")
    return <Py_ssize_t>n


cdef object _read(_Buf* b, _Op op):
    cdef Py_ssize_t n, i
    cdef long long count, index
    cdef list items
    cdef dict mapping
    cdef double d
    cdef float f
    cdef _Op branch
    kind = op.kind
    if kind == K_INT:
        return _read_int(b)
    if kind == K_LONG:
        return _read_long(b)
    if kind == K_STRING:
        n = _read_size(b)
        i = b.pos
        b.pos += n
        return PyUnicode_DecodeUTF8(<const char*>(b.data + i), n, NULL)
    if kind == K_UNION:
        index = _read_long(b)
        if index < 0 or index >= len(op.branches):
            raise ValueError(f"union branch {index} does not exist")
        branch = <_Op>op.branches[index]
        value = _read(b, branch)
        name = op.names[index]
        if name is not None:
            return (name, value)
        return value
    if kind == K_NULL:
        return None
    if kind == K_FIXED:
        if op.size > b.end - b.pos:
            raise ValueError("body ends inside a fixed value")
        i = b.pos
        b.pos += op.size
        return PyBytes_FromStringAndSize(<const char*>(b.data + i), op.size)
    if kind == K_ARRAY:
        items = []
        while True:
            count = _read_long(b)
            if count == 0:
                return items
            if count < 0:
                count = -count
                _read_long(b)  # the block's byte size, unused
            if count > b.end - b.pos:
                raise ValueError(f"an array block of {count} items does not fit in the body")
            for i in range(count):
                items.append(_read(b, op.item))
    if kind == K_BOOLEAN:
        if b.pos >= b.end:
            raise ValueError("body ends inside a boolean")
        n = b.data[b.pos]
        b.pos += 1
        if n > 1:
            raise ValueError(f"boolean byte {n} is neither 0 nor 1")
        return n == 1
    if kind == K_BYTES:
        n = _read_size(b)
        i = b.pos
        b.pos += n
        return PyBytes_FromStringAndSize(<const char*>(b.data + i), n)
    if kind == K_ENUM:
        index = _read_long(b)
        if index < 0 or index >= len(op.symbols):
            raise ValueError(f"enum index {index} does not exist")
        return op.symbols[index]
    if kind == K_RECORD:
        mapping = {}
        for i in range(len(op.fields)):
            mapping[op.field_names[i]] = _read(b, <_Op>op.fields[i])
        return mapping
    if kind == K_MAP:
        mapping = {}
        while True:
            count = _read_long(b)
            if count == 0:
                return mapping
            if count < 0:
                count = -count
                _read_long(b)
            if count > b.end - b.pos:
                raise ValueError(f"a map block of {count} items does not fit in the body")
            for i in range(count):
                n = _read_size(b)
                key = PyUnicode_DecodeUTF8(<const char*>(b.data + b.pos), n, NULL)
                b.pos += n
                mapping[key] = _read(b, op.item)
    if kind == K_FLOAT:
        if 4 > b.end - b.pos:
            raise ValueError("body ends inside a float")
        memcpy(&f, b.data + b.pos, 4)
        b.pos += 4
        return f
    if kind == K_DOUBLE:
        if 8 > b.end - b.pos:
            raise ValueError("body ends inside a double")
        memcpy(&d, b.data + b.pos, 8)
        b.pos += 8
        return d
    raise ValueError(f"program node kind {kind} is not readable")


cdef class BlockDecoder:
    """Decodes block bodies written with one writer schema (one program per record branch).

    `branches[i]` is `(field_programs, decode)` for branch i of the entry's record union:
    the fields are read into a list in writer order and `decode(list)` makes the record.
    """

    cdef list _fields
    cdef list _decoders

    def __init__(self, branches):
        self._fields = []
        self._decoders = []
        for field_programs, decode in branches:
            self._fields.append([_compile(p) for p in field_programs])
            self._decoders.append(decode)

    def decode(self, bytes body, Py_ssize_t count):
        """(offsets, epochs, timestamps, principals, records) of the `count` entries of `body`.

        Raises ValueError unless exactly `count` entries fill exactly the whole body.
        """
        cdef _Buf b
        cdef Py_ssize_t entry, i, nfields
        cdef long long index, principal_branch
        cdef list offsets = [], epochs = [], timestamps = [], principals = [], records = []
        cdef list fields, values
        cdef Py_ssize_t nbranches = len(self._fields)
        b.data = <const unsigned char*>PyBytes_AS_STRING(body)
        b.pos = 0
        b.end = PyBytes_GET_SIZE(body)
        if count < 1:
            raise ValueError(f"a block claims {count} entries")
        for entry in range(count):
            offsets.append(_read_long(&b))
            epochs.append(_read_int(&b))
            timestamps.append(_read_long(&b))
            principal_branch = _read_long(&b)
            if principal_branch == 0:
                principals.append(None)
            elif principal_branch == 1:
                i = _read_size(&b)
                principals.append(PyUnicode_DecodeUTF8(<const char*>(b.data + b.pos), i, NULL))
                b.pos += i
            else:
                raise ValueError(f"principal union branch {principal_branch} does not exist")
            index = _read_long(&b)
            if index < 0 or index >= nbranches:
                raise ValueError(f"record union branch {index} does not exist")
            fields = <list>self._fields[index]
            nfields = len(fields)
            values = [None] * nfields
            for i in range(nfields):
                values[i] = _read(&b, <_Op>fields[i])
            records.append(self._decoders[index](values))
        if b.pos != b.end:
            raise ValueError(
                f"{b.end - b.pos} bytes are left after the block's {count} entries"
            )
        return offsets, epochs, timestamps, principals, records
