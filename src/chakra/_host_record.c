/*
 * chakra._host_record: the fields of a host execution trace's node (grouped layout) that are read from
 * their JSON text in C, without an object per part (see chakra/pytorch/host.py).
 *
 * split_io(json, shared) -> (values, shapes, types, strides) or None. An `inputs`/`outputs` object's
 * lists, each its JSON text copied into bytes of its own ("[]", "[]", "[]", "null" for one that is
 * missing, and for a null object); shapes, types and strides, which repeat, are kept once in the dict
 * `shared` (text -> itself) and given from it. None for a form left to msgspec (an escaped or
 * repeated key, text that is not an object).
 *
 * The attrs list (a JSON list of {"name", "type", "value"} objects) is split into the core
 * attributes and the others:
 * split_attrs(json, core) -> (core values, other (name, value) pairs) or None. `core` maps each core
 * name to the value a missing one means; a core value must be of its default's type (int or str).
 * Only the common forms are read here: names without escapes, string values without \uXXXX escapes,
 * integer values that fit 64 bits. Anything else (escapes, floats, lists, booleans, nulls, other keys, a core value of
 * another type, text that is not JSON) returns None: the caller reads the list with msgspec, which
 * settles it (or names the error).
 *
 * host_nodes(records, core, extras, texts, strings, node_type, io_type) -> indices left: each grouped
 * record (msgspec's struct of a node, its attrs and IO objects kept as JSON text) replaced in place by
 * node_type(id=, name=, parent=, <core names>=, inputs=, outputs=, attrs=), its IO lists io_type(...)
 * from split_io and its attributes from split_attrs; names and other strings shared through `strings`,
 * IO texts through `texts`, the other attributes' (name, value) tuples through `extras` (each a dict of
 * a value to itself). The indices of the records of a form left to the Python path are returned.
 */
#include "_slots.h"

#include <stdint.h>
#include <string.h>

#define MAX_CORE 16

typedef struct {
    const char *p;
    const char *end;
} Scan;

/* Inlined: the scans below call these for every byte of structure (a third of the time otherwise). */
static inline __attribute__((always_inline)) void skip_space(Scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t')) s->p++;
}

static inline __attribute__((always_inline)) int take(Scan *s, char c) {
    skip_space(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return 1;
    }
    return 0;
}

/* Whether [from, to) holds a backslash or a control character. */
static inline int has_escape(const char *from, const char *to) {
    for (const char *p = from; p < to; p++)
        if (*p == '\\' || (unsigned char)*p < 0x20) return 1;
    return 0;
}

/* A string without escapes or control characters (names, keys): its UTF-8 span. 0 when it is not one. */
static int string_span(Scan *s, const char **start, Py_ssize_t *len) {
    if (!take(s, '"')) return 0;
    const char *from = s->p, *close = memchr(from, '"', (size_t)(s->end - from));
    if (close == NULL || has_escape(from, close)) return 0;
    *start = from;
    *len = close - from;
    s->p = close + 1;
    return 1;
}

/* An integer of at most 64 bits (JSON: no leading zeros), as a new int; NULL (no error) otherwise. */
static PyObject *integer(Scan *s) {
    const char *p = s->p;
    int negative = p < s->end && *p == '-';
    if (negative) p++;
    const char *digits = p;
    uint64_t value = 0;
    while (p < s->end && *p >= '0' && *p <= '9') {
        unsigned d = (unsigned)(*p - '0');
        if (value > (UINT64_MAX - d) / 10) return NULL;
        value = value * 10 + d;
        p++;
    }
    size_t n = (size_t)(p - digits);
    if (n == 0 || (n > 1 && *digits == '0')) return NULL;
    if (p < s->end && (*p == '.' || *p == 'e' || *p == 'E')) return NULL; /* a float */
    s->p = p;
    if (!negative) return PyLong_FromUnsignedLongLong(value);
    if (value > (uint64_t)INT64_MAX + 1) return NULL;
    return PyLong_FromLongLong(value == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)value);
}

/* The escapes read here, each with the character it stands for (\uXXXX is left to msgspec). */
static char unescaped(char c) {
    switch (c) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    default: return 0;
    }
}

