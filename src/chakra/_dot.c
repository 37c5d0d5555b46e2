/*
 * chakra._dot: a DOT file made only of the statements FlexFlow writes, read in C (see
 * chakra/flexflow/dot.py, whose regular expressions _HEADER, _STATEMENT, _ATTRIBUTE and _FOOTER this
 * reads as Python's re module reads them, for ASCII text).
 *
 * plain_statements(text) -> (nodes, edges) or None. The file is `digraph NAME {`, then statements
 * `A -> B;` and `N [key=value, ...];` (a value bare or quoted, with \" and \\ escapes), then `}`.
 * nodes: [[name, {key: value}, line, column]] in the order first named, each a list (a node first named
 * by an edge has no attributes and the edge's position; a node statement merges its attributes into the
 * node's and moves it to the statement's position); edges: [(source, target, line, column)] in file order. Lines
 * and columns count from 1. None for anything else: text that is not ASCII or holds a control character
 * other than tab, newline and carriage return, comments, subgraphs, a mistake (the Python readers take
 * it and name the fault).
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

/* The attribute list between the brackets: into `attrs`. 1 read, 0 not of the plain form, -1 error. */
static int read_attrs(const char *from, const char *to, PyObject *attrs) {
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
            value = unquoted(p + 1, q - p - 1);
            p = q + 1;
        } else {
            const char *v = p;
            while (p < to && *p != ',' && *p != '"' && !is_space(*p)) p++;
            if (p == v) return 0;
            value = text_of(v, p - v);
        }
        if (value == NULL) return -1;
        while (p < to && is_space(*p)) p++;
        if (p < to && *p != ',') {
            Py_DECREF(value);
            return 0;
        }
        PyObject *name = text_of(key, key_len);
        int status = name == NULL ? -1 : PyDict_SetItem(attrs, name, value);
        Py_XDECREF(name);
        Py_DECREF(value);
        if (status < 0) return -1;
        if (p >= to) return 1;
        p++; /* past the comma */
    }
}

/* The node named by the text [s, s + n): the one named before (found in `named` by its text, without
 * making a str of it), else a new one, [name, attrs, line, column], appended to `nodes`, its attributes
 * `attrs` (a new dict when NULL; stolen). Borrowed; NULL on error. */
static PyObject *node_named(PyObject *nodes, TextCache *named, const char *s, Py_ssize_t n, Py_ssize_t line,
                            Py_ssize_t column, PyObject *attrs) {
    uint64_t hash = text_hash(s, n);
    PyObject *found = text_cache_get(named, s, n, hash);
    if (found != NULL) {
        Py_XDECREF(attrs);
        return found;
    }
    PyObject *name = text_of(s, n), *node = NULL;
    if (!attrs) attrs = PyDict_New();
    if (name && attrs) node = Py_BuildValue("[OOnn]", name, attrs, line, column);
    Py_XDECREF(name);
    Py_XDECREF(attrs);
    if (node == NULL) return NULL;
    int status = PyList_Append(nodes, node) < 0 || text_cache_put(named, s, n, hash, node) < 0 ? -1 : 0;
    Py_DECREF(node);
    return status < 0 ? NULL : node;
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
    PyObject *nodes = PyList_New(0), *edges = PyList_New(0), *out = NULL;
    TextCache named = {.limit = (size_t)-1}; /* every node by its name's text */
    if (nodes == NULL || edges == NULL) goto done;
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
            out = PyTuple_Pack(2, nodes, edges);
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
            PyObject *source = node_named(nodes, &named, name, name_len, line, column, NULL), *target_node = NULL;
            PyObject *edge = NULL; /* the names are the nodes' own str objects */
            if (source && (target_node = node_named(nodes, &named, target, target_len, line, column, NULL)))
                edge = Py_BuildValue("(OOnn)", PyList_GET_ITEM(source, 0), PyList_GET_ITEM(target_node, 0), line, column);
            if (edge == NULL || PyList_Append(edges, edge) < 0) {
                Py_XDECREF(edge);
                goto done;
            }
            Py_DECREF(edge);
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
        PyObject *attrs = PyDict_New();
        int read = attrs == NULL ? -1 : read_attrs(attrs_from, attrs_to, attrs);
        if (read <= 0) {
            Py_XDECREF(attrs);
            if (read < 0) goto done;
            goto plain_no;
        }
        Py_ssize_t count = PyList_GET_SIZE(nodes);
        PyObject *node = node_named(nodes, &named, name, name_len, line, column, Py_NewRef(attrs));
        int status = node != NULL && PyList_GET_SIZE(nodes) > count ? 0 : -1; /* new: its attributes are these */
        if (node != NULL && status < 0) { /* named before (by an edge): these merged in, and this position */
            PyObject *where_line = PyLong_FromSsize_t(line), *where_column = PyLong_FromSsize_t(column);
            if (where_line != NULL && where_column != NULL && PyDict_Update(PyList_GET_ITEM(node, 1), attrs) == 0) {
                PyList_SetItem(node, 2, where_line); /* steals */
                PyList_SetItem(node, 3, where_column);
                where_line = where_column = NULL;
                status = 0;
            }
            Py_XDECREF(where_line);
            Py_XDECREF(where_column);
        }
        Py_DECREF(attrs);
        if (status < 0) goto done;
    }
plain_no:
    Py_CLEAR(out);
    out = Py_NewRef(Py_None);
done:
    text_cache_clear(&named);
    Py_XDECREF(nodes);
    Py_XDECREF(edges);
    return out;
}

static PyMethodDef methods[] = {
    {"plain_statements", plain_statements, METH_O, "The nodes and edges of a DOT file of FlexFlow's plain statements."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_dot", NULL, -1, methods};

PyMODINIT_FUNC PyInit__dot(void) { return PyModule_Create(&module); }
