/*
 * chakra._op_rows: the op execution rows of a TensorFlow profile (_op_rows.h, written by
 * chakra._xplane.op_event_rows) made objects for the steps asked for, or summed up per step without an
 * object per row (see chakra/tensorflow/profile.py and recording.py: a profile holds every profiled
 * step, a conversion reads one).
 *
 * row_executions(rows, make, nodes, steps_wanted, only=None) -> {step index: {node: [execution, ...]}}:
 * the rows of the steps whose byte in `steps_wanted` is nonzero (and, with `only`, a set, of the nodes
 * in it), each make(start_ns, dur_ns, line, group or None, instance or None) appended to its node's list
 * (`nodes`: the node of each op index) in the rows' order.
 *
 * step_summaries(rows, step_count, nodes, graph, working, left) -> [(executions, ours, covered, start_ns,
 * end_ns, instance), ...] per step index, the rows summed up against a graph's node names: `nodes` the
 * node of each op index, `graph` the set of the graph's node names, `working` those that do work and
 * `left` names whose rows are not counted here (the caller sums them). executions counts the step's rows
 * but the left ones; ours those of graph or working nodes, with their least start, greatest end (start
 * + duration) and least instance key (None where there is none); covered the distinct working nodes with
 * a row in the step.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdlib.h>
#include <string.h>

#include "_op_rows.h"

/* What an op's node is to the graph summed up against. */
enum { CLASS_OTHER = 0, CLASS_GRAPH = 1, CLASS_WORKING = 2, CLASS_LEFT = 3 };

static PyObject *int128_of(__int128 value) {
    if (value >= INT64_MIN && value <= INT64_MAX) return PyLong_FromLongLong((long long)value);
    /* past 64 bits only on damaged times: built from its halves */
    PyObject *high = PyLong_FromLongLong((long long)(value >> 64)), *shift = PyLong_FromLong(64);
    PyObject *low = PyLong_FromUnsignedLongLong((unsigned long long)value);
    PyObject *shifted = high && shift ? PyNumber_Lshift(high, shift) : NULL;
    PyObject *out = shifted && low ? PyNumber_Or(shifted, low) : NULL;
    Py_XDECREF(high);
    Py_XDECREF(shift);
    Py_XDECREF(low);
    Py_XDECREF(shifted);
    return out;
}

static PyObject *key_of(uint8_t has, uint64_t value, uint8_t is_unsigned) {
    if (!has) return Py_NewRef(Py_None);
    return is_unsigned ? PyLong_FromUnsignedLongLong(value) : PyLong_FromLongLong((int64_t)value);
}

/* The rows of `buffer` (a bytes-like object of OpRow); 0, or -1 with an exception. */
static int rows_of(Py_buffer *buffer, const OpRow **rows, Py_ssize_t *count) {
    if (buffer->len % (Py_ssize_t)sizeof(OpRow) != 0) {
        PyErr_SetString(PyExc_ValueError, "op rows: not a whole number of rows");
        return -1;
    }
    if (buffer->len > 0 && (uintptr_t)buffer->buf % _Alignof(OpRow) != 0) { /* bytes are aligned; a slice may not be */
        PyErr_SetString(PyExc_ValueError, "op rows: the buffer is not aligned for its rows");
        return -1;
    }
    *rows = buffer->buf;
    *count = buffer->len / (Py_ssize_t)sizeof(OpRow);
    return 0;
}

/* The list of `node` in the step's dict `by_node` (made when new): borrowed, NULL on error. */
static PyObject *node_list(PyObject *by_node, PyObject *node) {
    PyObject *list = PyDict_GetItemWithError(by_node, node);
    if (list != NULL || PyErr_Occurred()) return list;
    PyObject *fresh = PyList_New(0);
    if (fresh == NULL || PyDict_SetItem(by_node, node, fresh) < 0) {
        Py_XDECREF(fresh);
        return NULL;
    }
    Py_DECREF(fresh);
    return fresh;
}

