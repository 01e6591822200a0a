# Types for the compiled insert lines (Cython reads this beside insertlines.py; the .py stays
# the source, and runs as it is without a build). Positions are Py_ssize_t; a number read
# from the row (a length, an integer's bits) is an unsigned 64-bit, as wide as the widest.
cimport cython


@cython.locals(count=Py_ssize_t, size=Py_ssize_t, found=Py_ssize_t, fields=list,
               nulls=Py_ssize_t, i=Py_ssize_t, k=Py_ssize_t, kind=Py_ssize_t,
               width=Py_ssize_t, length=Py_ssize_t, escape=cython.int,
               byte=cython.ulonglong, number=cython.ulonglong, magnitude=cython.ulonglong,
               ones=cython.ulonglong, view=cython.p_uchar, check=Py_ssize_t,
               stop=Py_ssize_t)
cpdef Py_ssize_t rows(bytes d, Py_ssize_t p, Py_ssize_t end, tuple kinds_, tuple order_,
                      list out)

@cython.locals(lead=cython.uint, size=Py_ssize_t, low=cython.uint, high=cython.uint,
               second=cython.uint, follow=cython.uint, j=Py_ssize_t)
cdef Py_ssize_t _utf8(unsigned char *view, Py_ssize_t k, Py_ssize_t stop)
