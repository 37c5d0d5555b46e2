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
 * sort_roles(events, roles, launch_names, sync_names, record_names) -> (host_ops, launches, duplicates,
 * sync_calls, event_records, other_runtime, device_ops, syncs, other): the complete events by role, in
 * file order. `roles` maps a category to ROLE_HOST, ROLE_RUNTIME, ROLE_DEVICE or ROLE_SYNC (others have
 * none). A runtime call named in `launch_names` goes to `launches` (dict correlation -> event; a
 * correlation seen before is appended to `duplicates`, an event without an integer correlation counts
 * as other), one in `sync_names` to sync_calls, in `record_names` to event_records, any other to
 * other_runtime. `other` counts the events of no role.
 *
 * sort_by_start(events) -> None: sorts the list in place by ts, then longer dur first, then list order
 * (a NaN after every number).
 *
 * share_values(events, start, field, shared) -> None: for events[start:], sets `field` to the equal
 * value kept in the dict `shared` (value -> itself), adding the ones it lacks: a decoder makes an
 * object per event of what repeats (operator names, thread ids).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdlib.h>

enum { ROLE_HOST = 0, ROLE_RUNTIME = 1, ROLE_DEVICE = 2, ROLE_SYNC = 3 };

static PyObject *s_ph, *s_cat, *s_ts, *s_dur, *s_name, *s_args, *s_correlation;

/* Whether the event's phase is the complete phase "X" (a str, or a str enum member): 1, 0, or -1 on error. */
static int is_complete(PyObject *event) {
    PyObject *ph = PyObject_GetAttr(event, s_ph);
    if (ph == NULL) return -1;
    int complete = PyUnicode_Check(ph) && PyUnicode_GET_LENGTH(ph) == 1 && PyUnicode_READ_CHAR(ph, 0) == 'X';
    Py_DECREF(ph);
    return complete;
}

/* A field as a double; -1 with an exception set when it is not a number. */
static int number_of(PyObject *event, PyObject *field, double *out) {
    PyObject *value = PyObject_GetAttr(event, field);
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
        PyObject *cat = PyObject_GetAttr(event, s_cat);
        if (cat == NULL) goto done;
        PyObject *ph = PyObject_GetAttr(event, s_ph);
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
    PyObject *args = PyObject_GetAttr(event, s_args);
    if (args == NULL) return NULL;
    PyObject *value = PyObject_GetAttr(args, s_correlation);
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
    OUT_COUNT
};

/* Files one runtime call; 0, or -1 on error. */
static int sort_call(PyObject *event, PyObject **out, PyObject *launch_names, PyObject *sync_names,
                     PyObject *record_names, Py_ssize_t *other) {
    PyObject *name = PyObject_GetAttr(event, s_name);
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

static PyObject *sort_roles(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 5 || !PyList_Check(argv[0]) || !PyDict_Check(argv[1]) || !PyAnySet_Check(argv[2]) ||
        !PyAnySet_Check(argv[3]) || !PyAnySet_Check(argv[4])) {
        PyErr_SetString(PyExc_TypeError, "sort_roles(events, roles, launch_names, sync_names, record_names)");
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
        PyObject *cat = PyObject_GetAttr(event, s_cat);
        if (cat == NULL) goto fail;
        PyObject *role = PyDict_GetItemWithError(roles, cat); /* borrowed */
        Py_DECREF(cat);
        if (role == NULL && PyErr_Occurred()) goto fail;
        long code = role == NULL ? -1 : PyLong_AsLong(role);
        if (code == -1 && PyErr_Occurred()) goto fail;
        int status = 0;
        switch (code) {
            case ROLE_HOST: status = PyList_Append(out[OUT_HOST], event); break;
            case ROLE_RUNTIME:
                status = sort_call(event, out, argv[2], argv[3], argv[4], &other);
                break;
            case ROLE_DEVICE: status = PyList_Append(out[OUT_DEVICE], event); break;
            case ROLE_SYNC: status = PyList_Append(out[OUT_SYNCS], event); break;
            default: other++;
        }
        if (status < 0) goto fail;
    }
    return Py_BuildValue("(NNNNNNNNn)", out[OUT_HOST], out[OUT_LAUNCHES], out[OUT_DUPLICATES], out[OUT_SYNC_CALLS],
                         out[OUT_RECORDS], out[OUT_OTHER_RUNTIME], out[OUT_DEVICE], out[OUT_SYNCS], other);
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
    qsort(timed, size, sizeof(Timed), by_start);
    /* a permutation of the list's own items: their references stay with the list */
    for (Py_ssize_t i = 0; i < size; i++) PyList_SET_ITEM(events, i, timed[i].event);
    PyMem_Free(timed);
    Py_RETURN_NONE;
}

static PyObject *share_values(PyObject *self, PyObject *args) {
    PyObject *events, *field, *shared;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "O!nUO!", &PyList_Type, &events, &start, &field, &PyDict_Type, &shared))
        return NULL;
    for (Py_ssize_t i = start < 0 ? 0 : start; i < PyList_GET_SIZE(events); i++) {
        PyObject *event = PyList_GET_ITEM(events, i);
        PyObject *value = PyObject_GetAttr(event, field);
        if (value == NULL) return NULL;
        PyObject *kept = PyDict_SetDefault(shared, value, value); /* borrowed */
        int status = kept == NULL ? -1 : kept == value ? 0 : PyObject_SetAttr(event, field, kept);
        Py_DECREF(value);
        if (status < 0) return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"first_bad_time", first_bad_time, METH_O, "Index of the first complete event without a valid ts/dur, or -1."},
    {"count_kinds", count_kinds, METH_O, "(cat, ph) -> number of events."},
    {"sort_roles", (PyCFunction)(void (*)(void))sort_roles, METH_FASTCALL, "The complete events by role."},
    {"sort_by_start", sort_by_start, METH_O, "Sorts events by ts, then longer dur first, then list order."},
    {"share_values", share_values, METH_VARARGS, "Sets a field of events[start:] to the equal value kept in a dict."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kineto_events", NULL, -1, methods};

PyMODINIT_FUNC PyInit__kineto_events(void) {
    s_ph = PyUnicode_InternFromString("ph");
    s_cat = PyUnicode_InternFromString("cat");
    s_ts = PyUnicode_InternFromString("ts");
    s_dur = PyUnicode_InternFromString("dur");
    s_name = PyUnicode_InternFromString("name");
    s_args = PyUnicode_InternFromString("args");
    s_correlation = PyUnicode_InternFromString("correlation");
    if (!s_ph || !s_cat || !s_ts || !s_dur || !s_name || !s_args || !s_correlation) return NULL;
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
