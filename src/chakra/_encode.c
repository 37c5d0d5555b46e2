/*
 * chakra._encode: Node records written as protobuf writes them, for producers' hot paths (see
 * chakra/wire.py, which exposes these). Fields in number order, proto3 defaults omitted, repeated ids
 * packed, integers as 64-bit two's complement varints (Python ints taken modulo 2**64, as protobuf's
 * Python runtime refuses and chakra.io never writes larger ones). tests/test_wire.py compares every
 * field with protobuf's own serialization.
 *
 * Two helpers of the batch encoder's callers (chakra/pytorch/encode.py):
 *
 * dense_ranks(ids) -> bytearray or None: each id's position in the list (the last, for an id given twice)
 * as int64 at the id's index, -1 at the others, the ids being ints from 0 to at most DENSE_SPARE_FACTOR
 * times their count (plus DENSE_SPARE_IDS); None for any other list: the caller maps them in a dict.
 * The encoder reads such ranks where dependencies are renumbered (an array read, not a dict's lookup).
 *
 * span_us(starts, durations) -> float, None or NotImplemented: from the least start to the greatest
 * start + duration over the rows whose start is not None, as max(map(add, s, d)) - min(s) of those rows
 * computes it (a NaN first stays, as max() and min() keep it); None when no row has a start;
 * NotImplemented when a value is not a float (an int's sum would stay an int): the caller computes it.
 *
 * count_rows(columns, skip) -> dict or None: how many times each row of the columns (a tuple of lists of
 * one length) occurs, as Counter(zip(*columns)) counts it (keys the rows as tuples, in the order they
 * first occur), leaving out the rows whose value in column `skip` is None (-1: none left out); None for
 * more than COUNT_ROWS_MAX distinct rows: the caller counts them. The rows are compared without making
 * a tuple of each: a batch's node kinds, a trace's threads. The lists are read as they are, as zip() reads
 * them: a comparison that shortens one ends the rows there.
 */
#include "_encode.h"

/* A packed repeated uint64 field of the ids in `deps`, omitted when empty. */
static int put_packed(Buf *b, uint8_t tag, PyObject *deps) {
    PyObject *fast = PySequence_Fast(deps, "dependencies must be a sequence of ints");
    if (!fast) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    Ids ids = {0};
    int rc = 0;
    for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
        uint64_t id;
        rc = as_u64(items[i], "a dependency", &id);
        if (rc == 0) rc = ids_push(&ids, id);
    }
    if (rc == 0) rc = put_packed_ids(b, tag, ids.ids, ids.len);
    PyMem_Free(ids.ids);
    Py_DECREF(fast);
    return rc;
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
            rc = buf_put_bytes(b, PyBytes_AS_STRING(items[i]), (size_t)PyBytes_GET_SIZE(items[i]));
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
    if (node_id) rc = buf_put_byte(&b, T_ID) < 0 || put_uvarint(&b, node_id) < 0 ? -1 : 0;
    if (rc == 0 && name_len) rc = put_len_field(&b, T_NAME, name, (size_t)name_len);
    if (rc == 0 && node_type) rc = buf_put_byte(&b, T_TYPE) < 0 || put_uvarint(&b, node_type) < 0 ? -1 : 0;
    if (rc == 0) rc = put_packed(&b, T_CTRL, args[3]);
    if (rc == 0) rc = put_packed(&b, T_DATA, args[4]);
    if (rc == 0 && start) rc = buf_put_byte(&b, T_START) < 0 || put_uvarint(&b, start) < 0 ? -1 : 0;
    if (rc == 0 && dur) rc = buf_put_byte(&b, T_DUR) < 0 || put_uvarint(&b, dur) < 0 ? -1 : 0;
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

