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
 */
#include "_slots.h"

static PyObject *s_thread, *s_node_type, *s_data, *s_node_id;

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

/* Appends `node_id` to the `data` list of `item`: 0, or -1 with an exception. */
static int depend(PyObject *item, PyObject *node_id) {
    PyObject *data = field(item, s_data);
    if (data == NULL) return -1;
    int rc = PyList_Check(data) ? PyList_Append(data, node_id) : -1;
    if (!PyList_Check(data)) PyErr_SetString(PyExc_TypeError, "an item's data must be a list");
    Py_DECREF(data);
    return rc;
}

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

static PyMethodDef methods[] = {
    {"group_by_thread", group_by_thread, METH_VARARGS, "group_by_thread(items, skipped_type) -> dict"},
    {"chain_items", chain_items, METH_VARARGS, "chain_items(items, head) -> None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_item_passes", NULL, -1, methods};

PyMODINIT_FUNC PyInit__item_passes(void) {
    static const Interned names[] = {
        {&s_thread, "thread"}, {&s_node_type, "node_type"}, {&s_data, "data"}, {&s_node_id, "node_id"},
    };
    if (intern_all(names, sizeof names / sizeof names[0]) < 0) return NULL;
    return PyModule_Create(&module);
}
