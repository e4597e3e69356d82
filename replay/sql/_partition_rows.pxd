# The record helpers `replay.sql._sqlite_rows` builds its records with (after `prepare`).

cdef object new_record()
cdef void store_slot(object record, Py_ssize_t index, object value)
