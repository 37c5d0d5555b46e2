/*
 * chakra._kineto_events: the passes over every event of a Kineto trace, in C (see chakra/pytorch/kineto.py).
 * A trace holds hundreds of thousands of events; each pass reads a few fields of each, which in Python
 * costs more than decoding the file did.
 *
 * first_bad_time(events) -> int: the index of the first complete ("X") event whose ts or dur is not a
 * finite number >= 0 (NaN: no ts), or -1.
 *
 * count_kinds(events) -> dict: (cat, ph) -> how many events have them.
 *
 * sort_roles(events, roles, launch_names, sync_names, record_names, mark_prefix) -> (host_ops, launches,
 * duplicates, sync_calls, event_records, other_runtime, device_ops, syncs, other, marks): the complete
 * events by role, in file order; `marks` are the host events whose name starts with `mark_prefix`
 * (also in host_ops). `roles` maps a category to ROLE_HOST, ROLE_RUNTIME, ROLE_DEVICE or ROLE_SYNC (others have
 * none). A runtime call named in `launch_names` goes to `launches` (dict correlation -> event; a
 * correlation seen before is appended to `duplicates`, an event without an integer correlation counts
 * as other), one in `sync_names` to sync_calls, in `record_names` to event_records, any other to
 * other_runtime. `other` counts the events of no role.
 *
 * sort_by_start(events) -> None: sorts the list in place by ts, then longer dur first, then list order
 * (a NaN after every number).
 *
 * step_spans(launches, device_ops, starts, ends) -> (span_ends, missing): for steps whose host spans are
 * [starts[k], ends[k]) (starts ascending), the end of each step's work (its span's end, or later the
 * end of device work a runtime call in it launched: `launches` maps correlation -> call) and how many
 * kernel launches ("Launch" in the call's name) of each step have no device work in `device_ops`
 * (none counted when device_ops is empty).
 *
 * window_work(activities, kept, known, launches, start_us, end_us, earlier) -> (selected, earlier_count): the
 * device activities (or syncs) of a window [start_us, end_us), in list order: those whose correlation
 * is in `kept` (their calls are in the window), those whose correlation is not in `known` (no call in
 * the trace) that start in it; with `earlier`, also those launched before the window (their call, in
 * `launches`, starts before start_us) that ran into it, counted in earlier_count.
 *
 * nest_by_thread(events) -> (exclusive, parents): for host events sorted by start (longer first), each one's
 * exclusive time (its dur less its children's, clipped to it, and at least 0) and the index of its
 * parent (the innermost event of its thread `tid` open at its start), -1 for a top-level one.
 *
 * join_index(events, id_field) -> (first, count): the index of the first event of each value of
 * `args.<id_field>` (an int, not a bool; for "rf_id" not 0), and how many events have one.
 *
 * slim_args(events, start, full_types, slim_type, absent) -> None: for events[start:] whose `args` are of
 * one of `full_types` (exactly) and hold, for every field name in the dict `absent`, the value it maps to
 * (the very object: None, or the shared default of an input list), sets `args` to slim_type(the args'
 * values of slim_type's fields), one shared slim_type() where all are None: a decoder makes every event's
 * args with room for every arg, and all but a few hundred of a trace's events carry only ids.
 *
 * share_values(events, start, field, shared) -> None: for events[start:], sets `field` to the equal
 * value kept in the dict `shared` (value -> itself), adding the ones it lacks: a decoder makes an
 * object per event of what repeats (operator names, thread and process ids). An event whose value equals
 * the one before's (an int or a str) takes that one's without a lookup.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "_slots.h"

enum { ROLE_HOST = 0, ROLE_RUNTIME = 1, ROLE_DEVICE = 2, ROLE_SYNC = 3 };

static PyObject *s_ph, *s_cat, *s_ts, *s_dur, *s_name, *s_args, *s_correlation, *s_tid;

/* Whether the event's phase is the complete phase "X" (a str, or a str enum member): 1, 0, or -1 on error. */
static int is_complete(PyObject *event) {
    PyObject *ph = field(event, s_ph);
    if (ph == NULL) return -1;
    int complete = PyUnicode_Check(ph) && PyUnicode_GET_LENGTH(ph) == 1 && PyUnicode_READ_CHAR(ph, 0) == 'X';
    Py_DECREF(ph);
    return complete;
}

