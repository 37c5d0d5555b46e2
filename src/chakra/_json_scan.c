/*
 * chakra._json_scan: where things are in JSON text, found without decoding it, so that one big array of a
 * file can be decoded a piece at a time (see chakra/pytorch/jsonfile.py).
 *
 * find_array(text, key) -> (key_start, items_start) or None: in a JSON object `text`, the top-level key
 * `key` (bytes, compared as written: a key with escapes is not found) whose value is an array; key_start
 * is the offset of the key's opening quote, items_start the offset just after the array's '['. None
 * when the text ends first (more may follow), when the key is not there, or the text is not an object.
 *
 * items_end(text, start) -> (end, closed): from `start`, inside an array between two of its items, the
 * end of the complete items: closed is True when the array's ']' was met (end is its offset), else end
 * is the offset of the last ',' between items (-1 if none: no complete item yet). A '}' closing the
 * array is a ValueError; other text that is not JSON is not checked here: the decoder of the pieces
 * refuses it.
 *
 * object_items_end(text) -> int: the offset of the last ',' between a '}' and a '{' (whitespace aside),
 * searched from the end, or -1: where an array of objects likely has an item boundary. A guess, found
 * without reading the text before it (a string may hold those bytes): the caller checks it by
 * decoding the items before it, and reads with items_end where that fails.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static int is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* The offset just past the string starting at `p` (its opening quote), or -1 if the text ends first. */
static Py_ssize_t skip_string(const char *text, Py_ssize_t p, Py_ssize_t size) {
    for (p++; p < size; p++) {
        if (text[p] == '\\')
            p++;
        else if (text[p] == '"')
            return p + 1;
    }
    return -1;
}

/* The offset just past the value starting at `p`, or -1 if the text ends first. */
static Py_ssize_t skip_value(const char *text, Py_ssize_t p, Py_ssize_t size) {
    Py_ssize_t depth = 0;
    while (p < size) {
        char c = text[p];
        if (c == '"') {
            p = skip_string(text, p, size);
            if (p < 0) return -1;
            if (depth == 0) return p;
            continue;
        }
        if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (depth == 0) return p; /* the end of the enclosing object: an empty value */
            if (--depth == 0) return p + 1;
        } else if (depth == 0 && (c == ',')) {
            return p;
        }
        p++;
    }
    return -1;
}

static PyObject *find_array(PyObject *self, PyObject *args) {
    Py_buffer text, key;
    if (!PyArg_ParseTuple(args, "y*y*", &text, &key)) return NULL;
    const char *s = text.buf;
    Py_ssize_t size = text.len, p = 0;
    PyObject *found = NULL;
    while (p < size && is_space(s[p])) p++;
    if (p >= size || s[p] != '{') goto none;
    p++;
    for (;;) {
        while (p < size && (is_space(s[p]) || s[p] == ',')) p++;
        if (p >= size || s[p] != '"') goto none;
        Py_ssize_t key_start = p;
        p = skip_string(s, p, size);
        if (p < 0) goto none;
        int match = p - key_start - 2 == key.len && memcmp(s + key_start + 1, key.buf, key.len) == 0;
        while (p < size && is_space(s[p])) p++;
        if (p >= size || s[p] != ':') goto none;
        p++;
        while (p < size && is_space(s[p])) p++;
        if (p >= size) goto none;
        if (match && s[p] == '[') {
            found = Py_BuildValue("(nn)", key_start, p + 1);
            break;
        }
        p = skip_value(s, p, size);
        if (p < 0) goto none;
    }
    PyBuffer_Release(&text);
    PyBuffer_Release(&key);
    return found;
none:
    PyBuffer_Release(&text);
    PyBuffer_Release(&key);
    Py_RETURN_NONE;
}

static PyObject *items_end(PyObject *self, PyObject *args) {
    Py_buffer text;
    Py_ssize_t p;
    if (!PyArg_ParseTuple(args, "y*n", &text, &p)) return NULL;
    const char *s = text.buf;
    Py_ssize_t size = text.len, depth = 0, last_comma = -1;
    int closed = 0, misclosed = 0;
    if (p < 0) p = 0;
    Py_BEGIN_ALLOW_THREADS;
    while (p < size) {
        char c = s[p];
        if (c == '"') {
            /* a string cut by the end of the text: the items before it are complete */
            for (p++; p < size && s[p] != '"'; p++)
                if (s[p] == '\\') p++;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (depth == 0) {
                closed = c == ']';
                misclosed = !closed;
                break;
            }
            depth--;
        } else if (c == ',' && depth == 0) {
            last_comma = p;
        }
        p++;
    }
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&text);
    if (misclosed) {
        PyErr_Format(PyExc_ValueError, "'}' closes the array at offset %zd", p);
        return NULL;
    }
    return Py_BuildValue("(nO)", closed ? p : last_comma, closed ? Py_True : Py_False);
}

static PyObject *object_items_end(PyObject *self, PyObject *arg) {
    Py_buffer text;
    if (PyObject_GetBuffer(arg, &text, PyBUF_SIMPLE) < 0) return NULL;
    const char *s = text.buf;
    Py_ssize_t found = -1;
    for (Py_ssize_t p = text.len - 1; p > 0 && found < 0; p--) {
        if (s[p] != '{') continue;
        Py_ssize_t q = p - 1;
        while (q > 0 && is_space(s[q])) q--;
        if (s[q] != ',') continue;
        Py_ssize_t comma = q--;
        while (q >= 0 && is_space(s[q])) q--;
        if (q >= 0 && s[q] == '}') found = comma;
    }
    PyBuffer_Release(&text);
    return PyLong_FromSsize_t(found);
}

static PyMethodDef methods[] = {
    {"find_array", find_array, METH_VARARGS, "The offsets of a top-level key and of its array's first item."},
    {"items_end", items_end, METH_VARARGS, "The end of an array's complete items, and whether it closed."},
    {"object_items_end", object_items_end, METH_O, "A likely boundary between objects, from the end, or -1."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_json_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__json_scan(void) {
    return PyModule_Create(&module);
}
