# cython: language_level=3, boundscheck=False, wraparound=False
"""A PostgreSQL snapshot's partition rows read by COPY through libpq's C API, a topic at a time.

psycopg makes a tuple and five strings a partition row, then `content` walks them (a quarter of
a 1M-partition load is psycopg's own rows). `CopyRuns` runs `COPY (query) TO STDOUT` on the
connection the store reads in (psycopg's `PGconn`, so the same transaction), takes each row's
text as libpq gives it, and lays its ten values out for `RunReader` (`replay.sql._row_runs`),
which builds each topic's run. libpq is the one psycopg already loaded (`bind`: found by its
path, opened with RTLD_NOLOAD, its version checked against psycopg's): a `PGconn` is only
ever given to the library that made it. No header or library is needed to build this module.

In a transaction the COPY runs inside a savepoint: whatever stops it (a row `RunReader` does not take, an error
of the server) leaves the transaction as it was, the COPY read to its end and the savepoint
rolled back, and the store reads the rows again through psycopg. The interpreter lock is let
go only while waiting for the server.
"""

from libc.stdint cimport uintptr_t
from libc.string cimport memchr

from replay.sql._row_runs cimport COLUMNS, KIND_INT, KIND_NULL, KIND_TEXT, Column, RunReader

from replay.sql._row_runs import Unusable


cdef extern from "<dlfcn.h>" nogil:
    void *dlopen(const char *filename, int flags)
    void *dlsym(void *handle, const char *symbol)
    int RTLD_NOW
    int RTLD_NOLOAD


cdef extern from "<poll.h>" nogil:
    struct pollfd:
        int fd
        short events
        short revents
    int poll(pollfd *fds, unsigned long count, int timeout)
    short POLLIN
    short POLLOUT


cdef extern from "Python.h":
    int PyErr_CheckSignals() except -1


ctypedef int (*_send_query_f)(void *conn, const char *query) noexcept nogil
ctypedef int (*_result_status_f)(const void *result) noexcept nogil
ctypedef void (*_clear_f)(void *result) noexcept nogil
ctypedef int (*_get_copy_data_f)(void *conn, char **buffer, int in_async) noexcept nogil
ctypedef void (*_freemem_f)(void *pointer) noexcept nogil
ctypedef void *(*_get_result_f)(void *conn) noexcept nogil
ctypedef const char *(*_error_message_f)(const void *conn) noexcept nogil
ctypedef const char *(*_result_error_message_f)(const void *result) noexcept nogil
ctypedef int (*_status_f)(const void *conn) noexcept nogil
ctypedef int (*_socket_f)(const void *conn) noexcept nogil
ctypedef int (*_consume_input_f)(void *conn) noexcept nogil
ctypedef int (*_is_busy_f)(void *conn) noexcept nogil
ctypedef int (*_lib_version_f)() noexcept nogil
ctypedef const char *(*_parameter_status_f)(const void *conn, const char *name) noexcept nogil


# libpq's enums (stable across its versions): ExecStatusType, ConnStatusType,
# PGTransactionStatusType.
cdef enum:
    PGRES_COMMAND_OK = 1
    PGRES_COPY_OUT = 3
    CONNECTION_OK = 0
    PQTRANS_IDLE = 0
    PQTRANS_INTRANS = 2

cdef _send_query_f PQsendQuery = NULL
cdef _consume_input_f PQflush = NULL
cdef _result_status_f PQresultStatus = NULL
cdef _clear_f PQclear = NULL
cdef _get_copy_data_f PQgetCopyData = NULL
cdef _freemem_f PQfreemem = NULL
cdef _get_result_f PQgetResult = NULL
cdef _error_message_f PQerrorMessage = NULL
cdef _result_error_message_f PQresultErrorMessage = NULL
cdef _status_f PQstatus = NULL
cdef _status_f PQtransactionStatus = NULL
cdef _socket_f PQsocket = NULL
cdef _consume_input_f PQconsumeInput = NULL
cdef _parameter_status_f PQparameterStatus = NULL
cdef _is_busy_f PQisBusy = NULL
cdef object _bound_path = None