/* A field as a double; -1 with an exception set when it is not a number. */
static int number_of(PyObject *event, PyObject *name, double *out) {
    PyObject *value = field(event, name);
    if (value == NULL) return -1;
    *out = PyFloat_CheckExact(value) ? PyFloat_AS_DOUBLE(value) : PyFloat_AsDouble(value);
    Py_DECREF(value);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

static PyObject *first_bad_time(PyObject *self, PyObject *events) {
    if (!PyList_Check(events)) {
        PyErr_SetString(PyExc_TypeError, "first_bad_time() takes a list of events");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(events); i++) {
        PyObject *event = PyList_GET_ITEM(events, i);
        int complete = is_complete(event);
        if (complete < 0) return NULL;
        if (!complete) continue;
        double ts, dur;
        if (number_of(event, s_ts, &ts) < 0 || number_of(event, s_dur, &dur) < 0) return NULL;
        /* false for NaN */
        if (!(ts >= 0 && ts < INFINITY && dur >= 0 && dur < INFINITY)) return PyLong_FromSsize_t(i);
    }
    return PyLong_FromLong(-1);
}

/* (cat, ph) pairs seen, with their counts: found by identity first (phases and categories are shared
 * members), then by value. */
typedef struct {
    PyObject *cat, *ph;
    Py_ssize_t count;
} Kind;

static PyObject *count_kinds(PyObject *self, PyObject *events) {
    if (!PyList_Check(events)) {
        PyErr_SetString(PyExc_TypeError, "count_kinds() takes a list of events");
        return NULL;
    }
    Py_ssize_t size = 0, capacity = 16;
    Kind *kinds = PyMem_Malloc(capacity * sizeof(Kind));
    PyObject *out = NULL;
    if (kinds == NULL) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(events); i++) {
        PyObject *event = PyList_GET_ITEM(events, i);
        PyObject *cat = field(event, s_cat);
        if (cat == NULL) goto done;
        PyObject *ph = field(event, s_ph);
        if (ph == NULL) {
            Py_DECREF(cat);
            goto done;
        }
        Py_ssize_t k = 0;
        while (k < size && !(kinds[k].cat == cat && kinds[k].ph == ph)) k++;
        if (k == size) { /* not the same objects: compare values */
            for (k = 0; k < size; k++) {
                int same = PyObject_RichCompareBool(kinds[k].cat, cat, Py_EQ);
                if (same > 0) same = PyObject_RichCompareBool(kinds[k].ph, ph, Py_EQ);
                if (same < 0) {
                    Py_DECREF(cat);
                    Py_DECREF(ph);
                    goto done;
                }
                if (same) break;
            }
        }
        if (k == size) {
            if (size == capacity) {
                Kind *grown = PyMem_Realloc(kinds, 2 * capacity * sizeof(Kind));
                if (grown == NULL) {
                    Py_DECREF(cat);
                    Py_DECREF(ph);
                    PyErr_NoMemory();
                    goto done;
                }
                kinds = grown;
                capacity *= 2;
            }
            kinds[size].cat = cat; /* keeps the references */
            kinds[size].ph = ph;
            kinds[size].count = 0;
            size++;
        } else {
            Py_DECREF(cat);
            Py_DECREF(ph);
        }
        kinds[k].count++;
    }
    out = PyDict_New();
    for (Py_ssize_t k = 0; out != NULL && k < size; k++) {
        PyObject *key = PyTuple_Pack(2, kinds[k].cat, kinds[k].ph);
        PyObject *count = key == NULL ? NULL : PyLong_FromSsize_t(kinds[k].count);
        PyObject *had = count == NULL ? NULL : PyDict_GetItemWithError(out, key);
        int failed = count == NULL || (had == NULL && PyErr_Occurred());
        if (!failed && had != NULL) { /* equal values met as other objects: add up */
            PyObject *sum = PyNumber_Add(had, count);
            Py_DECREF(count);
            count = sum;
            failed = sum == NULL;
        }
        if (!failed) failed = PyDict_SetItem(out, key, count) < 0;
        Py_XDECREF(key);
        Py_XDECREF(count);
        if (failed) Py_CLEAR(out);
    }
done:
    for (Py_ssize_t k = 0; k < size; k++) {
        Py_DECREF(kinds[k].cat);
        Py_DECREF(kinds[k].ph);
    }
    PyMem_Free(kinds);
    return out;
}

/* The event's correlation: a new reference to an int (not a bool), NULL without an exception when it
 * has none, NULL with one on error. */
static PyObject *correlation_of(PyObject *event) {
    PyObject *args = field(event, s_args);
    if (args == NULL) return NULL;
    PyObject *value = field(args, s_correlation);
    Py_DECREF(args);
    if (value == NULL) return NULL;
    if (PyLong_Check(value) && !PyBool_Check(value)) return value;
    Py_DECREF(value);
    return NULL;
}

/* Whether `name` is in the set `names`: 1, 0, or -1 on error. */
static int named(PyObject *names, PyObject *name) { return PySet_Contains(names, name); }

enum {
    OUT_HOST, OUT_LAUNCHES, OUT_DUPLICATES, OUT_SYNC_CALLS, OUT_RECORDS, OUT_OTHER_RUNTIME, OUT_DEVICE, OUT_SYNCS,
    OUT_MARKS, OUT_COUNT
};

/* Files one runtime call; 0, or -1 on error. */
static int sort_call(PyObject *event, PyObject **out, PyObject *launch_names, PyObject *sync_names,
                     PyObject *record_names, Py_ssize_t *other) {
    PyObject *name = field(event, s_name);
    if (name == NULL) return -1;
    int launch = named(launch_names, name);
    int sync = launch == 0 ? named(sync_names, name) : 0;
    int record = launch == 0 && sync == 0 ? named(record_names, name) : 0;
    Py_DECREF(name);
    if (launch < 0 || sync < 0 || record < 0) return -1;
    if (sync) return PyList_Append(out[OUT_SYNC_CALLS], event);
    if (record) return PyList_Append(out[OUT_RECORDS], event);
    if (!launch) return PyList_Append(out[OUT_OTHER_RUNTIME], event);
    PyObject *correlation = correlation_of(event);
    if (correlation == NULL) {
        if (PyErr_Occurred()) return -1;
        (*other)++;
        return 0;
    }
    int seen = PyDict_Contains(out[OUT_LAUNCHES], correlation);
    int status = seen < 0    ? -1
                 : seen > 0 ? PyList_Append(out[OUT_DUPLICATES], correlation)
                             : PyDict_SetItem(out[OUT_LAUNCHES], correlation, event);
    Py_DECREF(correlation);
    return status;
}

