# The run builder a database's compiled reader extends (`replay.sql._row_runs`).

cimport cython
from libc.stdint cimport uint64_t
from cpython.object cimport PyObject

cdef enum:
    COLUMNS = 10
    KIND_NULL = 0
    KIND_INT = 1
    KIND_TEXT = 2
    KIND_REAL = 3
    KIND_BLOB = 4


cdef struct Column:
    int kind
    long long number
    double real
    const char *data
    Py_ssize_t size


cdef struct _Text:
    uint64_t hash
    Py_ssize_t size
    char *data
    PyObject *text
    PyObject *value


@cython.final
cdef class _Texts:
    cdef _Text *_slots
    cdef Py_ssize_t _capacity
    cdef Py_ssize_t _used
    cdef object _arrays
    cdef list _held
    cdef _Text *find(self, const char *data, Py_ssize_t size) except NULL
    cdef int _grow(self) except -1


@cython.final
cdef class _Buffer:
    cdef char *data
    cdef Py_ssize_t size
    cdef Py_ssize_t capacity
    cdef int reserve(self, Py_ssize_t more) except -1
    cdef void tag_long(self, char tag, long value)
    cdef void text(self, const char *data, Py_ssize_t size)


cdef class RunReader:
    cdef Column row[COLUMNS]
    cdef bint _has_row
    cdef bint _ended
    cdef char _tid[32]
    cdef _Texts _texts
    cdef _Buffer _buffer
    cdef object _parse_id
    cdef object _raw
    cdef list _mode_names
    cdef list _mode_values
    cdef int setup(self, arrays, dict modes, parse_id, raw) except -1
    cdef int _step(self) except -1
    cdef bint _same_topic(self)
    cdef object _value(self, int column)
    cdef object _raw_run(self, tid)
    cdef object _built_run(self, tid)
    cdef object _topic_id(self, tid)
