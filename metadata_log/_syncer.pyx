# cython: language_level=3, boundscheck=False, wraparound=False
"""A thread that writes and fdatasyncs without the interpreter lock, for `metadata_log.syncer`.

The event loop hands it one job at a time (a descriptor, optional bytes to write first) through
an eventfd and learns of the job's end through another, which the loop watches with
`add_reader`. The thread's body runs entirely without the interpreter lock: unlike a Python
worker thread, it never takes the lock back from the loop after a system call.
"""

from libc.errno cimport EAGAIN, EINTR, errno
from libc.stdint cimport uint64_t


cdef extern from "<unistd.h>" nogil:
    ssize_t c_write "write" (int fd, const void *buf, size_t count)
    ssize_t c_read "read" (int fd, void *buf, size_t count)
    int fdatasync(int fd)
    int close(int fd)


cdef extern from "<sys/eventfd.h>" nogil:
    int eventfd(unsigned int initval, int flags)
    int EFD_CLOEXEC
    int EFD_NONBLOCK


cdef extern from "<time.h>" nogil:
    ctypedef long time_t
    struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clk_id, timespec *tp)
    int CLOCK_MONOTONIC


cdef inline double _now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


cdef inline int _signal(int fd) noexcept nogil:
    cdef uint64_t one = 1
    cdef ssize_t n
    while True:
        n = c_write(fd, &one, 8)
        if n == 8:
            return 0
        if n < 0 and errno == EINTR:
            continue
        return errno


cdef class SyncThread:
    """One job at a time: write `data` (if any) at `fd`'s end, then fdatasync `fd`."""

    cdef int _request_fd
    cdef int _done_fd
    cdef int _fd
    cdef const unsigned char *_data
    cdef Py_ssize_t _size
    cdef bint _stopping
    cdef bint _pending
    cdef bint _busy
    cdef object _held
    cdef int _errno
    cdef double _write_seconds
    cdef double _sync_seconds

    def __cinit__(self):
        self._request_fd = eventfd(0, EFD_CLOEXEC)
        self._done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)
        if self._request_fd < 0 or self._done_fd < 0:
            raise OSError(errno, "eventfd failed")

    def __dealloc__(self):
        if self._request_fd >= 0:
            close(self._request_fd)
        if self._done_fd >= 0:
            close(self._done_fd)

    @property
    def done_fd(self):
        """The eventfd that becomes readable when a job has ended."""
        return self._done_fd

    @property
    def busy(self):
        """Whether a job was started and its end not yet taken."""
        return self._busy

    def start(self, int fd, data):
        """Start a job (the thread must be idle): write `data` (bytes or None), then sync."""
        if self._busy:
            raise RuntimeError("a sync job is already running")
        if self._stopping:
            raise RuntimeError("the sync thread is stopped")
        cdef const unsigned char[::1] view
        self._fd = fd
        if data is None or len(data) == 0:
            self._held = None
            self._data = NULL
            self._size = 0
        else:
            view = data
            self._held = data  # alive until the job ends
            self._data = &view[0]
            self._size = view.shape[0]
        self._busy = True
        self._pending = True
        cdef int err = _signal(self._request_fd)
        if err:
            self._busy = False
            self._pending = False
            self._held = None
            raise OSError(err, "could not wake the sync thread")

    def take(self):
        """The ended job's (errno, write seconds, sync seconds), or None while it runs."""
        cdef uint64_t count
        cdef ssize_t n = c_read(self._done_fd, &count, 8)
        if n != 8:
            if errno == EAGAIN or errno == EINTR:
                return None
            raise OSError(errno, "could not read the sync thread's eventfd")
        self._busy = False
        self._held = None
        return (self._errno, self._write_seconds, self._sync_seconds)

    def stop(self):
        """Ask the thread to end after its job (if any); `run` then returns."""
        self._stopping = True
        _signal(self._request_fd)

    def run(self):
        """The thread's body: jobs until `stop`, all of it without the interpreter lock."""
        with nogil:
            self._loop()

    cdef void _loop(self) noexcept nogil:
        cdef uint64_t count
        cdef ssize_t n
        cdef Py_ssize_t done
        cdef double started, written
        cdef int err
        while True:
            n = c_read(self._request_fd, &count, 8)
            if n != 8:
                if errno == EINTR:
                    continue
                return  # the eventfd is gone: nothing can ask any more
            # A start and a stop may come as one count: the job first, then the end.
            if not self._pending:
                if self._stopping:
                    return
                continue
            self._pending = False
            err = 0
            started = _now()
            done = 0
            while done < self._size:
                n = c_write(self._fd, self._data + done, self._size - done)
                if n < 0:
                    if errno == EINTR:
                        continue
                    err = errno
                    break
                if n == 0:
                    err = 28  # ENOSPC: a write that makes no progress
                    break
                done += n
            written = _now()
            if err == 0:
                while fdatasync(self._fd) != 0:
                    if errno != EINTR:
                        err = errno
                        break
            self._errno = err
            self._write_seconds = written - started
            self._sync_seconds = _now() - written
            _signal(self._done_fd)
            if self._stopping:
                return
