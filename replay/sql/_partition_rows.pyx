# cython: language_level=3, boundscheck=False, wraparound=False
"""A topic's PartitionRecords built from its snapshot rows in C (`replay.sql.content`).

What `content._partitions` does for rows that are what the store writes (a tuple of ten per
partition, in partition id order, a known mode): an object of the record's class, its ten
slots stored directly. Anything else is left to that Python function (`None` back), which
says what is wrong with the row.
"""

from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF


cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        int type
        Py_ssize_t offset
    int T_OBJECT_EX


cdef extern from "Python.h":
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member
    PyObject *PyDict_GetItem(object mapping, object key)
    object PyType_GenericAlloc(type kind, Py_ssize_t items)
    Py_ssize_t PyTuple_GET_SIZE(object t)
    PyObject *PyTuple_GET_ITEM(object t, Py_ssize_t i)
    object PyTuple_New(Py_ssize_t size)
    void PyTuple_SET_ITEM(object t, Py_ssize_t i, object value)
    Py_ssize_t PyList_GET_SIZE(object l)
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
    if kind.__new__ is not object.__new__:
        raise TypeError(f"{kind.__name__} has a __new__ of its own")
    for index, name in enumerate(names):
        descriptor = kind.__dict__[name]
        if type(descriptor).__name__ != "member_descriptor":
            raise TypeError(f"{kind.__name__}.{name} is not a slot")
        member = (<PyMemberDescrObject*>descriptor).d_member
        if member.type != T_OBJECT_EX:
            raise TypeError(f"{kind.__name__}.{name} is not an object slot")
        _offsets[index] = member.offset
    _record_type = kind


cdef inline void _store(object record, Py_ssize_t index, object value):
    cdef PyObject **slot = <PyObject **>(<char *><PyObject *>record + _offsets[index])
    Py_INCREF(value)
    slot[0] = <PyObject *>value


def build(list rows, object topic_id, arrays, modes):
    """The records of `rows` (one topic's, ids 0..n-1), or None for rows to check in Python.

    `arrays` maps a replica list's text to its shared tuple (a text it lacks sends the rows
    to Python, which parses it), `modes` a mode's name to the Mode.
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
            if PyDict_GetItem(arrays, <object>PyTuple_GET_ITEM(<object>row, column)) is NULL:
                return None
        found = PyDict_GetItem(modes, <object>PyTuple_GET_ITEM(<object>row, 9))
        if found is NULL:
            return None
        record = PyType_GenericAlloc(_record_type, 0)
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
