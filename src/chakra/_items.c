/*
 * chakra._items: passes over one conversion's items in C (see chakra/pytorch/waits.py), reading and writing
 * their slots (_slots.h).
 *
 * nest_thread(items, segment_type) -> segments: one CPU thread's items in time order (ts_us, None read
 * as 0), nested by their spans: sets each item's depth (the ops open around it), appends its call-stack
 * parent's node_id to its ctrl when its host node names that parent, and sets its excl_us to the sum of
 * its segments; returns the segments of exclusive time in start order (stably: those starting together in
 * the order they close, as list.sort(key=attrgetter("start_us")) leaves them; the sweep makes them in that
 * order but for odd spans, which are sorted so), each segment_type(start_us, end_us, owner, first): owner
 * None between top-level ops, first when it starts where its owner starts. A child outlasting its parent keeps that time (the parent's cursor moves past
 * it), as in the Python rule it replaces.
 *
 * gather(objects, paths) -> lists: for each path (a tuple of attribute names), the list of what it
 * leads to from each object, None where a step meets None: gather(items, (("name",), ("host", "rf_id")))
 * is ([i.name for i in items], [i.host.rf_id if i.host is not None else None for i in items]) in one
 * pass, the encoders' columns read through the slots; a path of several steps that starts with the same
 * attribute as the last such path before it reuses what that one read of the object.
 *
 * timed_in_order(nodes, timing) -> list: the host nodes that have a timing (timing[node.id], with ts_us and
 * dur_us) in the order their items' keys give, (ts_us, -dur_us, id); for making their items in that
 * order only (NaN times end anywhere).
 *
 * sort_by_field(objects, name) -> bool: sorts the list in place, stably, by each object's attribute `name`
 * when every one is a float or every one is an items' key (a tuple of two floats and an int of 64 bits;
 * an item's `key` None is (ts_us, -dur_us, node_id), as items.order_key reads it), none NaN: as
 * list.sort(key=attrgetter(name)) sorts it (such keys compare as Python compares them), a
 * sorted stretch merged with the next without a comparison per element. False, the list untouched,
 * for any other attribute: the caller sorts it in Python. ValueError when reading the attributes
 * changed the list, as list.sort raises it.
 *
 * timed_items(nodes, timing, item_type, node_type) -> dict: for each host node in order (timed_in_order's),
 * item_type(node.id, node.name, node_type, None, thread, ts_us, dur_us, exclusive_us, True, node) from its
 * timing[node.id] (the key None: ordered by its times), by node id: the items of the timed host ops, made
 * without a Python frame per op.
 *
 * by_end(items) -> (ends, items) or None: the items in the order they end (ts_us, None or zero read as 0.0,
 * plus dur_us), stably, with those ends: as sorted(range(n), key=ends.__getitem__) orders them. None when a
 * time is not a float or an end is NaN: the caller sorts them in Python.
 *
 */
#include "_slots.h"

#include <math.h>

static PyObject *s_ts_us, *s_dur_us, *s_host, *s_parent, *s_node_id, *s_depth, *s_ctrl, *s_excl_us, *s_id, *s_start_us;
static PyObject *s_name, *s_exclusive_us, *s_thread, *s_key;

/* An open op. Its times are also kept as float objects, shared with its segments: one end per item
 * and a cursor that is the item's own ts_us or an end (both owned), so that segments add no float of
 * their own (a float per segment was 6 MiB more at the peak of a
 * 70k-op conversion). */
typedef struct {
    Py_ssize_t index; /* of the item in the thread's list */
    double cursor, start, end;
    PyObject *cursor_obj, *end_obj;
} Open;

typedef struct {
    PyObject *segments, *items, *segment_type;
    double *excl;
    double last_start; /* of the last segment made */
    int unordered;     /* a segment started before the one made before it */
} Nesting;

