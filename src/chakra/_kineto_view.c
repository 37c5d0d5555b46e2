/*
 * chakra._kineto_view: the host nodes of a profiler trace seen alone, made in C (see
 * chakra/kineto/view.py). A whole trace holds a hundred thousand operators or more; reading a dozen
 * fields of each and making its node and timing in Python was a third of the view.
 *
 * view_nodes(operators, exclusive_us, parents, node_type, timing_type, input_args_type, no_io, no_value,
 *            no_attrs, annotation_categories, scopes, inputs_of, comm_attrs_of)
 *     -> (nodes, timing)
 *
 * For the k-th operator (a Kineto host event: `name`, `cat`, `ts`, `dur`, `tid`, `args` with `rf_id`,
 * `seq_id`, `fw_tid`, `collective_name`), node k + 1, made as
 *     node_type(k + 1, name, parents[k] + 1, rf_id, thread, 0, seq_id, scope, fw_tid, "", inputs, no_io, attrs)
 * with the ids that are not ints (bools are not) read as 0, -1 and 0; `thread` the operator's `tid`
 * numbered from 1 in the order threads first appear; `scope` scopes[0] for a category in
 * `annotation_categories`, else scopes[1]; `inputs` no_io for args not of `input_args_type` or whose
 * `input_dims`, `input_type` and `concrete_inputs` are all `no_value`, else inputs_of(operator); `attrs`
 * no_attrs where `collective_name` is None, else comm_attrs_of(operator). `timing` maps each node id to
 * timing_type(ts, dur, exclusive_us[k], tid).
 * Every node and timing of one thread shares one `tid` object, and a parent's id is its node's id object:
 * the events' own are let go with them, and a whole trace holds a few hundred thousand of each.
 *
 * own_copies(events) -> list: a copy of each event (`__copy__`) holding a copy of its `args` where their
 * type has `__copy__` (structs; a dict is shared). The few events a conversion keeps past its view, copied,
 * let the allocator's pools of all the others be freed whole (an event left in each kept them in use).
 */
#include "_slots.h"

static PyObject *s_name, *s_cat, *s_ts, *s_dur, *s_tid, *s_args, *s_rf_id, *s_seq_id, *s_fw_tid, *s_collective_name,
    *s_input_dims, *s_input_type, *s_concrete_inputs, *s_empty, *s_copy;

/* `value` where it is an int (not a bool), else `otherwise`: a new reference. */
static PyObject *int_or(PyObject *value, long otherwise) {
    if (PyLong_CheckExact(value)) return Py_NewRef(value);
    return PyLong_FromLong(otherwise);
}

/* The constants every node shares. */
typedef struct {
    PyObject *node_type, *timing_type, *input_args_type, *no_io, *no_value, *no_attrs, *annotation_categories;
    PyObject *user_scope, *function_scope, *inputs_of, *comm_attrs_of, *zero;
} Shared;

/* The operator's inputs (see the header): a new reference, NULL with an exception. */
static PyObject *inputs(const Shared *shared, PyObject *op, PyObject *args) {
    if ((PyObject *)Py_TYPE(args) != shared->input_args_type) return Py_NewRef(shared->no_io);
    PyObject *names[3] = {s_input_dims, s_input_type, s_concrete_inputs};
    int recorded = 0;
    for (int k = 0; k < 3 && !recorded; k++) {
        PyObject *value = field(args, names[k]);
        if (value == NULL) return NULL;
        recorded = value != shared->no_value;
        Py_DECREF(value);
    }
    if (!recorded) return Py_NewRef(shared->no_io);
    return PyObject_CallOneArg(shared->inputs_of, op);
}

/* The operator's collective attributes (see the header): a new reference, NULL with an exception. */
static PyObject *attributes(const Shared *shared, PyObject *op, PyObject *args) {
    PyObject *name = field(args, s_collective_name);
    if (name == NULL) return NULL;
    int none = name == Py_None;
    Py_DECREF(name);
    return none ? Py_NewRef(shared->no_attrs) : PyObject_CallOneArg(shared->comm_attrs_of, op);
}

