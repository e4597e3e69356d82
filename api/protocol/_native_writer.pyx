# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Answers written by compiled code from their plain values, on a plan `native_writer` builds.

The fast path only: a value it does not write plainly (a built entity where a dict is
expected, a missing required value, a number out of
its type's range, a type other than the usual one) makes it give up (None), and the caller
writes the answer with `generated_writer.dict_writer_for`, which writes it or raises as it always
did. What it writes, it writes as that writer does (tests compare them).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.datetime cimport (
    import_datetime,
    timedelta_days,
    timedelta_microseconds,
    timedelta_seconds,
)
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.string cimport memcpy, memset

import_datetime()


cdef enum:
    K_INT8 = 1
    K_INT16
    K_INT32
    K_INT64
    K_UINT16
    K_UINT32
    K_FLOAT64
    K_BOOL
    K_ERROR
    K_TD32
    K_TD64
    K_UUID
    K_STRING
    K_BYTES
    K_ENTITY
    K_ARRAY


KINDS = {
    "int8": K_INT8,
    "int16": K_INT16,
    "int32": K_INT32,
    "int64": K_INT64,
    "uint16": K_UINT16,
    "uint32": K_UINT32,
    "float64": K_FLOAT64,
    "bool": K_BOOL,
    "error_code": K_ERROR,
    "timedelta_i32": K_TD32,
    "timedelta_i64": K_TD64,
    "uuid": K_UUID,
    "string": K_STRING,
    "bytes": K_BYTES,
    "records": K_BYTES,
    "entity": K_ENTITY,
    "array": K_ARRAY,
}
"""The kind codes, by the names `native_writer` gives them."""


class _GiveUp(Exception):
    pass


cdef object _REQUIRED = object()
cdef object _encoded_class = None
cdef object _uuid_class = None
cdef object _timedelta_class = None
cdef object _at_default = None


def set_helpers(encoded_class, uuid_class, timedelta_class, at_default):
    """`generated_writer.Encoded` (an array written already), `uuid.UUID`, `datetime.timedelta`
    and `generated_writer.at_default` (whether a tagged field's value is its default)."""
    global _encoded_class, _uuid_class, _timedelta_class, _at_default
    _encoded_class = encoded_class
    _uuid_class = uuid_class
    _timedelta_class = timedelta_class
    _at_default = at_default


cdef class Value:
    """How one value is written: a field's, or an array's items'."""

    cdef int kind
    cdef bint nullable
    cdef bint flexible
    cdef Value item
    cdef Entity entity

    def __init__(self, str kind, bint nullable, bint flexible, Value item=None,
                 Entity entity=None):
        self.kind = KINDS[kind]
        self.nullable = nullable
        self.flexible = flexible
        self.item = item
        self.entity = entity


cdef class Entity:
    """An entity class's fields in order (key, how, default) and its tagged fields."""

    cdef bint flexible
    cdef list keys
    cdef list values
    cdef list defaults
    cdef list factories
    cdef list tag_keys
    cdef list tag_defaults
    cdef list tag_numbers
    cdef list tag_values

    def __init__(self, bint flexible):
        self.flexible = flexible
        self.keys = []
        self.values = []
        self.defaults = []
        self.factories = []
        self.tag_keys = []
        self.tag_defaults = []
        self.tag_numbers = []
        self.tag_values = []

    def add(self, str key, Value value, default=_REQUIRED, factory=None):
        """A field in its turn; `default` where the key may be left out (or `factory`)."""
        self.keys.append(key)
        self.values.append(value)
        self.defaults.append(default)
        self.factories.append(factory)

    def add_tagged(self, str key, default, long long tag, Value value):
        """A tagged field (in ascending tag order): written only away from its default."""
        self.tag_keys.append(key)
        self.tag_defaults.append(default)
        self.tag_numbers.append(tag)
        self.tag_values.append(value)


cdef struct Out:
    char* data
    Py_ssize_t size
    Py_ssize_t capacity


cdef int _open(Out* out, Py_ssize_t capacity) except -1:
    """An empty buffer (freed by the caller with `PyMem_Free(out.data)`)."""
    out.capacity = capacity
    out.size = 0
    out.data = <char*>PyMem_Malloc(capacity)
    if out.data == NULL:
        raise MemoryError()
    return 0


cdef int _grow(Out* out, Py_ssize_t more) except -1:
    cdef Py_ssize_t need = out.size + more
    cdef Py_ssize_t capacity
    cdef char* grown
    if need <= out.capacity:
        return 0
    capacity = max(need, 2 * out.capacity)
    grown = <char*>PyMem_Realloc(out.data, capacity)
    if grown == NULL:
        raise MemoryError()
    out.data = grown
    out.capacity = capacity
    return 0


cdef inline int _put(Out* out, const char* data, Py_ssize_t size) except -1:
    _grow(out, size)
    memcpy(out.data + out.size, data, size)
    out.size += size
    return 0


cdef inline int _byte(Out* out, unsigned char value) except -1:
    _grow(out, 1)
    out.data[out.size] = <char>value
    out.size += 1
    return 0


cdef inline int _be(Out* out, unsigned long long value, int n) except -1:
    cdef int i
    _grow(out, n)
    for i in range(n):
        out.data[out.size + i] = <char>((value >> (8 * (n - 1 - i))) & 0xFF)
    out.size += n
    return 0


cdef inline int _uvarint(Out* out, unsigned long long value) except -1:
    while value > 0x7F:
        _byte(out, (value & 0x7F) | 0x80)
        value >>= 7
    _byte(out, value)
    return 0


cdef long long _int(object value, long long low, long long high) except? -1:
    """An int (or an int subclass: a bool, an error code's enum) within [low, high]."""
    cdef long long found
    if not isinstance(value, int):
        raise _GiveUp  # `struct` takes other numbers too: `generated_writer` writes them
    try:
        found = value
    except OverflowError:
        raise _GiveUp
    if found < low or found > high:
        raise _GiveUp
    return found


cdef long long _milliseconds(object value) except? -1:
    """A duration as `generated_writer` takes it: a `timedelta` (floored to ms) or whole ms."""
    cdef long long micros
    if type(value) is _timedelta_class:
        micros = (<long long>timedelta_days(value) * 86400 + timedelta_seconds(value)) * 1000000
        micros += timedelta_microseconds(value)
        return micros // 1000  # floored, as `timedelta // timedelta(milliseconds=1)`
    if type(value) is not int:
        raise _GiveUp
    return value


cdef int _write_value(Out* out, Value v, object value) except -1:
    cdef int kind = v.kind
    cdef Py_ssize_t size
    cdef const char* text
    cdef long long number
    cdef double d
    cdef unsigned long long raw
    if kind == K_INT32:
        _be(out, <unsigned long long>_int(value, -2147483648, 2147483647), 4)
    elif kind == K_INT16 or kind == K_ERROR:  # an error code: its int16
        _be(out, <unsigned long long>_int(value, -32768, 32767), 2)
    elif kind == K_STRING:
        if value is None:
            if not v.nullable:
                raise _GiveUp
            if v.flexible:
                _byte(out, 0)
            else:
                _be(out, 0xFFFF, 2)
            return 0
        if type(value) is not str:
            raise _GiveUp
        try:
            text = PyUnicode_AsUTF8AndSize(value, &size)
        except UnicodeError:
            raise _GiveUp
        if v.flexible:
            _uvarint(out, size + 1)
        else:
            if size > 32767:
                raise _GiveUp
            _be(out, size, 2)
        _put(out, text, size)
    elif kind == K_ARRAY:
        if value is None:
            if v.flexible:
                _byte(out, 0)
            else:
                _be(out, 0xFFFFFFFF, 4)
            return 0
        if type(value) is _encoded_class:
            _put(out, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value))
            return 0
        if type(value) is not list and type(value) is not tuple:
            raise _GiveUp
        size = len(value)
        if v.flexible:
            _uvarint(out, size + 1)
        else:
            _be(out, size, 4)
        for item in value:
            _write_value(out, v.item, item)
    elif kind == K_ENTITY:
        if v.nullable:
            if value is None:
                _byte(out, 0xFF)
                return 0
            _byte(out, 1)
        if type(value) is not dict:
            raise _GiveUp  # a built entity: `generated_writer` writes it
        _write_entity(out, v.entity, <dict>value)
    elif kind == K_BOOL:
        _byte(out, 1 if value else 0)
    elif kind == K_UUID:
        if value is None:
            _grow(out, 16)
            memset(out.data + out.size, 0, 16)
            out.size += 16
        elif type(value) is bytes and PyBytes_GET_SIZE(value) == 16:
            _put(out, PyBytes_AS_STRING(value), 16)
        elif type(value) is _uuid_class:
            data = value.bytes
            _put(out, PyBytes_AS_STRING(data), 16)
        else:
            raise _GiveUp
    elif kind == K_INT64:
        _be(out, <unsigned long long>_int(value, -9223372036854775807 - 1, 9223372036854775807), 8)
    elif kind == K_INT8:
        _be(out, <unsigned long long>_int(value, -128, 127), 1)
    elif kind == K_UINT16:
        _be(out, <unsigned long long>_int(value, 0, 65535), 2)
    elif kind == K_UINT32:
        _be(out, <unsigned long long>_int(value, 0, 4294967295), 4)
    elif kind == K_TD32:
        number = _milliseconds(value)
        if number < -2147483648 or number > 2147483647:
            raise _GiveUp
        _be(out, <unsigned long long>number, 4)
    elif kind == K_TD64:
        _be(out, <unsigned long long>_milliseconds(value), 8)
    elif kind == K_FLOAT64:
        if type(value) is not float:
            raise _GiveUp
        d = value
        memcpy(&raw, &d, 8)
        _be(out, raw, 8)
    elif kind == K_BYTES:
        if value is None:
            if not v.nullable:
                raise _GiveUp
            if v.flexible:
                _byte(out, 0)
            else:
                _be(out, 0xFFFFFFFF, 4)
            return 0
        if type(value) is not bytes:
            raise _GiveUp
        size = PyBytes_GET_SIZE(value)
        if v.flexible:
            _uvarint(out, size + 1)
        else:
            _be(out, size, 4)
        _put(out, PyBytes_AS_STRING(value), size)
    else:
        raise _GiveUp
    return 0