/* Appends segment_type(start, end, owner or None, first) and adds its length to the owner's time. */
static int add_segment(Nesting *n, PyObject *start, PyObject *end, double start_us, double length, Py_ssize_t owner,
                       int first) {
    if (!(start_us >= n->last_start)) n->unordered = 1; /* NaN too: sorted as Python sorts it */
    n->last_start = start_us;
    PyObject *args[4] = {start, end, owner >= 0 ? PyList_GET_ITEM(n->items, owner) : Py_None,
                         first ? Py_True : Py_False};
    PyObject *segment = PyObject_Vectorcall(n->segment_type, args, 4, NULL);
    if (segment == NULL) return -1;
    int status = PyList_Append(n->segments, segment);
    Py_DECREF(segment);
    if (owner >= 0) n->excl[owner] += length;
    return status;
}

static void open_release(Open *o) {
    Py_CLEAR(o->cursor_obj);
    Py_CLEAR(o->end_obj);
}

/* The thread's cursor between top-level ops: none before the first op closes. */
typedef struct {
    double value;
    PyObject *obj; /* owned; NULL before the first op closes */
} Cursor;

/* Pops the innermost open op: its last exclusive segment; moves its parent's cursor (or the thread's,
 * `*top`) past everything below it. */
static int close_top(Nesting *n, Open *stack, Py_ssize_t *depth, Cursor *top) {
    Open o = stack[--*depth];
    int has_tail = o.end > o.cursor;
    if (has_tail && add_segment(n, o.cursor_obj, o.end_obj, o.cursor, o.end - o.cursor, o.index, o.cursor == o.start) < 0) {
        open_release(&o);
        return -1;
    }
    double subtree_end = has_tail ? o.end : o.cursor;
    PyObject *subtree_end_obj = has_tail ? o.end_obj : o.cursor_obj;
    if (*depth > 0) {
        Open *parent = &stack[*depth - 1];
        if (subtree_end > parent->cursor) {
            parent->cursor = subtree_end;
            Py_SETREF(parent->cursor_obj, Py_NewRef(subtree_end_obj));
        }
    } else if (!(top->value > subtree_end)) {
        top->value = subtree_end;
        Py_XSETREF(top->obj, Py_NewRef(subtree_end_obj));
    }
    open_release(&o);
    return 0;
}

/* Whether the item's host node names `parent` as its call-stack parent: 1, 0, or -1 on error. */
static int host_parent_is(PyObject *item, PyObject *parent_node_id) {
    PyObject *host = field(item, s_host);
    if (host == NULL) return -1;
    int same = 0;
    if (host != Py_None) {
        PyObject *parent = field(host, s_parent);
        same = parent == NULL ? -1 : PyObject_RichCompareBool(parent, parent_node_id, Py_EQ);
        Py_XDECREF(parent);
    }
    Py_DECREF(host);
    return same;
}

/* Adds the parent's node_id to the item's ctrl when its host node names that parent. */
static int tie_to_parent(PyObject *item, PyObject *parent) {
    PyObject *node_id = field(parent, s_node_id);
    if (node_id == NULL) return -1;
    int same = host_parent_is(item, node_id);
    int status = same;
    if (same > 0) status = append_to_field(item, s_ctrl, node_id);
    Py_DECREF(node_id);
    return status < 0 ? -1 : 0;
}

/* A time slot (µs) as a double, None read as 0; with `obj`, also a new reference to its object (ZERO
 * for None: a fallback getattr may make the object anew, so it is owned, not borrowed). 0, or -1 with
 * an exception. */
static PyObject *ZERO, *EMPTY_ARGS;

static int micros_of(PyObject *item, PyObject *name, double *out, PyObject **obj) {
    PyObject *value = field(item, name);
    if (value == NULL) return -1;
    *out = value == Py_None ? 0.0 : PyFloat_AsDouble(value);
    int status = *out == -1.0 && PyErr_Occurred() ? -1 : 0;
    if (status == 0 && obj != NULL) *obj = Py_NewRef(value == Py_None ? ZERO : value);
    Py_DECREF(value);
    return status;
}

static int set_number(PyObject *item, PyObject *name, PyObject *value) {
    if (value == NULL) return -1;
    int status = set_field(item, name, value);
    Py_DECREF(value);
    return status;
}

