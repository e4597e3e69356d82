# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled decoding of a log block body straight into records (see `records.fast_decode`).

fastavro turns every entry into dicts (the entry, the record) and every union into a tagged
tuple, then Python turns those into records. Here one pass over the bytes reads the entry's
offset, epoch, timestamp and principal into lists and each record's fields into a list that
the record's positional decoder (generated Python, the same conversions as the dict decoder)
turns into the record (or, for a branch whose conversions are all table lookups, a `_Maker`
that stores each value in its slot as it is read). A program, built in Python from the
segment's writer schema, tells this module what to read:

    ("null",) ("boolean",) ("int",) ("long",) ("float",) ("double",) ("bytes",) ("string",)
    ("fixed", size) ("enum", symbols) ("array", item) ("map", value)
    ("union", branches, names)  names[i] is the record name of branch i, or None
    ("record", field_names, field_programs)

Values are those fastavro returns with `return_record_name=True`: a record chosen in a union is
`(name, dict)`, anything else in a union is the bare value.

Malformed input raises ValueError (or UnicodeDecodeError) and never reads outside the body.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from cpython.object cimport PyObject, PyObject_Hash
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, memcpy

from records._slot_offsets cimport check_plain_new, slot_offset, store_new


cdef extern from "Python.h":
    object PyType_GenericAlloc(type kind, Py_ssize_t items)
    object PySequence_Tuple(object items)

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

DEF C_PLAIN = 0
DEF C_LOOKUP = 1
DEF C_INTS = 2

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


cdef inline long long _block_count(_Buf* b, str what) except -1:
    """The item count of an array's or map's next block (0: its end), checked to fit the body."""
    cdef long long count = _read_long(b)
    if count < 0:
        count = -count
        _read_long(b)  # the block's byte size, unused
    if count < 0 or count > b.end - b.pos:  # (the most negative count stays negative)
        raise ValueError(f"{what} block of {count} items does not fit in the body")
    return count


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
            count = _block_count(b, "an array")
            if count == 0:
                return items
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
            count = _block_count(b, "a map")
            if count == 0:
                return mapping
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


cdef int _skip(_Buf* b, _Op op) except -1:
    """Move past one value of `op` without making it (as `_read` checks it, no objects)."""
    cdef Py_ssize_t n, i
    cdef long long count, index
    kind = op.kind
    if kind == K_INT:
        _read_int(b)
    elif kind == K_LONG:
        _read_long(b)
    elif kind == K_STRING or kind == K_BYTES:
        n = _read_size(b)
        b.pos += n
    elif kind == K_UNION:
        index = _read_long(b)
        if index < 0 or index >= len(op.branches):
            raise ValueError(f"union branch {index} does not exist")
        _skip(b, <_Op>op.branches[index])
    elif kind == K_NULL:
        pass
    elif kind == K_FIXED:
        if op.size > b.end - b.pos:
            raise ValueError("body ends inside a fixed value")
        b.pos += op.size
    elif kind == K_ARRAY or kind == K_MAP:
        while True:
            count = _block_count(b, "an array" if kind == K_ARRAY else "a map")
            if count == 0:
                break
            for i in range(count):
                if kind == K_MAP:
                    n = _read_size(b)
                    b.pos += n
                _skip(b, op.item)
    elif kind == K_BOOLEAN:
        if b.pos >= b.end:
            raise ValueError("body ends inside a boolean")
        if b.data[b.pos] > 1:
            raise ValueError(f"boolean byte {b.data[b.pos]} is neither 0 nor 1")
        b.pos += 1
    elif kind == K_ENUM:
        index = _read_long(b)
        if index < 0 or index >= len(op.symbols):
            raise ValueError(f"enum index {index} does not exist")
    elif kind == K_RECORD:
        for i in range(len(op.fields)):
            _skip(b, <_Op>op.fields[i])
    elif kind == K_FLOAT:
        if 4 > b.end - b.pos:
            raise ValueError("body ends inside a float")
        b.pos += 4
    elif kind == K_DOUBLE:
        if 8 > b.end - b.pos:
            raise ValueError("body ends inside a double")
        b.pos += 8
    else:
        raise ValueError(f"program node kind {kind} is not readable")
    return 0


cdef inline int _open_block(_Buf* b, bytes body, Py_ssize_t count) except -1:
    """Point `b` at a block body of `count` entries (at least one)."""
    b.data = <const unsigned char*>PyBytes_AS_STRING(body)
    b.pos = 0
    b.end = PyBytes_GET_SIZE(body)
    if count < 1:
        raise ValueError(f"a block claims {count} entries")
    return 0


cdef inline long long _branch(_Buf* b, Py_ssize_t nbranches) except -1:
    """An entry's record union branch, checked to exist."""
    cdef long long index = _read_long(b)
    if index < 0 or index >= nbranches:
        raise ValueError(f"record union branch {index} does not exist")
    return index


cdef inline int _close_block(_Buf* b, Py_ssize_t count) except -1:
    """Refuse bytes left after a block's `count` entries."""
    if b.pos != b.end:
        raise ValueError(f"{b.end - b.pos} bytes are left after the block's {count} entries")
    return 0

DEF MEMO_SLOTS = 1024
DEF MEMO_KEY = 40


cdef struct _MemoSlot:
    PyObject* value
    Py_ssize_t length
    unsigned char key[MEMO_KEY]


cdef inline size_t _memo_index(const unsigned char* key, Py_ssize_t n):
    """FNV-1a of an encoded value, folded to a slot of a memo."""
    cdef unsigned long long h = 14695981039346656037ULL
    cdef Py_ssize_t i
    for i in range(n):
        h = (h ^ key[i]) * 1099511628211ULL
    return <size_t>((h ^ (h >> 32)) & (MEMO_SLOTS - 1))


