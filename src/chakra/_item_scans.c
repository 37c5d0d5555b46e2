/*
 * chakra._item_scans: which of one thread's items or segments a pass over a conversion's items must look
 * at, found in C (see chakra/pytorch/waits.py, syncs.py, dependencies.py): most of a trace's items pass
 * every such rule's first test, and the Python rule then runs on the few that do not. Each scan returns
 * a superset of what its rule acts on (the rule checks everything again), and None, where it says so,
 * when a value is not of the type it reads (the caller then looks at every item). Times are compared as
 * the Python rules compare them (NaN included).
 *
 * part_candidates(segments, launched, min_us) -> list of int: the indices of the segments that may hold a
 * part of their owner (chakra.pytorch.waits.split_parts looks at these only, with every rule): those with
 * an owner that are waited, or that are not the owner's first and last min_us or more (or NaN, or have
 * times that are not floats), or whose owner's node_id is in `launched` (it launched device work, maybe
 * in them).
 *
 * wait_candidates(segments, inside_ends, between_ends) -> list of int or None: the indices of the segments
 * not waited already in which something the thread could have waited for ends (chakra.pytorch.waits.
 * find_waits looks at these only, with every rule): the last of the sorted ends (inside_ends for a segment
 * with an owner, between_ends for one between top-level ops) at or before the segment's end, found as
 * bisect.bisect_right finds it, is not at or before its start. None when a time is not a float: the
 * caller looks at every segment.
 *
 * late_starts(items, first_us, idle_us) -> (indices, ready_us) or None: one stream's items in order, each
 * ready at the later of its activity's launch (launch_ts_us, where known) and the end of every item before it
 * (first_us before the first; an item's end is its ts_us, None read as 0, plus its dur_us), as max() takes
 * the later; the indices of those that started more than idle_us after they were ready, with when they were
 * ready (chakra.pytorch.syncs.timed_stream_waits looks at these only). None when a time is not a float.
 *
 * idle_starts(items, idle_us) -> list of int or None: the indices of one thread's top-level items (depth 0)
 * that start (ts_us, None read as 0) more than idle_us after the latest end of the top-level items before
 * them (chakra.pytorch.dependencies.inter_thread).
 *
 * gap_starts(items, idle_us) -> (indices, previous) or None: one thread's timed top-level items that start
 * at least idle_us after the end of the top-level item that ended last before them (the first to reach
 * that end), with that item's index (chakra.pytorch.dependencies.busy_gaps).
 *
 * untimed_or_named(nodes, timing, name) -> list: the host nodes, in order, whose id has no timing or whose
 * name is `name` (chakra.pytorch.items.Builder.add_host_ops looks at these only: the ops it drops, and
 * the process groups' record).
 */
#include "_slots.h"

#include <math.h>

static PyObject *s_ts_us, *s_dur_us, *s_depth, *s_node_id, *s_start_us, *s_end_us, *s_owner, *s_waited, *s_first,
    *s_activity, *s_launch_ts_us, *s_id, *s_name;

/* Appends i to `indices` (and j to `more`, where given): 0, or -1 with an exception. */
static int append_indices(PyObject *indices, Py_ssize_t i, PyObject *more, Py_ssize_t j) {
    PyObject *index = PyLong_FromSsize_t(i);
    int status = index ? PyList_Append(indices, index) : -1;
    Py_XDECREF(index);
    if (status == 0 && more != NULL) {
        PyObject *other = PyLong_FromSsize_t(j);
        status = other ? PyList_Append(more, other) : -1;
        Py_XDECREF(other);
    }
    return status;
}