/* A string value as a new str: escapes other than \uXXXX undone; NULL (no error set) otherwise. */
static PyObject *string_value(Scan *s) {
    const char *from = ++s->p; /* after the opening quote */
    int escaped = 0;
    while (s->p < s->end && *s->p != '"') {
        unsigned char c = (unsigned char)*s->p;
        if (c < 0x20) return NULL;
        if (c == '\\') {
            if (s->p + 1 >= s->end || !unescaped(s->p[1])) return NULL;
            escaped = 1;
            s->p++;
        }
        s->p++;
    }
    if (s->p >= s->end) return NULL;
    Py_ssize_t len = s->p - from;
    s->p++;
    PyObject *str;
    if (!escaped) {
        str = PyUnicode_DecodeUTF8(from, len, NULL);
    } else {
        char *text = PyMem_Malloc((size_t)len);
        if (!text) return PyErr_NoMemory();
        Py_ssize_t n = 0;
        for (const char *p = from; p < from + len; p++) text[n++] = *p == '\\' ? unescaped(*++p) : *p;
        str = PyUnicode_DecodeUTF8(text, n, NULL);
        PyMem_Free(text);
    }
    if (!str) PyErr_Clear(); /* not UTF-8: msgspec names the error */
    return str;
}

/* A value read here: a str or an int (new reference); NULL with no error set for other forms. */
static PyObject *value(Scan *s) {
    skip_space(s);
    if (s->p >= s->end) return NULL;
    return *s->p == '"' ? string_value(s) : integer(s);
}

static int key_is(const char *text, Py_ssize_t len, const char *key) {
    return (size_t)len == strlen(key) && memcmp(text, key, (size_t)len) == 0;
}

typedef struct {
    const char *utf8[MAX_CORE];
    Py_ssize_t len[MAX_CORE];
    PyObject *value[MAX_CORE]; /* the borrowed default, or the value read (owned: marked in `set`) */
    Py_ssize_t count;
} Core;

/* One {"name", "type", "value"} object: 1 read (into core, marking it in `set`, or others), 0 a form
 * left to msgspec, -1 an error (set). */
static int attribute(Scan *s, Core *core, PyObject *others, int *set) {
    if (!take(s, '{')) return 0;
    const char *name = NULL;
    Py_ssize_t name_len = 0;
    PyObject *val = NULL;
    int seen_type = 0, rc = 0;
    do {
        const char *key;
        Py_ssize_t key_len;
        if (!string_span(s, &key, &key_len) || !take(s, ':')) goto other;
        if (key_is(key, key_len, "name") && !name) {
            if (!string_span(s, &name, &name_len)) goto other;
        } else if (key_is(key, key_len, "type") && !seen_type) {
            const char *unused;
            Py_ssize_t unused_len;
            if (!string_span(s, &unused, &unused_len)) goto other;
            seen_type = 1;
        } else if (key_is(key, key_len, "value") && !val) {
            val = value(s);
            if (!val) goto other;
        } else {
            goto other; /* another key, or one given twice */
        }
    } while (take(s, ','));
    if (!take(s, '}') || !name || !val) goto other;
    for (Py_ssize_t k = 0; k < core->count; k++) {
        if (core->len[k] == name_len && memcmp(core->utf8[k], name, (size_t)name_len) == 0) {
            if (Py_TYPE(val) != Py_TYPE(core->value[k])) goto other; /* msgspec names the wrong kind */
            if (set[k]) Py_DECREF(core->value[k]);
            core->value[k] = val;
            set[k] = 1;
            return 1;
        }
    }
    PyObject *key = PyUnicode_DecodeUTF8(name, name_len, NULL);
    if (!key) {
        PyErr_Clear();
        goto other;
    }
    PyObject *pair = PyTuple_Pack(2, key, val);
    Py_DECREF(key);
    Py_DECREF(val);
    if (!pair) return -1;
    rc = PyList_Append(others, pair);
    Py_DECREF(pair);
    return rc < 0 ? -1 : 1;
other:
    Py_XDECREF(val);
    return 0;
}