cdef class _Maker:
    """Makes one branch's record as its fields are read: each value converted and stored in its slot.

    What the branch's positional decoder (generated Python, `records.codec`) does, without a
    list of values or a call per field: an object of the record's class (no `__init__`, as
    there), each field stored through its slot's offset after its conversion: none, `table[v]`
    (ids, enums) or `table[tuple(v)]` (broker id lists); None passes through an optional one.

    A converted field remembers its last values by their encoded bytes (a direct-mapped memo
    of `MEMO_SLOTS` per field, made on first use): a value seen again (a topic's id on each of
    its partitions, the few replica lists a cluster has) is skipped over and its object taken
    from the memo, with no bytes, list, tuple or hash of them made. The bytes decide the value
    (the same schema, the same table), so a memo's answer is the one the lookup would give,
    equal if not always the same object once a table was cleared.
    """

    cdef type _kind
    cdef Py_ssize_t _count
    cdef Py_ssize_t *_offsets
    cdef int *_conversions
    cdef char *_optional
    cdef _MemoSlot **_memos
    cdef list _tables

    def __cinit__(self, type kind, list fields):
        cdef Py_ssize_t i
        check_plain_new(kind)
        self._kind = kind
        self._count = len(fields)
        self._offsets = <Py_ssize_t *>malloc(max(self._count, 1) * sizeof(Py_ssize_t))
        self._conversions = <int *>malloc(max(self._count, 1) * sizeof(int))
        self._optional = <char *>malloc(max(self._count, 1))
        self._memos = <_MemoSlot **>calloc(max(self._count, 1), sizeof(_MemoSlot *))
        if (
            self._offsets is NULL
            or self._conversions is NULL
            or self._optional is NULL
            or self._memos is NULL
        ):
            raise MemoryError()
        self._tables = []
        for i, (name, conversion, table, optional) in enumerate(fields):
            if conversion not in (C_PLAIN, C_LOOKUP, C_INTS):
                raise ValueError(f"unknown conversion {conversion!r}")
            self._offsets[i] = slot_offset(kind, name)
            self._conversions[i] = conversion
            self._optional[i] = 1 if optional else 0
            self._tables.append(table)

    def __dealloc__(self):
        cdef Py_ssize_t i, j
        if self._memos is not NULL:
            for i in range(self._count):
                if self._memos[i] is not NULL:
                    for j in range(MEMO_SLOTS):
                        Py_XDECREF(self._memos[i][j].value)
                    free(self._memos[i])
            free(self._memos)
        free(self._offsets)
        free(self._conversions)
        free(self._optional)

    cdef object make(self, _Buf* b, list fields):
        cdef Py_ssize_t i
        record = PyType_GenericAlloc(self._kind, 0)
        for i in range(self._count):
            if self._conversions[i] == C_PLAIN:
                value = _read(b, <_Op>fields[i])
            else:
                value = self._converted(b, i, <_Op>fields[i])
            store_new(record, self._offsets[i], value)
        return record

    cdef object _converted(self, _Buf* b, Py_ssize_t i, _Op op):
        """Field `i`'s value, converted: from the memo when its bytes were seen, else looked up."""
        cdef Py_ssize_t start = b.pos
        cdef Py_ssize_t n
        cdef _MemoSlot* slot = NULL
        cdef PyObject* old
        _skip(b, op)
        n = b.pos - start
        if n <= MEMO_KEY:
            if self._memos[i] is NULL:
                self._memos[i] = <_MemoSlot *>calloc(MEMO_SLOTS, sizeof(_MemoSlot))
                if self._memos[i] is NULL:
                    raise MemoryError()
            slot = &self._memos[i][_memo_index(b.data + start, n)]
            if (
                slot.value is not NULL
                and slot.length == n
                and memcmp(slot.key, b.data + start, n) == 0
            ):
                return <object>slot.value
        b.pos = start
        value = _read(b, op)
        if not (self._optional[i] and value is None):
            if self._conversions[i] == C_INTS:
                value = PySequence_Tuple(value)
            value = self._tables[i][value]
        if slot is not NULL:
            # The slot is filled before the old value goes: its release may run code.
            old = slot.value
            Py_INCREF(value)
            slot.value = <PyObject *>value
            slot.length = n
            memcpy(slot.key, b.data + start, n)
            Py_XDECREF(old)
        return value


cdef class EntryMaker:
    """Makes log entries of what a block's decode gave: no `__init__`, each value in its slot.

    `records.entry.make_entry` over five lists, in one C loop: a log read made each entry
    through five slot setters called from Python, a tenth of a console page's search.
    """

    cdef type _kind
    cdef Py_ssize_t _slots[5]

    def __cinit__(self, type kind, tuple names):
        cdef Py_ssize_t i
        check_plain_new(kind)
        if len(names) != 5:
            raise ValueError(f"an entry has 5 slots to fill, got {len(names)} names")
        for i in range(5):
            self._slots[i] = slot_offset(kind, names[i])
        self._kind = kind

    def make(
        self, list offsets, list epochs, list timestamps, list principals, list records
    ):
        """The entries of five lists of one length, in order (ValueError if lengths differ)."""
        cdef Py_ssize_t i, n = len(offsets)
        if not (len(epochs) == len(timestamps) == len(principals) == len(records) == n):
            raise ValueError("the lists of a block's entries differ in length")
        cdef list made = [None] * n
        for i in range(n):
            entry = PyType_GenericAlloc(self._kind, 0)
            store_new(entry, self._slots[0], offsets[i])
            store_new(entry, self._slots[1], epochs[i])
            store_new(entry, self._slots[2], timestamps[i])
            store_new(entry, self._slots[3], principals[i])
            store_new(entry, self._slots[4], records[i])
            made[i] = entry
        return made


cdef type _uuid_class = None
cdef Py_ssize_t _uuid_bytes = -1


def uuid_hash_of(type kind):
    """`records.uuids.Uuid.__hash__` in C: the hash of its `bytes` slot, read at its offset.

    Ids key the image's maps and a replay's dicts: a `__hash__` written in Python made a frame
    a lookup, 5% of a time travel's replay. The same value (`hash(self.bytes)`); a subclass's
    object, or one whose slot is empty, is hashed as the Python method hashes it.
    """
    global _uuid_class, _uuid_bytes
    _uuid_bytes = slot_offset(kind, "bytes")
    _uuid_class = kind
    return _uuid_hash