static PyObject *row_executions(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer buffer, steps_wanted;
    PyObject *make, *node_list_arg, *only = Py_None, *out = NULL;
    if (!PyArg_ParseTuple(args, "y*OO!y*|O", &buffer, &make, &PyList_Type, &node_list_arg, &steps_wanted, &only))
        return NULL;
    const OpRow *rows;
    Py_ssize_t count;
    uint8_t *op_ok = NULL; /* with `only`: whether each op's node is in it */
    PyObject *nodes = PyList_AsTuple(node_list_arg); /* fixed while `make` runs Python */
    int failed = nodes == NULL || rows_of(&buffer, &rows, &count) < 0;
    Py_ssize_t node_count = nodes == NULL ? 0 : PyTuple_GET_SIZE(nodes);
    if (!failed && only != Py_None && !PyAnySet_Check(only)) {
        PyErr_SetString(PyExc_ValueError, "row_executions: only must be a set");
        failed = 1;
    }
    if (!failed && only != Py_None) {
        failed = (op_ok = PyMem_Malloc(node_count + 1)) == NULL;
        if (failed) PyErr_NoMemory();
        for (Py_ssize_t k = 0; !failed && k < node_count; k++) {
            int in = PySet_Contains(only, PyTuple_GET_ITEM(nodes, k));
            failed = in < 0;
            op_ok[k] = (uint8_t)(in > 0);
        }
    }
    const uint8_t *step_ok = steps_wanted.buf;
    PyObject *by_step = failed ? NULL : PyDict_New(), *last_dict = NULL;
    uint32_t last_step = UINT32_MAX;
    failed = by_step == NULL;
    for (Py_ssize_t k = 0; !failed && k < count; k++) {
        const OpRow *row = &rows[k];
        if (row->step >= (uint64_t)steps_wanted.len || row->op < 0 || row->op >= node_count) {
            PyErr_SetString(PyExc_ValueError, "row_executions: a row's step or op is out of range");
            failed = 1;
            break;
        }
        if (!step_ok[row->step] || (op_ok != NULL && !op_ok[row->op])) continue;
        if (row->step != last_step) {
            PyObject *index = PyLong_FromUnsignedLong(row->step);
            last_dict = index == NULL ? NULL : PyDict_GetItemWithError(by_step, index);
            if (index != NULL && last_dict == NULL && !PyErr_Occurred()) {
                PyObject *fresh = PyDict_New();
                if (fresh != NULL && PyDict_SetItem(by_step, index, fresh) == 0) last_dict = fresh;
                Py_XDECREF(fresh);
            }
            Py_XDECREF(index);
            if (last_dict == NULL) {
                failed = 1;
                break;
            }
            last_step = row->step;
        }
        PyObject *list = node_list(last_dict, PyTuple_GET_ITEM(nodes, row->op));
        PyObject *fields[5] = {
            int128_of(row->start_ns),
            int128_of(row->dur_ns),
            PyLong_FromLong(row->line),
            key_of(row->has_group, row->group, row->group_unsigned),
            key_of(row->has_instance, row->instance, row->instance_unsigned),
        };
        PyObject *execution = NULL;
        if (list && fields[0] && fields[1] && fields[2] && fields[3] && fields[4])
            execution = PyObject_Vectorcall(make, fields, 5, NULL);
        for (int f = 0; f < 5; f++) Py_XDECREF(fields[f]);
        failed = execution == NULL || PyList_Append(list, execution) < 0;
        Py_XDECREF(execution);
    }
    if (!failed) out = Py_NewRef(by_step);
    Py_XDECREF(by_step);
    Py_XDECREF(nodes);
    PyBuffer_Release(&buffer);
    PyBuffer_Release(&steps_wanted);
    PyMem_Free(op_ok);
    return out;
}

/* One step's sums. */
typedef struct {
    Py_ssize_t executions, ours;
    __int128 start, end, instance;
    int has_instance;
} Sums;

/* A set of (step, name) pairs by open addressing, for counting the distinct working nodes of each step
 * (a sort of every row's pair was half the summing). Capacity a power of two, at least twice the
 * pairs; 0 is free (stored keys are pair + 1). */
typedef struct {
    uint64_t *keys;
    size_t mask;
} PairSet;

/* Whether the pair was new. */
static int pair_add(PairSet *set, uint64_t pair) {
    uint64_t key = pair + 1;
    size_t at = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & set->mask;
    while (set->keys[at] != 0) {
        if (set->keys[at] == key) return 0;
        at = (at + 1) & set->mask;
    }
    set->keys[at] = key;
    return 1;
}

static PyObject *summary_of(const Sums *sums, Py_ssize_t covered) {
    PyObject *start = sums->ours ? int128_of(sums->start) : Py_NewRef(Py_None);
    PyObject *end = sums->ours ? int128_of(sums->end) : Py_NewRef(Py_None);
    PyObject *instance = sums->has_instance ? int128_of(sums->instance) : Py_NewRef(Py_None);
    if (start == NULL || end == NULL || instance == NULL) {
        Py_XDECREF(start);
        Py_XDECREF(end);
        Py_XDECREF(instance);
        return NULL;
    }
    return Py_BuildValue("(nnnNNN)", sums->executions, sums->ours, covered, start, end, instance);
}