/* Item i, starting at ts (its object ts_obj) and lasting dur: closes the ops that ended before it,
 * cuts the open op's exclusive time (or the thread's between top-level ops) where it starts, ties it
 * to its parent and opens it. 0, or -1 with an exception. */
static int open_item(Nesting *n, Open *stack, Py_ssize_t *depth, Cursor *top, Py_ssize_t i, double ts, double dur,
                     PyObject *ts_obj) {
    PyObject *item = PyList_GET_ITEM(n->items, i);
    while (*depth > 0 && ts >= stack[*depth - 1].end)
        if (close_top(n, stack, depth, top) < 0) return -1;
    if (*depth > 0) {
        Open *o = &stack[*depth - 1];
        if (ts > o->cursor) {
            if (add_segment(n, o->cursor_obj, ts_obj, o->cursor, ts - o->cursor, o->index, o->cursor == o->start) < 0) return -1;
            o->cursor = ts;
            Py_SETREF(o->cursor_obj, Py_NewRef(ts_obj));
        }
        if (tie_to_parent(item, PyList_GET_ITEM(n->items, o->index)) < 0) return -1;
    } else if (top->obj != NULL && ts > top->value) {
        if (add_segment(n, top->obj, ts_obj, top->value, ts - top->value, -1, 0) < 0) return -1;
    }
    if (set_number(item, s_depth, PyLong_FromSsize_t(*depth)) < 0) return -1;
    PyObject *end_obj = PyFloat_FromDouble(ts + dur);
    if (end_obj == NULL) return -1;
    stack[(*depth)++] = (Open){i, ts, ts, ts + dur, Py_NewRef(ts_obj), end_obj};
    return 0;
}

static int sort_fields(PyObject *objects, PyObject *name, int *sorted);

/* The segments sorted as list.sort(key=attrgetter("start_us")) sorts them: in C (sort_fields), or by
 * Python's sort for starts it does not read (NaN). 0, or -1 with an exception. */
static PyObject *BY_START; /* attrgetter("start_us") */

static int sort_by_start(PyObject *segments) {
    int sorted = 0;
    if (sort_fields(segments, s_start_us, &sorted) < 0) return -1;
    if (sorted) return 0;
    PyObject *sort = PyObject_GetAttrString(segments, "sort");
    if (sort == NULL) return -1;
    PyObject *kwargs = Py_BuildValue("{sO}", "key", BY_START);
    PyObject *done = kwargs == NULL ? NULL : PyObject_Call(sort, EMPTY_ARGS, kwargs);
    Py_XDECREF(kwargs);
    Py_DECREF(sort);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

static PyObject *nest_thread(PyObject *self, PyObject *args) {
    PyObject *items, *segment_type;
    if (!PyArg_ParseTuple(args, "O!O", &PyList_Type, &items, &segment_type)) return NULL;
    Py_ssize_t size = PyList_GET_SIZE(items), depth = 0;
    Open *stack = PyMem_Malloc((size ? size : 1) * sizeof(Open));
    Nesting n = {PyList_New(0), items, segment_type, PyMem_Calloc(size ? size : 1, sizeof(double)), -INFINITY, 0};
    Cursor top = {-INFINITY, NULL};
    if (stack == NULL || n.segments == NULL || n.excl == NULL) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < size; i++) {
        PyObject *ts_obj = NULL;
        double ts, dur;
        int status = micros_of(PyList_GET_ITEM(items, i), s_ts_us, &ts, &ts_obj) < 0 ||
                             micros_of(PyList_GET_ITEM(items, i), s_dur_us, &dur, NULL) < 0
                         ? -1
                         : open_item(&n, stack, &depth, &top, i, ts, dur, ts_obj);
        Py_XDECREF(ts_obj);
        if (status < 0) goto fail;
    }
    while (depth > 0)
        if (close_top(&n, stack, &depth, &top) < 0) goto fail;
    for (Py_ssize_t i = 0; i < size; i++)
        if (set_number(PyList_GET_ITEM(items, i), s_excl_us, PyFloat_FromDouble(n.excl[i])) < 0) goto fail;
    if (n.unordered && sort_by_start(n.segments) < 0) goto fail;
    PyMem_Free(stack);
    PyMem_Free(n.excl);
    Py_XDECREF(top.obj);
    return n.segments;
fail:
    while (depth > 0) open_release(&stack[--depth]);
    PyMem_Free(stack);
    PyMem_Free(n.excl);
    Py_XDECREF(top.obj);
    Py_XDECREF(n.segments);
    return NULL;
}

