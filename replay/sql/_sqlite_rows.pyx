# cython: language_level=3, boundscheck=False, wraparound=False
"""A SQLite snapshot's partition rows read through SQLite's C API, a topic at a time.

`TopicRuns` steps a query of the partition table on the connection the store reads in (its
handle, so the same transaction) and lays each row's values out for `RunReader`
(`replay.sql._row_runs`), which builds each topic's run: records, checksum bytes, replica lists.
What `RunReader` does not take raises `Unusable` there; so does a handle this module cannot read.
"""

from cpython.object cimport PyObject

from replay.sql._row_runs cimport (
    COLUMNS,
    KIND_BLOB,
    KIND_INT,
    KIND_NULL,
    KIND_REAL,
    KIND_TEXT,
    Column,
    RunReader,
)

from sqlite3 import Connection as _Connection

from replay.sql._row_runs import Unusable


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
    double sqlite3_value_double(sqlite3_value *value)
    const void *sqlite3_value_blob(sqlite3_value *value)
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


cdef class TopicRuns(RunReader):
    """The partition rows of `sql` (ten columns, one `?` for the snapshot id), run by run."""

    cdef sqlite3 *_db
    cdef sqlite3_stmt *_stmt
    cdef object _connection

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
        self.setup(arrays, modes, parse_id, raw)
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

    cdef int _step(self) except -1:
        cdef int rc, column, kind
        cdef sqlite3_value *value
        cdef Column *out
        if self._stmt is NULL:
            return 0
        rc = sqlite3_step(self._stmt)
        if rc == SQLITE_DONE:
            self.close()
            return 0
        if rc != SQLITE_ROW:
            message = sqlite3_errmsg(self._db).decode("utf-8", "replace")
            self.close()
            raise Unusable(message)
        for column in range(COLUMNS):
            value = sqlite3_column_value(self._stmt, column)
            kind = sqlite3_value_type(value)
            out = &self.row[column]
            if kind == SQLITE_INTEGER:
                out.kind = KIND_INT
                out.number = sqlite3_value_int64(value)
            elif kind == SQLITE_TEXT:
                out.kind = KIND_TEXT
                out.data = <const char *>sqlite3_value_text(value)
                out.size = sqlite3_value_bytes(value)
            elif kind == SQLITE_NULL:
                out.kind = KIND_NULL
            elif kind == SQLITE_FLOAT:
                out.kind = KIND_REAL
                out.real = sqlite3_value_double(value)
            else:
                out.kind = KIND_BLOB
                out.data = <const char *>sqlite3_value_blob(value)
                out.size = sqlite3_value_bytes(value)
        return 1
