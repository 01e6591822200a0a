# Types for the compiled PacketReader (Cython reads this beside packets.py; the .py stays the
# source, and runs as it is without a build). Lengths and offsets are Py_ssize_t: no value
# of a packet's header overflows them.
cimport cython


cdef class PacketReader:
    cdef object _connection
    cdef object _file
    cdef int _seq
    cdef bytes _buffer
    cdef Py_ssize_t _at

    @cython.locals(pieces=list, have=Py_ssize_t, chunk=bytes)
    cdef _fill(self, Py_ssize_t needed)

    @cython.locals(buffer=bytes, at=Py_ssize_t, length=Py_ssize_t, seq=int,
                   start=Py_ssize_t)
    cdef tuple _payload(self)

    @cython.locals(data=bytes, length=Py_ssize_t, more=bytes, first=int)
    cpdef bytes next(self)