def _uuid_hash(self):
    """The hash of an id's 16 bytes."""
    cdef PyObject* raw
    if type(self) is _uuid_class:
        raw = (<PyObject**>(<char*><PyObject*>self + _uuid_bytes))[0]
        if raw is not NULL:
            return PyObject_Hash(<object>raw)
    return hash(self.bytes)


cdef class BlockDecoder:
    """Decodes block bodies written with one writer schema (one program per record branch).

    `branches[i]` is `(field_programs, decode)` for branch i of the entry's record union:
    the fields are read into a list in writer order and `decode(list)` makes the record; or
    `(field_programs, decode, (class, slots))`, the same record made by a `_Maker` as the
    fields are read: `slots` gives per field (in writer order) its slot's name, its conversion
    (0 none, 1 `table[v]`, 2 `table[tuple(v)]`), the table and whether None passes through.
    """

    cdef list _fields
    cdef list _decoders
    cdef list _makers

    def __init__(self, branches):
        self._fields = []
        self._decoders = []
        self._makers = []
        for branch in branches:
            field_programs, decode = branch[0], branch[1]
            maker = branch[2] if len(branch) > 2 else None
            self._fields.append([_compile(p) for p in field_programs])
            self._decoders.append(decode)
            self._makers.append(None if maker is None else _Maker(maker[0], list(maker[1])))

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
        _open_block(&b, body, count)
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
            index = _branch(&b, nbranches)
            fields = <list>self._fields[index]
            maker = self._makers[index]
            if maker is not None:
                records.append((<_Maker>maker).make(&b, fields))
                continue
            nfields = len(fields)
            values = [None] * nfields
            for i in range(nfields):
                values[i] = _read(&b, <_Op>fields[i])
            records.append(self._decoders[index](values))
        _close_block(&b, count)
        return offsets, epochs, timestamps, principals, records

    def branches(self, bytes body, Py_ssize_t count):
        """Which record branches the `count` entries of `body` hold: a byte per branch, 1 if any.

        Walks the entries as `decode` does, with the same checks, but makes no values: a
        reader that needs only the kinds of records in a block (FetchLog's search for
        credentials) skips the cost of making them.
        """
        cdef _Buf b
        cdef Py_ssize_t entry, i, nfields
        cdef long long index, principal_branch
        cdef Py_ssize_t nbranches = len(self._fields)
        cdef list fields
        cdef bytearray seen = bytearray(nbranches)
        _open_block(&b, body, count)
        for entry in range(count):
            _read_long(&b)
            _read_int(&b)
            _read_long(&b)
            principal_branch = _read_long(&b)
            if principal_branch == 1:
                i = _read_size(&b)
                b.pos += i
            elif principal_branch != 0:
                raise ValueError(f"principal union branch {principal_branch} does not exist")
            index = _branch(&b, nbranches)
            seen[index] = 1
            fields = <list>self._fields[index]
            nfields = len(fields)
            for i in range(nfields):
                _skip(&b, <_Op>fields[i])
        _close_block(&b, count)
        return bytes(seen)

# ---------------------------------------------------------------------------------------------
# Columnar decoding: block bodies straight into Arrow-layout buffers (the audit table).
#
# `ColumnPlan` is built once per writer schema from a description made in Python
# (`records.fast_decode.column_plan`); `ColumnBuilder` holds the growing columns of one batch.
# Every value goes from the body bytes into its column's buffers (validity bits, fixed-width
# values, or offsets + bytes) and, optionally, into the JSON text of the row's `payload`, with no
# Python object per value on the common paths. Fields this code does not read directly (arrays of
# structs, or anything of an unexpected writer type) are read as Python values and appended
# from those; a branch of an older version is decoded, upcast and re-encoded by a Python
# callable and appended from its values.

from libc.stdlib cimport realloc, free
from libc.string cimport memset
from libc.stdint cimport int32_t, int64_t

DEF C_I32 = 0
DEF C_I64 = 1
DEF C_BOOL = 2
DEF C_STR = 3
DEF C_LIST = 4

DEF S_INT = 0
DEF S_BOOL = 1
DEF S_STR = 2
DEF S_UUID = 3
DEF S_ENUM = 4
DEF S_LEADER = 5
DEF S_INTLIST = 6
DEF S_PY = 7

_COLUMN_KINDS = {"i32": C_I32, "i64": C_I64, "bool": C_BOOL, "str": C_STR, "list": C_LIST}
_SEMANTICS = {
    "int": S_INT, "bool": S_BOOL, "str": S_STR, "uuid": S_UUID, "enum": S_ENUM,
    "leader": S_LEADER, "intlist": S_INTLIST, "py": S_PY,
}

cdef const char* _B64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


cdef void* _grow(
    void* buffer, Py_ssize_t* capacity, Py_ssize_t need, Py_ssize_t least, Py_ssize_t itemsize,
    bint zero
) except NULL:
    """`buffer` reallocated for at least `need` items (doubling, at least `least`); the new
    capacity goes to `capacity`, and with `zero` the added bytes are zeroed."""
    cdef Py_ssize_t old = capacity[0]
    cdef Py_ssize_t cap = max(need, 2 * old, least)
    cdef char* p = <char*>realloc(buffer, cap * itemsize)
    if p == NULL:
        raise MemoryError()
    if zero:
        memset(p + old * itemsize, 0, (cap - old) * itemsize)
    capacity[0] = cap
    return p


