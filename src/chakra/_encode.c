/*
 * chakra._encode: Node records written as protobuf writes them, for producers' hot paths (see
 * chakra/wire.py, which exposes these). Fields in number order, proto3 defaults omitted, repeated ids
 * packed, integers as 64-bit two's complement varints (Python ints taken modulo 2**64, as protobuf's
 * Python runtime refuses and chakra.io never writes larger ones). tests/test_wire.py compares every
 * field with protobuf's own serialization.
 */
#include "_wire.h"

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
    {"varint", varint, METH_O, "varint(value) -> base-128 varint bytes (negative values as 64-bit two's complement)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "chakra._encode", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__encode(void) { return PyModule_Create(&module); }