#define MAX_PATHS 64
#define MAX_STEPS 8

static PyObject *gather(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objects, *paths, *result = NULL;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &objects, &PyTuple_Type, &paths)) return NULL;
    Py_ssize_t n_paths = PyTuple_GET_SIZE(paths), size = PyList_GET_SIZE(objects);
    PyObject *names[MAX_PATHS][MAX_STEPS] = {{NULL}};
    Py_ssize_t steps[MAX_PATHS] = {0};
    PyTypeObject *seen_type[MAX_PATHS][MAX_STEPS] = {{NULL}}; /* the type last read at each step */
    Py_ssize_t seen_offset[MAX_PATHS][MAX_STEPS] = {{0}};     /* and where it keeps the attribute */
    if (n_paths > MAX_PATHS) {
        PyErr_Format(PyExc_ValueError, "gather takes at most %d paths", MAX_PATHS);
        return NULL;
    }
    for (Py_ssize_t p = 0; p < n_paths; p++) {
        PyObject *path = PyTuple_GET_ITEM(paths, p);
        if (!PyTuple_Check(path) || PyTuple_GET_SIZE(path) < 1 || PyTuple_GET_SIZE(path) > MAX_STEPS) {
            PyErr_Format(PyExc_ValueError, "a path is a tuple of 1 to %d attribute names", MAX_STEPS);
            goto done;
        }
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(path); k++) {
            PyObject *name = PyTuple_GET_ITEM(path, k);
            if (!PyUnicode_CheckExact(name)) {
                PyErr_SetString(PyExc_TypeError, "attribute names must be str");
                goto done;
            }
            names[p][k] = Py_NewRef(name);
            PyUnicode_InternInPlace(&names[p][k]); /* the slot cache compares names by identity */
            steps[p] = k + 1;
        }
    }
    if (!(result = PyTuple_New(n_paths))) goto done;
    for (Py_ssize_t p = 0; p < n_paths; p++) {
        PyObject *column = PyList_New(size);
        if (!column) {
            Py_CLEAR(result);
            goto done;
        }
        PyTuple_SET_ITEM(result, p, column);
    }
    for (Py_ssize_t i = 0; i < size; i++) {
        PyObject *object = PyList_GET_ITEM(objects, i);
        /* paths that start with the same attribute (("host", "rf_id"), ("host", "tid"), ...) read it once */
        PyObject *first_name = NULL, *first = NULL;
        for (Py_ssize_t p = 0; p < n_paths; p++) {
            PyObject *value;
            Py_ssize_t k = 0;
            if (steps[p] > 1 && first != NULL && names[p][0] == first_name) {
                value = Py_NewRef(first);
                k = 1;
            } else {
                value = Py_NewRef(object);
            }
            for (; k < steps[p] && value != Py_None; k++) {
                /* the objects of a column are of a type or two: its slot found once, not per object */
                PyObject *next = NULL;
                if (Py_TYPE(value) == seen_type[p][k] && seen_offset[p][k] >= 0) {
                    next = *(PyObject **)((char *)value + seen_offset[p][k]);
                    Py_XINCREF(next);
                }
                if (!next) {
                    seen_type[p][k] = Py_TYPE(value);
                    seen_offset[p][k] = slot_offset(value, names[p][k]);
                    next = field(value, names[p][k]);
                }
                Py_SETREF(value, next);
                if (!value) {
                    Py_XDECREF(first);
                    Py_CLEAR(result);
                    goto done;
                }
                if (k == 0 && steps[p] > 1) {
                    Py_XSETREF(first, Py_NewRef(value));
                    first_name = names[p][0];
                }
            }
            PyList_SET_ITEM(PyTuple_GET_ITEM(result, p), i, value);
        }
        Py_XDECREF(first);
    }