cdef class _Column:
    """One growing column: validity bits and values (fixed width, or offsets + bytes/items)."""

    cdef int kind
    cdef Py_ssize_t n, nulls, vcap, dlen, dcap, ocap
    cdef unsigned char* valid
    cdef char* data
    cdef int32_t* offs

    def __cinit__(self, int kind):
        self.kind = kind
        self.valid = NULL
        self.data = NULL
        self.offs = NULL
        self.n = self.nulls = self.vcap = self.dlen = self.dcap = self.ocap = 0
        self._reset()

    def __dealloc__(self):
        free(self.valid)
        free(self.data)
        free(self.offs)

    cdef int _reset(self) except -1:
        self.n = 0
        self.nulls = 0
        self.dlen = 0
        if self.vcap:
            memset(self.valid, 0, self.vcap)
        if self.kind == C_BOOL and self.dcap:
            memset(self.data, 0, self.dcap)
        if self.kind >= C_STR:
            self._ensure_offs(1)
            self.offs[0] = 0
        return 0

    cdef int _ensure_valid(self, Py_ssize_t need) except -1:
        if need > self.vcap:
            self.valid = <unsigned char*>_grow(self.valid, &self.vcap, need, 1024, 1, 1)
        return 0

    cdef int _ensure_data(self, Py_ssize_t need) except -1:
        if need > self.dcap:
            self.data = <char*>_grow(self.data, &self.dcap, need, 8192, 1, 1)
        return 0

    cdef int _ensure_offs(self, Py_ssize_t need) except -1:
        if need > self.ocap:
            self.offs = <int32_t*>_grow(self.offs, &self.ocap, need, 1024, sizeof(int32_t), 0)
        return 0

    cdef inline int _slot(self, bint ok) except -1:
        cdef Py_ssize_t n = self.n
        if (n >> 3) >= self.vcap:
            self._ensure_valid((n >> 3) + 1)
        if ok:
            self.valid[n >> 3] |= <unsigned char>(1 << (n & 7))
        else:
            self.nulls += 1
        if self.kind == C_I32:
            self._ensure_data((n + 1) * 4)
        elif self.kind == C_I64:
            self._ensure_data((n + 1) * 8)
        elif self.kind == C_BOOL:
            self._ensure_data((n >> 3) + 1)
        elif n + 2 > self.ocap:
            self._ensure_offs(n + 2)
        return 0

    cdef inline int null(self) except -1:
        self._slot(0)
        if self.kind == C_I32:
            (<int32_t*>self.data)[self.n] = 0
        elif self.kind == C_I64:
            (<int64_t*>self.data)[self.n] = 0
        elif self.kind == C_STR:
            self.offs[self.n + 1] = <int32_t>self.dlen
        elif self.kind == C_LIST:
            self.offs[self.n + 1] = <int32_t>(self.dlen >> 2)
        self.n += 1
        return 0

    cdef inline int put_int(self, long long value) except -1:
        if self.kind == C_I32:
            if value < -2147483648 or value > 2147483647:
                raise ValueError(f"value {value} does not fit its 32-bit column")
            self._slot(1)
            (<int32_t*>self.data)[self.n] = <int32_t>value
        elif self.kind == C_I64:
            self._slot(1)
            (<int64_t*>self.data)[self.n] = <int64_t>value
        else:
            raise ValueError("an integer for a column that is not one")
        self.n += 1
        return 0

    cdef inline int put_bool(self, bint value) except -1:
        if self.kind != C_BOOL:
            raise ValueError("a boolean for a column that is not one")
        self._slot(1)
        if value:
            (<unsigned char*>self.data)[self.n >> 3] |= <unsigned char>(1 << (self.n & 7))
        self.n += 1
        return 0

    cdef inline int begin(self) except -1:
        """Start a valid string or list value; `extend`/`item` add to it, `end` closes it."""
        if self.kind < C_STR:
            raise ValueError("a string or list for a column that is neither")
        return self._slot(1)

    cdef inline int extend(self, const char* p, Py_ssize_t size) except -1:
        if self.dlen + size > self.dcap:
            self._ensure_data(self.dlen + size)
        memcpy(self.data + self.dlen, p, size)
        self.dlen += size
        return 0

    cdef inline int item(self, long long value) except -1:
        if value < -2147483648 or value > 2147483647:
            raise ValueError(f"list item {value} does not fit 32 bits")
        if self.dlen + 4 > self.dcap:
            self._ensure_data(self.dlen + 4)
        (<int32_t*>(self.data + self.dlen))[0] = <int32_t>value
        self.dlen += 4
        return 0

    cdef inline int end(self) except -1:
        if self.kind == C_LIST:
            self.offs[self.n + 1] = <int32_t>(self.dlen >> 2)
        else:
            if self.dlen > 2147483647:
                raise ValueError("a batch's string column exceeds 2 GiB")
            self.offs[self.n + 1] = <int32_t>self.dlen
        self.n += 1
        return 0

    cdef inline int put_bytes(self, const char* p, Py_ssize_t size) except -1:
        self.begin()
        self.extend(p, size)
        return self.end()

    cdef inline int digits(self, long long value) except -1:
        """The decimal text of `value`, added to the open string."""
        cdef char buf[24]
        cdef int i = 24
        cdef unsigned long long v
        cdef bint negative = value < 0
        v = <unsigned long long>(-value) if negative else <unsigned long long>value
        while True:
            i -= 1
            buf[i] = <char>(48 + v % 10)
            v //= 10
            if v == 0:
                break
        if negative:
            i -= 1
            buf[i] = 45
        return self.extend(buf + i, 24 - i)

    cdef tuple finish(self):
        """(length, null count, validity or None, values, offsets or None); then empty again."""
        cdef Py_ssize_t n = self.n
        validity = PyBytes_FromStringAndSize(<char*>self.valid, (n + 7) >> 3) if self.nulls else None
        offsets = None
        if self.kind == C_I32:
            values = PyBytes_FromStringAndSize(self.data, n * 4)
        elif self.kind == C_I64:
            values = PyBytes_FromStringAndSize(self.data, n * 8)
        elif self.kind == C_BOOL:
            values = PyBytes_FromStringAndSize(self.data, (n + 7) >> 3)
        else:
            values = PyBytes_FromStringAndSize(self.data, self.dlen)
            offsets = PyBytes_FromStringAndSize(<char*>self.offs, (n + 1) * 4)
        result = (n, self.nulls, validity, values, offsets)
        self._reset()
        return result