/* The core names of `defaults` (name -> the value a missing one means) into `core`: 0, or -1 (set). */
static int core_of(PyObject *defaults, Core *core) {
    PyObject *key, *fallback;
    Py_ssize_t pos = 0;
    core->count = 0;
    if (PyDict_GET_SIZE(defaults) > MAX_CORE) {
        PyErr_Format(PyExc_ValueError, "at most %d core attributes", MAX_CORE);
        return -1;
    }
    while (PyDict_Next(defaults, &pos, &key, &fallback)) {
        if (!PyUnicode_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "core attribute names must be str");
            return -1;
        }
        core->utf8[core->count] = PyUnicode_AsUTF8AndSize(key, &core->len[core->count]);
        if (!core->utf8[core->count]) return -1;
        core->value[core->count++] = fallback;
    }
    return 0;
}

/* An attrs list read into `core` (values owned where marked in `set`; the caller releases them with
 * release_core, also after a failure) and `others` ((name, value) pairs): 1 read, 0 a form left to
 * msgspec, -1 an error (set). */
static int read_attrs(const char *text, Py_ssize_t len, Core *core, int *set, PyObject *others) {
    Scan s = {text, text + len};
    int rc = 1;
    if (!take(&s, '[')) return 0;
    if (!take(&s, ']')) {
        do {
            rc = attribute(&s, core, others, set);
        } while (rc == 1 && take(&s, ','));
        if (rc == 1 && !take(&s, ']')) rc = 0;
    }
    if (rc == 1) {
        skip_space(&s);
        if (s.p != s.end) rc = 0;
    }
    return rc;
}

static void release_core(Core *core, int *set) {
    for (Py_ssize_t k = 0; k < core->count; k++)
        if (set[k]) {
            Py_DECREF(core->value[k]);
            set[k] = 0;
        }
}

/* The core values in order as a tuple, the read ones moved into it: NULL on error (set). */
static PyObject *core_tuple(Core *core, int *set) {
    PyObject *values = PyTuple_New(core->count);
    if (!values) return NULL;
    for (Py_ssize_t k = 0; k < core->count; k++) {
        PyTuple_SET_ITEM(values, k, set[k] ? core->value[k] : Py_NewRef(core->value[k]));
        set[k] = 0; /* the tuple owns it now */
    }
    return values;
}

static PyObject *split_attrs(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    PyObject *defaults;
    if (!PyArg_ParseTuple(args, "y*O!", &view, &PyDict_Type, &defaults)) return NULL;
    Core core = {.count = 0};
    int set[MAX_CORE] = {0};
    PyObject *others = NULL, *result = NULL;
    if (core_of(defaults, &core) < 0 || !(others = PyList_New(0))) goto done;
    int rc = read_attrs((const char *)view.buf, view.len, &core, set, others);
    if (rc == 1) {
        PyObject *values = core_tuple(&core, set);
        PyObject *pairs = values ? PyList_AsTuple(others) : NULL;
        if (values && pairs) {
            result = Py_BuildValue("NN", values, pairs);
        } else {
            Py_XDECREF(values);
            Py_XDECREF(pairs);
        }
    } else if (rc == 0) {
        result = Py_NewRef(Py_None);
    }
done:
    release_core(&core, set);
    Py_XDECREF(others);
    PyBuffer_Release(&view);
    return result;
}

/* The texts a missing list stands for (constants made once: "[]" is a fifth of the lists). */
static PyObject *EMPTY_LIST, *NULL_VALUE;
#define MAX_NESTING 256
enum { IO_VALUES, IO_SHAPES, IO_TYPES, IO_STRIDES, IO_PARTS };
static const char *IO_KEYS[IO_PARTS] = {"values", "shapes", "types", "strides"};

