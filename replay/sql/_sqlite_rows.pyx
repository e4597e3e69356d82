# cython: language_level=3, boundscheck=False, wraparound=False
"""A SQLite snapshot's partition rows read through SQLite's C API, a topic at a time.

`TopicRuns` steps a query of the partition table on the connection the store reads in (its
handle, so the same transaction), and gives each topic's run of rows already built: its
records, the `marshal.dumps(rows, 0)` bytes its checksum digests, and its replica lists' text.
No row tuple and no string per value is made; a replica list's text is made once (a table of
the distinct texts, which few are). A topic asked for `raw` comes as its row tuples instead
(an increment lays its changes over them).

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

from sqlite3 import Connection as _Connection


cdef extern from "sqlite3.h":
    ctypedef struct sqlite3:
        pass
    ctypedef struct sqlite3_stmt:
        pass
    enum:
        SQLITE_OK
        SQLITE_ROW
        SQLITE_DONE
        SQLITE_INTEGER
        SQLITE_FLOAT
        SQLITE_TEXT
        SQLITE_BLOB
        SQLITE_NULL
    int sqlite3_prepare_v2(sqlite3 *db, const char *sql, int size, sqlite3_stmt **stmt,
                           const char **tail)
    int sqlite3_bind_int64(sqlite3_stmt *stmt, int index, long long value)
    int sqlite3_step(sqlite3_stmt *stmt)
    int sqlite3_finalize(sqlite3_stmt *stmt)
    int sqlite3_column_count(sqlite3_stmt *stmt)
    int sqlite3_column_type(sqlite3_stmt *stmt, int column)
    long long sqlite3_column_int64(sqlite3_stmt *stmt, int column)
    double sqlite3_column_double(sqlite3_stmt *stmt, int column)
    const unsigned char *sqlite3_column_text(sqlite3_stmt *stmt, int column)
    const void *sqlite3_column_blob(sqlite3_stmt *stmt, int column)
    int sqlite3_column_bytes(sqlite3_stmt *stmt, int column)
    ctypedef struct sqlite3_value:
        pass
    sqlite3_value *sqlite3_column_value(sqlite3_stmt *stmt, int column)
    int sqlite3_value_type(sqlite3_value *value)
    long long sqlite3_value_int64(sqlite3_value *value)
    const unsigned char *sqlite3_value_text(sqlite3_value *value)
    int sqlite3_value_bytes(sqlite3_value *value)
    const char *sqlite3_errmsg(sqlite3 *db)
    const char *sqlite3_db_filename(sqlite3 *db, const char *name)
    int sqlite3_libversion_number()


cdef extern from *:
    """
    /* The head of CPython's sqlite3.Connection (Modules/_sqlite/connection.h, 3.11-3.14). */
    typedef struct { PyObject_HEAD sqlite3 *db; } mlog_pysqlite_head;
    """
    ctypedef struct mlog_pysqlite_head:
        sqlite3 *db


cdef extern from "Python.h":
    object PyUnicode_DecodeASCII(const char *data, Py_ssize_t size, const char *errors)
    object PyUnicode_DecodeUTF8(const char *data, Py_ssize_t size, const char *errors)
    object PyBytes_FromStringAndSize(const char *data, Py_ssize_t size)
    object PyList_AsTuple(object items)
    int PyList_Append(object items, object item) except -1


class Unusable(Exception):
    """The rows are not what the store writes, or the handle cannot be used: read them in Python."""


COLUMNS = 10
"""A partition row's columns: topic id, partition id, four replica lists, leader, two epochs, mode."""
_TID_SIZE = 22
_INT32_MIN = -2147483648
_INT32_MAX = 2147483647
_KNOWN_VERSIONS = ((3, 11), (3, 12), (3, 13), (3, 14))
"""CPython versions whose sqlite3.Connection starts with its `sqlite3 *` (checked in source)."""