cdef class _Field:
    """One field of a record type: its column (or -1), JSON key, and how its writer reads."""

    cdef int sem
    cdef int col
    cdef bytes key
    cdef dict names
    cdef _Op op
    cdef int direct  # 0: read as a Python value; 1: the bare type; 2: ["null", type]
    cdef int avro    # the writer's type (kind) when direct


cdef class _Type:
    """What a row of one record type fills: its fields, name, version, and the columns it leaves null."""

    cdef list fields
    cdef bytes name
    cdef long long version
    cdef list untouched


cdef class _Branch:
    """One branch of the writer's record union: read directly as today's type, or via `convert`."""

    cdef int tag
    cdef list fields      # _Field with `op` set (direct branches), or _Op (converted branches)
    cdef object convert


cdef int _direct_mode(_Field f) except -1:
    """How `f.op` can be read directly for `f.sem` (sets f.direct, f.avro)."""
    cdef _Op op = f.op
    cdef _Op inner
    f.direct = 0
    if op.kind == K_UNION:
        if len(op.branches) != 2 or (<_Op>op.branches[0]).kind != K_NULL:
            return 0
        inner = <_Op>op.branches[1]
        mode = 2
    else:
        inner = op
        mode = 1
    k = inner.kind
    if f.sem in (S_INT, S_ENUM, S_LEADER) and (k == K_INT or k == K_LONG):
        pass
    elif f.sem == S_BOOL and k == K_BOOLEAN:
        pass
    elif f.sem == S_STR and k == K_STRING:
        pass
    elif f.sem == S_UUID and k == K_FIXED and inner.size == 16:
        pass
    elif f.sem == S_INTLIST and k == K_ARRAY and inner.item.kind == K_INT:
        pass
    else:
        return 0
    f.direct = mode
    f.avro = k
    return 0


cdef class ColumnPlan:
    """How bodies of one writer schema become the audit table's columns.

    `kinds`: the column kinds ("i32", "i64", "bool", "str", "list"), in table order; the first
    six are offset, epoch, timestamp (µs), principal, record type and version, the last is
    `payload`. `types[t]` = (name, version, [(semantic, column or -1, JSON key, enum names)])
    for today's record type t. `branches[i]` = (field programs, t or None, convert or None) for
    branch i of the writer's union: t when its fields are today's fields of type t, else
    `convert(values)` returns `[t, *today's values]` (or raises). `structs_json(value)` gives
    the JSON text of a field read as a Python value with semantic "py".
    """

    cdef list kinds
    cdef list types
    cdef list branches
    cdef bint payload
    cdef object structs_json
    cdef object json_dumps

    def __init__(self, kinds, types, branches, bint payload, structs_json, json_dumps):
        cdef _Field f
        cdef _Type t
        cdef _Branch br
        self.kinds = [_COLUMN_KINDS[k] for k in kinds]
        self.payload = payload
        self.structs_json = structs_json
        self.json_dumps = json_dumps
        self.types = []
        for name, version, fields in types:
            t = _Type()
            t.name = name.encode("utf-8")
            t.version = version
            t.fields = []
            touched = set()
            for sem, col, key, names in fields:
                f = _Field()
                f.sem = _SEMANTICS[sem]
                f.col = col
                f.key = key.encode("utf-8")
                f.names = (
                    {int(k): v.encode("utf-8") for k, v in names.items()} if names else None
                )
                if col >= 0:
                    touched.add(col)
                t.fields.append(f)
            t.untouched = [c for c in range(6, len(self.kinds) - 1) if c not in touched]
            self.types.append(t)
        self.branches = []
        for programs, tag, convert in branches:
            br = _Branch()
            br.convert = convert
            br.fields = []
            if tag is not None:
                br.tag = tag
                t = <_Type>self.types[tag]
                if len(programs) != len(t.fields):
                    raise ValueError("a direct branch must have its type's fields")
                for program, plan in zip(programs, t.fields):
                    f = _Field()
                    f.sem = (<_Field>plan).sem
                    f.col = (<_Field>plan).col
                    f.key = (<_Field>plan).key
                    f.names = (<_Field>plan).names
                    f.op = _compile(program)
                    _direct_mode(f)
                    br.fields.append(f)
            else:
                br.tag = -1
                br.fields = [_compile(p) for p in programs]
            self.branches.append(br)

    def builder(self):
        """An empty batch to add blocks to."""
        return ColumnBuilder(self)


