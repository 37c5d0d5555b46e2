/*
 * chakra._kahn: Kahn's topological order of a graph given as arrays, the ready node of least key first, in
 * C (chakra.graph.topological_order: a Python heap push and pop per node and a loop step per edge were
 * most of ordering a graph whose file is not in dependency order).
 *
 * kahn_order(child_ptr, child_pos, indegree, key) -> bytes of int64 positions, in order. Each argument
 * is a C-contiguous int64 buffer (numpy arrays): node i's children are child_pos[child_ptr[i]:
 * child_ptr[i + 1]] (a child listed once per edge), indegree[i] its count of edges from parents, key[i]
 * its place among ready nodes (least first; keys distinct). Nodes never ready (on or behind a cycle)
 * are left out. ValueError for arrays of the wrong lengths, positions out of range or a negative indegree.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

/* A binary min-heap of nodes ordered by key. */
typedef struct {
    int64_t *node;
    Py_ssize_t size;
    const int64_t *key;
} Heap;

static void heap_push(Heap *h, int64_t v) {
    Py_ssize_t at = h->size++;
    while (at > 0) {
        Py_ssize_t up = (at - 1) / 2;
        if (h->key[h->node[up]] <= h->key[v]) break;
        h->node[at] = h->node[up];
        at = up;
    }
    h->node[at] = v;
}

static int64_t heap_pop(Heap *h) {
    int64_t top = h->node[0], last = h->node[--h->size];
    Py_ssize_t at = 0;
    for (;;) {
        Py_ssize_t child = 2 * at + 1;
        if (child >= h->size) break;
        if (child + 1 < h->size && h->key[h->node[child + 1]] < h->key[h->node[child]]) child++;
        if (h->key[last] <= h->key[h->node[child]]) break;
        h->node[at] = h->node[child];
        at = child;
    }
    if (h->size > 0) h->node[at] = last;
    return top;
}

/* `obj` as a C-contiguous buffer of `count` int64 values (-1: any count) in `view`: 0, or -1 (set). */
static int int64s(PyObject *obj, Py_buffer *view, Py_ssize_t count, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    if (view->itemsize != 8 || (view->format && strcmp(view->format, "q") != 0 && strcmp(view->format, "l") != 0) ||
        (count >= 0 && view->len / 8 != count)) {
        if (count >= 0) PyErr_Format(PyExc_ValueError, "%s must be %zd int64 values", what, count);
        else PyErr_Format(PyExc_ValueError, "%s must be int64 values", what);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *kahn_order(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ptr_obj, *pos_obj, *indegree_obj, *key_obj;
    if (!PyArg_ParseTuple(args, "OOOO", &ptr_obj, &pos_obj, &indegree_obj, &key_obj)) return NULL;
    Py_buffer ptr_view = {0}, pos_view = {0}, indegree_view = {0}, key_view = {0};
    PyObject *result = NULL;
    int64_t *remaining = NULL;
    Heap heap = {NULL, 0, NULL};
    if (int64s(key_obj, &key_view, -1, "key") < 0) return NULL;
    Py_ssize_t n = key_view.len / 8;
    if (int64s(ptr_obj, &ptr_view, n + 1, "child_ptr") < 0 || int64s(pos_obj, &pos_view, -1, "child_pos") < 0 ||
        int64s(indegree_obj, &indegree_view, n, "indegree") < 0)
        goto done;
    const int64_t *child_ptr = ptr_view.buf, *child_pos = pos_view.buf, *indegree = indegree_view.buf;
    Py_ssize_t edges = pos_view.len / 8;
    for (Py_ssize_t i = 0; i <= n; i++) {
        if (child_ptr[i] < 0 || child_ptr[i] > edges || (i > 0 && child_ptr[i] < child_ptr[i - 1])) {
            PyErr_SetString(PyExc_ValueError, "child_ptr must rise from 0 to at most len(child_pos)");
            goto done;
        }
    }
    for (Py_ssize_t k = 0; k < edges; k++) {
        if (child_pos[k] < 0 || child_pos[k] >= n) {
            PyErr_SetString(PyExc_ValueError, "a child position is out of range");
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (indegree[i] < 0) {
            PyErr_SetString(PyExc_ValueError, "an indegree is negative");
            goto done;
        }
    }
    if (!(result = PyBytes_FromStringAndSize(NULL, n * 8))) goto done;
    int64_t *order = (int64_t *)PyBytes_AS_STRING(result);
    remaining = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *remaining);
    heap.node = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *heap.node);
    heap.key = key_view.buf;
    if (!remaining || !heap.node) {
        Py_CLEAR(result);
        PyErr_NoMemory();
        goto done;
    }
    memcpy(remaining, indegree, (size_t)n * sizeof *remaining);
    for (Py_ssize_t i = 0; i < n; i++)
        if (remaining[i] == 0) heap_push(&heap, i);
    Py_ssize_t placed = 0;
    while (heap.size > 0) {
        int64_t i = heap_pop(&heap);
        order[placed++] = i;
        for (int64_t k = child_ptr[i]; k < child_ptr[i + 1]; k++)
            if (--remaining[child_pos[k]] == 0) heap_push(&heap, child_pos[k]);
    }
    if (placed < n) _PyBytes_Resize(&result, placed * 8);
done:
    PyMem_Free(remaining);
    PyMem_Free(heap.node);
    if (key_view.obj) PyBuffer_Release(&key_view);
    if (ptr_view.obj) PyBuffer_Release(&ptr_view);
    if (pos_view.obj) PyBuffer_Release(&pos_view);
    if (indegree_view.obj) PyBuffer_Release(&indegree_view);
    return result;
}

static PyMethodDef methods[] = {
    {"kahn_order", kahn_order, METH_VARARGS,
     "kahn_order(child_ptr, child_pos, indegree, key) -> bytes of int64 positions in dependency order, the ready "
     "node of least key first; nodes never ready left out"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "chakra._kahn", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__kahn(void) { return PyModule_Create(&module); }
