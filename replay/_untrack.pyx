# cython: language_level=3, boundscheck=False, wraparound=False
"""Take objects of given types out of the cyclic collector's lists (`replay.map_nodes`)."""

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject, PyTypeObject


cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void *op)
    PyTypeObject *Py_TYPE(PyObject *op)
    int PyType_IS_GC(PyTypeObject *kind)


def untrack_instances(list objects, tuple types):
    """Untrack every object of `objects` whose type is one of `types`; returns how many.

    The caller vouches that no such object is ever part of a reference cycle: the collector
    no longer sees an untracked object's references (so a cycle through one is never freed),
    and everything else about it is as before (refcounting frees it; untracking one twice,
    or freeing an untracked one, is what CPython's own containers do).
    """
    cdef PyTypeObject *kinds[3]
    cdef Py_ssize_t wanted = len(types)
    cdef Py_ssize_t index, size, count = 0
    cdef PyTypeObject *kind
    if wanted > 3:
        raise ValueError("at most three types")
    for index in range(wanted):
        if not isinstance(types[index], type):
            raise TypeError(f"not a type: {types[index]!r}")
        kinds[index] = <PyTypeObject *>types[index]
        if not PyType_IS_GC(kinds[index]):
            raise TypeError(f"not a type the collector tracks: {types[index]!r}")
    size = PyList_GET_SIZE(objects)
    for index in range(size):
        item = <PyObject *>PyList_GET_ITEM(objects, index)
        kind = Py_TYPE(item)
        if (
            (wanted > 0 and kind == kinds[0])
            or (wanted > 1 and kind == kinds[1])
            or (wanted > 2 and kind == kinds[2])
        ):
            PyObject_GC_UnTrack(item)
            count += 1
    return count