/* Past one JSON value of text msgspec has checked: 0 at its end, -1 where the text is not one. */
static int skip_value(Scan *s, int depth) {
    skip_space(s);
    if (s->p >= s->end || depth > MAX_NESTING) return -1;
    char c = *s->p;
    if (c == '"') { /* to the first quote not escaped: one after an even run of backslashes */
        for (const char *p = s->p + 1;; p++) {
            const char *close = memchr(p, '"', (size_t)(s->end - p));
            if (close == NULL) return -1;
            const char *q = close;
            while (q > p && q[-1] == '\\') q--;
            p = close;
            if ((close - q) % 2 == 0) {
                s->p = close + 1;
                return 0;
            }
        }
    }
    if (c == '[' || c == '{') {
        char close = c == '[' ? ']' : '}';
        s->p++;
        if (take(s, close)) return 0;
        do {
            if (c == '{' && (skip_value(s, depth + 1) < 0 || !take(s, ':'))) return -1;
            if (skip_value(s, depth + 1) < 0) return -1;
        } while (take(s, ','));
        return take(s, close) ? 0 : -1;
    }
    const char *start = s->p; /* a number, true, false or null: up to the next delimiter */
    while (s->p < s->end && *s->p != ',' && *s->p != ']' && *s->p != '}' && *s->p != ' ' && *s->p != '\n' &&
           *s->p != '\r' && *s->p != '\t')
        s->p++;
    return s->p > start ? 0 : -1;
}

/* An `inputs`/`outputs` object's lists as new bytes into `parts` (see split_io): 1 read, 0 a form
 * left to msgspec, -1 an error (set). */
static int read_io(const char *text, Py_ssize_t size, PyObject *shared, PyObject *parts[IO_PARTS]) {
    Scan s = {text, text + size};
    const char *from[IO_PARTS] = {NULL};
    Py_ssize_t len[IO_PARTS] = {0};
    int ok = 1;
    skip_space(&s);
    if ((size_t)(s.end - s.p) >= 4 && memcmp(s.p, "null", 4) == 0) {
        s.p += 4; /* a null object: every list missing */
    } else if (!take(&s, '{')) {
        ok = 0;
    } else if (!take(&s, '}')) {
        do {
            const char *key;
            Py_ssize_t key_len;
            if (!string_span(&s, &key, &key_len) || !take(&s, ':')) {
                ok = 0;
                break;
            }
            skip_space(&s);
            const char *start = s.p;
            if (skip_value(&s, 0) < 0) {
                ok = 0;
                break;
            }
            for (int k = 0; k < IO_PARTS; k++) {
                if (key_is(key, key_len, IO_KEYS[k])) {
                    if (from[k]) ok = 0; /* given twice: msgspec settles which counts */
                    from[k] = start;
                    len[k] = s.p - start;
                }
            }
        } while (ok && take(&s, ','));
        if (ok && !take(&s, '}')) ok = 0;
    }
    if (ok) {
        skip_space(&s);
        if (s.p != s.end) ok = 0;
    }
    if (!ok) return 0;
    for (int k = 0; k < IO_PARTS; k++) {
        PyObject *part = from[k] ? PyBytes_FromStringAndSize(from[k], len[k])
                                 : Py_NewRef(k == IO_STRIDES ? NULL_VALUE : EMPTY_LIST);
        if (part && from[k] && k != IO_VALUES) { /* shapes, types, strides repeat: one object each */
            PyObject *known = PyDict_SetDefault(shared, part, part);
            if (known) Py_SETREF(part, Py_NewRef(known));
            else Py_CLEAR(part);
        }
        if (!part) {
            for (int j = 0; j < k; j++) Py_CLEAR(parts[j]);
            return -1;
        }
        parts[k] = part;
    }
    return 1;
}

static PyObject *split_io(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    PyObject *shared;
    if (!PyArg_ParseTuple(args, "y*O!", &view, &PyDict_Type, &shared)) return NULL;
    PyObject *parts[IO_PARTS] = {NULL};
    int rc = read_io((const char *)view.buf, view.len, shared, parts);
    PyBuffer_Release(&view);
    if (rc < 0) return NULL;
    if (rc == 0) return Py_NewRef(Py_None);
    PyObject *result = PyTuple_New(IO_PARTS);
    for (int k = 0; k < IO_PARTS; k++) {
        if (result) PyTuple_SET_ITEM(result, k, parts[k]);
        else Py_DECREF(parts[k]);
    }
    return result;
}

static PyObject *s_id, *s_name, *s_ctrl_deps, *s_inputs, *s_outputs, *s_attrs;

