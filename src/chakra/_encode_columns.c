/*
 * chakra._encode's batch encoder (see _encode.h): a batch of nodes given as columns, one record per row.
 */
#include "_encode.h"
#include "_slots.h"

/*
 * encode_nodes: columns in, one Node payload per row out, the loop of encode_node run in C. Row i's
 * id is node_ids[i] (default i); its dependency ids are mapped through id_map when given (ids it
 * lacks are nodes not written: skipped; a dict, or int64 ranks by id with -1 for an id not written), with earlier_only those not below the row's own id are
 * dropped, and each is written once: the counts of the dropped and repeated ones are returned.
 * Attributes come as columns (name, member, values): a row's value None writes nothing; members are
 * the common scalars, checked as chakra.attrs.check_value checks them, or "raw" for fields already
 * encoded (bytes, appended as they are). Columns are written in the order given.
 */
enum { M_RAW, M_INT64, M_UINT64, M_INT32, M_UINT32, M_BOOL, M_STRING, M_DOUBLE };
#define T_ATTR 0x52 /* Node.attr = 10, length-delimited */
#define ATTR_NAME_TAG 0x0a /* AttributeProto.name = 1 */
#define SORTED_DEDUPE_FROM 64 /* longer dependency lists find repeats by sorting, not by scanning */

static const struct {
    const char *name;
    int member;
    uint8_t tag[2];
    int tag_len;
    const char *range; /* for messages, as chakra.attrs.INT_MEMBER_RANGES */
} MEMBERS[] = {
    {"raw", M_RAW, {0}, 0, NULL},
    {"int64_val", M_INT64, {0x48}, 1, "[-9223372036854775808, 9223372036854775807]"},
    {"uint64_val", M_UINT64, {0x68}, 1, "[0, 18446744073709551615]"},
    {"int32_val", M_INT32, {0x38}, 1, "[-2147483648, 2147483647]"},
    {"uint32_val", M_UINT32, {0x58}, 1, "[0, 4294967295]"},
    {"bool_val", M_BOOL, {0xd8, 0x01}, 2, NULL},
    {"string_val", M_STRING, {0xea, 0x01}, 2, NULL},
    {"double_val", M_DOUBLE, {0x19}, 1, NULL},
};
#define N_MEMBERS ((int)(sizeof(MEMBERS) / sizeof(MEMBERS[0])))

typedef struct {
    PyObject *name; /* str */
    int kind;       /* index into MEMBERS */
    Buf head;       /* the name field and the value's tag */
    PyObject *values;
} AttrColumn;

/* Raises chakra.errors.AttrKindError (a TypeError), the error set_attr raises for the same value. */
static void attr_kind_error(PyObject *message) {
    PyObject *errors = PyImport_ImportModule("chakra.errors");
    PyObject *cls = errors ? PyObject_GetAttrString(errors, "AttrKindError") : NULL;
    Py_XDECREF(errors);
    if (!cls) {
        PyErr_Clear();
        cls = Py_NewRef(PyExc_TypeError);
    }
    if (message) PyErr_SetObject(cls, message);
    Py_DECREF(cls);
    Py_XDECREF(message);
}

static int attr_int(const AttrColumn *c, PyObject *v, uint64_t *out) {
    const char *member = MEMBERS[c->kind].name;
    if (PyBool_Check(v) || !PyLong_Check(v)) {
        attr_kind_error(PyUnicode_FromFormat("attribute %R needs an integer (%s), got %R", c->name, member, v));
        return -1;
    }
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred()) return -1;
    int fits;
    switch (MEMBERS[c->kind].member) {
    case M_INT64: fits = !overflow; break;
    case M_INT32: fits = !overflow && x >= INT32_MIN && x <= INT32_MAX; break;
    case M_UINT32: fits = !overflow && x >= 0 && x <= (long long)UINT32_MAX; break;
    default: /* M_UINT64 */
        if (overflow > 0) {
            unsigned long long u = PyLong_AsUnsignedLongLong(v);
            if (u == (unsigned long long)-1 && PyErr_Occurred()) {
                PyErr_Clear();
                fits = 0;
            } else {
                *out = u;
                return 0;
            }
        } else {
            fits = !overflow && x >= 0;
        }
    }
    if (!fits) {
        attr_kind_error(
            PyUnicode_FromFormat("attribute %R: %S does not fit %s %s", c->name, v, member, MEMBERS[c->kind].range));
        return -1;
    }
    *out = (uint64_t)x;
    return 0;
}