static PyObject *python_repr_of_json(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    Buf out = {0};
    int rc = repr_json((const char *)view.buf, view.len, &out);
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

static PyObject *frame_records(PyObject *self, PyObject *payloads) {
    (void)self;
    if (!PyList_Check(payloads)) {
        PyErr_SetString(PyExc_TypeError, "frame_records() takes a list of bytes");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(payloads), total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *payload = PyList_GET_ITEM(payloads, i);
        if (!PyBytes_Check(payload)) {
            PyErr_Format(PyExc_TypeError, "payload %zd is not bytes", i);
            return NULL;
        }
        Py_ssize_t size = PyBytes_GET_SIZE(payload);
        if (size == 0) { /* a zero-length record reads as the end of the file upstream */
            PyErr_Format(PyExc_ValueError, "payload %zd is empty", i);
            return NULL;
        }
        total += size + MAX_PREFIX_BYTES;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) return NULL;
    uint8_t *at = (uint8_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *payload = PyList_GET_ITEM(payloads, i);
        Py_ssize_t size = PyBytes_GET_SIZE(payload);
        at += put_varint(at, (uint64_t)size);
        memcpy(at, PyBytes_AS_STRING(payload), size);
        at += size;
    }
    if (_PyBytes_Resize(&out, at - (uint8_t *)PyBytes_AS_STRING(out)) < 0) return NULL;
    return out;
}

/* Ids up to this many times their count (plus a margin for a short list) are dense enough to index. */
#define DENSE_SPARE_FACTOR 4
#define DENSE_SPARE_IDS 4096

static PyObject *dense_ranks(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ids;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &ids)) return NULL;
    Py_ssize_t size = PyList_GET_SIZE(ids);
    long long limit = (long long)size * DENSE_SPARE_FACTOR + DENSE_SPARE_IDS, top = -1;
    for (Py_ssize_t i = 0; i < size; i++) {
        PyObject *id = PyList_GET_ITEM(ids, i);
        if (!PyLong_CheckExact(id)) Py_RETURN_NONE;
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(id, &overflow);
        if (v == -1 && PyErr_Occurred()) return NULL;
        if (overflow || v < 0 || v > limit) Py_RETURN_NONE;
        if (v > top) top = v;
    }
    PyObject *out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)((top + 1) * 8));
    if (!out) return NULL;
    int64_t *ranks = (int64_t *)PyByteArray_AS_STRING(out);
    for (long long k = 0; k <= top; k++) ranks[k] = -1;
    for (Py_ssize_t i = 0; i < size; i++) ranks[PyLong_AsLongLong(PyList_GET_ITEM(ids, i))] = (int64_t)i;
    return out;
}

static PyObject *span_us(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *starts, *durations;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &starts, &PyList_Type, &durations)) return NULL;
    Py_ssize_t size = PyList_GET_SIZE(starts);
    if (PyList_GET_SIZE(durations) != size) {
        PyErr_SetString(PyExc_ValueError, "span_us takes lists of one length");
        return NULL;
    }
    int any = 0;
    double least = 0.0, greatest = 0.0;
    for (Py_ssize_t i = 0; i < size; i++) {
        PyObject *start = PyList_GET_ITEM(starts, i), *duration = PyList_GET_ITEM(durations, i);
        if (start == Py_None) continue;
        if (!PyFloat_CheckExact(start) || !PyFloat_CheckExact(duration)) Py_RETURN_NOTIMPLEMENTED;
        double at = PyFloat_AS_DOUBLE(start), end = at + PyFloat_AS_DOUBLE(duration);
        if (!any) {
            least = at, greatest = end, any = 1;
            continue;
        }
        if (at < least) least = at;
        if (end > greatest) greatest = end;
    }
    if (!any) Py_RETURN_NONE;
    return PyFloat_FromDouble(greatest - least);
}

#define COUNT_ROWS_MAX 64
#define COUNT_COLUMNS_MAX 8

/* Whether the cells of a row are `row`: identical objects first, then equal values. */
static int same_row(PyObject *const *cells, Py_ssize_t n_cols, PyObject *const *row) {
    Py_ssize_t c = 0;
    while (c < n_cols && cells[c] == row[c]) c++;
    for (; c < n_cols; c++) {
        int same = PyObject_RichCompareBool(cells[c], row[c], Py_EQ);
        if (same <= 0) return same;
    }
    return 1;
}

