/*
 * chakra._item_passes: passes over every item of a conversion that do the same small thing to each, in C
 * (see chakra/pytorch/items.py and dependencies.py): a whole profiler trace makes a quarter of a million
 * items, and a loop in Python over them took as long as the thing it did.
 *
 * group_by_thread(items, skipped_type) -> dict: the items (in order) by their `thread`, in the order the
 * threads first appear, leaving out those whose `node_type` is `skipped_type` (the metadata node).
 *
 * chain_items(items, head) -> None: appends to each item's `data` the `node_id` of the item before it, and
 * to the first item's, `head`'s when it is not None (a thread's or stream's order after the groups' record).
 *
 * device_items(activities, items, item_type, node_type, next_id, skipped_category, stream_tag)
 *     -> (next_id, made, skipped): an item for each device activity (`name`, `cat`, `device`, `stream`,
 * `ts_us`, `dur_us`, `host_id`) whose category is not `skipped_category`, numbered from `next_id` in order:
 *     item_type(id, name, node_type, None, (stream_tag, device, stream), ts_us, dur_us,
 *               dur_us, False, None, activity, data, ctrl)
 * with `host_id` in data and ctrl when it is an item's id in `items`, put in `items`; `made` lists the items,
 * `skipped` the activities of that category, in order.
 *
 * no_host_rows(items, rows, node_types, thread_ids, launcher_rf_ids, columns, args_types, comp_node) -> None:
 * the encoder's attribute columns (chakra/pytorch/encode.py) of the items that are no host op, item k at
 * row rows[k] of the batch whose node types are `node_types`; `columns` the lists (tid, rf_id, stream,
 * device, correlation, launcher_rf_id, activity_bytes), None where nothing is written. The later part of an
 * op (`part_of` an item whose `host` is not None): its op's rf_id, and tid thread_ids.get(thread, the op's
 * tid). A device activity (`activity` not None): tid None; stream its `stream` where an int (bools are),
 * else 0; device where an int; correlation int(correlation) where not None; launcher_rf_id
 * launcher_rf_ids.get(host_id) (None for no host id); activity_bytes its args' `bytes` where an int and the
 * row's node type equals `comp_node` (args of `args_types` read through their slot, others by .get).
 * Time outside operators on a thread: tid thread_ids.get(thread).
 */
#include "_slots.h"

static PyObject *s_thread, *s_node_type, *s_data, *s_node_id, *s_name, *s_cat, *s_device, *s_stream, *s_ts_us, *s_dur_us,
    *s_host_id, *s_correlation, *s_args, *s_bytes, *s_part_of, *s_host, *s_activity, *s_rf_id, *s_tid;

static PyObject *group_by_thread(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *items, *skipped_type;
    if (!PyArg_ParseTuple(args, "O!O:group_by_thread", &PyList_Type, &items, &skipped_type)) return NULL;
    items = PyList_AsTuple(items); /* alive and in place whatever a comparison of threads does to the list */
    PyObject *groups = items == NULL ? NULL : PyDict_New();
    if (groups == NULL) goto fail;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items); i++) {
        PyObject *item = PyTuple_GET_ITEM(items, i), *node_type = field(item, s_node_type), *thread = NULL;
        if (node_type == NULL) goto fail;
        int skipped = PyObject_RichCompareBool(node_type, skipped_type, Py_EQ);
        Py_DECREF(node_type);
        if (skipped != 0) {
            if (skipped < 0) goto fail;
            continue;
        }
        if ((thread = field(item, s_thread)) == NULL) goto fail;
        PyObject *group = PyDict_GetItemWithError(groups, thread); /* borrowed */
        int rc = -1;
        if (group != NULL) {
            rc = PyList_Append(group, item);
        } else if (!PyErr_Occurred() && (group = PyList_New(1)) != NULL) {
            PyList_SET_ITEM(group, 0, Py_NewRef(item));
            rc = PyDict_SetItem(groups, thread, group);
            Py_DECREF(group);
        }
        Py_DECREF(thread);
        if (rc < 0) goto fail;
    }
    Py_DECREF(items);
    return groups;
fail:
    Py_XDECREF(items);
    Py_XDECREF(groups);
    return NULL;
}

/* Adds `node_id` to the `data` tuple of `item`: 0, or -1 with an exception. */
static int depend(PyObject *item, PyObject *node_id) { return append_to_field(item, s_data, node_id); }

