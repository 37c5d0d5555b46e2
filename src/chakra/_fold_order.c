/*
 * chakra._fold_order: a graph's rows in dependency order with the rows that do no work folded away, in C
 * (chakra/tensorflow/convert.py: this was a set per row and a Python heap push per edge, a third of a
 * TensorFlow conversion).
 *
 * fold_in_order(inputs, folding, loop_back, starts) -> (rows, data, ctrl, folded, back_edges, on_cycle):
 *   inputs     per row, a sequence of (source row or -1, port, is a control edge);
 *   folding    bytes, one per row: nonzero for a row folded away (what depends on it depends on what it
 *              depends on);
 *   loop_back  bytes, one per row: nonzero for the source of a loop's back edge, whose edges do not
 *              order the rows (they are counted in back_edges, once per row and distinct source);
 *   starts     per row, an int (when it started, ns) or None (never measured: after every measured one).
 * The order is Kahn's over the distinct sources of each row's inputs, the ready row of least
 * (start, row) first. Each row taken stands for the nodes it becomes: itself as the next node id (0, 1,
 * ... in order) unless it folds, else the union of what its inputs stand for. `rows` are the rows that
 * became nodes, in order; data[k] and ctrl[k] the sorted node ids row k depends on through data inputs
 * and through control inputs (those also in data left out), read from what each input's source stands
 * for when the row is taken (nothing for a source not taken yet: a back edge's); `folded` the rows
 * folded, in order; on_cycle the rows never ready (on a cycle). ValueError for inputs of the wrong
 * shape, a source out of range or masks of the wrong length; OverflowError for a start outside 64 bits
 * (the caller passes the starts' ranks then).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>

typedef struct {
    Py_ssize_t source;
    int control;
} Edge;

typedef struct {
    int measured;
    long long start_ns;
    Py_ssize_t row;
} Ready;

/* Whether ready a comes before ready b: measured before unmeasured, then by start, then by row. */
static int before(const Ready *a, const Ready *b) {
    if (a->measured != b->measured) return a->measured;
    if (a->measured && a->start_ns != b->start_ns) return a->start_ns < b->start_ns;
    return a->row < b->row;
}

static void heap_push(Ready *heap, Py_ssize_t *size, Ready item) {
    Py_ssize_t k = (*size)++;
    while (k > 0) {
        Py_ssize_t parent = (k - 1) / 2;
        if (!before(&item, &heap[parent])) break;
        heap[k] = heap[parent];
        k = parent;
    }
    heap[k] = item;
}

static Ready heap_pop(Ready *heap, Py_ssize_t *size) {
    Ready top = heap[0], last = heap[--*size];
    Py_ssize_t k = 0, n = *size;
    for (;;) {
        Py_ssize_t child = 2 * k + 1;
        if (child >= n) break;
        if (child + 1 < n && before(&heap[child + 1], &heap[child])) child++;
        if (!before(&heap[child], &last)) break;
        heap[k] = heap[child];
        k = child;
    }
    if (n > 0) heap[k] = last;
    return top;
}

/* A growable array of node ids. */
typedef struct {
    long long *ids;
    Py_ssize_t size, capacity;
} Ids;

