/*
 * chakra._host_record's reader of a grouped host trace's nodes straight from the file's text (see
 * _host_record.h): msgspec made a struct per record, with its attrs and IO objects as views of the text,
 * only for the node's parts to be read from that text again; here each record is read once, into its node.
 *
 * grouped_nodes(text, start, first, core, extras, texts, strings, node_type, io_type[, tables]) -> (nodes, left,
 * end, closed) or None: the records of a piece of the array of records, from offset `start` (with `first`, the
 * array's '['; else where a record may begin). Each record {"id", "name", "ctrl_deps", "inputs",
 * "outputs", "attrs", other keys ignored} becomes the node host_nodes makes of msgspec's struct of it,
 * the text checked as JSON here (skip_value's `strict`). A record of a form read in Python (escapes in
 * keys, \u escapes, bytes past ASCII outside names, values of other kinds, a key given twice, a core
 * attribute that is not the observer's kind) is None in `nodes`, and its (index, start, end) offsets are
 * in `left`. `end` is where the records read end, past the comma after the last (or the ']': then
 * `closed`); a record the text cuts is read again from there with more text. None when the text is
 * not such an array of objects: the caller decodes the whole file with msgspec, which names the fault.
 * `tables` (text_tables()) keeps the values found by their text from one call to the next.
 */
#include "_host_record.h"

enum { K_ID, K_NAME, K_CTRL, K_INPUTS, K_OUTPUTS, K_ATTRS, K_COUNT };
static const char *const KEYS[K_COUNT] = {"id", "name", "ctrl_deps", "inputs", "outputs", "attrs"};
static const Py_ssize_t KEY_LENGTHS[K_COUNT] = {2, 4, 9, 6, 7, 5};

/* The key's index in KEYS, K_COUNT for another. */
static int key_index(const char *key, Py_ssize_t len) {
    for (int k = 0; k < K_COUNT; k++)
        if (len == KEY_LENGTHS[k] && memcmp(key, KEYS[k], (size_t)len) == 0) return k;
    return K_COUNT;
}

/* One record at s->p as its node (new reference); Py_None (new) for a form read in Python, s->p then
 * anywhere in it; NULL on error. */
static PyObject *scan_record(Records *r, Scan *s) {
    PyObject *id = NULL, *name = NULL, *parent = NULL, *node = NULL;
    int seen[K_COUNT + 1] = {0}, rc = 1;
    NodeParts parts;
    if (parts_begin(&parts, r) < 0) return NULL;
    if (!take(s, '{')) goto left;
    if (!take(s, '}')) {
        do {
            const char *key;
            Py_ssize_t key_len;
            skip_space(s);
            if (!string_span(s, &key, &key_len) || !take(s, ':')) goto left;
            int k = key_index(key, key_len);
            if (k < K_COUNT && seen[k]++) goto left; /* given twice: msgspec settles which counts */
            skip_space(s);
            if (s->p >= s->end) goto left;
            switch (k) {
            case K_ID:
            case K_CTRL:
                if (!(*(k == K_ID ? &id : &parent) = integer(s))) goto left;
                break;
            case K_NAME:
                if (*s->p != '"' || !(name = shared_string_value(r, s))) goto left;
                break;
            case K_INPUTS:
            case K_OUTPUTS:
                rc = parts_io(&parts, k == K_INPUTS ? 0 : 1, s, 1);
                break;
            case K_ATTRS:
                rc = parts_attrs(&parts, s);
                break;
            default:
                if (!ascii_only(key, key_len) || skip_value(s, 0, 1) < 0) goto left;
            }
            if (rc != 1) goto left;
        } while (take(s, ','));
        if (!take(s, '}')) goto left;
    }
    if (!id || !name) goto left; /* msgspec names what is missing */
    if (!parent && !(parent = PyLong_FromLong(0))) goto done;
    node = parts_node(&parts, id, name, parent);
    goto done;
left:
    if (rc >= 0 && !PyErr_Occurred()) node = Py_NewRef(Py_None);
done:
    parts_end(&parts);
    Py_XDECREF(id);
    Py_XDECREF(name);
    Py_XDECREF(parent);
    return node;
}

/* Appends (index, start, end) to `left`: 0, or -1 (set). */
static int add_left(PyObject *left, Py_ssize_t index, Py_ssize_t start, Py_ssize_t end) {
    PyObject *entry = Py_BuildValue("nnn", index, start, end);
    int rc = entry ? PyList_Append(left, entry) : -1;
    Py_XDECREF(entry);
    return rc;
}

#define TABLES_NAME "chakra._host_record.TextTables"

