/*
 * chakra._host_attrs: the attrs list of a host execution trace's node (grouped layout, a JSON list of
 * {"name", "type", "value"} objects), split in one pass over its JSON text into the core attributes
 * and the others, without an object per attribute (see chakra/pytorch/host.py).
 *
 * split_attrs(json, core) -> (core values, other (name, value) pairs) or None. `core` maps each core
 * name to the value a missing one means; a core value must be of its default's type (int or str).
 * Only the common forms are read here: names without escapes, string values without \uXXXX escapes,
 * integer values that fit 64 bits. Anything else (escapes, floats, lists, booleans, nulls, other keys, a core value of
 * another type, text that is not JSON) returns None: the caller reads the list with msgspec, which
 * settles it (or names the error).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_CORE 16

typedef struct {
    const char *p;
    const char *end;
} Scan;

static void skip_space(Scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t')) s->p++;
}

static int take(Scan *s, char c) {
    skip_space(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return 1;
    }
    return 0;
}

/* A string without escapes or control characters (names, keys): its UTF-8 span. 0 when it is not one. */
static int string_span(Scan *s, const char **start, Py_ssize_t *len) {
    if (!take(s, '"')) return 0;
    const char *from = s->p;
    while (s->p < s->end && *s->p != '"') {
        unsigned char c = (unsigned char)*s->p;
        if (c == '\\' || c < 0x20) return 0;
        s->p++;
    }
    if (s->p >= s->end) return 0;
    *start = from;
    *len = s->p - from;
    s->p++;
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

static PyObject *split_attrs(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    PyObject *defaults;
    if (!PyArg_ParseTuple(args, "y*O!", &view, &PyDict_Type, &defaults)) return NULL;
    Core core = {.count = 0};
    int set[MAX_CORE] = {0};
    PyObject *key, *fallback, *others = NULL, *result = NULL;
    Py_ssize_t pos = 0;
    if (PyDict_GET_SIZE(defaults) > MAX_CORE) {
        PyErr_Format(PyExc_ValueError, "split_attrs takes at most %d core attributes", MAX_CORE);
        goto done;
    }
    while (PyDict_Next(defaults, &pos, &key, &fallback)) {
        if (!PyUnicode_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "core attribute names must be str");
            goto done;
        }
        core.utf8[core.count] = PyUnicode_AsUTF8AndSize(key, &core.len[core.count]);
        if (!core.utf8[core.count]) goto done;
        core.value[core.count++] = fallback;
    }
    others = PyList_New(0);
    if (!others) goto done;
    Scan s = {(const char *)view.buf, (const char *)view.buf + view.len};
    int rc = 1;
    if (!take(&s, '[')) {
        rc = 0;
    } else if (!take(&s, ']')) {
        do {
            rc = attribute(&s, &core, others, set);
        } while (rc == 1 && take(&s, ','));
        if (rc == 1 && !take(&s, ']')) rc = 0;
    }
    if (rc == 1) {
        skip_space(&s);
        if (s.p != s.end) rc = 0;
    }
    if (rc == 1) {
        PyObject *values = PyTuple_New(core.count);
        PyObject *pairs = values ? PyList_AsTuple(others) : NULL;
        if (values && pairs) {
            for (Py_ssize_t k = 0; k < core.count; k++) {
                PyTuple_SET_ITEM(values, k, set[k] ? core.value[k] : Py_NewRef(core.value[k]));
                set[k] = 0; /* the tuple owns it now */
            }
            result = Py_BuildValue("NN", values, pairs);
        } else {
            Py_XDECREF(values);
            Py_XDECREF(pairs);
        }
    } else if (rc == 0) {
        result = Py_NewRef(Py_None);
    }
done:
    for (Py_ssize_t k = 0; k < core.count; k++)
        if (set[k]) Py_DECREF(core.value[k]);
    Py_XDECREF(others);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"split_attrs", split_attrs, METH_VARARGS,
     "split_attrs(json, core) -> (core values in core's order, other (name, value) pairs), or None for a "
     "form left to msgspec"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "chakra._host_attrs", NULL, -1, methods, NULL, NULL, NULL,
                                    NULL};

PyMODINIT_FUNC PyInit__host_attrs(void) { return PyModule_Create(&module); }
