/*
 * Rewriter: Node records rewritten field by field, in one pass of C, by the rules of a Python plan
 * (chakra.share.rules); what the rules are is decided there, this file applies them.
 *
 * Per node: id, type and dependencies are kept (dependencies packed, as protobuf writes them); the
 * name becomes the plan's token (asked once per distinct name, or name and type with keep_kinds);
 * the start is moved back by shift_us; with noise, the duration and every SCALE attribute are
 * multiplied by one factor drawn from [1 - noise, 1 + noise] per node (splitmix64 of the seed, so
 * the draws do not depend on how the file is buffered); of each IOInfo only the shapes are kept, as
 * the plan rewrote them (asked once per distinct text), and a METADATA node's input values as the
 * plan rewrote its process groups; each attribute follows the rule the plan gave its name and member:
 *
 *   DROP   not written, counted;
 *   INT    an integer rewritten here (kept, a power of two, scaled, a flag) in the rule's member; a
 *          value this cannot write exactly goes to the plan as CALL does;
 *   CACHE  the plan's answer for these exact bytes, asked once per distinct attribute (up to
 *          cache_limit of them, then every time);
 *   CALL   the plan's answer, asked every time (with the node's factor).
 *
 * The first attribute of a name is the one read: a later one of a name already written is dropped.
 * Every string of the input (name, IO texts, attribute texts, bytes and doc strings) is added to the
 * `inputs` Fingerprints for the leakage check; the plan adds the attribute names it drops. Output
 * fields are written in field-number order with proto3's defaults left out, so a record is byte for
 * byte what protobuf writes for the same message.
 *
 * rewrite(buf, pos, end, keep_bounds) -> (stop, count, error, records, bounds): like
 * chakra._columns.decode, the complete records in buf[pos:end], stopping at the first that does not
 * parse (error: (record index, prefix offset, message)); records: the rewritten records, framed;
 * bounds: with keep_bounds, the end offset in records of each (int64), else None.
 * first_start(buf, pos, end) -> (stop, count, error, start): the smallest non-zero start_time_micros.
 */
#include <math.h>

#include "_rewrite.h"

/* -- counting and asking the plan ----------------------------------------------------------------- */

int count(Rewriter *rw, int64_t id) {
    if (id < 0) return 0;
    if ((size_t)id >= rw->counts_len) {
        size_t len = (size_t)id + 64;
        int64_t *counts = PyMem_Realloc(rw->counts, len * sizeof(int64_t));
        if (!counts) {
            PyErr_NoMemory();
            return -1;
        }
        memset(counts + rw->counts_len, 0, (len - rw->counts_len) * sizeof(int64_t));
        rw->counts = counts;
        rw->counts_len = len;
    }
    rw->counts[id]++;
    return 0;
}

/* An entry of the plan: (bytes or None, tuple of counter ids). Counts the ids; *out is borrowed. */
int apply_entry(Rewriter *rw, PyObject *entry, PyObject **out) {
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2 || !PyTuple_Check(PyTuple_GET_ITEM(entry, 1)) ||
        (PyTuple_GET_ITEM(entry, 0) != Py_None && !PyBytes_Check(PyTuple_GET_ITEM(entry, 0)))) {
        PyErr_SetString(PyExc_TypeError, "the plan's entries are (bytes or None, tuple of counter ids)");
        return -1;
    }
    PyObject *tally = PyTuple_GET_ITEM(entry, 1);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tally); i++) {
        long long id = PyLong_AsLongLong(PyTuple_GET_ITEM(tally, i));
        if (id == -1 && PyErr_Occurred()) return -1;
        if (count(rw, id) < 0) return -1;
    }
    *out = PyTuple_GET_ITEM(entry, 0) == Py_None ? NULL : PyTuple_GET_ITEM(entry, 0);
    return 0;
}