/* Node `id` of operator `op`: its node into `nodes` and timing into `timing`; 0, or -1 with an exception. */
static int add_node(const Shared *shared, PyObject *op, PyObject *id, PyObject *parent, PyObject *exclusive,
                    PyObject *threads, PyObject *tids, PyObject *const *ids, PyObject *nodes, PyObject *timing) {
    PyObject *name = NULL, *cat = NULL, *ts = NULL, *dur = NULL, *tid = NULL, *args = NULL, *rf_id = NULL;
    PyObject *seq_id = NULL, *fw_tid = NULL, *parent_id = NULL, *in = NULL, *attrs = NULL;
    PyObject *node = NULL, *times = NULL, *one = NULL;
    int rc = -1;
    if ((name = field(op, s_name)) == NULL || (cat = field(op, s_cat)) == NULL || (ts = field(op, s_ts)) == NULL ||
        (dur = field(op, s_dur)) == NULL || (tid = field(op, s_tid)) == NULL || (args = field(op, s_args)) == NULL)
        goto done;
    PyObject *value;
    if ((value = field(args, s_rf_id)) == NULL) goto done;
    rf_id = int_or(value, 0);
    Py_DECREF(value);
    if (rf_id == NULL || (value = field(args, s_seq_id)) == NULL) goto done;
    seq_id = int_or(value, -1);
    Py_DECREF(value);
    if (seq_id == NULL || (value = field(args, s_fw_tid)) == NULL) goto done;
    fw_tid = int_or(value, 0);
    Py_DECREF(value);
    if (fw_tid == NULL) goto done;
    PyObject *thread = PyDict_GetItemWithError(threads, tid); /* borrowed */
    if (thread == NULL) {
        if (PyErr_Occurred() || (one = PyLong_FromSsize_t(PyDict_GET_SIZE(threads) + 1)) == NULL ||
            PyDict_SetItem(threads, tid, one) < 0)
            goto done;
        thread = one;
    }
    PyObject *thread_tid = PyDict_SetDefault(tids, tid, tid); /* borrowed: the thread's first tid object */
    if (thread_tid == NULL) goto done;
    int annotation = PySet_Contains(shared->annotation_categories, cat);
    if (annotation < 0) goto done;
    Py_ssize_t parent_at = PyLong_AsSsize_t(parent), own_at = PyList_GET_SIZE(nodes);
    if (parent_at == -1 && PyErr_Occurred()) goto done;
    /* an earlier operator's node id (node k + 1's is ids[k]) is the object its node holds */
    parent_id = parent_at >= 0 && parent_at < own_at ? Py_NewRef(ids[parent_at]) : PyLong_FromSsize_t(parent_at + 1);
    if (parent_id == NULL) goto done;
    if ((in = inputs(shared, op, args)) == NULL || (attrs = attributes(shared, op, args)) == NULL) goto done;
    PyObject *fields[13] = {
        id, name, parent_id, rf_id, thread, shared->zero, seq_id,
        annotation ? shared->user_scope : shared->function_scope, fw_tid, s_empty, in, shared->no_io, attrs,
    };
    if ((node = PyObject_Vectorcall(shared->node_type, fields, 13, NULL)) == NULL) goto done;
    PyObject *timed[4] = {ts, dur, exclusive, thread_tid};
    if ((times = PyObject_Vectorcall(shared->timing_type, timed, 4, NULL)) == NULL) goto done;
    if (PyList_Append(nodes, node) < 0 || PyDict_SetItem(timing, id, times) < 0) goto done;
    rc = 0;
done:
    Py_XDECREF(name);
    Py_XDECREF(cat);
    Py_XDECREF(ts);
    Py_XDECREF(dur);
    Py_XDECREF(tid);
    Py_XDECREF(args);
    Py_XDECREF(rf_id);
    Py_XDECREF(seq_id);
    Py_XDECREF(fw_tid);
    Py_XDECREF(parent_id);
    Py_XDECREF(in);
    Py_XDECREF(attrs);
    Py_XDECREF(node);
    Py_XDECREF(times);
    Py_XDECREF(one);
    return rc;
}