/* 1 when the segment may hold a part (see part_candidates), 0 when not, -1 with an exception. */
static int part_candidate(PyObject *segment, PyObject *launched, double min_us) {
    PyObject *owner = field(segment, s_owner), *node_id = NULL;
    int status = 0;
    if (owner == NULL) return -1;
    if (owner == Py_None) goto done;
    double start = 0.0, end = 0.0;
    int flag = 0;
    PyObject *waited = field(segment, s_waited);
    if (waited == NULL || (flag = PyObject_IsTrue(waited)) != 0) {
        status = waited == NULL ? -1 : flag; /* waited: a part after the wait, whatever its length */
        Py_XDECREF(waited);
        goto done;
    }
    Py_DECREF(waited);
    PyObject *first = field(segment, s_first);
    if (first == NULL || (flag = PyObject_IsTrue(first)) != 0) {
        status = first == NULL || flag < 0 ? -1 : 0; /* an op's first stretch stays the op's */
        Py_XDECREF(first);
        goto done;
    }
    Py_DECREF(first);
    int floats = float_field(segment, s_start_us, 0, &start);
    if (floats == 1) floats = float_field(segment, s_end_us, 0, &end);
    if (floats < 0) {
        status = -1;
        goto done;
    }
    if (floats == 0 || !(end - start < min_us)) { /* a time of another type: the rule decides */
        status = 1;
        goto done;
    }
    if ((node_id = field(owner, s_node_id)) == NULL) {
        status = -1;
        goto done;
    }
    status = PySequence_Contains(launched, node_id);
done:
    Py_XDECREF(node_id);
    Py_DECREF(owner);
    return status;
}

static PyObject *part_candidates(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *segments, *launched;
    double min_us;
    if (!PyArg_ParseTuple(args, "O!Od", &PyList_Type, &segments, &launched, &min_us)) return NULL;
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(segments); i++) {
        int candidate = part_candidate(PyList_GET_ITEM(segments, i), launched, min_us);
        if (candidate < 0) {
            Py_DECREF(out);
            return NULL;
        }
        if (candidate && append_indices(out, i, NULL, 0) < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

/* A list of floats as doubles (PyMem_Malloc'd, *count set); NULL with no exception when one is not a float. */
static double *float_array(PyObject *list, Py_ssize_t *count) {
    *count = PyList_GET_SIZE(list);
    double *out = PyMem_Malloc(((size_t)*count + 1) * sizeof(double));
    if (!out) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < *count; i++) {
        PyObject *value = PyList_GET_ITEM(list, i);
        if (!PyFloat_CheckExact(value)) {
            PyMem_Free(out);
            return NULL;
        }
        out[i] = PyFloat_AS_DOUBLE(value);
    }
    return out;
}

/* As bisect.bisect_right(ends, x) - 1: the last index whose end is not above x (-1: none). */
static Py_ssize_t last_not_above(const double *ends, Py_ssize_t count, double x) {
    Py_ssize_t lo = 0, hi = count;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (x < ends[mid]) hi = mid; else lo = mid + 1;
    }
    return lo - 1;
}

static PyObject *wait_candidates(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *segments, *inside, *between, *out = NULL;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyList_Type, &segments, &PyList_Type, &inside, &PyList_Type, &between))
        return NULL;
    Py_ssize_t n_inside, n_between;
    double *inside_ends = float_array(inside, &n_inside), *between_ends = NULL;
    if (inside_ends) between_ends = float_array(between, &n_between);
    if (!between_ends) {
        PyMem_Free(inside_ends);
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    if (!(out = PyList_New(0))) goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(segments); i++) {
        PyObject *segment = PyList_GET_ITEM(segments, i);
        PyObject *waited = field(segment, s_waited), *owner = NULL, *start = NULL, *end = NULL;
        int status = waited == NULL ? -1 : PyObject_IsTrue(waited), candidate = 0;
        if (status == 0 && (owner = field(segment, s_owner)) && (start = field(segment, s_start_us)) &&
            (end = field(segment, s_end_us))) {
            if (!PyFloat_CheckExact(start) || !PyFloat_CheckExact(end)) {
                status = 2; /* not floats: the caller's rules decide */
            } else {
                int has_owner = owner != Py_None;
                const double *ends = has_owner ? inside_ends : between_ends;
                Py_ssize_t k = last_not_above(ends, has_owner ? n_inside : n_between, PyFloat_AS_DOUBLE(end));
                candidate = k >= 0 && !(ends[k] <= PyFloat_AS_DOUBLE(start));
            }
        } else if (status == 0) {
            status = -1;
        }
        Py_XDECREF(waited);
        Py_XDECREF(owner);
        Py_XDECREF(start);
        Py_XDECREF(end);
        if (status == 2) {
            Py_CLEAR(out);
            out = Py_NewRef(Py_None);
            goto done;
        }
        if (status < 0) {
            Py_CLEAR(out);
            goto done;
        }
        if (candidate && append_indices(out, i, NULL, 0) < 0) {
            Py_CLEAR(out);
            goto done;
        }
    }
