# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Request bodies read by compiled code, from a plan `native_reader` builds per entity class.

The fast path only: whatever it does not read plainly (a tag the schema lacks, a null where a
value is due, a length or count beyond the bytes, an unknown error code, bad UTF-8, a varint
longer than 5 bytes) raises `GiveUp`, and the caller reads the frame with the generated
readers, which give the result or the refusal. What it reads, it reads as they do.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.datetime cimport import_datetime, timedelta_new
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from libc.string cimport memcpy, memcmp

import_datetime()


cdef extern from "Python.h":
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)
    object PyType_GenericAlloc(object type, Py_ssize_t nitems)
    object _PyLong_FromByteArray(const unsigned char* data, size_t n, int little_endian,
                                 int is_signed)
    ctypedef struct PyMemberDef:
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member


class GiveUp(Exception):
    """The bytes are not read here: the generated readers read them (or refuse them)."""


cdef enum:
    K_INT8 = 1
    K_INT16
    K_INT32
    K_INT64
    K_UINT8
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
    "uint8": K_UINT8,
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
    "records": K_BYTES,  # a record batch's bytes, as they came (the generated readers' too)
    "entity": K_ENTITY,
    "array": K_ARRAY,
}
"""The kind codes, by the names `native_reader` gives them."""


cdef class Value:
    """How one value is read: a field's, or an array's items'."""

    cdef int kind
    cdef bint nullable
    cdef bint flexible
    cdef Py_ssize_t min_size
    cdef Value item
    cdef Entity entity

    def __init__(self, str kind, bint nullable, bint flexible, Py_ssize_t min_size=0,
                 Value item=None, Entity entity=None):
        self.kind = KINDS[kind]
        self.nullable = nullable
        self.flexible = flexible
        self.min_size = min_size
        self.item = item
        self.entity = entity


cdef Py_ssize_t _slot_offset(object slot) except -1:
    """Where a slot's value is in its instances (a `member_descriptor`, checked by the caller)."""
    if type(slot).__name__ != "member_descriptor":
        raise TypeError(f"{slot!r} is not a slot")
    return (<PyMemberDescrObject*>slot).d_member.offset


cdef class Entity:
    """An entity class's fields in order (their slots), and its tagged fields' defaults.

    Entities are made as the generated readers make them: allocated without `__init__`, each
    slot set in turn (what `object.__setattr__` does for a slot, without looking it up).
    """

    cdef object entity_class
    cdef bint flexible
    cdef list offsets
    cdef list values
    cdef list tag_offsets
    cdef list tag_defaults
    cdef list tag_numbers
    cdef list tag_values

    def __init__(self, entity_class, bint flexible):
        self.entity_class = entity_class
        self.flexible = flexible
        self.offsets = []
        self.values = []
        self.tag_offsets = []
        self.tag_defaults = []
        self.tag_numbers = []
        self.tag_values = []

    def add(self, slot, Value value):
        """A field read in its turn, by its slot (the class's `member_descriptor`)."""
        self.offsets.append(_slot_offset(slot))
        self.values.append(value)

    def add_tagged(self, slot, default, long long tag, Value value):
        """A tagged field: its default, or its value where the frame holds its tag."""
        self.tag_offsets.append(_slot_offset(slot))
        self.tag_defaults.append(default)
        self.tag_numbers.append(tag)
        self.tag_values.append(value)


cdef inline void _set_slot(object entity, Py_ssize_t offset, object value):
    cdef PyObject** slot = <PyObject**>((<char*><PyObject*>entity) + offset)
    Py_INCREF(value)
    Py_XDECREF(slot[0])
    slot[0] = <PyObject*>value


cdef object _uuid_class = None
cdef Py_ssize_t _uuid_int = 0
cdef Py_ssize_t _uuid_safe = 0
cdef object _uuid_unknown = None
cdef dict _errors = None
cdef unsigned char _ZERO16[16]
for _i in range(16):
    _ZERO16[_i] = 0


def set_helpers(uuid_class, safe_unknown, dict errors):
    """`uuid.UUID` (made as `generated_reader_runtime._uuid` makes it) and the error codes by value."""
    global _uuid_class, _uuid_int, _uuid_safe, _uuid_unknown, _errors
    _uuid_class = uuid_class
    _uuid_int = _slot_offset(vars(uuid_class)["int"])
    _uuid_safe = _slot_offset(vars(uuid_class)["is_safe"])
    _uuid_unknown = safe_unknown
    _errors = errors


