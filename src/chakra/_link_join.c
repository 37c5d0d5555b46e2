/*
 * chakra._link_join: the join of a host trace's ops with the Kineto trace's host events, in C (see
 * chakra/pytorch/link.py). A host trace holds a hundred thousand ops or more; reading a few fields of
 * each and making its timing in Python was a tenth of a conversion.
 *
 * join_host_ops(nodes, skip_names, index_of, events, exclusive_us, timing_type) -> (timing, host_of_event,
 * considered, joined, agree, unmatched): for each host node (`id`, `name`, `rf_id`) whose name is not in
 * `skip_names`, the Kineto event `events[index_of[rf_id]]` (`ts`, `dur`, `tid`, `name`) when its rf_id
 * is non-zero and in `index_of`. `timing` maps the node's id to timing_type(ts, dur, exclusive_us[at],
 * tid) in node order; `host_of_event` maps id() of each joined event to the id of the last node joined to
 * it; `considered` counts the nodes not skipped, `joined` those joined, `agree` those whose event has
 * the same name; `unmatched` lists the nodes considered but not joined, in node order. IndexError for
 * an index that is not one of `events` (negative ones included).
 */
#include "_slots.h"

static PyObject *s_id, *s_name, *s_rf_id, *s_ts, *s_dur, *s_tid;

/* The event joined to `node` (borrowed) and its index, or NULL with `*at` -1 when there is none;
 * -1 returned with an exception. */
static int joined_event(PyObject *node, PyObject *index_of, PyObject *events, Py_ssize_t *at) {
    *at = -1;
    PyObject *rf_id = field(node, s_rf_id);
    if (rf_id == NULL) return -1;
    int nonzero = PyObject_IsTrue(rf_id);
    PyObject *index = nonzero > 0 ? Py_XNewRef(PyDict_GetItemWithError(index_of, rf_id)) : NULL;
    Py_DECREF(rf_id);
    if (nonzero < 0 || (index == NULL && PyErr_Occurred())) return -1;
    if (index == NULL) return 0;
    Py_ssize_t value = PyLong_AsSsize_t(index);
    Py_DECREF(index);
    if (value == -1 && PyErr_Occurred()) return -1;
    if (value < 0 || value >= PyTuple_GET_SIZE(events)) {
        PyErr_Format(PyExc_IndexError, "index_of gives %zd for a list of %zd events", value, PyTuple_GET_SIZE(events));
        return -1;
    }
    *at = value;
    return 0;
}

/* Adds `node`'s timing from `event` (the `at`th) and counts whether their names agree: 0, or -1. */
static int join_one(PyObject *node, PyObject *node_name, PyObject *event, Py_ssize_t at, PyObject *exclusive_us,
                    PyObject *timing_type, PyObject *timing, PyObject *host_of_event, Py_ssize_t *agree) {
    PyObject *event_name = NULL, *ts = NULL, *dur = NULL, *tid = NULL, *node_id = NULL, *value = NULL, *key = NULL;
    int rc = -1;
    if ((event_name = field(event, s_name)) == NULL) goto done;
    int same = PyObject_RichCompareBool(event_name, node_name, Py_EQ);
    if (same < 0) goto done;
    *agree += same;
    if ((ts = field(event, s_ts)) == NULL || (dur = field(event, s_dur)) == NULL || (tid = field(event, s_tid)) == NULL ||
        (node_id = field(node, s_id)) == NULL)
        goto done;
    PyObject *args[4] = {ts, dur, PyTuple_GET_ITEM(exclusive_us, at), tid};
    if ((value = PyObject_Vectorcall(timing_type, args, 4, NULL)) == NULL) goto done;
    if (PyDict_SetItem(timing, node_id, value) < 0) goto done;
    if ((key = PyLong_FromVoidPtr(event)) == NULL) goto done;
    rc = PyDict_SetItem(host_of_event, key, node_id);
done:
    Py_XDECREF(event_name);
    Py_XDECREF(ts);
    Py_XDECREF(dur);
    Py_XDECREF(tid);
    Py_XDECREF(node_id);
    Py_XDECREF(value);
    Py_XDECREF(key);
    return rc;
}

static PyObject *join_host_ops(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *nodes, *skip_names, *index_of, *events, *exclusive_us, *timing_type;
    if (!PyArg_ParseTuple(args, "O!OO!O!O!O:join_host_ops", &PyList_Type, &nodes, &skip_names, &PyDict_Type, &index_of,
                          &PyList_Type, &events, &PyList_Type, &exclusive_us, &timing_type))
        return NULL;
    if (PyList_GET_SIZE(exclusive_us) != PyList_GET_SIZE(events)) {
        PyErr_SetString(PyExc_ValueError, "exclusive_us must have one value per event");
        return NULL;
    }
    /* copies: nodes, events and times stay alive and in place whatever a getattr does to the lists given */
    nodes = PyList_AsTuple(nodes);
    events = PyList_AsTuple(events);
    exclusive_us = PyList_AsTuple(exclusive_us);
    PyObject *timing = PyDict_New(), *host_of_event = PyDict_New(), *unmatched = PyList_New(0);
    Py_ssize_t considered = 0, joined = 0, agree = 0;
    if (!nodes || !events || !exclusive_us || !timing || !host_of_event || !unmatched) goto fail;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(nodes); i++) {
        PyObject *node = PyTuple_GET_ITEM(nodes, i);
        PyObject *name = field(node, s_name);
        if (name == NULL) goto fail;
        int skipped = PySequence_Contains(skip_names, name);
        if (skipped != 0) {
            Py_DECREF(name);
            if (skipped < 0) goto fail;
            continue;
        }
        considered++;
        Py_ssize_t at;
        int rc = joined_event(node, index_of, events, &at);
        if (rc == 0 && at < 0) {
            rc = PyList_Append(unmatched, node);
        } else if (rc == 0) {
            joined++;
            rc = join_one(node, name, PyTuple_GET_ITEM(events, at), at, exclusive_us, timing_type, timing, host_of_event,
                          &agree);
        }
        Py_DECREF(name);
        if (rc < 0) goto fail;
    }
    Py_DECREF(nodes);
    Py_DECREF(events);
    Py_DECREF(exclusive_us);
    return Py_BuildValue("(NNnnnN)", timing, host_of_event, considered, joined, agree, unmatched);
fail:
    Py_XDECREF(nodes);
    Py_XDECREF(events);
    Py_XDECREF(exclusive_us);
    Py_XDECREF(timing);
    Py_XDECREF(host_of_event);
    Py_XDECREF(unmatched);
    return NULL;
}

static PyMethodDef methods[] = {
    {"join_host_ops", join_host_ops, METH_VARARGS,
     "join_host_ops(nodes, skip_names, index_of, events, exclusive_us, timing_type) -> (timing, host_of_event, "
     "considered, joined, agree, unmatched)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_link_join", NULL, -1, methods};

PyMODINIT_FUNC PyInit__link_join(void) {
    static const Interned names[] = {
        {&s_id, "id"}, {&s_name, "name"}, {&s_rf_id, "rf_id"}, {&s_ts, "ts"}, {&s_dur, "dur"}, {&s_tid, "tid"},
    };
    if (intern_all(names, sizeof names / sizeof names[0]) < 0) return NULL;
    return PyModule_Create(&module);
}
