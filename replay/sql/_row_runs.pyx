# cython: language_level=3, boundscheck=False, wraparound=False
"""A snapshot's partition rows built into records a topic at a time, whatever database gave them.

`RunReader` is what a database's compiled reader (`_sqlite_rows`, `_pg_copy_rows`) extends: its
`_step` moves to the next row and lays its ten values out in `row` (a kind, a number or a
pointer to text the database holds until the next step); this class gives each topic's run
already built: its records, the `marshal.dumps(rows, 0)` bytes its checksum digests, and its
replica lists' text. No row tuple and no string per value is made; a replica list's text is made
once (a table of the distinct texts, which few are). A topic asked for `raw` comes as its row
tuples instead (an increment lays its changes over them).

Anything that is not what the store writes (a NULL, a value of another type, an int past 32
bits, non-ASCII text, partitions out of order, an unknown mode) raises `Unusable`: the caller
reads the snapshot again through the driver, whose path sorts what came apart and says what is
wrong, if anything is, in its own words.
"""

from cpython.object cimport PyObject
from libc.stdint cimport uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcmp, memcpy

from replay.sql._partition_rows cimport new_record, store_slot


cdef extern from "Python.h":
    object PyUnicode_DecodeASCII(const char *data, Py_ssize_t size, const char *errors)
    object PyUnicode_DecodeUTF8(const char *data, Py_ssize_t size, const char *errors)
    object PyBytes_FromStringAndSize(const char *data, Py_ssize_t size)
    object PyList_AsTuple(object items)
    int PyList_Append(object items, object item) except -1


class Unusable(Exception):
    """The rows are not what the store writes, or the handle cannot be used: read them in Python."""


_TID_SIZE = 22
_INT32_MIN = -2147483648
_INT32_MAX = 2147483647


cdef inline uint64_t _hash(const char *data, Py_ssize_t size):
    cdef uint64_t h = 14695981039346656037ULL
    cdef Py_ssize_t i
    for i in range(size):
        h = (h ^ <unsigned char>data[i]) * 1099511628211ULL
    return h


cdef class _Texts:
    """Replica list text -> (its str, its shared tuple), looked up by the bytes a row holds.

    Open addressing over a C array; the objects are kept alive by `_held`.
    """

    def __cinit__(self, arrays):
        self._capacity = 256
        self._slots = <_Text *>calloc(self._capacity, sizeof(_Text))
        if self._slots is NULL:
            raise MemoryError()
        self._arrays = arrays
        self._held = []

    def __dealloc__(self):
        cdef Py_ssize_t i
        if self._slots is not NULL:
            for i in range(self._capacity):
                if self._slots[i].data is not NULL:
                    free(self._slots[i].data)
            free(self._slots)

    cdef _Text *find(self, const char *data, Py_ssize_t size) except NULL:
        cdef uint64_t h = _hash(data, size)
        cdef Py_ssize_t mask = self._capacity - 1, at = <Py_ssize_t>(h & <uint64_t>mask)
        cdef _Text *slot
        while True:
            slot = &self._slots[at]
            if slot.data is NULL:
                break
            if slot.hash == h and slot.size == size and memcmp(slot.data, data, size) == 0:
                return slot
            at = (at + 1) & mask
        text = _ascii(data, size)
        value = self._arrays[text]  # parsed and checked there (damage raises)
        slot.data = <char *>malloc(size + 1)
        if slot.data is NULL:
            raise MemoryError()
        memcpy(slot.data, data, size)
        slot.hash = h
        slot.size = size
        slot.text = <PyObject *>text
        slot.value = <PyObject *>value
        self._held.append(text)
        self._held.append(value)
        self._used += 1
        if self._used * 2 > self._capacity:
            self._grow()
            return self.find(data, size)
        return slot

    cdef int _grow(self) except -1:
        cdef Py_ssize_t old_capacity = self._capacity, i, at, mask
        cdef _Text *old = self._slots
        cdef _Text *new = <_Text *>calloc(old_capacity * 2, sizeof(_Text))
        if new is NULL:
            raise MemoryError()
        mask = old_capacity * 2 - 1
        for i in range(old_capacity):
            if old[i].data is not NULL:
                at = <Py_ssize_t>(old[i].hash & <uint64_t>mask)
                while new[at].data is not NULL:
                    at = (at + 1) & mask
                new[at] = old[i]
        free(old)
        self._slots = new
        self._capacity = old_capacity * 2
        return 0


cdef object _ascii(const char *data, Py_ssize_t size):
    cdef Py_ssize_t i
    for i in range(size):
        if <unsigned char>data[i] >= 128:
            raise Unusable("text that is not ASCII")
    return PyUnicode_DecodeASCII(data, size, NULL)


cdef class _Buffer:
    """A growing byte buffer: one topic's marshal bytes."""

    def __cinit__(self):
        self.capacity = 4096
        self.data = <char *>malloc(self.capacity)
        if self.data is NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.data)

    cdef int reserve(self, Py_ssize_t more) except -1:
        cdef char *grown
        cdef Py_ssize_t capacity = self.capacity
        if self.size + more <= capacity:
            return 0
        while self.size + more > capacity:
            capacity *= 2
        grown = <char *>realloc(self.data, capacity)
        if grown is NULL:
            raise MemoryError()
        self.data = grown
        self.capacity = capacity
        return 0

    cdef void tag_long(self, char tag, long value):
        cdef unsigned int word = <unsigned int>value
        cdef char *out = self.data + self.size
        out[0] = tag
        out[1] = <char>(word & 0xFF)
        out[2] = <char>((word >> 8) & 0xFF)
        out[3] = <char>((word >> 16) & 0xFF)
        out[4] = <char>((word >> 24) & 0xFF)
        self.size += 5

    cdef void text(self, const char *data, Py_ssize_t size):
        self.tag_long(b"u", size)
        memcpy(self.data + self.size, data, size)
        self.size += size


