/*
 * chakra._parts: the parts of ops split at their children, made in C (see
 * chakra.pytorch.waits.split_parts, which gives the rule). A whole profiler trace makes tens of
 * thousands of parts; making each in Python was the largest pass of its conversion.
 *
 * make_parts(segments, candidates, launched, thread, next_id, item_type, node_type, transfer_types, min_us,
 *            items, thread_items, wait_edges) -> int: for each segment of one thread at the indices
 * `candidates` (in order), a part of its owner where the rule makes one; returns the next free node id.
 *
 * The rule, for a segment with an owner: after a wait (`waited`), the time from `wait_end_us` to `end_us`
 * when it is positive; else, unless the segment is its owner's first (`first`) or the owner is a transfer
 * (`node_type` in `transfer_types`), the segment's time when it lasts `min_us` or more or the owner
 * launched device work in it (`launched`: owner node_id -> (launch times sorted, work items), the work in
 * [start_us, end_us) found as bisect.bisect_left finds it). The part is
 *     item_type(id, owner.name, node_type, None, thread, start, length, length, True, None,
 *               None, (), (owner.node_id,), (), owner.depth + 1, owner)
 * with ids from `next_id` up, put in `items` (by id) and `thread_items`; after a wait it takes the place of
 * the resumed item in `wait_edges[segment.edge]`; its length comes off the owner's `excl_us` (at least
 * 0.0, as max() takes it); when the segment is not the owner's first, the work launched in it depends on
 * the part in place of the owner (`data`). Numbers are computed and compared as Python does.
 */
#include "_slots.h"

static PyObject *s_owner, *s_waited, *s_first, *s_node_type, *s_wait_end_us, *s_start_us, *s_end_us, *s_node_id,
    *s_name, *s_depth, *s_edge, *s_excl_us, *s_data, *s_zero, *s_int_zero, *s_one;

/* What every part of a call shares. */
typedef struct {
    PyObject *launched, *thread, *item_type, *node_type, *transfer_types, *min_us, *items, *thread_items, *wait_edges;
} Rules;

/* The index of the first of `times` not below `at`, as bisect.bisect_left finds it; -1 with an exception
 * (an IndexError where a comparison shortened the list, as bisect's). */