static void free_tables(PyObject *capsule) {
    TextTables *tables = PyCapsule_GetPointer(capsule, TABLES_NAME);
    if (!tables) return;
    text_cache_clear(&tables->io_texts);
    text_cache_clear(&tables->names);
    text_cache_clear(&tables->extras_by_text);
    PyMem_Free(tables);
}

PyObject *text_tables(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    TextTables *tables = PyMem_Calloc(1, sizeof *tables);
    if (!tables) return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(tables, TABLES_NAME, free_tables);
    if (!capsule) PyMem_Free(tables);
    return capsule;
}

TextTables *tables_of(PyObject *capsule) {
    if (capsule == Py_None) return NULL;
    return PyCapsule_GetPointer(capsule, TABLES_NAME);
}

/* Past the JSON object at p (its '{'): where it ends; NULL when the text ends first, with `bad` set
 * where the text is not one (a bracket closing what it did not open, or too deep). Only brackets and
 * strings are looked at: msgspec reads the record and names any other fault. */
static const char *object_end(const char *p, const char *end, int *bad) {
    char open[MAX_NESTING];
    int depth = 0;
    if (p >= end || *p != '{') {
        *bad = p < end;
        return NULL;
    }
    for (; p < end; p++) {
        char c = *p;
        if (c == '"') {
            for (p++; p < end && *p != '"'; p++)
                if (*p == '\\') p++;
            if (p >= end) return NULL;
        } else if (c == '{' || c == '[') {
            if (depth == MAX_NESTING) {
                *bad = 1;
                return NULL;
            }
            open[depth++] = c;
        } else if (c == '}' || c == ']') {
            if (open[depth - 1] != (c == '}' ? '{' : '[')) {
                *bad = 1;
                return NULL;
            }
            if (--depth == 0) return p + 1;
        }
    }
    return NULL;
}

PyObject *grouped_nodes(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t start;
    int first;
    PyObject *tables = Py_None;
    Records r = {.kwnames = NULL};
    if (!PyArg_ParseTuple(args, "y*npO!O!O!O!OO|O", &view, &start, &first, &PyDict_Type, &r.defaults, &PyDict_Type,
                          &r.extras, &PyDict_Type, &r.texts, &PyDict_Type, &r.strings, &r.node_type, &r.io_type,
                          &tables))
        return NULL;
    if (!(r.tables = tables_of(tables)) && PyErr_Occurred()) {
        PyBuffer_Release(&view);
        return NULL;
    }
    PyObject *nodes = NULL, *left = NULL, *result = NULL, *node = NULL;
    const char *text = (const char *)view.buf, *commit;
    int closed = 0;
    if (start < 0 || start > view.len) {
        PyErr_SetString(PyExc_ValueError, "start is outside the text");
        goto done;
    }
    if (records_open(&r) < 0 || !(nodes = PyList_New(0)) || !(left = PyList_New(0))) goto done;
    Scan s = {text + start, text + view.len};
    commit = s.p;
    if (first) {
        skip_space(&s);
        if (s.p == s.end) goto out;
        if (!take(&s, '[')) goto not_array;
        commit = s.p;
        skip_space(&s);
        if (take(&s, ']')) {
            commit = s.p;
            closed = 1;
            goto out;
        }
    }
    for (;;) {
        skip_space(&s);
        if (s.p == s.end) goto out;
        const char *from = s.p;
        if (!(node = scan_record(&r, &s))) goto done;
        if (node == Py_None) { /* its end found without reading it; msgspec reads it */
            int bad = 0;
            if (!(s.p = object_end(from, s.end, &bad))) {
                if (bad) goto not_array;
                goto out; /* the record goes on in text not read yet */
            }
        }
        skip_space(&s);
        if (s.p == s.end) goto out; /* read again with what follows it */
        if (*s.p != ',' && *s.p != ']') goto not_array;
        closed = *s.p++ == ']';
        if (node == Py_None && add_left(left, PyList_GET_SIZE(nodes), from - text, s.p - 1 - text) < 0) goto done;
        int rc = PyList_Append(nodes, node);
        Py_CLEAR(node);
        if (rc < 0) goto done;
        commit = s.p;
        if (closed) goto out;
    }
out:
    result = Py_BuildValue("OOnO", nodes, left, (Py_ssize_t)(commit - text), closed ? Py_True : Py_False);
    goto done;
not_array:
    result = Py_NewRef(Py_None);
done:
    records_close(&r);
    Py_XDECREF(node);
    Py_XDECREF(nodes);
    Py_XDECREF(left);
    PyBuffer_Release(&view);
    return result;
}