/* The field of one attribute value: T_ATTR, the length, the name and tag, the value. */
static int put_attr_value(Buf *b, const AttrColumn *c, PyObject *v) {
    int member = MEMBERS[c->kind].member;
    if (member == M_RAW) {
        if (!PyBytes_Check(v)) {
            PyErr_Format(PyExc_TypeError, "a raw attribute value must be bytes of encoded fields, not %.80s",
                         Py_TYPE(v)->tp_name);
            return -1;
        }
        return buf_put_bytes(b, PyBytes_AS_STRING(v), (size_t)PyBytes_GET_SIZE(v));
    }
    uint8_t value[MAX_VARINT_BYTES + 8];
    size_t value_len = 0;
    const char *text = NULL;
    Py_ssize_t text_len = 0;
    if (member == M_BOOL) {
        int truth = 0;
        if (PyBool_Check(v)) {
            truth = v == Py_True;
        } else {
            PyObject *zero = PyLong_FromLong(0), *one = PyLong_FromLong(1);
            int is_zero = zero ? PyObject_RichCompareBool(v, zero, Py_EQ) : -1;
            int is_one = one && is_zero == 0 ? PyObject_RichCompareBool(v, one, Py_EQ) : 0;
            Py_XDECREF(zero);
            Py_XDECREF(one);
            if (is_zero < 0 || is_one < 0) return -1;
            if (!is_zero && !is_one) {
                attr_kind_error(PyUnicode_FromFormat("attribute %R needs a bool, got %R", c->name, v));
                return -1;
            }
            truth = is_one;
        }
        value[0] = (uint8_t)truth;
        value_len = 1;
    } else if (member == M_STRING) {
        if (!PyUnicode_Check(v)) {
            attr_kind_error(PyUnicode_FromFormat("attribute %R needs a string, got %R", c->name, v));
            return -1;
        }
        text = PyUnicode_AsUTF8AndSize(v, &text_len);
        if (!text) return -1;
        value_len = (size_t)put_varint(value, (uint64_t)text_len);
    } else if (member == M_DOUBLE) {
        double x = PyFloat_AsDouble(v);
        if (x == -1.0 && PyErr_Occurred()) return -1;
        if (PyFloat_Pack8(x, (char *)value, 1) < 0) return -1;
        value_len = 8;
    } else {
        uint64_t u;
        if (attr_int(c, v, &u) < 0) return -1;
        value_len = (size_t)put_varint(value, u);
    }
    size_t body = c->head.len + value_len + (size_t)text_len;
    if (buf_put_byte(b, T_ATTR) < 0 || put_uvarint(b, body) < 0 || buf_put_bytes(b, c->head.data, c->head.len) < 0 ||
        buf_put_bytes(b, (const char *)value, value_len) < 0)
        return -1;
    return text_len ? buf_put_bytes(b, text, (size_t)text_len) : 0;
}