static Py_ssize_t bisect_left(PyObject *times, PyObject *at) {
    Py_ssize_t lo = 0, hi = PyList_GET_SIZE(times);
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (mid >= PyList_GET_SIZE(times)) {
            PyErr_SetString(PyExc_IndexError, "list index out of range");
            return -1;
        }
        PyObject *value = Py_NewRef(PyList_GET_ITEM(times, mid));
        int below = PyFloat_CheckExact(value) && PyFloat_CheckExact(at)
                        ? PyFloat_AS_DOUBLE(value) < PyFloat_AS_DOUBLE(at)
                        : PyObject_RichCompareBool(value, at, Py_LT);
        Py_DECREF(value);
        if (below < 0) return -1;
        if (below)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The work `owner_id` launched in [start, end): a new list, NULL with an exception. */
static PyObject *launched_in(PyObject *launched, PyObject *owner_id, PyObject *start, PyObject *end) {
    PyObject *found = Py_XNewRef(PyDict_GetItemWithError(launched, owner_id)); /* held: a comparison runs Python */
    if (found == NULL) return PyErr_Occurred() ? NULL : PyList_New(0);
    PyObject *works = NULL;
    if (!PyTuple_Check(found) || PyTuple_GET_SIZE(found) != 2 || !PyList_Check(PyTuple_GET_ITEM(found, 0)) ||
        !PyList_Check(PyTuple_GET_ITEM(found, 1))) {
        PyErr_SetString(PyExc_TypeError, "launched maps an owner to (launch times, work items), two lists");
    } else {
        PyObject *times = PyTuple_GET_ITEM(found, 0);
        Py_ssize_t first = bisect_left(times, start), last = first < 0 ? -1 : bisect_left(times, end);
        if (last >= 0) works = PyList_GetSlice(PyTuple_GET_ITEM(found, 1), first, last);
    }
    Py_DECREF(found);
    return works;
}

/* Each work's `data` with `owner_id` replaced by `part_id` (`works`: a list of the caller's own): 0, or -1
 * with an exception. */
static int depend_on_part(PyObject *works, PyObject *owner_id, PyObject *part_id) {
    for (Py_ssize_t w = 0; w < PyList_GET_SIZE(works); w++) {
        PyObject *work = PyList_GET_ITEM(works, w), *data = field(work, s_data);
        if (data == NULL) return -1;
        PyObject *held = PySequence_Tuple(data); /* held: no comparison can change what is read */
        Py_DECREF(data);
        Py_ssize_t size = held == NULL ? 0 : PyTuple_GET_SIZE(held);
        PyObject *fresh = held == NULL ? NULL : PyTuple_New(size); /* a new tuple, filled here */
        for (Py_ssize_t k = 0; fresh != NULL && k < size; k++) {
            PyObject *dep = PyTuple_GET_ITEM(held, k);
            int same = PyObject_RichCompareBool(dep, owner_id, Py_EQ);
            if (same < 0) Py_CLEAR(fresh);
            else PyTuple_SET_ITEM(fresh, k, Py_NewRef(same ? part_id : dep));
        }
        Py_XDECREF(held);
        if (fresh == NULL) return -1;
        int rc = set_field(work, s_data, fresh);
        Py_DECREF(fresh);
        if (rc < 0) return -1;
    }
    return 0;
}

/* The owner's exclusive time less `length`, at least 0.0: 0, or -1 with an exception. */
static int shorten(PyObject *owner, PyObject *length) {
    PyObject *excl = field(owner, s_excl_us);
    if (excl == NULL) return -1;
    PyObject *left = PyNumber_Subtract(excl, length);
    Py_DECREF(excl);
    if (left == NULL) return -1;
    int above = PyObject_RichCompareBool(left, s_zero, Py_GT); /* max(0.0, left) takes left only when greater */
    int rc = above < 0 ? -1 : set_field(owner, s_excl_us, above ? left : s_zero);
    Py_DECREF(left);
    return rc;
}

/* Where the part of `segment` starts and how long it is (new references), or both NULL for no part
 * before the launched work is looked at; -1 with an exception. */
static int part_span(const Rules *rules, PyObject *segment, PyObject *owner, int after_wait, PyObject **start,
                     PyObject **length) {
    *start = *length = NULL;
    if (!after_wait) {
        PyObject *first = field(segment, s_first), *node_type = NULL;
        int skip = first == NULL ? -1 : PyObject_IsTrue(first);
        Py_XDECREF(first);
        if (skip == 0) {
            if ((node_type = field(owner, s_node_type)) == NULL) return -1;
            skip = PySequence_Contains(rules->transfer_types, node_type);
            Py_DECREF(node_type);
        }
        if (skip != 0) return skip < 0 ? -1 : 0;
    }
    PyObject *end = field(segment, s_end_us);
    if (end == NULL || (*start = field(segment, after_wait ? s_wait_end_us : s_start_us)) == NULL ||
        (*length = PyNumber_Subtract(end, *start)) == NULL) {
        Py_XDECREF(end);
        Py_CLEAR(*start);
        return -1;
    }
    Py_DECREF(end);
    if (after_wait) {
        int none = PyObject_RichCompareBool(*length, s_int_zero, Py_LE); /* a NaN length makes a part */
        if (none != 0) {
            Py_CLEAR(*start);
            Py_CLEAR(*length);
            return none < 0 ? -1 : 0;
        }
    }
    return 0;
}

/* The part `id` of `owner` over [start, start + length): made and put in place (see the header); 0, or -1
 * with an exception. */
static int add_part(const Rules *rules, PyObject *segment, PyObject *owner, PyObject *owner_id, int after_wait,
                    PyObject *id, PyObject *start, PyObject *length) {
    PyObject *name = NULL, *depth = NULL, *below = NULL, *data = NULL, *ctrl = NULL;
    PyObject *part = NULL, *edge = NULL, *empty = NULL;
    int rc = -1;
    if ((name = field(owner, s_name)) == NULL || (depth = field(owner, s_depth)) == NULL ||
        (below = PyNumber_Add(depth, s_one)) == NULL || (data = PyTuple_New(0)) == NULL ||
        (ctrl = PyTuple_Pack(1, owner_id)) == NULL || (empty = PyTuple_New(0)) == NULL)
        goto done;
    PyObject *fields[16] = {id,      name,    rules->node_type, Py_None, rules->thread, start, length, length,
                            Py_True, Py_None, Py_None,          data, ctrl,          empty, below,  owner};
    if ((part = PyObject_Vectorcall(rules->item_type, fields, 16, NULL)) == NULL) goto done;
    if (after_wait) {
        if ((edge = field(segment, s_edge)) == NULL) goto done;
        PyObject *pair = PyObject_GetItem(rules->wait_edges, edge);
        if (pair == NULL) goto done;
        PyObject *waited = PySequence_GetItem(pair, 0), *replaced = NULL;
        Py_DECREF(pair);
        if (waited == NULL) goto done;
        replaced = PyTuple_Pack(2, waited, part);
        Py_DECREF(waited);
        int set = replaced == NULL ? -1 : PyObject_SetItem(rules->wait_edges, edge, replaced);
        Py_XDECREF(replaced);
        if (set < 0) goto done;
    }
    if (shorten(owner, length) < 0 || PyDict_SetItem(rules->items, id, part) < 0 ||
        PyList_Append(rules->thread_items, part) < 0)
        goto done;
    rc = 0;
done:
    Py_XDECREF(name);
    Py_XDECREF(depth);
    Py_XDECREF(below);
    Py_XDECREF(data);
    Py_XDECREF(ctrl);
    Py_XDECREF(empty);
    Py_XDECREF(part);
    Py_XDECREF(edge);
    return rc;
}

/* The part of one segment, where the rule makes one; `*next_id` moves past its id. 0, or -1. */
static int split_segment(const Rules *rules, PyObject *segment, Py_ssize_t *next_id) {
    PyObject *owner = field(segment, s_owner), *waited = NULL, *owner_id = NULL, *start = NULL, *length = NULL;
    PyObject *seg_start = NULL, *seg_end = NULL, *works = NULL, *id = NULL, *first = NULL;
    int rc = -1;
    if (owner == NULL) return -1;
    if (owner == Py_None) {
        Py_DECREF(owner);
        return 0;
    }
    int after_wait = (waited = field(segment, s_waited)) == NULL ? -1 : PyObject_IsTrue(waited);
    if (after_wait < 0 || part_span(rules, segment, owner, after_wait, &start, &length) < 0) goto done;
    if (start == NULL) {
        rc = 0;
        goto done;
    }
    if ((owner_id = field(owner, s_node_id)) == NULL || (seg_start = field(segment, s_start_us)) == NULL ||
        (seg_end = field(segment, s_end_us)) == NULL ||
        (works = launched_in(rules->launched, owner_id, seg_start, seg_end)) == NULL)
        goto done;
    if (!after_wait && PyList_GET_SIZE(works) == 0) {
        int short_ = PyObject_RichCompareBool(length, rules->min_us, Py_LT);
        if (short_ != 0) {
            rc = short_ < 0 ? -1 : 0;
            goto done;
        }
    }
    if ((id = PyLong_FromSsize_t(*next_id)) == NULL) goto done;
    (*next_id)++;
    if (add_part(rules, segment, owner, owner_id, after_wait, id, start, length) < 0) goto done;
    if (PyList_GET_SIZE(works) > 0) {
        int is_first = (first = field(segment, s_first)) == NULL ? -1 : PyObject_IsTrue(first);
        if (is_first < 0 || (!is_first && depend_on_part(works, owner_id, id) < 0)) goto done;
    }
    rc = 0;
done:
    Py_DECREF(owner);
    Py_XDECREF(waited);
    Py_XDECREF(owner_id);
    Py_XDECREF(start);
    Py_XDECREF(length);
    Py_XDECREF(seg_start);
    Py_XDECREF(seg_end);
    Py_XDECREF(works);
    Py_XDECREF(id);
    Py_XDECREF(first);
    return rc;
}

static PyObject *make_parts(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *segments, *candidates;
    Py_ssize_t next_id;
    Rules rules;
    if (!PyArg_ParseTuple(args, "O!O!O!OnOOOOO!O!O!:make_parts", &PyList_Type, &segments, &PyList_Type, &candidates,
                          &PyDict_Type, &rules.launched, &rules.thread, &next_id, &rules.item_type, &rules.node_type,
                          &rules.transfer_types, &rules.min_us, &PyDict_Type, &rules.items, &PyList_Type,
                          &rules.thread_items, &PyList_Type, &rules.wait_edges))
        return NULL;
    /* copies: the segments stay alive and in place whatever a comparison does to the lists given */
    segments = PyList_AsTuple(segments);
    candidates = PyList_AsTuple(candidates);
    if (segments == NULL || candidates == NULL) goto fail;
    for (Py_ssize_t c = 0; c < PyTuple_GET_SIZE(candidates); c++) {
        Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(candidates, c));
        if (at == -1 && PyErr_Occurred()) goto fail;
        if (at < 0 || at >= PyTuple_GET_SIZE(segments)) {
            PyErr_Format(PyExc_IndexError, "candidate %zd is not one of the %zd segments", at, PyTuple_GET_SIZE(segments));
            goto fail;
        }
        if (split_segment(&rules, PyTuple_GET_ITEM(segments, at), &next_id) < 0) goto fail;
    }
    Py_DECREF(segments);
    Py_DECREF(candidates);
    return PyLong_FromSsize_t(next_id);
fail:
    Py_XDECREF(segments);
    Py_XDECREF(candidates);
    return NULL;
}

static PyMethodDef methods[] = {
    {"make_parts", make_parts, METH_VARARGS,
     "make_parts(segments, candidates, launched, thread, next_id, item_type, node_type, transfer_types, min_us, "
     "items, thread_items, wait_edges) -> next_id"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_parts", NULL, -1, methods};

PyMODINIT_FUNC PyInit__parts(void) {
    static const Interned names[] = {
        {&s_owner, "owner"},       {&s_waited, "waited"}, {&s_first, "first"},     {&s_node_type, "node_type"},
        {&s_wait_end_us, "wait_end_us"}, {&s_start_us, "start_us"}, {&s_end_us, "end_us"}, {&s_node_id, "node_id"},
        {&s_name, "name"},         {&s_depth, "depth"},   {&s_edge, "edge"},       {&s_excl_us, "excl_us"},
        {&s_data, "data"},
    };
    if (intern_all(names, sizeof names / sizeof names[0]) < 0) return NULL;
    if ((s_zero = PyFloat_FromDouble(0.0)) == NULL || (s_int_zero = PyLong_FromLong(0)) == NULL ||
        (s_one = PyLong_FromLong(1)) == NULL)
        return NULL;
    return PyModule_Create(&module);
}
