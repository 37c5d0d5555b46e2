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
 * An event of a line, as op_event_rows gives the events asked for: (metadata_id, offset_ps, duration_ps,
 * stats), its stats whose metadata id is in the set asked for as (metadata_id, kind, value): kind STAT_INT
 * (an int64 or uint64 value), STAT_REF (the id of the stat metadata whose name is the value), STAT_STR (a
 * string), STAT_OTHER (a double or bytes: value None). Scalars and oneofs read as upb reads them: the last
 * one on the wire wins, a field of another wire type is an unknown field.
 *
 * op_event_rows(data, lines, op_nodes, region_ids, (step_ids, region_step_ids, group_ids, instance_ids),
 * ps_per_ns, events, stats) -> (rows, steps, nodes, stepless, line_events): what chakra.tensorflow.profile
 * reads of the lines at the spans `lines` (the thread of each is its index there), in one pass over their
 * events, without a Python object per op event; line_events holds, for each line, its timestamp_ns and
 * its events whose metadata id is in the set `events`, in order, each with its stats of ids in `stats`. `op_nodes`
 * maps the metadata id of an op event to its node's name; `region_ids` are those of the executor's step
 * regions. The four sets name the stat ids of the integer stats read (the last of each on an event
 * wins). In start order (the longer first at one start, then as recorded), with the regions open at
 * each event on a stack, an op's step is its own step stat, else the innermost region around it (its
 * region step stat). Each op with a step is a row of `rows` (bytes of OpRow, _op_rows.h: start and
 * duration floor-divided by `ps_per_ns` as Python divides, the line, the group and instance keys), its
 * step an index in `steps` (the step ids in the order first met) and its op an index in `nodes` (the
 * node of each op id, in the order of the ids); stepless counts the op events with no step.
 */
#include "_wire.h"
#include "_op_rows.h"

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

/* A set of ints as a sorted array, for membership tests without an object per test; where the ids are
 * small and not negative (the profiler numbers its metadata from 1), also as a table by id, so that
 * the test of every event and stat is one load rather than a binary search (a tenth of the reading). */
typedef struct {
    int64_t *ids;
    Py_ssize_t size;
    int32_t *dense; /* id -> its position, -1 for none; NULL when the ids do not suit */
    int64_t dense_size;
} IdSet;

/* The largest id given a table by id (4 MiB of table). */
#define DENSE_MAX_ID (1 << 20)

static int compare_ids(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void id_set_free(IdSet *set) {
    PyMem_Free(set->ids);
    PyMem_Free(set->dense);
    set->ids = NULL;
    set->dense = NULL;
}

/* 0, or -1 with a Python error (an element that is not an int of 64 bits). */
static int id_set_of(PyObject *set, IdSet *out) {
    out->size = 0;
    out->dense = NULL;
    out->dense_size = 0;
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
        id_set_free(out);
        return -1;
    }
    qsort(out->ids, out->size, sizeof(int64_t), compare_ids);
    if (out->size > 0 && out->ids[0] >= 0 && out->ids[out->size - 1] < DENSE_MAX_ID) {
        out->dense_size = out->ids[out->size - 1] + 1;
        out->dense = PyMem_Malloc(out->dense_size * sizeof(int32_t));
        if (out->dense == NULL) {
            id_set_free(out);
            PyErr_NoMemory();
            return -1;
        }
        memset(out->dense, 0xff, out->dense_size * sizeof(int32_t)); /* -1 everywhere */
        for (Py_ssize_t k = 0; k < out->size; k++) out->dense[out->ids[k]] = (int32_t)k;
    }
    return 0;
}

/* The position of `id` in `set`, or -1. */
static Py_ssize_t id_index(const IdSet *set, int64_t id) {
    if (set->dense != NULL) return id >= 0 && id < set->dense_size ? set->dense[id] : -1;
    Py_ssize_t low = 0, high = set->size;
    while (low < high) {
        Py_ssize_t middle = (low + high) / 2;
        if (set->ids[middle] < id)
            low = middle + 1;
        else
            high = middle;
    }
    return low < set->size && set->ids[low] == id ? low : -1;
}