PyObject *call_plan(Rewriter *rw, const char *method, const char *format, ...) {
    va_list args;
    va_start(args, format);
    PyObject *arguments = Py_VaBuildValue(format, args);
    va_end(args);
    if (!arguments) return NULL;
    PyObject *callable = PyObject_GetAttrString(rw->plan, method);
    PyObject *result = callable ? PyObject_CallObject(callable, arguments) : NULL;
    Py_XDECREF(callable);
    Py_DECREF(arguments);
    return result;
}

/* The value memo `which` holds for [s, s+n) (hash h), borrowed, or NULL. */
static PyObject *memo_get(Rewriter *rw, int which, uint64_t h, const uint8_t *s, size_t n) {
    const MemoSlot *slot = rw->memos[which] ? &rw->memos[which][h & (MEMO_SLOTS - 1)] : NULL;
    if (!slot || !slot->value || slot->hash != h || slot->len != n || memcmp(slot->bytes, s, n) != 0) return NULL;
    return slot->value;
}

static int memo_put(Rewriter *rw, int which, uint64_t h, const uint8_t *s, size_t n, PyObject *value) {
    if (n > MEMO_BYTES) return 0;
    if (!rw->memos[which]) {
        rw->memos[which] = PyMem_Calloc(MEMO_SLOTS, sizeof(MemoSlot));
        if (!rw->memos[which]) {
            PyErr_NoMemory();
            return -1;
        }
    }
    MemoSlot *slot = &rw->memos[which][h & (MEMO_SLOTS - 1)];
    Py_INCREF(value);
    Py_XSETREF(slot->value, value);
    slot->hash = h;
    slot->len = (uint32_t)n;
    memcpy(slot->bytes, s, n);
    return 0;
}

/* The value for the bytes [s, s+n): from memo `which`, from `cache`, or the plan's answer (kept in
 * the cache while under the limit; `collect`, when given, is the attribute whose texts go to the
 * inputs first). New reference. */
PyObject *cached_entry(Rewriter *rw, int which, PyObject *cache, const uint8_t *s, size_t n, const char *method,
                       const Attr *collect) {
    uint64_t h = n <= MEMO_BYTES ? fp_hash(s, n) : 0;
    PyObject *entry = n <= MEMO_BYTES ? memo_get(rw, which, h, s, n) : NULL;
    if (entry) {
        Py_INCREF(entry);
        return entry;
    }
    PyObject *key = PyBytes_FromStringAndSize((const char *)s, (Py_ssize_t)n);
    if (!key) return NULL;
    entry = PyDict_GetItemWithError(cache, key);
    if (entry) {
        Py_INCREF(entry);
    } else if (!PyErr_Occurred() && !(collect && collect_attr(rw, collect) < 0)) {
        entry = collect ? call_plan(rw, method, "(Od)", key, 1.0) : call_plan(rw, method, "(O)", key);
        if (entry && PyDict_GET_SIZE(cache) < rw->cache_limit && PyDict_SetItem(cache, key, entry) < 0) Py_CLEAR(entry);
    }
    Py_DECREF(key);
    if (entry && memo_put(rw, which, h, s, n, entry) < 0) Py_CLEAR(entry);
    return entry;
}

/* -- one node ------------------------------------------------------------------------------------- */

