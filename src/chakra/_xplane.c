/*
 * chakra._xplane: a profiler XSpace (TensorFlow's and XLA's .xplane.pb) read from its wire bytes in C, the
 * fields the TensorFlow front end reads, without a protobuf message per event (see
 * chakra/tensorflow/profile.py; the field numbers are those of schema/tensorflow/tf_subset.proto).
 *
 * plane_metadata(data, name) -> (event_names, stat_names, lines) or None: the first plane named `name`:
 * its event and stat metadata names by id, and the (offset, length) in `data` of each of its lines.
 * None when there is no such plane. ValueError for bytes that are not an XSpace as upb reads them (the
 * caller parses with protobuf then, whose error names the fault).
 *
 * line_events(data, offset, length, events, stats) -> (timestamp_ns, [(metadata_id, offset_ps,
 * duration_ps, stats), ...]): the line at data[offset:offset + length], its events whose metadata id is
 * in the set `events`, in order, each with its stats whose metadata id is in the set `stats` as
 * (metadata_id, kind, value): kind STAT_INT (an int64 or uint64 value), STAT_REF (the id of the stat
 * metadata whose name is the value), STAT_STR (a string), STAT_OTHER (a double or bytes: value None).
 * Scalars and oneofs read as upb reads them: the last one on the wire wins, a field of another wire
 * type is an unknown field.
 */
#include "_wire.h"

#include <stdlib.h>

enum { STAT_INT = 0, STAT_REF = 1, STAT_STR = 2, STAT_OTHER = 3 };

/* XSpace, XPlane, XLine, XEvent, XStat and metadata field numbers */
enum { SPACE_PLANES = 1 };
enum { PLANE_NAME = 2, PLANE_LINES = 3, PLANE_EVENT_METADATA = 4, PLANE_STAT_METADATA = 5 };
enum { LINE_TIMESTAMP_NS = 3, LINE_EVENTS = 4 };
enum { EVENT_METADATA_ID = 1, EVENT_OFFSET_PS = 2, EVENT_DURATION_PS = 3, EVENT_STATS = 4, EVENT_OCCURRENCES = 5 };
enum { STAT_METADATA_ID = 1, STAT_DOUBLE = 2, STAT_UINT64 = 3, STAT_INT64 = 4, STAT_STR_VALUE = 5, STAT_BYTES = 6,
       STAT_REF_VALUE = 7 };
enum { MAP_KEY = 1, MAP_VALUE = 2, METADATA_NAME = 2 };

static PyObject *Py_empty_tuple_ref;

/* A set of ints as a sorted array, for membership tests without an object per test. */
typedef struct {
    int64_t *ids;
    Py_ssize_t size;
} IdSet;