static PyObject *chain_items(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *items, *head;
    if (!PyArg_ParseTuple(args, "O!O:chain_items", &PyList_Type, &items, &head)) return NULL;
    items = PyList_AsTuple(items);
    if (items == NULL) return NULL;
    PyObject *previous = NULL; /* the node_id of the item before */
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items); i++) {
        PyObject *item = PyTuple_GET_ITEM(items, i);
        if (previous != NULL && depend(item, previous) < 0) goto fail;
        Py_XDECREF(previous);
        if ((previous = field(item, s_node_id)) == NULL) goto fail;
    }
    Py_XDECREF(previous);
    previous = NULL;
    if (head != Py_None && PyTuple_GET_SIZE(items) > 0) {
        if ((previous = field(head, s_node_id)) == NULL || depend(PyTuple_GET_ITEM(items, 0), previous) < 0) goto fail;
        Py_CLEAR(previous);
    }
    Py_DECREF(items);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(previous);
    Py_DECREF(items);
    return NULL;
}

/* What every device item of a call shares. */
typedef struct {
    PyObject *items, *item_type, *node_type, *stream_tag;
} Devices;

/* Item `id` of `activity` (see device_items): a new reference, NULL with an exception. */
static PyObject *device_item(const Devices *devices, PyObject *activity, PyObject *id) {
    PyObject *name = NULL, *device = NULL, *stream = NULL, *ts = NULL, *dur = NULL, *host_id = NULL;
    PyObject *thread = NULL, *data = NULL, *ctrl = NULL, *item = NULL;
    if ((name = field(activity, s_name)) == NULL || (device = field(activity, s_device)) == NULL ||
        (stream = field(activity, s_stream)) == NULL || (ts = field(activity, s_ts_us)) == NULL ||
        (dur = field(activity, s_dur_us)) == NULL || (host_id = field(activity, s_host_id)) == NULL ||
        (thread = PyTuple_Pack(3, devices->stream_tag, device, stream)) == NULL)
        goto done;
    int launched = host_id == Py_None ? 0 : PyDict_Contains(devices->items, host_id);
    if (launched < 0 || (data = launched ? PyTuple_Pack(1, host_id) : PyTuple_New(0)) == NULL ||
        (ctrl = launched ? PyTuple_Pack(1, host_id) : PyTuple_New(0)) == NULL)
        goto done;
    PyObject *fields[13] = {id, name, devices->node_type, Py_None, thread, ts, dur, dur, Py_False, Py_None, activity, data, ctrl};
    item = PyObject_Vectorcall(devices->item_type, fields, 13, NULL);
done:
    Py_XDECREF(name);
    Py_XDECREF(device);
    Py_XDECREF(stream);
    Py_XDECREF(ts);
    Py_XDECREF(dur);
    Py_XDECREF(host_id);
    Py_XDECREF(thread);
    Py_XDECREF(data);
    Py_XDECREF(ctrl);
    return item;
}

static PyObject *device_items(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *activities, *skipped_category;
    Py_ssize_t next_id;
    Devices devices;
    if (!PyArg_ParseTuple(args, "O!O!OOnOO:device_items", &PyList_Type, &activities, &PyDict_Type, &devices.items,
                          &devices.item_type, &devices.node_type, &next_id, &skipped_category, &devices.stream_tag))
        return NULL;
    activities = PyList_AsTuple(activities);
    PyObject *made = PyList_New(0), *skipped = PyList_New(0), *out = NULL;
    if (activities == NULL || made == NULL || skipped == NULL) goto done;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(activities); i++) {
        PyObject *activity = PyTuple_GET_ITEM(activities, i), *cat = field(activity, s_cat);
        int skip = cat == NULL ? -1 : PyObject_RichCompareBool(cat, skipped_category, Py_EQ);
        Py_XDECREF(cat);
        if (skip != 0) {
            if (skip < 0 || PyList_Append(skipped, activity) < 0) goto done;
            continue;
        }
        PyObject *id = PyLong_FromSsize_t(next_id), *item = id == NULL ? NULL : device_item(&devices, activity, id);
        int rc = item == NULL ? -1 : PyDict_SetItem(devices.items, id, item);
        if (rc == 0) rc = PyList_Append(made, item);
        Py_XDECREF(id);
        Py_XDECREF(item);
        if (rc < 0) goto done;
        next_id++;
    }
    out = Py_BuildValue("(nOO)", next_id, made, skipped);
done:
    Py_XDECREF(activities);
    Py_XDECREF(made);
    Py_XDECREF(skipped);
    return out;
}