static PyObject *count_rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *given, *columns[COUNT_COLUMNS_MAX];
    Py_ssize_t skip;
    if (!PyArg_ParseTuple(args, "O!n", &PyTuple_Type, &given, &skip)) return NULL;
    Py_ssize_t n_cols = PyTuple_GET_SIZE(given), size = 0;
    if (n_cols < 1 || n_cols > COUNT_COLUMNS_MAX || skip < -1 || skip >= n_cols) {
        PyErr_Format(PyExc_ValueError, "count_rows takes 1 to %d columns, and a column or -1 to skip", COUNT_COLUMNS_MAX);
        return NULL;
    }
    for (Py_ssize_t c = 0; c < n_cols; c++) {
        PyObject *column = PyTuple_GET_ITEM(given, c);
        if (!PyList_Check(column) || (c > 0 && PyList_GET_SIZE(column) != size)) {
            PyErr_SetString(PyExc_ValueError, "count_rows takes lists of one length");
            return NULL;
        }
        size = PyList_GET_SIZE(column);
        columns[c] = column; /* borrowed: `given` holds them */
    }
    /* a comparison runs Python code, which may change the lists: each row's cells are held while it is
     * compared, and the rows are read up to the shortest list's end then, as zip() reads them (a copy of
     * every column was a list of pointers per node more at a whole trace's peak) */
    PyObject *rows[COUNT_ROWS_MAX][COUNT_COLUMNS_MAX], *cells[COUNT_COLUMNS_MAX], *out = NULL;
    Py_ssize_t counts[COUNT_ROWS_MAX], distinct = 0, last = 0;
    for (Py_ssize_t i = 0;; i++) {
        Py_ssize_t c = 0;
        while (c < n_cols && i < PyList_GET_SIZE(columns[c])) c++;
        if (c < n_cols) break;
        for (c = 0; c < n_cols; c++) cells[c] = Py_NewRef(PyList_GET_ITEM(columns[c], i));
        Py_ssize_t k = -1;
        int failed = 0;
        if (skip < 0 || cells[skip] != Py_None) {
            /* the row of the last match first: rows repeat in runs */
            for (Py_ssize_t tried = 0; tried < distinct && k < 0 && !failed; tried++) {
                Py_ssize_t at = (last + tried) % distinct;
                int same = same_row(cells, n_cols, rows[at]);
                if (same < 0) failed = 1;
                else if (same) k = at;
            }
            if (!failed && k < 0 && distinct < COUNT_ROWS_MAX) {
                k = distinct++;
                for (c = 0; c < n_cols; c++) rows[k][c] = Py_NewRef(cells[c]);
                counts[k] = 0;
            }
            if (k >= 0) {
                counts[k]++;
                last = k;
            }
        } else {
            k = 0; /* left out */
        }
        for (c = 0; c < n_cols; c++) Py_DECREF(cells[c]);
        if (failed) goto done;
        if (k < 0) { /* more distinct rows than kept: the caller counts them */
            out = Py_NewRef(Py_None);
            goto done;
        }
    }
    out = PyDict_New();
    for (Py_ssize_t k = 0; out != NULL && k < distinct; k++) {
        PyObject *key = PyTuple_New(n_cols), *count = PyLong_FromSsize_t(counts[k]);
        for (Py_ssize_t c = 0; key != NULL && c < n_cols; c++) PyTuple_SET_ITEM(key, c, Py_NewRef(rows[k][c]));
        if (key == NULL || count == NULL || PyDict_SetItem(out, key, count) < 0) Py_CLEAR(out);
        Py_XDECREF(key);
        Py_XDECREF(count);
    }
done:
    for (Py_ssize_t k = 0; k < distinct; k++)
        for (Py_ssize_t c = 0; c < n_cols; c++) Py_DECREF(rows[k][c]);
    return out;
}

static PyMethodDef methods[] = {
    {"encode_node", (PyCFunction)(void (*)(void))encode_node, METH_FASTCALL,
     "encode_node(node_id, name, node_type, ctrl_deps, data_deps, start_time_micros, duration_micros, "
     "inputs, outputs, attrs) -> bytes of the Node message"},
    {"encode_nodes", (PyCFunction)(void (*)(void))encode_nodes, METH_VARARGS | METH_KEYWORDS,
     "encode_nodes(names, node_types, ctrl_deps, data_deps, start_time_micros, duration_micros, inputs, "
     "outputs, attrs, *, node_ids=None, id_map=None, earlier_only=False, io_json=None, io_fields=None, "
     "float_times=False) -> (payloads, later, repeated)"},
    {"python_repr_of_json", python_repr_of_json, METH_O,
     "python_repr_of_json(json_text) -> UTF-8 bytes of str(the parsed value), or None for a form left to Python"},
    {"dense_ranks", dense_ranks, METH_VARARGS, "dense_ranks(ids) -> int64 position of each id at its index (-1 elsewhere), or None"},
    {"span_us", span_us, METH_VARARGS, "span_us(starts, durations) -> from the least start to the greatest end (None: no start)"},
    {"count_rows", count_rows, METH_VARARGS, "count_rows(columns, skip) -> {row: count} in first-seen order, or None"},
    {"varint", varint, METH_O, "varint(value) -> base-128 varint bytes (negative values as 64-bit two's complement)"},
    {"frame_records", frame_records, METH_O,
     "frame_records(payloads) -> the records, each a varint length and its payload (ValueError for an empty one)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "chakra._encode", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__encode(void) { return PyModule_Create(&module); }