static int id_in(const IdSet *set, int64_t id) { return id_index(set, id) >= 0; }

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

/* One XStat's fields as upb reads them: the last value on the wire wins. */
typedef struct {
    int64_t id;
    int kind;
    int unsigned_int; /* an int value from the uint64 member */
    uint64_t number;
    const uint8_t *text;
    size_t text_len;
} StatFields;

/* 0, or -1 with outer->error set. */
static int parse_stat(Cursor *outer, const uint8_t *data, size_t len, StatFields *out) {
    Cursor c = {data, data + len, NULL};
    *out = (StatFields){0, STAT_OTHER, 0, 0, NULL, 0};
    Field f;
    while (c.p < c.end) {
        if (next_field(&c, &f) < 0) return within(outer, &c, -1);
        if (f.number == STAT_METADATA_ID && f.wire_type == WT_VARINT) {
            out->id = (int64_t)f.varint;
        } else if ((f.number == STAT_UINT64 || f.number == STAT_INT64) && f.wire_type == WT_VARINT) {
            out->kind = STAT_INT;
            out->number = f.varint;
            out->unsigned_int = f.number == STAT_UINT64;
        } else if (f.number == STAT_REF_VALUE && f.wire_type == WT_VARINT) {
            out->kind = STAT_REF;
            out->number = f.varint;
        } else if (f.number == STAT_STR_VALUE && f.wire_type == WT_LEN) {
            out->kind = STAT_STR;
            out->text = f.data;
            out->text_len = f.len;
        } else if ((f.number == STAT_DOUBLE && f.wire_type == WT_I64) || (f.number == STAT_BYTES && f.wire_type == WT_LEN)) {
            out->kind = STAT_OTHER;
        }
    }
    return 0;
}

static PyObject *int_of(int unsigned_int, uint64_t number) {
    return unsigned_int ? PyLong_FromUnsignedLongLong(number) : PyLong_FromLongLong((int64_t)number);
}

/* A stat's value as line_events gives it (see the top of this file); NULL on error. */
static PyObject *stat_value(Cursor *outer, const StatFields *stat) {
    if (stat->kind == STAT_INT) return int_of(stat->unsigned_int, stat->number);
    if (stat->kind == STAT_REF) return PyLong_FromUnsignedLongLong(stat->number);
    if (stat->kind == STAT_STR) return string_of(outer, stat->text, stat->text_len);
    return Py_NewRef(Py_None);
}

/* One XEvent's scalar fields, and whether it has stats. */
typedef struct {
    int64_t id, offset_ps, duration_ps;
    int has_stats;
} EventFields;

/* 0, or -1 with outer->error set. */
static int parse_event(Cursor *outer, const uint8_t *data, size_t len, EventFields *out) {
    Cursor c = {data, data + len, NULL};
    *out = (EventFields){0, 0, 0, 0};
    Field f;
    while (c.p < c.end) {
        if (next_field(&c, &f) < 0) return within(outer, &c, -1);
        if (f.wire_type == WT_VARINT) {
            if (f.number == EVENT_METADATA_ID) out->id = (int64_t)f.varint;
            else if (f.number == EVENT_OFFSET_PS) out->offset_ps = (int64_t)f.varint;
            else if (f.number == EVENT_OCCURRENCES) out->offset_ps = 0; /* the other member of the oneof */
            else if (f.number == EVENT_DURATION_PS) out->duration_ps = (int64_t)f.varint;
        } else if (f.number == EVENT_STATS && f.wire_type == WT_LEN) {
            out->has_stats = 1;
        }
    }
    return 0;
}

