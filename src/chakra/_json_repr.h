/*
 * Python's str() of a JSON value, written from the JSON text without building the value: what
 * upstream's converter stores as an IO list (str of the parsed list). Only the forms whose text is
 * certain are written here: lists, true/false/null, integers of at most 18 digits, numbers
 * with a fraction or an exponent (Python floats: repr'd by CPython's own float formatting), and
 * strings of printable ASCII without quotes or escapes. Anything else (long integers, escapes,
 * non-ASCII text, quotes, which Python's repr escapes by its own rules; objects, whose duplicate keys
 * Python settles; a bare string, whose str() is not its repr) makes the whole value None,
 * and the caller parses it with Python.
 */
#ifndef CHAKRA_JSON_REPR_H
#define CHAKRA_JSON_REPR_H

#include "_wire.h"

/* Python's str() of the JSON text into `out`: 1 written, 0 a form left to Python, -1 an error (set). */
int repr_json(const char *data, Py_ssize_t len, Buf *out);

#endif