/* The attribute columns no_host_rows writes, in the order it takes them. */
enum { C_TID, C_RF_ID, C_STREAM, C_DEVICE, C_CORRELATION, C_LAUNCHER_RF_ID, C_ACTIVITY_BYTES, C_COUNT };

/* What every row of a call shares. */
typedef struct {
    PyObject *columns[C_COUNT], *node_types, *thread_ids, *launcher_rf_ids, *args_types, *comp_node, *zero;
} Rows;

/* Sets columns[column][row] to `value` (a new reference, stolen; NULL passes an error on): 0, or -1. */
static int put(const Rows *rows, int column, Py_ssize_t row, PyObject *value) {
    if (value == NULL) return -1;
    PyObject *list = rows->columns[column];
    if (row < 0 || row >= PyList_GET_SIZE(list)) {
        Py_DECREF(value);
        PyErr_SetString(PyExc_IndexError, "no_host_rows: a row outside the columns");
        return -1;
    }
    PyObject *old = PyList_GET_ITEM(list, row);
    PyList_SET_ITEM(list, row, value);
    Py_DECREF(old);
    return 0;
}

/* The attributes of a device `activity` at `row` (see no_host_rows): 0, or -1 with an exception. */
static int activity_row(const Rows *rows, Py_ssize_t row, PyObject *activity) {
    PyObject *stream = NULL, *device = NULL, *correlation = NULL, *host_id = NULL, *args = NULL, *nbytes = NULL;
    int rc = -1;
    if ((stream = field(activity, s_stream)) == NULL || (device = field(activity, s_device)) == NULL ||
        (correlation = field(activity, s_correlation)) == NULL || (host_id = field(activity, s_host_id)) == NULL ||
        (args = field(activity, s_args)) == NULL)
        goto done;
    if (put(rows, C_STREAM, row, Py_NewRef(PyLong_Check(stream) ? stream : rows->zero)) < 0) goto done;
    if (PyLong_Check(device) && put(rows, C_DEVICE, row, Py_NewRef(device)) < 0) goto done;
    if (correlation != Py_None && put(rows, C_CORRELATION, row, PyNumber_Long(correlation)) < 0) goto done;
    PyObject *rf_id = Py_None;
    if (host_id != Py_None && (rf_id = PyDict_GetItemWithError(rows->launcher_rf_ids, host_id)) == NULL) {
        if (PyErr_Occurred()) goto done;
        rf_id = Py_None;
    }
    if (put(rows, C_LAUNCHER_RF_ID, row, Py_NewRef(rf_id)) < 0) goto done;
    int slim = PyObject_IsInstance(args, rows->args_types);
    if (slim < 0) goto done;
    nbytes = slim ? field(args, s_bytes) : PyObject_CallMethod(args, "get", "s", "bytes");
    if (nbytes == NULL) goto done;
    if (PyLong_Check(nbytes)) {
        PyObject *node_type = PySequence_GetItem(rows->node_types, row);
        int comp = node_type == NULL ? -1 : PyObject_RichCompareBool(node_type, rows->comp_node, Py_EQ);
        Py_XDECREF(node_type);
        if (comp < 0 || (comp && put(rows, C_ACTIVITY_BYTES, row, Py_NewRef(nbytes)) < 0)) goto done;
    }
    rc = 0;
done:
    Py_XDECREF(stream);
    Py_XDECREF(device);
    Py_XDECREF(correlation);
    Py_XDECREF(host_id);
    Py_XDECREF(args);
    Py_XDECREF(nbytes);
    return rc;
}

/* The attributes of `item`, no host op's, at `row` (see no_host_rows): 0, or -1 with an exception. */
static int no_host_row(const Rows *rows, Py_ssize_t row, PyObject *item) {
    PyObject *thread = NULL, *part_of = NULL, *owner = NULL, *activity = NULL, *tid = NULL;
    int rc = -1;
    if ((thread = field(item, s_thread)) == NULL || (part_of = field(item, s_part_of)) == NULL) goto done;
    if ((owner = part_of == Py_None ? Py_NewRef(Py_None) : field(part_of, s_host)) == NULL) goto done;
    if (owner != Py_None) { /* the later part of an op: its op's rf_id and thread */
        PyObject *known = PyDict_GetItemWithError(rows->thread_ids, thread);
        if (known == NULL && PyErr_Occurred()) goto done;
        /* owned before a put frees a column's old value, which may run code that changes the dict */
        if ((tid = known != NULL ? Py_NewRef(known) : field(owner, s_tid)) == NULL) goto done;
        if (put(rows, C_RF_ID, row, field(owner, s_rf_id)) < 0) {
            Py_DECREF(tid);
            goto done;
        }
        rc = put(rows, C_TID, row, tid);
        goto done;
    }
    if ((activity = field(item, s_activity)) == NULL) goto done;
    if (activity != Py_None) {
        rc = put(rows, C_TID, row, Py_NewRef(Py_None)) < 0 ? -1 : activity_row(rows, row, activity);
        goto done;
    }
    PyObject *known = PyDict_GetItemWithError(rows->thread_ids, thread); /* time outside operators on a thread */
    if (known == NULL && PyErr_Occurred()) goto done;
    rc = put(rows, C_TID, row, Py_NewRef(known != NULL ? known : Py_None));
done:
    Py_XDECREF(thread);
    Py_XDECREF(part_of);
    Py_XDECREF(owner);
    Py_XDECREF(activity);
    return rc;
}

