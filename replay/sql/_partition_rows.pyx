# cython: language_level=3, boundscheck=False, wraparound=False
"""A topic's snapshot rows into PartitionRecords and checksum bytes, in C (`topic_builder`).

`build` does what `topic_builder._partitions` does for rows that are what the store writes (a
tuple of ten per partition, in partition id order, a known mode): an object of the record's
class, its ten slots stored directly, out of the cyclic collector's view (`new_record`).
`marshal_rows` gives `marshal.dumps(rows, 0)`'s bytes for rows of ASCII text, 32-bit ints and
None (what a partition row holds). Anything else is left to Python (`None` back): that
function says what is wrong with a row, `marshal` encodes the rest.
"""

from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF
from libc.string cimport memcpy

from records._slot_offsets cimport check_plain_new, slot_offset, store_new


cdef extern from "Python.h":
    PyObject *PyDict_GetItem(object mapping, object key)
    object PyType_GenericAlloc(type kind, Py_ssize_t items)
    void PyObject_GC_UnTrack(void *op)
    Py_ssize_t PyTuple_GET_SIZE(object t)
    PyObject *PyTuple_GET_ITEM(object t, Py_ssize_t i)
    object PyTuple_New(Py_ssize_t size)
    void PyTuple_SET_ITEM(object t, Py_ssize_t i, object value)
    Py_ssize_t PyList_GET_SIZE(object l)
    bint PyUnicode_CheckExact(PyObject *o)
    bint PyUnicode_IS_ASCII(PyObject *o)
    const char *PyUnicode_AsUTF8AndSize(PyObject *o, Py_ssize_t *size) except NULL
    long PyLong_AsLongAndOverflow(PyObject *o, int *overflow) except? -1
    object PyBytes_FromStringAndSize(const char *data, Py_ssize_t size)
    char *PyBytes_AS_STRING(object b)
    PyObject *PyList_GET_ITEM(object l, Py_ssize_t i)
    bint PyTuple_CheckExact(PyObject *o)
    bint PyLong_CheckExact(PyObject *o)
    Py_ssize_t PyLong_AsSsize_t(PyObject *o) except? -1


cdef Py_ssize_t _offsets[10]
cdef type _record_type = None


def prepare(type kind, tuple names):
    """Use `kind`'s slots `names` (the record's ten fields, in the rows' order) from now on."""
    global _record_type
    if len(names) != 10:
        raise ValueError("a partition row has ten values")
    check_plain_new(kind)
    for index, name in enumerate(names):
        _offsets[index] = slot_offset(kind, name)
    _record_type = kind


cdef inline void _store(object record, Py_ssize_t index, object value):
    store_new(record, _offsets[index], value)


cdef object new_record():
    """A new record of the prepared class, its slots empty (`store_slot` fills them), untracked.

    The cyclic collector looks for cycles of garbage; a record holds numbers, tuples of
    numbers, its topic's id and a mode, none of which can ever point back at it (its class is
    frozen), so it is never in one, and walking the million records of a loaded snapshot is
    what the first young collection after a load spent its time on (the load's own objects are
    all young then: 12% of a 1M-partition `SnapshotStore.load`) and what every full collection
    of a long-lived reader (the console's kept images) walked again. An untracked record is
    still freed by reference counting; what untracking costs, if a record ever could be in a
    cycle, is a leak of that cycle, never a wrong free (as `replay.map_nodes` says of map nodes).
    """
    if _record_type is None:
        raise RuntimeError("prepare() was not called")
    record = PyType_GenericAlloc(_record_type, 0)
    PyObject_GC_UnTrack(<PyObject *>record)
    return record


cdef void store_slot(object record, Py_ssize_t index, object value):
    """Set slot `index` (in the rows' column order) of a record from `new_record`."""
    _store(record, index, value)


