/*
 * chakra._dot: a DOT file made only of the statements FlexFlow writes, read in C (see
 * chakra/flexflow/dot.py, whose regular expressions _HEADER, _STATEMENT, _ATTRIBUTE and _FOOTER this
 * reads as Python's re module reads them, for ASCII text).
 *
 * plain_statements(text) -> (names, attrs, node_at, edges) or None. The file is `digraph NAME {`, then
 * statements `A -> B;` and `N [key=value, ...];` (a value bare or quoted, with \" and \\ escapes), then
 * `}`. The nodes are in the order first named: `names` their names, `attrs` their attribute dicts,
 * `node_at` their (line, column) as native int64 pairs (a node first named by an edge has no attributes
 * and the edge's position; a node statement merges its attributes into the node's and moves it to the
 * statement's position). `edges` holds (source, target, line, column) per edge in file order, native
 * int64, the ends as indices of nodes. Columns, not an object per node and edge: a task graph holds
 * hundreds of thousands of each. Lines and columns count from 1. Equal keys and values are one str
 * (a task graph repeats its labels over its devices). None for anything else: text that is not ASCII
 * or holds a control character other than tab, newline and carriage return, comments, subgraphs, a
 * mistake (the Python readers take it and name the fault).
 */
#include "_text_cache.h"

typedef struct {
    const char *p, *start, *end;
    Py_ssize_t line;       /* of p, from 1 */
    const char *line_from; /* where p's line starts */
} Text;

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
static int is_name(char c) { return is_word(c) || c == '.'; }

static void skip_spaces(Text *t) {
    while (t->p < t->end && is_space(*t->p)) {
        if (*t->p == '\n') {
            t->line++;
            t->line_from = t->p + 1;
        }
        t->p++;
    }
}

/* Moves past a run of characters of `class`; its length (0: none). */
static Py_ssize_t take(Text *t, int (*class)(char)) {
    const char *from = t->p;
    while (t->p < t->end && class(*t->p)) t->p++;
    return t->p - from;
}

/* Past a quoted string (at its opening quote): "(?:[^"\\]|\\.)*" where . is not a newline. 0, or -1. */
static int skip_quoted(Text *t) {
    const char *p = t->p + 1;
    while (p < t->end && *p != '"') {
        if (*p == '\\') {
            if (p + 1 >= t->end || p[1] == '\n') return -1;
            p += 2;
        } else {
            p++;
        }
    }
    if (p >= t->end) return -1;
    /* newlines inside the string count toward the lines */
    for (const char *q = t->p; q <= p; q++) {
        if (*q == '\n') {
            t->line++;
            t->line_from = q + 1;
        }
    }
    t->p = p + 1;
    return 0;
}

static PyObject *text_of(const char *s, Py_ssize_t n) { return PyUnicode_FromStringAndSize(s, n); }

/* A quoted value without its quotes, \" and \\ unescaped (other escapes kept). */
static PyObject *unquoted(const char *s, Py_ssize_t n) {
    PyObject *out = PyUnicode_New(n, 127);
    if (out == NULL) return NULL;
    char *to = (char *)PyUnicode_DATA(out);
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] == '\\' && i + 1 < n && (s[i + 1] == '"' || s[i + 1] == '\\')) i++;
        to[k++] = s[i];
    }
    if (k == n) return out;
    PyObject *shorter = PyUnicode_FromStringAndSize(to, k);
    Py_DECREF(out);
    return shorter;
}

/* A quoted value [s, s + n), its quotes included, as unquoted() reads it. */
static PyObject *quoted_value(const char *s, Py_ssize_t n) { return unquoted(s + 1, n - 2); }

/* The str of the text [s, s + n) made by `make`: the one made of equal text before, from `cache`. New. */
static PyObject *cached(TextCache *cache, const char *s, Py_ssize_t n, PyObject *(*make)(const char *, Py_ssize_t)) {
    uint64_t hash = text_hash(s, n);
    PyObject *found = text_cache_get(cache, s, n, hash);
    if (found != NULL) return Py_NewRef(found);
    PyObject *made = make(s, n);
    if (made != NULL && text_cache_put(cache, s, n, hash, made) < 0) Py_CLEAR(made);
    return made;
}

/* Growable int64 columns (one row of `width` values at a time). */
typedef struct {
    int64_t *data;
    Py_ssize_t used, size; /* values */
} Int64s;