done:
    for (Py_ssize_t p = 0; p < n_paths; p++)
        for (Py_ssize_t k = 0; k < steps[p]; k++) Py_XDECREF(names[p][k]);
    return result;
}

/* An object's sort key read into C: (a) for a float, (a, b, c) for a key tuple. */
typedef struct {
    double a, b;
    int64_t c;
    Py_ssize_t index; /* in the list before sorting */
} SortKey;

static inline int key_less(const SortKey *x, const SortKey *y) {
    if (x->a != y->a) return x->a < y->a;
    if (x->b != y->b) return x->b < y->b;
    return x->c < y->c;
}

/* Sorts keys[lo:hi] stably by merging halves through `tmp` (room for the left half); a
 * half already in order before the other (the common case: a thread's items with a few appended) costs one
 * comparison. */
static void merge_sort(SortKey *keys, SortKey *tmp, Py_ssize_t lo, Py_ssize_t hi) {
    if (hi - lo < 2) return;
    if (hi - lo <= 16) { /* insertion sort: stable, and fast on short runs */
        for (Py_ssize_t i = lo + 1; i < hi; i++) {
            SortKey k = keys[i];
            Py_ssize_t j = i;
            for (; j > lo && key_less(&k, &keys[j - 1]); j--) keys[j] = keys[j - 1];
            keys[j] = k;
        }
        return;
    }
    Py_ssize_t mid = lo + (hi - lo) / 2;
    merge_sort(keys, tmp, lo, mid);
    merge_sort(keys, tmp, mid, hi);
    if (!key_less(&keys[mid], &keys[mid - 1])) return;
    memcpy(tmp, keys + lo, (size_t)(mid - lo) * sizeof(SortKey)); /* the left half aside: tmp holds n / 2 */
    Py_ssize_t i = 0, left = mid - lo, j = mid, out = lo;
    while (i < left && j < hi) keys[out++] = key_less(&keys[j], &tmp[i]) ? keys[j++] : tmp[i++];
    while (i < left) keys[out++] = tmp[i++];
}

/* The key of `value` (its float, or its key tuple) in `key`: 1 where it is one of `*kind` (0: not known
 * yet, 1: float, 3: tuple) and not NaN, else 0. */
