# Types for the compiled insert lines (Cython reads this beside insertlines.py; the .py stays
# the source, and runs as it is without a build). Positions are Py_ssize_t; a number read
# from the row (a length, an integer's bits) is an unsigned 64-bit, as wide as the widest.
# The lines are written through the bytearray's own buffer (``w``), room made before each
# field; ``w`` is taken again whenever the bytearray grows.
cimport cython


@cython.locals(count=Py_ssize_t, size=Py_ssize_t, found=Py_ssize_t, starts=list,
               nulls=Py_ssize_t, i=Py_ssize_t, k=Py_ssize_t, kind=Py_ssize_t,
               width=Py_ssize_t, length=Py_ssize_t, j=Py_ssize_t, line=Py_ssize_t,
               start=Py_ssize_t, room=Py_ssize_t, moved=cython.bint,
               byte=cython.ulonglong, number=cython.ulonglong, digits=cython.ulonglong,
               ones=cython.ulonglong, view=cython.p_uchar, w=cython.p_uchar,
               check=Py_ssize_t, stop=Py_ssize_t)
cpdef tuple rows(bytes d, Py_ssize_t p, Py_ssize_t end, tuple kinds_, tuple order_,
                 bytearray out, Py_ssize_t o)

@cython.locals(count=Py_ssize_t, begin=Py_ssize_t, stop=Py_ssize_t, i=Py_ssize_t)
cdef void _reorder(bytearray out, Py_ssize_t line, Py_ssize_t o, list starts,
                   tuple order_) except *

@cython.locals(lead=cython.uint, size=Py_ssize_t, low=cython.uint, high=cython.uint,
               second=cython.uint, follow=cython.uint, j=Py_ssize_t)
cdef Py_ssize_t _utf8(unsigned char *view, Py_ssize_t k, Py_ssize_t stop)