static int compare_ids(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Keeps the first of each id in `a` (in place, order kept); returns how many were removed, or -1. */
static Py_ssize_t dedupe_ids(Ids *a) {
    Py_ssize_t kept = 0;
    if (a->len < SORTED_DEDUPE_FROM) {
        for (Py_ssize_t i = 0; i < a->len; i++) {
            Py_ssize_t k = 0;
            while (k < kept && a->ids[k] != a->ids[i]) k++;
            if (k == kept) a->ids[kept++] = a->ids[i];
        }
    } else {
        uint64_t *sorted = PyMem_Malloc((size_t)a->len * sizeof(uint64_t));
        char *seen = PyMem_Calloc((size_t)a->len, 1);
        if (!sorted || !seen) {
            PyMem_Free(sorted);
            PyMem_Free(seen);
            PyErr_NoMemory();
            return -1;
        }
        memcpy(sorted, a->ids, (size_t)a->len * sizeof(uint64_t));
        qsort(sorted, (size_t)a->len, sizeof(uint64_t), compare_ids);
        for (Py_ssize_t i = 0; i < a->len; i++) {
            Py_ssize_t lo = 0, hi = a->len; /* the first sorted position of this id */
            while (lo < hi) {
                Py_ssize_t mid = lo + (hi - lo) / 2;
                if (sorted[mid] < a->ids[i]) lo = mid + 1; else hi = mid;
            }
            if (!seen[lo]) {
                seen[lo] = 1;
                a->ids[kept++] = a->ids[i];
            }
        }
        PyMem_Free(sorted);
        PyMem_Free(seen);
    }
    Py_ssize_t removed = a->len - kept;
    a->len = kept;
    return removed;
}

/* A row's dependency ids, mapped and filtered (see above), into `out`. */
/* Dense ranks (id_map given as int64 values by id, -1 for an id not written), read once a batch. */
typedef struct {
    const int64_t *ranks; /* NULL: id_map is a dict or None */
    Py_ssize_t count;
} Ranks;

/* `id` mapped through `ranks`: 1 with *out set, 0 when the id is not written, -1 (TypeError) when not an int. */
static int ranked(const Ranks *r, PyObject *id, uint64_t *out) {
    if (!PyLong_Check(id)) {
        PyErr_SetString(PyExc_TypeError, "dependencies must be ints");
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(id, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow || v < 0 || v >= r->count || r->ranks[v] < 0) return 0;
    *out = (uint64_t)r->ranks[v];
    return 1;
}

static int map_deps(Ids *out, PyObject *deps, PyObject *id_map, const Ranks *ranks, int earlier_only, uint64_t own,
                    Py_ssize_t *later, Py_ssize_t *repeated) {
    out->len = 0;
    PyObject *fast = PySequence_Fast(deps, "dependencies must be a sequence of ints");
    if (!fast) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    int rc = 0;
    for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
        PyObject *target = items[i];
        if (ranks->ranks) {
            uint64_t id;
            int found = ranked(ranks, target, &id);
            if (found < 0) rc = -1;
            if (found <= 0) continue;
            if (earlier_only && id >= own) {
                (*later)++;
                continue;
            }
            rc = ids_push(out, id);
            continue;
        }
        if (id_map != Py_None) {
            target = PyDict_GetItemWithError(id_map, items[i]);
            if (!target) {
                if (PyErr_Occurred()) rc = -1;
                continue;
            }
        }
        uint64_t id;
        rc = as_u64(target, "a dependency", &id);
        if (rc == 0 && earlier_only && id >= own) {
            (*later)++;
            continue;
        }
        if (rc == 0) rc = ids_push(out, id);
    }
    Py_DECREF(fast);
    if (rc < 0) return -1;
    Py_ssize_t removed = dedupe_ids(out);
    if (removed < 0) return -1;
    *repeated += removed;
    return 0;
}

/* Python text of JSON texts already written in this batch, by the object that held them: shapes and types
 * recur as the very same objects (host traces keep one of each equal text), their text is made once. */
#define REPR_CACHE_SLOTS 1024
typedef struct {
    PyObject *key; /* owned while cached, so that its address is not reused */
    Buf text;
} ReprEntry;

static ReprEntry *repr_entry(ReprEntry *cache, PyObject *json) {
    return cache ? &cache[((uintptr_t)json >> 4) % REPR_CACHE_SLOTS] : NULL;
}

static void free_repr_cache(ReprEntry *cache) {
    if (!cache) return;
    for (int i = 0; i < REPR_CACHE_SLOTS; i++) {
        Py_XDECREF(cache[i].key);
        PyMem_Free(cache[i].text.data);
    }
    PyMem_Free(cache);
}

/* Python's str() of one JSON text into `out`: here, or by `fallback(json)` (returning str or bytes). */
static int repr_text(PyObject *json, PyObject *fallback, Buf *out) {
    Py_buffer view;
    if (PyObject_GetBuffer(json, &view, PyBUF_SIMPLE) < 0) return -1;
    out->len = 0;
    int rc = repr_json((const char *)view.buf, view.len, out);
    PyBuffer_Release(&view);
    if (rc != 0) return rc < 0 ? -1 : 0;
    out->len = 0;
    PyObject *text = PyObject_CallOneArg(fallback, json);
    const char *data;
    Py_ssize_t len;
    rc = text && text_bytes(text, &data, &len) == 0 ? buf_put_bytes(out, data, (size_t)len) : -1;
    Py_XDECREF(text);
    return rc;
}

/* An IOInfo field from (values, shapes, types) given as JSON texts, each written as Python's str()
 * of its value: here, or by `fallback(json)` (returning str or bytes) for the forms left to Python.
 * With `fields` (three interned names, read through the slots), `io` is an object whose attributes of
 * those names hold the texts. */
static int put_io_json(Buf *b, uint8_t tag, PyObject *io, PyObject *fallback, PyObject *const *fields, Buf texts[3],
                       ReprEntry *cache) {
    if (io == Py_None) return 0;
    PyObject *json[3] = {NULL};
    if (fields != NULL) {
        for (int i = 0; i < 3; i++) {
            if (!(json[i] = field(io, fields[i]))) {
                for (int k = 0; k < i; k++) Py_DECREF(json[k]);
                return -1;
            }
        }
    } else if (!PyTuple_Check(io) || PyTuple_GET_SIZE(io) != 3) {
        PyErr_SetString(PyExc_TypeError, "inputs and outputs must be None or a (values, shapes, types) tuple");
        return -1;
    } else {
        for (int i = 0; i < 3; i++) json[i] = Py_NewRef(PyTuple_GET_ITEM(io, i));
    }
    int rc = 0;
    size_t body = 0;
    const Buf *written[3];
    for (int i = 0; i < 3 && rc == 0; i++) {
        ReprEntry *entry = i > 0 ? repr_entry(cache, json[i]) : NULL; /* values differ from node to node */
        if (entry && i == 2 && written[1] == &entry->text && entry->key != json[2])
            entry = NULL; /* the shapes' entry, held for this node */
        if (entry && entry->key == json[i]) {
            written[i] = &entry->text;
        } else if (entry) {
            rc = repr_text(json[i], fallback, &entry->text);
            Py_XSETREF(entry->key, rc == 0 ? Py_NewRef(json[i]) : NULL);
            written[i] = &entry->text;
        } else {
            rc = repr_text(json[i], fallback, &texts[i]);
            written[i] = &texts[i];
        }
        if (rc == 0 && written[i]->len) {
            uint8_t scratch[MAX_VARINT_BYTES];
            body += 1 + (size_t)put_varint(scratch, (uint64_t)written[i]->len) + written[i]->len;
        }
    }
    for (int i = 0; i < 3; i++) Py_DECREF(json[i]);
    if (rc < 0) return -1;
    if (buf_put_byte(b, tag) < 0 || put_uvarint(b, body) < 0) return -1;
    for (int i = 0; i < 3; i++) {
        if (written[i]->len && put_len_field(b, IO_TAGS[i], written[i]->data, written[i]->len) < 0) return -1;
    }
    return 0;
}

/* A time column's value in whole microseconds: an int as it is, or with float_times a float rounded
 * as round() rounds (ties to even), a negative one as 0, and None as 0. */
static int micros(PyObject *value, int float_times, const char *what, uint64_t *out) {
    if (!float_times) return as_u64(value, what, out);
    if (PyLong_Check(value)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (v == -1 && PyErr_Occurred()) return -1;
        if (overflow || v >= 0) return as_u64(value, what, out);
        *out = 0;
        return 0;
    }
    if (value == Py_None) {
        *out = 0;
        return 0;
    }
    if (!PyFloat_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s must be a float, an int or None, not %.80s", what, Py_TYPE(value)->tp_name);
        return -1;
    }
    double x = nearbyint(PyFloat_AS_DOUBLE(value)); /* the default rounding mode: to nearest, ties to even */
    if (!isfinite(x)) {
        PyErr_Format(PyExc_ValueError, "%s of %R microseconds cannot be written", what, value);
        return -1;
    }
    if (x >= 18446744073709551616.0) { /* as an int would be written: modulo 2**64 (see as_u64) */
        PyObject *whole = PyLong_FromDouble(x);
        int rc = whole ? as_u64(whole, what, out) : -1;
        Py_XDECREF(whole);
        return rc;
    }
    *out = x > 0 ? (uint64_t)x : 0;
    return 0;
}

#define N_COLUMNS 8
static const char *COLUMN_NAMES[N_COLUMNS] = {
    "names", "node_types", "ctrl_deps", "data_deps", "start_time_micros", "duration_micros", "inputs", "outputs"};

static int parse_attr_columns(PyObject *attrs, Py_ssize_t rows, AttrColumn **out, Py_ssize_t *count) {
    PyObject *fast = PySequence_Fast(attrs, "attrs must be a sequence of (name, member, values) columns");
    if (!fast) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    AttrColumn *cols = PyMem_Calloc((size_t)(n ? n : 1), sizeof(AttrColumn));
    if (!cols) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    *out = cols;
    *count = 0;
    int rc = 0;
    for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
        PyObject *spec = PySequence_Fast_GET_ITEM(fast, i);
        PyObject *name, *member, *values;
        if (!PyTuple_Check(spec) || !PyArg_ParseTuple(spec, "UUO", &name, &member, &values)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "an attribute column is a (name, member, values) tuple");
            rc = -1;
            break;
        }
        AttrColumn *c = &cols[(*count)++];
        c->kind = -1;
        for (int k = 0; k < N_MEMBERS; k++)
            if (PyUnicode_CompareWithASCIIString(member, MEMBERS[k].name) == 0) c->kind = k;
        if (c->kind < 0) {
            PyErr_Format(PyExc_ValueError, "attribute %R: member %R is not one encode_nodes writes (raw, int64_val, "
                         "uint64_val, int32_val, uint32_val, bool_val, string_val, double_val)", name, member);
            rc = -1;
            break;
        }
        c->name = Py_NewRef(name);
        c->values = PySequence_Fast(values, "an attribute column's values must be a sequence");
        if (!c->values) {
            rc = -1;
            break;
        }
        if (PySequence_Fast_GET_SIZE(c->values) != rows) {
            PyErr_Format(PyExc_ValueError, "attribute column %R has %zd values for %zd nodes", name,
                         PySequence_Fast_GET_SIZE(c->values), rows);
            rc = -1;
            break;
        }
        Py_ssize_t name_len;
        const char *name_text = PyUnicode_AsUTF8AndSize(name, &name_len);
        if (!name_text || put_len_field(&c->head, ATTR_NAME_TAG, name_text, (size_t)name_len) < 0 ||
            buf_put_bytes(&c->head, (const char *)MEMBERS[c->kind].tag, (size_t)MEMBERS[c->kind].tag_len) < 0)
            rc = -1;
    }
    Py_DECREF(fast);
    return rc;
}