cdef int _write_entity(Out* out, Entity e, dict values) except -1:
    cdef list keys = e.keys
    cdef list how = e.values
    cdef list defaults = e.defaults
    cdef Py_ssize_t i, n = len(keys)
    for i in range(n):
        value = values.get(keys[i], _REQUIRED)
        if value is _REQUIRED:
            value = defaults[i]
            if value is _REQUIRED:
                factory = e.factories[i]
                if factory is None:
                    raise _GiveUp  # `generated_writer` names the missing field
                value = factory()
        _write_value(out, <Value>how[i], value)
    if e.flexible:
        _write_tags(out, e, values)
    return 0


cdef int _write_tags(Out* out, Entity e, dict values) except -1:
    """The tagged-fields section as `generated_writer` writes it: the fields away from their
    defaults (`at_default`), in ascending tag order, each as tag, size and value."""
    cdef list keys = e.tag_keys
    cdef list defaults = e.tag_defaults
    cdef list present = None
    cdef Py_ssize_t i, n = len(keys)
    cdef Out body
    for i in range(n):
        default = defaults[i]
        value = values.get(keys[i], default)
        if value is default or _at_default(value, default):
            continue
        if present is None:
            present = []
        present.append(i)
    if present is None:
        _byte(out, 0)
        return 0
    _uvarint(out, len(present))
    for i in present:
        _open(&body, 64)  # the value first: its size goes before it
        try:
            _write_value(&body, <Value>e.tag_values[i], values.get(keys[i]))
            _uvarint(out, <long long>e.tag_numbers[i])
            _uvarint(out, body.size)
            _put(out, body.data, body.size)
        finally:
            PyMem_Free(body.data)
    return 0