/* The object equal to `text` kept in `strings` (text -> itself): new reference, NULL on error. */
static PyObject *shared_str(PyObject *strings, PyObject *text) {
    PyObject *known = PyDict_SetDefault(strings, text, text);
    return known ? Py_NewRef(known) : NULL;
}

/* The dict of `pairs` ((name, value) tuples), the one kept in `extras` for equal pairs: new reference. */
static PyObject *shared_extras(PyObject *extras, PyObject *pairs) {
    PyObject *known = PyDict_GetItemWithError(extras, pairs);
    if (known) return Py_NewRef(known);
    if (PyErr_Occurred()) return NULL;
    PyObject *dict = PyDict_New();
    for (Py_ssize_t i = 0; dict && i < PyTuple_GET_SIZE(pairs); i++) {
        PyObject *pair = PyTuple_GET_ITEM(pairs, i);
        if (PyDict_SetItem(dict, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1)) < 0) Py_CLEAR(dict);
    }
    if (dict && PyDict_SetItem(extras, pairs, dict) < 0) Py_CLEAR(dict);
    return dict;
}

/* The IOLists of a record's `inputs`/`outputs` text: new reference; Py_None (new) for a form left to
 * msgspec; NULL on error. */
static PyObject *io_lists(PyObject *raw, PyObject *texts, PyObject *io_type) {
    Py_buffer view;
    if (PyObject_GetBuffer(raw, &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *parts[IO_PARTS] = {NULL};
    int rc = read_io((const char *)view.buf, view.len, texts, parts);
    PyBuffer_Release(&view);
    if (rc <= 0) return rc < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *lists = PyObject_Vectorcall(io_type, parts, IO_PARTS, NULL);
    for (int k = 0; k < IO_PARTS; k++) Py_DECREF(parts[k]);
    return lists;
}

typedef struct {
    Core core;
    PyObject *fallback[MAX_CORE]; /* what a missing core attribute means, borrowed from the defaults */
    PyObject *defaults, *extras, *texts, *strings, *node_type, *io_type, *kwnames;
} Records;

/* Record `raw` as a node (new reference); Py_None (new) for a form left to the Python path; NULL on
 * error. The node is node_type(id=, name=, parent=, <core names>=, inputs=, outputs=, attrs=). */
static PyObject *node_of(Records *r, PyObject *raw) {
    enum { ID, NAME, PARENT, CORE };
    PyObject *args[CORE + MAX_CORE + 3] = {NULL};
    Py_ssize_t n_args = CORE + r->core.count + 3, at = CORE + r->core.count;
    int set[MAX_CORE] = {0};
    PyObject *node = NULL, *text = NULL, *others = NULL, *pairs = NULL;
    Py_buffer view = {0};
    if (!(text = field(raw, s_attrs)) || PyObject_GetBuffer(text, &view, PyBUF_SIMPLE) < 0) goto done;
    if (!(others = PyList_New(0))) goto done;
    memcpy(r->core.value, r->fallback, sizeof r->fallback);
    int rc = read_attrs((const char *)view.buf, view.len, &r->core, set, others);
    if (rc <= 0) {
        node = rc < 0 ? NULL : Py_NewRef(Py_None);
        goto done;
    }
    for (Py_ssize_t k = 0; k < r->core.count; k++) {
        PyObject *value = set[k] ? r->core.value[k] : Py_NewRef(r->core.value[k]);
        set[k] = 0;
        args[CORE + k] = PyUnicode_CheckExact(value) ? shared_str(r->strings, value) : Py_NewRef(value);
        Py_DECREF(value);
        if (!args[CORE + k]) goto done;
    }
    for (int k = 0; k < 2; k++) {
        PyObject *io = field(raw, k == 0 ? s_inputs : s_outputs);
        args[at + k] = io ? io_lists(io, r->texts, r->io_type) : NULL;
        Py_XDECREF(io);
        if (!args[at + k]) goto done;
        if (args[at + k] == Py_None) {
            node = Py_NewRef(Py_None);
            goto done;
        }
    }
    if (!(pairs = PyList_AsTuple(others)) || !(args[at + 2] = shared_extras(r->extras, pairs))) goto done;
    PyObject *name = field(raw, s_name);
    args[NAME] = name ? shared_str(r->strings, name) : NULL;
    Py_XDECREF(name);
    if (!args[NAME] || !(args[ID] = field(raw, s_id)) || !(args[PARENT] = field(raw, s_ctrl_deps))) goto done;
    node = PyObject_Vectorcall(r->node_type, args, 0, r->kwnames);
done:
    release_core(&r->core, set);
    for (Py_ssize_t k = 0; k < n_args; k++) Py_XDECREF(args[k]);
    if (view.obj) PyBuffer_Release(&view);
    Py_XDECREF(text);
    Py_XDECREF(others);
    Py_XDECREF(pairs);
    return node;
}

static PyObject *host_nodes(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *records, *left = NULL;
    Records r = {.kwnames = NULL};
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!OO", &PyList_Type, &records, &PyDict_Type, &r.defaults, &PyDict_Type,
                          &r.extras, &PyDict_Type, &r.texts, &PyDict_Type, &r.strings, &r.node_type, &r.io_type))
        return NULL;
    if (core_of(r.defaults, &r.core) < 0) return NULL;
    memcpy(r.fallback, r.core.value, sizeof r.fallback);
    /* keywords: id, name, parent, the core names in the defaults' order, inputs, outputs, attrs */
    if (!(r.kwnames = PyTuple_New(3 + r.core.count + 3))) return NULL;
    const char *fixed[] = {"id", "name", "parent", "inputs", "outputs", "attrs"};
    PyObject *key, *unused;
    Py_ssize_t pos = 0, at = 3;
    for (int k = 0; k < 6; k++) {
        PyObject *word = PyUnicode_InternFromString(fixed[k]);
        if (!word) goto done;
        PyTuple_SET_ITEM(r.kwnames, k < 3 ? k : 3 + r.core.count + (k - 3), word);
    }
    while (PyDict_Next(r.defaults, &pos, &key, &unused)) PyTuple_SET_ITEM(r.kwnames, at++, Py_NewRef(key));
    if (!(left = PyList_New(0))) goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(records); i++) {
        PyObject *node = node_of(&r, PyList_GET_ITEM(records, i));
        if (!node) {
            Py_CLEAR(left);
            goto done;
        }
        if (node == Py_None) {
            Py_DECREF(node);
            PyObject *index = PyLong_FromSsize_t(i);
            int rc = index ? PyList_Append(left, index) : -1;
            Py_XDECREF(index);
            if (rc < 0) {
                Py_CLEAR(left);
                goto done;
            }
        } else {
            PyList_SetItem(records, i, node); /* frees the record: the peak holds one form at a time */
        }
    }