/* Each op's class and the index of its node among the distinct ones; 0, or -1 with an exception. */
static int classify(PyObject *nodes, PyObject *graph, PyObject *working, PyObject *left, uint8_t *classes,
                    uint32_t *names) {
    PyObject *index_of = PyDict_New();
    int failed = index_of == NULL;
    for (Py_ssize_t k = 0; !failed && k < PyList_GET_SIZE(nodes); k++) {
        PyObject *node = PyList_GET_ITEM(nodes, k);
        int in_left = PySet_Contains(left, node), in_working = 0, in_graph = 0;
        if (in_left == 0) in_working = PySet_Contains(working, node);
        if (in_left == 0 && in_working == 0) in_graph = PySet_Contains(graph, node);
        if (in_left < 0 || in_working < 0 || in_graph < 0) {
            failed = 1;
            break;
        }
        classes[k] = in_left ? CLASS_LEFT : in_working ? CLASS_WORKING : in_graph ? CLASS_GRAPH : CLASS_OTHER;
        PyObject *fresh = PyLong_FromSsize_t(PyDict_GET_SIZE(index_of));
        PyObject *known = fresh == NULL ? NULL : PyDict_SetDefault(index_of, node, fresh);
        Py_XDECREF(fresh);
        failed = known == NULL;
        if (!failed) names[k] = (uint32_t)PyLong_AsUnsignedLong(known);
    }
    Py_XDECREF(index_of);
    return failed ? -1 : 0;
}

static PyObject *step_summaries(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer buffer;
    Py_ssize_t step_count;
    PyObject *nodes, *graph, *working, *left, *out = NULL;
    if (!PyArg_ParseTuple(args, "y*nO!OOO", &buffer, &step_count, &PyList_Type, &nodes, &graph, &working, &left))
        return NULL;
    const OpRow *rows;
    Py_ssize_t count, ops = PyList_GET_SIZE(nodes);
    Sums *sums = NULL;
    PairSet pairs = {NULL, 0}; /* (step << 32 | name) of the rows of working ops */
    Py_ssize_t *covered = NULL;
    uint32_t *names = NULL;
    uint8_t *op_class = NULL;
    int failed = rows_of(&buffer, &rows, &count) < 0;
    if (!failed && (!PyAnySet_Check(graph) || !PyAnySet_Check(working) || !PyAnySet_Check(left) || step_count < 0 ||
                    step_count > UINT32_MAX || ops > UINT32_MAX)) {
        PyErr_SetString(PyExc_ValueError, "step_summaries: three sets of names, a step count of 32 bits");
        failed = 1;
    }
    if (!failed) {
        sums = PyMem_Calloc(step_count ? step_count : 1, sizeof(Sums));
        size_t capacity = 16;
        while (capacity < 2 * (size_t)count) capacity *= 2;
        pairs.keys = PyMem_Calloc(capacity, sizeof(uint64_t));
        pairs.mask = capacity - 1;
        covered = PyMem_Calloc(step_count ? step_count : 1, sizeof(Py_ssize_t));
        names = PyMem_Malloc((ops ? ops : 1) * sizeof(uint32_t));
        op_class = PyMem_Malloc(ops ? ops : 1);
        failed = sums == NULL || pairs.keys == NULL || covered == NULL || names == NULL || op_class == NULL;
        if (failed) PyErr_NoMemory();
    }
    if (!failed) failed = classify(nodes, graph, working, left, op_class, names) < 0;
    for (Py_ssize_t k = 0; !failed && k < count; k++) {
        const OpRow *row = &rows[k];
        if (row->step >= (uint64_t)step_count || row->op < 0 || row->op >= ops) {
            PyErr_SetString(PyExc_ValueError, "step_summaries: a row's step or op is out of range");
            failed = 1;
            break;
        }
        int kind = op_class[row->op];
        if (kind == CLASS_LEFT) continue;
        Sums *s = &sums[row->step];
        s->executions++;
        if (kind != CLASS_GRAPH && kind != CLASS_WORKING) continue;
        __int128 end = row->start_ns + row->dur_ns;
        if (s->ours == 0 || row->start_ns < s->start) s->start = row->start_ns;
        if (s->ours == 0 || end > s->end) s->end = end;
        s->ours++;
        if (row->has_instance) {
            __int128 instance = key_value(row->instance, row->instance_unsigned);
            if (!s->has_instance || instance < s->instance) s->instance = instance;
            s->has_instance = 1;
        }
        if (kind == CLASS_WORKING && pair_add(&pairs, (uint64_t)row->step << 32 | names[row->op])) covered[row->step]++;
    }
    if (!failed) out = PyList_New(step_count);
    for (Py_ssize_t step = 0; out != NULL && step < step_count; step++) {
        PyObject *summary = summary_of(&sums[step], covered[step]);
        if (summary == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, step, summary);
    }
    PyMem_Free(sums);
    PyMem_Free(pairs.keys);
    PyMem_Free(names);
    PyMem_Free(covered);
    PyMem_Free(op_class);
    PyBuffer_Release(&buffer);
    return out;
}

static PyMethodDef methods[] = {
    {"row_executions", row_executions, METH_VARARGS,
     "row_executions(rows, make, nodes, steps_wanted, only=None) -> {step index: {node: [execution]}}"},
    {"step_summaries", step_summaries, METH_VARARGS,
     "step_summaries(rows, step_count, nodes, graph, working, left) -> [(executions, ours, covered, start_ns, "
     "end_ns, instance)] per step"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_op_rows", NULL, -1, methods};

PyMODINIT_FUNC PyInit__op_rows(void) { return PyModule_Create(&module); }