cdef class ColumnBuilder:
    """The columns of one batch being built from whole blocks (see `ColumnPlan`)."""

    cdef ColumnPlan plan
    cdef list cols
    cdef _Column pay

    def __init__(self, ColumnPlan plan):
        self.plan = plan
        self.cols = [_Column(k) for k in plan.kinds]
        self.pay = <_Column>self.cols[len(self.cols) - 1]

    @property
    def rows(self):
        """Rows added since the last `finish`."""
        return (<_Column>self.cols[0]).n

    def finish(self):
        """Every column's buffers (see `_Column.finish`); the builder is empty again."""
        return [(<_Column>c).finish() for c in self.cols]

    def clear(self):
        """Drop the rows added since the last `finish` (after a failed `add`)."""
        for c in self.cols:
            (<_Column>c)._reset()

    cdef int _key(self, _Field f) except -1:
        if self.plan.payload:
            self.pay.extend(PyBytes_AS_STRING(f.key), PyBytes_GET_SIZE(f.key))
        return 0

    cdef int _null(self, _Field f) except -1:
        if f.col >= 0:
            (<_Column>self.cols[f.col]).null()
        if self.plan.payload:
            self._key(f)
            self.pay.extend(b"null", 4)
        return 0

    cdef int _int(self, _Field f, long long value) except -1:
        cdef bytes name
        cdef _Column col
        if f.sem == S_ENUM:
            name = f.names.get(value) if f.names is not None else None
            if name is None:
                name = str(value).encode("ascii")
            self._ascii(f, PyBytes_AS_STRING(name), PyBytes_GET_SIZE(name))
            return 0
        if f.sem != S_INT and f.sem != S_LEADER:
            raise ValueError("an integer for a field that is not one")
        if f.col >= 0:
            col = <_Column>self.cols[f.col]
            if f.sem == S_LEADER and value == -2:  # PartitionChange: leader unchanged
                col.null()
            else:
                col.put_int(value)
        if self.plan.payload:
            self._key(f)
            self.pay.digits(value)
        return 0

    cdef int _bool(self, _Field f, bint value) except -1:
        if f.col >= 0:
            (<_Column>self.cols[f.col]).put_bool(value)
        if self.plan.payload:
            self._key(f)
            if value:
                self.pay.extend(b"true", 4)
            else:
                self.pay.extend(b"false", 5)
        return 0

    cdef int _ascii(self, _Field f, const char* p, Py_ssize_t n) except -1:
        """A string known to be JSON-safe ASCII (enum names, ids)."""
        if f.col >= 0:
            (<_Column>self.cols[f.col]).put_bytes(p, n)
        if self.plan.payload:
            self._key(f)
            self.pay.extend(b'"', 1)
            self.pay.extend(p, n)
            self.pay.extend(b'"', 1)
        return 0

    cdef int _str(self, _Field f, const char* p, Py_ssize_t n) except -1:
        cdef Py_ssize_t i
        cdef unsigned char c
        cdef bint plain = True
        for i in range(n):
            c = <unsigned char>p[i]
            if c < 0x20 or c > 0x7E or c == 0x22 or c == 0x5C:
                plain = False
                break
        if plain:
            return self._ascii(f, p, n)
        # Not plain ASCII: check the UTF-8 (as decoding to a str would), JSON as json.dumps does.
        text = PyUnicode_DecodeUTF8(p, n, NULL)
        if f.col >= 0:
            (<_Column>self.cols[f.col]).put_bytes(p, n)
        if self.plan.payload:
            quoted = self.plan.json_dumps(text).encode("ascii")
            self._key(f)
            self.pay.extend(PyBytes_AS_STRING(quoted), PyBytes_GET_SIZE(quoted))
        return 0

    cdef int _uuid(self, _Field f, const unsigned char* p) except -1:
        """Kafka's 22-char URL-safe base64 text of a 16-byte id."""
        cdef char out[22]
        cdef int i, j = 0
        cdef unsigned int v
        for i in range(0, 15, 3):
            v = (p[i] << 16) | (p[i + 1] << 8) | p[i + 2]
            out[j] = _B64[(v >> 18) & 63]
            out[j + 1] = _B64[(v >> 12) & 63]
            out[j + 2] = _B64[(v >> 6) & 63]
            out[j + 3] = _B64[v & 63]
            j += 4
        out[20] = _B64[p[15] >> 2]
        out[21] = _B64[(p[15] & 3) << 4]
        return self._ascii(f, out, 22)

    cdef int _list_begin(self, _Field f) except -1:
        if f.col >= 0:
            (<_Column>self.cols[f.col]).begin()
        if self.plan.payload:
            self._key(f)
            self.pay.extend(b"[", 1)
        return 0

    cdef int _list_item(self, _Field f, long long value, bint first) except -1:
        if f.col >= 0:
            (<_Column>self.cols[f.col]).item(value)
        if self.plan.payload:
            if not first:
                self.pay.extend(b",", 1)
            self.pay.digits(value)
        return 0

    cdef int _list_end(self, _Field f) except -1:
        if f.col >= 0:
            (<_Column>self.cols[f.col]).end()
        if self.plan.payload:
            self.pay.extend(b"]", 1)
        return 0

    cdef int _value(self, _Field f, object value) except -1:
        """Add a field's value given as a Python (Avro) value."""
        cdef bytes raw
        cdef bint first = True
        if value is None:
            return self._null(f)
        if f.sem == S_BOOL:
            return self._bool(f, value)
        if f.sem == S_INT or f.sem == S_ENUM or f.sem == S_LEADER:
            return self._int(f, value)
        if f.sem == S_STR:
            raw = value.encode("utf-8")
            return self._str(f, PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw))
        if f.sem == S_UUID:
            raw = bytes(value)
            if len(raw) != 16:
                raise ValueError(f"an id of {len(raw)} bytes")
            return self._uuid(f, <const unsigned char*>PyBytes_AS_STRING(raw))
        if f.sem == S_INTLIST:
            self._list_begin(f)
            for item in value:
                self._list_item(f, item, first)
                first = False
            return self._list_end(f)
        if f.col >= 0:
            raise ValueError("a field read as a Python value cannot have a column")
        if self.plan.payload:
            raw = self.plan.structs_json(value).encode("utf-8")
            self._key(f)
            self.pay.extend(PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw))
        return 0

    cdef int _direct(self, _Buf* b, _Field f) except -1:
        """Read one field from the body into its column (and the payload)."""
        cdef long long v, count
        cdef Py_ssize_t n, i
        cdef bint first = True
        if f.direct == 2:
            v = _read_long(b)
            if v == 0:
                return self._null(f)
            if v != 1:
                raise ValueError(f"union branch {v} does not exist")
        if f.avro == K_INT:
            return self._int(f, _read_int(b))
        if f.avro == K_LONG:
            return self._int(f, _read_long(b))
        if f.avro == K_STRING:
            n = _read_size(b)
            i = b.pos
            b.pos += n
            return self._str(f, <const char*>(b.data + i), n)
        if f.avro == K_FIXED:
            if 16 > b.end - b.pos:
                raise ValueError("body ends inside a fixed value")
            i = b.pos
            b.pos += 16
            return self._uuid(f, b.data + i)
        if f.avro == K_BOOLEAN:
            if b.pos >= b.end:
                raise ValueError("body ends inside a boolean")
            n = b.data[b.pos]
            b.pos += 1
            if n > 1:
                raise ValueError(f"boolean byte {n} is neither 0 nor 1")
            return self._bool(f, n == 1)
        if f.avro == K_ARRAY:
            self._list_begin(f)
            while True:
                count = _block_count(b, "an array")
                if count == 0:
                    break
                for i in range(count):
                    self._list_item(f, _read_int(b), first)
                    first = False
            return self._list_end(f)
        raise ValueError("no direct reader for this field")  # pragma: no cover

    def add(self, bytes body, Py_ssize_t count):
        """Add the `count` entries of a block body; (first offset, last offset) of the block.

        Raises ValueError unless exactly `count` entries fill exactly the whole body; the
        builder is then in an undefined state and must be `clear`ed.
        """
        cdef _Buf b
        cdef Py_ssize_t entry, i, nbranches = len(self.plan.branches)
        cdef long long index, principal_branch, offset, millis, first = 0, last = 0
        cdef _Branch br
        cdef _Type t
        cdef _Field f
        cdef list values
        cdef bint payload = self.plan.payload
        cdef _Column c_offset = <_Column>self.cols[0]
        cdef _Column c_epoch = <_Column>self.cols[1]
        cdef _Column c_time = <_Column>self.cols[2]
        cdef _Column c_principal = <_Column>self.cols[3]
        cdef _Column c_type = <_Column>self.cols[4]
        cdef _Column c_version = <_Column>self.cols[5]
        _open_block(&b, body, count)
        for entry in range(count):
            offset = _read_long(&b)
            if entry == 0:
                first = offset
            last = offset
            c_offset.put_int(offset)
            c_epoch.put_int(_read_int(&b))
            millis = _read_long(&b)
            if millis > 9223372036854775 or millis < -9223372036854775:
                raise ValueError(f"timestamp {millis} ms is outside the microsecond range")
            c_time.put_int(millis * 1000)
            principal_branch = _read_long(&b)
            if principal_branch == 0:
                c_principal.null()
            elif principal_branch == 1:
                i = _read_size(&b)
                # Checked as UTF-8 only when not ASCII, as the string columns are.
                _check_utf8(<const char*>(b.data + b.pos), i)
                c_principal.put_bytes(<const char*>(b.data + b.pos), i)
                b.pos += i
            else:
                raise ValueError(f"principal union branch {principal_branch} does not exist")
            index = _branch(&b, nbranches)
            br = <_Branch>self.plan.branches[index]
            if payload:
                self.pay.begin()
            if br.tag >= 0:
                t = <_Type>self.plan.types[br.tag]
                for f in br.fields:
                    if f.direct:
                        self._direct(&b, f)
                    else:
                        self._value(f, _read(&b, f.op))
            else:
                values = [_read(&b, <_Op>op) for op in br.fields]
                values = br.convert(values)
                t = <_Type>self.plan.types[values[0]]
                if len(values) != len(t.fields) + 1:
                    raise ValueError("a converted record has the wrong number of fields")
                for i in range(len(t.fields)):
                    self._value(<_Field>t.fields[i], values[i + 1])
            if payload:
                if not t.fields:
                    self.pay.extend(b"{", 1)
                self.pay.extend(b"}", 1)
                self.pay.end()
            else:
                self.pay.null()
            c_type.put_bytes(PyBytes_AS_STRING(t.name), PyBytes_GET_SIZE(t.name))
            c_version.put_int(t.version)
            for i in t.untouched:
                (<_Column>self.cols[i]).null()
        _close_block(&b, count)
        return first, last