static PyObject *view_nodes(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *operators, *exclusive_us, *parents, *scopes;
    Shared shared;
    if (!PyArg_ParseTuple(args, "O!O!O!OOOOOOO!O!OO:view_nodes", &PyList_Type, &operators, &PyList_Type, &exclusive_us,
                          &PyList_Type, &parents, &shared.node_type, &shared.timing_type, &shared.input_args_type,
                          &shared.no_io, &shared.no_value, &shared.no_attrs, &PyFrozenSet_Type,
                          &shared.annotation_categories, &PyTuple_Type, &scopes, &shared.inputs_of,
                          &shared.comm_attrs_of))
        return NULL;
    Py_ssize_t size = PyList_GET_SIZE(operators);
    if (PyList_GET_SIZE(exclusive_us) != size || PyList_GET_SIZE(parents) != size || PyTuple_GET_SIZE(scopes) != 2) {
        PyErr_SetString(PyExc_ValueError, "view_nodes takes one exclusive time and parent per operator, and two scopes");
        return NULL;
    }
    shared.user_scope = PyTuple_GET_ITEM(scopes, 0);
    shared.function_scope = PyTuple_GET_ITEM(scopes, 1);
    /* copies: the operators and their values stay alive and in place whatever a call back does to the lists */
    operators = PyList_AsTuple(operators);
    exclusive_us = PyList_AsTuple(exclusive_us);
    parents = PyList_AsTuple(parents);
    shared.zero = PyLong_FromLong(0);
    PyObject *nodes = PyList_New(0), *timing = PyDict_New(), *threads = PyDict_New();
    PyObject *tids = PyDict_New(), *out = NULL;
    PyObject **ids = PyMem_Malloc((size_t)(size ? size : 1) * sizeof(PyObject *)); /* borrowed: `timing` holds them */
    if (!operators || !exclusive_us || !parents || !shared.zero || !nodes || !timing || !threads || !tids ||
        !ids) {
        if (ids == NULL) PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < size; k++) {
        PyObject *op = PyTuple_GET_ITEM(operators, k);
        PyObject *id = PyLong_FromSsize_t(k + 1);
        ids[k] = id;
        int rc = id == NULL ? -1
                            : add_node(&shared, op, id, PyTuple_GET_ITEM(parents, k), PyTuple_GET_ITEM(exclusive_us, k),
                                       threads, tids, ids, nodes, timing);
        Py_XDECREF(id);
        if (rc < 0) goto done;
    }
    out = PyTuple_Pack(2, nodes, timing);
done:
    Py_XDECREF(operators);
    Py_XDECREF(exclusive_us);
    Py_XDECREF(parents);
    Py_XDECREF(shared.zero);
    Py_XDECREF(nodes);
    Py_XDECREF(timing);
    Py_XDECREF(threads);
    Py_XDECREF(tids);
    PyMem_Free(ids);
    return out;
}

/* A copy of `event` holding a copy of its args (see the header): a new reference, NULL with an exception. */
static PyObject *own_copy(PyObject *event) {
    PyObject *copy = PyObject_CallMethodNoArgs(event, s_copy), *args = NULL, *args_copy = NULL;
    if (copy == NULL || (args = field(copy, s_args)) == NULL) goto fail;
    if (_PyType_Lookup(Py_TYPE(args), s_copy) != NULL) { /* the type's own, as a copy would call it */
        if ((args_copy = PyObject_CallMethodNoArgs(args, s_copy)) == NULL || set_field(copy, s_args, args_copy) < 0)
            goto fail;
        Py_DECREF(args_copy);
    }
    Py_DECREF(args);
    return copy;
fail:
    Py_XDECREF(copy);
    Py_XDECREF(args);
    Py_XDECREF(args_copy);
    return NULL;
}

static PyObject *own_copies(PyObject *self, PyObject *events) {
    (void)self;
    if (!PyList_Check(events)) {
        PyErr_SetString(PyExc_TypeError, "own_copies takes a list");
        return NULL;
    }
    PyObject *held = PyList_AsTuple(events); /* the events stay alive whatever a __copy__ does to the list */
    PyObject *copies = held == NULL ? NULL : PyList_New(PyTuple_GET_SIZE(held));
    if (copies == NULL) goto fail;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(held); k++) {
        PyObject *copy = own_copy(PyTuple_GET_ITEM(held, k));
        if (copy == NULL) goto fail;
        PyList_SET_ITEM(copies, k, copy);
    }
    Py_DECREF(held);
    return copies;
fail:
    Py_XDECREF(held);
    Py_XDECREF(copies);
    return NULL;
}

static PyMethodDef methods[] = {
    {"own_copies", own_copies, METH_O, "own_copies(events) -> list: each event copied with its args"},
    {"view_nodes", view_nodes, METH_VARARGS,
     "view_nodes(operators, exclusive_us, parents, node_type, timing_type, input_args_type, no_io, no_value, no_attrs, "
     "annotation_categories, scopes, inputs_of, comm_attrs_of) -> (nodes, timing)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kineto_view", NULL, -1, methods};

PyMODINIT_FUNC PyInit__kineto_view(void) {
    static const Interned names[] = {
        {&s_name, "name"},
        {&s_cat, "cat"},
        {&s_ts, "ts"},
        {&s_dur, "dur"},
        {&s_tid, "tid"},
        {&s_args, "args"},
        {&s_rf_id, "rf_id"},
        {&s_seq_id, "seq_id"},
        {&s_fw_tid, "fw_tid"},
        {&s_collective_name, "collective_name"},
        {&s_input_dims, "input_dims"},
        {&s_input_type, "input_type"},
        {&s_concrete_inputs, "concrete_inputs"},
        {&s_empty, ""},
        {&s_copy, "__copy__"},
    };
    if (intern_all(names, sizeof names / sizeof names[0]) < 0) return NULL;
    return PyModule_Create(&module);
}