cdef struct Buf:
    const unsigned char* data
    Py_ssize_t size
    Py_ssize_t pos


cdef inline int _need(Buf* b, Py_ssize_t n) except -1:
    if n < 0 or b.size - b.pos < n:
        raise GiveUp
    return 0


cdef inline unsigned long long _be(Buf* b, int n) except? 0xFFFFFFFFFFFFFFFF:
    cdef unsigned long long value = 0
    cdef int i
    _need(b, n)
    for i in range(n):
        value = (value << 8) | b.data[b.pos + i]
    b.pos += n
    return value


cdef inline long long _uvarint(Buf* b) except -1:
    cdef long long value = 0
    cdef int shift = 0
    cdef unsigned char byte
    cdef int i
    for i in range(5):
        _need(b, 1)
        byte = b.data[b.pos]
        b.pos += 1
        value |= (<long long>(byte & 0x7F)) << shift
        if byte < 0x80:
            return value
        shift += 7
    raise GiveUp


cdef object _read_value(Buf* b, Value v):
    cdef long long length, count, i
    cdef unsigned long long raw
    cdef double d
    cdef signed char marker
    cdef Py_ssize_t start
    cdef int kind = v.kind
    if kind == K_INT32:
        return <int>_be(b, 4)
    if kind == K_INT16:
        return <short>_be(b, 2)
    if kind == K_STRING or kind == K_BYTES:
        if v.flexible:
            length = _uvarint(b) - 1
        elif kind == K_STRING:
            length = <short>_be(b, 2)
            if length < -1:
                raise GiveUp
        else:
            length = <int>_be(b, 4)
            if length < -1:
                raise GiveUp
        if length == -1:
            if not v.nullable:
                raise GiveUp
            return None
        _need(b, length)
        start = b.pos
        b.pos += length
        if kind == K_STRING:
            return PyUnicode_DecodeUTF8(<const char*>b.data + start, length, NULL)
        return PyBytes_FromStringAndSize(<const char*>b.data + start, length)
    if kind == K_ENTITY:
        if v.nullable:
            marker = <signed char>_be(b, 1)
            if marker == -1:
                return None
        return _read_entity(b, v.entity)
    if kind == K_ARRAY:
        if v.flexible:
            count = _uvarint(b) - 1
        else:
            count = <int>_be(b, 4)
            if count < -1:
                raise GiveUp
        if count == -1:
            if not v.nullable:
                raise GiveUp
            return None
        if count == 0:
            return ()
        # Items of no bytes could fill any count: such arrays are left to the generated readers.
        if v.min_size <= 0 or count > (b.size - b.pos) // v.min_size:
            raise GiveUp
        made = PyTuple_New(count)
        for i in range(count):
            item = _read_value(b, v.item)
            Py_INCREF(item)
            PyTuple_SET_ITEM(made, i, item)
        return made
    if kind == K_BOOL:
        raw = _be(b, 1)
        if raw == 0:
            return False
        if raw == 1:
            return True
        raise GiveUp
    if kind == K_UUID:
        _need(b, 16)
        start = b.pos
        b.pos += 16
        if memcmp(b.data + start, _ZERO16, 16) == 0:
            return None
        made = PyType_GenericAlloc(_uuid_class, 0)
        _set_slot(made, _uuid_int, _PyLong_FromByteArray(b.data + start, 16, 0, 0))
        _set_slot(made, _uuid_safe, _uuid_unknown)
        return made
    if kind == K_TD32:
        return _milliseconds(<int>_be(b, 4))
    if kind == K_TD64:
        return _milliseconds(<long long>_be(b, 8))
    if kind == K_INT64:
        return <long long>_be(b, 8)
    if kind == K_INT8:
        return <signed char>_be(b, 1)
    if kind == K_UINT8:
        return <unsigned char>_be(b, 1)
    if kind == K_UINT16:
        return <unsigned short>_be(b, 2)
    if kind == K_UINT32:
        return <unsigned int>_be(b, 4)
    if kind == K_ERROR:
        found = _errors.get(<short>_be(b, 2))
        if found is None:
            raise GiveUp
        return found
    if kind == K_FLOAT64:
        raw = _be(b, 8)
        memcpy(&d, &raw, 8)
        return d
    raise GiveUp