static int read_key(PyObject *value, int *kind, SortKey *key) {
    if (PyFloat_CheckExact(value) && *kind != 3) {
        *kind = 1;
        *key = (SortKey){PyFloat_AS_DOUBLE(value), 0.0, 0, 0};
        return !isnan(key->a);
    }
    if (!PyTuple_CheckExact(value) || PyTuple_GET_SIZE(value) != 3 || *kind == 1) return 0;
    PyObject *a = PyTuple_GET_ITEM(value, 0), *b = PyTuple_GET_ITEM(value, 1), *c = PyTuple_GET_ITEM(value, 2);
    if (!PyFloat_CheckExact(a) || !PyFloat_CheckExact(b) || !PyLong_CheckExact(c)) return 0;
    int overflow;
    long long id = PyLong_AsLongLongAndOverflow(c, &overflow);
    if (overflow || (id == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *kind = 3;
    *key = (SortKey){PyFloat_AS_DOUBLE(a), PyFloat_AS_DOUBLE(b), id, 0};
    return !isnan(key->a) && !isnan(key->b);
}

/* The key of an item whose `key` is None, (ts_us, -dur_us, node_id), in `key`: as read_key reads a key
 * tuple (kind 3), 1 where its times are floats, not NaN, and its id an int of 64 bits; else 0. 0, or -1
 * with an exception. */
static int derived_key(PyObject *item, int *kind, SortKey *key) {
    if (*kind == 1) return 0;
    PyObject *ts = field(item, s_ts_us), *dur = ts == NULL ? NULL : field(item, s_dur_us);
    PyObject *id = dur == NULL ? NULL : field(item, s_node_id);
    int status = id == NULL ? -1 : 0;
    if (status == 0 && PyFloat_CheckExact(ts) && PyFloat_CheckExact(dur) && PyLong_CheckExact(id)) {
        int overflow;
        long long node_id = PyLong_AsLongLongAndOverflow(id, &overflow);
        if (overflow || (node_id == -1 && PyErr_Occurred())) {
            PyErr_Clear();
        } else {
            *kind = 3;
            *key = (SortKey){PyFloat_AS_DOUBLE(ts), -PyFloat_AS_DOUBLE(dur), node_id, 0};
            status = !isnan(key->a) && !isnan(key->b);
        }
    }
    Py_XDECREF(ts);
    Py_XDECREF(dur);
    Py_XDECREF(id);
    return status;
}

static PyObject *timed_in_order(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *given, *timing, *result = NULL;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &given, &PyDict_Type, &timing)) return NULL;
    /* a copy: the nodes stay alive and in place whatever a getattr does to the given list */
    PyObject *nodes = PyList_GetSlice(given, 0, PyList_GET_SIZE(given));
    if (nodes == NULL) return NULL;
    Py_ssize_t size = PyList_GET_SIZE(nodes), count = 0;
    SortKey *keys = PyMem_Malloc((size_t)(size ? size : 1) * sizeof(SortKey));
    SortKey *tmp = PyMem_Malloc((size_t)(size / 2 + 1) * sizeof(SortKey));
    if (keys == NULL || tmp == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < size; i++) {
        PyObject *node_id = field(PyList_GET_ITEM(nodes, i), s_id);
        if (node_id == NULL) goto done;
        PyObject *t = Py_XNewRef(PyDict_GetItemWithError(timing, node_id));
        long long id = 0; /* an id that is no int of 64 bits is ordered as 0: the order is for memory only */
        int overflow = 0;
        if (t != NULL && PyLong_CheckExact(node_id)) {
            id = PyLong_AsLongLongAndOverflow(node_id, &overflow);
            if (overflow) id = 0;
        }
        Py_DECREF(node_id);
        if (t == NULL) {
            if (PyErr_Occurred()) goto done;
            continue;
        }
        double ts, dur;
        int rc = micros_of(t, s_ts_us, &ts, NULL) < 0 || micros_of(t, s_dur_us, &dur, NULL) < 0 ? -1 : 0;
        Py_DECREF(t);
        if (rc < 0) goto done;
        keys[count++] = (SortKey){ts, -dur, id, i};
    }
    merge_sort(keys, tmp, 0, count);
    if ((result = PyList_New(count)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < count; i++) PyList_SET_ITEM(result, i, Py_NewRef(PyList_GET_ITEM(nodes, keys[i].index)));
done:
    Py_DECREF(nodes);
    PyMem_Free(keys);
    PyMem_Free(tmp);
    return result;
}

/* Sorts `objects` in place, stably, by each one's attribute `name` (interned), where every value is a
 * float or an item's key (*sorted = 1); else leaves them as they are (*sorted = 0: Python's sort takes
 * them). 0, or -1 with an exception (a list changed while its keys are read is refused, as list.sort
 * refuses it). */
static int sort_fields(PyObject *objects, PyObject *name, int *sorted) {
    Py_ssize_t size = PyList_GET_SIZE(objects);
    SortKey *keys = PyMem_Malloc((size_t)(size ? size : 1) * sizeof(SortKey));
    SortKey *tmp = PyMem_Malloc((size_t)(size / 2 + 1) * sizeof(SortKey));
    PyObject **held = PyMem_Malloc((size_t)(size ? size : 1) * sizeof(PyObject *));
    int status = -1;
    Py_ssize_t read = 0;
    int kind = 0, fast = 1;
    if (keys == NULL || tmp == NULL || held == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* held: the objects as they were, kept alive whatever a getattr does to the list */
    for (; read < size; read++) held[read] = Py_NewRef(PyList_GET_ITEM(objects, read));
    for (Py_ssize_t i = 0; i < size && fast; i++) {
        PyObject *value = field(held[i], name);
        if (value == NULL) goto done;
        fast = value == Py_None && name == s_key ? derived_key(held[i], &kind, &keys[i]) : read_key(value, &kind, &keys[i]);
        keys[i].index = i;
        Py_DECREF(value);
        if (fast < 0) goto done;
    }
    int modified = PyList_GET_SIZE(objects) != size;
    for (Py_ssize_t i = 0; i < size && !modified; i++) modified = PyList_GET_ITEM(objects, i) != held[i];
    if (modified) { /* as list.sort says it */
        PyErr_SetString(PyExc_ValueError, "list modified during sort");
        goto done;
    }
    if (fast) {
        merge_sort(keys, tmp, 0, size);
        for (Py_ssize_t i = 0; i < size; i++) { /* a permutation of held: no object freed here */
            if (keys[i].index == i) continue; /* in place already (most are): its object not touched */
            PyObject *old = PyList_GET_ITEM(objects, i);
            PyList_SET_ITEM(objects, i, Py_NewRef(held[keys[i].index]));
            Py_DECREF(old);
        }
    }
    *sorted = fast;
    status = 0;
done:
    for (Py_ssize_t i = 0; i < read; i++) Py_DECREF(held[i]);
    PyMem_Free(keys);
    PyMem_Free(tmp);
    PyMem_Free(held);
    return status;
}

static PyObject *sort_by_field(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objects, *name;
    if (!PyArg_ParseTuple(args, "O!U", &PyList_Type, &objects, &name)) return NULL;
    Py_INCREF(name);
    PyUnicode_InternInPlace(&name); /* the slot cache compares names by identity */
    int sorted = 0;
    int status = sort_fields(objects, name, &sorted);
    Py_DECREF(name);
    return status < 0 ? NULL : Py_NewRef(sorted ? Py_True : Py_False);
}

static PyObject *timed_items(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *nodes, *timing, *item_type, *node_type;
    if (!PyArg_ParseTuple(args, "O!O!OO", &PyList_Type, &nodes, &PyDict_Type, &timing, &item_type, &node_type))
        return NULL;
    PyObject *made = PyDict_New();
    if (!made) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(nodes); i++) {
        PyObject *node = PyList_GET_ITEM(nodes, i);
        PyObject *id = field(node, s_id), *name = NULL, *t = NULL, *ts = NULL, *dur = NULL, *excl = NULL;
        PyObject *thread = NULL, *item = NULL;
        int status = -1;
        if (id && (name = field(node, s_name)) && (t = PyDict_GetItemWithError(timing, id))) {
            Py_INCREF(t);
            if ((ts = field(t, s_ts_us)) && (dur = field(t, s_dur_us)) && (excl = field(t, s_exclusive_us)) &&
                (thread = field(t, s_thread))) {
                PyObject *fields[10] = {id, name, node_type, Py_None, thread, ts, dur, excl, Py_True, node};
                item = PyObject_Vectorcall(item_type, fields, 10, NULL);
                if (item) status = PyDict_SetItem(made, id, item);
            }
        } else if (id && name && !PyErr_Occurred()) {
            PyErr_SetObject(PyExc_KeyError, id); /* timed_in_order gives only timed nodes */
        }
        Py_XDECREF(id);
        Py_XDECREF(name);
        Py_XDECREF(t);
        Py_XDECREF(ts);
        Py_XDECREF(dur);
        Py_XDECREF(excl);
        Py_XDECREF(thread);
        Py_XDECREF(item);
        if (status < 0) {
            Py_DECREF(made);
            return NULL;
        }
    }
    return made;
}

static PyObject *by_end(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *items, *ends = NULL, *ordered = NULL;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &items)) return NULL;
    Py_ssize_t size = PyList_GET_SIZE(items);
    SortKey *keys = PyMem_Malloc(((size_t)size + 1) * sizeof(SortKey)), *tmp = PyMem_Malloc(((size_t)size / 2 + 1) * sizeof(SortKey));
    if (!keys || !tmp) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < size; i++) {
        PyObject *item = PyList_GET_ITEM(items, i), *start = field(item, s_ts_us), *duration = NULL;
        if (start != NULL) duration = field(item, s_dur_us);
        int floats = duration != NULL && (start == Py_None || PyFloat_CheckExact(start)) && PyFloat_CheckExact(duration);
        double at = floats && start != Py_None ? PyFloat_AS_DOUBLE(start) : 0.0;
        if (at == 0.0) at = 0.0; /* `ts_us or 0.0`: a zero of either sign is 0.0 */
        double end = floats ? at + PyFloat_AS_DOUBLE(duration) : 0.0;
        Py_XDECREF(start);
        Py_XDECREF(duration);
        if (start == NULL || duration == NULL) goto done;
        if (!floats || isnan(end)) { /* the caller's sort decides */
            PyMem_Free(keys);
            PyMem_Free(tmp);
            Py_RETURN_NONE;
        }
        keys[i] = (SortKey){end, 0.0, 0, i};
    }
    merge_sort(keys, tmp, 0, size);
    if (!(ends = PyList_New(size)) || !(ordered = PyList_New(size))) goto done;
    for (Py_ssize_t i = 0; i < size; i++) {
        PyObject *end = PyFloat_FromDouble(keys[i].a);
        if (!end) goto done;
        PyList_SET_ITEM(ends, i, end);
        PyList_SET_ITEM(ordered, i, Py_NewRef(PyList_GET_ITEM(items, keys[i].index)));
    }
    PyMem_Free(keys);
    PyMem_Free(tmp);
    return Py_BuildValue("(NN)", ends, ordered);