/* Calls visit(stat, context) for each stat of an event (read once already by parse_event); 0, or -1. */
static int each_stat(Cursor *outer, const uint8_t *data, size_t len, int (*visit)(const StatFields *, void *),
                     void *context) {
    Cursor c = {data, data + len, NULL};
    Field f;
    while (c.p < c.end) {
        if (next_field(&c, &f) < 0) return within(outer, &c, -1);
        if (f.number != EVENT_STATS || f.wire_type != WT_LEN) continue;
        StatFields stat;
        if (parse_stat(outer, f.data, f.len, &stat) < 0) return -1;
        if (visit(&stat, context) < 0) return -1;
    }
    return 0;
}

typedef struct {
    Cursor *outer;
    const IdSet *wanted;
    PyObject *stats;
} StatList;

static int append_stat(const StatFields *stat, void *context) {
    StatList *list = context;
    if (!id_in(list->wanted, stat->id)) return 0;
    PyObject *value = stat_value(list->outer, stat);
    if (value == NULL) return -1;
    PyObject *item = Py_BuildValue("(LiN)", (long long)stat->id, stat->kind, value);
    int status = item == NULL ? -1 : PyList_Append(list->stats, item);
    Py_XDECREF(item);
    return status;
}

/* One parsed XEvent as (metadata_id, offset_ps, duration_ps, stats), its stats of the ids `wanted_stats`;
 * NULL on error. */
static PyObject *event_tuple(Cursor *outer, const uint8_t *data, size_t len, const EventFields *event,
                             const IdSet *wanted_stats) {
    StatList list = {outer, wanted_stats, PyList_New(0)};
    if (list.stats == NULL) return NULL;
    if (event->has_stats && each_stat(outer, data, len, append_stat, &list) < 0) {
        Py_DECREF(list.stats);
        return NULL;
    }
    PyObject *stat_tuple = PyList_GET_SIZE(list.stats) ? PyList_AsTuple(list.stats) : Py_NewRef(Py_empty_tuple_ref);
    Py_DECREF(list.stats);
    if (stat_tuple == NULL) return NULL;
    return Py_BuildValue("(LLLN)", (long long)event->id, (long long)event->offset_ps, (long long)event->duration_ps,
                         stat_tuple);
}

/* An op event or a step region of a line, with the integer stats op_event_rows reads. */
enum { ROLE_STEP = 0, ROLE_REGION = 1, ROLE_GROUP = 2, ROLE_INSTANCE = 3, ROLES = 4 };
typedef struct {
    int64_t offset_ps, duration_ps, id;
    Py_ssize_t index;
    int is_op;
    int has[ROLES], unsigned_int[ROLES];
    uint64_t value[ROLES];
} Entry;

typedef struct {
    IdSet roles[ROLES];
    Entry *entry;
} RoleStats;

/* The last integer stat of each role wins (a stat of another kind leaves it). */
static int take_role(const StatFields *stat, void *context) {
    RoleStats *r = context;
    if (stat->kind != STAT_INT) return 0;
    for (int role = 0; role < ROLES; role++) {
        if (id_in(&r->roles[role], stat->id)) {
            r->entry->has[role] = 1;
            r->entry->value[role] = stat->number;
            r->entry->unsigned_int[role] = stat->unsigned_int;
        }
    }
    return 0;
}