_SYMBOLS = (
    "PQsendQuery", "PQresultStatus", "PQclear", "PQgetCopyData", "PQfreemem", "PQgetResult",
    "PQerrorMessage", "PQresultErrorMessage", "PQstatus", "PQtransactionStatus", "PQsocket",
    "PQconsumeInput", "PQparameterStatus", "PQisBusy", "PQflush", "PQlibVersion",
)
cdef extern from *:
    """
    static const char MLOG_SAVEPOINT[] = "SAVEPOINT mlog_partition_runs";
    static const char MLOG_ROLLBACK[] = "ROLLBACK TO SAVEPOINT mlog_partition_runs";
    static const char MLOG_RELEASE[] = "RELEASE SAVEPOINT mlog_partition_runs";
    """
    const char *_SAVEPOINT "MLOG_SAVEPOINT"
    const char *_ROLLBACK "MLOG_ROLLBACK"
    const char *_RELEASE "MLOG_RELEASE"
cdef enum:
    _WAIT_MS = 1000  # how long one wait for the server lasts before signals are looked at


def bind(str path, int version):
    """None once the libpq loaded from `path` is bound here, else why not (a short phrase).

    `path` must be a library this process has already loaded (psycopg's), of `version`
    (`psycopg.pq.version()`); once bound, another path is refused.
    """
    global PQsendQuery, PQflush, PQresultStatus, PQclear, PQgetCopyData, PQfreemem, PQgetResult
    global PQerrorMessage, PQresultErrorMessage, PQstatus, PQtransactionStatus, PQsocket
    global PQconsumeInput, PQparameterStatus, PQisBusy, _bound_path
    cdef void *handle
    cdef void *found[16]
    cdef int index
    if _bound_path is not None:
        return None if _bound_path == path else f"libpq is bound to {_bound_path} already"
    handle = dlopen(path.encode("utf-8", "surrogateescape"), RTLD_NOW | RTLD_NOLOAD)
    if handle is NULL:
        return f"{path} is not loaded in this process"
    for index, name in enumerate(_SYMBOLS):
        found[index] = dlsym(handle, name.encode("ascii"))
        if found[index] is NULL:
            return f"{path} has no {name}"
    if (<_lib_version_f>found[15])() != version:
        return f"{path} is not the libpq psycopg uses (version {version})"
    PQsendQuery = <_send_query_f>found[0]
    PQresultStatus = <_result_status_f>found[1]
    PQclear = <_clear_f>found[2]
    PQgetCopyData = <_get_copy_data_f>found[3]
    PQfreemem = <_freemem_f>found[4]
    PQgetResult = <_get_result_f>found[5]
    PQerrorMessage = <_error_message_f>found[6]
    PQresultErrorMessage = <_result_error_message_f>found[7]
    PQstatus = <_status_f>found[8]
    PQtransactionStatus = <_status_f>found[9]
    PQsocket = <_socket_f>found[10]
    PQconsumeInput = <_consume_input_f>found[11]
    PQparameterStatus = <_parameter_status_f>found[12]
    PQisBusy = <_is_busy_f>found[13]
    PQflush = <_consume_input_f>found[14]
    _bound_path = path
    return None


cdef bint _is_psycopg(owner):
    """Whether `owner` is a psycopg connection over the `PGconn` class of psycopg's libpq."""
    from psycopg import Connection
    from psycopg.pq import PGconn

    return isinstance(owner, Connection) and type(owner.pgconn) is PGconn


cdef uintptr_t _pointer_of(owner):
    """The `PGconn *` of a psycopg connection `owner` (0: closed, or not a psycopg connection)."""
    if not _is_psycopg(owner):
        return 0
    pointer = owner.pgconn.pgconn_ptr
    return 0 if pointer is None else <uintptr_t>pointer


cdef str _text(const char *message):
    if message is NULL:
        return "libpq gave no message"
    return message.decode("utf-8", "replace").strip()