static int int64s_add(Int64s *c, const int64_t *row, Py_ssize_t width) {
    if (c->used + width > c->size) {
        Py_ssize_t size = c->size ? 2 * c->size : 1024;
        while (size < c->used + width) size *= 2;
        int64_t *data = PyMem_Realloc(c->data, (size_t)size * sizeof *data);
        if (data == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        c->data = data;
        c->size = size;
    }
    memcpy(c->data + c->used, row, (size_t)width * sizeof *row);
    c->used += width;
    return 0;
}

static PyObject *int64s_bytes(const Int64s *c) {
    return PyBytes_FromStringAndSize((const char *)c->data, c->used * (Py_ssize_t)sizeof(int64_t));
}

typedef struct {
    TextCache named;       /* node name -> its index (a PyLong), every node */
    TextCache keys, values; /* attribute texts -> their str */
    PyObject *names, *attrs;
    Int64s node_at, edges;
} Graph;

/* The attribute list between the brackets: into `attrs`. 1 read, 0 not of the plain form, -1 error. */
static int read_attrs(Graph *g, const char *from, const char *to, PyObject *attrs) {
    const char *p = from;
    for (;;) {
        const char *at = p;
        while (p < to && is_space(*p)) p++;
        const char *key = p;
        while (p < to && is_word(*p)) p++;
        Py_ssize_t key_len = p - key;
        while (p < to && is_space(*p)) p++;
        if (key_len == 0 || p >= to || *p != '=') {
            /* no attribute here: the rest must be white space */
            for (p = at; p < to; p++)
                if (!is_space(*p)) return 0;
            return 1;
        }
        p++;
        while (p < to && is_space(*p)) p++;
        PyObject *value;
        if (p < to && *p == '"') {
            const char *q = p + 1;
            while (q < to && *q != '"') q += *q == '\\' && q + 1 < to && q[1] != '\n' ? 2 : 1;
            if (q >= to) return 0; /* the brackets' scan kept quotes whole: not reached */
            /* keyed by the text with its quotes: a bare value of the same letters is another */
            value = cached(&g->values, p, q - p + 1, quoted_value);
            p = q + 1;
        } else {
            const char *v = p;
            while (p < to && *p != ',' && *p != '"' && !is_space(*p)) p++;
            if (p == v) return 0;
            value = cached(&g->values, v, p - v, text_of);
        }
        if (value == NULL) return -1;
        while (p < to && is_space(*p)) p++;
        if (p < to && *p != ',') {
            Py_DECREF(value);
            return 0;
        }
        PyObject *name = cached(&g->keys, key, key_len, text_of);
        int status = name == NULL ? -1 : PyDict_SetItem(attrs, name, value);
        Py_XDECREF(name);
        Py_DECREF(value);
        if (status < 0) return -1;
        if (p >= to) return 1;
        p++; /* past the comma */
    }
}

/* The index of the node named by the text [s, s + n): the one named before (found without making a str
 * of its name), else a new one at (line, column) with no attributes. -1 on error. */
static Py_ssize_t node_named(Graph *g, const char *s, Py_ssize_t n, Py_ssize_t line, Py_ssize_t column) {
    uint64_t hash = text_hash(s, n);
    PyObject *found = text_cache_get(&g->named, s, n, hash);
    if (found != NULL) return PyLong_AsSsize_t(found);
    Py_ssize_t index = PyList_GET_SIZE(g->names);
    PyObject *name = text_of(s, n), *attrs = PyDict_New(), *number = PyLong_FromSsize_t(index);
    int64_t at[2] = {line, column};
    int status = name && attrs && number && PyList_Append(g->names, name) == 0 && PyList_Append(g->attrs, attrs) == 0 &&
                         int64s_add(&g->node_at, at, 2) == 0 && text_cache_put(&g->named, s, n, hash, number) == 0
                     ? 0
                     : -1;
    Py_XDECREF(name);
    Py_XDECREF(attrs);
    Py_XDECREF(number);
    return status < 0 ? -1 : index;
}

static PyObject *plain_statements(PyObject *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "plain_statements: text must be a str");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(arg)) Py_RETURN_NONE;
    Py_ssize_t size;
    const char *data = PyUnicode_AsUTF8AndSize(arg, &size);
    if (data == NULL) return NULL;
    for (Py_ssize_t i = 0; i < size; i++) {
        unsigned char c = (unsigned char)data[i];
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') Py_RETURN_NONE; /* Python's \s knows more */
    }
    Text t = {data, data, data + size, 1, data};
    /* \s*digraph\s+[\w.]*\s*\{ */
    skip_spaces(&t);
    if (t.end - t.p < 7 || memcmp(t.p, "digraph", 7) != 0) Py_RETURN_NONE;
    t.p += 7;
    const char *before = t.p;
    skip_spaces(&t);
    if (t.p == before) Py_RETURN_NONE;
    take(&t, is_name);
    skip_spaces(&t);
    if (t.p >= t.end || *t.p != '{') Py_RETURN_NONE;
    t.p++;
    PyObject *out = NULL;
    Graph g = {.named = {.limit = (size_t)-1}, .names = PyList_New(0), .attrs = PyList_New(0)};
    if (g.names == NULL || g.attrs == NULL) goto done;
    for (;;) {
        skip_spaces(&t); /* a statement starts here, or the closing brace */
        const char *name = t.p;
        Py_ssize_t line = t.line, column = t.p - t.line_from + 1;
        Py_ssize_t name_len = take(&t, is_name);
        if (name_len == 0) {
            /* \s*\}\s* to the end */
            if (t.p >= t.end || *t.p != '}') goto plain_no;
            t.p++;
            skip_spaces(&t);
            if (t.p != t.end) goto plain_no;
            PyObject *node_at = int64s_bytes(&g.node_at), *edges = int64s_bytes(&g.edges);
            if (node_at && edges) out = PyTuple_Pack(4, g.names, g.attrs, node_at, edges);
            Py_XDECREF(node_at);
            Py_XDECREF(edges);
            goto done;
        }
        skip_spaces(&t);
        if (t.end - t.p >= 2 && t.p[0] == '-' && t.p[1] == '>') {
            t.p += 2;
            skip_spaces(&t);
            const char *target = t.p;
            Py_ssize_t target_len = take(&t, is_name);
            skip_spaces(&t);
            if (target_len == 0 || t.p >= t.end || *t.p != ';') goto plain_no;
            t.p++;
            Py_ssize_t source_at = node_named(&g, name, name_len, line, column), target_at = -1;
            if (source_at >= 0) target_at = node_named(&g, target, target_len, line, column);
            int64_t edge[4] = {source_at, target_at, line, column};
            if (target_at < 0 || int64s_add(&g.edges, edge, 4) < 0) goto done;
            continue;
        }
        if (t.p >= t.end || *t.p != '[') goto plain_no;
        /* the attribute text: up to the first ] outside a quoted string */
        const char *attrs_from = ++t.p;
        while (t.p < t.end && *t.p != ']') {
            if (*t.p == '"') {
                if (skip_quoted(&t) < 0) goto plain_no;
            } else {
                if (*t.p == '\n') {
                    t.line++;
                    t.line_from = t.p + 1;
                }
                t.p++;
            }
        }
        if (t.p >= t.end) goto plain_no;
        const char *attrs_to = t.p++;
        skip_spaces(&t);
        if (t.p >= t.end || *t.p != ';') goto plain_no;
        t.p++;
        /* a node named before (by an edge) gets these attributes merged in, and this position */
        Py_ssize_t node = node_named(&g, name, name_len, line, column);
        if (node < 0) goto done;
        g.node_at.data[2 * node] = line;
        g.node_at.data[2 * node + 1] = column;
        int read = read_attrs(&g, attrs_from, attrs_to, PyList_GET_ITEM(g.attrs, node));
        if (read < 0) goto done;
        if (read == 0) goto plain_no;
    }
plain_no:
    Py_CLEAR(out);
    out = Py_NewRef(Py_None);
done:
    text_cache_clear(&g.named);
    text_cache_clear(&g.keys);
    text_cache_clear(&g.values);
    Py_XDECREF(g.names);
    Py_XDECREF(g.attrs);
    PyMem_Free(g.node_at.data);
    PyMem_Free(g.edges.data);
    return out;
}

static PyMethodDef methods[] = {
    {"plain_statements", plain_statements, METH_O, "The nodes and edges of a DOT file of FlexFlow's plain statements."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_dot", NULL, -1, methods};

PyMODINIT_FUNC PyInit__dot(void) { return PyModule_Create(&module); }