static void free_attr_columns(AttrColumn *cols, Py_ssize_t count) {
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_XDECREF(cols[i].name);
        Py_XDECREF(cols[i].values);
        PyMem_Free(cols[i].head.data);
    }
    PyMem_Free(cols);
}

PyObject *encode_nodes(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *keywords[] = {"names", "node_types", "ctrl_deps", "data_deps", "start_time_micros",
                               "duration_micros", "inputs", "outputs", "attrs", "node_ids", "id_map",
                               "earlier_only", "io_json", "io_fields", "float_times", NULL};
    PyObject *given[N_COLUMNS], *attrs, *node_ids = Py_None, *id_map = Py_None, *io_json = Py_None,
                                          *io_fields = Py_None;
    int earlier_only = 0, float_times = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOOOO|$OOpOOp", keywords, &given[0], &given[1], &given[2],
                                     &given[3], &given[4], &given[5], &given[6], &given[7], &attrs, &node_ids,
                                     &id_map, &earlier_only, &io_json, &io_fields, &float_times))
        return NULL;
    if (io_fields != Py_None && (io_json == Py_None || !PyTuple_Check(io_fields) || PyTuple_GET_SIZE(io_fields) != 3)) {
        PyErr_SetString(PyExc_TypeError, "io_fields must be None or three attribute names, and needs io_json");
        return NULL;
    }
    if (io_json != Py_None && !PyCallable_Check(io_json)) {
        PyErr_SetString(PyExc_TypeError, "io_json must be None or a callable (JSON text -> Python text)");
        return NULL;
    }
    Py_buffer rank_view = {0};
    Ranks ranks = {NULL, 0};
    if (id_map != Py_None && !PyDict_Check(id_map)) {
        if (PyObject_GetBuffer(id_map, &rank_view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0 || rank_view.itemsize != 8 ||
            !rank_view.format || (strcmp(rank_view.format, "q") != 0 && strcmp(rank_view.format, "l") != 0)) {
            if (rank_view.obj) PyBuffer_Release(&rank_view);
            PyErr_SetString(PyExc_TypeError, "id_map must be a dict, int64 ranks by id (a buffer of format 'q') or None");
            return NULL;
        }
        ranks.ranks = rank_view.buf;
        ranks.count = rank_view.len / 8;
    }
    PyObject *cols[N_COLUMNS + 1] = {NULL};
    AttrColumn *attr_cols = NULL;
    Py_ssize_t n_attr = 0, later = 0, repeated = 0;
    Ids ctrl = {0}, data = {0};
    Buf b = {0}, texts[3] = {{0}};
    ReprEntry *cache = NULL;
    PyObject *out = NULL, *result = NULL;
    PyObject *field_names[3] = {NULL}; /* io_fields interned: the slot cache compares names by identity */
    int n_cols = node_ids == Py_None ? N_COLUMNS : N_COLUMNS + 1;
    for (int k = 0; io_fields != Py_None && k < 3; k++) {
        PyObject *name = PyTuple_GET_ITEM(io_fields, k);
        if (!PyUnicode_Check(name)) {
            PyErr_SetString(PyExc_TypeError, "io_fields must be three attribute names (str)");
            goto done;
        }
        field_names[k] = Py_NewRef(name);
        PyUnicode_InternInPlace(&field_names[k]);
    }
    Py_ssize_t rows = 0;
    for (int k = 0; k < n_cols; k++) {
        cols[k] = PySequence_Fast(k < N_COLUMNS ? given[k] : node_ids, "a column must be a sequence");
        if (!cols[k]) goto done;
        Py_ssize_t len = PySequence_Fast_GET_SIZE(cols[k]);
        if (k == 0) {
            rows = len;
        } else if (len != rows) {
            PyErr_Format(PyExc_ValueError, "column %s has %zd rows, names has %zd",
                         k < N_COLUMNS ? COLUMN_NAMES[k] : "node_ids", len, rows);
            goto done;
        }
    }
    if (parse_attr_columns(attrs, rows, &attr_cols, &n_attr) < 0) goto done;
    out = PyList_New(rows);
    if (!out) goto done;
    if (io_json != Py_None && !(cache = PyMem_Calloc(REPR_CACHE_SLOTS, sizeof(ReprEntry)))) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < rows; i++) {
        PyObject **row[N_COLUMNS + 1];
        for (int k = 0; k < n_cols; k++) row[k] = &PySequence_Fast_ITEMS(cols[k])[i];
        uint64_t own = (uint64_t)i, node_type, start, dur;
        if ((node_ids != Py_None && as_u64(*row[N_COLUMNS], "node_id", &own) < 0) ||
            as_u64(*row[1], "node_type", &node_type) < 0 ||
            micros(*row[4], float_times, "start_time_micros", &start) < 0 ||
            micros(*row[5], float_times, "duration_micros", &dur) < 0)
            goto done;
        const char *name;
        Py_ssize_t name_len;
        if (text_bytes(*row[0], &name, &name_len) < 0) goto done;
        if (map_deps(&ctrl, *row[2], id_map, &ranks, earlier_only, own, &later, &repeated) < 0 ||
            map_deps(&data, *row[3], id_map, &ranks, earlier_only, own, &later, &repeated) < 0)
            goto done;
        b.len = 0;
        int rc = 0;
        if (own) rc = buf_put_byte(&b, T_ID) < 0 || put_uvarint(&b, own) < 0 ? -1 : 0;
        if (rc == 0 && name_len) rc = put_len_field(&b, T_NAME, name, (size_t)name_len);
        if (rc == 0 && node_type) rc = buf_put_byte(&b, T_TYPE) < 0 || put_uvarint(&b, node_type) < 0 ? -1 : 0;
        if (rc == 0) rc = put_packed_ids(&b, T_CTRL, ctrl.ids, ctrl.len);
        if (rc == 0) rc = put_packed_ids(&b, T_DATA, data.ids, data.len);
        if (rc == 0 && start) rc = buf_put_byte(&b, T_START) < 0 || put_uvarint(&b, start) < 0 ? -1 : 0;
        if (rc == 0 && dur) rc = buf_put_byte(&b, T_DUR) < 0 || put_uvarint(&b, dur) < 0 ? -1 : 0;
        if (io_json == Py_None) {
            if (rc == 0) rc = put_io(&b, T_INPUTS, *row[6]);
            if (rc == 0) rc = put_io(&b, T_OUTPUTS, *row[7]);
        } else {
            PyObject *const *fields = io_fields != Py_None ? field_names : NULL;
            if (rc == 0) rc = put_io_json(&b, T_INPUTS, *row[6], io_json, fields, texts, cache);
            if (rc == 0) rc = put_io_json(&b, T_OUTPUTS, *row[7], io_json, fields, texts, cache);
        }
        for (Py_ssize_t a = 0; a < n_attr && rc == 0; a++) {
            PyObject *v = PySequence_Fast_GET_ITEM(attr_cols[a].values, i);
            if (v != Py_None) rc = put_attr_value(&b, &attr_cols[a], v);
        }
        if (rc < 0) {
            if (!PyErr_Occurred()) PyErr_NoMemory();
            goto done;
        }
        PyObject *payload = buf_to_bytes(&b);
        if (!payload) goto done;
        PyList_SET_ITEM(out, i, payload);
    }
    result = Py_BuildValue("Onn", out, later, repeated);
done:
    Py_XDECREF(out);
    for (int k = 0; k < N_COLUMNS + 1; k++) Py_XDECREF(cols[k]);
    free_attr_columns(attr_cols, n_attr);
    PyMem_Free(ctrl.ids);
    PyMem_Free(data.ids);
    PyMem_Free(b.data);
    for (int k = 0; k < 3; k++) {
        PyMem_Free(texts[k].data);
        Py_XDECREF(field_names[k]);
    }
    free_repr_cache(cache);
    if (rank_view.obj) PyBuffer_Release(&rank_view);
    return result;
}