static int ids_reserve(Ids *a, Py_ssize_t more) {
    if (a->size + more <= a->capacity) return 0;
    Py_ssize_t capacity = a->capacity ? a->capacity : 64;
    while (capacity < a->size + more) capacity *= 2;
    long long *ids = PyMem_Realloc(a->ids, capacity * sizeof(long long));
    if (ids == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    a->ids = ids;
    a->capacity = capacity;
    return 0;
}

static int compare_ids(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* Sorts and drops repeats. */
static void sort_unique(Ids *a) {
    if (a->size < 2) return;
    qsort(a->ids, a->size, sizeof(long long), compare_ids);
    Py_ssize_t kept = 1;
    for (Py_ssize_t k = 1; k < a->size; k++)
        if (a->ids[k] != a->ids[kept - 1]) a->ids[kept++] = a->ids[k];
    a->size = kept;
}

static PyObject *list_of(const long long *ids, Py_ssize_t n) {
    PyObject *list = PyList_New(n);
    for (Py_ssize_t k = 0; list != NULL && k < n; k++) {
        PyObject *id = PyLong_FromLongLong(ids[k]);
        if (id == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, k, id);
    }
    return list;
}

/* What each row stands for: a span of `pool` (its sorted node ids). */
typedef struct {
    Py_ssize_t at, size;
} Span;

typedef struct {
    Py_ssize_t rows;
    Py_ssize_t *edge_start; /* rows + 1: row r's edges are edges[edge_start[r] .. edge_start[r + 1]) */
    Edge *edges;
    Py_ssize_t *child_start; /* rows + 1, over `children` */
    Py_ssize_t *children;
    Py_ssize_t *waiting;
    Ready *keys, *heap;
    Span *stands;
    Ids pool, data, ctrl;
} Graph;

static void graph_free(Graph *g) {
    PyMem_Free(g->edge_start);
    PyMem_Free(g->edges);
    PyMem_Free(g->child_start);
    PyMem_Free(g->children);
    PyMem_Free(g->waiting);
    PyMem_Free(g->keys);
    PyMem_Free(g->heap);
    PyMem_Free(g->stands);
    PyMem_Free(g->pool.ids);
    PyMem_Free(g->data.ids);
    PyMem_Free(g->ctrl.ids);
}

/* Reads the inputs into g's edge arrays; 0, or -1 with an exception. */
static int read_edges(Graph *g, PyObject *inputs) {
    Py_ssize_t total = 0;
    for (Py_ssize_t r = 0; r < g->rows; r++) {
        PyObject *row = PyList_GET_ITEM(inputs, r);
        if (!PyTuple_Check(row)) {
            PyErr_SetString(PyExc_ValueError, "fold_in_order: a row's inputs are not a tuple");
            return -1;
        }
        total += PyTuple_GET_SIZE(row);
    }
    g->edge_start = PyMem_Malloc((g->rows + 1) * sizeof(Py_ssize_t));
    g->edges = PyMem_Malloc((total ? total : 1) * sizeof(Edge));
    if (g->edge_start == NULL || g->edges == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t at = 0;
    for (Py_ssize_t r = 0; r < g->rows; r++) {
        PyObject *row = PyList_GET_ITEM(inputs, r);
        g->edge_start[r] = at;
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(row); k++) {
            PyObject *input = PyTuple_GET_ITEM(row, k);
            if (!PyTuple_Check(input) || PyTuple_GET_SIZE(input) != 3) {
                PyErr_SetString(PyExc_ValueError, "fold_in_order: an input is not (source, port, control)");
                return -1;
            }
            Py_ssize_t source = PyLong_AsSsize_t(PyTuple_GET_ITEM(input, 0));
            if (source == -1 && PyErr_Occurred()) return -1;
            int control = PyObject_IsTrue(PyTuple_GET_ITEM(input, 2));
            if (control < 0) return -1;
            if (source >= g->rows || source < -1) {
                PyErr_SetString(PyExc_ValueError, "fold_in_order: an input's source row is out of range");
                return -1;
            }
            g->edges[at++] = (Edge){source, control};
        }
    }
    g->edge_start[g->rows] = at;
    return 0;
}

/* Each row's distinct sources that order it (not a loop's back edge): children lists and waiting
 * counts; the back edges counted. 0, or -1 with an exception. */
static int link_children(Graph *g, const char *loop_back, Py_ssize_t *back_edges) {
    Py_ssize_t n = g->rows, total = g->edge_start[n];
    g->child_start = PyMem_Calloc(n + 1, sizeof(Py_ssize_t));
    g->children = PyMem_Malloc((total ? total : 1) * sizeof(Py_ssize_t));
    g->waiting = PyMem_Calloc(n ? n : 1, sizeof(Py_ssize_t));
    Py_ssize_t *seen = PyMem_Malloc((n ? n : 1) * sizeof(Py_ssize_t)); /* the last row that named each source */
    Py_ssize_t *parents = PyMem_Malloc((total ? total : 1) * sizeof(Py_ssize_t));
    if (g->child_start == NULL || g->children == NULL || g->waiting == NULL || seen == NULL || parents == NULL) {
        PyMem_Free(seen);
        PyMem_Free(parents);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) seen[k] = -1;
    /* the distinct ordering parents of each row, kept in place of its edges' order */
    Py_ssize_t count = 0;
    Py_ssize_t *parent_start = g->child_start; /* reused below: counts first */
    for (Py_ssize_t r = 0; r < n; r++) {
        for (Py_ssize_t e = g->edge_start[r]; e < g->edge_start[r + 1]; e++) {
            Py_ssize_t source = g->edges[e].source;
            if (source < 0 || seen[source] == r) continue;
            seen[source] = r;
            if (loop_back[source]) {
                (*back_edges)++;
                continue;
            }
            parents[count++] = source;
            g->waiting[r]++;
            parent_start[source + 1]++;
        }
    }
    for (Py_ssize_t k = 0; k < n; k++) parent_start[k + 1] += parent_start[k];
    Py_ssize_t *fill = seen; /* where the next child of each row goes */
    for (Py_ssize_t k = 0; k < n; k++) fill[k] = g->child_start[k];
    Py_ssize_t at = 0;
    for (Py_ssize_t r = 0; r < n; r++)
        for (Py_ssize_t k = 0; k < g->waiting[r]; k++) g->children[fill[parents[at++]]++] = r;
    PyMem_Free(seen);
    PyMem_Free(parents);
    return 0;
}

/* The ids row r's inputs stand for, of one kind (data or control), sorted, without repeats, into out. */
static int gather_ids(Graph *g, Py_ssize_t r, int control, Ids *out) {
    out->size = 0;
    for (Py_ssize_t e = g->edge_start[r]; e < g->edge_start[r + 1]; e++) {
        Edge edge = g->edges[e];
        if (edge.source < 0 || edge.control != control) continue;
        Span s = g->stands[edge.source];
        if (s.size == 0) continue;
        if (ids_reserve(out, s.size) < 0) return -1;
        memcpy(out->ids + out->size, g->pool.ids + s.at, s.size * sizeof(long long));
        out->size += s.size;
    }
    sort_unique(out);
    return 0;
}

/* ctrl without the ids also in data (both sorted). */
static void drop_common(Ids *ctrl, const Ids *data) {
    Py_ssize_t kept = 0, d = 0;
    for (Py_ssize_t k = 0; k < ctrl->size; k++) {
        while (d < data->size && data->ids[d] < ctrl->ids[k]) d++;
        if (d < data->size && data->ids[d] == ctrl->ids[k]) continue;
        ctrl->ids[kept++] = ctrl->ids[k];
    }
    ctrl->size = kept;
}

/* Row r stands for the sorted union of data and ctrl (when it folds) or for `id`. */
static int stand_for(Graph *g, Py_ssize_t r, int folds, long long id) {
    Py_ssize_t at = g->pool.size, n = folds ? g->data.size + g->ctrl.size : 1;
    if (ids_reserve(&g->pool, n) < 0) return -1;
    long long *out = g->pool.ids + at;
    if (!folds) {
        out[0] = id;
    } else { /* a merge: the two are sorted and share no id once drop_common ran */
        Py_ssize_t i = 0, j = 0, k = 0;
        while (i < g->data.size || j < g->ctrl.size)
            out[k++] = (j >= g->ctrl.size || (i < g->data.size && g->data.ids[i] < g->ctrl.ids[j])) ? g->data.ids[i++]
                                                                                                     : g->ctrl.ids[j++];
    }
    g->pool.size += n;
    g->stands[r] = (Span){at, n};
    return 0;
}

static int append_new(PyObject *list, PyObject *item) {
    if (item == NULL) return -1;
    int status = PyList_Append(list, item);
    Py_DECREF(item);
    return status;
}

static PyObject *fold_in_order(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *inputs, *starts, *result = NULL;
    const char *folding, *loop_back;
    Py_ssize_t folding_len, loop_back_len;
    if (!PyArg_ParseTuple(args, "O!y#y#O!", &PyList_Type, &inputs, &folding, &folding_len, &loop_back,
                          &loop_back_len, &PyList_Type, &starts))
        return NULL;
    Graph g = {.rows = PyList_GET_SIZE(inputs)};
    if (folding_len != g.rows || loop_back_len != g.rows || PyList_GET_SIZE(starts) != g.rows) {
        PyErr_SetString(PyExc_ValueError, "fold_in_order: the masks and starts must have a value per row");
        return NULL;
    }
    PyObject *rows = PyList_New(0), *data = PyList_New(0), *ctrl = PyList_New(0), *folded = PyList_New(0);
    Py_ssize_t back_edges = 0, taken = 0, heap_size = 0;
    long long next_id = 0;
    if (rows == NULL || data == NULL || ctrl == NULL || folded == NULL) goto done;
    if (read_edges(&g, inputs) < 0 || link_children(&g, loop_back, &back_edges) < 0) goto done;
    g.keys = PyMem_Malloc((g.rows ? g.rows : 1) * sizeof(Ready));
    g.heap = PyMem_Malloc((g.rows ? g.rows : 1) * sizeof(Ready));
    g.stands = PyMem_Calloc(g.rows ? g.rows : 1, sizeof(Span));
    if (g.keys == NULL || g.heap == NULL || g.stands == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t r = 0; r < g.rows; r++) {
        PyObject *start = PyList_GET_ITEM(starts, r);
        g.keys[r] = (Ready){start != Py_None, 0, r};
        if (start != Py_None) {
            int overflow = 0;
            g.keys[r].start_ns = PyLong_AsLongLongAndOverflow(start, &overflow);
            if (overflow || (g.keys[r].start_ns == -1 && PyErr_Occurred())) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_OverflowError, "fold_in_order: a start outside 64 bits");
                goto done;
            }
        }
        if (g.waiting[r] == 0) heap_push(g.heap, &heap_size, g.keys[r]);
    }
    while (heap_size > 0) {
        Py_ssize_t r = heap_pop(g.heap, &heap_size).row;
        taken++;
        if (gather_ids(&g, r, 0, &g.data) < 0 || gather_ids(&g, r, 1, &g.ctrl) < 0) goto done;
        drop_common(&g.ctrl, &g.data);
        int folds = folding[r] != 0;
        if (folds) {
            if (append_new(folded, PyLong_FromSsize_t(r)) < 0) goto done;
        } else if (append_new(rows, PyLong_FromSsize_t(r)) < 0 || append_new(data, list_of(g.data.ids, g.data.size)) < 0 ||
                   append_new(ctrl, list_of(g.ctrl.ids, g.ctrl.size)) < 0) {
            goto done;
        }
        if (stand_for(&g, r, folds, next_id) < 0) goto done;
        if (!folds) next_id++;
        for (Py_ssize_t k = g.child_start[r]; k < g.child_start[r + 1]; k++) {
            Py_ssize_t child = g.children[k];
            if (--g.waiting[child] == 0) heap_push(g.heap, &heap_size, g.keys[child]);
        }
    }
    result = Py_BuildValue("(OOOOnn)", rows, data, ctrl, folded, back_edges, g.rows - taken);
done:
    graph_free(&g);
    Py_XDECREF(rows);
    Py_XDECREF(data);
    Py_XDECREF(ctrl);
    Py_XDECREF(folded);
    return result;
}

static PyMethodDef methods[] = {
    {"fold_in_order", fold_in_order, METH_VARARGS,
     "fold_in_order(inputs, folding, loop_back, starts) -> (rows, data, ctrl, folded, back_edges, on_cycle)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fold_order", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fold_order(void) { return PyModule_Create(&module); }