def build(list rows, object topic_id, arrays, modes):
    """The records of `rows` (one topic's, ids 0..n-1), or None for rows to check in Python.

    `arrays` maps a replica list's text to its shared tuple (a text it lacks is looked up
    through it, whose `__missing__` parses it; one it refuses sends the rows to Python), `modes`
    a mode's name to the Mode.
    """
    cdef Py_ssize_t count = PyList_GET_SIZE(rows), index, column
    cdef PyObject *row
    cdef PyObject *found
    cdef PyObject *value
    if _record_type is None:
        raise RuntimeError("prepare() was not called")
    if not isinstance(arrays, dict) or not isinstance(modes, dict):
        raise TypeError("arrays and modes are dicts")
    out = PyTuple_New(count)
    for index in range(count):
        row = PyList_GET_ITEM(rows, index)
        if not PyTuple_CheckExact(row) or PyTuple_GET_SIZE(<object>row) != 10:
            return None
        value = PyTuple_GET_ITEM(<object>row, 1)
        if not PyLong_CheckExact(value) or PyLong_AsSsize_t(value) != index:
            return None
        for column in range(2, 6):
            text = <object>PyTuple_GET_ITEM(<object>row, column)
            if PyDict_GetItem(arrays, text) is NULL:
                if type(text) is not str:
                    return None
                try:
                    arrays[text]  # a new list: parsed and kept by the mapping (its __missing__)
                except Exception:
                    return None  # not a list of broker ids: the Python path names it
        found = PyDict_GetItem(modes, <object>PyTuple_GET_ITEM(<object>row, 9))
        if found is NULL:
            return None
        record = new_record()
        _store(record, 0, <object>value)
        _store(record, 1, topic_id)
        for column in range(2, 6):
            _store(
                record,
                column,
                <object>PyDict_GetItem(arrays, <object>PyTuple_GET_ITEM(<object>row, column)),
            )
        for column in range(6, 9):
            _store(record, column, <object>PyTuple_GET_ITEM(<object>row, column))
        _store(record, 9, <object>found)
        Py_INCREF(record)
        PyTuple_SET_ITEM(out, index, record)
    return out


cdef inline char *_put_long(char *out, long value):
    cdef unsigned int word = <unsigned int>value
    out[0] = <char>(word & 0xFF)
    out[1] = <char>((word >> 8) & 0xFF)
    out[2] = <char>((word >> 16) & 0xFF)
    out[3] = <char>((word >> 24) & 0xFF)
    return out + 4


cdef Py_ssize_t _item_size(PyObject *item) except -2:
    """Bytes of one value in marshal version 0; -1 for a value left to `marshal`."""
    cdef int overflow = 0
    cdef long value
    cdef Py_ssize_t size
    if item == <PyObject *>None:
        return 1
    if PyUnicode_CheckExact(item):
        if not PyUnicode_IS_ASCII(item):
            return -1
        PyUnicode_AsUTF8AndSize(item, &size)
        return 5 + size
    if PyLong_CheckExact(item):
        value = PyLong_AsLongAndOverflow(item, &overflow)
        if overflow or value < -2147483648 or value > 2147483647:
            return -1
        return 5
    return -1


def marshal_rows(list rows):
    """`marshal.dumps(rows, 0)` for a list of tuples of ASCII str, 32-bit int and None; else None.

    Version 0 has no references, interning or short forms: a list is `[` and its length, a
    tuple `(` and its length, a str `u`, its UTF-8 length and bytes, an int `i` and four bytes
    (little-endian), None `N`.
    """
    cdef Py_ssize_t count = PyList_GET_SIZE(rows), index, column, width, size = 5, item_size
    cdef Py_ssize_t text_size
    cdef PyObject *row
    cdef PyObject *item
    cdef const char *text
    cdef char *out
    cdef int overflow = 0
    for index in range(count):
        row = PyList_GET_ITEM(rows, index)
        if not PyTuple_CheckExact(row):
            return None
        width = PyTuple_GET_SIZE(<object>row)
        size += 5
        for column in range(width):
            item_size = _item_size(PyTuple_GET_ITEM(<object>row, column))
            if item_size < 0:
                return None
            size += item_size
    data = PyBytes_FromStringAndSize(NULL, size)
    out = PyBytes_AS_STRING(data)
    out[0] = b"["
    out = _put_long(out + 1, count)
    for index in range(count):
        row = PyList_GET_ITEM(rows, index)
        width = PyTuple_GET_SIZE(<object>row)
        out[0] = b"("
        out = _put_long(out + 1, width)
        for column in range(width):
            item = PyTuple_GET_ITEM(<object>row, column)
            if item == <PyObject *>None:
                out[0] = b"N"
                out += 1
            elif PyUnicode_CheckExact(item):
                text = PyUnicode_AsUTF8AndSize(item, &text_size)
                out[0] = b"u"
                out = _put_long(out + 1, text_size)
                memcpy(out, text, text_size)
                out += text_size
            else:
                out[0] = b"i"
                out = _put_long(out + 1, PyLong_AsLongAndOverflow(item, &overflow))
    return data
