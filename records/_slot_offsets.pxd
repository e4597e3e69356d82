# The offset of a slot in an object of a slotted class, for compiled code that fills records
# itself (`records._fastdecode`, `replay.sql._partition_rows`): declarations and inline helpers
# only, so nothing is imported at run time.

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


cdef inline int check_plain_new(type kind) except -1:
    """Refuse a class whose objects are not made by `object.__new__` (then not filled here)."""
    if kind.__new__ is not object.__new__:
        raise TypeError(f"{kind.__name__} has a __new__ of its own")
    return 0


cdef inline Py_ssize_t slot_offset(type kind, str name) except -1:
    """Where slot `name` of a `kind` object is: an object slot of the class itself, or TypeError."""
    descriptor = kind.__dict__[name]
    if type(descriptor).__name__ != "member_descriptor":
        raise TypeError(f"{kind.__name__}.{name} is not a slot")
    cdef PyMemberDef *member = (<PyMemberDescrObject *><PyObject *>descriptor).d_member
    if member.type != T_OBJECT_EX:
        raise TypeError(f"{kind.__name__}.{name} is not an object slot")
    return member.offset


cdef inline void store_new(object record, Py_ssize_t offset, object value):
    """Store `value` in the empty slot at `offset` of a new `record` (nothing to release)."""
    cdef PyObject **slot = <PyObject **>(<char *><PyObject *>record + offset)
    Py_INCREF(value)
    slot[0] = <PyObject *>value