/* Start order; at one start the longer first (a region before what it holds), then as recorded. */
static int compare_entries(const void *a, const void *b) {
    const Entry *x = a, *y = b;
    if (x->offset_ps != y->offset_ps) return x->offset_ps < y->offset_ps ? -1 : 1;
    if (x->duration_ps != y->duration_ps) return x->duration_ps > y->duration_ps ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

static __int128 floor_div(__int128 a, int64_t b) {
    __int128 q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* What op_event_rows reads with, set up once for all lines. */
typedef struct {
    IdSet ops, regions;
    RoleStats roles;
    int64_t ps_per_ns;
    PyObject *step_index, *step_ids; /* step id -> its index, and the ids in that order */
    /* the step of the last row added and its index */
    int has_last;
    Entry last_step;
    int last_role;
    uint32_t last_index;
    OpRow *rows;
    Py_ssize_t row_count, row_capacity;
    Entry *entries, *stack;
    Py_ssize_t capacity;
    IdSet wanted_events, wanted_stats; /* the events given whole, and their stats given */
} OpsReader;

/* The index of the step `keyed` names in `role` (a new one when first met); 0, or -1 on error. */
static int step_of(OpsReader *reader, const Entry *keyed, int role, uint32_t *index) {
    if (reader->has_last && reader->last_step.value[reader->last_role] == keyed->value[role] &&
        reader->last_step.unsigned_int[reader->last_role] == keyed->unsigned_int[role]) {
        *index = reader->last_index;
        return 0;
    }
    PyObject *step = int_of(keyed->unsigned_int[role], keyed->value[role]);
    if (step == NULL) return -1;
    PyObject *known = PyDict_GetItemWithError(reader->step_index, step);
    int status = 0;
    if (known != NULL) {
        *index = (uint32_t)PyLong_AsUnsignedLong(known);
    } else if (PyErr_Occurred() || PyList_GET_SIZE(reader->step_ids) >= UINT32_MAX) {
        status = -1;
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "op_event_rows: too many steps");
    } else {
        *index = (uint32_t)PyList_GET_SIZE(reader->step_ids);
        PyObject *value = PyLong_FromUnsignedLong(*index);
        status = value == NULL || PyDict_SetItem(reader->step_index, step, value) < 0 ||
                         PyList_Append(reader->step_ids, step) < 0
                     ? -1
                     : 0;
        Py_XDECREF(value);
    }
    Py_DECREF(step);
    if (status == 0) {
        reader->has_last = 1;
        reader->last_step = *keyed;
        reader->last_role = role;
        reader->last_index = *index;
    }
    return status;
}

/* A row for the op `op` of step role `role` (in `region` when the op names no step); 0, or -1. */
static int add_row(OpsReader *reader, const Entry *op, const Entry *region, int64_t timestamp_ns, int32_t line) {
    int role = op->has[ROLE_STEP] ? ROLE_STEP : ROLE_REGION;
    uint32_t step;
    if (step_of(reader, op->has[ROLE_STEP] ? op : region, role, &step) < 0) return -1;
    if (reader->row_count == reader->row_capacity) {
        Py_ssize_t capacity = reader->row_capacity ? 2 * reader->row_capacity : 1024;
        OpRow *rows = PyMem_Realloc(reader->rows, capacity * sizeof(OpRow));
        if (rows == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        reader->rows = rows;
        reader->row_capacity = capacity;
    }
    OpRow *row = &reader->rows[reader->row_count++];
    memset(row, 0, sizeof *row);
    row->start_ns = (__int128)timestamp_ns + floor_div(op->offset_ps, reader->ps_per_ns);
    row->dur_ns = floor_div(op->duration_ps, reader->ps_per_ns);
    row->step = step;
    row->op = (int32_t)op->id;
    row->line = line;
    row->has_group = (uint8_t)op->has[ROLE_GROUP];
    row->group = op->value[ROLE_GROUP];
    row->group_unsigned = (uint8_t)op->unsigned_int[ROLE_GROUP];
    row->has_instance = (uint8_t)op->has[ROLE_INSTANCE];
    row->instance = op->value[ROLE_INSTANCE];
    row->instance_unsigned = (uint8_t)op->unsigned_int[ROLE_INSTANCE];
    return 0;
}

/* The op executions of one line added as rows; 0, or -1 (a Python error set). */
static int read_line_ops(OpsReader *reader, const uint8_t *start, size_t length, int32_t thread,
                         Py_ssize_t *stepless, PyObject *wanted, int64_t *line_timestamp_ns) {
    Cursor line = {start, start + length, NULL};
    int64_t timestamp_ns = 0;
    Py_ssize_t count = 0;
    Field f;
    while (line.p < line.end) {
        if (next_field(&line, &f) < 0) goto malformed;
        if (f.number == LINE_TIMESTAMP_NS && f.wire_type == WT_VARINT) {
            timestamp_ns = (int64_t)f.varint;
            continue;
        }
        if (f.number != LINE_EVENTS || f.wire_type != WT_LEN) continue;
        EventFields event;
        if (parse_event(&line, f.data, f.len, &event) < 0) goto malformed;
        if (reader->wanted_events.size && id_in(&reader->wanted_events, event.id)) {
            PyObject *whole = event_tuple(&line, f.data, f.len, &event, &reader->wanted_stats);
            if (whole == NULL) goto malformed;
            int appended = PyList_Append(wanted, whole);
            Py_DECREF(whole);
            if (appended < 0) return -1;
        }
        Py_ssize_t op = id_index(&reader->ops, event.id);
        if (op < 0 && !id_in(&reader->regions, event.id)) continue;
        if (count == reader->capacity) {
            Py_ssize_t capacity = reader->capacity ? 2 * reader->capacity : 256;
            Entry *entries = PyMem_Realloc(reader->entries, capacity * sizeof(Entry));
            Entry *stack = entries == NULL ? NULL : PyMem_Realloc(reader->stack, capacity * sizeof(Entry));
            if (entries != NULL) reader->entries = entries;
            if (stack == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            reader->stack = stack;
            reader->capacity = capacity;
        }
        Entry *e = &reader->entries[count];
        memset(e, 0, sizeof *e);
        e->offset_ps = event.offset_ps;
        e->duration_ps = event.duration_ps;
        e->id = op; /* the op's index in reader->ops, -1 for a region */
        e->index = count;
        e->is_op = op >= 0;
        count++;
        reader->roles.entry = e;
        if (event.has_stats && each_stat(&line, f.data, f.len, take_role, &reader->roles) < 0) goto malformed;
    }
    /* the profiler writes most lines in this order already: sorting them anyway was most of the reading */
    int in_order = 1;
    for (Py_ssize_t k = 1; k < count && in_order; k++) in_order = compare_entries(&reader->entries[k - 1], &reader->entries[k]) <= 0;
    if (!in_order) qsort(reader->entries, count, sizeof(Entry), compare_entries);
    /* the regions open at each event on a stack, innermost last: an op's step is the innermost one
     * around it, unless the op names its own */
    Entry *stack = reader->stack;
    Py_ssize_t depth = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        Entry *e = &reader->entries[k];
        while (depth && (__int128)stack[depth - 1].offset_ps + stack[depth - 1].duration_ps < e->offset_ps) depth--;
        if (!e->is_op) {
            if (e->has[ROLE_REGION]) stack[depth++] = *e;
            continue;
        }
        const Entry *region = NULL;
        if (!e->has[ROLE_STEP]) {
            __int128 end_ps = (__int128)e->offset_ps + e->duration_ps;
            for (Py_ssize_t d = depth - 1; d >= 0 && region == NULL; d--)
                if ((__int128)stack[d].offset_ps + stack[d].duration_ps >= end_ps) region = &stack[d];
            if (region == NULL) {
                (*stepless)++;
                continue;
            }
        }
        if (add_row(reader, e, region, timestamp_ns, thread) < 0) return -1;
    }
    *line_timestamp_ns = timestamp_ns;
    return 0;
malformed:
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, line.error ? line.error : "not an XLine");
    return -1;
}

static PyObject *op_event_rows(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    long long ps_per_ns;
    PyObject *lines, *op_nodes, *process_ids, *role_sets[ROLES], *event_set, *stat_set, *nodes = NULL, *result = NULL;
    PyObject *per_line = NULL;
    OpsReader reader;
    memset(&reader, 0, sizeof reader);
    if (!PyArg_ParseTuple(args, "y*O!O!O(OOOO)LOO", &view, &PyList_Type, &lines, &PyDict_Type, &op_nodes, &process_ids,
                          &role_sets[0], &role_sets[1], &role_sets[2], &role_sets[3], &ps_per_ns, &event_set, &stat_set))
        return NULL;
    reader.ps_per_ns = ps_per_ns;
    int failed = ps_per_ns <= 0 || !PyAnySet_Check(process_ids) || PyList_GET_SIZE(lines) > INT32_MAX ||
                 !PyAnySet_Check(event_set) || !PyAnySet_Check(stat_set);
    for (int role = 0; role < ROLES; role++) failed = failed || !PyAnySet_Check(role_sets[role]);
    if (failed) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "op_event_rows: an argument of the wrong kind");
        return NULL;
    }
    Py_ssize_t stepless = 0;
    reader.step_index = PyDict_New();
    reader.step_ids = PyList_New(0);
    PyObject *op_keys = PyFrozenSet_New(op_nodes);
    failed = reader.step_index == NULL || reader.step_ids == NULL || op_keys == NULL ||
             id_set_of(op_keys, &reader.ops) < 0 || id_set_of(process_ids, &reader.regions) < 0;
    Py_XDECREF(op_keys);
    for (int role = 0; role < ROLES && !failed; role++) failed = id_set_of(role_sets[role], &reader.roles.roles[role]) < 0;
    if (!failed) failed = id_set_of(event_set, &reader.wanted_events) < 0 || id_set_of(stat_set, &reader.wanted_stats) < 0;
    if (!failed) failed = (per_line = PyList_New(0)) == NULL;
    if (!failed && reader.ops.size > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "op_event_rows: too many op ids");
        failed = 1;
    }
    if (!failed) failed = (nodes = PyList_New(reader.ops.size)) == NULL;
    for (Py_ssize_t k = 0; !failed && k < reader.ops.size; k++) {
        PyObject *key = PyLong_FromLongLong(reader.ops.ids[k]);
        PyObject *node = key == NULL ? NULL : PyDict_GetItemWithError(op_nodes, key);
        Py_XDECREF(key);
        failed = node == NULL;
        if (failed && !PyErr_Occurred()) PyErr_SetString(PyExc_KeyError, "op_event_rows: an op id left op_nodes");
        if (!failed) PyList_SET_ITEM(nodes, k, Py_NewRef(node));
    }
    for (Py_ssize_t thread = 0; !failed && thread < PyList_GET_SIZE(lines); thread++) {
        Py_ssize_t offset, length;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(lines, thread), "nn", &offset, &length)) {
            failed = 1;
        } else if (offset < 0 || length < 0 || offset > view.len || length > view.len - offset) {
            PyErr_SetString(PyExc_ValueError, "op_event_rows: a line's span is out of range");
            failed = 1;
        } else {
            PyObject *wanted = PyList_New(0);
            int64_t timestamp_ns = 0;
            failed = wanted == NULL || read_line_ops(&reader, (const uint8_t *)view.buf + offset, (size_t)length,
                                                     (int32_t)thread, &stepless, wanted, &timestamp_ns) < 0;
            PyObject *line = failed ? NULL : Py_BuildValue("(LO)", (long long)timestamp_ns, wanted);
            failed = line == NULL || PyList_Append(per_line, line) < 0;
            Py_XDECREF(line);
            Py_XDECREF(wanted);
        }
    }
    if (!failed) {
        PyObject *rows = PyBytes_FromStringAndSize((const char *)reader.rows, reader.row_count * (Py_ssize_t)sizeof(OpRow));
        if (rows != NULL) result = Py_BuildValue("(NOOnO)", rows, reader.step_ids, nodes, stepless, per_line);
    }
    PyMem_Free(reader.entries);
    PyMem_Free(reader.stack);
    PyMem_Free(reader.rows);
    id_set_free(&reader.ops);
    id_set_free(&reader.regions);
    for (int role = 0; role < ROLES; role++) id_set_free(&reader.roles.roles[role]);
    id_set_free(&reader.wanted_events);
    id_set_free(&reader.wanted_stats);
    Py_XDECREF(per_line);
    Py_XDECREF(reader.step_index);
    Py_XDECREF(reader.step_ids);
    Py_XDECREF(nodes);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"plane_metadata", plane_metadata, METH_VARARGS, "A plane's metadata names and the spans of its lines."},
    {"op_event_rows", op_event_rows, METH_VARARGS, "Every line's op executions as rows, their steps and nodes; the count with no step; the events asked for."},
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
