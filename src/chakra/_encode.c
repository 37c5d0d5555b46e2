/*
 * chakra._encode: Node records written as protobuf writes them, for producers' hot paths (see
 * chakra/wire.py, which exposes these). Fields in number order, proto3 defaults omitted, repeated ids
 * packed, integers as 64-bit two's complement varints (Python ints taken modulo 2**64, as protobuf's
 * Python runtime refuses and chakra.io never writes larger ones). tests/test_wire.py compares every
 * field with protobuf's own serialization.
 */
#include "_wire.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Node field tags: (field number << 3) | wire type. */
enum {
    T_ID = 0x08, T_NAME = 0x12, T_TYPE = 0x18, T_CTRL = 0x22, T_DATA = 0x2a, T_START = 0x30, T_DUR = 0x38,
    T_INPUTS = 0x42, T_OUTPUTS = 0x4a
};
/* IOInfo field tags: values, shapes, types. */
static const uint8_t IO_TAGS[3] = {0x0a, 0x12, 0x1a};

static int put_byte(Buf *b, uint8_t byte) {
    uint8_t *at = buf_push(b, 1);
    if (!at) return -1;
    *at = byte;
    return 0;
}

static int put_uvarint(Buf *b, uint64_t v) {
    if (buf_reserve(b, MAX_VARINT_BYTES) < 0) return -1;
    b->len += (size_t)put_varint((uint8_t *)b->data + b->len, v);
    return 0;
}

static int put_bytes(Buf *b, const char *data, size_t len) {
    char *at = buf_push(b, len);
    if (!at) return -1;
    memcpy(at, data, len);
    return 0;
}

static int put_len_field(Buf *b, uint8_t tag, const char *data, size_t len) {
    if (put_byte(b, tag) < 0 || put_uvarint(b, len) < 0) return -1;
    return put_bytes(b, data, len);
}

/* An int argument as its 64-bit two's complement (what the varint carries); -1 with an error set. */
static int as_u64(PyObject *value, const char *what, uint64_t *out) {
    if (!PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.80s", what, Py_TYPE(value)->tp_name);
        return -1;
    }
    *out = (uint64_t)PyLong_AsUnsignedLongLongMask(value);
    return (*out == (uint64_t)-1 && PyErr_Occurred()) ? -1 : 0;
}

/* Text as UTF-8 bytes: a str is encoded, bytes are taken as they are. */
static int text_bytes(PyObject *text, const char **data, Py_ssize_t *len) {
    if (PyUnicode_Check(text)) {
        *data = PyUnicode_AsUTF8AndSize(text, len);
        return *data ? 0 : -1;
    }
    if (PyBytes_Check(text)) {
        *data = PyBytes_AS_STRING(text);
        *len = PyBytes_GET_SIZE(text);
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "text must be str or bytes, not %.80s", Py_TYPE(text)->tp_name);
    return -1;
}

/* A packed repeated uint64 field of the ids in `deps`, omitted when empty. */
static int put_packed(Buf *b, uint8_t tag, PyObject *deps) {
    PyObject *fast = PySequence_Fast(deps, "dependencies must be a sequence of ints");
    if (!fast) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    int rc = 0;
    if (n > 0) {
        Buf packed = {0};
        PyObject **items = PySequence_Fast_ITEMS(fast);
        for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
            uint64_t id;
            rc = as_u64(items[i], "a dependency", &id);
            if (rc == 0) rc = put_uvarint(&packed, id);
        }
        if (rc == 0) rc = put_len_field(b, tag, packed.data, packed.len);
        PyMem_Free(packed.data);
    }
    Py_DECREF(fast);
    return rc;
}

/* An IOInfo field from (values, shapes, types); None omits it, a given one is written even empty. */
static int put_io(Buf *b, uint8_t tag, PyObject *io) {
    if (io == Py_None) return 0;
    if (!PyTuple_Check(io) || PyTuple_GET_SIZE(io) != 3) {
        PyErr_SetString(PyExc_TypeError, "inputs and outputs must be None or a (values, shapes, types) tuple");
        return -1;
    }
    const char *parts[3];
    Py_ssize_t lens[3];
    size_t body = 0;
    for (int i = 0; i < 3; i++) {
        if (text_bytes(PyTuple_GET_ITEM(io, i), &parts[i], &lens[i]) < 0) return -1;
        if (lens[i]) {
            uint8_t scratch[MAX_VARINT_BYTES];
            body += 1 + (size_t)put_varint(scratch, (uint64_t)lens[i]) + (size_t)lens[i];
        }
    }
    if (put_byte(b, tag) < 0 || put_uvarint(b, body) < 0) return -1;
    for (int i = 0; i < 3; i++) {
        if (lens[i] && put_len_field(b, IO_TAGS[i], parts[i], (size_t)lens[i]) < 0) return -1;
    }
    return 0;
}

