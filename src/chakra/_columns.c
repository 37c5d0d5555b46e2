/*
 * chakra._columns: framed Chakra ET records -> fixed-width rows, in one pass of C.
 *
 * This is the decoding half of chakra.table (the node table): it walks the protobuf wire format of
 * `Node` records (schema/protobuf/et_def.proto) and writes, per node, one NodeRow and, per attribute,
 * one AttrRow. What the rows mean -- which attribute is which, how a member is read -- is decided in
 * Python (chakra.attrs, chakra.table); this file only knows the wire format. It accepts exactly what
 * protobuf's own parser (upb) accepts, so that `chakra info` and `Trace.load` agree on every file:
 *
 *   - fields in any order, a scalar field given twice keeps the last value, repeated scalars packed or
 *     not, a oneof keeps the member set last, fields of a known number with another wire type and
 *     unknown fields are skipped (groups included, nested up to 100 deep);
 *   - varints of up to 10 bytes (bits beyond 64 dropped), tags below 2^32, field number 0, wire types
 *     6 and 7, a stray end-group tag, a length past its message and packed fixed-width data whose length
 *     is not a multiple of the width are errors;
 *   - proto3 `string` fields (node and attribute names, doc strings, string values and lists, IOInfo)
 *     must be valid UTF-8 (upb checks this too); bytes and unknown fields are not checked.
 *
 * decode(buf, pos, end, node_names, attr_names) decodes the complete records in buf[pos:end] (each a
 * varint length prefix and a payload). It stops before the first record that is not complete in the
 * window or whose prefix is not a plausible varint32 (the Python reader then explains or refills), or
 * at the first record whose payload does not parse. It returns
 *
 *   (stop, count, error, nodes, ctrl_deps, data_deps, attrs)
 *
 * stop: offset after the last decoded record; count: records decoded; error: None, or
 * (record index, prefix offset, message) of the record that does not parse (the records before it are
 * decoded); nodes: `count` NodeRow structs; ctrl_deps / data_deps: the dependency ids (uint64) of the
 * nodes, in node order; attrs: the AttrRow structs of every attribute, in node order and, within a node,
 * in record order, each marked when an earlier attribute of its node has the same name. node_names and attr_names are dicts bytes -> id, extended with the names first seen
 * here (ids in order of first appearance: list(d) is the name of each id).
 *
 * The struct layouts are mirrored by numpy dtypes in chakra/table.py (NODE_ROW, ATTR_ROW): change both.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_wire.h"

/* One decoded node. Unsigned protobuf fields are stored as their 64-bit pattern. */
typedef struct {
    int64_t rec_off;   /* offset of the payload in buf */
    uint64_t id;
    uint64_t start_us; /* start_time_micros */
    uint64_t dur_us;   /* duration_micros */
    int32_t rec_len;   /* payload length */
    int32_t type;      /* NodeType, an open enum: any int32 */
    int32_t name_id;   /* into node_names */
    int32_t n_ctrl;
    int32_t n_data;
    int32_t n_attr;
} NodeRow;

/* One decoded attribute. `value` holds an integer member's value (uint64/fixed64 as their bit pattern,
 * bool as 0/1), a float member's value as the bits of a double, and for a length-delimited member
 * (strings, bytes, lists) the offset in buf of the AttributeProto payload, whose length is `len`: those
 * are decoded on demand by protobuf itself. */
typedef struct {
    int64_t value;
    int32_t node;    /* index of the node in this call's rows */
    int32_t name_id; /* into attr_names */
    int32_t len;
    int16_t member;  /* field number of the oneof member set last, 0 when none */
    int16_t repeat;  /* 1 when an earlier attribute of the node has the same name (consumers read the first) */
} AttrRow;

/* attribute name cache: the i-th attribute of a node usually has the name of the i-th attribute of the
 * node before, so a short name is compared to that before the dict is asked */
#define NAME_CACHE_SLOTS 32
#define NAME_CACHE_BYTES 48

typedef struct {
    PyObject *node_names;
    PyObject *attr_names;
    const uint8_t *base; /* buf[0] */
    Buf nodes, ctrl, data, attrs;
    /* the attribute name cache */
    size_t cached_len[NAME_CACHE_SLOTS];
    uint8_t cached[NAME_CACHE_SLOTS][NAME_CACHE_BYTES];
    int32_t cached_id[NAME_CACHE_SLOTS];
} State;

