/*
 * What the two halves of chakra._encode share: the Node and IOInfo field tags and the writers of
 * varints, length-delimited fields, packed ids and IOInfo fields (_encode.c: one node, the module;
 * _encode_columns.c: a batch of nodes given as columns).
 */
#ifndef CHAKRA_ENCODE_H
#define CHAKRA_ENCODE_H

#include "_json_repr.h"
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

static inline int put_uvarint(Buf *b, uint64_t v) {
    if (buf_reserve(b, MAX_VARINT_BYTES) < 0) return -1;
    b->len += (size_t)put_varint((uint8_t *)b->data + b->len, v);
    return 0;
}

static inline int put_len_field(Buf *b, uint8_t tag, const char *data, size_t len) {
    if (buf_put_byte(b, tag) < 0 || put_uvarint(b, len) < 0) return -1;
    return buf_put_bytes(b, data, len);
}

/* An int argument as its 64-bit two's complement (what the varint carries); -1 with an error set. */
static inline int as_u64(PyObject *value, const char *what, uint64_t *out) {
    if (!PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.80s", what, Py_TYPE(value)->tp_name);
        return -1;
    }
    *out = (uint64_t)PyLong_AsUnsignedLongLongMask(value);
    return (*out == (uint64_t)-1 && PyErr_Occurred()) ? -1 : 0;
}

/* Text as UTF-8 bytes: a str is encoded, bytes are taken as they are. */
static inline int text_bytes(PyObject *text, const char **data, Py_ssize_t *len) {
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

/* Growable array of ids, for dependency lists being mapped and filtered. */
typedef struct {
    uint64_t *ids;
    Py_ssize_t len;
    Py_ssize_t cap;
} Ids;

static inline int ids_push(Ids *a, uint64_t id) {
    if (a->len == a->cap) {
        Py_ssize_t cap = a->cap ? 2 * a->cap : 64;
        uint64_t *ids = PyMem_Realloc(a->ids, (size_t)cap * sizeof(uint64_t));
        if (!ids) {
            PyErr_NoMemory();
            return -1;
        }
        a->ids = ids;
        a->cap = cap;
    }
    a->ids[a->len++] = id;
    return 0;
}

/* A packed repeated uint64 field of `n` ids, omitted when empty. */
static inline int put_packed_ids(Buf *b, uint8_t tag, const uint64_t *ids, Py_ssize_t n) {
    if (n == 0) return 0;
    size_t body = 0;
    uint8_t scratch[MAX_VARINT_BYTES];
    for (Py_ssize_t i = 0; i < n; i++) body += (size_t)put_varint(scratch, ids[i]);
    if (buf_put_byte(b, tag) < 0 || put_uvarint(b, body) < 0 || buf_reserve(b, body) < 0) return -1;
    for (Py_ssize_t i = 0; i < n; i++) b->len += (size_t)put_varint((uint8_t *)b->data + b->len, ids[i]);
    return 0;
}

/* An IOInfo field from (values, shapes, types); None omits it, a given one is written even empty. */
static inline int put_io(Buf *b, uint8_t tag, PyObject *io) {
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
    if (buf_put_byte(b, tag) < 0 || put_uvarint(b, body) < 0) return -1;
    for (int i = 0; i < 3; i++) {
        if (lens[i] && put_len_field(b, IO_TAGS[i], parts[i], (size_t)lens[i]) < 0) return -1;
    }
    return 0;
}

/* encode_nodes(names, node_types, ..., attrs, *, node_ids, id_map, earlier_only, io_json): _encode_columns.c */
PyObject *encode_nodes(PyObject *self, PyObject *args, PyObject *kwargs);

#endif
