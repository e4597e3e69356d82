# cython: language_level=3, boundscheck=False, wraparound=False
"""A snapshot's partition rows built into records a topic at a time, whatever database gave them.

`RunReader` is what a database's compiled reader (`_sqlite_rows`, `_pg_copy_rows`) extends: its
`_step` moves to the next row and lays its ten values out in `row` (a kind, a number or a
pointer to text the database holds until the next step); this class gives each topic's run
already built: its records, the checksum's digest of its rows (BLAKE2b of the
`marshal.dumps(rows, 0)` bytes, laid out and hashed here), and its replica lists' text. No row
tuple, no string per value and no bytes object per topic is made; a replica list's text is made
once (a table of the distinct texts, which few are), and the topic id's text is decoded here
into the shared id. A topic asked for `raw` comes as its row tuples instead (an increment lays
its changes over them).

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

from records.interning import UUIDS as _UUIDS


cdef extern from "Python.h":
    PyObject *PyDict_GetItem(object mapping, object key)
    object _PyLong_FromByteArray(const unsigned char *data, size_t size, int little, int signed)
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


cdef extern from *:
    """
    /* BLAKE2b (RFC 7693) with a 16-byte digest, no key: hashlib.blake2b(data, digest_size=16).
       The checksum digests each topic's rows with it; here the rows' bytes are hashed where
       they are laid out, without a bytes object, a hash object and an int.from_bytes each. */
    static const uint64_t mlog_b2_iv[8] = {
        0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL,
        0xa54ff53a5f1d36f1ULL, 0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL,
        0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL};
    static const unsigned char mlog_b2_sigma[12][16] = {
        {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
        {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
        {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
        {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
        {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
        {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
        {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
        {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
        {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
        {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
        {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
        {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3}};
    #define MLOG_B2_ROTR(x, n) (((x) >> (n)) | ((x) << (64 - (n))))
    #define MLOG_B2_G(a, b, c, d, x, y) do { \\
        v[a] = v[a] + v[b] + (x); v[d] = MLOG_B2_ROTR(v[d] ^ v[a], 32); \\
        v[c] = v[c] + v[d];       v[b] = MLOG_B2_ROTR(v[b] ^ v[c], 24); \\
        v[a] = v[a] + v[b] + (y); v[d] = MLOG_B2_ROTR(v[d] ^ v[a], 16); \\
        v[c] = v[c] + v[d];       v[b] = MLOG_B2_ROTR(v[b] ^ v[c], 63); } while (0)

    #define MLOG_B2_ROUND(r) do { \\
        MLOG_B2_G(0, 4, 8, 12, m[mlog_b2_sigma[r][0]], m[mlog_b2_sigma[r][1]]); \\
        MLOG_B2_G(1, 5, 9, 13, m[mlog_b2_sigma[r][2]], m[mlog_b2_sigma[r][3]]); \\
        MLOG_B2_G(2, 6, 10, 14, m[mlog_b2_sigma[r][4]], m[mlog_b2_sigma[r][5]]); \\
        MLOG_B2_G(3, 7, 11, 15, m[mlog_b2_sigma[r][6]], m[mlog_b2_sigma[r][7]]); \\
        MLOG_B2_G(0, 5, 10, 15, m[mlog_b2_sigma[r][8]], m[mlog_b2_sigma[r][9]]); \\
        MLOG_B2_G(1, 6, 11, 12, m[mlog_b2_sigma[r][10]], m[mlog_b2_sigma[r][11]]); \\
        MLOG_B2_G(2, 7, 8, 13, m[mlog_b2_sigma[r][12]], m[mlog_b2_sigma[r][13]]); \\
        MLOG_B2_G(3, 4, 9, 14, m[mlog_b2_sigma[r][14]], m[mlog_b2_sigma[r][15]]); } while (0)

    static inline uint64_t mlog_b2_load(const unsigned char *at) {
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        uint64_t word;
        memcpy(&word, at, 8);
        return word;
    #else
        uint64_t word = 0;
        int j;
        for (j = 7; j >= 0; j--) word = (word << 8) | at[j];
        return word;
    #endif
    }

    static void mlog_b2_compress(uint64_t h[8], const unsigned char *block, uint64_t t,
                                 int last) {
        uint64_t v[16], m[16];
        int i;
        for (i = 0; i < 16; i++) m[i] = mlog_b2_load(block + 8 * i);
        for (i = 0; i < 8; i++) { v[i] = h[i]; v[i + 8] = mlog_b2_iv[i]; }
        v[12] ^= t;  /* the byte counter's high word stays 0: a run is far below 2^64 bytes */
        if (last) v[14] = ~v[14];
        /* Unrolled, so that every message index is a constant the compiler resolves. */
        MLOG_B2_ROUND(0); MLOG_B2_ROUND(1); MLOG_B2_ROUND(2); MLOG_B2_ROUND(3);
        MLOG_B2_ROUND(4); MLOG_B2_ROUND(5); MLOG_B2_ROUND(6); MLOG_B2_ROUND(7);
        MLOG_B2_ROUND(8); MLOG_B2_ROUND(9); MLOG_B2_ROUND(10); MLOG_B2_ROUND(11);
        for (i = 0; i < 8; i++) h[i] ^= v[i] ^ v[i + 8];
    }

    /* The 16-byte digest of `size` bytes at `data`, in `out`. */
    static void mlog_blake2b_128(const char *data, Py_ssize_t size, unsigned char out[16]) {
        uint64_t h[8];
        unsigned char block[128];
        const unsigned char *in = (const unsigned char *)data;
        uint64_t done = 0;
        int i;
        for (i = 0; i < 8; i++) h[i] = mlog_b2_iv[i];
        h[0] ^= 0x01010000ULL ^ 16;  /* depth 1, fanout 1, no key, 16-byte digest */
        while (size > 128) {
            done += 128;
            mlog_b2_compress(h, in, done, 0);
            in += 128;
            size -= 128;
        }
        memset(block, 0, sizeof block);
        if (size > 0) memcpy(block, in, (size_t)size);
        mlog_b2_compress(h, block, done + (uint64_t)size, 1);
        for (i = 0; i < 16; i++) out[i] = (unsigned char)(h[i / 8] >> (8 * (i % 8)));
    }

    /* Kafka's 22-character id text (URL-safe base64 without padding) as its 16 bytes: 1, or
       0 for a text that is not an id's own (a character outside that alphabet, or the last
       one's four spare bits set): then the caller's own parser names it. */
    static int mlog_decode_id(const char *text, unsigned char out[16]) {
        unsigned int bits = 0, value;
        int held = 0, at = 0, i;
        for (i = 0; i < 22; i++) {
            char c = text[i];
            if (c >= 'A' && c <= 'Z') value = (unsigned int)(c - 'A');
            else if (c >= 'a' && c <= 'z') value = (unsigned int)(c - 'a') + 26;
            else if (c >= '0' && c <= '9') value = (unsigned int)(c - '0') + 52;
            else if (c == '-') value = 62;
            else if (c == '_') value = 63;
            else return 0;
            bits = (bits << 6) | value;
            held += 6;
            if (held >= 8) {
                held -= 8;
                if (at < 16) out[at++] = (unsigned char)(bits >> held);
                bits &= (1u << held) - 1;
            }
        }
        return bits == 0;  /* the last character's four spare bits: 0 in an id's own text */
    }
    """
    void mlog_blake2b_128(const char *data, Py_ssize_t size, unsigned char out[16])
    int mlog_decode_id(const char *text, unsigned char out[16])


def blake2b_128(bytes data):
    """The digest as an int (big-endian), as `int.from_bytes(blake2b(data, digest_size=16)
    .digest(), "big")` gives it: what the checksum sums (here for the tests' comparison)."""
    cdef unsigned char out[16]
    mlog_blake2b_128(<const char *>data, len(data), out)
    return _PyLong_FromByteArray(out, 16, 0, 0)


def decode_id(str text):
    """`mlog_decode_id` of `text` (22 ASCII characters): its 16 bytes, or None (for tests)."""
    cdef unsigned char out[16]
    cdef bytes raw = text.encode("ascii")
    if len(raw) != _TID_SIZE:
        raise ValueError("an id is 22 characters")
    if not mlog_decode_id(<const char *>raw, out):
        return None
    return PyBytes_FromStringAndSize(<const char *>out, 16)


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

    Each item is `(tid, topic_id, records, digest, key)` for a topic built here -- the id's
    text, its shared Uuid (`parse_id(tid, "topic id")`'s), the records in partition order, the
    checksum's digest of its rows as an int (`checksum.item_digest`'s), the replica lists'
    text per partition -- or `(tid, rows)` for a topic in `raw` (a set of ids, or True for
    every topic). A subclass reads a database: `_step` and `close`.
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
        cdef unsigned char digest[16]
        topic_id = self._topic_id(tid)
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
        mlog_blake2b_128(out.data, out.size, digest)
        return (
            tid,
            topic_id,
            PyList_AsTuple(records),
            _PyLong_FromByteArray(digest, 16, 0, 0),
            PyList_AsTuple(key),
        )

    cdef object _topic_id(self, tid):
        """The shared Uuid of the run's id text (`parse_id`'s, which names a bad one)."""
        cdef unsigned char raw[16]
        cdef PyObject *found
        if not mlog_decode_id(self._tid, raw):
            return self._parse_id(tid, "topic id")
        key = PyBytes_FromStringAndSize(<const char *>raw, 16)
        found = PyDict_GetItem(_UUIDS, key)
        if found is not NULL:
            return <object>found
        return _UUIDS[key]