/* Appends the event to `marks` when its name starts with `prefix`; 0, or -1 on error. */
static int append_mark(PyObject *event, PyObject *prefix, PyObject *marks) {
    PyObject *name = field(event, s_name);
    if (name == NULL) return -1;
    Py_ssize_t starts = PyUnicode_Check(name) ? PyUnicode_Tailmatch(name, prefix, 0, PY_SSIZE_T_MAX, -1) : 0;
    int status = starts < 0 ? -1 : starts ? PyList_Append(marks, event) : 0;
    Py_DECREF(name);
    return status;
}

static PyObject *sort_roles(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 6 || !PyList_Check(argv[0]) || !PyDict_Check(argv[1]) || !PyAnySet_Check(argv[2]) ||
        !PyAnySet_Check(argv[3]) || !PyAnySet_Check(argv[4]) || !PyUnicode_Check(argv[5])) {
        PyErr_SetString(PyExc_TypeError,
                        "sort_roles(events, roles, launch_names, sync_names, record_names, mark_prefix)");
        return NULL;
    }
    PyObject *events = argv[0], *roles = argv[1];
    PyObject *out[OUT_COUNT] = {NULL};
    Py_ssize_t other = 0;
    for (int k = 0; k < OUT_COUNT; k++) {
        out[k] = k == OUT_LAUNCHES ? PyDict_New() : PyList_New(0);
        if (out[k] == NULL) goto fail;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(events); i++) {
        PyObject *event = PyList_GET_ITEM(events, i);
        int complete = is_complete(event);
        if (complete < 0) goto fail;
        if (!complete) {
            other++;
            continue;
        }
        PyObject *cat = field(event, s_cat);
        if (cat == NULL) goto fail;
        PyObject *role = PyDict_GetItemWithError(roles, cat); /* borrowed */
        Py_DECREF(cat);
        if (role == NULL && PyErr_Occurred()) goto fail;
        long code = role == NULL ? -1 : PyLong_AsLong(role);
        if (code == -1 && PyErr_Occurred()) goto fail;
        int status = 0;
        switch (code) {
            case ROLE_HOST:
                status = PyList_Append(out[OUT_HOST], event);
                if (status == 0) status = append_mark(event, argv[5], out[OUT_MARKS]);
                break;
            case ROLE_RUNTIME:
                status = sort_call(event, out, argv[2], argv[3], argv[4], &other);
                break;
            case ROLE_DEVICE: status = PyList_Append(out[OUT_DEVICE], event); break;
            case ROLE_SYNC: status = PyList_Append(out[OUT_SYNCS], event); break;
            default: other++;
        }
        if (status < 0) goto fail;
    }
    return Py_BuildValue("(NNNNNNNNnN)", out[OUT_HOST], out[OUT_LAUNCHES], out[OUT_DUPLICATES], out[OUT_SYNC_CALLS],
                         out[OUT_RECORDS], out[OUT_OTHER_RUNTIME], out[OUT_DEVICE], out[OUT_SYNCS], other,
                         out[OUT_MARKS]);
fail:
    for (int k = 0; k < OUT_COUNT; k++) Py_XDECREF(out[k]);
    return NULL;
}

typedef struct {
    double ts, dur;
    Py_ssize_t index;
    PyObject *event;
} Timed;

/* -1, 0 or 1 as a < b, with NaN after every number and equal to itself. */
static int compare_numbers(double a, double b) {
    if (isnan(a) || isnan(b)) return isnan(a) - isnan(b);
    return (a > b) - (a < b);
}

static int by_start(const void *left, const void *right) {
    const Timed *a = left, *b = right;
    int order = compare_numbers(a->ts, b->ts);
    if (order == 0) order = compare_numbers(b->dur, a->dur);
    return order != 0 ? order : (a->index > b->index) - (a->index < b->index);
}

/* Sorts `timed` by by_start: merges its ascending runs, pair by pair (a trace's events are a few runs,
 * one per thread, already in order: a sort that finds them does little more than read them). */