/* Write one side's IOInfo: the plan's process groups (a METADATA node's inputs) and shapes. */
static int write_io(Rewriter *rw, const IoTexts *io, int groups, uint64_t tag, Buf *out) {
    PyObject *values_entry = NULL, *shapes_entry = NULL, *values = NULL, *shapes = NULL;
    int rc = -1;
    if (groups && io->values.n) {
        values_entry = call_plan(rw, "groups", "(y#)", (const char *)io->values.p, (Py_ssize_t)io->values.n);
        if (!values_entry || apply_entry(rw, values_entry, &values) < 0) goto done;
    } else if (io->values.n && count(rw, rw->fixed[C_IO_VALUES]) < 0) {
        goto done;
    }
    if (io->types.n && count(rw, rw->fixed[C_IO_TYPES]) < 0) goto done;
    if (io->shapes.n) {
        shapes_entry = cached_entry(rw, MEMO_SHAPES, rw->shapes, io->shapes.p, io->shapes.n, "shapes", NULL);
        if (!shapes_entry || apply_entry(rw, shapes_entry, &shapes) < 0) goto done;
    }
    if (values || shapes) {
        size_t values_len = values ? (size_t)PyBytes_GET_SIZE(values) : 0;
        size_t shapes_len = shapes ? (size_t)PyBytes_GET_SIZE(shapes) : 0;
        size_t len = (values_len ? 1 + varint_size(values_len) + values_len : 0) +
                     (shapes ? 1 + varint_size(shapes_len) + shapes_len : 0);
        if (put_u64(out, tag) < 0 || put_u64(out, len) < 0 ||
            (values_len && put_len_field(out, IO_VALUES_TAG, PyBytes_AS_STRING(values), values_len) < 0) ||
            (shapes && put_len_field(out, IO_SHAPES_TAG, PyBytes_AS_STRING(shapes), shapes_len) < 0)) {
            PyErr_NoMemory();
            goto done;
        }
    }
    rc = 0;
done:
    Py_XDECREF(values_entry);
    Py_XDECREF(shapes_entry);
    return rc;
}

static double next_factor(Rewriter *rw) {
    uint64_t z = (rw->rng += SPLITMIX_STEP);
    z = (z ^ (z >> 30)) * SPLITMIX_MIX1;
    z = (z ^ (z >> 27)) * SPLITMIX_MIX2;
    z ^= z >> 31;
    double unit = (double)(z >> 11) * UNIT_53;
    return 1.0 + rw->noise * (2.0 * unit - 1.0);
}

/* The node's token: the plan's, once per distinct name (and type, with keep_kinds). New reference. */
static PyObject *token_for(Rewriter *rw, const uint8_t *name, size_t name_len, int32_t type) {
    rw->key.len = 0;
    if ((rw->keep_kinds && put_raw(&rw->key, &type, sizeof type) < 0) || put_raw(&rw->key, name, name_len) < 0) {
        PyErr_NoMemory();
        return NULL;
    }
    const uint8_t *k = (const uint8_t *)rw->key.data;
    size_t k_len = rw->key.len;
    uint64_t h = fp_hash(k, k_len);
    PyObject *token = memo_get(rw, MEMO_NAMES, h, k, k_len);
    if (token) {
        Py_INCREF(token);
        return token;
    }
    PyObject *key = PyBytes_FromStringAndSize((const char *)k, (Py_ssize_t)k_len);
    if (!key) return NULL;
    token = PyDict_GetItemWithError(rw->names, key);
    if (token) {
        Py_INCREF(token);
    } else if (!PyErr_Occurred() && fp_add_soon(rw->inputs, name, name_len) == 0) {
        token = call_plan(rw, "name", "(y#i)", (const char *)name, (Py_ssize_t)name_len, type);
        if (token && !PyBytes_Check(token)) {
            PyErr_SetString(PyExc_TypeError, "the plan's tokens are bytes");
            Py_CLEAR(token);
        }
        if (token && PyDict_SetItem(rw->names, key, token) < 0) Py_CLEAR(token);
    }
    Py_DECREF(key);
    if (token && memo_put(rw, MEMO_NAMES, h, k, k_len, token) < 0) Py_CLEAR(token);
    return token;
}

/* Rewrite one Node payload into rw->payload. Returns 0, -1 on a wire error (c->error set) or -2 on a
 * Python error. */