cdef inline bint _int32(Column *column, long *out):
    """Whether `column` holds an integer of 32 bits (then in `out`)."""
    if column.kind != KIND_INT or column.number < _INT32_MIN or column.number > _INT32_MAX:
        return False
    out[0] = <long>column.number
    return True


cdef class RunReader:
    """The runs of a query's partition rows (ten columns), each item a topic's.

    Each item is `(tid, topic_id, records, data, key)` for a topic built here -- the id's text,
    `parse_id(tid, "topic id")`, the records in partition order, the marshal bytes of its rows,
    the replica lists' text per partition -- or `(tid, rows)` for a topic in `raw` (a set
    of ids, or True for every topic). A subclass reads a database: `_step` and `close`.
    """

    cdef int setup(self, arrays, dict modes, parse_id, raw) except -1:
        """What every reader takes: the replica lists' table, the modes, the id parser, `raw`."""
        self._texts = _Texts(arrays)
        self._buffer = _Buffer()
        self._parse_id = parse_id
        self._raw = raw
        self._mode_names = [name.encode("ascii") for name in modes]
        self._mode_values = list(modes.values())
        return 0

    cdef int _step(self) except -1:
        """Move to the next row, its values in `row`: 1 with a row, 0 at the end (then closed)."""
        raise NotImplementedError

    def close(self):
        """Let the database's query go; no run comes after."""
        self._ended = True

    def __iter__(self):
        return self

    cdef bint _same_topic(self):
        cdef Column *first = &self.row[0]
        return (
            first.kind == KIND_TEXT
            and first.size == _TID_SIZE
            and memcmp(first.data, self._tid, _TID_SIZE) == 0
        )

    def __next__(self):
        if self._ended:
            raise StopIteration
        if not self._has_row:
            if not self._step():
                raise StopIteration
        self._has_row = False
        if self.row[0].kind != KIND_TEXT or self.row[0].size != _TID_SIZE:
            raise Unusable("a topic id that is not 22 characters of text")
        memcpy(self._tid, self.row[0].data, _TID_SIZE)
        tid = _ascii(self._tid, _TID_SIZE)
        if self._raw is not None and (self._raw is True or tid in self._raw):
            return self._raw_run(tid)
        return self._built_run(tid)

    cdef object _raw_run(self, tid):
        cdef int column
        rows = []
        while True:
            PyList_Append(rows, tuple([self._value(column) for column in range(COLUMNS)]))
            if not self._step():
                break
            if not self._same_topic():
                self._has_row = True
                break
        return (tid, rows)

    cdef object _value(self, int column):
        cdef Column *value = &self.row[column]
        if value.kind == KIND_INT:
            return value.number
        if value.kind == KIND_TEXT:
            return PyUnicode_DecodeUTF8(value.data, value.size, NULL)
        if value.kind == KIND_NULL:
            return None
        if value.kind == KIND_REAL:
            return value.real
        return PyBytes_FromStringAndSize(value.data, value.size)

    cdef object _built_run(self, tid):
        cdef _Buffer out = self._buffer
        cdef _Texts texts = self._texts
        cdef Column *value
        cdef _Text *found
        cdef Py_ssize_t index = 0, start, mode_at, size
        cdef long number
        cdef int column
        cdef const char *data
        topic_id = self._parse_id(tid, "topic id")
        records = []
        key = []
        out.size = 0
        out.reserve(5)
        out.tag_long(b"[", 0)  # the count is written at the end
        while True:
            out.reserve(5 * COLUMNS + 5 + _TID_SIZE)
            out.tag_long(b"(", COLUMNS)
            out.text(self._tid, _TID_SIZE)
            record = new_record()
            store_slot(record, 1, topic_id)
            # The values of the row the reader stepped to (the database holds their text
            # until the next step); read on this thread only, the interpreter lock held.
            for column in range(1, COLUMNS):
                value = &self.row[column]
                if column == 1 or column >= 6 and column <= 8:
                    if not _int32(value, &number):
                        raise Unusable("a number column without a 32-bit integer")
                    if column == 1 and number != index:
                        raise Unusable("partitions out of order")
                    out.tag_long(b"i", number)
                    store_slot(record, 0 if column == 1 else column, number)
                    continue
                if value.kind != KIND_TEXT:
                    raise Unusable("a text column that holds no text")
                data = value.data
                size = value.size
                out.reserve(size)
                out.text(data, size)
                if column == 9:
                    for mode_at in range(len(self._mode_names)):
                        name = <bytes>self._mode_names[mode_at]
                        if len(name) == size and memcmp(<const char *>name, data, size) == 0:
                            store_slot(record, 9, self._mode_values[mode_at])
                            break
                    else:
                        raise Unusable("an unknown mode")
                    continue
                found = texts.find(data, size)
                store_slot(record, column, <object>found.value)
                if column == 2:
                    PyList_Append(key, <object>found.text)
            PyList_Append(records, record)
            index += 1
            if not self._step():
                break
            if not self._same_topic():
                self._has_row = True
                break
        start = out.size
        out.size = 0
        out.tag_long(b"[", index)
        out.size = start
        return (
            tid,
            topic_id,
            PyList_AsTuple(records),
            PyBytes_FromStringAndSize(out.data, out.size),
            PyList_AsTuple(key),
        )