cdef class CopyRuns(RunReader):
    """The partition rows of `COPY (query) TO STDOUT` (ten columns), run by run.

    `owner` is a psycopg connection (kept alive here; its `PGconn` is the one read): open,
    idle (in a transaction or not), its client encoding UTF-8.
    """

    cdef void *_conn
    cdef object _owner
    cdef char *_line
    cdef bint _copying
    cdef bint _savepoint

    def __cinit__(self, owner, str copy_sql, arrays, dict modes, parse_id, raw):
        cdef bytes encoded = copy_sql.encode("utf-8")
        cdef const char *query = encoded
        cdef const char *encoding
        cdef void *result
        cdef int status
        cdef uintptr_t pointer
        if _bound_path is None:
            raise Unusable("libpq is not bound (bind)")
        if not _is_psycopg(owner):  # only a psycopg connection's PGconn is read: nothing else
            raise Unusable(f"a {type(owner).__name__}, not a psycopg connection")
        pointer = _pointer_of(owner)
        if pointer == 0:
            raise Unusable("the connection is closed")
        self._owner = owner
        self._conn = <void *>pointer
        if PQstatus(self._conn) != CONNECTION_OK:
            raise Unusable("the connection is not open")
        status = PQtransactionStatus(self._conn)
        if status != PQTRANS_INTRANS and status != PQTRANS_IDLE:
            raise Unusable("the connection is busy, or its transaction failed")
        encoding = PQparameterStatus(self._conn, "client_encoding")
        if encoding is NULL or _text(encoding) != "UTF8":
            raise Unusable("the connection's client encoding is not UTF8")
        self.setup(arrays, modes, parse_id, raw)
        if status == PQTRANS_INTRANS:  # outside a transaction the COPY is one of its own
            self._command(_SAVEPOINT)
            self._savepoint = True
        result = self._exchange(query)
        status = -1 if result is NULL else PQresultStatus(result)
        if status != PGRES_COPY_OUT:
            message = _text(PQerrorMessage(self._conn) if result is NULL
                            else PQresultErrorMessage(result))
            PQclear(result)
            self._take_results()
            self.close()
            raise Unusable(message or "the COPY did not start")
        PQclear(result)
        self._copying = True

    def __dealloc__(self):
        # `close` ran (the runs' owner closes them); a reader dropped unclosed only lets its
        # row go: the connection is left to its owner (a command sent now could wait forever).
        if self._line is not NULL and PQfreemem is not NULL:
            PQfreemem(self._line)
            self._line = NULL

    cdef void *_exchange(self, const char *sql) except? NULL:
        """Send `sql` and wait (as `_wait` does) for its first result (the caller clears it)."""
        cdef int flushed
        if not PQsendQuery(self._conn, sql):
            raise Unusable(_text(PQerrorMessage(self._conn)))
        while True:
            flushed = PQflush(self._conn)
            if flushed == 0:
                break
            if flushed < 0:
                raise Unusable(_text(PQerrorMessage(self._conn)))
            self._wait(POLLOUT)
        while PQisBusy(self._conn):
            self._wait(POLLIN)
        return PQgetResult(self._conn)

    cdef int _command(self, const char *sql) except -1:
        """Run one command that gives no rows (a savepoint's)."""
        cdef void *result = self._exchange(sql)
        if result is NULL or PQresultStatus(result) != PGRES_COMMAND_OK:
            message = _text(PQerrorMessage(self._conn) if result is NULL
                            else PQresultErrorMessage(result))
            PQclear(result)
            self._take_results()
            raise Unusable(message)
        PQclear(result)
        self._take_results()
        return 0

    cdef bint _results(self) noexcept nogil:
        """Take the results after a COPY; whether every one of them was a success."""
        cdef void *result
        cdef bint ok = True
        while True:
            result = PQgetResult(self._conn)
            if result is NULL:
                return ok
            if PQresultStatus(result) != PGRES_COMMAND_OK:
                ok = False
            PQclear(result)

    def close(self):
        """End the COPY (read to its end if stopped early) and the savepoint.

        Waiting for the server's rest looks at signals: a Ctrl-C while the server is stuck ends
        the wait (the connection then left mid-COPY, for its owner to discard: psycopg refuses
        it another command).
        """
        cdef char *line = NULL
        cdef int size
        if self._conn is NULL or _pointer_of(self._owner) != <uintptr_t>self._conn:
            self._copying = self._savepoint = False  # the connection was closed under it
            self._ended = True
            return
        if self._line is not NULL:
            PQfreemem(self._line)
            self._line = NULL
        try:
            while self._copying:
                size = PQgetCopyData(self._conn, &line, 1)
                if size > 0:
                    PQfreemem(line)
                    line = NULL
                elif size == 0:
                    self._wait(POLLIN)
                else:
                    self._copying = False
                    self._take_results()
        except Unusable:  # the connection failed: nothing more to read or to roll back on it
            self._copying = self._savepoint = False
        if self._savepoint:
            # Stopped before the end: the transaction as it was before the COPY.
            self._savepoint = False
            try:
                self._command(_ROLLBACK)
                self._command(_RELEASE)
            except Unusable:
                pass  # the connection failed: its owner finds out with its next command
        self._ended = True

    cdef int _take_results(self) except -1:
        """`_results` once they have all come (waiting as `_wait` does): 1 if all succeeded."""
        cdef bint ok
        while PQisBusy(self._conn):
            self._wait(POLLIN)
        with nogil:
            ok = self._results()
        return 1 if ok else 0

    cdef int _wait(self, short events) except -1:
        """Wait until the socket is ready for `events` (the interpreter lock let go meanwhile),
        then take in what came; a second at most, then signals are looked at (a Ctrl-C)."""
        cdef pollfd ready
        cdef int polled, consumed = 1
        ready.fd = PQsocket(self._conn)
        ready.events = events
        if ready.fd < 0:
            raise Unusable("the connection has no socket")
        with nogil:
            polled = poll(&ready, 1, _WAIT_MS)
            if polled > 0 and events == POLLIN:
                consumed = PQconsumeInput(self._conn)
        if not consumed:
            raise Unusable(_text(PQerrorMessage(self._conn)))
        PyErr_CheckSignals()
        return 0

    cdef int _step(self) except -1:
        cdef int size
        cdef bint ok
        if self._line is not NULL:
            PQfreemem(self._line)
            self._line = NULL
        if not self._copying:
            return 0
        while True:
            size = PQgetCopyData(self._conn, &self._line, 1)
            if size > 0:
                break
            if size == 0:
                self._wait(POLLIN)
                continue
            self._line = NULL
            self._copying = False
            ok = self._take_results()
            if size == -1 and ok:
                if self._savepoint:
                    self._savepoint = False
                    self._command(_RELEASE)
                self._ended = True
                return 0
            message = _text(PQerrorMessage(self._conn))
            self.close()
            raise Unusable(message or "the COPY failed")
        self._lay_out(size)
        return 1

    cdef int _lay_out(self, Py_ssize_t size) except -1:
        """Lay out the row `_line` holds (COPY's text format) in `row`."""
        cdef const char *at = self._line
        cdef const char *end = self._line + size - 1
        cdef const char *stop
        cdef const char *digit
        cdef Column *out
        cdef Py_ssize_t width
        cdef long long number
        cdef bint negative
        cdef int column
        if size < 1 or end[0] != c'\n':
            raise Unusable("a COPY row without its end")
        for column in range(COLUMNS):
            stop = <const char *>memchr(at, c'\t', end - at)
            if column < COLUMNS - 1:
                if stop is NULL:
                    raise Unusable("a COPY row of fewer than ten values")
            elif stop is not NULL:
                raise Unusable("a COPY row of more than ten values")
            else:
                stop = end
            width = stop - at
            out = &self.row[column]
            if memchr(at, c'\\', width) is not NULL:
                # `\N` is NULL; any other backslash is an escape: the driver reads those.
                if width != 2 or at[1] != c'N':
                    raise Unusable("an escaped value")
                out.kind = KIND_NULL
            elif column == 1 or column == 6 or column == 7 or column == 8:
                negative = width > 0 and at[0] == c'-'
                digit = at + 1 if negative else at
                if digit == stop or stop - digit > 10:
                    raise Unusable("an integer column without an integer")
                number = 0
                while digit < stop:
                    if digit[0] < c'0' or digit[0] > c'9':
                        raise Unusable("an integer column without an integer")
                    number = number * 10 + (digit[0] - c'0')
                    digit += 1
                out.kind = KIND_INT
                out.number = -number if negative else number
            else:
                out.kind = KIND_TEXT
                out.data = at
                out.size = width
            at = stop + 1
        return 0