static int rewrite_node(Rewriter *rw, Cursor *c) {
    uint64_t id = 0, start = 0, dur = 0;
    int32_t type = 0;
    const uint8_t *name = (const uint8_t *)"";
    size_t name_len = 0;
    IoTexts io[2];
    memset(io, 0, sizeof io);
    rw->ctrl.len = rw->data.len = rw->attr_spans.len = 0;
    while (c->p < c->end) {
        uint32_t field;
        int wt;
        uint64_t v;
        if (read_tag(c, &field, &wt) < 0) return -1;
        if (wt == WT_VARINT && (field == 1 || field == 3 || field == 6 || field == 7)) {
            if (read_varint(c, &v) < 0) return -1;
            if (field == 1) id = v;
            else if (field == 3) type = (int32_t)(uint32_t)v;
            else if (field == 6) start = v;
            else dur = v;
        } else if ((field == 4 || field == 5) && (wt == WT_VARINT || wt == WT_LEN)) {
            Buf *deps = field == 4 ? &rw->ctrl : &rw->data;
            Cursor packed = *c; /* one varint, or a packed run of them */
            if (wt == WT_LEN) {
                const uint8_t *s;
                size_t n;
                if (read_len(c, &s, &n) < 0) return -1;
                packed = (Cursor){s, s + n, NULL};
            }
            while (packed.p < packed.end) {
                if (read_varint(&packed, &v) < 0) return within(c, &packed, -1);
                if (put_raw(deps, &v, sizeof v) < 0) {
                    PyErr_NoMemory();
                    return -2;
                }
                if (wt == WT_VARINT) break;
            }
            if (wt == WT_VARINT) c->p = packed.p;
        } else if (field == 2 && wt == WT_LEN) {
            if (read_len(c, &name, &name_len) < 0 || check_string(c, name, name_len) < 0) return -1;
        } else if ((field == 8 || field == 9) && wt == WT_LEN) {
            const uint8_t *s;
            size_t n;
            if (read_len(c, &s, &n) < 0) return -1;
            IoTexts *texts = &io[field - 8];
            if (read_io(c, s, n, texts) < 0) return -1;
            if (fp_add_soon(rw->inputs, texts->values.p, texts->values.n) < 0 ||
                fp_add_soon(rw->inputs, texts->shapes.p, texts->shapes.n) < 0 ||
                fp_add_soon(rw->inputs, texts->types.p, texts->types.n) < 0)
                return -2;
        } else if (field == 10 && wt == WT_LEN) {
            Span span;
            if (read_len(c, &span.p, &span.n) < 0) return -1;
            if (put_raw(&rw->attr_spans, &span, sizeof span) < 0) {
                PyErr_NoMemory();
                return -2;
            }
        } else if (skip_field(c, field, wt, 0) < 0) {
            return -1;
        }
    }
    double factor = rw->noise > 0 ? next_factor(rw) : 1.0;
    if (++rw->generation == 0) { /* wrapped: forget every node's names */
        memset(rw->written, 0, rw->written_len * sizeof(uint32_t));
        rw->generation = 1;
    }
    Buf *out = &rw->payload;
    out->len = 0;
    PyObject *token = token_for(rw, name, name_len, type);
    if (!token) return -2;
    int rc = (id && put_varint_field(out, T_ID, id) < 0) ||
             put_len_field(out, T_NAME, PyBytes_AS_STRING(token), (size_t)PyBytes_GET_SIZE(token)) < 0 ||
             (type && put_varint_field(out, T_TYPE, (uint64_t)(int64_t)type) < 0) ||
             put_packed(out, T_CTRL, &rw->ctrl) < 0 || put_packed(out, T_DATA, &rw->data) < 0;
    Py_DECREF(token);
    if (rc) {
        PyErr_NoMemory();
        return -2;
    }
    if (start && start != rw->shift_us && put_varint_field(out, T_START, start - rw->shift_us) < 0) {
        PyErr_NoMemory();
        return -2;
    }
    if (rw->noise > 0 && dur) {
        if (count(rw, rw->fixed[C_DURATION]) < 0) return -2;
        double scaled = nearbyint((double)dur * factor);
        dur = scaled >= UINT64_LIMIT ? UINT64_MAX : (uint64_t)scaled;
    }
    if (dur && put_varint_field(out, T_DUR, dur) < 0) {
        PyErr_NoMemory();
        return -2;
    }
    if (write_io(rw, &io[0], type == METADATA_NODE, T_INPUTS, out) < 0 || write_io(rw, &io[1], 0, T_OUTPUTS, out) < 0)
        return -2;
    const Span *spans = (const Span *)rw->attr_spans.data;
    size_t n_attrs = rw->attr_spans.len / sizeof(Span);
    for (size_t i = 0; i < n_attrs; i++) {
        int done = rewrite_attr(rw, c, spans[i].p, spans[i].n, (int)(i < RULE_SLOTS ? i : RULE_SLOTS), factor, out);
        if (done < 0) return done;
    }
    return 0;
}