static int merge_runs(Timed *timed, Py_ssize_t size) {
    Py_ssize_t *bounds = PyMem_Malloc((size + 2) * sizeof(Py_ssize_t)), runs = 0;
    Timed *spare = size > 1 ? PyMem_Malloc(size * sizeof(Timed)) : NULL;
    if (bounds == NULL || (size > 1 && spare == NULL)) {
        PyMem_Free(bounds);
        PyMem_Free(spare);
        return -1;
    }
    bounds[runs++] = 0;
    for (Py_ssize_t i = 1; i < size; i++)
        if (by_start(&timed[i - 1], &timed[i]) > 0) bounds[runs++] = i;
    bounds[runs] = size;
    Timed *from = timed, *to = spare;
    while (runs > 1) {
        Py_ssize_t merged = 0;
        for (Py_ssize_t r = 0; r < runs; r += 2) {
            Py_ssize_t left = bounds[r], middle = bounds[r + 1], right = r + 2 <= runs ? bounds[r + 2] : middle;
            Py_ssize_t a = left, b = middle, out = left;
            while (a < middle && b < right) to[out++] = by_start(&from[b], &from[a]) < 0 ? from[b++] : from[a++];
            while (a < middle) to[out++] = from[a++];
            while (b < right) to[out++] = from[b++];
            bounds[merged++] = left;
        }
        bounds[merged] = size;
        runs = merged;
        Timed *swap = from;
        from = to;
        to = swap;
    }
    if (from != timed) memcpy(timed, from, size * sizeof(Timed));
    PyMem_Free(bounds);
    PyMem_Free(spare);
    return 0;
}

static PyObject *sort_by_start(PyObject *self, PyObject *events) {
    if (!PyList_Check(events)) {
        PyErr_SetString(PyExc_TypeError, "sort_by_start() takes a list of events");
        return NULL;
    }
    Py_ssize_t size = PyList_GET_SIZE(events);
    Timed *timed = PyMem_Malloc((size ? size : 1) * sizeof(Timed));
    if (timed == NULL) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < size; i++) {
        PyObject *event = PyList_GET_ITEM(events, i);
        timed[i].index = i;
        timed[i].event = event;
        if (number_of(event, s_ts, &timed[i].ts) < 0 || number_of(event, s_dur, &timed[i].dur) < 0) {
            PyMem_Free(timed);
            return NULL;
        }
    }
    if (PyList_GET_SIZE(events) != size) { /* a field's getter changed the list */
        PyMem_Free(timed);
        PyErr_SetString(PyExc_RuntimeError, "the list changed while sorted");
        return NULL;
    }
    if (merge_runs(timed, size) < 0) {
        PyMem_Free(timed);
        return PyErr_NoMemory();
    }
    /* a permutation of the list's own items: their references stay with the list */
    for (Py_ssize_t i = 0; i < size; i++) PyList_SET_ITEM(events, i, timed[i].event);
    PyMem_Free(timed);
    Py_RETURN_NONE;
}

/* The doubles of a list of numbers, in a new PyMem block (NULL with an exception on error). */
static double *doubles_of(PyObject *list) {
    Py_ssize_t size = PyList_GET_SIZE(list);
    double *out = PyMem_Malloc((size ? size : 1) * sizeof(double));
    if (out == NULL) return (double *)PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < size; i++) {
        out[i] = PyFloat_AsDouble(PyList_GET_ITEM(list, i));
        if (out[i] == -1.0 && PyErr_Occurred()) {
            PyMem_Free(out);
            return NULL;
        }
    }
    return out;
}

/* The step of a call starting at `ts_us`: the last one starting at or before it, if it ends after it; or -1. */
static Py_ssize_t step_at(const double *starts, const double *ends, Py_ssize_t steps, double ts_us) {
    Py_ssize_t low = 0, high = steps; /* the first start after ts_us, by bisection */
    while (low < high) {
        Py_ssize_t middle = (low + high) / 2;
        if (ts_us < starts[middle])
            high = middle;
        else
            low = middle + 1;
    }
    return low > 0 && ts_us < ends[low - 1] ? low - 1 : -1;
}

/* A new tuple of two lists: `floats` as floats and `ints` as ints, `size` of each. */
static PyObject *two_lists(const double *floats, const Py_ssize_t *ints, Py_ssize_t size) {
    PyObject *float_list = PyList_New(size), *int_list = PyList_New(size), *out = NULL;
    for (Py_ssize_t k = 0; float_list && int_list && k < size; k++) {
        PyObject *number = PyFloat_FromDouble(floats[k]), *count = PyLong_FromSsize_t(ints[k]);
        if (number == NULL || count == NULL) {
            Py_XDECREF(number);
            Py_XDECREF(count);
            Py_CLEAR(float_list);
            break;
        }
        PyList_SET_ITEM(float_list, k, number);
        PyList_SET_ITEM(int_list, k, count);
    }
    if (float_list && int_list) out = PyTuple_Pack(2, float_list, int_list);
    Py_XDECREF(float_list);
    Py_XDECREF(int_list);
    return out;
}