def handle_reason(connection, str main_file, tuple python_version, int module_sqlite):
    """None if `connection`'s SQLite handle can be read here, else why not (a short phrase).

    `main_file`: the connection's main database file as `PRAGMA database_list` gives it;
    `module_sqlite`: the sqlite3 module's library version as a number (3040001 for 3.40.1).
    """
    cdef sqlite3 *db
    cdef const char *name
    if type(connection) is not _Connection:
        return f"a {type(connection).__name__}, not a sqlite3.Connection"
    if python_version not in _KNOWN_VERSIONS:
        return f"Python {python_version[0]}.{python_version[1]}'s sqlite3 module is not known here"
    if sqlite3_libversion_number() != module_sqlite:
        return "the sqlite3 module uses another SQLite library than this helper"
    db = (<mlog_pysqlite_head *><PyObject *>connection).db
    if db is NULL:
        return "the connection is closed"
    name = sqlite3_db_filename(db, "main")
    found = "" if name is NULL else name.decode("utf-8", "surrogateescape")
    if found != main_file:
        return "the handle names another database file"
    return None


cdef struct _Text:
    uint64_t hash
    Py_ssize_t size
    char *data
    PyObject *text
    PyObject *value


cdef inline uint64_t _hash(const char *data, Py_ssize_t size):
    cdef uint64_t h = 14695981039346656037ULL
    cdef Py_ssize_t i
    for i in range(size):
        h = (h ^ <unsigned char>data[i]) * 1099511628211ULL
    return h


cdef class _Texts:
    """Replica list text -> (its str, its shared tuple), looked up by the bytes SQLite holds.

    Open addressing over a C array; the objects are kept alive by `_held`.
    """

    cdef _Text *_slots
    cdef Py_ssize_t _capacity
    cdef Py_ssize_t _used
    cdef object _arrays
    cdef list _held

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


cdef inline bint _int32(sqlite3_value *value, long *out):
    """Whether `value` is an integer of 32 bits (then in `out`)."""
    cdef long long number
    if sqlite3_value_type(value) != SQLITE_INTEGER:
        return False
    number = sqlite3_value_int64(value)
    if number < _INT32_MIN or number > _INT32_MAX:
        return False
    out[0] = <long>number
    return True


cdef object _ascii(const char *data, Py_ssize_t size):
    cdef Py_ssize_t i
    for i in range(size):
        if <unsigned char>data[i] >= 128:
            raise Unusable("text that is not ASCII")
    return PyUnicode_DecodeASCII(data, size, NULL)


cdef class _Buffer:
    """A growing byte buffer: one topic's marshal bytes."""

    cdef char *data
    cdef Py_ssize_t size
    cdef Py_ssize_t capacity

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

    cdef inline void tag_long(self, char tag, long value):
        cdef unsigned int word = <unsigned int>value
        cdef char *out = self.data + self.size
        out[0] = tag
        out[1] = <char>(word & 0xFF)
        out[2] = <char>((word >> 8) & 0xFF)
        out[3] = <char>((word >> 16) & 0xFF)
        out[4] = <char>((word >> 24) & 0xFF)
        self.size += 5

    cdef inline void text(self, const char *data, Py_ssize_t size):
        self.tag_long(b"u", size)
        memcpy(self.data + self.size, data, size)
        self.size += size