done:
    PyMem_Free(keys);
    PyMem_Free(tmp);
    Py_XDECREF(ends);
    Py_XDECREF(ordered);
    return NULL;
}

static PyMethodDef methods[] = {
    {"timed_in_order", timed_in_order, METH_VARARGS, "timed_in_order(nodes, timing) -> the timed nodes in time order"},
    {"sort_by_field", sort_by_field, METH_VARARGS, "sort_by_field(objects, name) -> bool: sorted in place by a float or key field"},
    {"nest_thread", nest_thread, METH_VARARGS, "Nests one thread's items: depths, parents, segments, exclusive time."},
    {"timed_items", timed_items, METH_VARARGS, "timed_items(nodes, timing, item_type, node_type) -> the timed host ops' items by node id"},
    {"by_end", by_end, METH_VARARGS, "by_end(items) -> (ends, items) in the order they end, or None"},
    {"gather", gather, METH_VARARGS, "gather(objects, paths) -> one list per path of what it leads to from each object"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_items", NULL, -1, methods};

PyMODINIT_FUNC PyInit__items(void) {
    static const Interned names[] = {
        {&s_ts_us, "ts_us"}, {&s_dur_us, "dur_us"}, {&s_host, "host"},   {&s_parent, "parent"},
        {&s_node_id, "node_id"}, {&s_depth, "depth"}, {&s_ctrl, "ctrl"}, {&s_excl_us, "excl_us"}, {&s_id, "id"}, {&s_start_us, "start_us"},
        {&s_name, "name"}, {&s_exclusive_us, "exclusive_us"}, {&s_thread, "thread"},
        {&s_key, "key"},
    };
    if (intern_all(names, sizeof names / sizeof names[0]) < 0) return NULL;
    if ((ZERO = PyFloat_FromDouble(0.0)) == NULL || (EMPTY_ARGS = PyTuple_New(0)) == NULL) return NULL;
    PyObject *operator = PyImport_ImportModule("operator");
    BY_START = operator == NULL ? NULL : PyObject_CallMethod(operator, "attrgetter", "s", "start_us");
    Py_XDECREF(operator);
    if (BY_START == NULL) return NULL;
    return PyModule_Create(&module);
}