static PyObject *step_spans(PyObject *self, PyObject *args) {
    PyObject *launches, *device_ops, *start_list, *end_list;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &PyDict_Type, &launches, &PyList_Type, &device_ops, &PyList_Type,
                          &start_list, &PyList_Type, &end_list))
        return NULL;
    Py_ssize_t steps = PyList_GET_SIZE(start_list);
    if (PyList_GET_SIZE(end_list) != steps) {
        PyErr_SetString(PyExc_ValueError, "step_spans() takes as many ends as starts");
        return NULL;
    }
    double *starts = doubles_of(start_list), *spans = doubles_of(end_list), *ends = doubles_of(end_list);
    Py_ssize_t *missing = PyMem_Calloc(steps ? steps : 1, sizeof(Py_ssize_t));
    PyObject *launched = PyDict_New(), *done = PySet_New(NULL), *launch_word = PyUnicode_FromString("Launch");
    PyObject *out = NULL, *correlation, *value;
    Py_ssize_t position = 0;
    if (!starts || !spans || !ends || !missing || !launched || !done || !launch_word) goto finally;
    while (PyDict_Next(launches, &position, &correlation, &value)) {
        double ts;
        if (number_of(value, s_ts, &ts) < 0) goto finally;
        Py_ssize_t step = step_at(starts, ends, steps, ts);
        if (step < 0) continue;
        PyObject *number = PyLong_FromSsize_t(step);
        int status = number == NULL ? -1 : PyDict_SetItem(launched, correlation, number);
        Py_XDECREF(number);
        if (status < 0) goto finally;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(device_ops); i++) {
        PyObject *activity = PyList_GET_ITEM(device_ops, i);
        correlation = correlation_of(activity);
        if (correlation == NULL) {
            if (PyErr_Occurred()) goto finally;
            continue;
        }
        PyObject *number = PyDict_GetItemWithError(launched, correlation); /* borrowed */
        double ts, dur;
        int status = number == NULL ? (PyErr_Occurred() ? -1 : 0) : 1;
        if (status > 0) {
            Py_ssize_t step = PyLong_AsSsize_t(number);
            status = number_of(activity, s_ts, &ts) < 0 || number_of(activity, s_dur, &dur) < 0 ? -1 : 1;
            if (status > 0 && ts + dur > spans[step]) spans[step] = ts + dur;
            if (status > 0) status = PySet_Add(done, correlation);
        }
        Py_DECREF(correlation);
        if (status < 0) goto finally;
    }
    position = 0;
    while (PyList_GET_SIZE(device_ops) > 0 && PyDict_Next(launched, &position, &correlation, &value)) {
        /* a copy or memset may be done by the host alone (pinned memory): only kernels must show */
        PyObject *call = PyDict_GetItemWithError(launches, correlation); /* borrowed */
        if (call == NULL) {
            if (PyErr_Occurred()) goto finally;
            continue;
        }
        PyObject *name = field(call, s_name);
        if (name == NULL) goto finally;
        int kernel = PyUnicode_Check(name) ? PyUnicode_Contains(name, launch_word) : 0;
        Py_DECREF(name);
        int seen = kernel > 0 ? PySet_Contains(done, correlation) : 0;
        if (kernel < 0 || seen < 0) goto finally;
        if (kernel && !seen) missing[PyLong_AsSsize_t(value)]++;
    }
    out = two_lists(spans, missing, steps);
finally:
    PyMem_Free(starts);
    PyMem_Free(spans);
    PyMem_Free(ends);
    PyMem_Free(missing);
    Py_XDECREF(launched);
    Py_XDECREF(done);
    Py_XDECREF(launch_word);
    return out;
}

static PyObject *window_work(PyObject *self, PyObject *args) {
    PyObject *activities, *kept, *known, *launches;
    double start_us, end_us;
    int earlier;
    if (!PyArg_ParseTuple(args, "O!OOO!ddp", &PyList_Type, &activities, &kept, &known, &PyDict_Type, &launches,
                          &start_us, &end_us, &earlier))
        return NULL;
    if (!PyAnySet_Check(kept) || !PyAnySet_Check(known)) {
        PyErr_SetString(PyExc_TypeError, "window_work() takes sets of kept and known correlations");
        return NULL;
    }
    PyObject *selected = PyList_New(0);
    Py_ssize_t earlier_count = 0;
    if (selected == NULL) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(activities); i++) {
        PyObject *activity = PyList_GET_ITEM(activities, i);
        PyObject *correlation = correlation_of(activity);
        if (correlation == NULL && PyErr_Occurred()) goto fail;
        int is_known = correlation == NULL ? 0 : PySet_Contains(known, correlation);
        int is_kept = is_known > 0 ? PySet_Contains(kept, correlation) : 0;
        int take = 0; /* 1: of the window, 2: launched before it, ran in it */
        double ts, dur;
        if (is_known < 0 || is_kept < 0 || number_of(activity, s_ts, &ts) < 0) {
            Py_XDECREF(correlation);
            goto fail;
        }
        if (!is_known) {
            take = start_us <= ts && ts < end_us;
        } else if (is_kept) {
            take = 1;
        } else if (earlier && ts < end_us) {
            PyObject *call = PyDict_GetItemWithError(launches, correlation); /* borrowed */
            double launched_us;
            if (call == NULL && PyErr_Occurred()) {
                Py_DECREF(correlation);
                goto fail;
            }
            if (call != NULL) {
                if (number_of(call, s_ts, &launched_us) < 0 || number_of(activity, s_dur, &dur) < 0) {
                    Py_DECREF(correlation);
                    goto fail;
                }
                take = launched_us < start_us && ts + dur > start_us ? 2 : 0;
            }
        }
        Py_XDECREF(correlation);
        if (take && PyList_Append(selected, activity) < 0) goto fail;
        earlier_count += take == 2;
    }
    return Py_BuildValue("(Nn)", selected, earlier_count);