cdef int _check_utf8(const char* p, Py_ssize_t n) except -1:
    cdef Py_ssize_t i
    for i in range(n):
        if <unsigned char>p[i] > 0x7F:
            PyUnicode_DecodeUTF8(p, n, NULL)
            return 0
    return 0


# ---------------------------------------------------------------------------------------------
# Encoding: records straight into a block body (the append path; see `records.fast_encode`).
#
# The same programs as the decoder's, read the other way: each record's Avro values come from
# its branch's generated `values(record)` (the codec's range and enum checks, then a tuple in
# field order) and are written as fastavro writes them, byte for byte. Only the unions this
# code's schemas use are taken (null first, one other branch: null writes branch 0, anything
# else branch 1, as fastavro chooses); `BlockEncoder` refuses a program with any other union,
# and the caller then writes through fastavro.

from cpython.bytes cimport PyBytes_Check
from cpython.unicode cimport PyUnicode_AsUTF8String, PyUnicode_Check


cdef struct _Out:
    char* data
    Py_ssize_t len
    Py_ssize_t cap


cdef int _reserve(_Out* o, Py_ssize_t n) except -1:
    cdef Py_ssize_t cap
    cdef char* p
    if o.len + n > o.cap:
        cap = max(o.cap * 2, o.len + n, 4096)
        p = <char*>realloc(o.data, cap)
        if p == NULL:
            raise MemoryError()
        o.data = p
        o.cap = cap
    return 0


cdef inline int _write_long(_Out* o, long long value) except -1:
    cdef unsigned long long n = (<unsigned long long>value << 1) ^ <unsigned long long>(value >> 63)
    if o.len + 10 > o.cap:
        _reserve(o, 10)
    while n & ~(<unsigned long long>0x7F):
        o.data[o.len] = <char>((n & 0x7F) | 0x80)
        o.len += 1
        n >>= 7
    o.data[o.len] = <char>n
    o.len += 1
    return 0


cdef inline int _write_int(_Out* o, object value) except -1:
    cdef long long n = value
    if n < -2147483648 or n > 2147483647:
        raise ValueError(f"int value {n} is out of range")
    return _write_long(o, n)


cdef inline int _write_raw(_Out* o, const char* data, Py_ssize_t n) except -1:
    _reserve(o, n)
    memcpy(o.data + o.len, data, n)
    o.len += n
    return 0


cdef int _write_str(_Out* o, object value) except -1:
    if not PyUnicode_Check(value):
        raise TypeError(f"{value!r} is not a string")
    cdef bytes encoded = PyUnicode_AsUTF8String(value)
    _write_long(o, PyBytes_GET_SIZE(encoded))
    return _write_raw(o, PyBytes_AS_STRING(encoded), PyBytes_GET_SIZE(encoded))


