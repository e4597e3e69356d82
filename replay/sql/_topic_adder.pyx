# cython: language_level=3, boundscheck=False, wraparound=False
"""A built run added to a snapshot's topics in C: its `TopicImage`, digest and layout (`topic_builder`).

What `topic_builder._TopicBuilder._add` does a topic, for the 100,000 topics of a 1M-partition
load: the topic image made and its five slots stored directly, its checksum digest summed, its
replica layout's topic list appended to (a new layout is left to the index's own `add`), its
pending deletion attached, its row taken out of the rows still to build, its qualified name
and its id listed and its namespace's topics counted. A run whose topic has no row left (seen twice,
or never known) is left to `finish_built`, which says which. The digests are summed
modulo 2**128 here, as the checksum sums them.
"""

from cpython.object cimport PyObject

from records._slot_offsets cimport check_plain_new, slot_offset, store_new


cdef extern from "Python.h":
    PyObject *PyDict_GetItem(object mapping, object key)
    int PyDict_SetItem(object mapping, object key, object value) except -1
    int PyDict_DelItem(object mapping, object key) except -1
    int PyList_Append(object items, object item) except -1
    object PyType_GenericAlloc(type kind, Py_ssize_t items)


_MODULUS = 1 << 128


cdef class TopicAdder:
    """Adds built runs `(tid, topic_id, records, digest, key)` to `built` (see the docstring)."""

    cdef type _kind
    cdef Py_ssize_t _id_at, _name_at, _namespace_at, _partitions_at, _pending_at
    cdef dict _topic_rows
    cdef dict _pending_rows
    cdef list _built
    cdef dict _layouts
    cdef list _names
    cdef list _name_ids
    cdef dict _topic_counts
    cdef str _separator
    cdef object _new_layout
    cdef object _pending_record
    cdef object _digest_sum
    cdef Py_ssize_t _partitions

    def __cinit__(self, type kind, dict topic_rows, dict pending_rows, list built,
                  dict layouts, new_layout, pending_record, list names, list name_ids,
                  dict topic_counts, str separator):
        """`kind`: TopicImage; `layouts`: the index's replica lists' text -> topic list;
        `new_layout(topic_id, key)`: the index's `add`, for a layout not seen yet;
        `pending_record(topic_id, row)`: a pending deletion's record from its row;
        `built` the topics added, `names` their qualified names and `name_ids` their ids
        (at the same places), and `topic_counts`:
        namespace -> its topics, filled as topics are added (`separator` between a namespace
        and a name); `topic_rows` loses each added topic's row."""
        check_plain_new(kind)
        self._kind = kind
        self._id_at = slot_offset(kind, "topic_id")
        self._name_at = slot_offset(kind, "name")
        self._namespace_at = slot_offset(kind, "namespace")
        self._partitions_at = slot_offset(kind, "partitions")
        self._pending_at = slot_offset(kind, "pending_deletion")
        self._topic_rows = topic_rows
        self._pending_rows = pending_rows
        self._built = built
        self._layouts = layouts
        self._new_layout = new_layout
        self._pending_record = pending_record
        self._names = names
        self._name_ids = name_ids
        self._topic_counts = topic_counts
        self._separator = separator
        self._digest_sum = 0
        self._partitions = 0

    @property
    def digest_sum(self):
        """The added topics' digests, summed modulo 2**128 (kept below it as they are added)."""
        return self._digest_sum

    @property
    def partitions(self):
        """The added topics' partitions, counted."""
        return self._partitions

    def add_runs(self, runs, finish_raw, finish_built):
        """Add every run of `runs`: a built one here where its topic's row is left, else
        through `finish_built` (which names what is wrong); a raw one `(tid, rows)` through
        `finish_raw(tid, rows)`."""
        for run in runs:
            if len(run) == 2:
                finish_raw(run[0], run[1])
            elif not self._try_add(run):
                finish_built(run)

    def add(self, tuple run):
        """Add one built run whose topic's row is left (KeyError if none is)."""
        if not self._try_add(run):
            raise KeyError(run[0])

    cdef bint _try_add(self, tuple run) except -1:
        """Add a built run, or False (nothing done) if its topic has no row left."""
        cdef PyObject *found
        if len(run) != 5:
            raise ValueError("a built run has five items")
        tid = run[0]
        found = PyDict_GetItem(self._topic_rows, tid)
        if found is NULL:
            return False
        topic_row = <object>found
        PyDict_DelItem(self._topic_rows, tid)
        topic_id = run[1]
        partitions = run[2]
        key = run[4]
        self._digest_sum += run[3]
        if self._digest_sum >= _MODULUS:
            self._digest_sum -= _MODULUS
        self._partitions += len(partitions)
        found = PyDict_GetItem(self._layouts, key)
        if found is not NULL:
            PyList_Append(<object>found, topic_id)
        else:
            self._new_layout(topic_id, key)
        pending = None
        if self._pending_rows:
            found = PyDict_GetItem(self._pending_rows, tid)
            if found is not NULL:
                pending = self._pending_record(topic_id, <object>found)
                del self._pending_rows[tid]
        name = topic_row[2]
        namespace = topic_row[1]
        topic = PyType_GenericAlloc(self._kind, 0)
        store_new(topic, self._id_at, topic_id)
        store_new(topic, self._name_at, name)
        store_new(topic, self._namespace_at, namespace)
        store_new(topic, self._partitions_at, partitions)
        store_new(topic, self._pending_at, pending)
        PyList_Append(self._built, topic)
        if namespace:
            PyList_Append(self._names, namespace + self._separator + name)
            found = PyDict_GetItem(self._topic_counts, namespace)
            PyDict_SetItem(
                self._topic_counts, namespace, 1 if found is NULL else <object>found + 1
            )
        else:
            PyList_Append(self._names, name)
        PyList_Append(self._name_ids, topic_id)
        return True