/* The id of `name` in `names` (added when new); -1 with a Python error set on failure. */
static int32_t intern(PyObject *names, const uint8_t *name, size_t len) {
    PyObject *key = PyBytes_FromStringAndSize((const char *)name, (Py_ssize_t)len);
    if (!key) return -1;
    PyObject *found = PyDict_GetItemWithError(names, key);
    int32_t id;
    if (found) {
        id = (int32_t)PyLong_AsLong(found);
    } else if (PyErr_Occurred()) {
        id = -1;
    } else {
        Py_ssize_t next = PyDict_Size(names);
        PyObject *value = PyLong_FromSsize_t(next);
        id = (value && PyDict_SetItem(names, key, value) == 0) ? (int32_t)next : -1;
        Py_XDECREF(value);
    }
    Py_DECREF(key);
    return id;
}

static int32_t attr_name_id(State *st, int slot, const uint8_t *name, size_t len) {
    int cacheable = slot < NAME_CACHE_SLOTS && len <= NAME_CACHE_BYTES;
    if (cacheable && st->cached_id[slot] >= 0 && st->cached_len[slot] == len && memcmp(st->cached[slot], name, len) == 0)
        return st->cached_id[slot];
    int32_t id = intern(st->attr_names, name, len);
    if (cacheable && id >= 0) {
        memcpy(st->cached[slot], name, len);
        st->cached_len[slot] = len;
        st->cached_id[slot] = id;
    }
    return id;
}

/* Decode one AttributeProto payload into an AttrRow. Returns -1 on a wire error (outer->error set) and
 * -2 on a Python error. */
static int decode_attr(State *st, Cursor *outer, const uint8_t *data, size_t len, int32_t node, int slot) {
    WireAttr a;
    if (read_attr(outer, data, len, &a) < 0) return -1;
    AttrRow *row = buf_push(&st->attrs, sizeof(AttrRow));
    if (!row) {
        PyErr_NoMemory();
        return -2;
    }
    int32_t name_id = attr_name_id(st, slot, a.name.p, a.name.n);
    if (name_id < 0) return -2;
    row->node = node;
    row->name_id = name_id;
    row->member = (int16_t)a.member;
    row->repeat = 0;
    row->len = 0;
    if (a.member % 2 == 0 || a.member == A_STRING || a.member == A_BYTES) { /* decoded on demand */
        row->value = (int64_t)(data - st->base);
        row->len = (int32_t)len;
    } else if (a.member == A_FLOAT) {
        uint32_t bits = (uint32_t)a.raw;
        float f;
        memcpy(&f, &bits, sizeof f);
        double d = (double)f;
        memcpy(&row->value, &d, sizeof row->value);
    } else if (a.member == A_DOUBLE) {
        row->value = (int64_t)a.raw;
    } else {
        row->value = member_int(a.member, a.raw);
    }
    return 0;
}

/* Append a repeated uint64 field's values (one varint, or a packed run) to `out`; counts into *count. */
static int read_deps(Cursor *c, int wt, Buf *out, int32_t *count) {
    uint64_t id;
    if (wt == WT_VARINT) {
        if (read_varint(c, &id) < 0) return -1;
        uint64_t *slot = buf_push(out, sizeof id);
        if (!slot) return -2;
        *slot = id;
        (*count)++;
        return 0;
    }
    const uint8_t *s;
    size_t n;
    if (read_len(c, &s, &n) < 0) return -1;
    Cursor packed = {s, s + n, NULL};
    while (packed.p < packed.end) {
        if (read_varint(&packed, &id) < 0) {
            c->error = packed.error;
            return -1;
        }
        uint64_t *slot = buf_push(out, sizeof id);
        if (!slot) return -2;
        *slot = id;
        (*count)++;
    }
    return 0;
}

/* Decode one Node payload. Returns 0, -1 on a wire error (c->error set) or -2 on a Python error. The
 * rows it appended are rolled back by the caller on failure. */