/* -- the Python type ------------------------------------------------------------------------------ */

static int Rewriter_init(Rewriter *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"plan", "inputs", "shift_us", "noise", "seed", "keep_kinds", "counters", "cache_limit",
                               NULL};
    PyObject *plan, *inputs, *counters;
    unsigned long long shift_us, seed;
    double noise;
    int keep_kinds;
    Py_ssize_t cache_limit;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!KdKpOn", keywords, &plan, &FingerprintsType, &inputs, &shift_us,
                                     &noise, &seed, &keep_kinds, &counters, &cache_limit))
        return -1;
    if (!PyTuple_Check(counters) || PyTuple_GET_SIZE(counters) != N_FIXED) {
        PyErr_Format(PyExc_TypeError, "counters: a tuple of %d counter ids", N_FIXED);
        return -1;
    }
    for (int i = 0; i < N_FIXED; i++) {
        long id = PyLong_AsLong(PyTuple_GET_ITEM(counters, i));
        if (id == -1 && PyErr_Occurred()) return -1;
        self->fixed[i] = (int32_t)id;
    }
    Py_INCREF(plan);
    Py_XSETREF(self->plan, plan);
    Py_INCREF(inputs);
    Py_XSETREF(self->inputs, (Fingerprints *)inputs);
    Py_XSETREF(self->names, PyDict_New());
    Py_XSETREF(self->shapes, PyDict_New());
    Py_XSETREF(self->attrs, PyDict_New());
    Py_XSETREF(self->rules, PyDict_New());
    if (!self->names || !self->shapes || !self->attrs || !self->rules) return -1;
    self->shift_us = shift_us;
    self->noise = noise;
    self->rng = seed;
    self->keep_kinds = keep_kinds;
    self->cache_limit = cache_limit;
    return 0;
}