fail:
    Py_DECREF(selected);
    return NULL;
}

static PyObject *nest_by_thread(PyObject *self, PyObject *events) {
    if (!PyList_Check(events)) {
        PyErr_SetString(PyExc_TypeError, "nest_by_thread() takes a list of events");
        return NULL;
    }
    Py_ssize_t size = PyList_GET_SIZE(events), slots = size ? size : 1;
    double *exclusive = PyMem_Malloc(slots * sizeof(double)), *ends = PyMem_Malloc(slots * sizeof(double));
    Py_ssize_t *parents = PyMem_Malloc(slots * sizeof(Py_ssize_t)), *below = PyMem_Malloc(slots * sizeof(Py_ssize_t));
    Py_ssize_t *tops = PyMem_Malloc(slots * sizeof(Py_ssize_t)); /* the open events of each thread: a stack */
    char *has_children = PyMem_Malloc(slots);
    PyObject *threads = PyDict_New(), *out = NULL;
    if (!exclusive || !ends || !parents || !below || !tops || !has_children || !threads) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto finally;
    }
    for (Py_ssize_t i = 0; i < size; i++) {
        PyObject *event = PyList_GET_ITEM(events, i);
        double ts, dur;
        if (number_of(event, s_ts, &ts) < 0 || number_of(event, s_dur, &dur) < 0) goto finally;
        PyObject *tid = field(event, s_tid);
        if (tid == NULL) goto finally;
        PyObject *known = PyDict_GetItemWithError(threads, tid); /* borrowed */
        Py_ssize_t thread = known != NULL ? PyLong_AsSsize_t(known) : PyDict_GET_SIZE(threads);
        int status = 0;
        if (known == NULL && !PyErr_Occurred()) {
            PyObject *number = PyLong_FromSsize_t(thread);
            status = number == NULL ? -1 : PyDict_SetItem(threads, tid, number);
            Py_XDECREF(number);
            tops[thread] = -1;
        }
        Py_DECREF(tid);
        if (status < 0 || PyErr_Occurred()) goto finally;
        while (tops[thread] >= 0 && ts >= ends[tops[thread]]) tops[thread] = below[tops[thread]];
        exclusive[i] = dur;
        ends[i] = ts + dur;
        Py_ssize_t parent = tops[thread];
        parents[i] = parent;
        has_children[i] = 0;
        if (parent >= 0) {
            double inside = ends[parent] - ts; /* a child outlasting its parent counts to the parent's end */
            exclusive[parent] -= inside < dur ? inside : dur;
            has_children[parent] = 1;
        }
        below[i] = parent;
        tops[thread] = i;
    }
    for (Py_ssize_t i = 0; i < size; i++)
        if (0.0 > exclusive[i]) exclusive[i] = 0.0;
    out = two_lists(exclusive, parents, size);
    /* an event without children keeps its own dur object: the timings built from these share it
     * with the event, as they share its ts (no float per op beside the event's own) */
    PyObject *excl_list = out == NULL ? NULL : PyTuple_GET_ITEM(out, 0);
    for (Py_ssize_t i = 0; excl_list != NULL && i < size; i++) {
        if (has_children[i]) continue;
        PyObject *dur = field(PyList_GET_ITEM(events, i), s_dur);
        if (dur == NULL) {
            Py_CLEAR(out);
            break;
        }
        if (PyFloat_CheckExact(dur) && PyFloat_AS_DOUBLE(dur) == exclusive[i])
            PyList_SetItem(excl_list, i, dur); /* steals the reference, frees the float it replaces */
        else
            Py_DECREF(dur);
    }
finally:
    Py_XDECREF(threads);
    PyMem_Free(exclusive);
    PyMem_Free(ends);
    PyMem_Free(parents);
    PyMem_Free(below);
    PyMem_Free(tops);
    PyMem_Free(has_children);
    return out;
}

static PyObject *join_index(PyObject *self, PyObject *args) {
    PyObject *events, *id_field;
    if (!PyArg_ParseTuple(args, "O!U", &PyList_Type, &events, &id_field)) return NULL;
    Py_INCREF(id_field); /* interned: the slot cache compares names by identity */
    PyUnicode_InternInPlace(&id_field);
    int skip_zero = PyUnicode_CompareWithASCIIString(id_field, "rf_id") == 0;
    PyObject *first = PyDict_New();
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; first != NULL && i < PyList_GET_SIZE(events); i++) {
        PyObject *event_args = field(PyList_GET_ITEM(events, i), s_args);
        PyObject *value = event_args == NULL ? NULL : field(event_args, id_field);
        Py_XDECREF(event_args);
        int status = value == NULL ? -1 : 0;
        if (value != NULL && PyLong_Check(value) && !PyBool_Check(value)) {
            int zero = skip_zero ? !PyObject_IsTrue(value) : 0;
            if (!zero) {
                count++;
                PyObject *index = PyLong_FromSsize_t(i);
                status = index == NULL || PyDict_SetDefault(first, value, index) == NULL ? -1 : 0;
                Py_XDECREF(index);
            }
        }
        Py_XDECREF(value);
        if (status < 0) Py_CLEAR(first);
    }
    Py_DECREF(id_field);
    return first == NULL ? NULL : Py_BuildValue("(Nn)", first, count);
}