cdef class Writer:
    """`frame(head, correlation id, values)`: the answer frame, or None where it gives up."""

    cdef Entity entity

    def __init__(self, Entity entity):
        self.entity = entity

    def frame(self, bytes head not None, int correlation_id, dict values not None):
        """The whole frame: `head` (size, correlation id, the header's tags) then the body,
        with the size and correlation id filled in."""
        if PyBytes_GET_SIZE(head) < 8:
            return None
        return _written(self.entity, head, correlation_id, values)

    def body(self, dict values not None):
        """The entity's bytes alone (a request's body, after its header), or None."""
        return _written(self.entity, None, 0, values)


cdef object _written(Entity entity, bytes head, int correlation_id, dict values):
    """`head` (None: none) and the entity's bytes, or None where the writer gives up; with a
    head, its size and correlation id filled in."""
    cdef Out out
    _open(&out, 256)
    try:
        if head is not None:
            _put(&out, PyBytes_AS_STRING(head), PyBytes_GET_SIZE(head))
        try:
            _write_entity(&out, entity, values)
        except _GiveUp:
            return None
        if head is not None:
            _be_at(out.data, 0, out.size - 4)
            _be_at(out.data, 4, <unsigned int>correlation_id)
        return PyBytes_FromStringAndSize(out.data, out.size)
    finally:
        PyMem_Free(out.data)


cdef inline void _be_at(char* data, Py_ssize_t at, unsigned int value):
    data[at] = <char>((value >> 24) & 0xFF)
    data[at + 1] = <char>((value >> 16) & 0xFF)
    data[at + 2] = <char>((value >> 8) & 0xFF)
    data[at + 3] = <char>(value & 0xFF)