static PyObject *no_host_rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *items, *at, *columns;
    Rows rows;
    if (!PyArg_ParseTuple(args, "O!O!OO!O!O!OO:no_host_rows", &PyList_Type, &items, &PyList_Type, &at, &rows.node_types,
                          &PyDict_Type, &rows.thread_ids, &PyDict_Type, &rows.launcher_rf_ids, &PyTuple_Type, &columns,
                          &rows.args_types, &rows.comp_node))
        return NULL;
    if (PyTuple_GET_SIZE(columns) != C_COUNT || PyList_GET_SIZE(at) != PyList_GET_SIZE(items)) {
        PyErr_SetString(PyExc_ValueError, "no_host_rows: seven columns, and a row for each item");
        return NULL;
    }
    for (int k = 0; k < C_COUNT; k++) {
        rows.columns[k] = PyTuple_GET_ITEM(columns, k);
        if (!PyList_Check(rows.columns[k])) {
            PyErr_SetString(PyExc_TypeError, "no_host_rows: the columns are lists");
            return NULL;
        }
    }
    /* copies: the items, rows and columns stay alive and in place whatever a comparison or a get does */
    items = PyList_AsTuple(items);
    at = PyList_AsTuple(at);
    columns = Py_NewRef(columns);
    rows.zero = PyLong_FromLong(0);
    int rc = items == NULL || at == NULL || rows.zero == NULL ? -1 : 0;
    for (Py_ssize_t i = 0; rc == 0 && i < PyTuple_GET_SIZE(items); i++) {
        Py_ssize_t row = PyLong_AsSsize_t(PyTuple_GET_ITEM(at, i));
        rc = row == -1 && PyErr_Occurred() ? -1 : no_host_row(&rows, row, PyTuple_GET_ITEM(items, i));
    }
    Py_XDECREF(items);
    Py_XDECREF(at);
    Py_DECREF(columns);
    Py_XDECREF(rows.zero);
    return rc < 0 ? NULL : Py_NewRef(Py_None);
}

static PyMethodDef methods[] = {
    {"group_by_thread", group_by_thread, METH_VARARGS, "group_by_thread(items, skipped_type) -> dict"},
    {"chain_items", chain_items, METH_VARARGS, "chain_items(items, head) -> None"},
    {"device_items", device_items, METH_VARARGS,
     "device_items(activities, items, item_type, node_type, next_id, skipped_category, stream_tag) -> "
     "(next_id, made, skipped)"},
    {"no_host_rows", no_host_rows, METH_VARARGS,
     "no_host_rows(items, rows, node_types, thread_ids, launcher_rf_ids, columns, args_types, comp_node) -> None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_item_passes", NULL, -1, methods};

PyMODINIT_FUNC PyInit__item_passes(void) {
    static const Interned names[] = {
        {&s_thread, "thread"}, {&s_node_type, "node_type"}, {&s_data, "data"},     {&s_node_id, "node_id"},
        {&s_name, "name"},     {&s_cat, "cat"},             {&s_device, "device"}, {&s_stream, "stream"},
        {&s_ts_us, "ts_us"},   {&s_dur_us, "dur_us"},       {&s_host_id, "host_id"},
        {&s_correlation, "correlation"}, {&s_args, "args"}, {&s_bytes, "bytes"}, {&s_part_of, "part_of"},
        {&s_host, "host"}, {&s_activity, "activity"}, {&s_rf_id, "rf_id"}, {&s_tid, "tid"},
    };
    if (intern_all(names, sizeof names / sizeof names[0]) < 0) return NULL;
    return PyModule_Create(&module);
}