cdef int _check_encodable(_Op op) except -1:
    """Refuse a program holding a union this encoder does not choose a branch of."""
    cdef _Op item
    if op.kind == K_UNION:
        if len(op.branches) != 2 or (<_Op>op.branches[0]).kind != K_NULL:
            raise ValueError("only [null, T] unions are encoded here")
        _check_encodable(<_Op>op.branches[1])
    elif op.kind == K_ARRAY or op.kind == K_MAP:
        _check_encodable(op.item)
    elif op.kind == K_RECORD:
        for item in op.fields:
            _check_encodable(item)
    return 0


cdef int _write(_Out* o, _Op op, object value) except -1:
    cdef Py_ssize_t i, n
    cdef double d
    cdef float f
    cdef unsigned char byte
    cdef _Op item
    kind = op.kind
    if kind == K_INT:
        return _write_int(o, value)
    if kind == K_LONG:
        return _write_long(o, value)
    if kind == K_STRING:
        return _write_str(o, value)
    if kind == K_UNION:
        if value is None:
            return _write_long(o, 0)
        _write_long(o, 1)
        return _write(o, <_Op>op.branches[1], value)
    if kind == K_ARRAY:
        n = len(value)
        if n:
            _write_long(o, n)
            for element in value:
                _write(o, op.item, element)
        return _write_long(o, 0)
    if kind == K_FIXED:
        if not PyBytes_Check(value):
            raise TypeError(f"{value!r} is not bytes")
        if PyBytes_GET_SIZE(value) != op.size:
            raise ValueError(f"a fixed value of {PyBytes_GET_SIZE(value)} bytes, not {op.size}")
        return _write_raw(o, PyBytes_AS_STRING(value), op.size)
    if kind == K_BOOLEAN:
        byte = 1 if value else 0
        return _write_raw(o, <const char*>&byte, 1)
    if kind == K_NULL:
        if value is not None:
            raise TypeError(f"{value!r} is not null")
        return 0
    if kind == K_BYTES:
        if not PyBytes_Check(value):
            raise TypeError(f"{value!r} is not bytes")
        _write_long(o, PyBytes_GET_SIZE(value))
        return _write_raw(o, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value))
    if kind == K_RECORD:
        if not isinstance(value, dict):
            raise TypeError(f"{value!r} is not a record's dict")
        for i in range(len(op.fields)):
            name = op.field_names[i]
            if name not in value:
                raise ValueError(f"field {name!r} is missing")
            _write(o, <_Op>op.fields[i], value[name])
        return 0
    if kind == K_ENUM:
        try:
            i = op.symbols.index(value)
        except ValueError:
            raise ValueError(f"{value!r} is not one of {op.symbols}") from None
        return _write_long(o, i)
    if kind == K_MAP:
        if not isinstance(value, dict):
            raise TypeError(f"{value!r} is not a map")
        n = len(value)
        if n:
            _write_long(o, n)
            for key, element in value.items():
                _write_str(o, key)
                _write(o, op.item, element)
        return _write_long(o, 0)
    if kind == K_FLOAT:
        f = value
        return _write_raw(o, <const char*>&f, 4)
    if kind == K_DOUBLE:
        d = value
        return _write_raw(o, <const char*>&d, 8)
    raise ValueError(f"program node kind {kind} is not writable")


cdef class BlockEncoder:
    """Encodes records as the entries of a block body, for the writer schema of this code.

    `branches` maps each record class to `(branch index, field programs, values)`: the index of
    its branch in the entry's record union, the programs of its fields in schema order, and
    `values(record)`, the checked tuple of its Avro values in that order.
    """

    cdef dict _by_class

    def __init__(self, branches):
        self._by_class = {}
        for cls, (index, field_programs, values) in branches.items():
            ops = [_compile(p) for p in field_programs]
            for op in ops:
                _check_encodable(<_Op>op)
            self._by_class[cls] = (index, ops, values)

    def encode(self, batches, long long first_offset, long long epoch, long long timestamp):
        """(count, body) of `batches` ((records, principal) pairs) as entries from `first_offset`.

        KeyError names a class that is not a known record; a value that does not fit its
        schema raises TypeError, ValueError or OverflowError (as fastavro's writer does).
        """
        cdef _Out o
        cdef long long offset = first_offset
        cdef Py_ssize_t count = 0, i, n
        cdef list ops
        cdef tuple values
        cdef bytes principal_bytes
        if epoch < -2147483648 or epoch > 2147483647:
            raise ValueError(f"epoch {epoch} is out of range")
        o.data = NULL
        o.len = 0
        o.cap = 0
        try:
            for records, principal in batches:
                if principal is None:
                    principal_bytes = None
                elif PyUnicode_Check(principal):
                    principal_bytes = PyUnicode_AsUTF8String(principal)
                else:
                    raise TypeError(f"principal {principal!r} is not a string")
                for record in records:
                    found = self._by_class.get(type(record))
                    if found is None:
                        raise KeyError(type(record).__name__)
                    values = found[2](record)
                    ops = <list>found[1]
                    n = len(ops)
                    if len(values) != n:
                        raise ValueError("a record's values do not match its schema")
                    _write_long(&o, offset)
                    _write_long(&o, epoch)
                    _write_long(&o, timestamp)
                    if principal_bytes is None:
                        _write_long(&o, 0)
                    else:
                        _write_long(&o, 1)
                        _write_long(&o, PyBytes_GET_SIZE(principal_bytes))
                        _write_raw(
                            &o, PyBytes_AS_STRING(principal_bytes),
                            PyBytes_GET_SIZE(principal_bytes),
                        )
                    _write_long(&o, <long long>found[0])
                    for i in range(n):
                        _write(&o, <_Op>ops[i], values[i])
                    offset += 1
                    count += 1
            if count == 0:
                return 0, b""
            return count, PyBytes_FromStringAndSize(o.data, o.len)
        finally:
            free(o.data)