done:
    Py_XDECREF(r.kwnames);
    return left;
}

static PyMethodDef methods[] = {
    {"split_io", split_io, METH_VARARGS,
     "split_io(json, shared) -> (values, shapes, types, strides) as bytes of JSON text (shapes, types and strides "
     "equal to one in the dict shared are that one), or None for a form left to msgspec"},
    {"host_nodes", host_nodes, METH_VARARGS,
     "host_nodes(records, core, extras, texts, strings, node_type, io_type) -> indices left: each grouped record "
     "replaced in place by its node, but those of a form left to Python"},
    {"split_attrs", split_attrs, METH_VARARGS,
     "split_attrs(json, core) -> (core values in core's order, other (name, value) pairs), or None for a "
     "form left to msgspec"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "chakra._host_record", NULL, -1, methods, NULL, NULL, NULL,
                                    NULL};

PyMODINIT_FUNC PyInit__host_record(void) {
    EMPTY_LIST = PyBytes_FromStringAndSize("[]", 2);
    NULL_VALUE = PyBytes_FromStringAndSize("null", 4);
    if (!EMPTY_LIST || !NULL_VALUE) return NULL;
    static const Interned names[] = {{&s_id, "id"},         {&s_name, "name"},       {&s_ctrl_deps, "ctrl_deps"},
                                     {&s_inputs, "inputs"}, {&s_outputs, "outputs"}, {&s_attrs, "attrs"}};
    if (intern_all(names, sizeof names / sizeof names[0]) < 0) return NULL;
    return PyModule_Create(&module);
}