cdef class TopicRuns:
    """The partition rows of `sql` (ten columns, one `?` for the snapshot id), run by run.

    Each item is `(tid, topic_id, records, data, key)` for a topic built here -- the id's text,
    `parse_id(tid, "topic id")`, the records in partition order, the marshal bytes of its rows,
    the replica lists' text per partition -- or `(tid, rows)` for a topic in `raw` (a set
    of ids, or True for every topic).
    """

    cdef sqlite3 *_db
    cdef sqlite3_stmt *_stmt
    cdef object _connection
    cdef bint _has_row
    cdef bint _ended
    cdef char _tid[32]
    cdef _Texts _texts
    cdef _Buffer _buffer
    cdef object _parse_id
    cdef object _raw
    cdef list _mode_names
    cdef list _mode_values

    def __cinit__(self, connection, str sql, long long snapshot_id, arrays, dict modes,
                  parse_id, raw):
        cdef bytes query = sql.encode("utf-8")
        cdef int rc
        if type(connection) is not _Connection:  # its head is read as one's: nothing else
            raise Unusable(f"a {type(connection).__name__}, not a sqlite3.Connection")
        self._connection = connection  # keeps the handle's owner alive
        self._db = (<mlog_pysqlite_head *><PyObject *>connection).db
        if self._db is NULL:
            raise Unusable("the connection is closed")
        self._texts = _Texts(arrays)
        self._buffer = _Buffer()
        self._parse_id = parse_id
        self._raw = raw
        self._mode_names = [name.encode("ascii") for name in modes]
        self._mode_values = list(modes.values())
        rc = sqlite3_prepare_v2(self._db, query, len(query), &self._stmt, NULL)
        if rc != SQLITE_OK:
            self._stmt = NULL
            raise Unusable(sqlite3_errmsg(self._db).decode("utf-8", "replace"))
        if sqlite3_column_count(self._stmt) != COLUMNS:
            self.close()
            raise Unusable("the query does not give ten columns")
        sqlite3_bind_int64(self._stmt, 1, snapshot_id)

    def __dealloc__(self):
        if self._stmt is not NULL:
            sqlite3_finalize(self._stmt)
            self._stmt = NULL

    def close(self):
        """Finalize the statement (the connection's transaction is left as it is)."""
        if self._stmt is not NULL:
            sqlite3_finalize(self._stmt)
            self._stmt = NULL
        self._ended = True

    def __iter__(self):
        return self

    cdef int _step(self) except -1:
        """Step to the next row: 1 with a row, 0 at the end (the statement then finalized)."""
        cdef int rc = sqlite3_step(self._stmt)
        if rc == SQLITE_ROW:
            return 1
        if rc == SQLITE_DONE:
            self.close()
            return 0
        message = sqlite3_errmsg(self._db).decode("utf-8", "replace")
        self.close()
        raise Unusable(message)

    cdef inline bint _same_topic(self):
        cdef sqlite3_value *value = sqlite3_column_value(self._stmt, 0)
        return (
            sqlite3_value_type(value) == SQLITE_TEXT
            and sqlite3_value_bytes(value) == _TID_SIZE
            and memcmp(sqlite3_value_text(value), self._tid, _TID_SIZE) == 0
        )

    def __next__(self):
        if self._ended:
            raise StopIteration
        if not self._has_row:
            if not self._step():
                raise StopIteration
        self._has_row = False
        if (sqlite3_column_type(self._stmt, 0) != SQLITE_TEXT
                or sqlite3_column_bytes(self._stmt, 0) != _TID_SIZE):
            raise Unusable("a topic id that is not 22 characters of text")
        memcpy(self._tid, sqlite3_column_text(self._stmt, 0), _TID_SIZE)
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
        cdef int kind = sqlite3_column_type(self._stmt, column)
        cdef const char *data
        if kind == SQLITE_INTEGER:
            return sqlite3_column_int64(self._stmt, column)
        if kind == SQLITE_TEXT:
            data = <const char *>sqlite3_column_text(self._stmt, column)
            return PyUnicode_DecodeUTF8(data, sqlite3_column_bytes(self._stmt, column), NULL)
        if kind == SQLITE_NULL:
            return None
        if kind == SQLITE_FLOAT:
            return sqlite3_column_double(self._stmt, column)
        data = <const char *>sqlite3_column_blob(self._stmt, column)
        return PyBytes_FromStringAndSize(data, sqlite3_column_bytes(self._stmt, column))

    cdef object _built_run(self, tid):
        cdef _Buffer out = self._buffer
        cdef _Texts texts = self._texts
        cdef sqlite3_stmt *stmt = self._stmt
        cdef sqlite3_value *value
        cdef _Text *found
        cdef Py_ssize_t index = 0, start, mode_at
        cdef long number
        cdef int column, size
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
            # The values of the row SQLite stepped to; read on this thread only, the
            # interpreter lock held throughout (no other user of the connection meanwhile).
            for column in range(1, COLUMNS):
                value = sqlite3_column_value(stmt, column)
                if column == 1 or column >= 6 and column <= 8:
                    if not _int32(value, &number):
                        raise Unusable("a number column without a 32-bit integer")
                    if column == 1 and number != index:
                        raise Unusable("partitions out of order")
                    out.tag_long(b"i", number)
                    store_slot(record, 0 if column == 1 else column, number)
                    continue
                if sqlite3_value_type(value) != SQLITE_TEXT:
                    raise Unusable("a text column that holds no text")
                data = <const char *>sqlite3_value_text(value)
                size = sqlite3_value_bytes(value)
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