cdef object _milliseconds(long long ms):
    """`timedelta(0, 0, 0, ms)`: days, seconds and microseconds as it normalises them."""
    cdef long long days = ms // 86400000  # floored (Cython divides as Python does)
    cdef long long rest = ms - days * 86400000
    if days < -999999999 or days > 999999999:
        raise GiveUp  # out of timedelta's range: the generated readers raise its error
    return timedelta_new(<int>days, <int>(rest // 1000), <int>((rest % 1000) * 1000))


cdef object _read_entity(Buf* b, Entity e):
    cdef list values = e.values
    cdef list offsets = e.offsets
    cdef Py_ssize_t i, n = len(values)
    entity = PyType_GenericAlloc(e.entity_class, 0)
    for i in range(n):
        _set_slot(entity, <Py_ssize_t>offsets[i], _read_value(b, <Value>values[i]))
    offsets = e.tag_offsets
    values = e.tag_defaults
    for i in range(len(offsets)):
        _set_slot(entity, <Py_ssize_t>offsets[i], values[i])
    if e.flexible:
        _read_tags(b, e, entity)
    return entity


cdef int _read_tags(Buf* b, Entity e, object entity) except -1:
    """The tagged-fields section, as the generated readers read it: each tag's value read
    with its field's reader (its size read, not checked); a tag the class lacks gives up."""
    cdef long long count = _uvarint(b)
    cdef long long tag, n
    cdef Py_ssize_t i, found
    cdef list numbers = e.tag_numbers
    for n in range(count):
        tag = _uvarint(b)
        _uvarint(b)  # the value's size
        found = -1
        for i in range(len(numbers)):
            if <long long>numbers[i] == tag:
                found = i
                break
        if found < 0:
            raise GiveUp  # unknown to the schema: the generated readers refuse it
        _set_slot(entity, <Py_ssize_t>e.tag_offsets[found], _read_value(b, <Value>e.tag_values[found]))
    return 0


cdef class Reader:
    """`(buffer, offset) -> (entity, bytes read)`, as a generated reader is called."""

    cdef Entity entity

    def __init__(self, Entity entity):
        self.entity = entity

    def __call__(self, bytes buffer not None, Py_ssize_t offset):
        cdef Buf b
        b.data = <const unsigned char*>PyBytes_AS_STRING(buffer)
        b.size = PyBytes_GET_SIZE(buffer)
        if offset < 0 or offset > b.size:
            raise GiveUp
        b.pos = offset
        entity = _read_entity(&b, self.entity)
        return entity, b.pos - offset

    def plain_request(self, bytes frame not None, bint flexible):
        """(correlation id, client id, body) of a request frame (without its size) whose
        header holds no tagged field: key, version, correlation id, a nullable legacy client
        id, then (`flexible`, header v2) an empty tagged-fields section, then the body.
        """
        cdef Buf b
        cdef long long length
        b.data = <const unsigned char*>PyBytes_AS_STRING(frame)
        b.size = PyBytes_GET_SIZE(frame)
        b.pos = 4  # the key and version: the caller has them
        correlation_id = <int>_be(&b, 4)
        length = <short>_be(&b, 2)
        if length >= 0:
            _need(&b, length)
            client_id = PyUnicode_DecodeUTF8(<const char*>b.data + b.pos, length, NULL)
            b.pos += length
        elif length == -1:
            client_id = None
        else:
            raise GiveUp
        if flexible:
            _need(&b, 1)
            if b.data[b.pos] != 0:
                raise GiveUp
            b.pos += 1
        return correlation_id, client_id, _read_entity(&b, self.entity)

    def plain_response(self, bytes frame not None, bint flexible):
        """(correlation id, body) of a response frame (without its size) whose header holds no
        tagged field: the correlation id, then (`flexible`, header v1) an empty tagged-fields
        section, then the body.
        """
        cdef Buf b
        b.data = <const unsigned char*>PyBytes_AS_STRING(frame)
        b.size = PyBytes_GET_SIZE(frame)
        b.pos = 0
        correlation_id = <int>_be(&b, 4)
        if flexible:
            _need(&b, 1)
            if b.data[b.pos] != 0:
                raise GiveUp
            b.pos += 1
        return correlation_id, _read_entity(&b, self.entity)
