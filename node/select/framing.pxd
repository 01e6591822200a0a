# Types for the compiled framing loop (Cython reads this beside framing.py; the .py stays the
# source, and runs as it is without a build). Only values that fit their C type are typed:
# an event's kind is a byte, a batch's row count and a table-map number are sizes; offsets
# and table ids stay Python integers.
cimport cython


@cython.locals(head=Py_ssize_t, per_row=cython.double)
cpdef Py_ssize_t estimate(Py_ssize_t size, tuple guess)

@cython.locals(data=bytes, kind=cython.int, events=list, decoded=list, event_rows=Py_ssize_t,
               tables=dict, row_bytes=dict, number=Py_ssize_t, foreign=cython.bint,
               opened=cython.bint)
cpdef frame(reader, packets)