/* Whether `value` and `other` are equal ints or equal strs (exact types: no Python code runs): the events
 * of one thread come in runs, and a dict lookup per event was most of the pass. */
static inline int same_int_or_str(PyObject *value, PyObject *other) {
    if (Py_TYPE(value) != Py_TYPE(other)) return 0;
    if (PyLong_CheckExact(value)) {
        int overflow_a, overflow_b;
        long long a = PyLong_AsLongLongAndOverflow(value, &overflow_a), b = PyLong_AsLongLongAndOverflow(other, &overflow_b);
        return !overflow_a && !overflow_b && a == b && !PyErr_Occurred();
    }
    return PyUnicode_CheckExact(value) && PyUnicode_Compare(value, other) == 0;
}

static PyObject *share_values(PyObject *self, PyObject *args) {
    PyObject *events, *attribute, *shared;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "O!nUO!", &PyList_Type, &events, &start, &attribute, &PyDict_Type, &shared))
        return NULL;
    Py_INCREF(attribute); /* interned: the slot cache compares names by identity */
    PyUnicode_InternInPlace(&attribute);
    int failed = 0;
    /* held, the event and the value kept for the one before: a getattr or a comparison may run Python code
     * that changes the list or the dict */
    PyObject *last = NULL;
    for (Py_ssize_t i = start < 0 ? 0 : start; i < PyList_GET_SIZE(events); i++) {
        PyObject *event = Py_NewRef(PyList_GET_ITEM(events, i));
        PyObject *value = field(event, attribute), *kept = NULL;
        if (value != NULL && last != NULL && (value == last || same_int_or_str(value, last))) {
            kept = Py_NewRef(last);
        } else if (value != NULL && (kept = Py_XNewRef(PyDict_SetDefault(shared, value, value))) != NULL) {
            Py_XSETREF(last, Py_NewRef(kept));
        }
        int status = kept == NULL ? -1 : kept == value ? 0 : set_field(event, attribute, kept);
        Py_XDECREF(kept);
        Py_XDECREF(value);
        Py_DECREF(event);
        if (status < 0) {
            failed = 1;
            break;
        }
    }
    Py_XDECREF(last);
    Py_DECREF(attribute);
    if (failed) return NULL;
    Py_RETURN_NONE;
}

#define SLIM_FIELDS_MAX 16
#define ABSENT_MAX 32
#define FULL_TYPES_MAX 4

/* How slim_args reads the args of one full type: the slots of the slim fields, and of the fields that must
 * hold their absent value (a field without a slot is a class attribute, the same for every event: it was
 * checked once, `slimmable` 0 where it is not absent). */
typedef struct {
    PyTypeObject *type;
    int slimmable;
    Py_ssize_t slim_at[SLIM_FIELDS_MAX], absent_at[ABSENT_MAX];
} FullType;

/* The slim args of `args` (of `full`), or NULL (with no exception) where a field must hold its absent value
 * and does not, or a slot is unset; -1 in *failed with an exception. A new reference. */
static PyObject *slim_of(PyObject *args, const FullType *full, Py_ssize_t n_slim, PyObject *const *absent,
                         Py_ssize_t n_absent, PyObject *slim_type, PyObject *empty, int *failed) {
    for (Py_ssize_t k = 0; k < n_absent; k++) {
        if (full->absent_at[k] < 0) continue;
        if (*(PyObject **)((char *)args + full->absent_at[k]) != absent[k]) return NULL;
    }
    PyObject *values[SLIM_FIELDS_MAX];
    int any = 0;
    for (Py_ssize_t k = 0; k < n_slim; k++) {
        values[k] = *(PyObject **)((char *)args + full->slim_at[k]); /* borrowed: the args hold them */
        if (values[k] == NULL) return NULL;
        any |= values[k] != Py_None;
    }
    if (!any) return Py_NewRef(empty);
    PyObject *slim = PyObject_Vectorcall(slim_type, values, n_slim, NULL);
    if (slim == NULL) *failed = 1;
    return slim;
}

/* The slots of `type` for slim_args (see FullType): 0, or -1 with an exception. */
static int full_type_of(PyTypeObject *type, PyObject *names, PyObject *absent_names, PyObject *const *absent,
                        FullType *full) {
    full->type = type;
    full->slimmable = 1;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(names) && full->slimmable; k++)
        full->slimmable = (full->slim_at[k] = type_slot_offset(type, PyTuple_GET_ITEM(names, k))) >= 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(absent_names) && full->slimmable; k++) {
        if ((full->absent_at[k] = type_slot_offset(type, PyTuple_GET_ITEM(absent_names, k))) >= 0) continue;
        PyObject *shared = PyObject_GetAttr((PyObject *)type, PyTuple_GET_ITEM(absent_names, k));
        if (shared == NULL) return -1;
        full->slimmable = shared == absent[k];
        Py_DECREF(shared);
    }
    return 0;
}