static int compare_ids(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* 0, or -1 with a Python error (an element that is not an int of 64 bits). */
static int id_set_of(PyObject *set, IdSet *out) {
    out->size = 0;
    out->ids = PyMem_Malloc((PySet_GET_SIZE(set) + 1) * sizeof(int64_t));
    if (out->ids == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *iterator = PyObject_GetIter(set), *key;
    while (iterator != NULL && out->size < PySet_GET_SIZE(set) && (key = PyIter_Next(iterator)) != NULL) {
        long long id = PyLong_AsLongLong(key);
        Py_DECREF(key);
        if (id == -1 && PyErr_Occurred()) break;
        out->ids[out->size++] = id;
    }
    Py_XDECREF(iterator);
    if (PyErr_Occurred()) {
        PyMem_Free(out->ids);
        out->ids = NULL;
        return -1;
    }
    qsort(out->ids, out->size, sizeof(int64_t), compare_ids);
    return 0;
}

static int id_in(const IdSet *set, int64_t id) {
    Py_ssize_t low = 0, high = set->size;
    while (low < high) {
        Py_ssize_t middle = (low + high) / 2;
        if (set->ids[middle] < id)
            low = middle + 1;
        else
            high = middle;
    }
    return low < set->size && set->ids[low] == id;
}

/* Reads one field: its number, wire type, and its value (a varint, or the span of a length-delimited
 * one); fixed-width and group fields are skipped and read as "other". 0, or -1 with c->error set. */
typedef struct {
    uint32_t number;
    int wire_type;
    uint64_t varint;
    const uint8_t *data;
    size_t len;
} Field;

static int next_field(Cursor *c, Field *f) {
    if (read_tag(c, &f->number, &f->wire_type) < 0) return -1;
    if (f->wire_type == WT_VARINT) return read_varint(c, &f->varint);
    if (f->wire_type == WT_LEN) return read_len(c, &f->data, &f->len);
    return skip_field(c, f->number, f->wire_type, 0);
}

/* A new str of UTF-8 bytes, as upb checks them; NULL with c->error set (or a Python error). */
static PyObject *string_of(Cursor *c, const uint8_t *s, size_t n) {
    if (check_string(c, s, n) < 0) return NULL;
    return PyUnicode_DecodeUTF8((const char *)s, (Py_ssize_t)n, NULL);
}

/* One map<int64, X*Metadata> entry into `names` (key -> the value's name). 0, or -1. */
static int read_metadata_entry(Cursor *outer, const uint8_t *data, size_t len, PyObject *names) {
    Cursor c = {data, data + len, NULL};
    int64_t key = 0;
    const uint8_t *name = (const uint8_t *)"";
    size_t name_len = 0;
    Field f;
    while (c.p < c.end) {
        if (next_field(&c, &f) < 0) return within(outer, &c, -1);
        if (f.number == MAP_KEY && f.wire_type == WT_VARINT) {
            key = (int64_t)f.varint;
        } else if (f.number == MAP_VALUE && f.wire_type == WT_LEN) {
            Cursor v = {f.data, f.data + f.len, NULL};
            Field g;
            name = (const uint8_t *)""; /* a repeated value message merges: its last name wins */
            name_len = 0;
            while (v.p < v.end) {
                if (next_field(&v, &g) < 0) return within(outer, &v, -1);
                if (g.number == METADATA_NAME && g.wire_type == WT_LEN) {
                    name = g.data;
                    name_len = g.len;
                }
            }
        }
    }
    PyObject *text = string_of(outer, name, name_len);
    PyObject *id = text == NULL ? NULL : PyLong_FromLongLong(key);
    int status = id == NULL ? -1 : PyDict_SetItem(names, id, text);
    Py_XDECREF(text);
    Py_XDECREF(id);
    return status;
}

static PyObject *plane_metadata(PyObject *self, PyObject *args) {
    Py_buffer view;
    const char *wanted;
    Py_ssize_t wanted_len;
    if (!PyArg_ParseTuple(args, "y*s#", &view, &wanted, &wanted_len)) return NULL;
    Cursor space = {view.buf, (const uint8_t *)view.buf + view.len, NULL};
    PyObject *out = NULL, *events = NULL, *stats = NULL, *lines = NULL;
    Field f;
    while (space.p < space.end && out == NULL) {
        if (next_field(&space, &f) < 0) goto malformed;
        if (f.number != SPACE_PLANES || f.wire_type != WT_LEN) continue;
        /* a plane: its name first (it may follow its lines on the wire) */
        Cursor plane = {f.data, f.data + f.len, NULL};
        Field g;
        const uint8_t *name = (const uint8_t *)"";
        size_t name_len = 0;
        while (plane.p < plane.end) {
            if (next_field(&plane, &g) < 0) {
                space.error = plane.error;
                goto malformed;
            }
            if (g.number == PLANE_NAME && g.wire_type == WT_LEN) {
                name = g.data;
                name_len = g.len;
            }
        }
        if (check_string(&space, name, name_len) < 0) goto malformed;
        if ((Py_ssize_t)name_len != wanted_len || memcmp(name, wanted, name_len) != 0) continue;
        events = PyDict_New();
        stats = PyDict_New();
        lines = PyList_New(0);
        if (!events || !stats || !lines) goto fail;
        plane = (Cursor){f.data, f.data + f.len, NULL};
        while (plane.p < plane.end) {
            if (next_field(&plane, &g) < 0) goto fail; /* read once already */
            if (g.wire_type != WT_LEN) continue;
            int status = 0;
            if (g.number == PLANE_EVENT_METADATA) {
                status = read_metadata_entry(&space, g.data, g.len, events);
            } else if (g.number == PLANE_STAT_METADATA) {
                status = read_metadata_entry(&space, g.data, g.len, stats);
            } else if (g.number == PLANE_LINES) {
                PyObject *span = Py_BuildValue("(nn)", (Py_ssize_t)(g.data - (const uint8_t *)view.buf),
                                               (Py_ssize_t)g.len);
                status = span == NULL ? -1 : PyList_Append(lines, span);
                Py_XDECREF(span);
            }
            if (status < 0) {
                if (space.error != NULL) goto malformed;
                goto fail;
            }
        }
        out = PyTuple_Pack(3, events, stats, lines);
        if (out == NULL) goto fail;
    }
    Py_XDECREF(events);
    Py_XDECREF(stats);
    Py_XDECREF(lines);
    PyBuffer_Release(&view);
    if (out == NULL) Py_RETURN_NONE;
    return out;
malformed:
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, space.error ? space.error : "not an XSpace");
fail:
    Py_XDECREF(events);
    Py_XDECREF(stats);
    Py_XDECREF(lines);
    PyBuffer_Release(&view);
    return NULL;
}

/* One XStat as (metadata_id, kind, value), or NULL (an error: c->error or a Python one). */
static PyObject *read_stat(Cursor *outer, const uint8_t *data, size_t len, const IdSet *wanted, int *skip) {
    Cursor c = {data, data + len, NULL};
    int64_t id = 0;
    int kind = STAT_OTHER, have = 0;
    uint64_t number = 0;
    const uint8_t *text = NULL;
    size_t text_len = 0;
    Field f;
    while (c.p < c.end) {
        if (next_field(&c, &f) < 0) {
            within(outer, &c, -1);
            return NULL;
        }
        if (f.number == STAT_METADATA_ID && f.wire_type == WT_VARINT) {
            id = (int64_t)f.varint;
        } else if ((f.number == STAT_UINT64 || f.number == STAT_INT64) && f.wire_type == WT_VARINT) {
            kind = STAT_INT;
            number = f.varint;
            have = f.number;
        } else if (f.number == STAT_REF_VALUE && f.wire_type == WT_VARINT) {
            kind = STAT_REF;
            number = f.varint;
        } else if (f.number == STAT_STR_VALUE && f.wire_type == WT_LEN) {
            kind = STAT_STR;
            text = f.data;
            text_len = f.len;
        } else if ((f.number == STAT_DOUBLE && f.wire_type == WT_I64) || (f.number == STAT_BYTES && f.wire_type == WT_LEN)) {
            kind = STAT_OTHER;
        }
    }
    if (!id_in(wanted, id)) {
        *skip = 1;
        return NULL;
    }
    PyObject *key = PyLong_FromLongLong(id);
    if (key == NULL) return NULL;
    PyObject *value;
    if (kind == STAT_INT)
        value = have == STAT_UINT64 ? PyLong_FromUnsignedLongLong(number) : PyLong_FromLongLong((int64_t)number);
    else if (kind == STAT_REF)
        value = PyLong_FromUnsignedLongLong(number);
    else if (kind == STAT_STR)
        value = string_of(outer, text, text_len);
    else
        value = Py_NewRef(Py_None);
    if (value == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    return Py_BuildValue("(NiN)", key, kind, value);
}

/* One XEvent as (metadata_id, offset_ps, duration_ps, stats), NULL with *skip set for an event not
 * wanted, NULL otherwise on error. */
static PyObject *read_event(Cursor *outer, const uint8_t *data, size_t len, const IdSet *wanted_events,
                            const IdSet *wanted_stats, int *skip) {
    Cursor c = {data, data + len, NULL};
    int64_t id = 0, offset_ps = 0, duration_ps = 0;
    Field f;
    const uint8_t *stats_from = NULL; /* the stats are read once the event is known to be wanted */
    while (c.p < c.end) {
        if (next_field(&c, &f) < 0) {
            within(outer, &c, -1);
            return NULL;
        }
        if (f.wire_type == WT_VARINT) {
            if (f.number == EVENT_METADATA_ID) id = (int64_t)f.varint;
            else if (f.number == EVENT_OFFSET_PS) offset_ps = (int64_t)f.varint;
            else if (f.number == EVENT_OCCURRENCES) offset_ps = 0; /* the other member of the oneof */
            else if (f.number == EVENT_DURATION_PS) duration_ps = (int64_t)f.varint;
        } else if (f.number == EVENT_STATS && f.wire_type == WT_LEN && stats_from == NULL) {
            stats_from = f.data - 1; /* any point before the first stat's tag: rescanned below */
        }
    }
    if (!id_in(wanted_events, id)) {
        *skip = 1;
        return NULL;
    }
    PyObject *key = PyLong_FromLongLong(id);
    if (key == NULL) return NULL;
    PyObject *stats = PyList_New(0);
    if (stats == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    c = (Cursor){data, data + len, NULL};
    while (stats_from != NULL && c.p < c.end) {
        if (next_field(&c, &f) < 0) break; /* read once already */
        if (f.number != EVENT_STATS || f.wire_type != WT_LEN) continue;
        int skip_stat = 0;
        PyObject *stat = read_stat(outer, f.data, f.len, wanted_stats, &skip_stat);
        if (stat == NULL) {
            if (skip_stat) continue;
            Py_DECREF(key);
            Py_DECREF(stats);
            return NULL;
        }
        int status = PyList_Append(stats, stat);
        Py_DECREF(stat);
        if (status < 0) {
            Py_DECREF(key);
            Py_DECREF(stats);
            return NULL;
        }
    }
    PyObject *stat_tuple = PyList_GET_SIZE(stats) ? PyList_AsTuple(stats) : Py_NewRef(Py_empty_tuple_ref);
    Py_DECREF(stats);
    if (stat_tuple == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    return Py_BuildValue("(NLLN)", key, (long long)offset_ps, (long long)duration_ps, stat_tuple);
}

static PyObject *line_events(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t offset, length;
    PyObject *wanted_events, *wanted_stats;
    if (!PyArg_ParseTuple(args, "y*nnOO", &view, &offset, &length, &wanted_events, &wanted_stats)) return NULL;
    if (offset < 0 || length < 0 || offset > view.len || length > view.len - offset || !PyAnySet_Check(wanted_events) ||
        !PyAnySet_Check(wanted_stats)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "line_events(data, offset, length, event ids, stat ids): out of range");
        return NULL;
    }
    IdSet event_ids = {NULL, 0}, stat_ids = {NULL, 0};
    if (id_set_of(wanted_events, &event_ids) < 0 || id_set_of(wanted_stats, &stat_ids) < 0) {
        PyMem_Free(event_ids.ids);
        PyBuffer_Release(&view);
        return NULL;
    }
    const uint8_t *start = (const uint8_t *)view.buf + offset;
    Cursor line = {start, start + length, NULL};
    int64_t timestamp_ns = 0;
    PyObject *events = PyList_New(0);
    Field f;
    while (events != NULL && line.p < line.end) {
        if (next_field(&line, &f) < 0) {
            PyErr_SetString(PyExc_ValueError, line.error);
            Py_CLEAR(events);
            break;
        }
        if (f.number == LINE_TIMESTAMP_NS && f.wire_type == WT_VARINT) {
            timestamp_ns = (int64_t)f.varint;
        } else if (f.number == LINE_EVENTS && f.wire_type == WT_LEN) {
            int skip = 0;
            PyObject *event = read_event(&line, f.data, f.len, &event_ids, &stat_ids, &skip);
            if (event == NULL) {
                if (skip) continue;
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, line.error ? line.error : "not an XLine");
                Py_CLEAR(events);
                break;
            }
            int status = PyList_Append(events, event);
            Py_DECREF(event);
            if (status < 0) Py_CLEAR(events);
        }
    }
    PyMem_Free(event_ids.ids);
    PyMem_Free(stat_ids.ids);
    PyBuffer_Release(&view);
    if (events == NULL) return NULL;
    return Py_BuildValue("(LN)", (long long)timestamp_ns, events);
}

static PyMethodDef methods[] = {
    {"plane_metadata", plane_metadata, METH_VARARGS, "A plane's metadata names and the spans of its lines."},
    {"line_events", line_events, METH_VARARGS, "A line's timestamp and its wanted events with their wanted stats."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_xplane", NULL, -1, methods};

PyMODINIT_FUNC PyInit__xplane(void) {
    Py_empty_tuple_ref = PyTuple_New(0);
    if (Py_empty_tuple_ref == NULL) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "STAT_INT", STAT_INT) < 0 || PyModule_AddIntConstant(m, "STAT_REF", STAT_REF) < 0 ||
        PyModule_AddIntConstant(m, "STAT_STR", STAT_STR) < 0 || PyModule_AddIntConstant(m, "STAT_OTHER", STAT_OTHER) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