done:
    PyMem_Free(inside_ends);
    PyMem_Free(between_ends);
    return out;
}

static PyObject *late_starts(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *items, *first;
    double idle_us;
    if (!PyArg_ParseTuple(args, "O!Od", &PyList_Type, &items, &first, &idle_us)) return NULL;
    if (!PyFloat_CheckExact(first)) Py_RETURN_NONE;
    double prev_end = PyFloat_AS_DOUBLE(first);
    PyObject *indices = PyList_New(0), *ready = PyList_New(0);
    if (!indices || !ready) goto fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        double start, duration, launch = -INFINITY;
        int status = float_field(item, s_ts_us, 1, &start);
        if (status > 0) status = float_field(item, s_dur_us, 0, &duration);
        if (status > 0) {
            PyObject *activity = field(item, s_activity);
            if (activity == NULL) {
                status = -1;
            } else if (activity != Py_None) {
                PyObject *at = field(activity, s_launch_ts_us);
                if (at == NULL) status = -1;
                else if (PyFloat_CheckExact(at)) launch = PyFloat_AS_DOUBLE(at);
                else if (at != Py_None) status = 0;
                Py_XDECREF(at);
            }
            Py_XDECREF(activity);
        }
        if (status < 0) goto fail;
        if (status == 0) {
            Py_DECREF(indices);
            Py_DECREF(ready);
            Py_RETURN_NONE;
        }
        double ready_us = launch > prev_end ? launch : prev_end, end = start + duration;
        if (end > prev_end) prev_end = end;
        if (!(start - ready_us <= idle_us)) {
            PyObject *index = PyLong_FromSsize_t(i), *when = PyFloat_FromDouble(ready_us);
            int failed = !index || !when || PyList_Append(indices, index) < 0 || PyList_Append(ready, when) < 0;
            Py_XDECREF(index);
            Py_XDECREF(when);
            if (failed) goto fail;
        }
    }
    return Py_BuildValue("(NN)", indices, ready);
fail:
    Py_XDECREF(indices);
    Py_XDECREF(ready);
    return NULL;
}


/* Whether the item's depth is 0 (a top-level op): 1, 0, -1 on error; 2 when the depth is not an int. */
static int top_level(PyObject *item) {
    PyObject *depth = field(item, s_depth);
    if (depth == NULL) return -1;
    int status = 2;
    if (PyLong_CheckExact(depth)) {
        int overflow = 0;
        long value = PyLong_AsLongAndOverflow(depth, &overflow);
        status = value == -1 && PyErr_Occurred() ? -1 : (value == 0 && !overflow);
    }
    Py_DECREF(depth);
    return status;
}

static PyObject *idle_starts(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *items;
    double idle_us, last_end = -INFINITY;
    if (!PyArg_ParseTuple(args, "O!d", &PyList_Type, &items, &idle_us)) return NULL;
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        double start, duration;
        int status = top_level(item);
        if (status == 0) continue;
        if (status == 1) status = float_field(item, s_ts_us, 1, &start);
        if (status == 1) status = float_field(item, s_dur_us, 0, &duration);
        if (status < 0) goto fail;
        if (status != 1) goto other_types;
        double idle = start - last_end, end = start + duration;
        if (end > last_end) last_end = end;
        if (!(idle <= idle_us) && append_indices(out, i, NULL, 0) < 0) goto fail;
    }
    return out;