static void Rewriter_dealloc(Rewriter *self) {
    Py_XDECREF(self->plan);
    Py_XDECREF(self->inputs);
    Py_XDECREF(self->names);
    Py_XDECREF(self->shapes);
    Py_XDECREF(self->attrs);
    Py_XDECREF(self->rules);
    for (int m = 0; m < 3; m++) {
        for (size_t i = 0; self->memos[m] && i < MEMO_SLOTS; i++) Py_XDECREF(self->memos[m][i].value);
        PyMem_Free(self->memos[m]);
    }
    PyMem_Free(self->counts);
    PyMem_Free(self->written);
    PyMem_Free(self->payload.data);
    PyMem_Free(self->ctrl.data);
    PyMem_Free(self->data.data);
    PyMem_Free(self->attr_spans.data);
    PyMem_Free(self->key.data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* What rewrite() builds: the framed records, and each one's end when asked. */
typedef struct {
    Rewriter *rw;
    int keep_bounds;
    Buf out, bounds;
} Rewriting;

static int rewrite_record(void *ctx, Cursor *c, Py_ssize_t index) {
    Rewriting *w = ctx;
    int rc = rewrite_node(w->rw, c);
    if (rc < 0) return rc;
    const Buf *payload = &w->rw->payload;
    if (put_u64(&w->out, payload->len) < 0 || put_raw(&w->out, payload->data, payload->len) < 0) {
        PyErr_NoMemory();
        return -2;
    }
    int64_t record_end = (int64_t)w->out.len;
    if (w->keep_bounds && put_raw(&w->bounds, &record_end, sizeof record_end) < 0) {
        PyErr_NoMemory();
        return -2;
    }
    return 0;
}

static PyObject *Rewriter_rewrite(Rewriter *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, end;
    Rewriting w = {self, 0, {0}, {0}};
    if (!PyArg_ParseTuple(args, "y*nnp", &view, &pos, &end, &w.keep_bounds)) return NULL;
    PyObject *result = NULL;
    Walk walk;
    int walked = walk_records(&view, pos, end, rewrite_record, &w, &walk);
    /* the texts added for later lie in view: in the tables before it is released */
    if (fp_flush(self->inputs) < 0 && walked == 0) {
        Py_DECREF(walk.error);
        walked = -1;
    }
    if (walked == 0) {
        PyObject *records = buf_to_bytes(&w.out);
        PyObject *ends = w.keep_bounds ? buf_to_bytes(&w.bounds) : (Py_INCREF(Py_None), Py_None);
        if (records && ends) result = Py_BuildValue("(nnOOO)", walk.stop, walk.count, walk.error, records, ends);
        Py_XDECREF(records);
        Py_XDECREF(ends);
        Py_DECREF(walk.error);
    }
    PyMem_Free(w.out.data);
    PyMem_Free(w.bounds.data);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *Rewriter_counts(Rewriter *self, PyObject *unused) {
    PyObject *list = PyList_New((Py_ssize_t)self->counts_len);
    for (size_t i = 0; list && i < self->counts_len; i++) {
        PyObject *v = PyLong_FromLongLong(self->counts[i]);
        if (!v) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
    return list;
}

static PyMethodDef Rewriter_methods[] = {
    {"rewrite", (PyCFunction)Rewriter_rewrite, METH_VARARGS,
     "rewrite(buf, pos, end, keep_bounds) -> (stop, count, error, records, bounds) (see the module source)"},
    {"counts", (PyCFunction)Rewriter_counts, METH_NOARGS, "counts() -> [int]: how often each counter id was counted"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject RewriterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "chakra.share._native.Rewriter",
    .tp_doc = "Rewriter(plan, inputs, shift_us, noise, seed, keep_kinds, counters, cache_limit): see the source.",
    .tp_basicsize = sizeof(Rewriter),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Rewriter_init,
    .tp_dealloc = (destructor)Rewriter_dealloc,
    .tp_methods = Rewriter_methods,
};

/* -- the first start ------------------------------------------------------------------------------ */

/* The start of one record, folded into the smallest non-zero one so far (*ctx). */
static int record_start(void *ctx, Cursor *c, Py_ssize_t index) {
    uint64_t *first = ctx, start = 0;
    while (c->p < c->end) {
        uint32_t field;
        int wt;
        if (read_tag(c, &field, &wt) < 0) return -1;
        int rc = field == 6 && wt == WT_VARINT ? read_varint(c, &start) : skip_field(c, field, wt, 0);
        if (rc < 0) return -1;
    }
    if (start && (!*first || start < *first)) *first = start;
    return 0;
}

PyObject *first_start(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, end;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &pos, &end)) return NULL;
    uint64_t first = 0;
    Walk walk;
    PyObject *result = NULL;
    if (walk_records(&view, pos, end, record_start, &first, &walk) == 0) {
        result = Py_BuildValue("(nnOK)", walk.stop, walk.count, walk.error, (unsigned long long)first);
        Py_DECREF(walk.error);
    }
    PyBuffer_Release(&view);
    return result;
}