static int decode_node(State *st, Cursor *c, int64_t rec_off, int32_t index) {
    NodeRow row = {0};
    row.rec_off = rec_off;
    row.rec_len = (int32_t)(c->end - c->p);
    const uint8_t *name = (const uint8_t *)"";
    size_t name_len = 0;
    while (c->p < c->end) {
        uint32_t field;
        int wt;
        uint64_t v;
        int rc;
        if (read_tag(c, &field, &wt) < 0) return -1;
        if (wt == WT_VARINT && (field == 1 || field == 3 || field == 6 || field == 7)) {
            if (read_varint(c, &v) < 0) return -1;
            if (field == 1) row.id = v;
            else if (field == 3) row.type = (int32_t)(uint32_t)v;
            else if (field == 6) row.start_us = v;
            else row.dur_us = v;
        } else if ((field == 4 || field == 5) && (wt == WT_VARINT || wt == WT_LEN)) {
            rc = field == 4 ? read_deps(c, wt, &st->ctrl, &row.n_ctrl) : read_deps(c, wt, &st->data, &row.n_data);
            if (rc == -2) {
                PyErr_NoMemory();
                return -2;
            }
            if (rc < 0) return -1;
        } else if (field == 2 && wt == WT_LEN) {
            if (read_len(c, &name, &name_len) < 0 || check_string(c, name, name_len) < 0) return -1;
        } else if ((field == 8 || field == 9) && wt == WT_LEN) {
            const uint8_t *s;
            size_t n;
            IoTexts io;
            if (read_len(c, &s, &n) < 0 || read_io(c, s, n, &io) < 0) return -1;
        } else if (field == 10 && wt == WT_LEN) {
            const uint8_t *s;
            size_t n;
            if (read_len(c, &s, &n) < 0) return -1;
            rc = decode_attr(st, c, s, n, index, row.n_attr);
            if (rc < 0) return rc;
            row.n_attr++;
        } else if (skip_field(c, field, wt, 0) < 0) {
            return -1;
        }
    }
    if (row.n_attr > 1) { /* mark repeated names: a bit per small name id, a scan for the others */
        AttrRow *first = (AttrRow *)(st->attrs.data + st->attrs.len) - row.n_attr;
        uint64_t seen = 0;
        for (int32_t i = 0; i < row.n_attr; i++) {
            int32_t id = first[i].name_id;
            if (id < 64) {
                first[i].repeat = (seen >> id) & 1;
                seen |= (uint64_t)1 << id;
            } else {
                for (int32_t j = 0; j < i && !first[i].repeat; j++) first[i].repeat = first[j].name_id == id;
            }
        }
    }
    row.name_id = intern(st->node_names, name, name_len);
    if (row.name_id < 0) return -2;
    NodeRow *out = buf_push(&st->nodes, sizeof row);
    if (!out) {
        PyErr_NoMemory();
        return -2;
    }
    *out = row;
    return 0;
}

/* One record of decode(): its rows, or none of them when it does not parse. */
static int decode_record(void *ctx, Cursor *c, Py_ssize_t index) {
    State *st = ctx;
    size_t nodes_len = st->nodes.len, ctrl_len = st->ctrl.len, data_len = st->data.len, attrs_len = st->attrs.len;
    int rc = decode_node(st, c, (int64_t)(c->p - st->base), (int32_t)index);
    if (rc < 0) {
        st->nodes.len = nodes_len;
        st->ctrl.len = ctrl_len;
        st->data.len = data_len;
        st->attrs.len = attrs_len;
    }
    return rc;
}

static PyObject *decode(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, end;
    PyObject *node_names, *attr_names;
    if (!PyArg_ParseTuple(args, "y*nnO!O!", &view, &pos, &end, &PyDict_Type, &node_names, &PyDict_Type, &attr_names))
        return NULL;
    PyObject *result = NULL;
    State st;
    memset(&st, 0, sizeof st);
    st.node_names = node_names;
    st.attr_names = attr_names;
    st.base = view.buf;
    for (int i = 0; i < NAME_CACHE_SLOTS; i++) st.cached_id[i] = -1;
    Walk walk;
    if (walk_records(&view, pos, end, decode_record, &st, &walk) == 0) {
        PyObject *nodes = buf_to_bytes(&st.nodes), *ctrl = buf_to_bytes(&st.ctrl), *data = buf_to_bytes(&st.data),
                 *attrs = buf_to_bytes(&st.attrs);
        if (nodes && ctrl && data && attrs)
            result = Py_BuildValue("(nnOOOOO)", walk.stop, walk.count, walk.error, nodes, ctrl, data, attrs);
        Py_XDECREF(nodes);
        Py_XDECREF(ctrl);
        Py_XDECREF(data);
        Py_XDECREF(attrs);
        Py_DECREF(walk.error);
    }
    PyMem_Free(st.nodes.data);
    PyMem_Free(st.ctrl.data);
    PyMem_Free(st.data.data);
    PyMem_Free(st.attrs.data);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *row_sizes(PyObject *self, PyObject *unused) {
    return Py_BuildValue("(nn)", (Py_ssize_t)sizeof(NodeRow), (Py_ssize_t)sizeof(AttrRow));
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS, "decode(buf, pos, end, node_names, attr_names) -> rows (see the module source)"},
    {"row_sizes", row_sizes, METH_NOARGS, "(sizeof NodeRow, sizeof AttrRow), to check the numpy dtypes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_columns", "Framed Chakra ET records -> rows.", -1, methods};

PyMODINIT_FUNC PyInit__columns(void) { return PyModule_Create(&module); }