other_types: /* a depth or a time of another type: the caller's rules decide */
    Py_DECREF(out);
    Py_RETURN_NONE;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyObject *gap_starts(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *items;
    double idle_us, prev_end = 0.0;
    Py_ssize_t prev = -1;
    if (!PyArg_ParseTuple(args, "O!d", &PyList_Type, &items, &idle_us)) return NULL;
    PyObject *indices = PyList_New(0), *previous = PyList_New(0);
    if (!indices || !previous) goto fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        int status = top_level(item);
        if (status == 1) {
            PyObject *ts = field(item, s_ts_us);
            if (ts == NULL) goto fail;
            int timed = ts != Py_None, exact = PyFloat_CheckExact(ts);
            double start = exact ? PyFloat_AS_DOUBLE(ts) : 0.0, duration;
            Py_DECREF(ts);
            if (!timed) continue;
            if (!exact) goto other_types;
            status = float_field(item, s_dur_us, 0, &duration);
            if (status < 0) goto fail;
            if (status == 0) goto other_types;
            double end = start + duration;
            if (prev >= 0 && start - prev_end >= idle_us && append_indices(indices, i, previous, prev) < 0) goto fail;
            if (prev < 0 || end >= prev_end) prev = i, prev_end = end;
        } else if (status == 2) {
            goto other_types;
        } else if (status < 0) {
            goto fail;
        }
    }
    return Py_BuildValue("(NN)", indices, previous);
other_types: /* a depth or a time of another type: the caller's rules decide */
    Py_DECREF(indices);
    Py_DECREF(previous);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(indices);
    Py_XDECREF(previous);
    return NULL;
}

static PyObject *untimed_or_named(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *nodes, *timing, *name;
    if (!PyArg_ParseTuple(args, "O!O!U", &PyList_Type, &nodes, &PyDict_Type, &timing, &name)) return NULL;
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(nodes); i++) {
        PyObject *node = PyList_GET_ITEM(nodes, i), *id = field(node, s_id), *own = NULL;
        int look = id == NULL ? -1 : PyDict_Contains(timing, id);
        if (look == 1) { /* timed: looked at only when it is the record named */
            own = field(node, s_name);
            look = own == NULL ? -1 : PyUnicode_Check(own) && PyUnicode_Compare(own, name) == 0;
            if (look == 0 && PyErr_Occurred()) look = -1;
        } else if (look == 0) {
            look = 1;
        }
        Py_XDECREF(id);
        Py_XDECREF(own);
        if (look < 0 || (look && PyList_Append(out, node) < 0)) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

static PyMethodDef methods[] = {
    {"part_candidates", part_candidates, METH_VARARGS, "part_candidates(segments, launched, min_us) -> indices of the segments that may hold a part"},
    {"wait_candidates", wait_candidates, METH_VARARGS, "wait_candidates(segments, inside_ends, between_ends) -> indices of the segments to look at, or None"},
    {"late_starts", late_starts, METH_VARARGS, "late_starts(items, first_us, idle_us) -> (indices, ready_us) of the stream's items that started late, or None"},
    {"idle_starts", idle_starts, METH_VARARGS, "idle_starts(items, idle_us) -> indices of the top-level items that start after an idle spell, or None"},
    {"untimed_or_named", untimed_or_named, METH_VARARGS, "untimed_or_named(nodes, timing, name) -> the host nodes without timing or of that name"},
    {"gap_starts", gap_starts, METH_VARARGS, "gap_starts(items, idle_us) -> (indices, previous) of the top-level items after a gap, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_item_scans", NULL, -1, methods};

PyMODINIT_FUNC PyInit__item_scans(void) {
    static const Interned names[] = {
        {&s_ts_us, "ts_us"}, {&s_dur_us, "dur_us"}, {&s_depth, "depth"}, {&s_node_id, "node_id"},
        {&s_start_us, "start_us"}, {&s_end_us, "end_us"}, {&s_owner, "owner"}, {&s_waited, "waited"},
        {&s_first, "first"}, {&s_activity, "activity"}, {&s_launch_ts_us, "launch_ts_us"}, {&s_id, "id"},
        {&s_name, "name"},
    };
    if (intern_all(names, sizeof names / sizeof names[0]) < 0) return NULL;
    return PyModule_Create(&module);
}