static PyObject *slim_args(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *events, *full_types, *slim_type, *absent_given;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "O!nO!OO!:slim_args", &PyList_Type, &events, &start, &PyTuple_Type, &full_types,
                          &slim_type, &PyDict_Type, &absent_given))
        return NULL;
    if (PyTuple_GET_SIZE(full_types) > FULL_TYPES_MAX || PyDict_GET_SIZE(absent_given) > ABSENT_MAX) {
        PyErr_SetString(PyExc_ValueError, "slim_args: too many full types or absent fields");
        return NULL;
    }
    PyObject *fields = PyObject_GetAttrString(slim_type, "__struct_fields__");
    PyObject *names = fields == NULL ? NULL : interned_names(fields, SLIM_FIELDS_MAX, "slim_args");
    PyObject *keys = PyDict_Keys(absent_given), *key_tuple = keys == NULL ? NULL : PyList_AsTuple(keys);
    PyObject *absent_names = key_tuple == NULL ? NULL : interned_names(key_tuple, ABSENT_MAX, "slim_args");
    PyObject *absent[ABSENT_MAX], *empty = NULL, *result = NULL;
    FullType full[FULL_TYPES_MAX];
    Py_ssize_t n_full = PyTuple_GET_SIZE(full_types), n_absent = 0;
    if (names == NULL || absent_names == NULL || (empty = PyObject_CallNoArgs(slim_type)) == NULL) goto done;
    for (; n_absent < PyTuple_GET_SIZE(absent_names); n_absent++) /* borrowed: absent_given holds them */
        absent[n_absent] = PyDict_GetItem(absent_given, PyTuple_GET_ITEM(key_tuple, n_absent));
    for (Py_ssize_t t = 0; t < n_full; t++) {
        PyObject *type = PyTuple_GET_ITEM(full_types, t);
        if (!PyType_Check(type)) {
            PyErr_SetString(PyExc_TypeError, "slim_args: full_types must be types");
            goto done;
        }
        if (full_type_of((PyTypeObject *)type, names, absent_names, absent, &full[t]) < 0) goto done;
    }
    for (Py_ssize_t i = start < 0 ? 0 : start; i < PyList_GET_SIZE(events); i++) {
        /* held: a getattr or a slim type's constructor may run Python code that changes the list */
        PyObject *event = Py_NewRef(PyList_GET_ITEM(events, i)), *event_args = field(event, s_args);
        if (event_args == NULL) {
            Py_DECREF(event);
            goto done;
        }
        const FullType *of = NULL;
        for (Py_ssize_t t = 0; t < n_full && of == NULL; t++)
            if (Py_TYPE(event_args) == full[t].type && full[t].slimmable) of = &full[t];
        int failed = 0, status = 0;
        PyObject *slim = of == NULL ? NULL
                                    : slim_of(event_args, of, PyTuple_GET_SIZE(names), absent, n_absent, slim_type,
                                              empty, &failed);
        if (slim != NULL) status = set_field(event, s_args, slim);
        Py_XDECREF(slim);
        Py_DECREF(event_args);
        Py_DECREF(event);
        if (failed || status < 0) goto done;
    }
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(fields);
    Py_XDECREF(names);
    Py_XDECREF(keys);
    Py_XDECREF(key_tuple);
    Py_XDECREF(absent_names);
    Py_XDECREF(empty);
    return result;
}

static PyMethodDef methods[] = {
    {"first_bad_time", first_bad_time, METH_O, "Index of the first complete event without a valid ts/dur, or -1."},
    {"count_kinds", count_kinds, METH_O, "(cat, ph) -> number of events."},
    {"sort_roles", (PyCFunction)(void (*)(void))sort_roles, METH_FASTCALL, "The complete events by role."},
    {"sort_by_start", sort_by_start, METH_O, "Sorts events by ts, then longer dur first, then list order."},
    {"step_spans", step_spans, METH_VARARGS, "Each step's end of work and its launches without device work."},
    {"window_work", window_work, METH_VARARGS, "The device work of a window, and how much ran in it from before."},
    {"nest_by_thread", nest_by_thread, METH_O, "Each host event's exclusive time and parent index."},
    {"join_index", join_index, METH_VARARGS, "The first event of each id value, and how many have one."},
    {"share_values", share_values, METH_VARARGS, "Sets a field of events[start:] to the equal value kept in a dict."},
    {"slim_args", slim_args, METH_VARARGS, "Sets the args of events[start:] that carry only ids to slim ones."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kineto_events", NULL, -1, methods};

PyMODINIT_FUNC PyInit__kineto_events(void) {
    static const Interned names[] = {
        {&s_ph, "ph"},     {&s_cat, "cat"},   {&s_ts, "ts"},   {&s_dur, "dur"}, {&s_name, "name"},
        {&s_args, "args"}, {&s_correlation, "correlation"}, {&s_tid, "tid"},
    };
    if (intern_all(names, sizeof names / sizeof names[0]) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "ROLE_HOST", ROLE_HOST) < 0 ||
        PyModule_AddIntConstant(m, "ROLE_RUNTIME", ROLE_RUNTIME) < 0 ||
        PyModule_AddIntConstant(m, "ROLE_DEVICE", ROLE_DEVICE) < 0 ||
        PyModule_AddIntConstant(m, "ROLE_SYNC", ROLE_SYNC) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