static int put_attrs(Buf *b, PyObject *attrs) {
    PyObject *fast = PySequence_Fast(attrs, "attrs must be a sequence of encoded attr fields (bytes)");
    if (!fast) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    int rc = 0;
    for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
        if (!PyBytes_Check(items[i])) {
            PyErr_Format(PyExc_TypeError, "an encoded attr field must be bytes, not %.80s", Py_TYPE(items[i])->tp_name);
            rc = -1;
        } else {
            rc = put_bytes(b, PyBytes_AS_STRING(items[i]), (size_t)PyBytes_GET_SIZE(items[i]));
        }
    }
    Py_DECREF(fast);
    return rc;
}

static PyObject *encode_node(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 10) {
        PyErr_Format(PyExc_TypeError, "encode_node takes 10 arguments (%zd given)", nargs);
        return NULL;
    }
    uint64_t node_id, node_type, start, dur;
    if (as_u64(args[0], "node_id", &node_id) < 0 || as_u64(args[2], "node_type", &node_type) < 0 ||
        as_u64(args[5], "start_time_micros", &start) < 0 || as_u64(args[6], "duration_micros", &dur) < 0)
        return NULL;
    const char *name;
    Py_ssize_t name_len;
    if (text_bytes(args[1], &name, &name_len) < 0) return NULL;
    Buf b = {0};
    int rc = 0;
    if (node_id) rc = put_byte(&b, T_ID) < 0 || put_uvarint(&b, node_id) < 0 ? -1 : 0;
    if (rc == 0 && name_len) rc = put_len_field(&b, T_NAME, name, (size_t)name_len);
    if (rc == 0 && node_type) rc = put_byte(&b, T_TYPE) < 0 || put_uvarint(&b, node_type) < 0 ? -1 : 0;
    if (rc == 0) rc = put_packed(&b, T_CTRL, args[3]);
    if (rc == 0) rc = put_packed(&b, T_DATA, args[4]);
    if (rc == 0 && start) rc = put_byte(&b, T_START) < 0 || put_uvarint(&b, start) < 0 ? -1 : 0;
    if (rc == 0 && dur) rc = put_byte(&b, T_DUR) < 0 || put_uvarint(&b, dur) < 0 ? -1 : 0;
    if (rc == 0) rc = put_io(&b, T_INPUTS, args[7]);
    if (rc == 0) rc = put_io(&b, T_OUTPUTS, args[8]);
    if (rc == 0) rc = put_attrs(&b, args[9]);
    PyObject *out = NULL;
    if (rc == 0) {
        out = buf_to_bytes(&b);
    } else if (!PyErr_Occurred()) {
        PyErr_NoMemory();
    }
    PyMem_Free(b.data);
    return out;
}

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
#define REPR_MAX_INT_DIGITS 18

typedef struct {
    const char *p;
    const char *end;
} Json;

/* 1: written; 0: a form left to Python; -1: an error (set). */
static int repr_value(Json *j, Buf *out, int depth);

static void skip_space(Json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t')) j->p++;
}

static int repr_string(Json *j, Buf *out) {
    const char *start = ++j->p; /* after the opening quote */
    while (j->p < j->end && *j->p != '"') {
        unsigned char c = (unsigned char)*j->p;
        if (c == '\\' || c == '\'' || c < 0x20 || c >= 0x7f) return 0;
        j->p++;
    }
    if (j->p >= j->end) return 0;
    size_t len = (size_t)(j->p - start);
    j->p++; /* the closing quote */
    if (put_byte(out, '\'') < 0 || put_bytes(out, start, len) < 0 || put_byte(out, '\'') < 0) return -1;
    return 1;
}

static int repr_number(Json *j, Buf *out) {
    const char *start = j->p;
    int is_float = 0, digits = 0;
    if (j->p < j->end && *j->p == '-') j->p++;
    while (j->p < j->end) {
        char c = *j->p;
        if (c >= '0' && c <= '9') {
            digits++;
        } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
            is_float = 1;
        } else {
            break;
        }
        j->p++;
    }
    size_t len = (size_t)(j->p - start);
    if (digits == 0 || len > 64) return 0;
    char text[65];
    memcpy(text, start, len);
    text[len] = '\0';
    if (!is_float) {
        if (digits > REPR_MAX_INT_DIGITS) return 0;
        long long value = strtoll(text, NULL, 10);
        char printed[32];
        int n = snprintf(printed, sizeof printed, "%lld", value);
        return put_bytes(out, printed, (size_t)n) < 0 ? -1 : 1;
    }
    char *after = NULL;
    double value = PyOS_string_to_double(text, &after, NULL);
    if (value == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (after != text + len || !isfinite(value)) return 0;
    char *printed = PyOS_double_to_string(value, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (!printed) return -1;
    int rc = put_bytes(out, printed, strlen(printed)) < 0 ? -1 : 1;
    PyMem_Free(printed);
    return rc;
}

static int repr_word(Json *j, Buf *out, const char *word, const char *python) {
    size_t n = strlen(word);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0) return 0;
    j->p += n;
    return put_bytes(out, python, strlen(python)) < 0 ? -1 : 1;
}

/* The items of a list, after its opening bracket, up to and including the closing one. */
static int repr_list(Json *j, Buf *out, int depth) {
    if (put_byte(out, '[') < 0) return -1;
    skip_space(j);
    if (j->p < j->end && *j->p == ']') {
        j->p++;
        return put_byte(out, ']') < 0 ? -1 : 1;
    }
    for (;;) {
        int rc = repr_value(j, out, depth + 1);
        if (rc != 1) return rc;
        skip_space(j);
        if (j->p >= j->end) return 0;
        if (*j->p == ']') {
            j->p++;
            return put_byte(out, ']') < 0 ? -1 : 1;
        }
        if (*j->p != ',') return 0;
        j->p++;
        if (put_bytes(out, ", ", 2) < 0) return -1;
    }
}

static int repr_value(Json *j, Buf *out, int depth) {
    if (depth > MAX_DEPTH) return 0;
    skip_space(j);
    if (j->p >= j->end) return 0;
    switch (*j->p) {
    case '[': j->p++; return repr_list(j, out, depth);
    case '{': return 0; /* a dict: duplicate keys and their order are Python's to settle */
    case '"': return depth > 0 ? repr_string(j, out) : 0; /* str() of a bare string is not its repr */
    case 't': return repr_word(j, out, "true", "True");
    case 'f': return repr_word(j, out, "false", "False");
    case 'n': return repr_word(j, out, "null", "None");
    default: return repr_number(j, out);
    }
}

static PyObject *python_repr_of_json(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    Json j = {(const char *)view.buf, (const char *)view.buf + view.len};
    Buf out = {0};
    int rc = repr_value(&j, &out, 0);
    if (rc == 1) {
        skip_space(&j);
        if (j.p != j.end) rc = 0; /* text after the value: not a value Python would have parsed */
    }
    PyObject *result = NULL;
    if (rc == 1) {
        result = buf_to_bytes(&out);
    } else if (rc == 0) {
        result = Py_NewRef(Py_None);
    } else if (!PyErr_Occurred()) {
        PyErr_NoMemory();
    }
    PyMem_Free(out.data);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *varint(PyObject *self, PyObject *value) {
    (void)self;
    uint64_t v;
    if (as_u64(value, "value", &v) < 0) return NULL;
    uint8_t out[MAX_VARINT_BYTES];
    return PyBytes_FromStringAndSize((const char *)out, put_varint(out, v));
}

static PyMethodDef methods[] = {
    {"encode_node", (PyCFunction)(void (*)(void))encode_node, METH_FASTCALL,
     "encode_node(node_id, name, node_type, ctrl_deps, data_deps, start_time_micros, duration_micros, "
     "inputs, outputs, attrs) -> bytes of the Node message"},
    {"python_repr_of_json", python_repr_of_json, METH_O,
     "python_repr_of_json(json_text) -> UTF-8 bytes of str(the parsed value), or None for a form left to Python"},
    {"varint", varint, METH_O, "varint(value) -> base-128 varint bytes (negative values as 64-bit two's complement)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "chakra._encode", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__encode(void) { return PyModule_Create(&module); }
